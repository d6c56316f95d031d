/* The AVX2 epilogue row for any window, stride and residual, clipped rows
   included (pool-any-template.h); 16-bit outputs through the params'
   narrow, as the portable row stores them. */
#include <immintrin.h>

/* a if it is a NaN, else b if it is one, else the larger */
static inline __m256 cp_max_nan8(__m256 a, __m256 b) {
  const __m256 m = _mm256_max_ps(a, b); /* b when either is NaN */
  return _mm256_blendv_ps(m, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

/* the portable order: v < min gives min, then v > max gives max */
static inline __m256 cp_clamp8(__m256 v, __m256 lo, __m256 hi) {
  v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

/* lanes 0, 2, 4, 6 of lo, then of hi */
static inline __m256 cp_even8(__m256 lo, __m256 hi) {
  /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6, then the 64-bit halves in order */
  return _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
}

static inline __m256i cp_below8(size_t at, size_t end) {
  const int left = at >= end ? 0 : end - at >= 8 ? 8 : (int)(end - at);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define CP_E_FN cp_epilogue_row_any_avx2
#define CP_E_V __m256
#define CP_E_W 8
#define CP_E_MASK_T __m256i
#define CP_E_BELOW(at, end) cp_below8(at, end)
#define CP_E_LOAD(ptr, mask) _mm256_maskload_ps(ptr, mask)
#define CP_E_STORE(ptr, mask, v) _mm256_maskstore_ps(ptr, mask, v)
#define CP_E_ZERO() _mm256_setzero_ps()
#define CP_E_SET1(x) _mm256_set1_ps(x)
#define CP_E_ADD(a, b) _mm256_add_ps(a, b)
#define CP_E_MAX_NAN(a, b) cp_max_nan8(a, b)
#define CP_E_CLAMP(v, lo, hi) cp_clamp8(v, lo, hi)
#define CP_E_EVEN(lo, hi) cp_even8(lo, hi)
#define CP_E_STEP_T __m256i
#define CP_E_STEP(s) \
  _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)(s)))
#define CP_E_GATHER(base, step, mask) \
  _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, step, _mm256_castsi256_ps(mask), 4)
#define CP_E_OUT(p, dst, wmax, t, v, mask) \
  _mm256_maskstore_ps(((p)->narrow != NULL ? (wmax) : (float *)(dst)) + (t), mask, v)
#define CP_E_NARROW_AFTER
#include "pool-any-template.h"
