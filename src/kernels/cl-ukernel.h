/*
 * Channels-in-lanes microkernels (the direct algorithm, src/algo/direct.c):
 * output channels across the vector lanes, each conv position's input
 * broadcast to every lane. One fixed signature for every ISA.
 *
 * A call computes one register tile of MR output channels x NP conv
 * positions p, whose input of channel c, tap t is x[c*cs + off[t] + p*xs]
 * (xs: the conv stride in panel columns; off[t]: the tap's offset in a
 * channel's plane, dilation included):
 *
 *   out[m*out_ld + p] = sum_{c < c_in, t < taps} w[(c*taps + t)*MR + m]
 *                                                * x[c*cs + off[t] + p*xs]
 *
 * for m < MR and p < n (1 <= n <= NP), with the sum taken in exactly that
 * (c, t) order from zero, in fp32 (one FMA per term where the ISA has one;
 * the portable kernel multiplies, then adds): for a filter read row by row,
 * the order of the shift-reduce kernels. It writes those MR x n values and
 * nothing else, and reads x for every p < NP whatever n: the caller makes
 * sure all of it lies inside the panel.
 */
#ifndef CONVPOOL_CL_UKERNEL_H
#define CONVPOOL_CL_UKERNEL_H

#include <stddef.h>

#include "../internal.h"

typedef void (*cp_cl_ukernel_fn)(const float *x, size_t cs, size_t xs, const ptrdiff_t *off,
                                 size_t taps, size_t c_in, const float *w, float *out,
                                 size_t out_ld, size_t n);

typedef struct cp_cl_ukernel {
  const char *name;
  cp_isa isa;
  int mr; /* output channels per tile (whole vectors) */
  int np; /* conv positions per tile */
  cp_cl_ukernel_fn fn;
} cp_cl_ukernel;

/* Declarations of every kernel in cl-ukernels.inc. */
#define CP_CL_UKERNEL(mr, np, isa, ISA)                                                         \
  void cp_f32_cl_ukernel_##mr##x##np##__##isa(const float *, size_t, size_t, const ptrdiff_t *, \
                                              size_t, size_t, const float *, float *, size_t,   \
                                              size_t);
#include "cl-ukernels.inc"
#undef CP_CL_UKERNEL

/* Every listed kernel, in the order of cl-ukernels.inc (for tests). */
const cp_cl_ukernel *cp_cl_ukernel_list(size_t *count);

/* The kernel of the best listed ISA not above `isa` (never NULL: the
   portable one is listed). */
const cp_cl_ukernel *cp_cl_ukernel_select(cp_isa isa);

#endif
