/* Lane-wise helpers shared by the AVX2 microkernels and epilogue rows. */
#ifndef CONVPOOL_VEC_AVX2_H
#define CONVPOOL_VEC_AVX2_H

#include <immintrin.h>

/* The portable row's clamp, lane for lane: v < lo gives lo, then v > hi
   gives hi; a NaN compares false and stays, -0 stays -0 with lo +0. */
static inline __m256 cp_clamp8(__m256 v, __m256 lo, __m256 hi) {
  v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

/* The portable max (a if it is a NaN, else b if it is one, else the larger;
   b of +-0 and -+0), lane for lane. */
static inline __m256 cp_max_nan8(__m256 a, __m256 b) {
  const __m256 m = _mm256_max_ps(a, b); /* b when either is NaN */
  return _mm256_blendv_ps(m, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

#endif
