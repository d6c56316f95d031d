/*
 * The layer an operator computes and the plan of one run: shapes, the
 * algorithm and its microkernels, every block size and every buffer's bytes,
 * computed in one place (plan.c) with overflow-checked arithmetic.
 *
 * Work item = (batch, group of `group` pooled rows, block of `col_block`
 * pooled columns, group of output-channel blocks). Its conv region is the
 * conv outputs its pooling windows cover (clipped to the conv output; with
 * overlapping windows, neighbouring items share a few conv rows). The driver
 * (driver.c) runs an item in three steps: the algorithm packs the item's
 * input into per-thread scratch (the "panel"; conv zero padding is written
 * there), then for each channel block of MR it computes the item's conv
 * region into a per-thread tile buffer, which the epilogue pools, biases,
 * activates, converts and stores into dst. Each item owns a disjoint region
 * of dst, so the result does not depend on the thread count.
 */
#ifndef CONVPOOL_PLAN_H
#define CONVPOOL_PLAN_H

#include "config.h"
#include "internal.h"
#include "kernels/ukernel.h"

struct cp_algorithm;

/* Sides of a padding, in the order of the public arrays. */
enum { CP_TOP = 0, CP_LEFT = 1, CP_BOTTOM = 2, CP_RIGHT = 3 };

/* What an operator computes: the validated convpool_layer, fixed at create. */
typedef struct cp_layer {
  convpool_dtype dtype;
  int64_t c_out, c_in, k;
  int64_t pad[4];         /* conv zero padding, CP_TOP.. */
  float act_min, act_max; /* activation clamp; -inf, +inf for none */
  int64_t pool, stride;   /* pooling window and its stride */
  int64_t pool_pad[4];    /* -inf padding of the pooling, CP_TOP.. */
  int ceil_mode;
  int has_bias;
} cp_layer;

/* Validate a public layer into a cp_layer (layer.c). */
convpool_status cp_layer_from_public(const convpool_layer *in, int has_bias, cp_layer *out);

/* What the algorithm chose at create for a layer. */
typedef struct cp_algo_setup {
  const cp_sr_ukernel *uk;      /* main microkernel */
  const cp_sr_ukernel *uk_tail; /* kernel of the last channel block (may be uk) */
  size_t packed_weight_bytes;   /* bytes of the packed weights */
  size_t weight_block_bytes;    /* bytes of one channel block of them */
} cp_algo_setup;

typedef struct cp_plan {
  /* shapes */
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, k, pool, stride;
  int64_t pad[4], pool_pad[4];
  float act_min, act_max; /* activation clamp (-inf, +inf: none) */
  int ceil_mode;
  int64_t c_steps; /* contraction steps over channels: c_in / the kernel's cpack */
  int64_t oh, ow;  /* conv output */
  int64_t ph, pw;  /* pooled output */
  size_t elem_size, src_bytes, dst_bytes;
  /* algorithm and microkernels */
  const struct cp_algorithm *algo;
  const struct cp_algorithm *handed_over; /* auto's choice, when it handed this run to algo */
  const cp_blocking *cfg;
  const cp_sr_ukernel *uk;
  const cp_sr_ukernel *uk_tail;
  int64_t co_blocks; /* ceil(c_out / MR) */
  /* item size (the plan) */
  int64_t group;     /* pooled rows per item (the "rows per item") */
  int64_t col_block; /* pooled columns per item */
  int64_t conv_rows; /* conv rows of the largest item's region */
  int64_t conv_cols; /* conv columns of the largest item's region */
  /* panel (set by the algorithm's geometry for conv_rows x conv_cols) */
  int64_t panel_rows;  /* input rows of an item: conv_rows + k - 1 */
  size_t panel_ld;     /* elements between panel rows */
  size_t panel_cs;     /* elements between panel channels */
  size_t panel_floats; /* 32-bit elements of the panel */
  int flat;            /* tiles run flat over the rows (narrow rows), not per row */
  size_t tiles;        /* microkernel tiles per channel block of a full item */
  size_t buf_row_ld;   /* floats between conv rows in the tile buffer */
  size_t buf_cols;     /* floats per output channel in the tile buffer */
  /* items */
  int64_t row_groups, col_blocks, co_groups, co_blocks_per_group, items;
  int threads;
  /* bytes */
  size_t panel_bytes, buf_bytes, row_bytes, scratch_bytes; /* per thread */
  size_t panel_budget, buf_budget;
  size_t packed_weight_bytes, weight_block_bytes;
} cp_plan;

/*
 * The plan of a run of `layer` with `algo` (set up as `setup`) on
 * [batch, c_in, height, width]. `rows_per_item` forces the pooled rows of an
 * item (0: the plan decides); `threads` is the thread pool's size.
 */
/* Pooled outputs along a side of `conv` conv outputs (0 if the window does
   not fit the padded side). */
int64_t cp_pooled_size(int64_t conv, int64_t pool, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                       int ceil_mode);

/* The shapes of a run of `layer` on [batch, c_in, height, width] and their
   byte counts: the fields of pl up to dst_bytes (the rest zero). Refuses,
   naming the value, a size below 1, a filter larger than the padded input, a
   pool larger than the conv output and byte counts that overflow. */
convpool_status cp_plan_shape(const cp_layer *layer, int64_t batch, int64_t height, int64_t width,
                              cp_plan *pl);

convpool_status cp_plan_make(const cp_layer *layer, const struct cp_algorithm *algo,
                             const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                             int64_t batch, int64_t height, int64_t width, cp_plan *pl);

/* The same, for an algorithm auto chose: the run may be handed over (the
   algorithm's hands_over rule); pl->handed_over then says so. */
convpool_status cp_plan_make_auto(const cp_layer *layer, const struct cp_algorithm *algo,
                                  const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                                  int64_t batch, int64_t height, int64_t width, cp_plan *pl);

/* The plan as text (convpool_op_describe): `choice` is how auto chose the
   algorithm ("" when it was named), `epilogue` the epilogue row's name. */
void cp_plan_describe(const cp_plan *pl, convpool_dtype dtype, const char *choice,
                      const char *epilogue, char *text, size_t capacity);

#endif
