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

#include "../plan.h"

struct cp_run; /* driver.h: what a run reads */
typedef struct cp_run cp_run;

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

  /* Optional: NULL if auto may take this algorithm for a layer it computes;
     otherwise why a later one in the list is faster (a measured rule), one
     sentence. Auto then goes on down the list, and comes back to this one if
     no later algorithm takes the layer; an algorithm asked for by name
     computes the layer anyway. NULL hook: auto always may. */
  const char *(*auto_skips)(const cp_layer *layer, const cp_cpu *cpu, char *why, size_t capacity);

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

  /* Modelled cost per pooled output of an image covered by items of the
     geometry's size (lower is better); cp_rows_cost prices a cost model of
     one item so, a shorter last item included. */
  double (*cost)(const cp_plan *pl);

  /* Optional: the run's block layout, where the setup offers two (its
     kernels for the shape): pl->co_block, pl->lanes (0, or the setup's
     lanes), pl->block_groups and pl->kernel (the name shown), set before it
     from the setup (co_block, lanes, the conv groups, kernel). Called first,
     with the plan's shapes. */
  void (*layout)(cp_plan *pl);

  /* Optional: batch images per item (pl->images; 1 or NULL: one). Called
     before the item search with the plan's shapes, setup and blocking; with
     more than one, items are whole images side by side (plan.h). */
  int64_t (*images_per_item)(const cp_plan *pl);

  /* Optional: whether items of the geometry's size are still worth making
     (the search makes items smaller for the threads while they are); NULL:
     always. */
  int (*worth_splitting_to)(const cp_plan *pl);

  /* Optional: bytes of an image's input that every channel group of its
     items reads (Winograd's V of the image). With streamed_weight_bytes,
     the plan splits deep layers' items between regions and channel groups
     by the bytes they read (plan.c: cp_regions_wanted). */
  double (*group_input_bytes)(const cp_plan *pl);

  /* Optional: bytes of the packed weights a run's items read, all channel
     blocks together; where given, the plan may give every thread a region of
     its own rather than share one prepared before the items (plan.c:
     cp_wants_local_regions). */
  size_t (*streamed_weight_bytes)(const cp_plan *pl);
  /* With streamed_weight_bytes: a region per thread also where the threads'
     cores share a cache (cp_cpu_cores_share_cache), where reading the other
     thread's region costs little (measured per algorithm, plan.c). */
  int local_regions_sharing_cache;

  /* Optional: the item grid is final; the algorithm may choose a phase
     before the items (pl->prepare_items, pl->shared_bytes). Returns 0 on
     overflow. */
  int (*schedule)(cp_plan *pl);

  /* ---- the run (driver.c) ---- */

  /* Optional: work item `index` of the phase before the items (index <
     pl->prepare_items), on any thread; writes only its own part of
     r->shared. The driver waits for the whole phase before the items. */
  void (*prepare)(const cp_run *r, int64_t index);

  /* The input of item `it`: packed into panel (panel_bytes of per-thread
     scratch), or prepared in r->shared; returns what compute_block reads. */
  const float *(*pack_item)(const cp_run *r, cp_item *it, float *panel);

  /* The conv output of channel block cb over the item's conv region in
     the tile buffer buf (plan.h: buf_cols, buf_row_ld; no bias, no
     activation): returns where in buf its rows start (buf itself, or the
     block's place among several blocks computed together), or NULL where
     its kernels finished the block's outputs in dst themselves (only where
     r->epilogue->in_kernel allows it; the driver then skips the epilogue
     of the block). The driver calls
     it for cb = cb0, cb0 + 1, ..., cb1 - 1 in this order, on the thread that
     packed the item, with buf (buf_bytes) kept between the calls. */
  const float *(*compute_block)(const cp_run *r, const cp_item *it, const float *panel, int64_t cb,
                                float *buf);

  /* The lines of the plan's description that are the algorithm's: how an
     item is swept, its kernels and its buffers. */
  void (*describe)(const cp_plan *pl, char *text, size_t capacity);

  /* Optional, when auto chose this algorithm: hands_over returns the
     algorithm that computes a run of `layer` on `batch` images of oh x ow
     conv outputs faster (a measured rule), or NULL to keep it. That one then
     computes the run from this algorithm's setup and packed weights, which
     hold what it reads (its setup state and weight layout begin as this
     one's; the setup packs for the hand-over where setup->auto_choice), or
     `packed_for` when not NULL: the algorithm whose own weights the packed
     weights hold too (packs_for), which computes with a setup of its own.
     NULL hook: every run is this algorithm's. */
  const struct cp_algorithm *(*hands_over)(const cp_layer *layer, const cp_blocking *cfg,
                                           const struct cp_algorithm *packed_for, int64_t batch,
                                           int64_t oh, int64_t ow);

  /* Optional, with hands_over: the index-th algorithm (index <
     CP_MAX_HANDOVERS) whose own weights (as its pack_weights lays them out,
     from its own setup) a setup that auto chose leaves room for at *offset
     floats into the packed weights, or NULL past the last; *co_block: the
     output channels per block those weights must be laid out in where this
     algorithm reads them too, else 0. The operator sets each up
     (cp_algo_setup.co_block_wanted) and packs its weights there. */
  const struct cp_algorithm *(*packs_for)(const cp_algo_setup *setup, int index, size_t *offset,
                                          int *co_block);
} cp_algorithm;

/* Every algorithm, by name (algorithms.inc lists them). */
#define CP_ALGORITHM(name) extern const cp_algorithm cp_algorithm_##name;
#include "algorithms.inc"
#undef CP_ALGORITHM

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
