/*
 * The portable channels-in-lanes microkernel, 8 channels x 4 positions
 * (cl-ukernel.h), written so that the compiler vectorises the channel loop
 * with the baseline ISA; a product, then a sum, each rounded.
 */
#include "cl-ukernel.h"

enum { CP_MR = 8, CP_NP = 4 };

void cp_f32_cl_ukernel_8x4__scalar(const float *x, size_t cs, size_t xs, const ptrdiff_t *off,
                                   size_t taps, size_t c_in, const float *w, float *out,
                                   size_t out_ld, size_t n) {
  float acc[CP_NP][CP_MR];
  for (int p = 0; p < CP_NP; p++)
    for (int m = 0; m < CP_MR; m++) acc[p][m] = 0.0f;
  for (size_t c = 0; c < c_in; c++) {
    const float *xc = x + c * cs;
    for (size_t t = 0; t < taps; t++, w += CP_MR) {
      const float *xt = xc + off[t];
      for (int p = 0; p < CP_NP; p++) {
        const float b = xt[(size_t)p * xs];
        for (int m = 0; m < CP_MR; m++) acc[p][m] += w[m] * b;
      }
    }
  }
  for (size_t m = 0; m < CP_MR; m++)
    for (size_t p = 0; p < n; p++) out[m * out_ld + p] = acc[p][m];
}
