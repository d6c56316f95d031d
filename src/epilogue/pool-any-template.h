/*
 * Template of the vector epilogue row for any window, stride and residual,
 * clipped rows included (bias after the max). The column maxima of the
 * window's rows (each value + its residual first; without one, a vector of
 * columns over all the rows in a register) go to tmp, the maximum
 * over each window's columns to tmp + cols, in the portable row's order, so
 * that a NaN comes out with the same bits; then bias, clamp and the store.
 * Whole windows are vectors: stride 1 reads the window's columns with
 * unaligned loads, stride 2 takes the even lanes of two vectors, other
 * strides gather; clipped ones at the row's ends are scalars.
 *
 * Define before including: CP_E_FN (the function), CP_E_V (vector type),
 * CP_E_W (lanes), CP_E_MASK_T, CP_E_BELOW(at, end) (the lanes below end - at),
 * CP_E_LOAD(p, mask) (zeros in the other lanes), optionally CP_E_LOAD_BELOW(p,
 * at, end) (the lanes below end - at: a whole vector where at + CP_E_W <=
 * end, for ISAs whose masked loads cost more than plain ones; by default
 * CP_E_LOAD with CP_E_BELOW), CP_E_STORE(p, mask, v),
 * CP_E_ZERO(), CP_E_SET1(x), CP_E_ADD(a, b), CP_E_MAX_NAN(a, b) (a if it is
 * a NaN, else b if it is one, else the larger), CP_E_CLAMP(v, lo, hi) (the
 * portable clamp), CP_E_EVEN(lo, hi) (lanes 0, 2, 4, ... of lo then hi),
 * CP_E_STEP_T and CP_E_STEP(S) (lane l: l*S), CP_E_GATHER(base, step, mask),
 * and CP_E_OUT(p, dst, wmax, t, v, mask) (the store of outputs t.. of the
 * row: fp32, or 16-bit, where CP_E_NARROW_AFTER says that the row is
 * narrowed from wmax after the loop).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "epilogue.h"

#ifndef CP_E_LOAD_BELOW
#define CP_E_LOAD_BELOW(p, at, end) CP_E_LOAD(p, CP_E_BELOW(at, end))
#endif

static inline float cp_e_maxf(float a, float b) {
  return (a > b || a != a) ? a : b;
}

void CP_E_FN(const cp_epilogue_params *p, const cp_pool_row *row, const float *bias, void *dst) {
  const size_t P = p->pool, S = p->stride, cols = row->cols, n = row->n, ld = row->ld;
  const size_t off = row->off;
  const float *colmax = row->src;
  float *wmax = row->tmp + cols;
  if (row->res == NULL && row->rows > 1) {
    /* a vector of columns at a time, its maximum kept in a register over the
       rows (the same order of maxima as the loop below) */
    float *m = row->tmp;
    for (size_t x = 0; x < cols; x += CP_E_W) {
      CP_E_V s = CP_E_LOAD_BELOW(row->src + x, x, cols);
      for (size_t a = 1; a < row->rows; a++)
        s = CP_E_MAX_NAN(s, CP_E_LOAD_BELOW(row->src + a * ld + x, x, cols));
      CP_E_STORE(m + x, CP_E_BELOW(x, cols), s);
    }
    colmax = m;
  } else if (row->res != NULL) {
    float *m = row->tmp, *widened = row->tmp + cols + n;
    for (size_t a = 0; a < row->rows; a++) {
      const float *v = row->src + a * ld, *r = (const float *)row->res + a * row->res_ld;
      if (p->res_widen != NULL) {
        p->res_widen((const uint16_t *)row->res + a * row->res_ld, widened, cols);
        r = widened;
      }
      for (size_t x = 0; x < cols; x += CP_E_W) {
        CP_E_V s = CP_E_ADD(CP_E_LOAD_BELOW(v + x, x, cols), CP_E_LOAD_BELOW(r + x, x, cols));
        if (a > 0) s = CP_E_MAX_NAN(CP_E_LOAD_BELOW(m + x, x, cols), s);
        CP_E_STORE(m + x, CP_E_BELOW(x, cols), s);
      }
    }
    colmax = m;
  }
  /* outputs [t0, t1) have whole windows: t*S >= off and t*S - off + P <= cols */
  size_t t0 = (off + S - 1) / S, t1 = cols + off >= P ? (cols + off - P) / S + 1 : 0;
  if (t1 > n) t1 = n;
  if (t0 > t1) t0 = t1;
  for (size_t t = 0; t < n; t++) {
    if (t == t0) t = t1; /* the whole windows: vectors, below */
    if (t >= n) break;
    /* window [t*S - off, t*S - off + P) clipped to [0, cols); never empty */
    const size_t lo = t * S > off ? t * S - off : 0;
    const size_t hi = t * S + P - off < cols ? t * S + P - off : cols;
    float v = colmax[lo];
    for (size_t x = lo + 1; x < hi; x++) v = cp_e_maxf(v, colmax[x]);
    wmax[t] = v;
  }
  const CP_E_STEP_T step = CP_E_STEP(S);
  for (size_t t = t0; t < t1; t += CP_E_W) {
    const CP_E_MASK_T mask = CP_E_BELOW(t, t1);
    CP_E_V v = CP_E_ZERO();
    for (size_t j = 0; j < P; j++) {
      const size_t x = t * S - off + j; /* column of lane 0's window tap j */
      CP_E_V c;
      if (S == 1) {
        c = CP_E_LOAD_BELOW(colmax + x, x, cols);
      } else if (S == 2) {
        const CP_E_V lo = CP_E_LOAD_BELOW(colmax + x, x, cols);
        const CP_E_V hi = CP_E_LOAD_BELOW(colmax + x + CP_E_W, x + CP_E_W, cols);
        c = CP_E_EVEN(lo, hi);
      } else {
        c = CP_E_GATHER(colmax + x, step, mask);
      }
      v = j == 0 ? c : CP_E_MAX_NAN(v, c);
    }
    CP_E_STORE(wmax + t, mask, v);
  }
  const CP_E_V b = CP_E_SET1(bias != NULL ? *bias : 0.0f);
  const CP_E_V act_lo = CP_E_SET1(p->min), act_hi = CP_E_SET1(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  for (size_t t = 0; t < n; t += CP_E_W) {
    const CP_E_MASK_T mask = CP_E_BELOW(t, n);
    CP_E_V v = CP_E_LOAD_BELOW(wmax + t, t, n);
    if (bias != NULL) v = CP_E_ADD(v, b);
    if (clamp) v = CP_E_CLAMP(v, act_lo, act_hi);
    CP_E_OUT(p, dst, wmax, t, v, mask);
  }
#ifdef CP_E_NARROW_AFTER
  if (p->narrow != NULL) p->narrow(wmax, (uint16_t *)dst, n);
#endif
}
