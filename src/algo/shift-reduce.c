/*
 * Shift-reduce: the item's input window is copied once into an fp32 panel
 * (bf16 channel pairs for the pair kernels); the microkernel reads shifted
 * rows of it, so the im2col happens in registers. Tiles run per conv row, or
 * flat over the rows when rows are narrow (fewer tiles; the columns that run
 * into the k-1 halo are computed and discarded).
 */
#include <stdio.h>

#include "../pack.h"
#include "algo.h"

static const char *cp_sr_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                  size_t capacity) {
  (void)layer, (void)cpu, (void)why, (void)capacity;
  return NULL; /* every layer of the contract */
}

/* Panels are fp32 for every dtype, so one kernel family serves them all;
   bfloat16 uses its pair dot-product kernels where the CPU has them. */
convpool_status cp_setup_sr_kernels(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *s) {
  s->uk = NULL;
  if (layer->dtype == CONVPOOL_BFLOAT16) s->uk = cp_sr_ukernel_select(CONVPOOL_BFLOAT16, cpu->isa);
  if (s->uk == NULL) s->uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, cpu->isa);
  if (s->uk == NULL)
    return cp_fail(CONVPOOL_UNSUPPORTED, "no %s kernel for isa %s",
                   convpool_dtype_name(layer->dtype), cp_isa_name(cpu->isa));
  s->uk_tail = cp_sr_ukernel_tail(s->uk, (int)(layer->c_out % s->uk->mr));
  if (!cp_size_weights_blocked(layer, s))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, %lld, %lld] have a byte count that overflows",
                   (long long)layer->c_out, (long long)layer->c_in, (long long)layer->k,
                   (long long)layer->k);
  return CONVPOOL_SUCCESS;
}

static int cp_sr_geometry(cp_plan *pl, int64_t conv_rows_, int64_t cw) {
  const size_t nr = (size_t)pl->uk->nr, mr = (size_t)pl->uk->mr, k = (size_t)pl->k;
  const size_t es = sizeof(float), line = CP_CACHE_LINE / sizeof(float);
  const size_t conv_rows = (size_t)conv_rows_;
  size_t rows, ld, cs, n;
  if (!cp_add(conv_rows, k - 1, &rows)) return 0;
  ld = (size_t)cw + k - 1;
  if (!cp_mul(rows, ld, &cs)) return 0;
  /* An odd number of cache lines between channels spreads the c_in row
     streams over every L1 set instead of piling them on a few. */
  cs = cp_round_up(cs, line);
  if ((cs / line) % 2 == 0) cs += line;
  if (!cp_mul((size_t)pl->c_steps, cs, &n) || !cp_add(n, 2 * nr, &n)) return 0;
  pl->panel_rows = (int64_t)rows, pl->panel_ld = ld, pl->panel_cs = cs, pl->panel_floats = n;
  if (!cp_mul(n, es, &pl->panel_bytes)) return 0;
  const size_t flat_len = (conv_rows - 1) * ld + (size_t)cw;
  const size_t flat_tiles = (flat_len + nr - 1) / nr;
  const size_t row_tiles = conv_rows * (((size_t)cw + nr - 1) / nr);
  pl->flat = flat_tiles < row_tiles;
  pl->tiles = pl->flat ? flat_tiles : row_tiles;
  pl->buf_row_ld = pl->flat ? ld : cp_round_up((size_t)cw, nr);
  pl->buf_cols = pl->flat ? flat_tiles * nr : conv_rows * pl->buf_row_ld;
  return cp_mul(pl->buf_cols, mr * es, &pl->buf_bytes);
}

static void cp_sr_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  const size_t k = (size_t)pl->k;
  cp_pack_panel(r, it->b, it->y0 - pl->pad[CP_TOP], (size_t)it->ny + k - 1,
                it->x0 - pl->pad[CP_LEFT], (size_t)it->nx + k - 1, panel);
}

static void cp_sr_compute_block(const cp_run *r, const cp_item *it, const float *panel, int64_t cb,
                                float *buf) {
  const cp_plan *pl = r->pl;
  const float *w = r->packed + (size_t)cb * (pl->weight_block_bytes / sizeof(float));
  const cp_sr_ukernel_fn kernel = cb + 1 == pl->co_blocks ? pl->uk_tail->fn : pl->uk->fn;
  const size_t nr = (size_t)pl->uk->nr, ld = pl->panel_ld, conv_rows = (size_t)it->ny;
  const size_t cs = pl->panel_cs, steps = (size_t)pl->c_steps, k = (size_t)pl->k;
  if (pl->flat) {
    const size_t len = (conv_rows - 1) * ld + (size_t)it->nx;
    for (size_t t = 0; t < len; t += nr)
      kernel(panel + t, cs, ld, steps, k, w, buf + t, pl->buf_cols);
  } else {
    for (size_t y = 0; y < conv_rows; y++)
      for (size_t t = 0; t < (size_t)it->nx; t += nr)
        kernel(panel + y * ld + t, cs, ld, steps, k, w, buf + y * pl->buf_row_ld + t, pl->buf_cols);
  }
}

static void cp_sr_describe(const cp_plan *pl, char *text, size_t capacity) {
  snprintf(text, capacity, "%s; sweep %s", pl->uk->cpack == 2 ? "bf16 channel pairs" : "fp32",
           pl->flat ? "flat over rows (narrow rows)" : "per conv row");
}

const cp_algorithm cp_algorithm_shift_reduce = {
    .name = "shift-reduce",
    .id = CONVPOOL_ALGO_SHIFT_REDUCE,
    .cli = "sr",
    .declines = cp_sr_declines,
    .setup = cp_setup_sr_kernels,
    .pack_weights = cp_pack_weights_blocked,
    .geometry = cp_sr_geometry,
    .pack_item = cp_sr_pack_item,
    .compute_block = cp_sr_compute_block,
    .describe = cp_sr_describe,
};
