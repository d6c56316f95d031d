/*
 * The epilogue's vector rows (AVX2 and AVX-512, as far as the CPU runs them)
 * against the portable row, byte for byte: every window and stride up to 4,
 * with and without a residual (in the dtype of dst), full and clipped rows,
 * every store kind, bias or none, every activation clamp, rows of random
 * values with NaN, +-Inf, +-0 and values on the clamp bounds, every length
 * up to three vectors and a tail; the lanes row (a block's channels in
 * the lanes of each position; a residual with pool 1) against the portable
 * row of each channel. A
 * vector row that differs from the
 * portable one would make a result depend on which items (so which thread
 * count) clip a window.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "cpu.h"
#include "epilogue/epilogue.h"
#include "testutil.h"

static int failures, rows_checked;

static float special(tu_rng *rng, float lo, float hi) {
  switch ((int)(tu_uniform(rng) * 12.0)) {
    case 0:
      return NAN;
    case 1:
      return INFINITY;
    case 2:
      return -INFINITY;
    case 3:
      return 0.0f;
    case 4:
      return -0.0f;
    case 5:
      return lo;
    case 6:
      return hi;
    default:
      return (float)(16.0 * tu_uniform(rng) - 8.0);
  }
}

/* Values of a residual row in the dtype of dst (its bits from fp32). */
static void residual_values(convpool_dtype dtype, const float *v, void *to, size_t n) {
  if (dtype == CONVPOOL_FLOAT32)
    memcpy(to, v, n * sizeof(float));
  else
    cp_narrow_select(dtype, CP_ISA_SCALAR)(v, (uint16_t *)to, n);
}

/* Row fn of vec on a row of `rows` window rows of `cols` columns (ld
   apart), `off` padding columns before the first, n outputs, with a
   residual when the params have one, against the portable row. */
static void compare_row(const cp_epilogue *vec, cp_epilogue_row_fn fn, const char *what,
                        convpool_dtype dtype, size_t rows, size_t off, size_t cols, size_t n,
                        tu_rng *rng) {
  const size_t ld = cols + 5;
  float src[4 * 220], res_f[4 * 220], tmp_a[600], tmp_b[600];
  uint32_t res[4 * 220];
  unsigned char want[256], got[256];
  for (size_t i = 0; i < rows * ld; i++) {
    src[i] = special(rng, vec->params.min, vec->params.max);
    res_f[i] = special(rng, vec->params.min, vec->params.max);
  }
  residual_values(dtype, res_f, res, rows * ld);
  const float bias_value = (float)(4.0 * tu_uniform(rng) - 2.0);
  const float *bias = tu_uniform(rng) < 0.5 ? &bias_value : NULL;
  cp_pool_row a = {.src = src,
                   .ld = ld,
                   .rows = rows,
                   .cols = cols,
                   .off = off,
                   .n = n,
                   .tmp = tmp_a,
                   .res = vec->params.residual ? (const void *)res : NULL,
                   .res_ld = ld};
  cp_pool_row b = a;
  b.tmp = tmp_b;
  memset(want, 0xa5, sizeof want);
  memset(got, 0xa5, sizeof got);
  cp_epilogue_row_portable(&vec->params, &a, bias, want);
  fn(&vec->params, &b, bias, got);
  rows_checked++;
  if (memcmp(want, got, sizeof want) != 0) {
    failures++;
    fprintf(stderr,
            "FAIL: %s %s pool %zu stride %zu rows %zu off %zu n %zu cols %zu store %d residual %d "
            "clamp [%g, %g] bias %s differs\n",
            vec->name, what, vec->params.pool, vec->params.stride, rows, off, n, cols,
            (int)vec->params.store, vec->params.residual, (double)vec->params.min,
            (double)vec->params.max, bias ? "yes" : "no");
  }
}

/* A compact run (e->compact: pool 1 of stride 1 over a channel's rows end
   to end): n values of one window row in one call, longer than the row
   functions' stack chunks, against the portable row on the same run. */
