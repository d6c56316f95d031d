/*
 * The layer descriptor: its defaults, and its validation into the internal
 * cp_layer (plan.h). Every refusal names the offending field and value.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "plan.h"
#include "validate.h"

/* Conv strides and dilations beyond this are refused: no real layer has
   them, and it keeps every strided or dilated size far from overflow. */
#define CP_MAX_CONV_STRIDE ((int64_t)1 << 24)
#define CP_MAX_DILATION ((int64_t)1 << 24)

void convpool_layer_init(convpool_layer *layer, convpool_dtype dtype, int64_t c_out, int64_t c_in,
                         int64_t k, int64_t pool) {
  if (layer == NULL) return;
  memset(layer, 0, sizeof *layer);
  layer->size = sizeof *layer;
  layer->dtype = dtype;
  layer->c_out = c_out, layer->c_in = c_in, layer->k = k;
  layer->stride = layer->dilation = layer->groups = 1;
  layer->activation = CONVPOOL_ACTIVATION_NONE;
  layer->clamp_min = -INFINITY;
  layer->clamp_max = INFINITY;
  layer->pool = pool;
  layer->pool_stride = 0;
}

static const char *const cp_sides[4] = {"top", "left", "bottom", "right"};

static convpool_status cp_check_positive(const char *name, int64_t value) {
  if (value < 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s = %lld must be >= 1", name, (long long)value);
  return CONVPOOL_SUCCESS;
}

/* The sizes of every released convpool_layer, oldest first: the first
   ended with ceil_mode (a 4-byte int, padded to 8), the second adds
   has_residual. */
static const size_t cp_layer_sizes[] = {offsetof(convpool_layer, has_residual),
                                        sizeof(convpool_layer)};
_Static_assert(offsetof(convpool_layer, has_residual) == 168,
               "the first released convpool_layer was 168 bytes");

convpool_status cp_layer_from_public(const convpool_layer *caller, int has_bias, cp_layer *out) {
  if (caller == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "layer is NULL");
  convpool_layer read; /* the defaults, then the caller's fields */
  convpool_layer_init(&read, CONVPOOL_FLOAT32, 0, 0, 0, 0);
  convpool_status st = cp_read_sized("layer", caller, caller->size, cp_layer_sizes,
                                     sizeof cp_layer_sizes / sizeof cp_layer_sizes[0], &read);
  if (st != CONVPOOL_SUCCESS) return st;
  const convpool_layer *in = &read;
  if (in->dtype != CONVPOOL_FLOAT32 && in->dtype != CONVPOOL_FLOAT16 &&
      in->dtype != CONVPOOL_BFLOAT16)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dtype = %d is not a convpool_dtype", (int)in->dtype);
  if ((st = cp_check_positive("c_out", in->c_out)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("c_in", in->c_in)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("k", in->k)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("pool", in->pool)) != CONVPOOL_SUCCESS) return st;
  /* The limits of convpool.h: with them no pooled size, window or span can
     overflow (conv sizes are bounded by the tensors' byte counts). */
  if (in->pool > CONVPOOL_MAX_POOL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "pool = %lld must be in 1..%lld", (long long)in->pool,
                   (long long)CONVPOOL_MAX_POOL);
  if (in->stride < 1 || in->stride > CP_MAX_CONV_STRIDE)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "conv stride = %lld must be in 1..%lld",
                   (long long)in->stride, (long long)CP_MAX_CONV_STRIDE);
  if (in->dilation < 1 || in->dilation > CP_MAX_DILATION)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "conv dilation = %lld must be in 1..%lld",
                   (long long)in->dilation, (long long)CP_MAX_DILATION);
  if (in->groups < 1 || in->c_in % in->groups != 0 || in->c_out % in->groups != 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "conv groups = %lld must be >= 1 and divide c_in = %lld and c_out = %lld",
                   (long long)in->groups, (long long)in->c_in, (long long)in->c_out);
  int64_t extent; /* dilation * (k - 1) + 1 */
  if (__builtin_mul_overflow(in->dilation, in->k - 1, &extent) ||
      __builtin_add_overflow(extent, 1, &extent))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "k = %lld with dilation = %lld: the dilated filter's extent overflows",
                   (long long)in->k, (long long)in->dilation);
  if (in->has_residual != 0 && in->has_residual != 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "has_residual = %lld must be 0 or 1",
                   (long long)in->has_residual);
  if (in->pool_stride < 0 || in->pool_stride > CONVPOOL_MAX_POOL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "pool_stride = %lld must be in 1..%lld (0: the pool)",
                   (long long)in->pool_stride, (long long)CONVPOOL_MAX_POOL);
  memset(out, 0, sizeof *out);
  out->dtype = in->dtype;
  out->c_out = in->c_out, out->c_in = in->c_in, out->k = in->k;
  out->conv_stride = in->stride;
  out->dilation = in->k == 1 ? 1 : in->dilation; /* one tap: no dilation to apply */
  out->groups = in->groups;
  out->extent = extent;
  out->has_residual = (int)in->has_residual;
  out->pool = in->pool;
  out->stride = in->pool_stride == 0 ? in->pool : in->pool_stride;
  for (int s = 0; s < 4; s++) {
    if (in->padding[s] < 0 || in->padding[s] > CONVPOOL_MAX_PADDING)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "padding %s = %lld must be in 0..%lld", cp_sides[s],
                     (long long)in->padding[s], (long long)CONVPOOL_MAX_PADDING);
    /* ONNX's bound: every window keeps at least one conv output */
    if (in->pool_padding[s] < 0 || in->pool_padding[s] >= in->pool)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                     "pool_padding %s = %lld must be in 0..%lld (less than the pool window %lld)",
                     cp_sides[s], (long long)in->pool_padding[s], (long long)(in->pool - 1),
                     (long long)in->pool);
    out->pad[s] = in->padding[s];
    out->pool_pad[s] = in->pool_padding[s];
  }
  if (in->ceil_mode != 0 && in->ceil_mode != 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "ceil_mode = %d must be 0 or 1", in->ceil_mode);
  out->ceil_mode = in->ceil_mode;
  switch (in->activation) {
    case CONVPOOL_ACTIVATION_NONE:
      out->act_min = -INFINITY, out->act_max = INFINITY;
      break;
    case CONVPOOL_ACTIVATION_RELU:
      out->act_min = 0.0f, out->act_max = INFINITY;
      break;
    case CONVPOOL_ACTIVATION_CLAMP:
      if (isnan(in->clamp_min) || isnan(in->clamp_max) || in->clamp_min > in->clamp_max)
        return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                       "clamp [%g, %g] must have min <= max and no NaN bound",
                       (double)in->clamp_min, (double)in->clamp_max);
      out->act_min = in->clamp_min, out->act_max = in->clamp_max;
      break;
    default:
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "activation = %d is not a convpool_activation",
                     (int)in->activation);
  }
  out->has_bias = has_bias;
  return CONVPOOL_SUCCESS;
}

