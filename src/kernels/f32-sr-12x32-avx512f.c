/* f32 shift-reduce microkernel, 12 channels x 32 positions, avx512f. */
#include <stdint.h>

#include "ukernel.h"

#define CP_MR 12
#define CP_ELEM float
#define CP_FN cp_f32_sr_ukernel_12x32__avx512f
#define CP_NRV 2
#define CP_LOAD(p) _mm512_loadu_ps(p)
#include "sr-avx512f.h"
