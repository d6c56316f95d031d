/* f32 shift-reduce microkernel, 8 channels x 32 positions, AVX-512F. */
#include <stdint.h>

#include "ukernel.h"

#define CP_FN cp_f32_sr_ukernel_8x32__avx512f
#define CP_MR 8
#define CP_NRV 2
#define CP_ELEM float
#include "avx512-common.h"
#define CP_XVEC __m512
#define CP_LOAD(p) _mm512_loadu_ps(p)
#define CP_BVEC __m512
#define CP_BCAST(p) _mm512_set1_ps(*(p))
#define CP_MAC(acc, b, x) _mm512_fmadd_ps(b, x, acc)
#include "sr-template.h"
