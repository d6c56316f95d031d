/*
 * f32 channels-in-lanes microkernel, 16 channels x 5 positions, AVX2 + FMA:
 * the family member for outputs that 6-wide tiles cover badly (a 7x7
 * output, 49 positions: 10 tiles of 5 compute 50 where 16x6 computes 54; a
 * row of 14: 15 against 18). 89-101% of the one-thread peak alone, as 16x6.
 */
#define CP_FN cp_f32_cl_ukernel_16x5__avx2
#define CP_MRV 2
#define CP_NP 5
#include "f32-cl-avx2.h"
