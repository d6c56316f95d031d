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
/* m elements from `from` split: the even ones to even[0 .. ne), the odd ones
   to odd[0 .. no) (m = ne + no <= 32) */
static inline void cp_dw_split(const float *from, size_t m, float *even, size_t ne, float *odd,
                               size_t no) {
  const __mmask16 lo = m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u);
  const __mmask16 hi = m >= 32  ? (__mmask16)0xffff
                       : m > 16 ? (__mmask16)((1u << (m - 16)) - 1u)
                                : 0;
  const __m512 a = _mm512_maskz_loadu_ps(lo, from), b = _mm512_maskz_loadu_ps(hi, from + 16);
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  _mm512_mask_storeu_ps(even, ne >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ne) - 1u),
                        _mm512_permutex2var_ps(a, ie, b));
  if (no > 0)
    _mm512_mask_storeu_ps(odd, no >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << no) - 1u),
                          _mm512_permutex2var_ps(a, io, b));
}
#define CP_SPLIT(from, m, even, ne, odd, no) cp_dw_split(from, m, even, ne, odd, no)
#define CP_SPLIT2_FN cp_f32_dw_split2__avx512f
#define CP_MASK_STORE(to, n, v) _mm512_mask_storeu_ps(to, (__mmask16)((1u << (n)) - 1u), v)
#include "dw-template.h"
