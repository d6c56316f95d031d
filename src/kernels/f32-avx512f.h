/* The fp32 AVX-512F instantiation of sr-template.h (define CP_FN, CP_MR, CP_NRV first). */
#include <stdint.h>

#include "ukernel.h"

#define CP_ELEM float
#include "avx512-common.h"
#define CP_XVEC __m512
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_BVEC __m512
#define CP_BCAST(p) _mm512_set1_ps(*(p))
#define CP_MAC(acc, b, x) _mm512_fmadd_ps(b, x, acc)
#include "sr-template.h"
