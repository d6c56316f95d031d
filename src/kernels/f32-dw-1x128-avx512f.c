/* f32 depthwise microkernel, 1 channel x 128 positions (8 vectors), AVX-512F. */
#include <immintrin.h>
#include <stddef.h>

#define CP_FN cp_f32_dw_ukernel_128__avx512f
#define CP_NRV 8
#define CP_LANES 16
#define CP_VEC __m512
#define CP_ZERO() _mm512_setzero_ps()
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_STORE_N(p, v, n) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1u), v)
#define CP_BCAST(x) _mm512_set1_ps(x)
#define CP_MAC(acc, b, x) _mm512_fmadd_ps(b, x, acc)
#define CP_COMPACT_FN cp_f32_dw_compact__avx512f
#define CP_COMPRESS_STORE(p, v, mask)                                          \
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << __builtin_popcount(mask)) - 1u), \
                        _mm512_maskz_compress_ps((__mmask16)(mask), v))
#define CP_ROWS_FN cp_f32_dw_rows__avx512f
#define CP_MASK_TAIL(from, to, n)                                       \
  do {                                                                  \
    const __mmask16 tail = (__mmask16)((1u << (n)) - 1u);               \
    _mm512_mask_storeu_ps(to, tail, _mm512_maskz_loadu_ps(tail, from)); \
  } while (0)
#define CP_ROWS2_FN cp_f32_dw_rows2__avx512f
/* from[0], from[2], ... from[2n - 2] in the low n lanes, from two masked loads */
static inline __m512 cp_dw_even(const float *from, size_t n) {
  const size_t m = 2 * n - 1; /* elements read */
  const __mmask16 lo = m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u);
  const __mmask16 hi = m >= 32  ? (__mmask16)0xffff
                       : m > 16 ? (__mmask16)((1u << (m - 16)) - 1u)
                                : 0;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, from), even,
                                _mm512_maskz_loadu_ps(hi, from + 16));
}
#define CP_EVEN(from, n) cp_dw_even(from, n)
#define CP_MASK_STORE(to, n, v) _mm512_mask_storeu_ps(to, (__mmask16)((1u << (n)) - 1u), v)
#include "dw-template.h"