static void check_compact_run(const cp_epilogue *vec, convpool_dtype dtype, size_t n, tu_rng *rng) {
  enum { MAX_N = 300 };
  float src[MAX_N], res_f[MAX_N], tmp_a[2 * MAX_N + MAX_N];
  uint32_t res[MAX_N];
  unsigned char want[MAX_N * 4 + 64], got[MAX_N * 4 + 64];
  for (size_t i = 0; i < n; i++) {
    src[i] = special(rng, vec->params.min, vec->params.max);
    res_f[i] = special(rng, vec->params.min, vec->params.max);
  }
  residual_values(dtype, res_f, res, n);
  const float bias_value = (float)(4.0 * tu_uniform(rng) - 2.0);
  const float *bias = tu_uniform(rng) < 0.5 ? &bias_value : NULL;
  cp_pool_row a = {.src = src,
                   .ld = n,
                   .rows = 1,
                   .cols = n,
                   .off = 0,
                   .n = n,
                   .tmp = tmp_a,
                   .res = vec->params.residual ? (const void *)res : NULL,
                   .res_ld = n};
  cp_pool_row b = a;
  b.tmp = NULL; /* a compact row takes no scratch */
  memset(want, 0xa5, sizeof want);
  memset(got, 0xa5, sizeof got);
  cp_epilogue_row_portable(&vec->params, &a, bias, want);
  vec->row(&vec->params, &b, bias, got);
  rows_checked++;
  if (memcmp(want, got, sizeof want) != 0) {
    failures++;
    fprintf(stderr, "FAIL: %s compact run n %zu store %d residual %d clamp [%g, %g] differs\n",
            vec->name, n, (int)vec->params.store, vec->params.residual, (double)vec->params.min,
            (double)vec->params.max);
  }
}

/* A full row (the row function): P window rows, no padding, n whole
   windows and a few columns past the last. */
static void check_row(const cp_epilogue *vec, convpool_dtype dtype, size_t n, tu_rng *rng) {
  const size_t pool = vec->params.pool, stride = vec->params.stride;
  const size_t cols = (n - 1) * stride + pool + (size_t)(tu_uniform(rng) * 3.0);
  compare_row(vec, vec->row, "full row", dtype, pool, 0, cols, n, rng);
}

/* A clipped row (the clipped row function): window rows 1..P, pool padding
   off < P before column 0, and windows that run past the last of cols
   columns (each starts inside the row). */
static void check_clipped_row(const cp_epilogue *vec, convpool_dtype dtype, tu_rng *rng) {
  const size_t pool = vec->params.pool, stride = vec->params.stride;
  const size_t off = (size_t)(tu_uniform(rng) * (double)pool) % pool;
  const size_t rows = 1 + (size_t)(tu_uniform(rng) * (double)pool) % pool;
  const size_t cols = 1 + (size_t)(tu_uniform(rng) * 150.0);
  const size_t max_n = (cols - 1 + off) / stride + 1;
  const size_t n = 1 + (size_t)(tu_uniform(rng) * (double)(max_n < 50 ? max_n : 50)) % max_n;
  compare_row(vec, vec->row_clipped, "clipped row", dtype, rows, off, cols, n, rng);
}

/* The lanes row (e->lanes_row: a block's channels in the lanes of each
   position) against the portable row of each channel, byte for byte: lanes
   8, 16 and 32, a partial last block (channels < lanes: the lanes past them
   hold values that must not be stored), full or clipped windows (rows
   1..P, off < P, windows past the last column), n up to 40 outputs (whole
   groups of 8 and a tail), bias or none; nothing written past each
   channel's n outputs or for the channels past the block's. */
