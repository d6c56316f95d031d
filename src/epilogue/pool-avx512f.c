/* AVX-512F epilogue rows (see epilogue.h): pool 1 and pool 2 with stride =
   pool and no residual, and any window, stride and residual; all with the
   bias after the max and the activation clamp (cp_epilogue_select picks
   them only then). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "../vec-avx512.h"
#include "epilogue.h"

/* fp32 -> bfloat16 bits, round to nearest even, NaN kept quiet. */
static inline __m256i cp_to_bf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan,
                            _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

static inline void cp_store16(void *dst, size_t t, __m512 v, __mmask16 mask, cp_store_kind store) {
  if (store == CP_STORE_F16)
    _mm256_mask_storeu_epi16((uint16_t *)dst + t, mask,
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  else if (store == CP_STORE_BF16)
    _mm256_mask_storeu_epi16((uint16_t *)dst + t, mask, cp_to_bf16(v));
  else
    _mm512_mask_storeu_ps((float *)dst + t, mask, v);
}

void cp_epilogue_row_pool1_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                   const float *bias, void *dst) {
  const cp_store_kind store = p->store;
  const float *src = row->src;
  const size_t n = row->n;
  const __m512 b = _mm512_set1_ps(bias != NULL ? *bias : 0.0f);
  const __m512 lo = _mm512_set1_ps(p->min), hi = _mm512_set1_ps(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  for (size_t t = 0; t < n; t += 16) {
    const __mmask16 mask = n - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - t)) - 1u);
    __m512 v = _mm512_maskz_loadu_ps(mask, src + t);
    if (bias != NULL) v = _mm512_add_ps(v, b);
    if (clamp) v = cp_clamp16(v, lo, hi);
    cp_store16(dst, t, v, mask, store);
  }
}

/* Pool 1 of stride 1 with a residual: conv + residual, then bias and clamp,
   the portable row's order (its window of one value is that value). A
   16-bit residual is widened 16 values at a time, so any run of a row (the
   driver's compact rows) needs no scratch. */
void cp_epilogue_row_pool1_res_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                       const float *bias, void *dst) {
  const cp_store_kind store = p->store;
  const float *src = row->src;
  const size_t n = row->n;
  const __m512 b = _mm512_set1_ps(bias != NULL ? *bias : 0.0f);
  const __m512 lo = _mm512_set1_ps(p->min), hi = _mm512_set1_ps(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  float wide[16];
  for (size_t t = 0; t < n; t += 16) {
    const size_t k = n - t >= 16 ? 16 : n - t;
    const __mmask16 mask = k == 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1u);
    __m512 r;
    if (p->res_widen != NULL) {
      p->res_widen((const uint16_t *)row->res + t, wide, k);
      r = _mm512_maskz_loadu_ps(mask, wide);
    } else {
      r = _mm512_maskz_loadu_ps(mask, (const float *)row->res + t);
    }
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, src + t), r);
    if (bias != NULL) v = _mm512_add_ps(v, b);
    if (clamp) v = cp_clamp16(v, lo, hi);
    cp_store16(dst, t, v, mask, store);
  }
}

void cp_epilogue_row_pool2_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                   const float *bias, void *dst) {
  const cp_store_kind store = p->store;
  const float *src = row->src;
  const size_t n = row->n, ld = row->ld;
  const __m512 b = _mm512_set1_ps(bias != NULL ? *bias : 0.0f);
  const __m512 act_lo = _mm512_set1_ps(p->min), act_hi = _mm512_set1_ps(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (size_t t = 0; t < n; t += 16) {
    const size_t left = n - t >= 16 ? 32 : 2 * (n - t); /* conv columns in this step */
    const __mmask16 m0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
    const __mmask16 m1 = left >= 32  ? (__mmask16)0xffff
                         : left > 16 ? (__mmask16)((1u << (left - 16)) - 1u)
                                     : 0;
    const float *r0 = src + 2 * t, *r1 = r0 + ld;
    const __m512 lo = cp_max_nan16(_mm512_maskz_loadu_ps(m0, r0), _mm512_maskz_loadu_ps(m0, r1));
    const __m512 hi =
        cp_max_nan16(_mm512_maskz_loadu_ps(m1, r0 + 16), _mm512_maskz_loadu_ps(m1, r1 + 16));
    __m512 v =
        cp_max_nan16(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
    if (bias != NULL) v = _mm512_add_ps(v, b);
    if (clamp) v = cp_clamp16(v, act_lo, act_hi);
    const __mmask16 mask = n - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - t)) - 1u);
    cp_store16(dst, t, v, mask, store);
  }
}

/* The row for any window, stride and residual (pool-any-template.h). */
#define CP_E_FN cp_epilogue_row_any_avx512f
#define CP_E_V __m512
#define CP_E_W 16
#define CP_E_MASK_T __mmask16
#define CP_E_BELOW(at, end)                 \
  ((at) >= (end)        ? (__mmask16)0      \
   : (end) - (at) >= 16 ? (__mmask16)0xffff \
                        : (__mmask16)((1u << ((end) - (at))) - 1u))
#define CP_E_LOAD(ptr, mask) _mm512_maskz_loadu_ps(mask, ptr)
#define CP_E_STORE(ptr, mask, v) _mm512_mask_storeu_ps(ptr, mask, v)
#define CP_E_ZERO() _mm512_setzero_ps()
#define CP_E_SET1(x) _mm512_set1_ps(x)
#define CP_E_ADD(a, b) _mm512_add_ps(a, b)
#define CP_E_MAX_NAN(a, b) cp_max_nan16(a, b)
#define CP_E_CLAMP(v, lo, hi) cp_clamp16(v, lo, hi)
#define CP_E_EVEN(lo, hi) \
  _mm512_permutex2var_ps( \
      lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi)
#define CP_E_STEP_T __m512i
#define CP_E_STEP(s)                                                                          \
  _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), \
                     _mm512_set1_epi32((int)(s)))
#define CP_E_GATHER(base, step, mask) \
  _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, step, base, 4)
#define CP_E_OUT(p, dst, wmax, t, v, mask) cp_store16(dst, t, v, mask, (p)->store)
#include "pool-any-template.h"
