/*
 * Template of the vector Winograd transforms (see winograd.h). A vector of
 * CP_VW lanes holds CP_VW/4 tiles x 4 columns as loaded; an in-lane 4x4
 * transpose of four such vectors (unpack, shuffle: no lane crossing) turns
 * them into vectors whose lanes run over CP_VW tiles, lane 4k + u holding
 * tile k of load u. The output transform undoes it with the same transpose.
 * The input transform also gathers the range rule's sums (winograd.h) from
 * the transposed inputs, lanes over tiles as the transform's own values.
 *
 * Define before including: CP_V (vector type), CP_VW (lanes), CP_W_LOADU,
 * CP_W_STOREU, CP_W_SET1, CP_W_ZERO, CP_W_ADD, CP_W_SUB, CP_W_MUL, CP_W_FMA,
 * CP_W_FNMA, CP_W_ABS (|x|), CP_W_MAX, CP_W_UNPACKLO, CP_W_UNPACKHI,
 * CP_W_SHUF (per 128-bit lane), CP_W_INPUT_FN, CP_W_OUTPUT_FN, CP_W_OUTPUT_CL_FN.
 *
 * CP_W_OUTPUT_CL_FN reads M with the channels in the lanes
 * (cp_wino_multiply_cl): a tile's 36 points of CP_VW channels, the 4x4
 * outputs of each channel stored a row of four at a time.
 */
#include <immintrin.h>

#include "transform-1d.h"
#include "transpose4.h"
#include "winograd.h"

#define CP_W_T CP_V
#define CP_W_K(c) CP_W_SET1(c)
#define CP_W_U (CP_VW / 4) /* tiles per loaded vector */
#define CP_W_CHUNK 4       /* channels whose row transforms wait for their columns */

void CP_W_INPUT_FN(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                   size_t tw_pad, size_t nr, float *v, size_t vs, float *sums) {
  const size_t lanes = (tiles + nr - 1) / nr * nr;
  for (size_t g0 = 0; g0 < lanes; g0 += CP_VW) {
    CP_V a[6][6], dmax = CP_W_ZERO(); /* the range rule: sums of |d| over channels, max |d| */
    for (int i = 0; i < 36; i++) a[i / 6][i % 6] = CP_W_ZERO();
    float *vg = v + (g0 / nr) * CP_WINO_POINTS * vs + g0 % nr;
    /* Each load covers CP_W_U tiles of one tile row (tw_pad is a multiple of
       4). Loads past the last tile repeat the first one: finite, ignored. */
    const float *src[4];
    for (size_t u = 0; u < 4; u++) {
      size_t n = g0 + u * CP_W_U;
      if (n >= tiles) n = g0 < tiles ? g0 : 0;
      src[u] = panel + (n / tw_pad) * 4 * ld + (n % tw_pad) * 4;
    }
    /* Channels in chunks: the row transforms of a chunk wait in h while the
       rule's sums for one row stay in registers across the chunk. */
    for (size_t c0 = 0; c0 < c_in; c0 += CP_W_CHUNK) {
      const size_t nc = c_in - c0 < CP_W_CHUNK ? c_in - c0 : CP_W_CHUNK;
      CP_V h[CP_W_CHUNK][6][6];
      for (size_t i = 0; i < 6; i++) { /* B^T along each input row of the tiles */
        CP_V row[6];
        for (int j = 0; j < 6; j++) row[j] = a[i][j];
        for (size_t k = 0; k < nc; k++) {
          const size_t off = (c0 + k) * cs + i * ld;
          const CP_V a0 = CP_W_LOADU(src[0] + off), a1 = CP_W_LOADU(src[1] + off);
          const CP_V a2 = CP_W_LOADU(src[2] + off), a3 = CP_W_LOADU(src[3] + off);
          const CP_V b0 = CP_W_LOADU(src[0] + off + 4), b1 = CP_W_LOADU(src[1] + off + 4);
          const CP_V b2 = CP_W_LOADU(src[2] + off + 4), b3 = CP_W_LOADU(src[3] + off + 4);
          CP_V d[6];
          CP_W_TRANSPOSE4(a0, a1, a2, a3, d[0], d[1], d[2], d[3]);
          const CP_V e0 = CP_W_UNPACKLO(b0, b1), e1 = CP_W_UNPACKLO(b2, b3);
          d[4] = CP_W_SHUF(e0, e1, 0x44), d[5] = CP_W_SHUF(e0, e1, 0xEE);
          for (int j = 0; j < 6; j++) {
            const CP_V m = CP_W_ABS(d[j]);
            row[j] = CP_W_ADD(row[j], m);
            dmax = CP_W_MAX(dmax, m);
          }
          CP_W_INPUT_1D(d[0], d[1], d[2], d[3], d[4], d[5], h[k][i][0], h[k][i][1], h[k][i][2],
                        h[k][i][3], h[k][i][4], h[k][i][5]);
        }
        for (int j = 0; j < 6; j++) a[i][j] = row[j];
      }
      for (size_t k = 0; k < nc; k++) {
        float *vc = vg + (c0 + k) * nr;
        for (size_t s = 0; s < 6; s++) { /* B^T along each column */
          CP_V o0, o1, o2, o3, o4, o5;
          CP_W_INPUT_1D(h[k][0][s], h[k][1][s], h[k][2][s], h[k][3][s], h[k][4][s], h[k][5][s], o0,
                        o1, o2, o3, o4, o5);
          CP_W_STOREU(vc + (0 * 6 + s) * vs, o0);
          CP_W_STOREU(vc + (1 * 6 + s) * vs, o1);
          CP_W_STOREU(vc + (2 * 6 + s) * vs, o2);
          CP_W_STOREU(vc + (3 * 6 + s) * vs, o3);
          CP_W_STOREU(vc + (4 * 6 + s) * vs, o4);
          CP_W_STOREU(vc + (5 * 6 + s) * vs, o5);
        }
      }
    }
    /* The rule's sums, lane by lane: lane 4k + u holds tile k of load u. */
    float lane[CP_WINO_SUMS][CP_VW];
    for (int i = 0; i < 36; i++) CP_W_STOREU(lane[i], a[i / 6][i % 6]);
    CP_W_STOREU(lane[36], dmax);
    for (size_t l = 0; l < CP_VW; l++) {
      const size_t n = g0 + (l % 4) * CP_W_U + l / 4;
      if (n >= tiles) continue;
      for (int i = 0; i < CP_WINO_SUMS; i++) sums[n * CP_WINO_SUMS + (size_t)i] = lane[i][l];
    }
  }
}