/* The shapes of the layer on an input: the pooled output, or (conv) the
   conv output, as the residual has it. */
static convpool_status cp_layer_shape(const convpool_layer *layer, int conv, int64_t batch,
                                      int64_t height, int64_t width, int64_t shape[4],
                                      size_t *bytes) {
  cp_clear_error();
  if (shape == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "shape is NULL");
  cp_layer l;
  convpool_status st = cp_layer_from_public(layer, 0, &l);
  if (st != CONVPOOL_SUCCESS) return st;
  if (conv) l.has_residual = 1; /* the conv output's bytes, whatever the layer */
  cp_plan pl;
  if ((st = cp_plan_shape(&l, batch, height, width, &pl)) != CONVPOOL_SUCCESS) return st;
  shape[0] = batch, shape[1] = l.c_out;
  shape[2] = conv ? pl.oh : pl.ph, shape[3] = conv ? pl.ow : pl.pw;
  if (bytes != NULL) *bytes = conv ? pl.residual_bytes : pl.dst_bytes;
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_layer_output_shape(const convpool_layer *layer, int64_t batch,
                                            int64_t height, int64_t width, int64_t shape[4],
                                            size_t *bytes) {
  return cp_layer_shape(layer, 0, batch, height, width, shape, bytes);
}

convpool_status convpool_layer_conv_shape(const convpool_layer *layer, int64_t batch,
                                          int64_t height, int64_t width, int64_t shape[4],
                                          size_t *bytes) {
  return cp_layer_shape(layer, 1, batch, height, width, shape, bytes);
}
