/*
 * Template of the vector channels-in-lanes microkernels (see cl-ukernel.h).
 * Each (c, t) step loads the MRV weight vectors of the tap once and
 * broadcasts each of the NP positions' input to multiply them, MRV * NP
 * independent multiply-adds into the register tile (each position's base
 * pointer stays in a register and the step's offset in another, so each
 * broadcast is one base + index load with no address arithmetic: 32
 * instructions per step became 25, where the front end feeds 12 FMAs). The
 * tile leaves
 * the registers once: to the partial sums, or through a small stack array
 * whose columns are the output's rows (channels in lanes become rows of
 * positions).
 *
 * Define before including:
 *   CP_FN                  function name (one kernel per file)
 *   CP_MRV, CP_NP          vectors of channels, and positions, per tile
 *   CP_LANES               fp32 lanes of a vector
 *   CP_VEC, CP_ZERO(), CP_LOAD(p), CP_STORE(p, v) (aligned)   the fp32 sums
 *   CP_WVEC, CP_WLOAD(p)   a vector of weights (fp32, or bf16 pairs)
 *   CP_XVEC, CP_BCAST(p)   one 32-bit input element in every lane
 *   CP_MAC(acc, w, x)      acc + w * x (one rounding for fp32; both products
 *                          of each lane's pair for bf16)
 */
#include <immintrin.h>

#define CP_MR (CP_MRV * CP_LANES)

/* One (c, t) step: the tap's weight vectors times each position's input
   at xp[p][o] (xp[p]: the position's base pointer, o: the step's offset,
   so each broadcast is one base + index load and no address is formed). */
static inline __attribute__((always_inline)) void cp_cl_step(const float *const *xp, ptrdiff_t o,
                                                             const float *w,
                                                             CP_VEC acc[CP_NP][CP_MRV]) {
  CP_WVEC wv[CP_MRV];
#pragma GCC unroll 4
  for (int v = 0; v < CP_MRV; v++) wv[v] = CP_WLOAD(w + CP_LANES * v);
#pragma GCC unroll 16
  for (int p = 0; p < CP_NP; p++) {
    const CP_XVEC b = CP_BCAST(xp[p] + o);
#pragma GCC unroll 4
    for (int v = 0; v < CP_MRV; v++) acc[p][v] = CP_MAC(acc[p][v], wv[v], b);
  }
}

void CP_FN(const float *x, size_t cs, const ptrdiff_t *pos, const ptrdiff_t *off, size_t taps,
           size_t c_in, const float *w, float *partial, int start, float *out, size_t out_ld,
           size_t n) {
  CP_VEC acc[CP_NP][CP_MRV];
  const float *xp[CP_NP];
#pragma GCC unroll 16
  for (int p = 0; p < CP_NP; p++) {
    xp[p] = x + pos[p];
#pragma GCC unroll 4
    for (int v = 0; v < CP_MRV; v++)
      acc[p][v] = start ? CP_ZERO() : CP_LOAD(partial + p * CP_MR + CP_LANES * v);
  }
  if (taps == 1) { /* a 1x1 filter: one loop over the channels, the same sums */
    ptrdiff_t o = off[0];
    for (size_t c = 0; c < c_in; c++, w += CP_MR, o += (ptrdiff_t)cs) cp_cl_step(xp, o, w, acc);
  } else {
    for (size_t c = 0; c < c_in; c++) {
      const ptrdiff_t oc = (ptrdiff_t)(c * cs);
      for (size_t t = 0; t < taps; t++, w += CP_MR) cp_cl_step(xp, oc + off[t], w, acc);
    }
  }
  if (out == NULL) {
#pragma GCC unroll 16
    for (int p = 0; p < CP_NP; p++)
#pragma GCC unroll 4
      for (int v = 0; v < CP_MRV; v++) CP_STORE(partial + p * CP_MR + CP_LANES * v, acc[p][v]);
    return;
  }
  float tile[CP_NP][CP_MR] __attribute__((aligned(64)));
#pragma GCC unroll 16
  for (int p = 0; p < CP_NP; p++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_MRV; v++) CP_STORE(&tile[p][CP_LANES * v], acc[p][v]);
  for (size_t m = 0; m < CP_MR; m++)
    for (size_t p = 0; p < n; p++) out[m * out_ld + p] = tile[p][m];
}
