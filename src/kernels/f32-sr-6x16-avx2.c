/* f32 shift-reduce microkernel, 6 channels x 16 positions, avx2. */
#include <stdint.h>

#include "ukernel.h"

#define CP_MR 6
#define CP_ELEM float
#define CP_FN cp_f32_sr_ukernel_6x16__avx2
#define CP_NRV 2
#define CP_LOAD(p) _mm256_loadu_ps(p)
#include "sr-avx2.h"
