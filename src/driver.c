/* The driver (see driver.h). */
#define _POSIX_C_SOURCE 200809L
#include "driver.h"

#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "algo/algo.h"

/*
 * A cheap tick count for splitting an item's time between its blocks'
 * compute and epilogue: the time-stamp counter where there is one (a few
 * nanoseconds; clock_gettime costs ~40 ns in a VM, two per channel block,
 * which was half the time of a depthwise 7x7 block). Only ratios of ticks
 * are used, so their rate does not matter. Elsewhere the clock itself.
 */
static inline double cp_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return (double)__rdtsc();
#else
  return cp_seconds();
#endif
}

double cp_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The epilogue of one channel block of an item: `channels` output channels
 * from co0, whose conv region (the item's) is in the tile buffer, with the
 * same region of the residual when there is one; `row` is per-thread
 * scratch of the plan's row_bytes. Rows of full windows go to the
 * epilogue's row function, others (pool padding, ceil sizing) to its
 * clipped row function.
 */
static void cp_epilogue_item(const cp_epilogue *e, const cp_plan *pl, const cp_item *it,
                             const float *buf, float *row, size_t co0, size_t channels,
                             const unsigned char *residual, void *dst) {
  const cp_epilogue_params *p = &e->params;
  const int64_t P = pl->pool, S = pl->stride;
  const size_t pw = (size_t)pl->pw, plane = (size_t)pl->ph * pw, es = pl->elem_size;
  const size_t ow = (size_t)pl->ow, conv_plane = (size_t)pl->oh * ow;
  /* columns: the same windows for every row of the item */
  const size_t off = (size_t)(it->x0 - (it->c0 * S - pl->pool_pad[CP_LEFT]));
  const int full_cols = off == 0 && (it->nc - 1) * S + P <= it->nx;
  unsigned char *out0 = (unsigned char *)dst + (((size_t)it->b * (size_t)pl->c_out + co0) * plane +
                                                (size_t)it->q0 * pw + (size_t)it->c0) *
                                                   es;
  /* Pool 1 of stride 1 over whole rows that lie compact in the buffer: a
     channel's rows are one run in the buffer, in dst and in the residual
     (the conv output's size with pool 1), computed by one call of a compact
     row, which needs no scratch (the other rows use the row scratch, sized
     for one row). */
  if (e->compact && P == 1 && S == 1 && it->nc == (int64_t)pw && pl->buf_row_ld == pw) {
    const size_t n = (size_t)it->nq * pw;
    cp_pool_row r = {NULL, pl->buf_row_ld, 1, n, 0, n, row, NULL, ow};
    const unsigned char *res =
        residual == NULL ? NULL
                         : residual + (((size_t)it->b * (size_t)pl->c_out + co0) * conv_plane +
                                       (size_t)it->q0 * ow) *
                                          es;
    for (size_t m = 0; m < channels; m++) {
      r.src = buf + m * pl->buf_cols + (size_t)(it->q0 - it->y0) * pl->buf_row_ld;
      if (res != NULL) r.res = res + m * conv_plane * es;
      e->row(p, &r, p->bias != NULL ? &p->bias[co0 + m] : NULL, out0 + m * plane * es);
    }
    return;
  }
  for (int64_t q = 0; q < it->nq; q++) {
    int64_t top = (it->q0 + q) * S - pl->pool_pad[CP_TOP], bottom = top + P;
    if (top < 0) top = 0;
    if (bottom > pl->oh) bottom = pl->oh;
    const cp_epilogue_row_fn fn = full_cols && bottom - top == P ? e->row : e->row_clipped;
    cp_pool_row r = {NULL,
                     pl->buf_row_ld,
                     (size_t)(bottom - top),
                     (size_t)it->nx,
                     off,
                     (size_t)it->nc,
                     row,
                     NULL,
                     ow};
    const unsigned char *res =
        residual == NULL ? NULL
                         : residual + (((size_t)it->b * (size_t)pl->c_out + co0) * conv_plane +
                                       (size_t)top * ow + (size_t)it->x0) *
                                          es;
    for (size_t m = 0; m < channels; m++) {
      r.src = buf + m * pl->buf_cols + (size_t)(top - it->y0) * pl->buf_row_ld;
      if (res != NULL) r.res = res + m * conv_plane * es;
      fn(p, &r, p->bias != NULL ? &p->bias[co0 + m] : NULL,
         out0 + (m * plane + (size_t)q * pw) * es);
    }
  }
}

/* The same for a block left channels in lanes (`lanes` per position): each
   pooled row of the item (or, pool 1 over whole rows, all of them) once
   for all the block's channels. */
static void cp_epilogue_item_lanes(const cp_epilogue *e, const cp_plan *pl, const cp_item *it,
                                   const float *buf, size_t lanes, size_t co0, size_t channels,
                                   const unsigned char *residual, void *dst) {
  const cp_epilogue_params *p = &e->params;
  const int64_t P = pl->pool, S = pl->stride;
  const size_t pw = (size_t)pl->pw, plane = (size_t)pl->ph * pw, es = pl->elem_size;
  const size_t nx = (size_t)it->nx, ow = (size_t)pl->ow, conv_plane = (size_t)pl->oh * ow;
  unsigned char *out0 = (unsigned char *)dst + (((size_t)it->b * (size_t)pl->c_out + co0) * plane +
                                                (size_t)it->q0 * pw + (size_t)it->c0) *
                                                   es;
  cp_lanes_row r = {NULL,
                    nx,
                    lanes,
                    channels,
                    0,
                    nx,
                    (size_t)(it->x0 - (it->c0 * S - pl->pool_pad[CP_LEFT])),
                    (size_t)it->nc,
                    p->bias != NULL ? p->bias + co0 : NULL,
                    NULL,
                    plane,
                    NULL,
                    conv_plane};
  /* pool 1 of stride 1 over whole conv rows: the item's outputs lie
     contiguous in buf, dst and the residual, one row of them */
  const int whole = P == 1 && S == 1 && (int64_t)nx == pl->ow;
  const int64_t calls = whole ? 1 : it->nq;
  if (whole) r.n = r.cols = nx * (size_t)it->nq;
  for (int64_t q = 0; q < calls; q++) {
    int64_t top = (it->q0 + q) * S - pl->pool_pad[CP_TOP], bottom = top + P;
    if (top < 0) top = 0;
    if (bottom > pl->oh) bottom = pl->oh;
    r.src = buf + (size_t)(top - it->y0) * nx * lanes;
    r.rows = (size_t)(bottom - top);
    r.dst = out0 + (size_t)q * pw * es;
    if (residual != NULL) /* pool 1 (epilogue.h): the conv outputs of the row */
      r.res = residual + (((size_t)it->b * (size_t)pl->c_out + co0) * conv_plane +
                          (size_t)top * ow + (size_t)it->x0) *
                             es;
    e->lanes_row(p, &r);
  }
}

/* A round of the run (plan.h: shared regions): its regions' first phase
   item and first work item. */
typedef struct cp_round {
  const cp_run *r;
  int64_t prepare0, item0;
} cp_round;

/* One work item: pack, then compute and pool each channel block. */
static void cp_run_item(void *context, int64_t index, int thread) {
  const cp_round *round = context;
  const cp_run *r = round->r;
  const cp_plan *pl = r->pl;
  const cp_algorithm *algo = pl->algo;
  cp_item it = cp_item_of(pl, round->item0 + index);
  unsigned char *scratch = r->scratch + (size_t)thread * pl->scratch_bytes;
  float *panel = (float *)scratch;
  float *buf = (float *)(scratch + cp_round_up(pl->panel_bytes, CP_CACHE_LINE));
  float *row = (float *)((unsigned char *)buf + cp_round_up(pl->buf_bytes, CP_CACHE_LINE));
  cp_phase_times *times = &r->times[thread];

  const double t0 = cp_seconds();
  const float *input = algo->pack_item(r, &it, panel);
  const double t1 = cp_seconds();
  times->pack += t1 - t0;

  /* the blocks' wall time, split between compute and epilogue by the ticks
     of every 8th block (the blocks of an item are alike) */
  double compute = 0.0, epilogue = 0.0;
  const size_t lanes = cp_run_lanes(r);
  for (int64_t cb = it.cb0; cb < it.cb1; cb++) {
    const int sample = ((cb - it.cb0) & 7) == 0;
    const double k1 = sample ? cp_ticks() : 0.0;
    const float *block = algo->compute_block(r, &it, input, cb, buf);
    const double k2 = sample ? cp_ticks() : 0.0;
    size_t co0, channels;
    cp_block_channels(pl, cb, &co0, &channels);
    if (block != NULL)                      /* NULL: the kernels finished the block in dst */
      for (int64_t j = 0; j < it.nb; j++) { /* each image of the item (plan.h: images) */
        cp_item one = it;
        one.b = it.b + j, one.nb = 1;
        if (lanes > 0)
          cp_epilogue_item_lanes(r->epilogue, pl, &one,
                                 block + (size_t)j * pl->buf_image_cols * lanes, lanes, co0,
                                 channels, r->residual, r->dst);
        else
          cp_epilogue_item(r->epilogue, pl, &one, block + (size_t)j * pl->buf_image_cols, row, co0,
                           channels, r->residual, r->dst);
      }
    if (sample) compute += k2 - k1, epilogue += cp_ticks() - k2;
  }
  const double wall = cp_seconds() - t1, ticks = compute + epilogue;
  const double share = ticks > 0.0 ? compute / ticks : 1.0;
  times->compute += wall * share;
  times->epilogue += wall * (1.0 - share);
}

/* One work item of the algorithm's phase before the items (timed as packing). */
static void cp_prepare_item(void *context, int64_t index, int thread) {
  const cp_round *round = context;
  const cp_run *r = round->r;
  const double t0 = cp_seconds();
  r->pl->algo->prepare(r, round->prepare0 + index);
  r->times[thread].pack += cp_seconds() - t0;
}

void cp_driver_run(cp_threadpool *pool, const cp_run *r, convpool_run_stats *stats) {
  const cp_plan *pl = r->pl;
  const int threads = cp_threadpool_threads(pool);
  memset(r->times, 0, (size_t)threads * sizeof *r->times);
  int used = 0;
  /* rounds of regions: the phase's items of the round (its end is a
     barrier), then the round's items; without a phase, one round */
  const int64_t regions = pl->items / pl->co_groups;
  const int64_t per_round = pl->prepare_items > 0 ? pl->round_regions : regions;
  const int64_t per_region = pl->prepare_items > 0 ? pl->prepare_items / regions : 0;
  for (int64_t first = 0; first < regions; first += per_round) {
    const int64_t n = regions - first < per_round ? regions - first : per_round;
    cp_round round = {r, first * per_region, first * pl->co_groups};
    if (per_region > 0) {
      const int t = cp_threadpool_run(pool, cp_prepare_item, &round, n * per_region);
      if (t > used) used = t;
    }
    const int t = cp_threadpool_run(pool, cp_run_item, &round, n * pl->co_groups);
    if (t > used) used = t;
  }
  for (int t = 0; t < threads; t++) {
    stats->pack_seconds += r->times[t].pack;
    stats->compute_seconds += r->times[t].compute;
    stats->epilogue_seconds += r->times[t].epilogue;
  }
  stats->items = pl->items;
  stats->threads = used;
}
