/* Winograd F(4x4, 3x3) transforms, AVX2 + FMA: 8 tiles per vector. */
#define CP_V __m256
#define CP_VW 8
#define CP_W_LOADU(p) _mm256_loadu_ps(p)
#define CP_W_STOREU(p, x) _mm256_storeu_ps(p, x)
#define CP_W_SET1(c) _mm256_set1_ps(c)
#define CP_W_ZERO() _mm256_setzero_ps()
#define CP_W_ADD(x, y) _mm256_add_ps(x, y)
#define CP_W_SUB(x, y) _mm256_sub_ps(x, y)
#define CP_W_MUL(x, y) _mm256_mul_ps(x, y)
#define CP_W_FMA(x, y, z) _mm256_fmadd_ps(x, y, z)
#define CP_W_FNMA(x, y, z) _mm256_fnmadd_ps(x, y, z)
#define CP_W_ABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define CP_W_MAX(x, y) _mm256_max_ps(x, y)
#define CP_W_UNPACKLO(x, y) _mm256_unpacklo_ps(x, y)
#define CP_W_UNPACKHI(x, y) _mm256_unpackhi_ps(x, y)
#define CP_W_SHUF(x, y, imm) _mm256_shuffle_ps(x, y, imm)
#define CP_W_INPUT_FN cp_wino_input_avx2
#define CP_W_OUTPUT_FN cp_wino_output_avx2
#define CP_W_OUTPUT_CL_FN cp_wino_output_cl_avx2
#include "transform-template.h"
