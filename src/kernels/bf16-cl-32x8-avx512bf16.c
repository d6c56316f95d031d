/* bf16 channels-in-lanes microkernel, 32 channels x 8 positions, AVX512_BF16. */
#define CP_FN cp_bf16_cl_ukernel_32x8__avx512bf16
#define CP_MRV 2
#define CP_NP 8
#include "bf16-cl-avx512bf16.h"
