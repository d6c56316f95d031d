/*
 * Template of the vector depthwise microkernels (see dw-ukernel.h). A tile
 * is CP_NRV vectors of consecutive positions: for each tap, one broadcast
 * weight and CP_NRV shifted loads and multiply-adds into independent
 * accumulators, which leave the registers once. The positions past the last
 * whole tile run as tiles of 4, 2 and 1 vectors, with the same order of sums.
 *
 * Define before including:
 *   CP_FN, CP_NRV (a power of two), CP_LANES, CP_VEC, CP_ZERO(), CP_LOAD(p),
 *   CP_STORE(p, v), CP_BCAST(x), CP_MAC(acc, b, x) (acc + b * x)
 *   CP_ROWS_FN (the row copy), and CP_MASK_TAIL(from, to, n) for a last
 *   partial vector (n < CP_LANES elements), or none for element copies;
 *   CP_ROWS2_FN (every other element), and CP_EVEN(from, n) (a vector of
 *   from[0], from[2], ..., reading from[0 .. 2 * n - 2] only, n <= CP_LANES)
 *   or none for element copies
 */
#include <immintrin.h>
#include <stddef.h>

#include "dw-ukernel.h"

static inline __attribute__((always_inline)) void cp_dw_tile(const float *x, const ptrdiff_t *off,
                                                             size_t taps, const float *w,
                                                             float *out, const int nv) {
  CP_VEC acc[CP_NRV];
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) acc[v] = CP_ZERO();
  for (size_t t = 0; t < taps; t++) {
    const float *xt = x + off[t];
    const CP_VEC b = CP_BCAST(w[t]);
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) acc[v] = CP_MAC(acc[v], b, CP_LOAD(xt + CP_LANES * v));
  }
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) CP_STORE(out + CP_LANES * v, acc[v]);
}

void CP_FN(const float *x, const ptrdiff_t *off, size_t taps, const float *w, size_t len,
           float *out) {
  size_t vectors = (len + CP_LANES - 1) / CP_LANES, p = 0;
  for (; vectors >= CP_NRV; vectors -= CP_NRV, p += CP_NRV * CP_LANES)
    cp_dw_tile(x + p, off, taps, w, out + p, CP_NRV);
#if CP_NRV > 4
  if (vectors >= 4) cp_dw_tile(x + p, off, taps, w, out + p, 4), vectors -= 4, p += 4 * CP_LANES;
#endif
#if CP_NRV > 2
  if (vectors >= 2) cp_dw_tile(x + p, off, taps, w, out + p, 2), vectors -= 2, p += 2 * CP_LANES;
#endif
  if (vectors >= 1) cp_dw_tile(x + p, off, taps, w, out + p, 1);
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
