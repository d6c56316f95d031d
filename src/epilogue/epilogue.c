/* The portable epilogue row, the choice of row function, and the block loop. */
#include "epilogue.h"

#include <math.h>
#include <string.h>

static inline float cp_maxf(float a, float b) { return (a > b || a != a) ? a : b; }

/* Rows of the window first (into src's first row), then columns, so each
   element is read once; then bias, clamp and the store. */
void cp_epilogue_row_portable(const cp_epilogue_params *p, float *src, size_t ld, size_t n,
                              const float *bias, void *dst) {
  const size_t P = p->pool, S = p->stride, ncols = n == 0 ? 0 : (n - 1) * S + P;
  if (bias != NULL && p->bias_first) /* exact for a non-finite bias: max(v + b) */
    for (size_t a = 0; a < P; a++)
      for (size_t x = 0; x < ncols; x++) src[a * ld + x] += *bias;
  for (size_t a = 1; a < P; a++)
    for (size_t x = 0; x < ncols; x++) src[x] = cp_maxf(src[x], src[a * ld + x]);
  if (P > 1)
    for (size_t t = 0; t < n; t++) { /* in place: reads at t*S >= t */
      float v = src[t * S];
      for (size_t c = 1; c < P; c++) v = cp_maxf(v, src[t * S + c]);
      src[t] = v;
    }
  if (bias != NULL && !p->bias_first)
    for (size_t t = 0; t < n; t++) src[t] += *bias;
  if (p->min > -INFINITY || p->max < INFINITY)
    for (size_t t = 0; t < n; t++) {
      if (src[t] < p->min) src[t] = p->min;
      if (src[t] > p->max) src[t] = p->max;
    }
  if (p->narrow != NULL) p->narrow(src, (uint16_t *)dst, n);
  else memcpy(dst, src, n * sizeof(float));
}

void cp_epilogue_select(cp_epilogue *e, cp_isa isa) {
  const cp_epilogue_params *p = &e->params;
  const int plain = !p->bias_first && p->min == -INFINITY && p->max == INFINITY &&
                    p->stride == p->pool;
  e->row = cp_epilogue_row_portable;
  e->name = "portable";
  if (plain && isa >= CP_ISA_AVX512 && p->pool == 1) {
    e->row = cp_epilogue_row_pool1_avx512f;
    e->name = "pool1-avx512f";
  } else if (plain && isa >= CP_ISA_AVX512 && p->pool == 2) {
    e->row = cp_epilogue_row_pool2_avx512f;
    e->name = "pool2-avx512f";
  }
}

void cp_epilogue_block(const cp_epilogue *e, float *buf, size_t buf_cols, size_t ld,
                       size_t channels, size_t co0, size_t prows, size_t pcols, void *dst,
                       size_t dst_index, size_t pw, size_t plane, size_t elem_size) {
  const cp_epilogue_params *p = &e->params;
  const size_t row_step = p->stride * ld;
  for (size_t m = 0; m < channels; m++) {
    const float *bias = p->bias != NULL ? &p->bias[co0 + m] : NULL;
    for (size_t q = 0; q < prows; q++) {
      const size_t out = dst_index + m * plane + q * pw;
      e->row(p, buf + m * buf_cols + q * row_step, ld, pcols, bias,
             (unsigned char *)dst + out * elem_size);
    }
  }
}
