/* f32 shift-reduce microkernel, 4 channels x 32 positions, AVX-512F. */
#define CP_FN cp_f32_sr_ukernel_4x32__avx512f
#define CP_MR 4
#define CP_NRV 2
#include "f32-avx512f.h"
