/*
 * Template of the vector depthwise microkernels (see dw-ukernel.h). The
 * vectors of the call (each row's positions in vectors of CP_LANES, the
 * last one of a row partial) are taken CP_NRV at a time, row after row: for
 * each tap, one broadcast weight and CP_NRV shifted loads and multiply-adds
 * into independent accumulators, which leave the registers once (a partial
 * vector through a masked store). The vectors past the last whole tile run
 * as one tile of fewer, with the same order of sums.
 *
 * Define before including:
 *   CP_FN, CP_NRV (4 or 8), CP_LANES, CP_VEC, CP_ZERO(), CP_LOAD(p),
 *   CP_STORE(p, v), CP_STORE_N(p, v, n) (the first n < CP_LANES lanes),
 *   CP_BCAST(x), CP_MAC(acc, b, x) (acc + b * x)
 *   CP_ROWS_FN (the row copy), and CP_MASK_TAIL(from, to, n) for a last
 *   partial vector (n < CP_LANES elements), or none for element copies;
 *   CP_ROWS2_FN (every other element), and CP_EVEN(from, n) (a vector of
 *   from[0], from[2], ..., reading from[0 .. 2 * n - 2] only, n <= CP_LANES)
 *   or none for element copies
 */
#include <immintrin.h>
#include <stddef.h>

#include "dw-ukernel.h"

/* nv vectors: vector v reads x + in[v] + off[t], writes cnt[v] lanes at
   out + at[v]. */
static inline __attribute__((always_inline)) void cp_dw_tile(const float *x, const ptrdiff_t *off,
                                                             size_t taps, const float *w,
                                                             float *out, const size_t *in,
                                                             const size_t *at, const size_t *cnt,
                                                             const int nv) {
  CP_VEC acc[CP_NRV];
  const float *xv[CP_NRV];
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) acc[v] = CP_ZERO(), xv[v] = x + in[v];
  for (size_t t = 0; t < taps; t++) {
    const ptrdiff_t o = off[t];
    const CP_VEC b = CP_BCAST(w[t]);
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) acc[v] = CP_MAC(acc[v], b, CP_LOAD(xv[v] + o));
  }
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) {
    if (cnt[v] == CP_LANES)
      CP_STORE(out + at[v], acc[v]);
    else
      CP_STORE_N(out + at[v], acc[v], cnt[v]);
  }
}

void CP_FN(const float *x, const ptrdiff_t *off, size_t taps, const float *w, size_t rows, size_t n,
           size_t x_ld, float *out, size_t out_ld) {
  size_t in[CP_NRV], at[CP_NRV], cnt[CP_NRV];
  int k = 0;
  for (size_t y = 0; y < rows; y++)
    for (size_t c = 0; c < n; c += CP_LANES) {
      in[k] = y * x_ld + c, at[k] = y * out_ld + c, cnt[k] = n - c < CP_LANES ? n - c : CP_LANES;
      if (++k == CP_NRV) {
        cp_dw_tile(x, off, taps, w, out, in, at, cnt, CP_NRV);
        k = 0;
      }
    }
  switch (k) { /* the rest as one tile: one chain of taps, k accumulators */
#if CP_NRV > 7
    case 7:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 7);
      break;
    case 6:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 6);
      break;
    case 5:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 5);
      break;
    case 4:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 4);
      break;
#endif
    case 3:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 3);
      break;
    case 2:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 2);
      break;
    case 1:
      cp_dw_tile(x, off, taps, w, out, in, at, cnt, 1);
      break;
    default:
      break;
  }
}

/* The lanes of vector v (flat positions q, q + 1, ...) that are positions
   c < nx of their row (rows ld > nx apart), and below len, packed into out
   at their compact place. */
static inline void cp_dw_store_compact(float *out, CP_VEC v, size_t q, size_t len, size_t ld,
                                       size_t nx) {
  const size_t lanes = len - q < CP_LANES ? len - q : CP_LANES, c = q % ld;
  unsigned mask = 0;
  for (size_t l = 0, cc = c; l < lanes;) {
    if (cc < nx) {
      const size_t run = nx - cc < lanes - l ? nx - cc : lanes - l;
      mask |= ((1u << run) - 1u) << l;
      l += run, cc += run;
    } else {
      l += ld - cc, cc = 0;
    }
  }
  CP_COMPRESS_STORE(out + q / ld * nx + (c < nx ? c : nx), v, mask);
}

