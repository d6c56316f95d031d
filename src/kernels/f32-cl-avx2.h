/* The fp32 AVX2 + FMA instantiation of cl-template.h (define CP_FN, CP_MRV, CP_NP first). */
#include "cl-ukernel.h"

#define CP_LANES 8
#define CP_VEC __m256
#define CP_ZERO() _mm256_setzero_ps()
#define CP_LOAD(p) _mm256_loadu_ps(p)
#define CP_STORE(p, v) _mm256_store_ps(p, v)
#define CP_WVEC __m256
#define CP_WLOAD(p) CP_LOAD(p)
#define CP_XVEC __m256
#define CP_BCAST(p) _mm256_broadcast_ss(p)
#define CP_MAC(acc, w, x) _mm256_fmadd_ps(w, x, acc)
#include "cl-template.h"
