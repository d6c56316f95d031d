/*
 * Shift-reduce microkernels: one fixed signature for every dtype and ISA.
 *
 * A call computes one register tile of MR output channels x NR consecutive
 * conv positions p0 .. p0+NR-1 of a plane whose rows are `rs` elements apart:
 *
 *   tile[m*ld + n] = sum_{c < c_in, i < k, j < k} w[((c*k + i)*k + j)*MR + m]
 *                                                  * x[c*cs + i*rs + j + n]
 *
 * with the sum taken in exactly that (c, i, j) order, in fp32 (one FMA per
 * term where the ISA has one). x points at position p0 of channel 0 of an
 * input panel (32-bit elements: fp32, or a bf16 channel pair for the pair
 * kernels, whose c then counts pairs); w is packed the same way. The kernel reads
 * x[c*cs + i*rs + j + n] for every n < NR: the caller makes sure all of it
 * lies inside the panel. Columns of the tile that fall past the end of a conv
 * row hold values the caller discards.
 *
 * With `accumulate` the sum starts from the tile's values instead of zero:
 * a contraction split into consecutive ranges of c (a blocked GEMM), each
 * call continuing where the last one stored, gives the same bits as one
 * call over all of them (the same terms added in the same order to the same
 * running value).
 *
 * With `finish` (not NULL) the tile's outputs are final where the kernel
 * stores them (a layer whose pooling window is one output: tile points into
 * dst): row m < finish->rows of the tile becomes
 *
 *   tile[m*ld + n] = clamp((sum + res[m*ld + n]) + bias[m], lo, hi)
 *
 * in the pool-1 epilogue's order and with its clamp (epilogue.h: v < lo
 * gives lo, then v > hi gives hi; NaN stays NaN), the residual and the bias
 * added only where finish has them; rows from finish->rows on are not
 * written. Without it the kernel stores all MR rows of sums.
 */
#ifndef CONVPOOL_UKERNEL_H
#define CONVPOOL_UKERNEL_H

#include <stddef.h>

#include "../internal.h"

/* An upper bound of every kernel's NR (the largest is 32), for buffers sized
   at compile time; the kernel tests check every listed kernel against it. */
#define CP_MAX_NR 64

/* The layer's epilogue done at the store (see above). */
typedef struct cp_sr_finish {
  const float *bias; /* finish->rows values, or NULL for none */
  const float *res;  /* the residual of the tile's first output, rows ld apart; NULL: none */
  float lo, hi;      /* activation clamp; -inf, +inf for none */
  int rows;          /* rows of the tile that are outputs (1..MR) */
} cp_sr_finish;

typedef void (*cp_sr_ukernel_fn)(const void *x, size_t cs, size_t rs, size_t c_in, size_t k,
                                 const float *w, float *tile, size_t ld, int accumulate,
                                 const cp_sr_finish *finish);

typedef struct cp_sr_ukernel {
  const char *name;
  convpool_dtype dtype;
  cp_isa isa;
  int mr;    /* output channels per tile */
  int nr;    /* conv positions per tile */
  int cpack; /* input channels per 32-bit panel element: 1 (fp32) or 2 (bf16 pairs) */
  cp_sr_ukernel_fn fn;
} cp_sr_ukernel;

/* Declarations of every microkernel in sr-ukernels.inc. */
#define CP_SR_UKERNEL(dt, DTYPE, mr, nr, isa, ISA)                                             \
  void cp_##dt##_sr_ukernel_##mr##x##nr##__##isa(const void *, size_t, size_t, size_t, size_t, \
                                                 const float *, float *, size_t, int,          \
                                                 const cp_sr_finish *);
#include "sr-ukernels.inc"
#undef CP_SR_UKERNEL

/* Every listed kernel, in the order of sr-ukernels.inc (for tests and benchmarks). */
const cp_sr_ukernel *cp_sr_ukernel_list(size_t *count);

/* The main kernel for a dtype on the best listed ISA not above `isa` (the
   register tile of config.c), or NULL. */
const cp_sr_ukernel *cp_sr_ukernel_select(convpool_dtype dtype, cp_isa isa);

/* The kernel of k's dtype, ISA and MR with `nr` positions, or NULL. */
const cp_sr_ukernel *cp_sr_ukernel_with_nr(const cp_sr_ukernel *k, int nr);

/* The kernel for a last channel block of `remainder` (< main->mr) channels:
   the narrowest of main's family with MR >= remainder, or main itself. */
const cp_sr_ukernel *cp_sr_ukernel_tail(const cp_sr_ukernel *main, int remainder);

#endif
