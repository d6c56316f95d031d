/* The driver (see driver.h). */
#define _POSIX_C_SOURCE 200809L
#include "driver.h"

#include <string.h>
#include <time.h>

#include "algo/algo.h"

double cp_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The conv extent [*lo, *hi) of pooled outputs [q, q + n) along a side. */
static void cp_conv_span(int64_t q, int64_t n, int64_t pool, int64_t stride, int64_t pad,
                         int64_t conv, int64_t *lo, int64_t *count) {
  int64_t a = q * stride - pad, b = (q + n - 1) * stride - pad + pool;
  if (a < 0) a = 0;
  if (b > conv) b = conv;
  *lo = a, *count = b - a;
}

cp_item cp_item_of(const cp_plan *pl, int64_t item) {
  cp_item it;
  const int64_t cg = item % pl->co_groups;
  item /= pl->co_groups;
  const int64_t cbk = item % pl->col_blocks;
  item /= pl->col_blocks;
  const int64_t rg = item % pl->row_groups;
  it.b = item / pl->row_groups;
  it.q0 = rg * pl->group;
  it.nq = pl->ph - it.q0 < pl->group ? pl->ph - it.q0 : pl->group;
  it.c0 = cbk * pl->col_block;
  it.nc = pl->pw - it.c0 < pl->col_block ? pl->pw - it.c0 : pl->col_block;
  cp_conv_span(it.q0, it.nq, pl->pool, pl->stride, pl->pool_pad[CP_TOP], pl->oh, &it.y0, &it.ny);
  cp_conv_span(it.c0, it.nc, pl->pool, pl->stride, pl->pool_pad[CP_LEFT], pl->ow, &it.x0, &it.nx);
  it.cb0 = cg * pl->co_blocks_per_group;
  it.cb1 = it.cb0 + pl->co_blocks_per_group < pl->co_blocks ? it.cb0 + pl->co_blocks_per_group
                                                            : pl->co_blocks;
  it.flags = 0;
  return it;
}

/* One work item: pack, then compute and pool each channel block. */
static void cp_run_item(void *context, int64_t index, int thread) {
  const cp_run *r = context;
  const cp_plan *pl = r->pl;
  const cp_algorithm *algo = pl->algo;
  cp_item it = cp_item_of(pl, index);
  unsigned char *scratch = r->scratch + (size_t)thread * pl->scratch_bytes;
  float *panel = (float *)scratch;
  float *buf = (float *)(scratch + cp_round_up(pl->panel_bytes, CP_CACHE_LINE));
  float *row = (float *)((unsigned char *)buf + cp_round_up(pl->buf_bytes, CP_CACHE_LINE));
  cp_phase_times *times = &r->times[thread];

  double t0 = cp_seconds();
  algo->pack_item(r, &it, panel);
  double t1 = cp_seconds();
  times->pack += t1 - t0;

  const size_t mr = (size_t)pl->uk->mr;
  for (int64_t cb = it.cb0; cb < it.cb1; cb++) {
    algo->compute_block(r, &it, panel, cb, buf);
    double t2 = cp_seconds();
    times->compute += t2 - t1;
    const size_t co0 = (size_t)cb * mr;
    const size_t channels = (size_t)pl->c_out - co0 < mr ? (size_t)pl->c_out - co0 : mr;
    cp_epilogue_item(r->epilogue, pl, &it, buf, row, co0, channels, r->dst);
    t1 = cp_seconds();
    times->epilogue += t1 - t2;
  }
}

void cp_driver_run(cp_threadpool *pool, const cp_run *r, convpool_run_stats *stats) {
  const int threads = cp_threadpool_threads(pool);
  memset(r->times, 0, (size_t)threads * sizeof *r->times);
  const int used = cp_threadpool_run(pool, cp_run_item, (void *)r, r->pl->items);
  for (int t = 0; t < threads; t++) {
    stats->pack_seconds += r->times[t].pack;
    stats->compute_seconds += r->times[t].compute;
    stats->epilogue_seconds += r->times[t].epilogue;
  }
  stats->items = r->pl->items;
  stats->threads = used;
}
