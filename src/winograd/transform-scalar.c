/* Portable Winograd transforms (one tile at a time), the multiply stage and dispatch. */
#include <math.h>
#include <string.h>

#include "winograd.h"

#include "transform-1d.h"

#define CP_W_T float
#define CP_W_ADD(x, y) ((x) + (y))
#define CP_W_SUB(x, y) ((x) - (y))
#define CP_W_MUL(x, y) ((x) * (y))
#define CP_W_FMA(x, y, z) ((x) * (y) + (z))
#define CP_W_FNMA(x, y, z) ((z) - (x) * (y))
#define CP_W_K(c) (c)

void cp_wino_input_scalar(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                          size_t tw_pad, size_t nr, float *v, size_t vs, float *sums) {
  const size_t lanes = (tiles + nr - 1) / nr * nr;
  for (size_t n = 0; n < lanes; n++) {
    float a[6][6] = {{0}}, dmax = 0.0f; /* the range rule: sums of |d| over channels, max |d| */
    float *vn = v + (n / nr) * CP_WINO_POINTS * vs + n % nr;
    const float *pn = panel + (n / tw_pad) * 4 * ld + (n % tw_pad) * 4;
    for (size_t c = 0; c < c_in; c++) {
      float h[6][6], o[6][6];
      if (n >= tiles) {
        for (int x = 0; x < 36; x++) vn[(size_t)x * vs + c * nr] = 0.0f;
        continue;
      }
      for (int i = 0; i < 6; i++) { /* rows: B^T along each input row */
        const float *d = pn + c * cs + (size_t)i * ld;
        for (int j = 0; j < 6; j++) {
          const float m = fabsf(d[j]);
          a[i][j] += m;
          dmax = dmax > m ? dmax : m;
        }
        CP_W_INPUT_1D(d[0], d[1], d[2], d[3], d[4], d[5], h[i][0], h[i][1], h[i][2], h[i][3],
                      h[i][4], h[i][5]);
      }
      for (int s = 0; s < 6; s++) /* columns */
        CP_W_INPUT_1D(h[0][s], h[1][s], h[2][s], h[3][s], h[4][s], h[5][s], o[0][s], o[1][s],
                      o[2][s], o[3][s], o[4][s], o[5][s]);
      for (int x = 0; x < 36; x++) vn[(size_t)x * vs + c * nr] = o[x / 6][x % 6];
    }
    if (n < tiles) {
      for (int x = 0; x < 36; x++) sums[n * CP_WINO_SUMS + (size_t)x] = a[x / 6][x % 6];
      sums[n * CP_WINO_SUMS + 36] = dmax;
    }
  }
}

size_t cp_wino_screen_tiles(const float *sums, size_t slices, size_t slice_floats, size_t c_in,
                            size_t tiles, size_t tw_pad, const cp_wino_screen *screen,
                            cp_wino_mask *flags) {
  size_t flagged = 0;
  for (size_t n = 0; n < tiles; n++) {
    const float *t = sums + n * CP_WINO_SUMS;
    float a[6][6], dmax = t[36];
    memcpy(a, t, sizeof a);
    for (size_t i = 1; i < slices; i++) { /* the slices' sums, in slice order */
      const float *u = t + i * slice_floats;
      for (int y = 0; y < 6; y++)
        for (int x = 0; x < 6; x++) a[y][x] += u[6 * y + x];
      dmax = dmax > u[36] ? dmax : u[36];
    }
    float s16[16], amax = a[0][0];
    CP_W_WINDOWS(a, s16);
    for (int y = 0; y < 6; y++) /* row-major, as the sums */
      for (int x = 0; x < 6; x++) amax = amax > a[y][x] ? amax : a[y][x];
    int64_t tc = (int64_t)(n % tw_pad), cols = screen->cols;
    if (screen->slot > 0) /* a column of its image's slot; none past the last slot */
      cols = tc / screen->slot < screen->slots ? screen->cols : 0, tc %= screen->slot;
    const float l = (s16[0] + s16[3]) + (s16[12] + s16[15]); /* four windows that tile the 6x6 */
    flags[n] = cp_wino_screen_tile(screen, c_in, 4, s16, l, dmax, amax,
                                   screen->rows - 4 * (int64_t)(n / tw_pad), cols - 4 * tc);
    flagged += flags[n] != 0;
  }
  return flagged;
}

