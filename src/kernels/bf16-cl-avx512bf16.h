/*
 * The bf16 AVX512_BF16 instantiation of cl-template.h (define CP_FN, CP_MRV,
 * CP_NP first): x and w hold bf16 channel pairs (cl-ukernel.h), each
 * broadcast is one 32-bit pair, and vdpbf16ps adds both of a lane's products
 * to its fp32 sum (subnormal inputs read as zero, subnormal sums flushed).
 */
#include "cl-ukernel.h"

#define CP_LANES 16
#define CP_VEC __m512
#define CP_ZERO() _mm512_setzero_ps()
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_STORE(p, v) _mm512_store_ps(p, v)
#define CP_WVEC __m512bh
#define CP_WLOAD(p) ((__m512bh)_mm512_loadu_si512((const void *)(p)))
#define CP_XVEC __m512bh
#define CP_BCAST(p) ((__m512bh)_mm512_set1_epi32(*(const int32_t *)(const void *)(p)))
#define CP_MAC(acc, w, x) _mm512_dpbf16_ps(acc, w, x)
#include "cl-template.h"
