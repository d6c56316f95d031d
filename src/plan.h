/*
 * The layer an operator computes and the plan of one run: shapes, the item
 * grid, the per-thread byte budgets and every buffer's bytes, computed in one
 * place (plan.c) with overflow-checked arithmetic. What only one algorithm
 * needs (its kernels, its panel geometry, its tile counts) is that
 * algorithm's own state, kept in the setup and the plan as opaque bytes that
 * only its file reads (algo/algo.h).
 *
 * Work item = (batch, group of `group` pooled rows, block of `col_block`
 * pooled columns, group of output-channel blocks). Its conv region is the
 * conv outputs its pooling windows cover (clipped to the conv output; with
 * overlapping windows, neighbouring items share a few conv rows). The driver
 * (driver.c) runs an item: the algorithm packs the item's input into
 * per-thread scratch (the "panel", or reads one its phase before the items
 * prepared in the run's shared workspace), then for each channel block it computes
 * the item's conv region into a per-thread tile buffer, which the epilogue
 * pools, biases, activates, converts and stores into dst. Each item owns a
 * disjoint region of dst, so the result does not depend on the thread count.
 */
#ifndef CONVPOOL_PLAN_H
#define CONVPOOL_PLAN_H

#include <stddef.h>

#include "config.h"
#include "internal.h"

struct cp_algorithm;

/* Sides of a padding, in the order of the public arrays. */
enum { CP_TOP = 0, CP_LEFT = 1, CP_BOTTOM = 2, CP_RIGHT = 3 };

/* Whether conv padding pad[4] (CP_TOP..) is none on every side. */
static inline int cp_unpadded(const int64_t pad[4]) {
  return pad[CP_TOP] == 0 && pad[CP_LEFT] == 0 && pad[CP_BOTTOM] == 0 && pad[CP_RIGHT] == 0;
}

/* What an operator computes: the validated convpool_layer, fixed at create. */
typedef struct cp_layer {
  convpool_dtype dtype;
  int64_t c_out, c_in, k; /* weights [c_out, c_in / groups, k, k] */
  int64_t conv_stride;    /* conv stride (rows and columns) */
  int64_t dilation;       /* conv dilation; 1 when k = 1 (the same layer) */
  int64_t groups;         /* conv groups, dividing c_in and c_out */
  int64_t extent;         /* of the dilated filter: dilation * (k - 1) + 1 */
  int64_t pad[4];         /* conv zero padding, CP_TOP.. */
  float act_min, act_max; /* activation clamp; -inf, +inf for none */
  int64_t pool, stride;   /* pooling window and its stride */
  int64_t pool_pad[4];    /* -inf padding of the pooling, CP_TOP.. */
  int ceil_mode;
  int has_bias;
  int has_residual; /* runs add a residual [B, c_out, OH, OW] before the activation */
} cp_layer;

/* Validate a public layer into a cp_layer (layer.c). */
convpool_status cp_layer_from_public(const convpool_layer *in, int has_bias, cp_layer *out);

/* Room for an algorithm's own state in its setup and in a plan. An
   algorithm's struct must fit (each file checks it with _Static_assert). */
#define CP_ALGO_STATE_BYTES 256
typedef union cp_algo_state {
  max_align_t align;
  unsigned char bytes[CP_ALGO_STATE_BYTES];
} cp_algo_state;

/* What the algorithm chose at create for a layer. */
typedef struct cp_algo_setup {
  size_t packed_weight_bytes; /* bytes of the packed weights */
  int co_block;               /* output channels per channel block */
  int positions;              /* conv positions of the main kernel's register tile */
  /* > 0: its channel blocks leave the tile buffer channels in lanes, co_block
     of them (the algorithm offers it at setup; the operator keeps it only
     where the layer's epilogue pools that layout, epilogue.h: lanes_row);
     0: channel rows */
  int lanes;
  /* set before the setup: auto chose the algorithm, so its runs may be
     handed over (cp_algorithm.hands_over) and the setup packs what the
     hand-over's algorithm reads too */
  int auto_choice;
  /* set before the setup, 0 for the algorithm's own choice: the output
     channels per block that its packed weights must be laid out in, where
     the algorithm handing runs over reads them too (cp_algorithm.packs_for);
     a setup that cannot lay them out so fails */
  int co_block_wanted;
  cp_isa isa;          /* ISA of the kernels it chose */
  const char *kernel;  /* name of its main kernel */
  cp_algo_state state; /* the algorithm's own: its kernels, its weight layout */
} cp_algo_setup;

/* A setup of another algorithm whose weights an auto-chosen algorithm's
   packed weights hold too (cp_algorithm.packs_for), for the runs its
   hands_over rule gives that algorithm; an operator holds up to
   CP_MAX_HANDOVERS of them. */
