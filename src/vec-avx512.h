/* Lane-wise helpers shared by the AVX-512 microkernels and epilogue rows. */
#ifndef CONVPOOL_VEC_AVX512_H
#define CONVPOOL_VEC_AVX512_H

#include <immintrin.h>

/* The portable row's clamp, lane for lane: v < lo gives lo, then v > hi
   gives hi; a NaN compares false and stays, -0 stays -0 with lo +0. */
static inline __m512 cp_clamp16(__m512 v, __m512 lo, __m512 hi) {
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
}

/* The portable max (a if it is a NaN, else b if it is one, else the larger;
   b of +-0 and -+0), lane for lane. */
static inline __m512 cp_max_nan16(__m512 a, __m512 b) {
  const __m512 m = _mm512_max_ps(a, b); /* b when either is NaN */
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), m, a);
}

#endif
