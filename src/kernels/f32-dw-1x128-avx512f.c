/* f32 depthwise microkernel, 1 channel x 128 positions (8 vectors), AVX-512F. */
#define CP_FN cp_f32_dw_ukernel_128__avx512f
#define CP_NRV 8
#define CP_LANES 16
#define CP_VEC __m512
#define CP_ZERO() _mm512_setzero_ps()
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_BCAST(x) _mm512_set1_ps(x)
#define CP_MAC(acc, b, x) _mm512_fmadd_ps(b, x, acc)
#include "dw-template.h"
