/* Winograd F(2x2, 3x3) transforms, AVX2: 8 tiles per vector. */
#include <immintrin.h>

static inline __m256 cp_w2_load_tiles(const float *p, const size_t *o) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + o[0])),
                              _mm_loadu_ps(p + o[4]), 1);
}

#define CP_V __m256
#define CP_VW 8
#define CP_W_LOAD_TILES(p, o) cp_w2_load_tiles(p, o)
#define CP_W_LOADU(p) _mm256_loadu_ps(p)
#define CP_W_STOREU(p, x) _mm256_storeu_ps(p, x)
#define CP_W_ZERO() _mm256_setzero_ps()
#define CP_W_ADD(x, y) _mm256_add_ps(x, y)
#define CP_W_SUB(x, y) _mm256_sub_ps(x, y)
#define CP_W_ABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define CP_W_MAX(x, y) _mm256_max_ps(x, y)
#define CP_W_UNPACKLO(x, y) _mm256_unpacklo_ps(x, y)
#define CP_W_UNPACKHI(x, y) _mm256_unpackhi_ps(x, y)
#define CP_W_SHUF(x, y, imm) _mm256_shuffle_ps(x, y, imm)
#define CP_W_INPUT_FN cp_wino_input_f23_avx2
#define CP_W_OUTPUT_CL_FN cp_wino_output_cl_f23_avx2
#include "f23-template.h"
