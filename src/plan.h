/*
 * The plan of a run: shapes, the microkernel, every block size and every
 * buffer's bytes, computed in one place with overflow-checked arithmetic.
 *
 * Work item = (batch, group of `group` pooled rows, block of `col_block` conv
 * columns, group of output-channel blocks). An item first packs its input
 * panel -- all C_in channels x (group*pool + k - 1) rows x (col_block + k - 1)
 * columns, as fp32 (or bf16 channel pairs for the pair kernels); for im2col,
 * the strip of its tiles instead -- into per-thread scratch sized from L2,
 * then for each channel block of MR runs the microkernel over the panel's
 * conv positions into a tile buffer, and pools the buffer into dst. Each item owns
 * a disjoint region of dst, so the result does not depend on the thread count.
 */
#ifndef CONVPOOL_PLAN_H
#define CONVPOOL_PLAN_H

#include "internal.h"
#include "kernels/ukernel.h"

typedef struct cp_plan {
  /* shapes */
  int64_t batch, c_in, c_out, height, width, k, pool;
  int64_t c_steps; /* contraction steps over channels: c_in / the kernel's cpack */
  int64_t oh, ow, ph, pw;
  int64_t ow_used; /* pw * pool: conv columns that reach the output */
  size_t elem_size, src_bytes, dst_bytes;
  /* microkernel */
  const cp_sr_ukernel *uk;
  const cp_sr_ukernel *uk_tail; /* the last channel block's kernel (may be uk) */
  int64_t co_blocks; /* ceil(c_out / MR) */
  /* panel */
  int64_t group;        /* pooled rows per item (the "rows per item") */
  int64_t col_block;    /* conv columns per item, a multiple of pool */
  int64_t panel_rows;   /* group*pool + k - 1 */
  size_t panel_ld;      /* floats between panel rows: col_block + k - 1 */
  size_t panel_cs;      /* floats between panel channels, padded against set aliasing */
  size_t panel_floats;  /* c_in * panel_cs + slack for the last tile's reads */
  /* sweep: flat (one run over all rows of the panel, good for narrow rows)
     or per row (one run per conv row, no tiles wasted on the k-1 halo) */
  int flat;
  int im2col;           /* the panel is an im2col strip, swept as a GEMM */
  size_t tiles;         /* microkernel tiles per channel block of a full item */
  size_t buf_row_ld;    /* floats between conv rows in the tile buffer */
  size_t buf_cols;      /* floats per output channel in the tile buffer */
  /* items */
  int64_t row_groups, col_blocks, co_groups, co_blocks_per_group, items;
  int threads;
  /* bytes */
  size_t panel_bytes, buf_bytes, row_bytes, scratch_bytes; /* per thread */
  size_t panel_budget, buf_budget;
  size_t packed_weight_bytes, weight_block_bytes;
} cp_plan;

#endif
