/*
 * Winograd F(4x4, 3x3): transforms and the multiply stage of one work item.
 *
 * Points {0, +-5/8, +-3/2, inf} (oneDNN's choice; see README "Winograd" for
 * the accuracy measured against {0, +-1, +-2} and {0, +-1, +-1/2}):
 *
 *   Y = A^T [ (G g G^T) (.) (B^T d B) ] A   for each 4x4 output tile, from a
 *   6x6 input tile d (rows and columns 4 apart) and a 3x3 filter g.
 *
 * The 36 products (.) summed over the input channels are 36 GEMMs, one per
 * transform point xi = 6*r + s:
 *
 *   M_xi[m][n] = sum_c U_xi[c][m] * V_xi[c][n]    (m: output channel, n: tile)
 *
 * computed by the shift-reduce microkernels with k = 1 (see ukernel.h):
 * kernel(x = V block, cs = NR, rs = 0, c_in, k = 1, w = U block, tile, ld).
 *
 * Layouts (fp32 throughout):
 *   U  [xi][co_block][c][MR]   weights, transformed once (the last block has
 *                              the tail kernel's MR; U_xi is xi_stride floats)
 *   V  [blk][xi][c][NR]        one item's transformed input: tile n lies in
 *                              block n / NR at lane n % NR; [blk][xi] starts
 *                              at (blk * 36 + xi) * vs (vs >= c_in * NR, padded
 *                              so that the 36 store streams miss each other's
 *                              cache sets)
 *   M  [xi][MR][t_alloc]       one channel block's products, t_alloc floats
 *                              between rows (a multiple of NR)
 *
 * Tiles of an item: th rows x tw tiles; tile n = tr * tw_pad + tc, with tw_pad
 * = tw rounded up to 4. Tile (tr, tc) reads panel rows 4tr .. 4tr+5 and columns
 * 4tc .. 4tc+5 and writes conv rows 4tr .. 4tr+3, columns 4tc .. 4tc+3 of the
 * tile buffer. The panel (fp32 [c][row][col], cs and ld floats apart) must
 * hold 4*th + 2 rows of 4*tw_pad + 4 columns (zero past the item's input);
 * the tile buffer 4*th rows of 4*tw_pad columns.
 *
 * Within a group of `lanes` consecutive tiles the vector transforms order
 * the tiles their own way; the input and output transforms of one
 * cp_wino_transforms agree, and the multiply does not care.
 */
#ifndef CONVPOOL_WINOGRAD_H
#define CONVPOOL_WINOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "../kernels/ukernel.h"

#define CP_WINO_M 4     /* outputs per tile side */
#define CP_WINO_ALPHA 6 /* inputs per tile side */
#define CP_WINO_POINTS 36

/* The transform points' constants (exact in fp32). */
#define CP_WINO_A 0.625f /* 5/8 */
#define CP_WINO_B 1.5f   /* 3/2 */

/* The 1D matrices, for tests and for the weight transform (double). */
extern const double cp_wino_bt[CP_WINO_ALPHA][CP_WINO_ALPHA]; /* B^T */
extern const double cp_wino_at[CP_WINO_M][CP_WINO_ALPHA];     /* A^T */
extern const double cp_wino_g[CP_WINO_ALPHA][3];              /* G   */

/* Floats of U: packed_channels * c_in * 36, packed_channels counting the tail
   block's MR; 0 on overflow. */
size_t cp_wino_weight_floats(int64_t c_out, int64_t c_in, int mr, int mr_tail);

/*
 * U = G g G^T in double, rounded once to fp32, packed [xi][co_block][c][MR]
 * (zero past c_out). weights: [c_out, c_in, 3, 3] of dtype.
 */
void cp_wino_pack_weights(convpool_dtype dtype, const void *weights, int64_t c_out, int64_t c_in,
                          int mr, int mr_tail, float *u);

