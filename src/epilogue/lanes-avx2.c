/* The lanes row with AVX2: window maxima 8 channels a vector (lanes-template.h). */
#define CP_L_FN cp_epilogue_lanes_row_avx2
#define CP_L_W 8
#include "lanes-template.h"
