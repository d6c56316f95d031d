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
