/*
 * im2col + GEMM: each item's input is copied into a strip that repeats every
 * input element k*k times (one row per (channel, i, j), NR positions per
 * tile), and the same microkernels sweep it as a GEMM (kernel view k = 1,
 * channel stride NR, c_steps*k*k contraction rows). It holds k*k times the
 * shift-reduce panel for the same item, which is why auto tries it last.
 */
#include <stdio.h>

#include "../pack.h"
#include "algo.h"

static const char *cp_im2col_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                      size_t capacity) {
  (void)layer, (void)cpu, (void)why, (void)capacity;
  return NULL; /* every layer of the contract */
}

static int cp_im2col_geometry(cp_plan *pl, int64_t conv_rows_, int64_t cw) {
  const size_t nr = (size_t)pl->uk->nr, mr = (size_t)pl->uk->mr, k = (size_t)pl->k;
  const size_t es = sizeof(float), conv_rows = (size_t)conv_rows_;
  size_t rows, n;
  if (!cp_add(conv_rows, k - 1, &rows)) return 0;
  /* Flat tiles run over the positions row after row with no halo. */
  const size_t flat_tiles = (conv_rows * (size_t)cw + nr - 1) / nr;
  const size_t row_tiles = conv_rows * (((size_t)cw + nr - 1) / nr);
  pl->flat = flat_tiles < row_tiles;
  pl->tiles = pl->flat ? flat_tiles : row_tiles;
  pl->panel_rows = (int64_t)rows, pl->panel_ld = 0, pl->panel_cs = nr;
  if (!cp_mul((size_t)pl->c_steps, k * k, &n) || !cp_mul(n, nr, &n) ||
      !cp_mul(n, pl->tiles, &pl->panel_floats) || !cp_mul(pl->panel_floats, es, &pl->panel_bytes))
    return 0;
  pl->buf_row_ld = pl->flat ? (size_t)cw : cp_round_up((size_t)cw, nr);
  pl->buf_cols = pl->flat ? pl->tiles * nr : conv_rows * pl->buf_row_ld;
  return cp_mul(pl->buf_cols, mr * es, &pl->buf_bytes);
}

static void cp_im2col_pack_item(const cp_run *r, cp_item *it, float *panel) {
  cp_pack_im2col(r, it, panel);
}

static void cp_im2col_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                    int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const float *w = r->packed + (size_t)cb * (pl->weight_block_bytes / sizeof(float));
  const cp_sr_ukernel_fn kernel = cb + 1 == pl->co_blocks ? pl->uk_tail->fn : pl->uk->fn;
  const size_t nr = (size_t)pl->uk->nr, conv_rows = (size_t)it->ny;
  const size_t kdim = (size_t)pl->c_steps * (size_t)(pl->k * pl->k);
  const size_t per_row = ((size_t)it->nx + nr - 1) / nr;
  for (size_t t = 0; t < pl->tiles; t++) {
    if (!pl->flat && t / per_row >= conv_rows) break;
    if (pl->flat && t * nr >= conv_rows * pl->buf_row_ld) break;
    float *tile =
        pl->flat ? buf + t * nr : buf + (t / per_row) * pl->buf_row_ld + (t % per_row) * nr;
    kernel(panel + t * kdim * nr, nr, 0, kdim, 1, w, tile, pl->buf_cols);
  }
}

static void cp_im2col_describe(const cp_plan *pl, char *text, size_t capacity) {
  snprintf(text, capacity, "im2col strip of %zu tiles (%s); sweep %s", pl->tiles,
           pl->uk->cpack == 2 ? "bf16 channel pairs" : "fp32",
           pl->flat ? "flat over rows (narrow rows)" : "per conv row");
}

const cp_algorithm cp_algorithm_im2col = {
    .name = "im2col + GEMM",
    .id = CONVPOOL_ALGO_IM2COL,
    .cli = "im2col",
    .declines = cp_im2col_declines,
    .setup = cp_setup_sr_kernels,
    .pack_weights = cp_pack_weights_blocked,
    .geometry = cp_im2col_geometry,
    .pack_item = cp_im2col_pack_item,
    .compute_block = cp_im2col_compute_block,
    .describe = cp_im2col_describe,
};
