/* f32 channels-in-lanes microkernel, 64 channels x 6 positions, AVX-512F. */
#define CP_FN cp_f32_cl_ukernel_64x6__avx512f
#define CP_MRV 4
#define CP_NP 6
#include "f32-cl-avx512f.h"