static void check_lanes_row(const cp_epilogue *vec, convpool_dtype dtype, int full, tu_rng *rng) {
  enum { MAX_L = 32, MAX_COLS = 200, MAX_ROWS = 12, PLANE = 48 };
  static float lanes_src[MAX_ROWS * MAX_COLS * MAX_L], row_src[MAX_ROWS * MAX_COLS], bias[MAX_L];
  static float res_f[MAX_L * MAX_COLS];
  static uint32_t res[MAX_L * MAX_COLS]; /* channel m's row at m * MAX_COLS, dtype of dst */
  float tmp[3 * MAX_COLS];
  unsigned char want[MAX_L * PLANE * 4], got[MAX_L * PLANE * 4];
  const size_t pool = vec->params.pool, stride = vec->params.stride,
               es = dtype == CONVPOOL_FLOAT32 ? 4 : 2;
  const size_t L = (size_t)8 << ((size_t)(tu_uniform(rng) * 3.0) % 3);
  const size_t channels = L - (size_t)(tu_uniform(rng) * 8.0) % 8;
  size_t off = 0, rows = pool, n, cols;
  if (full) {
    const size_t fits = (MAX_COLS - 6 - pool) / stride + 1, most = fits < 40 ? fits : 40;
    n = 1 + (size_t)(tu_uniform(rng) * (double)most) % most;
    cols = (n - 1) * stride + pool + (size_t)(tu_uniform(rng) * 3.0);
  } else {
    off = (size_t)(tu_uniform(rng) * (double)pool) % pool;
    rows = 1 + (size_t)(tu_uniform(rng) * (double)pool) % pool;
    cols = 1 + (size_t)(tu_uniform(rng) * 150.0);
    const size_t max_n = (cols - 1 + off) / stride + 1;
    n = 1 + (size_t)(tu_uniform(rng) * (double)(max_n < 40 ? max_n : 40)) % max_n;
  }
  const size_t ld = cols + 3; /* positions between rows */
  for (size_t i = 0; i < rows * ld * L; i++)
    lanes_src[i] = special(rng, vec->params.min, vec->params.max);
  if (vec->params.residual) { /* pool 1 of stride 1: a row of each channel */
    for (size_t i = 0; i < MAX_L * MAX_COLS; i++)
      res_f[i] = special(rng, vec->params.min, vec->params.max);
    residual_values(dtype, res_f, res, MAX_L * MAX_COLS);
  }
  const int with_bias = tu_uniform(rng) < 0.5;
  for (size_t m = 0; m < L; m++) bias[m] = (float)(4.0 * tu_uniform(rng) - 2.0);
  memset(want, 0xa5, sizeof want);
  memset(got, 0xa5, sizeof got);
  for (size_t m = 0; m < channels; m++) {
    for (size_t i = 0; i < rows * ld; i++) row_src[i] = lanes_src[i * L + m];
    cp_pool_row a = {.src = row_src,
                     .ld = ld,
                     .rows = rows,
                     .cols = cols,
                     .off = off,
                     .n = n,
                     .tmp = tmp,
                     .res = vec->params.residual
                                ? (const void *)((const unsigned char *)res + m * MAX_COLS * es)
                                : NULL,
                     .res_ld = ld};
    cp_epilogue_row_portable(&vec->params, &a, with_bias ? &bias[m] : NULL, want + m * PLANE * es);
  }
  const cp_lanes_row r = {.src = lanes_src,
                          .ld = ld,
                          .lanes = L,
                          .channels = channels,
                          .rows = rows,
                          .cols = cols,
                          .off = off,
                          .n = n,
                          .bias = with_bias ? bias : NULL,
                          .dst = got,
                          .plane = PLANE,
                          .res = vec->params.residual ? (const void *)res : NULL,
                          .res_plane = MAX_COLS};
  vec->lanes_row(&vec->params, &r);
  rows_checked++;
  if (memcmp(want, got, sizeof want) != 0) {
    failures++;
    fprintf(stderr,
            "FAIL: %s %s pool %zu stride %zu lanes %zu channels %zu rows %zu off %zu n %zu "
            "cols %zu store %d residual %d clamp [%g, %g] bias %s differs\n",
            vec->lanes_name, full ? "full lanes row" : "clipped lanes row", pool, stride, L,
            channels, rows, off, n, cols, (int)vec->params.store, vec->params.residual,
            (double)vec->params.min, (double)vec->params.max, with_bias ? "yes" : "no");
  }
}