/* One tile's 4x4 outputs of one channel from its 36 points of M (point xi
   at mn[xi * xs]), into buf at tile n of rows tw_pad tiles wide, less the
   rows and columns before the buffer's origin (dy, dx). */
static void cp_wino_output_tile(const float *mn, size_t xs, size_t n, size_t tw_pad, size_t dy,
                                size_t dx, float *out, size_t buf_ld) {
  float t[6][4], y[4][4];
  for (int r = 0; r < 6; r++) { /* A^T along each row of M */
    const float *x = mn + (size_t)(6 * r) * xs;
    CP_W_OUTPUT_1D(x[0], x[xs], x[2 * xs], x[3 * xs], x[4 * xs], x[5 * xs], t[r][0], t[r][1],
                   t[r][2], t[r][3]);
  }
  for (int q = 0; q < 4; q++)
    CP_W_OUTPUT_1D(t[0][q], t[1][q], t[2][q], t[3][q], t[4][q], t[5][q], y[0][q], y[1][q], y[2][q],
                   y[3][q]);
  const size_t y0 = (n / tw_pad) * 4, x0 = (n % tw_pad) * 4;
  for (size_t r = 0; r < 4; r++)
    for (size_t q = 0; q < 4; q++)
      if (y0 + r >= dy && x0 + q >= dx) out[(y0 + r - dy) * buf_ld + x0 + q - dx] = y[r][q];
}

void cp_wino_output_scalar(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                           size_t tiles, size_t tw_pad, size_t dy, size_t dx, float *buf,
                           size_t buf_cols, size_t buf_ld) {
  for (size_t ch = 0; ch < mr; ch++)
    for (size_t n = 0; n < tiles; n++)
      cp_wino_output_tile(m + ch * t_alloc + n, mr_stride * t_alloc, n, tw_pad, dy, dx,
                          buf + ch * buf_cols, buf_ld);
}

void cp_wino_output_cl_scalar(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                              const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                              size_t buf_cols, size_t buf_ld) {
  for (size_t k = 0; k < map->count; k++)
    for (size_t ch = 0; ch < mr; ch++)
      cp_wino_output_tile(m + k * mr_stride + ch, t_alloc * mr_stride, cp_wino_tile_of(map, k),
                          map->tw_pad, dy, dx, buf + ch * buf_cols, buf_ld);
}

void cp_wino_multiply(const cp_wino_kind *kind, const cp_sr_ukernel *uk,
                      const cp_sr_ukernel *uk_tail, int64_t co_blocks, const float *u,
                      size_t u_xi_stride, const float *v, size_t vs, size_t c_in, size_t nblk,
                      int64_t cb0, int64_t cb1, float *m) {
  const size_t nr = (size_t)uk->nr, mr = (size_t)uk->mr, t_alloc = nblk * nr;
  const size_t points = (size_t)kind->points_n;
  for (size_t xi = 0; xi < points; xi++)
    for (int64_t cb = cb0; cb < cb1; cb++) {
      const cp_sr_ukernel_fn fn = cb + 1 == co_blocks ? uk_tail->fn : uk->fn;
      const float *w = u + xi * u_xi_stride + (size_t)cb * mr * c_in;
      float *mx = m + ((size_t)(cb - cb0) * points + xi) * mr * t_alloc;
      for (size_t blk = 0; blk < nblk; blk++)
        fn(v + (blk * points + xi) * vs, nr, 0, c_in, 1, w, mx + blk * nr, t_alloc, 0, NULL);
    }
}

