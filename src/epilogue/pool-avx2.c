/* The AVX2 epilogue rows: pool 1 of stride 1, with or without a residual,
   and any window, stride and residual, clipped rows included
   (pool-any-template.h); 16-bit outputs through the params' narrow, as the
   portable row stores them.

   Masked stores (vmaskmovps) are microcoded on AMD's cores, tens of cycles
   each: full vectors are stored whole and a row's last partial vector goes
   through the stack. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../vec-avx2.h"
#include "epilogue.h"

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

/* The lanes of mask (always the first few: cp_below8's) of v to p. */
static inline void cp_store8(float *p, __m256i mask, __m256 v) {
  const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(mask));
  if (lanes == 0xff) {
    _mm256_storeu_ps(p, v);
  } else {
    float lane[8];
    _mm256_storeu_ps(lane, v);
    memcpy(p, lane, (size_t)__builtin_popcount((unsigned)lanes) * sizeof(float));
  }
}

/* Pool 1 of stride 1: conv (+ residual), then bias and clamp, the portable
   row's order (a window of one value is that value), for any run of n
   values of one channel (the driver's compact rows): 16-bit residuals and
   outputs go through 64 values on the stack at a time, so it needs no
   scratch. */
#define CP_POOL1_CHUNK 64
void cp_epilogue_row_pool1_avx2(const cp_epilogue_params *p, const cp_pool_row *row,
                                const float *bias, void *dst) {
  const size_t n = row->n;
  const __m256 b = _mm256_set1_ps(bias != NULL ? *bias : 0.0f);
  const __m256 lo = _mm256_set1_ps(p->min), hi = _mm256_set1_ps(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  float wide[CP_POOL1_CHUNK], narrow[CP_POOL1_CHUNK];
  for (size_t c0 = 0; c0 < n; c0 += CP_POOL1_CHUNK) {
    const size_t k = n - c0 < CP_POOL1_CHUNK ? n - c0 : CP_POOL1_CHUNK;
    const float *src = row->src + c0, *res = NULL;
    if (row->res != NULL && p->res_widen != NULL) {
      p->res_widen((const uint16_t *)row->res + c0, wide, k);
      res = wide;
    } else if (row->res != NULL) {
      res = (const float *)row->res + c0;
    }
    float *out = p->narrow != NULL ? narrow : (float *)dst + c0;
    for (size_t t = 0; t < k; t += 8) {
      const __m256i mask = cp_below8(t, k);
      __m256 v = k - t >= 8 ? _mm256_loadu_ps(src + t) : _mm256_maskload_ps(src + t, mask);
      if (res != NULL)
        v = _mm256_add_ps(
            v, k - t >= 8 ? _mm256_loadu_ps(res + t) : _mm256_maskload_ps(res + t, mask));
      if (bias != NULL) v = _mm256_add_ps(v, b);
      if (clamp) v = cp_clamp8(v, lo, hi);
      cp_store8(out + t, mask, v);
    }
    if (p->narrow != NULL) p->narrow(narrow, (uint16_t *)dst + c0, k);
  }
}

#define CP_E_FN cp_epilogue_row_any_avx2
#define CP_E_V __m256
#define CP_E_W 8
#define CP_E_MASK_T __m256i
#define CP_E_BELOW(at, end) cp_below8(at, end)
#define CP_E_LOAD(ptr, mask) _mm256_maskload_ps(ptr, mask)
/* whole vectors with plain loads: vmaskmovps loads wait longer on AMD's cores
   (the stem's 3x3 stride-2 pool: the epilogue's hottest instructions) */
#define CP_E_LOAD_BELOW(ptr, at, end) \
  ((at) + 8 <= (end) ? _mm256_loadu_ps(ptr) : _mm256_maskload_ps(ptr, cp_below8(at, end)))
#define CP_E_STORE(ptr, mask, v) cp_store8(ptr, mask, v)
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
  cp_store8(((p)->narrow != NULL ? (wmax) : (float *)(dst)) + (t), mask, v)
#define CP_E_NARROW_AFTER
#include "pool-any-template.h"
