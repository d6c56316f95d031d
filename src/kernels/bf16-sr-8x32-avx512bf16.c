/* bf16 shift-reduce microkernel, 8 output channels x 32 positions, AVX512_BF16. */
#define CP_FN cp_bf16_sr_ukernel_8x32__avx512bf16
#define CP_MR 8
#define CP_NRV 2
#include "bf16-avx512bf16.h"