/* A^T along each of the 6 rows of a tile's points in M (point xi at
   m[xi * xs], CP_VW lanes each): t[r] holds row r's 4 columns. */
static inline void cp_w_output_rows(const float *m, size_t xs, CP_V t[6][4]) {
  for (size_t r = 0; r < 6; r++) {
    const float *x = m + 6 * r * xs;
    CP_W_OUTPUT_1D(CP_W_LOADU(x), CP_W_LOADU(x + xs), CP_W_LOADU(x + 2 * xs),
                   CP_W_LOADU(x + 3 * xs), CP_W_LOADU(x + 4 * xs), CP_W_LOADU(x + 5 * xs), t[r][0],
                   t[r][1], t[r][2], t[r][3]);
  }
}

void CP_W_OUTPUT_FN(const float *m, size_t t_alloc, size_t mr_stride, size_t mr, size_t tiles,
                    size_t tw_pad, size_t dy, size_t dx, float *buf, size_t buf_cols,
                    size_t buf_ld) {
  const size_t xs = mr_stride * t_alloc;
  for (size_t ch = 0; ch < mr; ch++)
    for (size_t g0 = 0; g0 < tiles; g0 += CP_VW) {
      const float *mg = m + ch * t_alloc + g0;
      CP_V t[6][4];
      cp_w_output_rows(mg, xs, t);
      size_t row0[4], col0[4], units = 0; /* of each load's first tile, in the tiles */
      for (size_t u = 0; u < 4; u++) {
        const size_t n = g0 + u * CP_W_U;
        if (n >= tiles) break;
        row0[u] = (n / tw_pad) * 4, col0[u] = (n % tw_pad) * 4;
        units++;
      }
      float *const out = buf + ch * buf_cols;
      CP_V y[4][4];
      for (size_t q = 0; q < 4; q++) /* A^T along each column */
        CP_W_OUTPUT_1D(t[0][q], t[1][q], t[2][q], t[3][q], t[4][q], t[5][q], y[0][q], y[1][q],
                       y[2][q], y[3][q]);
      for (size_t r = 0; r < 4; r++) {
        CP_V o[4];
        CP_W_TRANSPOSE4(y[r][0], y[r][1], y[r][2], y[r][3], o[0], o[1], o[2], o[3]);
        for (size_t u = 0; u < units; u++) {
          if (row0[u] + r < dy) continue; /* above the buffer's origin */
          float *to = out + (row0[u] + r - dy) * buf_ld;
          if (col0[u] >= dx) {
            CP_W_STOREU(to + col0[u] - dx, o[u]);
          } else { /* the first tile starts left of the origin */
            float lane[CP_VW];
            CP_W_STOREU(lane, o[u]);
            for (size_t l = dx - col0[u]; l < CP_VW; l++) to[col0[u] + l - dx] = lane[l];
          }
        }
      }
    }
}

void CP_W_OUTPUT_CL_FN(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                       const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                       size_t buf_cols, size_t buf_ld) {
  const size_t xs = t_alloc * mr_stride;
  for (size_t k = 0; k < map->count; k++) {
    const size_t n = cp_wino_tile_of(map, k);
    const size_t y0 = (n / map->tw_pad) * 4, x0 = (n % map->tw_pad) * 4;
    const size_t q0 = x0 < dx ? dx - x0 : 0; /* columns left of the buffer's origin */
    for (size_t c = 0; c < mr; c += CP_VW) { /* CP_VW channels of tile k at a time */
      const float *mn = m + k * mr_stride + c;
      CP_V t[6][4];
      cp_w_output_rows(mn, xs, t);
      float lane[4][4][CP_VW];         /* [row][column][channel] */
      for (size_t q = 0; q < 4; q++) { /* A^T along each column */
        CP_V y0v, y1v, y2v, y3v;
        CP_W_OUTPUT_1D(t[0][q], t[1][q], t[2][q], t[3][q], t[4][q], t[5][q], y0v, y1v, y2v, y3v);
        CP_W_STOREU(lane[0][q], y0v);
        CP_W_STOREU(lane[1][q], y1v);
        CP_W_STOREU(lane[2][q], y2v);
        CP_W_STOREU(lane[3][q], y3v);
      }
      const size_t nc = mr - c < CP_VW ? mr - c : CP_VW;
      for (size_t r = 0; r < 4; r++) {
        if (y0 + r < dy) continue; /* above the buffer's origin */
        float *row = buf + c * buf_cols + (y0 + r - dy) * buf_ld + x0 + q0 - dx;
        for (size_t l = 0; l < nc; l++)
          for (size_t q = q0; q < 4; q++) row[l * buf_cols + q - q0] = lane[r][q][l];
      }
    }
  }
}
