/*
 * The algorithm interface. Each algorithm is one file in this directory that
 * defines one cp_algorithm; list.c holds them in the order `auto` tries them.
 * Adding an algorithm is: its file, one line in list.c, its tests.
 *
 * The driver (driver.c) owns the work items, the threads and the epilogue;
 * an algorithm says whether it computes a layer, packs the weights once,
 * sizes the per-item buffers, packs an item's input and computes the conv
 * output of one channel block of an item into the tile buffer.
 */
#ifndef CONVPOOL_ALGO_H
#define CONVPOOL_ALGO_H

#include "../driver.h"
#include "../plan.h"

typedef struct cp_algorithm {
  const char *name; /* "shift-reduce", as printed */
  convpool_algo id; /* its value in the public enum */
  const char *cli;  /* its short name on the command line ("sr") */

  /* NULL if it computes `layer` on `cpu`; otherwise why not, one sentence
     (written into why[capacity] when it needs formatting). */
  const char *(*declines)(const cp_layer *layer, const cp_cpu *cpu, char *why, size_t capacity);

  /* Choose the microkernels for the layer on the CPU and size the packed
     weights; fails only with CONVPOOL_UNSUPPORTED or on size overflow. */
  convpool_status (*setup)(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *setup);

  /* Pack [c_out, c_in, k, k] weights of the layer's dtype into `packed`
     (setup->packed_weight_bytes), channel block after channel block. */
  void (*pack_weights)(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                       float *packed);

  /* Item geometry for a conv region of at most conv_rows x conv_cols: the
     panel_* fields, flat, tiles, buf_row_ld, buf_cols, panel_bytes and
     buf_bytes of pl (shapes and kernels are set). Returns 0 on overflow. */
  int (*geometry)(cp_plan *pl, int64_t conv_rows, int64_t conv_cols);

  /* Optional: choose the item size itself for `forced` pooled rows per item
     (0: free): set group, col_block and the geometry (through geometry()),
     row_groups and col_blocks of pl; the plan then makes channel groups.
     NULL: the plan's search over geometry() within the per-ISA budgets. */
  convpool_status (*choose_items)(cp_plan *pl, int64_t forced);

  /* Pack the input of item `it` into panel (panel_bytes). */
  void (*pack_item)(const cp_run *r, cp_item *it, float *panel);

  /* The conv output of channel block cb over the item's conv region into
     buf: conv row it->y0 + y, column it->x0 + x of channel m at
     buf[m * buf_cols + y * buf_row_ld + x] (no bias, no activation). The
     driver calls it for cb = cb0, cb0 + 1, ..., cb1 - 1 in this order, on the
     thread that packed the item, with buf (buf_bytes) kept between the calls. */
  void (*compute_block)(const cp_run *r, const cp_item *it, const float *panel, int64_t cb,
                        float *buf);

  /* One line on how an item is swept, for the plan's description. */
  void (*describe)(const cp_plan *pl, char *text, size_t capacity);

  /* Optional, when auto chose this algorithm: hands_over says (with a
     measured rule) that a run of `layer` on `batch` images of oh x ow conv
     outputs is faster with hand_over_to, which then computes the run from
     this algorithm's setup and packed weights (they must begin with its
     layout). NULL: every run is this algorithm's. */
  int (*hands_over)(const cp_layer *layer, int64_t batch, int64_t oh, int64_t ow);
  const struct cp_algorithm *hand_over_to;
} cp_algorithm;

/* Every algorithm, by name (algorithms.inc lists them). */
#define CP_ALGORITHM(name) extern const cp_algorithm cp_algorithm_##name;
#include "algorithms.inc"
#undef CP_ALGORITHM

/* The shift-reduce kernels and blocked weights for a layer (shift-reduce.c;
   im2col shares them). */
convpool_status cp_setup_sr_kernels(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *setup);

/* The algorithms in the order auto tries them (list.c). */
const cp_algorithm *const *cp_algorithm_list(size_t *count);

/* The algorithm with public id `id`, or NULL. */
const cp_algorithm *cp_algorithm_find(convpool_algo id);

/*
 * The algorithm for `requested` on `layer`: the named one, or for
 * CONVPOOL_ALGO_AUTO the first in the list that does not decline. When
 * `declined` is not NULL it receives, for auto, one line per listed
 * algorithm: chosen, declined and why, or not tried. Fails (UNSUPPORTED) when the named algorithm
 * declines, naming its reason, or when none accepts.
 */
convpool_status cp_algorithm_choose(convpool_algo requested, const cp_layer *layer,
                                    const cp_cpu *cpu, const cp_algorithm **out, char *declined,
                                    size_t capacity);

#endif
