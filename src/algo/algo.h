/*
 * The algorithm interface. Each algorithm is one file in this directory that
 * defines one cp_algorithm; algorithms.inc lists them in the order `auto`
 * tries them. Adding an algorithm is: its file, one line in algorithms.inc,
 * its tests (the test lists read algorithms.inc too).
 *
 * The driver (driver.c) owns the work items, the threads and the epilogue;
 * the plan (plan.c) owns the item search. An algorithm says whether it
 * computes a layer, chooses its kernels and packs the weights once (its
 * setup), describes the per-item buffers and the cost of an item size to the
 * item search, packs an item's input and computes the conv output of one
 * channel block of an item into the tile buffer. What it decides once — its
 * kernels at create, its geometry for the chosen item size — it keeps in its
 * own struct inside the setup and the plan (cp_algo_state), read back with
 * CP_ALGO_STATE.
 */
#ifndef CONVPOOL_ALGO_H
#define CONVPOOL_ALGO_H

#include "../driver.h"
#include "../kernels/ukernel.h"
#include "../pack.h"
#include "../plan.h"

/* The algorithm's own struct `type` inside a cp_algo_state (of a setup or a
   plan); the file that defines `type` asserts that it fits. */
#define CP_ALGO_STATE(type, state) ((type *)(void *)(state).bytes)
#define CP_ALGO_STATE_FITS(type) \
  _Static_assert(sizeof(type) <= CP_ALGO_STATE_BYTES, #type " does not fit CP_ALGO_STATE_BYTES")

typedef struct cp_algorithm {
  const char *name; /* "shift-reduce", as printed (its short name is its line in algorithms.inc) */
  convpool_algo id; /* its value in the public enum */

  /* NULL if it computes `layer` on `cpu`; otherwise why not, one sentence
     (written into why[capacity] when it needs formatting). */
  const char *(*declines)(const cp_layer *layer, const cp_cpu *cpu, char *why, size_t capacity);

  /* Choose the kernels for the layer on the CPU and size the packed weights:
     the public fields of `setup` and its own state. Fails only with
     CONVPOOL_UNSUPPORTED or on size overflow. */
  convpool_status (*setup)(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *setup);

  /* Pack [c_out, c_in, k, k] weights of the layer's dtype into `packed`
     (setup->packed_weight_bytes). */
  void (*pack_weights)(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                       float *packed);

  /* ---- the item search (plan.c) ---- */

  /* Items start on multiples of *rows conv rows and *cols conv columns (the
     plan turns them into pooled rows and columns). */
  void (*item_units)(const cp_plan *pl, int64_t *rows, int64_t *cols);

  /* The geometry of an item of pl->group x pl->col_block pooled outputs,
     whose largest conv region is pl->conv_rows x pl->conv_cols: panel_bytes,
     buf_bytes, buf_row_ld, buf_cols and the algorithm's plan state. Returns 0
     on overflow. The plan calls it last for the item size it keeps. */
  int (*geometry)(cp_plan *pl);

  /* Whether the geometry fits the per-thread budgets; NULL: the panel and the
     tile buffer within pl->panel_budget and pl->buf_budget. */
  int (*fits)(const cp_plan *pl);

  /* Modelled cost of the geometry per pooled output (lower is better). */
  double (*cost)(const cp_plan *pl);

  /* Optional: whether items of the geometry's size are still worth making
     (the search makes items smaller for the threads while they are); NULL:
     always. */
  int (*worth_splitting_to)(const cp_plan *pl);

  /* ---- the run (driver.c) ---- */

  /* Pack the input of item `it` into panel (panel_bytes). */
  void (*pack_item)(const cp_run *r, cp_item *it, float *panel);

  /* The conv output of channel block cb over the item's conv region into
     the tile buffer buf (plan.h: buf_cols, buf_row_ld; no bias, no
     activation). The driver calls it for cb = cb0, cb0 + 1, ..., cb1 - 1 in
     this order, on the thread that packed the item, with buf (buf_bytes) kept
     between the calls. */
  void (*compute_block)(const cp_run *r, const cp_item *it, const float *panel, int64_t cb,
                        float *buf);

  /* The lines of the plan's description that are the algorithm's: how an
     item is swept, its kernels and its buffers. */
  void (*describe)(const cp_plan *pl, char *text, size_t capacity);

  /* Optional, when auto chose this algorithm: hands_over says (with a
     measured rule) that a run of `layer` on `batch` images of oh x ow conv
     outputs is faster with hand_over_to, which then computes the run from
     this algorithm's setup and packed weights (their state and layout must
     begin with hand_over_to's). NULL: every run is this algorithm's. */
  int (*hands_over)(const cp_layer *layer, const cp_blocking *cfg, int64_t batch, int64_t oh,
                    int64_t ow);
  const struct cp_algorithm *hand_over_to;
} cp_algorithm;

/* Every algorithm, by name (algorithms.inc lists them). */
#define CP_ALGORITHM(name) extern const cp_algorithm cp_algorithm_##name;
#include "algorithms.inc"
#undef CP_ALGORITHM

/*
 * The shift-reduce kernels' setup (shift-reduce.c), which im2col and
 * Winograd build on: the main kernel, the kernel of each conv group's last
 * channel block, and the weights in channel blocks for them (pack.h), with
 * the conv stride split off the filter or not (`split`, pack.h).
 */
typedef struct cp_sr_setup {
  const cp_sr_ukernel *uk;      /* main microkernel */
  const cp_sr_ukernel *uk_tail; /* kernel of a group's last channel block (may be uk) */
  int64_t c_steps;              /* contraction steps over the channels of one conv group:
                                   c_in / groups (x phases^2) / uk->cpack */
  int64_t k;                    /* the filter the kernels see: k, or cp_split_k */
  int64_t split, phases;        /* the conv stride split off the filter (1: none) */
  int64_t layer_k;              /* the layer's filter */
  int zero_taps;                /* the split filter has taps past layer_k (k % split != 0) */
  size_t weight_block_bytes;    /* bytes of one channel block of the blocked weights */
} cp_sr_setup;

/* Choose the shift-reduce kernels of `dtype` (falling back to float32) for
   the layer and size their blocked weights; split > 1 splits the conv
   stride off the filter (pack.h; only the layer's conv stride or 1). */
convpool_status cp_sr_setup_kernels(const cp_layer *layer, const cp_cpu *cpu, convpool_dtype dtype,
                                    int64_t split, cp_algo_setup *setup);

static inline const cp_sr_setup *cp_sr_setup_of(const cp_algo_setup *setup) {
  return CP_ALGO_STATE(const cp_sr_setup, setup->state);
}

/* The blocked weights of the setup (pack.h) into packed. */
void cp_sr_pack_weights(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                        float *packed);

/* Items advance by whole register tiles along the row (item_units). */
void cp_sr_item_units(const cp_plan *pl, int64_t *rows, int64_t *cols);

/* Modelled cost per pooled output of an item of `tiles` register tiles per
   channel block over a panel of `floats` elements: kernel lanes plus copying. */
double cp_sr_cost(const cp_plan *pl, size_t tiles, size_t floats);

/* The plan's lines on the register tile and the panel (of `input_rows`
   input rows), `sweep` saying how the panel is swept. */
void cp_sr_describe_tile(const cp_plan *pl, int64_t input_rows, const char *sweep, char *text,
                         size_t capacity);

/* The kernel of channel block cb (the tail kernel for a conv group's last
   block) and its weights. */
static inline cp_sr_ukernel_fn cp_sr_block_kernel(const cp_plan *pl, int64_t cb) {
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  return (cb + 1) % pl->group_co_blocks == 0 ? s->uk_tail->fn : s->uk->fn;
}
static inline const float *cp_sr_block_weights(const cp_run *r, int64_t cb) {
  return r->packed +
         (size_t)cb * (cp_sr_setup_of(r->pl->setup)->weight_block_bytes / sizeof(float));
}

/* The source of an item's panel (pack.h): image b of the run's src. */
static inline cp_panel_src cp_panel_src_of(const cp_run *r, int64_t b) {
  const cp_plan *pl = r->pl;
  const cp_sr_setup *sr = cp_sr_setup_of(pl->setup);
  cp_panel_src s;
  s.image = r->src +
            (size_t)b * (size_t)pl->c_in * (size_t)pl->height * (size_t)pl->width * pl->elem_size;
  s.elem_size = pl->elem_size;
  s.c_in = pl->c_in, s.height = pl->height, s.width = pl->width;
  s.groups = pl->groups, s.split = sr->split, s.phases = sr->phases;
  s.group_steps = (size_t)sr->c_steps;
  s.cpack = (size_t)sr->uk->cpack;
  s.widen = r->widen;
  s.ahead_rows = (size_t)pl->cfg->pack_ahead_rows;
  return s;
}

/* The algorithms in the order auto tries them (list.c). */
const cp_algorithm *const *cp_algorithm_list(size_t *count);

/* The short name of a listed algorithm ("sr": its line in algorithms.inc). */
const char *cp_algorithm_short_name(const cp_algorithm *algo);

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
