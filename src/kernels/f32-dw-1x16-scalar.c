/*
 * f32 depthwise microkernel, 1 channel x 16 positions, portable: written so
 * that the compiler vectorises the position loop with the baseline ISA; a
 * product, then a sum, each rounded (no FMA), in the taps' order.
 */
#include "dw-ukernel.h"

void cp_f32_dw_ukernel_16__scalar(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                                  size_t rows, size_t n, size_t x_ld, float *out, size_t out_ld) {
  enum { NR = 16 };
  for (size_t y = 0; y < rows; y++) {
    const float *xr = x + y * x_ld;
    float *o = out + y * out_ld;
    size_t p = 0;
    for (; p + NR <= n; p += NR) {
      float acc[NR];
      for (int c = 0; c < NR; c++) acc[c] = 0.0f;
      for (size_t t = 0; t < taps; t++) {
        const float *xt = xr + off[t] + p, b = w[t];
        for (int c = 0; c < NR; c++) acc[c] += b * xt[c];
      }
      for (int c = 0; c < NR; c++) o[p + c] = acc[c];
    }
    for (; p < n; p++) {
      float acc = 0.0f;
      for (size_t t = 0; t < taps; t++) acc += w[t] * xr[off[t] + p];
      o[p] = acc;
    }
  }
}

void cp_f32_dw_rows__scalar(const float *from, size_t from_ld, float *to, size_t to_ld, size_t rows,
                            size_t n) {
  for (size_t y = 0; y < rows; y++, from += from_ld, to += to_ld)
    for (size_t x = 0; x < n; x++) to[x] = from[x];
}

void cp_f32_dw_rows2__scalar(const float *from, size_t from_ld, float *to, size_t to_ld,
                             size_t rows, size_t n) {
  for (size_t y = 0; y < rows; y++, from += from_ld, to += to_ld)
    for (size_t x = 0; x < n; x++) to[x] = from[2 * x];
}

void cp_f32_dw_compact__scalar(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                               size_t len, size_t ld, size_t nx, float *out) {
  for (size_t p = 0; p < len; p++) {
    if (p % ld >= nx) continue;
    float acc = 0.0f;
    for (size_t t = 0; t < taps; t++) acc += w[t] * x[off[t] + p];
    out[p / ld * nx + p % ld] = acc;
  }
}

void cp_f32_dw_split2__scalar(const float *from, size_t from_ld, float *even, float *odd,
                              size_t to_ld, size_t rows, size_t n_even, size_t n_odd) {
  for (size_t y = 0; y < rows; y++, from += from_ld, even += to_ld, odd += to_ld) {
    for (size_t x = 0; x < n_even; x++) even[x] = from[2 * x];
    for (size_t x = 0; x < n_odd; x++) odd[x] = from[2 * x + 1];
  }
}
