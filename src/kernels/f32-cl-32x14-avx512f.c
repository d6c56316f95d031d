/* f32 channels-in-lanes microkernel, 32 channels x 14 positions, AVX-512F. */
#include "cl-ukernel.h"

#define CP_FN cp_f32_cl_ukernel_32x14__avx512f
#define CP_MRV 2
#define CP_NP 14
#define CP_LANES 16
#define CP_VEC __m512
#define CP_ZERO() _mm512_setzero_ps()
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_STORE(p, v) _mm512_store_ps(p, v)
#define CP_BCAST(p) _mm512_set1_ps(*(p))
#define CP_MAC(acc, w, x) _mm512_fmadd_ps(w, x, acc)
#include "cl-template.h"
