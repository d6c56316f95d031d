/* Accumulator definitions shared by the AVX-512 microkernels. */
#include <immintrin.h>

#define CP_ACC __m512
#define CP_LANES 16
#define CP_ZERO() _mm512_setzero_ps()
#define CP_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_LOADACC(p) _mm512_loadu_ps(p)
#define CP_SET1(f) _mm512_set1_ps(f)
#define CP_ADD(a, b) _mm512_add_ps(a, b)
#define CP_CLAMP(v, lo, hi) cp_sr_clamp16(v, lo, hi)

/* The epilogue's clamp: v < lo gives lo, then v > hi gives hi (NaN stays). */
static inline __m512 cp_sr_clamp16(__m512 v, __m512 lo, __m512 hi) {
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
}
