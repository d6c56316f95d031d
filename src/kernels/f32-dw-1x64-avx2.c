/* f32 depthwise microkernel, 1 channel x 64 positions (8 vectors), AVX2 + FMA. */
#include <string.h>

#define CP_FN cp_f32_dw_ukernel_64__avx2
#define CP_NRV 8
#define CP_LANES 8
#define CP_VEC __m256
#define CP_ZERO() _mm256_setzero_ps()
#define CP_LOAD(p) _mm256_loadu_ps(p)
#define CP_STORE(p, v) _mm256_storeu_ps(p, v)
/* lanes [0, n) through the stack: vmaskmovps stores are microcoded on AMD's
   cores, tens of cycles each */
#define CP_STORE_N(p, v, n)                        \
  do {                                             \
    float part_[8];                                \
    _mm256_storeu_ps(part_, v);                    \
    memcpy(p, part_, (size_t)(n) * sizeof(float)); \
  } while (0)
#define CP_BCAST(x) _mm256_set1_ps(x)
#define CP_MAC(acc, b, x) _mm256_fmadd_ps(b, x, acc)
#define CP_COMPACT_FN cp_f32_dw_compact__avx2
#define CP_COMPRESS_STORE(p, v, mask)            \
  do {                                           \
    float lane_[8];                              \
    _mm256_storeu_ps(lane_, v);                  \
    float *to_ = (p);                            \
    for (int l_ = 0; l_ < 8; l_++)               \
      if ((mask) >> l_ & 1u) *to_++ = lane_[l_]; \
  } while (0)
#define CP_SPLIT2_FN cp_f32_dw_split2__avx2
#define CP_ROWS_FN cp_f32_dw_rows__avx2
#define CP_ROWS2_FN cp_f32_dw_rows2__avx2
#include "dw-template.h"

/* Channels in lanes (dw-ukernel.h): 8 positions x 8 channels, each tap's
   weights one vector and each position's input one load. */
#include "../vec-avx2.h"

void cp_f32_dw_lanes__avx2(const float *x, const ptrdiff_t *pos, const ptrdiff_t *off, size_t taps,
                           const float *w, float *out, size_t n) {
  const float *p0 = x + pos[0], *p1 = x + pos[1], *p2 = x + pos[2], *p3 = x + pos[3];
  const float *p4 = x + pos[4], *p5 = x + pos[5], *p6 = x + pos[6], *p7 = x + pos[7];
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t t = 0; t < taps; t++) {
    const __m256 b = _mm256_loadu_ps(w + t * CP_DW_LANES);
    const ptrdiff_t o = off[t];
    a0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p0 + o), a0);
    a1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p1 + o), a1);
    a2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p2 + o), a2);
    a3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p3 + o), a3);
    a4 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p4 + o), a4);
    a5 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p5 + o), a5);
    a6 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p6 + o), a6);
    a7 = _mm256_fmadd_ps(b, _mm256_loadu_ps(p7 + o), a7);
  }
  const __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (size_t p = 0; p < n; p++) _mm256_storeu_ps(out + p * CP_DW_LANES, acc[p]);
}

/* Eight columns of the runs from c on, transposed: vectors j < n stored
   from `to` on, rows of `row` elements to_ld positions apart (at column x
   of its row). */
static inline void cp_dw_transpose_group(const float *const *src, size_t c, size_t first, size_t x,
                                         size_t row, size_t to_ld, float **to) {
  __m256 r[8];
  for (int l = 0; l < 8; l++) r[l] = _mm256_loadu_ps(src[l] + c);
  cp_transpose8(r);
  for (size_t j = first; j < 8; j++) {
    _mm256_storeu_ps(*to, r[j]);
    *to += CP_DW_LANES;
    if (++x == row) x = 0, *to += (to_ld - row) * CP_DW_LANES;
  }
}

void cp_f32_dw_transpose__avx2(const float *const *src, size_t n, size_t row, size_t to_ld,
                               float *to) {
  size_t c = 0, x = 0;
  for (; c + 8 <= n; c += 8) {
    cp_dw_transpose_group(src, c, 0, x, row, to_ld, &to);
    x = (x + 8) % row;
  }
  if (c == n) return;
  if (n >= 8) { /* the last 8 columns, storing the n - c not yet stored */
    cp_dw_transpose_group(src, n - 8, 8 - (n - c), x, row, to_ld, &to);
    return;
  }
  /* fewer than 8 in all: through the stack, no read past a run */
  float part[8][8] = {{0}};
  __m256 r[8];
  for (int l = 0; l < 8; l++) memcpy(part[l], src[l], n * sizeof(float));
  for (int l = 0; l < 8; l++) r[l] = _mm256_loadu_ps(part[l]);
  cp_transpose8(r);
  for (size_t j = 0; j < n; j++) {
    _mm256_storeu_ps(to, r[j]);
    to += CP_DW_LANES;
    if (++x == row) x = 0, to += (to_ld - row) * CP_DW_LANES;
  }
}
