/* Winograd F(4x4, 3x3) transforms, AVX-512F: 16 tiles per vector. */
#define CP_V __m512
#define CP_VW 16
#define CP_W_LOADU(p) _mm512_loadu_ps(p)
#define CP_W_STOREU(p, x) _mm512_storeu_ps(p, x)
#define CP_W_SET1(c) _mm512_set1_ps(c)
#define CP_W_ZERO() _mm512_setzero_ps()
#define CP_W_ADD(x, y) _mm512_add_ps(x, y)
#define CP_W_SUB(x, y) _mm512_sub_ps(x, y)
#define CP_W_MUL(x, y) _mm512_mul_ps(x, y)
#define CP_W_FMA(x, y, z) _mm512_fmadd_ps(x, y, z)
#define CP_W_FNMA(x, y, z) _mm512_fnmadd_ps(x, y, z)
#define CP_W_ABS(x) _mm512_abs_ps(x)
#define CP_W_MAX(x, y) _mm512_max_ps(x, y)
#define CP_W_UNPACKLO(x, y) _mm512_unpacklo_ps(x, y)
#define CP_W_UNPACKHI(x, y) _mm512_unpackhi_ps(x, y)
#define CP_W_SHUF(x, y, imm) _mm512_shuffle_ps(x, y, imm)
#define CP_W_INPUT_FN cp_wino_input_avx512
#define CP_W_OUTPUT_FN cp_wino_output_avx512
#define CP_W_OUTPUT_CL_FN cp_wino_output_cl_avx512
#include "transform-template.h"