/*
 * Input transform of tiles [0, tiles) of an item: V (layout above) for every
 * input channel. Lanes of the last block past `tiles` get finite values
 * that the caller ignores. flags[n] (n < tiles) is set to 1 if an input
 * element of tile n is not finite (or its transform overflowed), else 0;
 * returns the number of such tiles.
 */
typedef size_t (*cp_wino_input_fn)(const float *panel, size_t cs, size_t ld, size_t c_in,
                                   size_t tiles, size_t tw_pad, size_t nr, float *v, size_t vs,
                                   unsigned char *flags);

/*
 * Output transform of channels [0, mr) of M for tiles [0, tiles): Y = A^T M A
 * into the tile buffer, channel m at buf + m * buf_cols, conv rows buf_ld
 * floats apart, whose origin is row dy, column dx (< 4) of the first tile:
 * output (y, x) of the tiles goes to buffer row y - dy, column x - dx, and
 * those of a negative row or column are dropped. Writes whole tiles
 * otherwise (also past the item's edge: the buffer holds 4 * th - dy rows of
 * 4 * tw_pad - dx columns).
 */
typedef void (*cp_wino_output_fn)(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                  size_t tiles, size_t tw_pad, size_t dy, size_t dx, float *buf,
                                  size_t buf_cols, size_t buf_ld);

typedef struct cp_wino_transforms {
  const char *name;
  cp_isa isa;
  int lanes; /* tiles per vector group (divides every NR of the ISA's kernels) */
  cp_wino_input_fn input;
  cp_wino_output_fn output;
} cp_wino_transforms;

/* The transforms for an ISA (the best not above it). */
const cp_wino_transforms *cp_wino_transforms_select(cp_isa isa);

/* Every implementation, portable first (for tests). */
const cp_wino_transforms *cp_wino_transforms_list(size_t *count);

/*
 * The multiply stage for channel blocks [cb0, cb1) of the layer (co_blocks in
 * all; the last one uses uk_tail) over `nblk` blocks of NR tiles: for each
 * block cb, M_cb = m + (cb - cb0) * 36 * mr * t_alloc ([xi][MR][t_alloc],
 * t_alloc = nblk * NR).
 */
void cp_wino_multiply(const cp_sr_ukernel *uk, const cp_sr_ukernel *uk_tail, int64_t co_blocks,
                      const float *u, size_t u_xi_stride, const float *v, size_t vs, size_t c_in,
                      size_t nblk, int64_t cb0, int64_t cb1, float *m);

/* Floats between V's [blk][xi] blocks for c_in channels and NR lanes. */
static inline size_t cp_wino_v_stride(size_t c_in, size_t nr) {
  size_t n = (c_in * nr + 15) & ~(size_t)15; /* whole cache lines, then an odd count */
  return (n / 16) % 2 ? n : n + 16;
}

/* Portable transforms (also the reference of the vector ones). */
size_t cp_wino_input_scalar(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                            size_t tw_pad, size_t nr, float *v, size_t vs, unsigned char *flags);
void cp_wino_output_scalar(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                           size_t tiles, size_t tw_pad, size_t dy, size_t dx, float *buf,
                           size_t buf_cols, size_t buf_ld);
size_t cp_wino_input_avx2(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                          size_t tw_pad, size_t nr, float *v, size_t vs, unsigned char *flags);
void cp_wino_output_avx2(const float *m, size_t t_alloc, size_t mr_stride, size_t mr, size_t tiles,
                         size_t tw_pad, size_t dy, size_t dx, float *buf, size_t buf_cols,
                         size_t buf_ld);
size_t cp_wino_input_avx512(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles,
                            size_t tw_pad, size_t nr, float *v, size_t vs, unsigned char *flags);
void cp_wino_output_avx512(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                           size_t tiles, size_t tw_pad, size_t dy, size_t dx, float *buf,
                           size_t buf_cols, size_t buf_ld);

#endif