int main(void) {
  const cp_cpu *cpu = cp_cpu_get();
  if (cpu->isa < CP_ISA_AVX2) {
    printf("SKIP: the vector epilogue rows are AVX2 and AVX-512 and this CPU runs %s\n",
           cp_isa_name(cpu->isa));
    return 77;
  }
  if (cpu->isa < CP_ISA_AVX512)
    printf("the AVX-512 rows not checked: this CPU runs %s\n", cp_isa_name(cpu->isa));
  const float clamps[][2] = {{-INFINITY, INFINITY}, {0.0f, INFINITY}, {0.0f, 6.0f}, {-1.5f, 2.5f}};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  tu_rng rng = {11};
  int vector_rows = 0;
  const cp_isa isas[] = {CP_ISA_AVX2, CP_ISA_AVX512};
  for (size_t i = 0; i < sizeof isas / sizeof isas[0] && isas[i] <= cpu->isa; i++)
    for (size_t pool = 1; pool <= 4; pool++)
      for (size_t stride = 1; stride <= 4; stride++)
        for (int residual = 0; residual <= 1; residual++)
          for (size_t d = 0; d < 3; d++)
            for (size_t c = 0; c < sizeof clamps / sizeof clamps[0]; c++) {
              cp_epilogue e;
              memset(&e, 0, sizeof e);
              e.params.pool = pool, e.params.stride = stride;
              e.params.min = clamps[c][0], e.params.max = clamps[c][1];
              e.params.store = dtypes[d] == CONVPOOL_FLOAT16    ? CP_STORE_F16
                               : dtypes[d] == CONVPOOL_BFLOAT16 ? CP_STORE_BF16
                                                                : CP_STORE_F32;
              e.params.narrow = cp_narrow_select(dtypes[d], CP_ISA_SCALAR);
              e.params.residual = residual;
              e.params.res_widen = cp_widen_select(dtypes[d], isas[i]);
              cp_epilogue_select(&e, isas[i]);
              if (e.row == cp_epilogue_row_portable) {
                failures++;
                fprintf(stderr, "FAIL: no vector row for pool %zu stride %zu residual %d\n", pool,
                        stride, residual);
                continue;
              }
              vector_rows++;
              for (size_t n = 1; n <= 50; n++)
                for (int trial = 0; trial < 4; trial++) check_row(&e, dtypes[d], n, &rng);
              if (e.compact)
                for (size_t n = 1; n <= 300; n += 1 + n / 16)
                  check_compact_run(&e, dtypes[d], n, &rng);
              if (e.row_clipped == cp_epilogue_row_portable) {
                failures++;
                fprintf(stderr, "FAIL: no vector clipped row for pool %zu stride %zu\n", pool,
                        stride);
                continue;
              }
              for (int trial = 0; trial < 200; trial++) check_clipped_row(&e, dtypes[d], &rng);
              /* the lanes row: every setup without a residual, pool 1 of stride 1 with one */
              if ((e.lanes_row != NULL) != (!residual || (pool == 1 && stride == 1))) {
                failures++;
                fprintf(stderr, "FAIL: lanes row %s with residual %d\n",
                        e.lanes_row != NULL ? "offered" : "missing", residual);
                continue;
              }
              if (e.lanes_row != NULL)
                for (int trial = 0; trial < 60; trial++)
                  check_lanes_row(&e, dtypes[d], trial % 2, &rng);
            }
  /* windows of 8 outputs wider than the lanes row keeps column maxima for */
  const size_t wide[][2] = {{9, 9}, {12, 5}, {3, 11}};
  for (size_t i = 0; i < sizeof isas / sizeof isas[0] && isas[i] <= cpu->isa; i++)
    for (size_t w = 0; w < sizeof wide / sizeof wide[0]; w++)
      for (size_t c = 0; c < sizeof clamps / sizeof clamps[0]; c++) {
        cp_epilogue e;
        memset(&e, 0, sizeof e);
        e.params.pool = wide[w][0], e.params.stride = wide[w][1];
        e.params.min = clamps[c][0], e.params.max = clamps[c][1];
        e.params.store = CP_STORE_F32;
        cp_epilogue_select(&e, isas[i]);
        for (int trial = 0; trial < 60; trial++)
          check_lanes_row(&e, CONVPOOL_FLOAT32, trial % 2, &rng);
      }
  printf("%d vector row setups, %d rows checked against the portable row, %d failed\n", vector_rows,
         rows_checked, failures);
  return failures != 0;
}
