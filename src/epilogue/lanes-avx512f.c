/* The lanes row with AVX-512F: window maxima 16 channels a vector, the
   transposes and stores AVX2's (lanes-template.h). */
#include "../vec-avx512.h"

#define CP_L_FN cp_epilogue_lanes_row_avx512f
#define CP_L_W 16
#define CP_L_V __m512
#define CP_L_LOADU(p) _mm512_loadu_ps(p)
#define CP_L_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_L_MAX_NAN(a, b) cp_max_nan16(a, b)
#include "lanes-template.h"