#define CP_MAX_HANDOVERS 2
typedef struct cp_handover {
  const struct cp_algorithm *algo; /* NULL: none */
  cp_algo_setup setup;             /* algo's own, as its setup hook made it */
  size_t packed_offset;            /* floats before its weights in the packed weights */
} cp_handover;

typedef struct cp_plan {
  /* shapes (stride is the pool's; the conv's is conv_stride) */
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, k, pool, stride;
  int64_t conv_stride, dilation, groups, extent; /* as in cp_layer */
  int64_t pad[4], pool_pad[4];
  float act_min, act_max; /* activation clamp (-inf, +inf: none) */
  int ceil_mode;
  int has_residual;
  int64_t oh, ow; /* conv output */
  int64_t ph, pw; /* pooled output */
  size_t elem_size, src_bytes, dst_bytes;
  size_t residual_bytes; /* [batch, c_out, oh, ow]; 0 without a residual */
  /* the algorithm */
  const struct cp_algorithm *algo;
  const struct cp_algorithm *handed_over; /* auto's choice, when it handed this run to algo */
  const cp_algo_setup *setup; /* algo's setup (of handed_over, or the operator's hand-over's) */
  size_t packed_offset;       /* floats before algo's weights in the operator's packed weights */
  const char *kernel;         /* the run's main kernel: the setup's, or as the layout hook says */
  int positions;              /* conv positions of that kernel's register tile */
  const cp_blocking *cfg;     /* block sizes of the setup's ISA */
  /* The run's block layout (the setup's, or the algorithm's layout hook's):
     channel blocks of co_block output channels, left channels in lanes
     (lanes of them per position) where lanes > 0. Output channel blocks
     never cross a block group: each block group's c_out / block_groups
     channels are group_co_blocks blocks of co_block (the last one partial),
     and block cb is block cb % group_co_blocks of block group
     cb / group_co_blocks. The block groups are the conv groups, or one
     where the algorithm's blocks span them (reading each channel's group
     itself). */
  int co_block, lanes;
  int64_t block_groups;    /* groups, or 1 */
  int64_t group_co_blocks; /* ceil(c_out / block_groups / co_block) */
  int64_t co_blocks;       /* block_groups * group_co_blocks */
  /* item size */
  int64_t group;     /* pooled rows per item (the "rows per item") */
  int64_t col_block; /* pooled columns per item */
  int64_t conv_rows; /* conv rows of the largest item's region */
  int64_t conv_cols; /* conv columns of the largest item's region */
  /* the tile buffer, as the algorithm's kernels write it: conv row y, column
     x of the item's region, channel m of the block at
     m * buf_cols + y * buf_row_ld + x (channel rows), or, where the setup
     leaves it channels in lanes (lanes), at (y * nx + x) * lanes + m
     with nx the item's conv columns */
  size_t buf_row_ld, buf_cols;
  /* items */
  int64_t row_groups, col_blocks, co_groups, co_blocks_per_group, items;
  /* batch images per item (1: one); with more, an item is every pooled row
     and column of `images` consecutive images (the last item of the batch
     may have fewer), whose conv outputs lie side by side in the tile
     buffer, image j's from column j * buf_image_cols (the algorithm's
     images_per_item hook chooses it) */
  int64_t images;
  size_t buf_image_cols;
  int threads;
  /* the algorithm's phase before the items (0: none): prepare_items work
     items that prepare, into the run's shared workspace, what several items
     read (e.g. an image region's transformed input for every channel group) */
  int64_t prepare_items;
  size_t shared_bytes;
  /* with a phase: the regions it prepares at a time (each a share of
     prepare_items), the workspace holding that many; the driver runs the
     phase and the items of one round of regions, then the next */
  int64_t round_regions;
  /* bytes */
  size_t panel_bytes, buf_bytes, row_bytes, scratch_bytes; /* per thread */
  size_t panel_budget, buf_budget;
  size_t l1_bytes; /* the L1 data cache of a core (blocked GEMM sweeps size their blocks by it) */
  size_t l2_bytes; /* the L2 cache of a core */
  /* the algorithm's own, filled by its geometry for the item size above */
  cp_algo_state state;
} cp_plan;

/* Items along the batch: groups of pl->images images. */
static inline int64_t cp_batch_groups(const cp_plan *pl) {
  return (pl->batch + pl->images - 1) / pl->images;
}

/* The region of one work item. */
typedef struct cp_item {
  int64_t b, nb;    /* batch images [b, b + nb) (nb > 1 only with pl->images > 1) */
  int64_t q0, nq;   /* pooled rows [q0, q0 + nq) */
  int64_t c0, nc;   /* pooled columns [c0, c0 + nc) */
  int64_t y0, ny;   /* conv rows [y0, y0 + ny) its windows cover */
  int64_t x0, nx;   /* conv columns [x0, x0 + nx) its windows cover */
  int64_t cb0, cb1; /* channel blocks [cb0, cb1) */
  unsigned flags;   /* the algorithm's own, set by its pack_item */
  const void *aux;  /* the algorithm's own, set by its pack_item */
} cp_item;

