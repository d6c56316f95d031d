/*
 * Depthwise microkernels: one input channel's plane, one output channel,
 * conv positions in the vector lanes. One fixed signature for every ISA.
 *
 * A call computes the flat positions [0, round_up(len, LANES)) of one
 * output channel:
 *
 *   out[p] = sum_{t < taps} w[t] * x[off[t] + p]
 *
 * with the sum taken in exactly that t order from zero, in fp32 (one FMA per
 * term where the ISA has one; the portable kernel multiplies, then adds). x
 * is a staging area of one input channel (src/algo/depthwise.c lays it out
 * so that tap t of every position is the shifted load at off[t]); the
 * caller makes sure every x[off[t] + p] read lies inside it, and discards
 * the positions it does not need.
 */
#ifndef CONVPOOL_DW_UKERNEL_H
#define CONVPOOL_DW_UKERNEL_H

#include <stddef.h>

#include "../internal.h"

typedef void (*cp_dw_ukernel_fn)(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                                 size_t len, float *out);

typedef struct cp_dw_ukernel {
  const char *name;
  cp_isa isa;
  int lanes; /* positions per vector: out is written in whole vectors */
  int nr;    /* positions of the main register tile */
  cp_dw_ukernel_fn fn;
} cp_dw_ukernel;

/* The widest vector of any kernel: buffers rounded to it suit every kernel. */
#define CP_DW_MAX_LANES 16

/* Declarations of every kernel in dw-ukernels.inc. */
#define CP_DW_UKERNEL(nr, lanes, isa, ISA)                                               \
  void cp_f32_dw_ukernel_##nr##__##isa(const float *, const ptrdiff_t *, size_t, const float *, \
                                       size_t, float *);
#include "dw-ukernels.inc"
#undef CP_DW_UKERNEL

/* Every listed kernel, in the order of dw-ukernels.inc (for the tests). */
const cp_dw_ukernel *cp_dw_ukernel_list(size_t *count);

/* The kernel of the best listed ISA not above `isa` (never NULL: the
   portable kernel is listed). */
const cp_dw_ukernel *cp_dw_ukernel_select(cp_isa isa);

#endif
