/*
 * The packers shared by the algorithms: weights in channel blocks for the
 * shift-reduce kernels, and an item's input window into an fp32 panel (or
 * bf16 channel pairs for the pair kernels). They take sizes and pointers
 * only; what an algorithm alone packs lives in its own file.
 */
#ifndef CONVPOOL_PACK_H
#define CONVPOOL_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "convert.h"
#include "internal.h"

/* Element `index` of a tensor of `dtype`, as fp32. */
float cp_load_elem(convpool_dtype dtype, const void *base, size_t index);

/*
 * A conv stride s > 1 can be split off the filter (space to depth): phase
 * (r, p) of input channel c, for r, p < phases = min(s, k), is the image of
 * the input rows r, r + s, r + 2s, ... and columns p, p + s, ...; the strided
 * conv with a k x k filter is then a conv of stride 1 with a
 * ceil(k / s) x ceil(k / s) filter over c_in * phases^2 such channels
 * (channel c * phases^2 + r * phases + p), whose tap (a, b) is the tap
 * (r + s*a, p + s*b) of the filter (zero past k). `split` = 1: the filter
 * as it is.
 */
static inline int64_t cp_split_phases(int64_t k, int64_t split) {
  return split > 1 ? (split < k ? split : k) : 1;
}
static inline int64_t cp_split_k(int64_t k, int64_t split) {
  return split > 1 ? (k + split - 1) / split : k;
}

/* The channel blocks of a weight packing: per conv group, blocks of `mr`
   output channels, the group's last one of `mr_tail` (its kernel's MR);
   `cpack` input channels per 32-bit element (1: fp32; 2: bf16 pairs);
   `split`: the conv stride split off the filter (1: none). */
typedef struct cp_weight_blocks {
  int64_t c_out, c_in, k; /* weights [c_out, c_in / groups, k, k] */
  size_t mr, mr_tail, cpack;
  int64_t groups, split;
} cp_weight_blocks;

/* Bytes of the blocked weights and of one block of them; 0 on overflow. */
int cp_size_weights_blocked(const cp_weight_blocks *wb, size_t *bytes, size_t *block_bytes);

/*
 * Weights in channel blocks for the shift-reduce kernels. Without groups or
 * split: packed[cb][c][i][j][m] = w[cb*MR + m][c][i][j] as fp32, zero past
 * c_out. Block cb starts at cb * MR * steps * k * k; the last block has the
 * tail kernel's MR. Pair kernels (cpack 2) take 32-bit bf16 pairs: channel
 * 2c in the low half, 2c+1 in the high half (zero past c_in). w: [c_out,
 * c_in / groups, k, k] of dtype. With groups, block cb is block
 * cb % blocks_per_group of group cb / blocks_per_group: its output channels
 * are the group's, its channels c the group's c_in / groups input channels
 * (each group's last block has the tail kernel's MR). With a split, c runs
 * over the phase channels and (i, j) over the split filter (cp_split_k).
 */
void cp_pack_weights_blocked(convpool_dtype dtype, const void *w, const cp_weight_blocks *wb,
                             float *packed);

/* One image of src as the panel packer reads it. */
typedef struct cp_panel_src {
  const unsigned char *image; /* [c_in, height, width] of elem_size bytes */
  size_t elem_size;
  int64_t c_in, height, width;
  int64_t groups;     /* conv groups: channel pairs and steps never cross one */
  int64_t split;      /* a conv stride split into phase channels; 1: none */
  int64_t phases;     /* cp_split_phases of the split: 1 when none */
  size_t group_steps; /* channel steps per group: ceil(c_in / groups * phases^2 / cpack) */
  size_t cpack;       /* channels per panel element: 1, or 2 (bf16 pairs, 16-bit src) */
  cp_widen_fn widen;  /* 16-bit src -> fp32 rows for cpack 1; NULL for float32 */
  size_t ahead_rows;  /* input rows prefetched ahead of the copy */
} cp_panel_src;

/* Where a panel's elements lie: rows ld apart, channel steps cs apart,
   `floats` 32-bit elements in all (cs * steps plus a zeroed slack). */
typedef struct cp_panel_layout {
  size_t ld, cs, floats;
} cp_panel_layout;

/*
 * The input panel of an item: every channel, input rows [iy0, iy0 + rows),
 * columns [ix0, ix0 + cols) (negative or past the input: the conv padding,
 * written as zeros), widened to fp32 (or bf16 pairs). Everything else the
 * microkernel may read (row ends, channel padding, the final slack) is zero.
 * Channel step t (groups x group_steps of them) lies at t * cs. With a
 * split, panel row y, column x of phase channel (c, r, p) holds input row
 * iy0 + y*split + r, column ix0 + x*split + p.
 */
void cp_pack_panel(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                   const cp_panel_layout *layout, float *panel);

/* The same for the channel steps [step0, step1) only (the conv groups an
   item's channel blocks read, a slice of the channels); the other steps and
   the slack past the last step are left as they are. */
void cp_pack_panel_steps(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                         size_t cols, size_t step0, size_t step1, const cp_panel_layout *layout,
                         float *panel);

/* Channel steps [step0, step1) of `rows` panel rows of `cols` columns into
   columns [0, cols) of each row only (zero outside the input), leaving the
   rest of every row and of each channel's plane as they are: for several
   images side by side in one panel row (panel points at an image's first
   column). */
void cp_pack_panel_slot(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                        size_t step0, size_t step1, const cp_panel_layout *layout, float *panel);

/* Zeroes the panel's slack past its last channel step. */
void cp_pack_panel_slack(const cp_panel_src *src, const cp_panel_layout *layout, float *panel);

/* Whether any of n 32-bit panel elements (fp32, or two bf16 halves when
   cpack is 2) is an infinity or a NaN. */
int cp_has_nonfinite(const float *panel, size_t n, size_t cpack);

#endif
