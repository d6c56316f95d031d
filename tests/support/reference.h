/*
 * Scalar reference (the test oracle): plain loops, double accumulation, no
 * blocking. Not part of the public API; tests link the static library.
 */
#ifndef CONVPOOL_REFERENCE_H
#define CONVPOOL_REFERENCE_H

#include "convpool.h"

/*
 * out[b][co][ph][pw] = max over the pool window of the conv (in double) of the
 * dtype's values, plus bias, unrounded. If bound is not NULL, it receives the
 * max over the window of sum |x*w| (for error bounds). Shapes as in convpool.h;
 * the caller validates them.
 */
void cp_reference(convpool_dtype dtype, const void *src, int64_t batch, int64_t c_in,
                  int64_t height, int64_t width, const void *weights, int64_t c_out, int64_t k,
                  const void *bias, int64_t pool, double *out, double *bound);

#endif
