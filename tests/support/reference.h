/*
 * Scalar reference (the test oracle): plain loops, double accumulation, no
 * blocking. Not part of the public API; tests link the static library.
 */
#ifndef CONVPOOL_REFERENCE_H
#define CONVPOOL_REFERENCE_H

#include "convpool.h"

/*
 * The layer as defined by the public header, in double: for each pooled
 * output, the max over its window (clipped by the -inf pool padding) of
 * act(conv with zero padding, stride, dilation and groups + bias +
 * residual), NaN if any value of the window is NaN. bound (if not NULL)
 * receives the max over the window of sum |x*w| + |bias| + |residual| over
 * the finite terms (an infinite input makes the output infinite or NaN; the
 * finite terms say whether fp32 sums beside it may overflow).
 */
void cp_reference_layer(const convpool_layer *layer, const void *src, int64_t batch, int64_t height,
                        int64_t width, const void *weights, const void *bias, double *out,
                        double *bound);

/* The same with a residual [batch, c_out, OH, OW] of the layer's dtype (NULL: none). */
void cp_reference_layer_residual(const convpool_layer *layer, const void *src, int64_t batch,
                                 int64_t height, int64_t width, const void *weights,
                                 const void *bias, const void *residual, double *out,
                                 double *bound);

/* The conv output size of the layer for an input of height x width (< 1
   where the padded input is smaller than the dilated filter). */
void cp_reference_conv_shape(const convpool_layer *layer, int64_t height, int64_t width,
                             int64_t *oh, int64_t *ow);

/* The pooled output size of the layer for an input of height x width. */
void cp_reference_shape(const convpool_layer *layer, int64_t height, int64_t width, int64_t *ph,
                        int64_t *pw);

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
