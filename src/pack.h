/*
 * The packers: the weights once per operator, and an item's input into the
 * per-thread panel (fp32, or bf16 channel pairs for the pair kernels) or an
 * im2col strip.
 */
#ifndef CONVPOOL_PACK_H
#define CONVPOOL_PACK_H

#include "driver.h"

/* Element `index` of a tensor of `dtype`, as fp32. */
float cp_load_elem(convpool_dtype dtype, const void *base, size_t index);

/*
 * Weights in channel blocks for the shift-reduce kernels:
 * packed[cb][c][i][j][m] = w[cb*MR + m][c][i][j] as fp32, zero past c_out.
 * Block cb starts at cb * MR * steps * k * k; the last block has the tail
 * kernel's MR. Pair kernels (cpack 2) take 32-bit bf16 pairs: channel 2c in
 * the low half, 2c+1 in the high half (zero past c_in).
 */
void cp_pack_weights_blocked(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                             float *packed);

/* Packed size of cp_pack_weights_blocked for the setup's kernels; fills
   setup->packed_weight_bytes and weight_block_bytes; 0 on overflow. */
int cp_size_weights_blocked(const cp_layer *layer, cp_algo_setup *setup);

/*
 * The input panel of an item: every channel, input rows [iy0, iy0 + rows),
 * columns [ix0, ix0 + cols) (negative or past the input: the conv padding,
 * written as zeros), widened to fp32 (or bf16 pairs), rows pl->panel_ld
 * apart, channels pl->panel_cs apart. Everything else the microkernel may
 * read (row ends, channel padding, the final slack) is zero.
 */
void cp_pack_panel(const cp_run *r, int64_t b, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                   float *panel);

/*
 * The im2col strip of an item: for each tile of NR conv positions of its conv
 * region (in the order of the tile buffer), B[s][i][j][n] = x[s][row + i -
 * pad_top][col + j - pad_left] for position n at (row, col); positions past
 * the item and inputs in the conv padding are zero.
 */
void cp_pack_im2col(const cp_run *r, const cp_item *it, float *strip);

#endif