/* Where tile k of the map lies in V, from a point's first lane. */
static ptrdiff_t cp_wino_cl_pos(const cp_wino_tile_map *map, size_t k, size_t nr, size_t lane_u,
                                size_t block_floats) {
  const size_t t = cp_wino_tile_of(map, k);
  return (ptrdiff_t)((t / nr) * block_floats + cp_wino_lane_of(t % nr, lane_u));
}

#define CP_WINO_CL_POS 512
void cp_wino_multiply_cl(const cp_wino_kind *kind, const cp_cl_ukernel *uk, const float *u,
                         size_t u_xi_stride, const float *v, size_t vs, size_t nr, size_t lane_u,
                         size_t c_in, const cp_wino_tile_map *map, size_t t_alloc, int64_t cb0,
                         int64_t cb1, float *m) {
  const size_t tiles = map->count;
  const size_t np = (size_t)uk->np, mr = (size_t)uk->mr, points = (size_t)kind->points_n;
  const size_t kc = CP_WINO_CL_KC_FLOATS / mr; /* channels per pass over the tiles */
  const ptrdiff_t tap = 0;
  const size_t block = mr * c_in, groups = (tiles + np - 1) / np;
  const size_t calls = groups * ((c_in + kc - 1) / kc);
  const size_t share = (block / 16 + calls - 1) / calls * 16; /* floats prefetched per call */
  /* the tiles' offsets in V, once for every point and block (whole groups
     of NP up to CP_WINO_CL_POS of them; the rest as each call needs them) */
  ptrdiff_t tile_pos[CP_WINO_CL_POS];
  size_t cached = 0;
  for (; cached + np <= CP_WINO_CL_POS && cached + np <= tiles; cached += np)
    for (size_t p = 0; p < np; p++)
      tile_pos[cached + p] = cp_wino_cl_pos(map, cached + p, nr, lane_u, points * vs);
  for (size_t xi = 0; xi < points; xi++)
    for (int64_t cb = cb0; cb < cb1; cb++) {
      const float *w = u + xi * u_xi_stride + (size_t)cb * block;
      /* the next block of U, a share before each call: its first reads come
         from cache (U streams from memory once per item; measured, Zen 5,
         one image of 512 -> 512 at 7x7 or 14x14: 5-10% faster) */
      const float *next = cb + 1 < cb1      ? w + block
                          : xi + 1 < points ? u + (xi + 1) * u_xi_stride + (size_t)cb0 * block
                                            : NULL;
      float *mx = m + ((size_t)(cb - cb0) * points + xi) * t_alloc * mr;
      size_t call = 0;
      for (size_t c0 = 0; c0 < c_in; c0 += kc) { /* U's channels c0.. stay in L1 for every group */
        const size_t kn = c_in - c0 < kc ? c_in - c0 : kc;
        for (size_t g = 0; g < tiles; g += np, call++) {
          for (size_t f = call * share; next != NULL && f < (call + 1) * share && f < block;
               f += 16)
            __builtin_prefetch(next + f, 0, 3);
          ptrdiff_t pos[CP_CL_MAX_NP]; /* past the last tile: the last one again */
          const size_t n = tiles - g < np ? tiles - g : np;
          const ptrdiff_t *at = pos;
          if (g + np <= cached) {
            at = tile_pos + g;
          } else {
            for (size_t p = 0; p < np; p++)
              pos[p] = cp_wino_cl_pos(map, g + (p < n ? p : n - 1), nr, lane_u, points * vs);
          }
          /* the sums of tiles g.. as the registers hold them, [tile][MR] */
          uk->fn(v + xi * vs + c0 * nr, nr, at, &tap, 1, kn, w + c0 * mr, mx + g * mr, c0 == 0,
                 NULL, 0, n);
        }
      }
    }
}
