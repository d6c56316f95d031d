/* Accumulator definitions shared by the AVX-512 microkernels. */
#include <immintrin.h>

#include "../vec-avx512.h"

#define CP_ACC __m512
#define CP_LANES 16
#define CP_ZERO() _mm512_setzero_ps()
#define CP_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_LOADACC(p) _mm512_loadu_ps(p)
#define CP_SET1(f) _mm512_set1_ps(f)
#define CP_ADD(a, b) _mm512_add_ps(a, b)
#define CP_CLAMP(v, lo, hi) cp_clamp16(v, lo, hi)
