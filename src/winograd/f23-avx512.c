/* Winograd F(2x2, 3x3) transforms, AVX-512F: 16 tiles per vector. */
#include <immintrin.h>

static inline __m512 cp_w2_load_tiles(const float *p, const size_t *o) {
  __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(p + o[0]));
  v = _mm512_insertf32x4(v, _mm_loadu_ps(p + o[4]), 1);
  v = _mm512_insertf32x4(v, _mm_loadu_ps(p + o[8]), 2);
  return _mm512_insertf32x4(v, _mm_loadu_ps(p + o[12]), 3);
}

#define CP_V __m512
#define CP_VW 16
#define CP_W_LOAD_TILES(p, o) cp_w2_load_tiles(p, o)
#define CP_W_LOADU(p) _mm512_loadu_ps(p)
#define CP_W_STOREU(p, x) _mm512_storeu_ps(p, x)
#define CP_W_ZERO() _mm512_setzero_ps()
#define CP_W_ADD(x, y) _mm512_add_ps(x, y)
#define CP_W_SUB(x, y) _mm512_sub_ps(x, y)
#define CP_W_ABS(x) _mm512_abs_ps(x)
#define CP_W_MAX(x, y) _mm512_max_ps(x, y)
#define CP_W_UNPACKLO(x, y) _mm512_unpacklo_ps(x, y)
#define CP_W_UNPACKHI(x, y) _mm512_unpackhi_ps(x, y)
#define CP_W_SHUF(x, y, imm) _mm512_shuffle_ps(x, y, imm)
#define CP_W_INPUT_FN cp_wino_input_f23_avx512
#define CP_W_OUTPUT_CL_FN cp_wino_output_cl_f23_avx512
#include "f23-template.h"
