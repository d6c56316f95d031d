/* f32 depthwise microkernel, 1 channel x 64 positions (8 vectors), AVX2 + FMA. */
#define CP_FN cp_f32_dw_ukernel_64__avx2
#define CP_NRV 8
#define CP_LANES 8
#define CP_VEC __m256
#define CP_ZERO() _mm256_setzero_ps()
#define CP_LOAD(p) _mm256_loadu_ps(p)
#define CP_STORE(p, v) _mm256_storeu_ps(p, v)
/* lanes [0, n) through a mask of -1s and 0s */
#define CP_STORE_N(p, v, n)                                                                       \
  _mm256_maskstore_ps(                                                                            \
      p,                                                                                          \
      _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), \
      v)
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
