/*
 * Channels-in-lanes microkernels (the direct algorithm, src/algo/direct.c):
 * output channels across the vector lanes, each conv position's input
 * broadcast to every lane. One fixed signature for every ISA.
 *
 * A call computes one register tile of MR output channels x NP conv
 * positions p, whose input of channel c, tap t is x[c*cs + off[t] + pos[p]]
 * (pos[p]: the position's first input in a channel's panel plane, so the
 * conv stride and any order of positions are the caller's; off[t]: the
 * tap's offset, dilation included). Over channels c < c_in:
 *
 *   acc[p][m] += sum_{c < c_in, t < taps} w[(c*taps + t)*MR + m]
 *                                         * x[c*cs + off[t] + pos[p]]
 *
 * in exactly that (c, t) order, in fp32 (one FMA per term where the ISA has
 * one; the portable kernel multiplies, then adds), acc starting from zero
 * when `start`, else from partial[p*MR + m] (the sums a call over the
 * channels before stored there: a contraction split into passes gives the
 * same bits as one call). With out NULL the sums go back to partial;
 * otherwise out[m*out_ld + p] = acc[p][m] for m < MR and p < n (1 <= n <=
 * NP) and nothing else is written. x is read for every p < NP whatever n:
 * the caller makes sure every pos[p] is a valid position.
 *
 * Pair kernels (cpack 2, bf16 storage, vdpbf16ps) read x and w as 32-bit
 * elements that each hold two bf16 input channels (2c in the low half, 2c+1
 * in the high half, as pack.h's panels and blocked weights), c_in counts
 * those pairs, and each (c, t) step adds both products of the pair to the
 * fp32 sum as the instruction does: subnormal bf16 inputs read as zero and
 * subnormal results flushed to zero, the two products rounded at most twice
 * in an order the instruction defines (the same for every lane and every
 * call, so the results above still do not depend on the lane, the tile or
 * the passes).
 */
#ifndef CONVPOOL_CL_UKERNEL_H
#define CONVPOOL_CL_UKERNEL_H

#include <stddef.h>

#include "../internal.h"

typedef void (*cp_cl_ukernel_fn)(const float *x, size_t cs, const ptrdiff_t *pos,
                                 const ptrdiff_t *off, size_t taps, size_t c_in, const float *w,
                                 float *partial, int start, float *out, size_t out_ld, size_t n);

typedef struct cp_cl_ukernel {
  const char *name;
  cp_isa isa;
  int cpack; /* input channels per 32-bit element of x and w: 1 (fp32), 2 (bf16 pairs) */
  int mr;    /* output channels per tile (whole vectors) */
  int np;    /* conv positions per tile */
  cp_cl_ukernel_fn fn;
} cp_cl_ukernel;

/* The most positions of any kernel's tile (buffers sized at compile time). */
#define CP_CL_MAX_NP 16

/* Declarations of every kernel in cl-ukernels.inc. */
#define CP_CL_UKERNEL(dt, cpack, mr, np, isa, ISA)                                                 \
  void cp_##dt##_cl_ukernel_##mr##x##np##__##isa(const float *, size_t, const ptrdiff_t *,         \
                                                 const ptrdiff_t *, size_t, size_t, const float *, \
                                                 float *, int, float *, size_t, size_t);
#include "cl-ukernels.inc"
#undef CP_CL_UKERNEL

/* Every listed kernel, in the order of cl-ukernels.inc (for tests). */
const cp_cl_ukernel *cp_cl_ukernel_list(size_t *count);

/* The kernel of `cpack` (1: fp32, 2: bf16 pairs) of the best listed ISA
   not above `isa`: the first listed of that ISA; NULL where none is (never
   for cpack 1: the portable one is listed). */
const cp_cl_ukernel *cp_cl_ukernel_select(cp_isa isa, int cpack);

/* The first listed kernel of uk's ISA and cpack whose tiles hold `mr`
   output channels; uk where none does. */
const cp_cl_ukernel *cp_cl_ukernel_with_mr(const cp_cl_ukernel *uk, int mr);

/* Of uk and the listed kernels of its ISA, cpack and MR (the same weight layout,
   the same sums: each output's terms in the same order whatever NP), the one
   whose tiles cover `positions` at the least cost, counted as each tile's
   positions (used or not) plus one for the tile's own work (its weight
   loads, its store); uk on a tie. */
const cp_cl_ukernel *cp_cl_ukernel_for_positions(const cp_cl_ukernel *uk, size_t positions);

#endif
