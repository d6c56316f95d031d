/*
 * Winograd F(4x4, 3x3) and F(2x2, 3x3): transforms and the multiply stage of
 * one work item. What follows is written for F(4x4, 3x3); F(2x2, 3x3) (below,
 * "F(2x2, 3x3)") is the same with 2x2 output tiles of 4x4 inputs (rows and
 * columns 2 apart), 16 points and 17 sums per tile, and tiles per row not
 * rounded up (its vector transforms load each tile's rows on their own).
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
 * the tiles their own way (lane_u, cp_wino_lane_of); the input and output
 * transforms of one cp_wino_transforms agree, the shift-reduce multiply does
 * not care, and the channels-in-lanes one reads each tile at its lane.
 */
#ifndef CONVPOOL_WINOGRAD_H
#define CONVPOOL_WINOGRAD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "../kernels/cl-ukernel.h"
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

struct cp_wino_kind;

/* Floats of U: packed_channels * c_in * points, packed_channels counting the
   tail block's MR; 0 on overflow. */
size_t cp_wino_weight_floats(const struct cp_wino_kind *kind, int64_t c_out, int64_t c_in, int mr,
                             int mr_tail);

/*
 * U = G g G^T in double, rounded once to fp32, packed [xi][co_block][c][MR]
 * (zero past c_out). weights: [c_out, c_in, 3, 3] of dtype.
 */
void cp_wino_pack_weights(const struct cp_wino_kind *kind, convpool_dtype dtype,
                          const void *weights, int64_t c_out, int64_t c_in, int mr, int mr_tail,
                          float *u);

/*
 * How channel block cb of U (packed by cp_wino_pack_weights from the same
 * weights) is computed: returns its largest |U| (>= 0) for Winograd, or -1
 * for the direct path: fewer than CP_WINO_MIN_CHANNELS input channels; a U
 * that is not finite (an Inf or NaN weight, or a transform that overflowed
 * fp32) or above CP_WINO_U_MAX; or an output channel whose filter taps t,
 * summed over the input channels (W(t) = sum_c |g[c][t]|), include one below
 * 1/CP_WINO_SPREAD of their mean: such a filter (one tap, an edge detector,
 * taps of very different sizes) leaves an output's sum |x*w| far below what
 * the range rule assumes wherever the large inputs meet its small taps.
 */
float cp_wino_block_scale(const struct cp_wino_kind *kind, convpool_dtype dtype,
                          const void *weights, int64_t c_out, int64_t c_in, int mr, int mr_tail,
                          const float *u, size_t cb);

/*
 * The range rule: which tiles the direct path computes (README "Winograd").
 * Winograd's rounding errors reach every output of a tile in proportion to
 * the tile's largest inputs, while the contract bounds each output's error
 * by its own sum |x*w| (1e-5 of it, plus 1e-6). With d the 6x6 inputs of a
 * tile in every channel, a tile is flagged when
 *
 *   c_in * max |d|           >  CP_WINO_RATIO * min_o S(o)    (a large input)
 *   sqrt(c_in) * max_p A(p)  >  CP_WINO_RATIO_SUM * min_o S(o)
 *                                  (a position large in many channels at once)
 *   or not  L <= limit                             (overflow, NaN or Inf)
 *
 * A(p) = sum of |d| at position p over the channels, S(o) = sum of A over
 * output o's 3x3 window, o over the tile's outputs that exist (rows x cols
 * from the item's first tile), L = sum of A over the 6x6 positions. The
 * thresholds were measured on random tiles of ordinary and
 * high-dynamic-range data (tools/wino_range.c, two runs of 30,000 items of
 * 16 tiles): below them the error stayed within 7.6e-6 of sum |x*w| for
 * c_in >= 8, while ordinary data (uniform, normal, ReLU'd normal; conv
 * padding 1) reached 3.5 (r1) and 5.5 (r2) from 16 input channels; at 8,
 * r1 reached 4.8 in ReLU'd data at an image corner (2 tiles in 10,288).
 *
 * limit = CP_WINO_HEADROOM / max(1, u_max), u_max the largest |U| of the
 * channel blocks that Winograd computes (<= CP_WINO_U_MAX): every |V| is at
 * most 7.03 L, every partial sum of M at most 7.03 u_max L and every value
 * of the output transform at most 52.4 times that, so nothing overflows
 * (2^118 * 369 < 2^127). Sums in fp32: an Inf or NaN input, or a sum that
 * overflows, fails `L <= limit`.
 */
#define CP_WINO_RATIO 4.0f
#define CP_WINO_RATIO_SUM 8.0f
#define CP_WINO_HEADROOM 0x1p118f
#define CP_WINO_U_MAX 0x1p64f
/* A filter whose taps, summed over the input channels, include one below
   1/CP_WINO_SPREAD of their mean makes its channel block direct (see
   cp_wino_block_scale). */
