/*
 * Depthwise microkernels: one input channel's plane, one output channel,
 * conv positions in the vector lanes. One fixed signature for every ISA.
 *
 * A call computes `rows` rows of n positions of one output channel:
 *
 *   out[y * out_ld + c] = sum_{t < taps} w[t] * x[off[t] + y * x_ld + c]
 *
 * for y < rows, c < n, with the sum taken in exactly that t order from
 * zero, in fp32 (one FMA per term where the ISA has one; the portable
 * kernel multiplies, then adds), and writes nothing else. x is a staging
 * area of one input channel (src/algo/depthwise.c lays it out so that tap t
 * of every position is the shifted load at off[t]); a row's last vector
 * reads whole vectors, so the caller makes sure that x[off[t] + y * x_ld +
 * c] lies inside the staging for every c < n rounded up to 16.
 */
#ifndef CONVPOOL_DW_UKERNEL_H
#define CONVPOOL_DW_UKERNEL_H

#include <stddef.h>

#include "../internal.h"

typedef void (*cp_dw_ukernel_fn)(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                                 size_t rows, size_t n, size_t x_ld, float *out, size_t out_ld);

/*
 * The row copy of the same ISA: rows [0, rows) of n floats, from rows
 * from_ld apart to rows to_ld apart, row after row and forward within a row,
 * each element read before any store reaches it when to <= from and
 * to_ld <= from_ld (so it also moves rows together in place).
 */
typedef void (*cp_dw_rows_fn)(const float *from, size_t from_ld, float *to, size_t to_ld,
                              size_t rows, size_t n);

/* The same for every other element: to[x] = from[2 * x] in each row (the
   two column phases of a stride-2 window); never in place. */
typedef cp_dw_rows_fn cp_dw_rows2_fn;

/*
 * The flat sweep into compact rows, for narrow rows: the positions p < len
 * of one output channel, p = y * ld + c, each computed as above (x_ld = 0)
 * and stored to out[y * nx + c] when c < nx (the positions between rows are
 * computed and dropped, nothing else is written): a vector spans rows, and
 * its lanes of each row are packed together on the store.
 */
typedef void (*cp_dw_compact_fn)(const float *x, const ptrdiff_t *off, size_t taps, const float *w,
                                 size_t len, size_t ld, size_t nx, float *out);

/* Both column phases of stride-2 rows in one pass: even[x] = from[2 * x]
   for x < n_even and odd[x] = from[2 * x + 1] for x < n_odd, in each row
   (n_odd <= n_even <= n_odd + 1: from[0 .. n_even + n_odd) is read). */
typedef void (*cp_dw_split2_fn)(const float *from, size_t from_ld, float *even, float *odd,
                                size_t to_ld, size_t rows, size_t n_even, size_t n_odd);

/*
 * Channels in lanes (src/algo/depthwise.c's lanes layout: position after
 * position, CP_DW_LANES channels each): one register tile of n <=
 * CP_DW_LANES_NP positions of CP_DW_LANES output channels,
 *
 *   out[p * L + l] = sum_{t < taps} w[t * L + l] * x[pos[p] + off[t] + l]
 *
 * (L = CP_DW_LANES; pos and off in floats, multiples of L) for p < n, l <
 * L, the sum taken in t order from zero with one FMA per term: the same
 * bits, lane for lane, as the ISA's position kernel (fn) on each channel.
 * pos[n .. CP_DW_LANES_NP) are read and must be valid positions (the caller
 * repeats the last); only out[0 .. n * L) is written.
 */
#define CP_DW_LANES 8
#define CP_DW_LANES_NP 8
typedef void (*cp_dw_lanes_fn)(const float *x, const ptrdiff_t *pos, const ptrdiff_t *off,
                               size_t taps, const float *w, float *out, size_t n);

/* The lanes layout's staging: CP_DW_LANES runs of n floats (run l from
   src[l]) transposed into n vectors, element e of each run to the vector
   at to + ((e / row) * to_ld + e % row) * CP_DW_LANES (rows of `row`
   elements, to_ld positions apart: a run may span several image rows);
   reads src[l][0 .. n) only. */
typedef void (*cp_dw_transpose_fn)(const float *const *src, size_t n, size_t row, size_t to_ld,
                                   float *to);

typedef struct cp_dw_ukernel {
  const char *name;
  cp_isa isa;
  int lanes; /* positions per vector: out is written in whole vectors */
  int nr;    /* positions of the main register tile */
  cp_dw_ukernel_fn fn;
  cp_dw_compact_fn compact;
  cp_dw_rows_fn rows;
  cp_dw_rows2_fn rows2;
  cp_dw_split2_fn split2;
  /* channels in lanes, where the ISA has them (else NULL) */
  cp_dw_lanes_fn lanes_fn;
  cp_dw_transpose_fn transpose;
  /* the widest conv output a run computes in lanes rather than in channel
     rows, at conv stride 1 and strided: a measured rule of this line
     (src/algo/depthwise.c, cp_dw_layout) */
  long lanes_max_ow, lanes_max_ow_strided;
} cp_dw_ukernel;

/* The widest vector of any kernel: buffers rounded to it suit every kernel. */
#define CP_DW_MAX_LANES 16

/* Declarations of every kernel in dw-ukernels.inc. */
#define CP_DW_UKERNEL(nr, lanes, isa, ISA)                                                       \
  void cp_f32_dw_ukernel_##nr##__##isa(const float *, const ptrdiff_t *, size_t, const float *,  \
                                       size_t, size_t, size_t, float *, size_t);                 \
  void cp_f32_dw_compact__##isa(const float *, const ptrdiff_t *, size_t, const float *, size_t, \
                                size_t, size_t, float *);                                        \
  void cp_f32_dw_rows__##isa(const float *, size_t, float *, size_t, size_t, size_t);            \
  void cp_f32_dw_rows2__##isa(const float *, size_t, float *, size_t, size_t, size_t);           \
  void cp_f32_dw_split2__##isa(const float *, size_t, float *, float *, size_t, size_t, size_t,  \
                               size_t);
#include "dw-ukernels.inc"
#undef CP_DW_UKERNEL
void cp_f32_dw_lanes__avx2(const float *, const ptrdiff_t *, const ptrdiff_t *, size_t,
                           const float *, float *, size_t);
void cp_f32_dw_transpose__avx2(const float *const *, size_t, size_t, size_t, float *);

/* Every listed kernel, in the order of dw-ukernels.inc (for the tests). */
const cp_dw_ukernel *cp_dw_ukernel_list(size_t *count);

/* The kernel of the best listed ISA not above `isa` (never NULL: the
   portable kernel is listed). */
const cp_dw_ukernel *cp_dw_ukernel_select(cp_isa isa);

#endif
