/* The fp32 AVX-512F instantiation of cl-template.h (define CP_FN, CP_MRV, CP_NP first). */
#include "cl-ukernel.h"

#define CP_LANES 16
#define CP_VEC __m512
#define CP_ZERO() _mm512_setzero_ps()
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_STORE(p, v) _mm512_store_ps(p, v)
#define CP_WVEC __m512
#define CP_WLOAD(p) CP_LOAD(p)
#define CP_XVEC __m512
#define CP_BCAST(p) _mm512_set1_ps(*(p))
#define CP_MAC(acc, w, x) _mm512_fmadd_ps(w, x, acc)
#include "cl-template.h"
