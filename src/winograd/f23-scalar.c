/* Portable Winograd F(2x2, 3x3) transforms (one tile at a time) and its range rule. */
#include <math.h>

#include "winograd.h"

#include "f23-1d.h"

#define CP_W_T float
#define CP_W_ADD(x, y) ((x) + (y))
#define CP_W_SUB(x, y) ((x) - (y))

void cp_wino_input_f23_scalar(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                              size_t tw_pad, size_t nr, float *v, size_t vs, float *sums) {
  const size_t lanes = (tiles + nr - 1) / nr * nr;
  for (size_t n = 0; n < lanes; n++) {
    float a[4][4] = {{0}}, dmax = 0.0f; /* the range rule: sums of |d| over channels, max |d| */
    float *vn = v + (n / nr) * 16 * vs + n % nr;
    const float *pn = panel + (n / tw_pad) * 2 * ld + (n % tw_pad) * 2;
    for (size_t c = 0; c < c_in; c++) {
      float h[4][4], o[4][4];
      if (n >= tiles) {
        for (int x = 0; x < 16; x++) vn[(size_t)x * vs + c * nr] = 0.0f;
        continue;
      }
      for (int i = 0; i < 4; i++) { /* rows: B^T along each input row */
        const float *d = pn + c * cs + (size_t)i * ld;
        for (int j = 0; j < 4; j++) {
          const float m = fabsf(d[j]);
          a[i][j] += m;
          dmax = dmax > m ? dmax : m;
        }
        CP_W2_INPUT_1D(d[0], d[1], d[2], d[3], h[i][0], h[i][1], h[i][2], h[i][3]);
      }
      for (int s = 0; s < 4; s++) /* columns */
        CP_W2_INPUT_1D(h[0][s], h[1][s], h[2][s], h[3][s], o[0][s], o[1][s], o[2][s], o[3][s]);
      for (int x = 0; x < 16; x++) vn[(size_t)x * vs + c * nr] = o[x / 4][x % 4];
    }
    if (n < tiles) {
      for (int x = 0; x < 16; x++) sums[n * 17 + (size_t)x] = a[x / 4][x % 4];
      sums[n * 17 + 16] = dmax;
    }
  }
}

size_t cp_wino_screen_tiles_f23(const float *sums, size_t slices, size_t slice_floats, size_t c_in,
                                size_t tiles, size_t tw_pad, const cp_wino_screen *screen,
                                cp_wino_mask *flags) {
  size_t flagged = 0;
  for (size_t n = 0; n < tiles; n++) {
    const float *t = sums + n * 17;
    float a[16], dmax = t[16];
    for (int x = 0; x < 16; x++) a[x] = t[x];
    for (size_t i = 1; i < slices; i++) { /* the slices' sums, in slice order */
      const float *u = t + i * slice_floats;
      for (int x = 0; x < 16; x++) a[x] += u[x];
      dmax = dmax > u[16] ? dmax : u[16];
    }
    float s4[4], l = 0.0f, amax = a[0];
    for (int p = 0; p < 2; p++) /* the four 3x3 windows */
      for (int q = 0; q < 2; q++) {
        float w = 0.0f;
        for (int i = 0; i < 3; i++)
          w += (a[(p + i) * 4 + q] + a[(p + i) * 4 + q + 1]) + a[(p + i) * 4 + q + 2];
        s4[2 * p + q] = w;
      }
    for (int x = 0; x < 16; x++) {
      l += a[x];
      amax = amax > a[x] ? amax : a[x];
    }
    int64_t tc = (int64_t)(n % tw_pad), cols = screen->cols;
    if (screen->slot > 0) /* a column of its image's slot; none past the last slot */
      cols = tc / screen->slot < screen->slots ? screen->cols : 0, tc %= screen->slot;
    flags[n] = cp_wino_screen_tile(screen, c_in, 2, s4, l, dmax, amax,
                                   screen->rows - 2 * (int64_t)(n / tw_pad), cols - 2 * tc);
    flagged += flags[n] != 0;
  }
  return flagged;
}

void cp_wino_output_cl_f23_scalar(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                  const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                                  size_t buf_cols, size_t buf_ld) {
  const size_t xs = t_alloc * mr_stride, tw_pad = map->tw_pad;
  for (size_t k = 0; k < map->count; k++)
    for (size_t ch = 0; ch < mr; ch++) {
      const size_t n = cp_wino_tile_of(map, k);
      const float *mn = m + k * mr_stride + ch;
      float t[4][2], y[2][2];
      for (int r = 0; r < 4; r++) { /* A^T along each row of M */
        const float *x = mn + (size_t)(4 * r) * xs;
        CP_W2_OUTPUT_1D(x[0], x[xs], x[2 * xs], x[3 * xs], t[r][0], t[r][1]);
      }
      for (int q = 0; q < 2; q++)
        CP_W2_OUTPUT_1D(t[0][q], t[1][q], t[2][q], t[3][q], y[0][q], y[1][q]);
      const size_t y0 = (n / tw_pad) * 2, x0 = (n % tw_pad) * 2;
      for (size_t r = 0; r < 2; r++)
        for (size_t q = 0; q < 2; q++)
          if (y0 + r >= dy && x0 + q >= dx)
            buf[ch * buf_cols + (y0 + r - dy) * buf_ld + x0 + q - dx] = y[r][q];
    }
}
