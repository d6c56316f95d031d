/*
 * Template of the vector Winograd F(2x2, 3x3) transforms (see winograd.h).
 * Lanes run over CP_VW consecutive tiles, lane l holding tile g0 + l. Each
 * input row of a tile is one 4-float load; CP_W_LOAD_TILES puts those of
 * tiles u, u + 4, ... into the 128-bit lanes of one vector, and the in-lane
 * 4x4 transpose of four such vectors (u = 0..3) gives the rows' columns with
 * tile g0 + 4k + u in lane 4k + u. The output transform reads M with the
 * channels in the lanes (cp_wino_multiply_cl) and stores each tile's 2x2
 * outputs a channel vector at a time.
 *
 * Define before including: CP_V (vector type), CP_VW (lanes),
 * CP_W_LOAD_TILES(p, o) (a vector of the 4 floats at p + o[0], p + o[4], ...,
 * one per 128-bit lane), CP_W_LOADU, CP_W_STOREU, CP_W_ZERO, CP_W_ADD,
 * CP_W_SUB, CP_W_ABS, CP_W_MAX, CP_W_UNPACKLO, CP_W_UNPACKHI, CP_W_SHUF (per
 * 128-bit lane), CP_W_INPUT_FN, CP_W_OUTPUT_CL_FN.
 */
#include <immintrin.h>

#include "f23-1d.h"
#include "transpose4.h"
#include "winograd.h"

#define CP_W_T CP_V

void CP_W_INPUT_FN(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                   size_t tw_pad, size_t nr, float *v, size_t vs, float *sums) {
  const size_t lanes = (tiles + nr - 1) / nr * nr;
  for (size_t g0 = 0; g0 < lanes; g0 += CP_VW) {
    /* Each tile's first input; lanes past the last tile repeat the first one
       (finite, ignored). */
    size_t off[CP_VW];
    for (size_t l = 0; l < CP_VW; l++) {
      size_t n = g0 + l;
      if (n >= tiles) n = g0 < tiles ? g0 : 0;
      off[l] = (n / tw_pad) * 2 * ld + (n % tw_pad) * 2;
    }
    CP_V a[4][4], dmax = CP_W_ZERO(); /* the range rule: sums of |d| over channels, max |d| */
    for (int i = 0; i < 16; i++) a[i / 4][i % 4] = CP_W_ZERO();
    float *vg = v + (g0 / nr) * 16 * vs + g0 % nr;
    for (size_t c = 0; c < c_in; c++) {
      const float *pc = panel + c * cs;
      CP_V h[4][4];
      for (size_t i = 0; i < 4; i++) { /* B^T along each input row of the tiles */
        const float *pr = pc + i * ld;
        const CP_V l0 = CP_W_LOAD_TILES(pr, off), l1 = CP_W_LOAD_TILES(pr, off + 1);
        const CP_V l2 = CP_W_LOAD_TILES(pr, off + 2), l3 = CP_W_LOAD_TILES(pr, off + 3);
        CP_V d[4];
        CP_W_TRANSPOSE4(l0, l1, l2, l3, d[0], d[1], d[2], d[3]);
        for (int j = 0; j < 4; j++) {
          const CP_V m = CP_W_ABS(d[j]);
          a[i][j] = CP_W_ADD(a[i][j], m);
          dmax = CP_W_MAX(dmax, m);
        }
        CP_W2_INPUT_1D(d[0], d[1], d[2], d[3], h[i][0], h[i][1], h[i][2], h[i][3]);
      }
      float *vc = vg + c * nr;
      for (size_t s = 0; s < 4; s++) { /* B^T along each column */
        CP_V o0, o1, o2, o3;
        CP_W2_INPUT_1D(h[0][s], h[1][s], h[2][s], h[3][s], o0, o1, o2, o3);
        CP_W_STOREU(vc + (0 * 4 + s) * vs, o0);
        CP_W_STOREU(vc + (1 * 4 + s) * vs, o1);
        CP_W_STOREU(vc + (2 * 4 + s) * vs, o2);
        CP_W_STOREU(vc + (3 * 4 + s) * vs, o3);
      }
    }
    float lane[17][CP_VW];
    for (int i = 0; i < 16; i++) CP_W_STOREU(lane[i], a[i / 4][i % 4]);
    CP_W_STOREU(lane[16], dmax);
    for (size_t l = 0; l < CP_VW && g0 + l < tiles; l++)
      for (int i = 0; i < 17; i++) sums[(g0 + l) * 17 + (size_t)i] = lane[i][l];
  }
}

void CP_W_OUTPUT_CL_FN(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                       const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                       size_t buf_cols, size_t buf_ld) {
  const size_t xs = t_alloc * mr_stride;
  for (size_t k = 0; k < map->count; k++) {
    const size_t n = cp_wino_tile_of(map, k);
    const size_t y0 = (n / map->tw_pad) * 2, x0 = (n % map->tw_pad) * 2;
    for (size_t c = 0; c < mr; c += CP_VW) { /* CP_VW channels of tile n at a time */
      const float *mn = m + k * mr_stride + c;
      CP_V t[4][2], y[2][2];
      for (size_t r = 0; r < 4; r++) { /* A^T along each row of M */
        const float *x = mn + 4 * r * xs;
        CP_W2_OUTPUT_1D(CP_W_LOADU(x), CP_W_LOADU(x + xs), CP_W_LOADU(x + 2 * xs),
                        CP_W_LOADU(x + 3 * xs), t[r][0], t[r][1]);
      }
      for (size_t q = 0; q < 2; q++) /* A^T along each column */
        CP_W2_OUTPUT_1D(t[0][q], t[1][q], t[2][q], t[3][q], y[0][q], y[1][q]);
      float lane[4][CP_VW];
      CP_W_STOREU(lane[0], y[0][0]);
      CP_W_STOREU(lane[1], y[0][1]);
      CP_W_STOREU(lane[2], y[1][0]);
      CP_W_STOREU(lane[3], y[1][1]);
      const size_t nc = mr - c < CP_VW ? mr - c : CP_VW;
      for (size_t r = 0; r < 2; r++) {
        if (y0 + r < dy) continue; /* above the buffer's origin */
        for (size_t q = 0; q < 2; q++) {
          if (x0 + q < dx) continue;
          float *to = buf + c * buf_cols + (y0 + r - dy) * buf_ld + x0 + q - dx;
          for (size_t l = 0; l < nc; l++) to[l * buf_cols] = lane[2 * r + q][l];
        }
      }
    }
  }
}
