/*
 * What the algorithms built on the shift-reduce kernels share (shift-reduce,
 * im2col and Winograd's direct tiles and products): the kernels' setup, its
 * weights and the input panel of an item. Included by those algorithms'
 * files only; the plan and the boundary see algo.h alone.
 */
#ifndef CONVPOOL_ALGO_SR_KERNELS_H
#define CONVPOOL_ALGO_SR_KERNELS_H

#include "../driver.h"
#include "../kernels/ukernel.h"
#include "../pack.h"
#include "algo.h"

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
  /* shift-reduce chosen by auto: the algorithms it hands runs to
     (cp_sr_hands_over), whose weights lie hand_offset[i] floats into the
     packed ones; NULL past the last */
  const struct cp_algorithm *hand_to[CP_MAX_HANDOVERS];
  size_t hand_offset[CP_MAX_HANDOVERS];
} cp_sr_setup;

/* Whether the CPU has shift-reduce's bfloat16 pair kernels (vdpbf16ps), which
   auto's rules for bfloat16 layers weigh. */
int cp_sr_has_bf16_pairs(const cp_cpu *cpu);

/* bfloat16 3x3 layers with the pair kernels: the conv outputs shift-reduce
   hands to Winograd, CP_SR_WINO_MIN_SIDE or more on each side
   (cp_sr_hands_over). */
#define CP_SR_WINO_MIN_SIDE 14

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

#endif
