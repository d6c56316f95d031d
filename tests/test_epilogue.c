/*
 * The epilogue's vector rows against the portable row, byte for byte: every
 * store kind, bias or none, every activation clamp, rows of random values
 * with NaN, +-Inf, +-0 and values on the clamp bounds, every length up to
 * three vectors and a tail. A vector row that differs from the portable one
 * would make a result depend on which items (so which thread count) clip a
 * window.
 */
#include <math.h>
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

static void check_row(const cp_epilogue *vec, size_t pool, size_t n, tu_rng *rng) {
  const size_t cols = n * pool, ld = cols + 5;
  float src[2 * 64 + 16], tmp_a[200], tmp_b[200];
  unsigned char want[256], got[256];
  for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
    src[i] = special(rng, vec->params.min, vec->params.max);
  const float bias_value = (float)(4.0 * tu_uniform(rng) - 2.0);
  const float *bias = tu_uniform(rng) < 0.5 ? &bias_value : NULL;
  cp_pool_row a = {
      .src = src, .ld = ld, .rows = pool, .cols = cols, .off = 0, .n = n, .tmp = tmp_a};
  cp_pool_row b = a;
  b.tmp = tmp_b;
  memset(want, 0xa5, sizeof want);
  memset(got, 0xa5, sizeof got);
  cp_epilogue_row_portable(&vec->params, &a, bias, want);
  vec->row(&vec->params, &b, bias, got);
  rows_checked++;
  if (memcmp(want, got, sizeof want) != 0) {
    failures++;
    fprintf(stderr, "FAIL: %s pool %zu n %zu store %d clamp [%g, %g] bias %s differs\n", vec->name,
            pool, n, (int)vec->params.store, (double)vec->params.min, (double)vec->params.max,
            bias ? "yes" : "no");
  }
}

int main(void) {
  const cp_cpu *cpu = cp_cpu_get();
  if (cpu->isa < CP_ISA_AVX512) {
    printf("SKIP: the vector epilogue rows are AVX-512 and this CPU runs %s\n",
           cp_isa_name(cpu->isa));
    return 77;
  }
  const float clamps[][2] = {{-INFINITY, INFINITY}, {0.0f, INFINITY}, {0.0f, 6.0f}, {-1.5f, 2.5f}};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  tu_rng rng = {11};
  int vector_rows = 0;
  for (size_t pool = 1; pool <= 2; pool++)
    for (size_t d = 0; d < 3; d++)
      for (size_t c = 0; c < sizeof clamps / sizeof clamps[0]; c++) {
        cp_epilogue e;
        memset(&e, 0, sizeof e);
        e.params.pool = e.params.stride = pool;
        e.params.min = clamps[c][0], e.params.max = clamps[c][1];
        e.params.store = dtypes[d] == CONVPOOL_FLOAT16    ? CP_STORE_F16
                         : dtypes[d] == CONVPOOL_BFLOAT16 ? CP_STORE_BF16
                                                          : CP_STORE_F32;
        e.params.narrow = cp_narrow_select(dtypes[d], CP_ISA_SCALAR);
        cp_epilogue_select(&e, cpu->isa);
        if (e.row == cp_epilogue_row_portable) {
          failures++;
          fprintf(stderr, "FAIL: no vector row for pool %zu clamp [%g, %g]\n", pool,
                  (double)e.params.min, (double)e.params.max);
          continue;
        }
        vector_rows++;
        for (size_t n = 1; n <= 50; n++)
          for (int trial = 0; trial < 20; trial++) check_row(&e, pool, n, &rng);
      }
  printf("%d vector row setups, %d rows checked against the portable row, %d failed\n", vector_rows,
         rows_checked, failures);
  return failures != 0;
}