/* nv consecutive vectors from flat position q0, stored compact. */
static inline __attribute__((always_inline)) void cp_dw_compact_tile(
    const float *x, const ptrdiff_t *off, size_t taps, const float *w, size_t q0, size_t len,
    size_t ld, size_t nx, float *out, const int nv) {
  const float *xp = x + q0;
  CP_VEC acc[CP_NRV];
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) acc[v] = CP_ZERO();
  for (size_t t = 0; t < taps; t++) {
    const float *xt = xp + off[t];
    const CP_VEC b = CP_BCAST(w[t]);
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) acc[v] = CP_MAC(acc[v], b, CP_LOAD(xt + CP_LANES * v));
  }
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++)
    cp_dw_store_compact(out, acc[v], q0 + (size_t)v * CP_LANES, len, ld, nx);
}

void CP_COMPACT_FN(const float *x, const ptrdiff_t *off, size_t taps, const float *w, size_t len,
                   size_t ld, size_t nx, float *out) {
  size_t vectors = (len + CP_LANES - 1) / CP_LANES, q = 0;
  for (; vectors >= CP_NRV; vectors -= CP_NRV, q += CP_NRV * CP_LANES)
    cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, CP_NRV);
  switch (vectors) { /* the rest as one tile */
#if CP_NRV > 7
    case 7:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 7);
      break;
    case 6:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 6);
      break;
    case 5:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 5);
      break;
    case 4:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 4);
      break;
#endif
    case 3:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 3);
      break;
    case 2:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 2);
      break;
    case 1:
      cp_dw_compact_tile(x, off, taps, w, q, len, ld, nx, out, 1);
      break;
    default:
      break;
  }
}

void CP_ROWS_FN(const float *from, size_t from_ld, float *to, size_t to_ld, size_t rows, size_t n) {
  for (size_t y = 0; y < rows; y++, from += from_ld, to += to_ld) {
    size_t x = 0;
    for (; x + CP_LANES <= n; x += CP_LANES) CP_STORE(to + x, CP_LOAD(from + x));
#ifdef CP_MASK_TAIL
    if (x < n) CP_MASK_TAIL(from + x, to + x, n - x);
#else
    for (; x < n; x++) to[x] = from[x];
#endif
  }
}

void CP_ROWS2_FN(const float *from, size_t from_ld, float *to, size_t to_ld, size_t rows,
                 size_t n) {
  for (size_t y = 0; y < rows; y++, from += from_ld, to += to_ld) {
#ifdef CP_EVEN
    size_t x = 0;
    for (; x + CP_LANES <= n; x += CP_LANES) CP_STORE(to + x, CP_EVEN(from + 2 * x, CP_LANES));
    if (x < n) CP_MASK_STORE(to + x, n - x, CP_EVEN(from + 2 * x, n - x));
#else
    for (size_t x = 0; x < n; x++) to[x] = from[2 * x];
#endif
  }
}

void CP_SPLIT2_FN(const float *from, size_t from_ld, float *even, float *odd, size_t to_ld,
                  size_t rows, size_t n_even, size_t n_odd) {
  for (size_t y = 0; y < rows; y++, from += from_ld, even += to_ld, odd += to_ld) {
#ifdef CP_SPLIT
    for (size_t x = 0; x < n_even; x += CP_LANES) {
      const size_t ne = n_even - x < CP_LANES ? n_even - x : CP_LANES;
      const size_t no = n_odd > x ? (n_odd - x < CP_LANES ? n_odd - x : CP_LANES) : 0;
      CP_SPLIT(from + 2 * x, ne + no, even + x, ne, odd + x, no);
    }
#else
    for (size_t x = 0; x < n_even; x++) even[x] = from[2 * x];
    for (size_t x = 0; x < n_odd; x++) odd[x] = from[2 * x + 1];
#endif
  }
}
