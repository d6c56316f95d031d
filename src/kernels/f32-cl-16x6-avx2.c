/* f32 channels-in-lanes microkernel, 16 channels x 6 positions, AVX2 + FMA. */
#define CP_FN cp_f32_cl_ukernel_16x6__avx2
#define CP_MRV 2
#define CP_NP 6
#include "f32-cl-avx2.h"