#define CP_WINO_SPREAD 8.0
/* Fewer input channels make every block direct: with few channels an
   output's sum |x*w| follows its inputs too loosely for the rule (measured:
   up to 7.2e-5 of it with 3 channels; auto hands such layers to
   shift-reduce anyway). */
#define CP_WINO_MIN_CHANNELS 8

typedef struct cp_wino_screen {
  float ratio;     /* CP_WINO_RATIO */
  float ratio_sum; /* CP_WINO_RATIO_SUM */
  float limit;     /* the largest L of a tile computed by Winograd */
  int64_t rows;    /* conv output rows that exist from the first tile row */
  int64_t cols;    /* conv output columns that exist from the first tile column */
  /* 0, or images side by side: `slots` slots of `slot` tile columns each,
     where cols counts from each slot's first column (tiles past the last
     slot have no outputs) */
  int64_t slot, slots;
} cp_wino_screen;

/* The limit of a screen for blocks whose largest |U| is u_max. */
static inline float cp_wino_limit(float u_max) {
  return CP_WINO_HEADROOM / (u_max > 1.0f ? u_max : 1.0f);
}

/*
 * The rule for one tile of m x m outputs: s[m * m] its window sums (s[m * p
 * + q] for output (p, q)), l its L, dmax its largest |d|, amax its largest
 * A(p), up to rows x cols of its outputs existing. Returns the outputs to
 * compute directly, bit m * p + q for output (p, q): those whose own window
 * sum fails the two tests above (a tile's Winograd error reaches each of its
 * outputs alike, each bounded by its own sum; the tile is flagged where any
 * output is, which is the rule over min_o S(o)), every bit (CP_WINO_ALL) for
 * a non-finite L. Tiles with no output (rows or cols <= 0) are flagged only
 * for a non-finite L.
 */
typedef uint16_t cp_wino_mask; /* a tile's outputs, one bit each (m * m <= 16) */
#define CP_WINO_ALL ((cp_wino_mask)0xffff)
static inline cp_wino_mask cp_wino_screen_tile(const cp_wino_screen *sc, size_t c_in, int m,
                                               const float *s, float l, float dmax, float amax,
                                               int64_t rows, int64_t cols) {
  if (!(l <= sc->limit)) return CP_WINO_ALL;
  const float large = (float)c_in * dmax, spread = sqrtf((float)c_in) * amax;
  cp_wino_mask mask = 0;
  for (int64_t p = 0; p < m && p < rows; p++)
    for (int64_t q = 0; q < m && q < cols; q++) {
      const float w = s[m * p + q];
      if (!(large <= sc->ratio * w && spread <= sc->ratio_sum * w))
        mask |= (cp_wino_mask)(1u << (m * p + q));
    }
  return mask;
}

/*
 * Input transform of tiles [0, tiles) of an item: V (layout above) for the
 * c_in input channels of the panel (a run of the layer's channels: V's
 * channel c at v + c * nr). Lanes of the last block past `tiles` get finite
 * values that the caller ignores. For each tile n < tiles, the range rule's
 * sums over those channels go to sums + n * CP_WINO_SUMS: A(p) of the 36
 * positions (row-major), summed over the channels in order, then max |d|.
 */
typedef void (*cp_wino_input_fn)(const float *panel, size_t cs, size_t ld, size_t c_in,
                                 size_t tiles, size_t tw_pad, size_t nr, float *v, size_t vs,
                                 float *sums);

/* Floats of the range rule's sums per tile (36 sums of |d|, max |d|). */
#define CP_WINO_SUMS 37

/* Input channels per slice: the input transform's channels run in slices
   of this many (the last one shorter), each slice's sums on their own, and
   the rule adds the slices' sums in slice order; so the flags are the same
   bytes whether the slices ran on one thread or several. */
#define CP_WINO_SLICE 64

/* Slices of c_in input channels. */
static inline size_t cp_wino_slices(size_t c_in) {
  return (c_in + CP_WINO_SLICE - 1) / CP_WINO_SLICE;
}

/*
 * The range rule over tiles [0, tiles) from the sums of `slices` slices
 * (slice i's at sums + i * slice_floats, as the input transform writes
 * them), added in slice order: flags[n] = the outputs of tile n to be
 * computed directly (cp_wino_screen_tile; tile n's first output is at row 4
 * (n / tw_pad), column 4 (n % tw_pad) of screen's rows x cols), 0 for none.
 * Returns the number of tiles with any.
 */
size_t cp_wino_screen_tiles(const float *sums, size_t slices, size_t slice_floats, size_t c_in,
                            size_t tiles, size_t tw_pad, const cp_wino_screen *screen,
                            cp_wino_mask *flags);
