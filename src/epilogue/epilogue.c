/* The portable epilogue row and the choice of row function. */
#include "epilogue.h"

#include <math.h>
#include <string.h>

static inline float cp_maxf(float a, float b) {
  return (a > b || a != a) ? a : b;
}

/* The column maxima of a window's rows into m, each value v the conv
   output (+ a non-finite bias b) + the residual r: (v + b) + r, torch's
   order. */
static void cp_colmax_residual(const cp_epilogue_params *p, const cp_pool_row *row, int add_first,
                               float b, float *m) {
  const size_t cols = row->cols, ld = row->ld;
  float *widened = row->tmp + cols + row->n;
  for (size_t a = 0; a < row->rows; a++) {
    const float *v = row->src + a * ld, *r;
    if (p->res_widen != NULL) {
      p->res_widen((const uint16_t *)row->res + a * row->res_ld, widened, cols);
      r = widened;
    } else {
      r = (const float *)row->res + a * row->res_ld;
    }
    for (size_t x = 0; x < cols; x++) {
      const float s = (add_first ? v[x] + b : v[x]) + r[x];
      m[x] = a == 0 ? s : cp_maxf(m[x], s);
    }
  }
}

/* Rows of the window first (column maxima), then the columns of each window,
   so each conv output is read once; then bias, clamp and the store. */
void cp_epilogue_row_portable(const cp_epilogue_params *p, const cp_pool_row *row,
                              const float *bias, void *dst) {
  const size_t P = p->pool, S = p->stride, cols = row->cols, n = row->n, ld = row->ld;
  const float *src = row->src, *colmax = src;
  float *out = row->tmp + cols;
  /* Windows of neighbouring rows may overlap (S < P): src is only read. A
     non-finite bias is added to every value before the max (exact: torch's
     max(v + b)); a finite one after it. */
  const int add_first = bias != NULL && p->bias_first;
  const float b = add_first ? *bias : 0.0f;
  if (row->res != NULL) {
    cp_colmax_residual(p, row, add_first, b, row->tmp);
    colmax = row->tmp;
  } else if (row->rows > 1 || add_first) {
    float *m = row->tmp;
    for (size_t x = 0; x < cols; x++) m[x] = add_first ? src[x] + b : src[x];
    for (size_t a = 1; a < row->rows; a++)
      for (size_t x = 0; x < cols; x++)
        m[x] = cp_maxf(m[x], add_first ? src[a * ld + x] + b : src[a * ld + x]);
    colmax = m;
  }
  const int add_after = bias != NULL && !p->bias_first;
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  const float b_after = add_after ? *bias : 0.0f;
  /* full windows (no padding or clipping in this row) need no bounds */
  const int full = row->off == 0 && (n == 0 || (n - 1) * S + P <= cols);
  for (size_t t = 0; t < n; t++) { /* one pass: window max, bias, clamp */
    /* window [t*S - off, t*S - off + P) clipped to [0, cols); never empty */
    size_t lo = t * S, hi = lo + P;
    if (!full) {
      lo = lo > row->off ? lo - row->off : 0;
      hi = hi - row->off < cols ? hi - row->off : cols;
    }
    float v = colmax[lo];
    for (size_t x = lo + 1; x < hi; x++) v = cp_maxf(v, colmax[x]);
    if (add_after) v += b_after;
    if (clamp) {
      if (v < p->min) v = p->min;
      if (v > p->max) v = p->max;
    }
    out[t] = v;
  }
  if (p->narrow != NULL)
    p->narrow(out, (uint16_t *)dst, n);
  else
    memcpy(dst, out, n * sizeof(float));
}

void cp_epilogue_select(cp_epilogue *e, cp_isa isa) {
  const cp_epilogue_params *p = &e->params;
  const int plain = !p->bias_first && !p->residual && p->stride == p->pool;
  e->row = cp_epilogue_row_portable;
  e->name = "portable";
  e->compact = 0;
  e->in_kernel = !p->bias_first && p->pool == 1 && p->stride == 1 && p->store == CP_STORE_F32;
  if (plain && isa >= CP_ISA_AVX512 && p->pool == 1) {
    e->row = cp_epilogue_row_pool1_avx512f;
    e->name = "pool1-avx512f";
    e->compact = 1;
  } else if (!p->bias_first && p->residual && isa >= CP_ISA_AVX512 && p->pool == 1 &&
             p->stride == 1) {
    e->row = cp_epilogue_row_pool1_res_avx512f;
    e->name = "pool1-residual-avx512f";
    e->compact = 1;
  } else if (plain && isa >= CP_ISA_AVX512 && p->pool == 2) {
    e->row = cp_epilogue_row_pool2_avx512f;
    e->name = "pool2-avx512f";
  } else if (!p->bias_first && isa >= CP_ISA_AVX512) {
    e->row = cp_epilogue_row_any_avx512f;
    e->name = "any-avx512f";
  } else if (!p->bias_first && isa >= CP_ISA_AVX2 && p->pool == 1 && p->stride == 1) {
    e->row = cp_epilogue_row_pool1_avx2;
    e->name = p->residual ? "pool1-residual-avx2" : "pool1-avx2";
    e->compact = 1;
  } else if (!p->bias_first && isa >= CP_ISA_AVX2) {
    e->row = cp_epilogue_row_any_avx2;
    e->name = "any-avx2";
  }
  e->lanes_row = NULL, e->lanes_name = NULL;
  if (!p->bias_first && (!p->residual || (p->pool == 1 && p->stride == 1)) && isa >= CP_ISA_AVX2) {
    e->lanes_row =
        isa >= CP_ISA_AVX512 ? cp_epilogue_lanes_row_avx512f : cp_epilogue_lanes_row_avx2;
    e->lanes_name = isa >= CP_ISA_AVX512 ? "lanes-avx512f" : "lanes-avx2";
  }
  e->row_clipped = p->bias_first          ? cp_epilogue_row_portable
                   : isa >= CP_ISA_AVX512 ? cp_epilogue_row_any_avx512f
                   : isa >= CP_ISA_AVX2   ? cp_epilogue_row_any_avx2
                                          : cp_epilogue_row_portable;
}