/* Pooled outputs along a side of `conv` conv outputs (0 if the window does
   not fit the padded side). */
int64_t cp_pooled_size(int64_t conv, int64_t pool, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                       int ceil_mode);

/* The cost per pooled output of the image's rows in items of pl->group rows,
   for an algorithm whose cost model (item_cost) prices one item of the
   plan's size: where the rows do not divide, the last, shorter item is priced
   at its own geometry and weighed in by its rows. */
double cp_rows_cost(const cp_plan *pl, double (*item_cost)(const cp_plan *pl));

/* The conv outputs [*lo, *lo + *count) that pooled outputs [q, q + n) cover
   along a side of `conv` conv outputs (windows clipped to the conv output). */
void cp_conv_span(int64_t q, int64_t n, int64_t pool, int64_t stride, int64_t pad, int64_t conv,
                  int64_t *lo, int64_t *count);

/* The greatest common divisor of a and b (b >= 0). */
static inline int64_t cp_gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The item with index `item` of the plan. */
cp_item cp_item_of(const cp_plan *pl, int64_t item);

/*
 * Shared regions: a phase before the items that prepares one panel of
 * pl->panel_bytes per image region (batch image x row group x column block),
 * which the items of the region's channel groups all read. The run's shared
 * workspace holds round_regions panels, each to a cache line: the driver
 * runs the phase and the items in rounds of that many regions, as many as
 * fit the shared budget (L3 / shared_l3_div), at least one.
 * cp_plan_share_regions chooses it where channel groups split the regions,
 * with one work item per region (an algorithm may split a region into
 * several after it); otherwise no phase (each item packs its own). Returns
 * 0 on overflow.
 */
int cp_plan_share_regions(cp_plan *pl);
int64_t cp_item_region(const cp_plan *pl, const cp_item *it); /* the item's region */
size_t cp_region_offset(const cp_plan *pl, int64_t region);   /* bytes to its panel */

/* The block group of channel block cb (its conv group, unless the setup's
   blocks span them). */
static inline int64_t cp_block_group(const cp_plan *pl, int64_t cb) {
  return cb / pl->group_co_blocks;
}

/* The output channels [*co0, *co0 + *count) of channel block cb. */
static inline void cp_block_channels(const cp_plan *pl, int64_t cb, size_t *co0, size_t *count) {
  const size_t mr = (size_t)pl->co_block, per_group = (size_t)(pl->c_out / pl->block_groups);
  const size_t first = (size_t)(cb % pl->group_co_blocks) * mr;
  *co0 = (size_t)cp_block_group(pl, cb) * per_group + first;
  *count = per_group - first < mr ? per_group - first : mr;
}

/* The shapes of a run of `layer` on [batch, c_in, height, width] and their
   byte counts: the fields of pl up to residual_bytes (the rest zero).
   Refuses, naming the value, a size below 1, a dilated filter larger than
   the padded input, a pool larger than the conv output and byte counts that
   overflow. */
convpool_status cp_plan_shape(const cp_layer *layer, int64_t batch, int64_t height, int64_t width,
                              cp_plan *pl);

/*
 * The plan of a run of `layer` with `algo` (set up as `setup`) on
 * [batch, c_in, height, width]. `rows_per_item` forces the pooled rows of an
 * item (0: the plan decides); `threads` is the thread pool's size.
 */
convpool_status cp_plan_make(const cp_layer *layer, const struct cp_algorithm *algo,
                             const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                             int64_t batch, int64_t height, int64_t width, cp_plan *pl);

/* The same, for an algorithm auto chose: the run may be handed over (the
   algorithm's hands_over rule; to one of the CP_MAX_HANDOVERS handover[]
   algorithms with its setup, those past the last one NULL, or to one that
   reads `setup`); pl->handed_over then says so. */
convpool_status cp_plan_make_auto(const cp_layer *layer, const struct cp_algorithm *algo,
                                  const cp_algo_setup *setup, const cp_handover *handover,
                                  int threads, int64_t rows_per_item, int64_t batch, int64_t height,
                                  int64_t width, cp_plan *pl);

/* The plan as text (convpool_op_describe): `choice` is how auto chose the
   algorithm ("" when it was named), `epilogue` the epilogue row's name. */
void cp_plan_describe(const cp_plan *pl, convpool_dtype dtype, const char *choice,
                      const char *epilogue, char *text, size_t capacity);

#endif
