/*
 * Template of the vector channels-in-lanes microkernels (see cl-ukernel.h).
 * Each (c, t) step loads the MRV weight vectors of the tap once and
 * broadcasts each of the NP positions' input to multiply them, MRV * NP
 * independent multiply-adds into the register tile; the tile leaves the
 * registers once, through a small stack array whose columns are the
 * output's rows (channels in lanes become rows of positions).
 *
 * Define before including:
 *   CP_FN                  function name (one kernel per file)
 *   CP_MRV, CP_NP          vectors of channels, and positions, per tile
 *   CP_LANES               fp32 lanes of a vector
 *   CP_VEC, CP_ZERO(), CP_LOAD(p), CP_STORE(p, v), CP_BCAST(p)
 *   CP_MAC(acc, w, x)      acc + w * x, one rounding
 */
#include <immintrin.h>

#define CP_MR (CP_MRV * CP_LANES)

/* The (c, t) steps with positions xs panel columns apart: inlined with xs
   a constant for strides 1 and 2, so the NP broadcasts address the panel
   with constant displacements instead of a chain of adds. */
static inline __attribute__((always_inline)) void cp_cl_steps(const float *x, size_t cs, size_t xs,
                                                              const ptrdiff_t *off, size_t taps,
                                                              size_t c_in, const float *w,
                                                              CP_VEC acc[CP_NP][CP_MRV]) {
  for (size_t c = 0; c < c_in; c++) {
    const float *xc = x + c * cs;
    for (size_t t = 0; t < taps; t++, w += CP_MR) {
      const float *xt = xc + off[t];
      CP_VEC wv[CP_MRV];
#pragma GCC unroll 4
      for (int v = 0; v < CP_MRV; v++) wv[v] = CP_LOAD(w + CP_LANES * v);
#pragma GCC unroll 16
      for (int p = 0; p < CP_NP; p++) {
        const CP_VEC b = CP_BCAST(xt + (size_t)p * xs);
#pragma GCC unroll 4
        for (int v = 0; v < CP_MRV; v++) acc[p][v] = CP_MAC(acc[p][v], wv[v], b);
      }
    }
  }
}

void CP_FN(const float *x, size_t cs, size_t xs, const ptrdiff_t *off, size_t taps, size_t c_in,
           const float *w, float *out, size_t out_ld, size_t n) {
  CP_VEC acc[CP_NP][CP_MRV];
#pragma GCC unroll 16
  for (int p = 0; p < CP_NP; p++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_MRV; v++) acc[p][v] = CP_ZERO();
  if (xs == 1)
    cp_cl_steps(x, cs, 1, off, taps, c_in, w, acc);
  else if (xs == 2)
    cp_cl_steps(x, cs, 2, off, taps, c_in, w, acc);
  else
    cp_cl_steps(x, cs, xs, off, taps, c_in, w, acc);
  float tile[CP_NP][CP_MR] __attribute__((aligned(64)));
#pragma GCC unroll 16
  for (int p = 0; p < CP_NP; p++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_MRV; v++) CP_STORE(&tile[p][CP_LANES * v], acc[p][v]);
  for (size_t m = 0; m < CP_MR; m++)
    for (size_t p = 0; p < n; p++) out[m * out_ld + p] = tile[p][m];
}
