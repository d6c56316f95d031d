/*
 * The portable channels-in-lanes microkernel, 8 channels x 4 positions
 * (cl-ukernel.h); a product, then a sum, each rounded. The sums run with the
 * positions innermost, so that the compiler vectorises them across the
 * positions: every position then takes the same instructions (an output's
 * NaN keeps the same sign whichever of the tile's positions it is, as the
 * tiles change with the item split and the thread count).
 */
#include "cl-ukernel.h"

enum { CP_MR = 8, CP_NP = 4 };

void cp_f32_cl_ukernel_8x4__scalar(const float *x, size_t cs, const ptrdiff_t *pos,
                                   const ptrdiff_t *off, size_t taps, size_t c_in, const float *w,
                                   float *partial, int start, float *out, size_t out_ld, size_t n) {
  float acc[CP_MR][CP_NP];
  for (int m = 0; m < CP_MR; m++)
    for (int p = 0; p < CP_NP; p++) acc[m][p] = start ? 0.0f : partial[p * CP_MR + m];
  for (size_t c = 0; c < c_in; c++) {
    const float *xc = x + c * cs;
    for (size_t t = 0; t < taps; t++, w += CP_MR) {
      const float *xt = xc + off[t];
      float xin[CP_NP];
      for (int p = 0; p < CP_NP; p++) xin[p] = xt[pos[p]];
      for (int m = 0; m < CP_MR; m++)
        for (int p = 0; p < CP_NP; p++) acc[m][p] += w[m] * xin[p];
    }
  }
  if (out == NULL) {
    for (int m = 0; m < CP_MR; m++)
      for (int p = 0; p < CP_NP; p++) partial[p * CP_MR + m] = acc[m][p];
    return;
  }
  for (size_t m = 0; m < CP_MR; m++)
    for (size_t p = 0; p < n; p++) out[m * out_ld + p] = acc[m][p];
}