/* The same for F(2x2, 3x3): 2x2 outputs from 4x4 inputs, 17 sums per tile. */
size_t cp_wino_screen_tiles_f23(const float *sums, size_t slices, size_t slice_floats, size_t c_in,
                                size_t tiles, size_t tw_pad, const cp_wino_screen *screen,
                                cp_wino_mask *flags);

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

/*
 * The tiles that channels-in-lanes products compute, in order: tile
 * k < count is tile cp_wino_tile_of(map, k) of the item (row-major, tw_pad
 * per row). Without images side by side (slot = 0) all of them; with them,
 * in each row the first slot - 1 columns of each of the `slots` slots (a
 * slot's last column has no outputs).
 */
typedef struct cp_wino_tile_map {
  size_t count, tw_pad, slot, slots;
} cp_wino_tile_map;

static inline cp_wino_tile_map cp_wino_tile_map_of(size_t th, size_t tw_pad, size_t slot,
                                                   size_t slots) {
  cp_wino_tile_map map = {th * tw_pad, tw_pad, slot, slots};
  if (slot > 1) map.count = th * slots * (slot - 1);
  return map;
}

static inline size_t cp_wino_tile_of(const cp_wino_tile_map *map, size_t k) {
  if (map->slot <= 1) return k;
  const size_t per_row = map->slots * (map->slot - 1), c = k % per_row;
  return (k / per_row) * map->tw_pad + c / (map->slot - 1) * map->slot + c % (map->slot - 1);
}

/*
 * The output transform of M laid out [xi][t_alloc][mr_stride] (channels in
 * the lanes, cp_wino_multiply_cl: product k at row k), channels [0, mr), the
 * map's tiles, into the tile buffer as cp_wino_output_fn writes it. NULL
 * where the tile size has no such products.
 */
typedef void (*cp_wino_output_cl_fn)(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                     const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                                     size_t buf_cols, size_t buf_ld);

typedef struct cp_wino_transforms {
  const char *name;
  cp_isa isa;
  int lanes; /* tiles per vector group (divides every NR of the ISA's kernels) */
  cp_wino_input_fn input;
  cp_wino_output_fn output;       /* F(4x4, 3x3): M from the shift-reduce products */
  cp_wino_output_cl_fn output_cl; /* M from the channels-in-lanes products */
  /* V's lane order within each group of 4 * lane_u tiles: tile 4-load u's
     k-th tile (u * lane_u + k) at lane 4k + u; 0: tile d at lane d */
  int lane_u;
} cp_wino_transforms;

/* The lane of V holding tile d of a block of NR lanes (cp_wino_transforms.lane_u). */
static inline size_t cp_wino_lane_of(size_t d, size_t lane_u) {
  if (lane_u == 0) return d;
  const size_t group = 4 * lane_u, e = d % group;
  return d - e + 4 * (e % lane_u) + e / lane_u;
}

/*
 * A tile size: F(m x m, 3x3) from alpha x alpha inputs, alpha = m + 2, with
 * its matrices, its transforms and its range rule. The multiply stage and
 * the weight transform read the sizes from here.
 */
typedef struct cp_wino_kind {
  const char *name;   /* "F(4x4,3x3)" */
  const char *points; /* "0, +-5/8, +-3/2, inf" */
  int m, alpha;       /* outputs and inputs per tile side */
  int points_n;       /* alpha * alpha: points, GEMMs of the multiply stage */
  int sums;           /* floats of the range rule's sums per tile: points_n + 1 */
  int col_pad;        /* tiles per row are rounded up to a multiple of this */
  int reach;          /* panel row = m * tiles per row + reach (what the transforms read) */
  const double *bt;   /* B^T, alpha x alpha */
  const double *at;   /* A^T, m x alpha */
  const double *g;    /* G, alpha x 3 */
  const cp_wino_transforms *impls; /* portable first */
  size_t impl_count;
  /* cp_wino_screen_tiles for this kind's sums */
  size_t (*screen_tiles)(const float *sums, size_t slices, size_t slice_floats, size_t c_in,
                         size_t tiles, size_t tw_pad, const struct cp_wino_screen *screen,
                         cp_wino_mask *flags);
} cp_wino_kind;

extern const cp_wino_kind cp_wino_f43; /* F(4x4, 3x3) */
extern const cp_wino_kind cp_wino_f23; /* F(2x2, 3x3) */

/* The transforms of a kind for an ISA (the best not above it). */
const cp_wino_transforms *cp_wino_transforms_select(const cp_wino_kind *kind, cp_isa isa);

/*
 * The multiply stage for channel blocks [cb0, cb1) of the layer (co_blocks in
 * all; the last one uses uk_tail) over `nblk` blocks of NR tiles: for each
 * block cb, M_cb = m + (cb - cb0) * points * mr * t_alloc ([xi][MR][t_alloc],
 * t_alloc = nblk * NR), points the kind's.
 */
