/*
 * Template of the AVX2+FMA shift-reduce microkernel (see ukernel.h): as the
 * AVX-512 one with 8-lane vectors and 16 registers (MR*NRV accumulators,
 * NRV input vectors and one broadcast must fit).
 * Define: CP_MR, CP_NRV (vectors of 8), CP_ELEM, CP_LOAD(ptr), CP_FN.
 */
#include <immintrin.h>

void CP_FN(const void *xv, size_t cs, size_t rs, size_t c_in, size_t k, const float *w,
           float *tile, size_t ld) {
  const CP_ELEM *x = (const CP_ELEM *)xv;
  __m256 acc[CP_MR][CP_NRV];
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++) acc[m][v] = _mm256_setzero_ps();
  for (size_t c = 0; c < c_in; c++) {
    for (size_t i = 0; i < k; i++) {
      const CP_ELEM *xr = x + c * cs + i * rs;
      for (size_t j = 0; j < k; j++) {
        __m256 xin[CP_NRV];
#pragma GCC unroll 4
        for (int v = 0; v < CP_NRV; v++) xin[v] = CP_LOAD(xr + j + 8 * v);
#pragma GCC unroll 16
        for (int m = 0; m < CP_MR; m++) {
          const __m256 b = _mm256_broadcast_ss(w + m);
#pragma GCC unroll 4
          for (int v = 0; v < CP_NRV; v++) acc[m][v] = _mm256_fmadd_ps(b, xin[v], acc[m][v]);
        }
        w += CP_MR;
      }
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++) _mm256_storeu_ps(tile + m * ld + 8 * v, acc[m][v]);
}
