/*
 * f32 depthwise microkernel, 1 channel x 16 positions, portable: written so
 * that the compiler vectorises the position loop with the baseline ISA; a
 * product, then a sum, each rounded (no FMA), in the taps' order.
 *
 * Every output, a full block's, a tail's or a compact row's, is summed by
 * the one routine cp_dw_block (one compiled body: not inlined, not cloned,
 * its pointers restrict so that no second, unvectorised version guards
 * against overlap). A sum of two NaNs keeps one of them, which one by the
 * order of the operands, and a compiler may order them differently in a
 * vectorised loop and a scalar one: an output must keep its code when the
 * item split moves it from a block to a tail, or its NaN may change sign.
 * The tails' inputs are gathered into a block's layout, taps in chunks of
 * CP_DW_CHUNK on the stack (the sums continue across chunks).
 */
#include "dw-ukernel.h"

enum { CP_DW_NR = 16, CP_DW_CHUNK = 64 };

#if defined(__GNUC__) && !defined(__clang__)
#define CP_DW_ONE_BODY __attribute__((noinline, noipa))
#else
#define CP_DW_ONE_BODY __attribute__((noinline))
#endif

/* acc[c] += w[t] * x[off[t] + c] for t < taps, c < CP_DW_NR, in t order. */
static CP_DW_ONE_BODY void cp_dw_block(const float *restrict x, const ptrdiff_t *restrict off,
                                       size_t taps, const float *restrict w, float *restrict acc) {
  float a[CP_DW_NR];
  for (int c = 0; c < CP_DW_NR; c++) a[c] = acc[c];
  for (size_t t = 0; t < taps; t++) {
    const float *xt = x + off[t], b = w[t];
    for (int c = 0; c < CP_DW_NR; c++) a[c] += b * xt[c];
  }
  for (int c = 0; c < CP_DW_NR; c++) acc[c] = a[c];
}

/* The sums of n (1..CP_DW_NR) positions whose inputs of tap t lie at
   x[off[t] + pos[c]], into out[c]: gathered into a block (lanes past n
   repeat the last position), then cp_dw_block. */
static void cp_dw_gathered(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                           const ptrdiff_t *pos, size_t n, float *out) {
  float acc[CP_DW_NR], v[CP_DW_CHUNK * CP_DW_NR];
  ptrdiff_t at[CP_DW_CHUNK];
  for (int c = 0; c < CP_DW_NR; c++) acc[c] = 0.0f;
  for (size_t t0 = 0; t0 < taps; t0 += CP_DW_CHUNK) {
    const size_t chunk = taps - t0 < CP_DW_CHUNK ? taps - t0 : CP_DW_CHUNK;
    for (size_t t = 0; t < chunk; t++) {
      at[t] = (ptrdiff_t)(t * CP_DW_NR);
      for (size_t c = 0; c < CP_DW_NR; c++)
        v[t * CP_DW_NR + c] = x[off[t0 + t] + pos[c < n ? c : n - 1]];
    }
    cp_dw_block(v, at, chunk, w + t0, acc);
  }
  for (size_t c = 0; c < n; c++) out[c] = acc[c];
}

void cp_f32_dw_ukernel_16__scalar(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                                  size_t rows, size_t n, size_t x_ld, float *out, size_t out_ld) {
  for (size_t y = 0; y < rows; y++) {
    const float *xr = x + y * x_ld;
    float *o = out + y * out_ld;
    size_t p = 0;
    for (; p + CP_DW_NR <= n; p += CP_DW_NR) {
      float acc[CP_DW_NR];
      for (int c = 0; c < CP_DW_NR; c++) acc[c] = 0.0f;
      cp_dw_block(xr + p, off, taps, w, acc);
      for (int c = 0; c < CP_DW_NR; c++) o[p + c] = acc[c];
    }
    if (p < n) {
      ptrdiff_t pos[CP_DW_NR];
      for (size_t c = 0; c < CP_DW_NR; c++) pos[c] = (ptrdiff_t)(p + c);
      cp_dw_gathered(xr, off, taps, w, pos, n - p, o + p);
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
  /* the positions of each row's first nx columns, CP_DW_NR at a time */
  ptrdiff_t pos[CP_DW_NR];
  size_t where[CP_DW_NR], n = 0;
  float sums[CP_DW_NR];
  for (size_t p = 0; p < len; p++) {
    if (p % ld >= nx) continue;
    pos[n] = (ptrdiff_t)p, where[n] = p / ld * nx + p % ld;
    if (++n == CP_DW_NR) {
      cp_dw_gathered(x, off, taps, w, pos, n, sums);
      for (size_t c = 0; c < n; c++) out[where[c]] = sums[c];
      n = 0;
    }
  }
  if (n > 0) {
    cp_dw_gathered(x, off, taps, w, pos, n, sums);
    for (size_t c = 0; c < n; c++) out[where[c]] = sums[c];
  }
}

void cp_f32_dw_split2__scalar(const float *from, size_t from_ld, float *even, float *odd,
                              size_t to_ld, size_t rows, size_t n_even, size_t n_odd) {
  for (size_t y = 0; y < rows; y++, from += from_ld, even += to_ld, odd += to_ld) {
    for (size_t x = 0; x < n_even; x++) even[x] = from[2 * x];
    for (size_t x = 0; x < n_odd; x++) odd[x] = from[2 * x + 1];
  }
}
