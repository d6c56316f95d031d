/*
 * The bf16 AVX512_BF16 instantiation of sr-template.h (define CP_FN, CP_MR,
 * CP_NRV first). The panel holds channel pairs interleaved (32 bits per
 * position: channel 2c in the low half, 2c+1 in the high half); weights are
 * packed as pairs the same way. vdpbf16ps adds both products of a pair to the
 * fp32 accumulator (it treats subnormal bf16 inputs as zero).
 */
#include <stdint.h>

#include "ukernel.h"

#define CP_ELEM uint32_t
#include "avx512-common.h"
#define CP_XVEC __m512bh
#define CP_LOAD(p) ((__m512bh)_mm512_loadu_si512((const void *)(p)))
#define CP_BVEC __m512bh
#define CP_BCAST(p) ((__m512bh)_mm512_set1_epi32(*(const int32_t *)(const void *)(p)))
#define CP_MAC(acc, b, x) _mm512_dpbf16_ps(acc, b, x)
#include "sr-template.h"
