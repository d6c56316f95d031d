/* f32 shift-reduce microkernel, 8 channels x 16 positions, AVX-512F (Winograd's products when
   an item has few tiles: one vector of positions). */
#define CP_FN cp_f32_sr_ukernel_8x16__avx512f
#define CP_MR 8
#define CP_NRV 1
#include "f32-avx512f.h"