void cp_wino_multiply(const cp_wino_kind *kind, const cp_sr_ukernel *uk,
                      const cp_sr_ukernel *uk_tail, int64_t co_blocks, const float *u,
                      size_t u_xi_stride, const float *v, size_t vs, size_t c_in, size_t nblk,
                      int64_t cb0, int64_t cb1, float *m);

/*
 * The same on a channels-in-lanes kernel (cl-ukernel.h): U in blocks of its
 * MR ([xi][cb][c][MR], u_xi_stride floats per point), the map's tiles of V
 * read in groups of its NP (tile n at block n / nr, lane cp_wino_lane_of(n %
 * nr, lane_u): the input transform's order), and M_cb =
 * m + (cb - cb0) * points * t_alloc * MR laid out [xi][t_alloc][MR]: product
 * k's MR channels at (xi * t_alloc + k) * MR, as the kernel's registers hold
 * them (t_alloc >= map->count rounded up to NP; rows past the count get the
 * last product's sums). The channels run in passes of CP_WINO_CL_KC_FLOATS / MR,
 * whose U stays in L1 while every group of tiles multiplies it, the sums in
 * between in M (the kernel's passes give the bits of one call). 8 KiB of U
 * a pass (64 channels at MR = 32) rather than 16 leave L1 room for the next
 * block's prefetched lines and V's: Zen 5, 2 threads, CLI medians of two or
 * three rounds, 16 -> 8 KiB: 512 -> 512 at 28x28 2.63-2.68 -> 2.52-2.59 ms
 * (32 KiB: 2.94-2.99), 8 images at 14x14 pool 2 6.17-6.29 -> 5.89-6.03;
 * 256 -> 256 at 56x56 and 14x14, 128 -> 256 at 56x56, 64 -> 128 at 112x112,
 * 128 -> 128 at 28x28 level; the AVX2 kernels (MR = 16, 128 channels) on
 * 512 -> 512 at 28x28 5.49-5.65 -> 5.44-5.48.
 */
#define CP_WINO_CL_KC_FLOATS 2048
void cp_wino_multiply_cl(const cp_wino_kind *kind, const cp_cl_ukernel *uk, const float *u,
                         size_t u_xi_stride, const float *v, size_t vs, size_t nr, size_t lane_u,
                         size_t c_in, const cp_wino_tile_map *map, size_t t_alloc, int64_t cb0,
                         int64_t cb1, float *m);

/* Floats between V's [blk][xi] blocks for c_in channels and NR lanes. */
static inline size_t cp_wino_v_stride(size_t c_in, size_t nr) {
  size_t n = (c_in * nr + 15) & ~(size_t)15; /* whole cache lines, then an odd count */
  return (n / 16) % 2 ? n : n + 16;
}

/* The transforms of each ISA, cp_wino_input_<isa> and cp_wino_output_<isa>
   (the portable ones are also the reference of the vector ones). */
#define CP_WINO_DECLARE_TRANSFORMS(isa)                                                         \
  void cp_wino_input_##isa(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles, \
                           size_t tw_pad, size_t nr, float *v, size_t vs, float *sums);         \
  void cp_wino_output_##isa(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,        \
                            size_t tiles, size_t tw_pad, size_t dy, size_t dx, float *buf,      \
                            size_t buf_cols, size_t buf_ld);                                    \
  void cp_wino_output_cl_##isa(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,     \
                               const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,   \
                               size_t buf_cols, size_t buf_ld);
CP_WINO_DECLARE_TRANSFORMS(scalar)
CP_WINO_DECLARE_TRANSFORMS(avx2)
CP_WINO_DECLARE_TRANSFORMS(avx512)
#define CP_WINO_DECLARE_INPUT(isa)                                                              \
  void cp_wino_input_##isa(const float *panel, size_t cs, size_t ld, size_t c_in, size_t tiles, \
                           size_t tw_pad, size_t nr, float *v, size_t vs, float *sums);
CP_WINO_DECLARE_INPUT(f23_scalar)
CP_WINO_DECLARE_INPUT(f23_avx2)
CP_WINO_DECLARE_INPUT(f23_avx512)
#undef CP_WINO_DECLARE_INPUT
void cp_wino_output_cl_f23_scalar(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                  const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                                  size_t buf_cols, size_t buf_ld);
void cp_wino_output_cl_f23_avx2(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                                size_t buf_cols, size_t buf_ld);
void cp_wino_output_cl_f23_avx512(const float *m, size_t t_alloc, size_t mr_stride, size_t mr,
                                  const cp_wino_tile_map *map, size_t dy, size_t dx, float *buf,
                                  size_t buf_cols, size_t buf_ld);
#undef CP_WINO_DECLARE_TRANSFORMS

#endif
