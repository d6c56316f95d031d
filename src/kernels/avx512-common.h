/* Accumulator definitions shared by the AVX-512 microkernels. */
#define CP_ACC __m512
#define CP_LANES 16
#define CP_ZERO() _mm512_setzero_ps()
#define CP_STORE(p, v) _mm512_storeu_ps(p, v)
#define CP_LOADACC(p) _mm512_loadu_ps(p)
