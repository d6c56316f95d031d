/* F16C half <-> fp32 row conversions (compiled with -mavx2 -mf16c). */
#include <immintrin.h>

#include "convert.h"
#include "half.h"

void cp_widen_f16_f16c(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = cp_half_to_float(src[i]);
}

void cp_narrow_f16_f16c(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = cp_float_to_half(src[i]);
}
