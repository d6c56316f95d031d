/*
 * The epilogue: what happens to the conv output of a channel block once it
 * is in the tile buffer. For each output channel and pooled row:
 *
 *   dst[t] = store(clamp(max_{a < P, b < P} (src[a*ld + t*S + b] + res[a*res_ld + t*S + b])
 *                        + bias, min, max))
 *
 * for t < n, with window P, stride S, the layer's residual (or none), the
 * channel's bias (or none), the activation clamp [min, max] (+-inf: none;
 * NaN stays NaN) and the store of the output dtype (fp32, or IEEE half /
 * bfloat16 rounded to nearest even). The max propagates NaN: a NaN anywhere
 * in a window gives NaN. Because the clamp is monotone, clamp(max(v) + b) =
 * max(clamp(v + b)).
 *
 * Adding the bias after the max is exact for a finite bias; for a bias of
 * +-inf or NaN the params ask for bias_first (max((v + b) + r) over the
 * window, as torch computes it), which only the portable row implements.
 *
 * A row function computes one pooled output row; it is chosen once per
 * operator by cp_epilogue_select, like the microkernels: vector versions for
 * the common parameters, the portable one for everything.
 */
#ifndef CONVPOOL_EPILOGUE_H
#define CONVPOOL_EPILOGUE_H

#include <stddef.h>

#include "../convert.h"
#include "../internal.h"

typedef enum cp_store_kind { CP_STORE_F32 = 0, CP_STORE_F16 = 1, CP_STORE_BF16 = 2 } cp_store_kind;

typedef struct cp_epilogue_params {
  size_t pool;           /* window P x P */
  size_t stride;         /* window stride S */
  const float *bias;     /* per output channel, or NULL for none */
  int bias_first;        /* add the bias before the max (a bias is not finite) */
  float min, max;        /* activation clamp; -inf, +inf for none */
  cp_store_kind store;   /* dtype of dst */
  cp_narrow_fn narrow;   /* fp32 -> 16-bit rows for the portable store; NULL for fp32 */
  int residual;          /* the layer adds a residual: rows come with one */
  cp_widen_fn res_widen; /* 16-bit residual -> fp32 rows; NULL for fp32 */
} cp_epilogue_params;

/* One pooled row's windows in the tile buffer: the window rows inside the
   conv output, and the columns of the buffer row. Pooled output t covers
   buffer columns [t*S - off, t*S - off + P) clipped to [0, cols). */
typedef struct cp_pool_row {
  const float *src; /* the first window row (rows ld apart); read only: windows may overlap */
  size_t ld;
  size_t rows;     /* window rows inside the conv output (<= P) */
  size_t cols;     /* conv columns of the buffer row */
  size_t off;      /* padding columns before buffer column 0 in the first window */
  size_t n;        /* pooled outputs */
  float *tmp;      /* scratch of cols + n floats (2 * cols + n with a residual) */
  const void *res; /* the residual at buffer column 0 of the first window row, in the
                      dtype of dst (rows res_ld elements apart); NULL: none */
  size_t res_ld;
} cp_pool_row;

/*
 * The same pooled row for every channel of a block whose conv outputs lie
 * channels in lanes: conv row a of the window, column x of the region,
 * channel m at src[(a * ld + x) * lanes + m] (lanes a multiple of 8, at
 * most CP_LANES_MAX). Channel m < channels goes to dst + m * plane; bias
 * (or NULL) is the block's first channel's. Windows are clipped as in
 * cp_pool_row (off, cols), so one function takes full and clipped rows; the
 * maxima are taken in the portable row's order (rows of a column, then the
 * window's columns), so the bits are the row functions'. A residual only
 * with pool 1 of stride 1 (added to each conv output before the bias, as
 * the rows add it), no bias_first (cp_epilogue.lanes_row is NULL for the
 * others).
 */
#define CP_LANES_MAX 64
typedef struct cp_lanes_row {
  const float *src; /* the first window row's column 0 */
  size_t ld;        /* positions between conv rows */
  size_t lanes, channels;
  size_t rows, cols, off, n; /* as in cp_pool_row */
  const float *bias;
  void *dst;        /* channel 0's first output, in the dtype of dst */
  size_t plane;     /* elements between channels of dst */
  const void *res;  /* channel 0's residual at column 0, in the dtype of dst, or NULL */
  size_t res_plane; /* elements between channels of the residual */
} cp_lanes_row;
typedef void (*cp_epilogue_lanes_fn)(const cp_epilogue_params *p, const cp_lanes_row *row);
void cp_epilogue_lanes_row_avx2(const cp_epilogue_params *p, const cp_lanes_row *row);
void cp_epilogue_lanes_row_avx512f(const cp_epilogue_params *p, const cp_lanes_row *row);

/* One pooled row; bias is the channel's bias or NULL. The pool 1 and pool
   2 rows assume a full row: rows = P, off = 0, n*S + P - S <= cols; the
   portable and the any rows take every row. */
typedef void (*cp_epilogue_row_fn)(const cp_epilogue_params *p, const cp_pool_row *row,
                                   const float *bias, void *dst);

typedef struct cp_epilogue {
  cp_epilogue_params params;
  cp_epilogue_row_fn row;         /* full rows */
  cp_epilogue_row_fn row_clipped; /* any row (pool padding, ceil sizing, the output's edge) */
  const char *name;               /* of the row function, for the plan's description */
  int compact;   /* row takes any run of n values of one channel (pool 1, stride 1, rows
                    ld apart lying end to end), without tmp: a channel's rows in one call */
  int in_kernel; /* a conv output is a pooled output (pool 1 of stride 1), bias after it,
                    fp32 dst: a microkernel may finish its outputs in dst itself, as the
                    pool-1 row does (ukernel.h: cp_sr_finish) */
  cp_epilogue_lanes_fn lanes_row; /* rows of channels in lanes, or NULL (not for the params) */
  const char *lanes_name;
} cp_epilogue;

void cp_epilogue_row_portable(const cp_epilogue_params *p, const cp_pool_row *row,
                              const float *bias, void *dst);
void cp_epilogue_row_pool1_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                   const float *bias, void *dst);
void cp_epilogue_row_pool1_res_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                       const float *bias, void *dst);
void cp_epilogue_row_pool2_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                   const float *bias, void *dst);
void cp_epilogue_row_any_avx512f(const cp_epilogue_params *p, const cp_pool_row *row,
                                 const float *bias, void *dst);
void cp_epilogue_row_pool1_avx2(const cp_epilogue_params *p, const cp_pool_row *row,
                                const float *bias, void *dst);
void cp_epilogue_row_any_avx2(const cp_epilogue_params *p, const cp_pool_row *row,
                              const float *bias, void *dst);

/* Fill e->row, e->row_clipped, e->name, e->compact, e->in_kernel and
   e->lanes_row (e->lanes_name): the
   fastest row functions for e->params on isa. */
void cp_epilogue_select(cp_epilogue *e, cp_isa isa);

#endif
