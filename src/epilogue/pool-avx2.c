/* The AVX2 epilogue row for any window, stride and residual, clipped rows
   included (see epilogue.h and the AVX-512 row, which it follows): bias after
   the max and the activation clamp; 16-bit outputs through the params'
   narrow, as the portable row stores them. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "epilogue.h"

/* The first lanes below end - at (all 8 past it). */
static inline __m256i cp_lanes_below8(size_t at, size_t end) {
  const int left = at >= end ? 0 : end - at >= 8 ? 8 : (int)(end - at);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* max(a, b) that returns a if it is a NaN, else b if it is one. */
static inline __m256 cp_max_nan8(__m256 a, __m256 b) {
  const __m256 m = _mm256_max_ps(a, b); /* b when either is NaN */
  return _mm256_blendv_ps(m, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

static inline float cp_maxf(float a, float b) {
  return (a > b || a != a) ? a : b;
}

void cp_epilogue_row_any_avx2(const cp_epilogue_params *p, const cp_pool_row *row,
                              const float *bias, void *dst) {
  const size_t P = p->pool, S = p->stride, cols = row->cols, n = row->n, ld = row->ld;
  const size_t off = row->off;
  const float *colmax = row->src;
  float *wmax = row->tmp + cols;
  if (row->res != NULL || row->rows > 1) {
    float *m = row->tmp, *widened = row->tmp + cols + n;
    for (size_t a = 0; a < row->rows; a++) {
      const float *v = row->src + a * ld, *r = NULL;
      if (row->res != NULL && p->res_widen != NULL) {
        p->res_widen((const uint16_t *)row->res + a * row->res_ld, widened, cols);
        r = widened;
      } else if (row->res != NULL) {
        r = (const float *)row->res + a * row->res_ld;
      }
      for (size_t x = 0; x < cols; x += 8) {
        const __m256i k = cp_lanes_below8(x, cols);
        __m256 s = _mm256_maskload_ps(v + x, k);
        if (r != NULL) s = _mm256_add_ps(s, _mm256_maskload_ps(r + x, k));
        if (a > 0) s = cp_max_nan8(_mm256_maskload_ps(m + x, k), s);
        _mm256_maskstore_ps(m + x, k, s);
      }
    }
    colmax = m;
  }
  /* outputs [t0, t1) have whole windows: t*S >= off and t*S - off + P <= cols */
  size_t t0 = (off + S - 1) / S, t1 = cols + off >= P ? (cols + off - P) / S + 1 : 0;
  if (t1 > n) t1 = n;
  if (t0 > t1) t0 = t1;
  for (size_t t = 0; t < n; t++) {
    if (t == t0) t = t1; /* the whole windows: vectors, below */
    if (t >= n) break;
    /* window [t*S - off, t*S - off + P) clipped to [0, cols); never empty */
    const size_t lo = t * S > off ? t * S - off : 0;
    const size_t hi = t * S + P - off < cols ? t * S + P - off : cols;
    float v = colmax[lo];
    for (size_t x = lo + 1; x < hi; x++) v = cp_maxf(v, colmax[x]);
    wmax[t] = v;
  }
  const __m256i step =
      _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)S));
  for (size_t t = t0; t < t1; t += 8) {
    const __m256i mask = cp_lanes_below8(t, t1);
    __m256 v = _mm256_setzero_ps();
    for (size_t j = 0; j < P; j++) {
      const size_t x = t * S - off + j; /* column of lane 0's window tap j */
      __m256 c;
      if (S == 1) {
        c = _mm256_maskload_ps(colmax + x, cp_lanes_below8(x, cols));
      } else if (S == 2) {
        const __m256 lo = _mm256_maskload_ps(colmax + x, cp_lanes_below8(x, cols));
        const __m256 hi = _mm256_maskload_ps(colmax + x + 8, cp_lanes_below8(x + 8, cols));
        /* even lanes: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6, then the 64-bit halves in order */
        c = _mm256_castpd_ps(
            _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
      } else {
        c = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), colmax + x, step,
                                     _mm256_castsi256_ps(mask), 4);
      }
      v = j == 0 ? c : cp_max_nan8(v, c);
    }
    _mm256_maskstore_ps(wmax + t, mask, v);
  }
  const __m256 b = _mm256_set1_ps(bias != NULL ? *bias : 0.0f);
  const __m256 act_lo = _mm256_set1_ps(p->min), act_hi = _mm256_set1_ps(p->max);
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  float *out = p->narrow != NULL ? wmax : (float *)dst;
  for (size_t t = 0; t < n; t += 8) {
    const __m256i mask = cp_lanes_below8(t, n);
    __m256 v = _mm256_maskload_ps(wmax + t, mask);
    if (bias != NULL) v = _mm256_add_ps(v, b);
    if (clamp) { /* the portable order: v < min gives min, then v > max gives max */
      v = _mm256_blendv_ps(v, act_lo, _mm256_cmp_ps(v, act_lo, _CMP_LT_OQ));
      v = _mm256_blendv_ps(v, act_hi, _mm256_cmp_ps(v, act_hi, _CMP_GT_OQ));
    }
    _mm256_maskstore_ps(out + t, mask, v);
  }
  if (p->narrow != NULL) p->narrow(wmax, (uint16_t *)dst, n);
}
