/* Scalar reference: the definition of the layer, written as plainly as possible. */
#include "reference.h"

#include <math.h>

#include "half.h"

static double cp_ref_load(convpool_dtype dtype, const void *base, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

/* 128-bit integers: the shapes below are computed without any possible
   overflow, and independently of the library's own arithmetic. */
__extension__ typedef __int128 cp_ref_wide;

/* Pooled outputs along a side: torch's pooling_output_shape, literally,
   n = div_rtn(conv + lo + hi - (pool - 1) - 1 (+ stride - 1 with ceil), stride) + 1,
   less one with ceil when that last window would start at or past conv + lo
   (in the bottom/right padding). 0 when not even one window fits. */
static int64_t cp_ref_pooled(cp_ref_wide conv, int64_t pool, int64_t stride, int64_t lo, int64_t hi,
                             int ceil_mode) {
  const cp_ref_wide num =
      conv + lo + hi - ((cp_ref_wide)pool - 1) - 1 + (ceil_mode ? (cp_ref_wide)stride - 1 : 0);
  cp_ref_wide n = num / stride;
  if (num % stride != 0 && num < 0) n--; /* div_rtn rounds toward -infinity */
  n++;
  if (ceil_mode && (n - 1) * stride >= conv + lo) n--;
  return n < 1 ? 0 : n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* Conv outputs along a side of `size` inputs padded by lo + hi. */
/* Conv outputs along a side, in 128 bits: any decoded size is judged without overflow. */
static cp_ref_wide cp_ref_conv(const convpool_layer *l, int64_t size, int64_t lo, int64_t hi) {
  const cp_ref_wide extent = (cp_ref_wide)l->dilation * (l->k - 1) + 1;
  const cp_ref_wide padded = (cp_ref_wide)size + lo + hi;
  return padded < extent ? 0 : (padded - extent) / l->stride + 1;
}

void cp_reference_conv_shape(const convpool_layer *l, int64_t height, int64_t width, int64_t *oh,
                             int64_t *ow) {
  const cp_ref_wide h = cp_ref_conv(l, height, l->padding[0], l->padding[2]);
  const cp_ref_wide w = cp_ref_conv(l, width, l->padding[1], l->padding[3]);
  *oh = h > INT64_MAX ? INT64_MAX : (int64_t)h;
  *ow = w > INT64_MAX ? INT64_MAX : (int64_t)w;
}

void cp_reference_shape(const convpool_layer *l, int64_t height, int64_t width, int64_t *ph,
                        int64_t *pw) {
  const int64_t s = l->pool_stride ? l->pool_stride : l->pool;
  const cp_ref_wide oh = cp_ref_conv(l, height, l->padding[0], l->padding[2]);
  const cp_ref_wide ow = cp_ref_conv(l, width, l->padding[1], l->padding[3]);
  *ph = oh < 1
            ? 0
            : cp_ref_pooled(oh, l->pool, s, l->pool_padding[0], l->pool_padding[2], l->ceil_mode);
  *pw = ow < 1
            ? 0
            : cp_ref_pooled(ow, l->pool, s, l->pool_padding[1], l->pool_padding[3], l->ceil_mode);
}

void cp_reference_layer_residual(const convpool_layer *l, const void *src, int64_t batch,
                                 int64_t height, int64_t width, const void *weights,
                                 const void *bias, const void *residual, double *out,
                                 double *bound) {
  const convpool_dtype dtype = l->dtype;
  const int64_t c_in = l->c_in, c_out = l->c_out, k = l->k, pool = l->pool;
  const int64_t stride = l->pool_stride ? l->pool_stride : pool;
  const int64_t group_in = c_in / l->groups, group_out = c_out / l->groups;
  int64_t oh, ow, ph, pw;
  cp_reference_conv_shape(l, height, width, &oh, &ow);
  cp_reference_shape(l, height, width, &ph, &pw);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t co = 0; co < c_out; co++)
      for (int64_t y = 0; y < ph; y++)
        for (int64_t x = 0; x < pw; x++) {
          double best = -INFINITY, best_bound = 0.0;
          int seen_nan = 0;
          /* the window's rows and columns inside the conv output (the rest is -inf
             padding, or past the end in ceil sizing) */
          const int64_t r0 = y * stride - l->pool_padding[0], c0 = x * stride - l->pool_padding[1];
          const int64_t r_end = r0 + pool < oh ? r0 + pool : oh;
          const int64_t c_end = c0 + pool < ow ? c0 + pool : ow;
          for (int64_t r = r0 < 0 ? 0 : r0; r < r_end; r++)
            for (int64_t c = c0 < 0 ? 0 : c0; c < c_end; c++) {
              double sum = 0.0, abs_sum = 0.0;
              for (int64_t cg = 0; cg < group_in; cg++) {
                const int64_t ci = co / group_out * group_in + cg; /* the group's channel */
                for (int64_t i = 0; i < k; i++)
                  for (int64_t j = 0; j < k; j++) {
                    const int64_t iy = r * l->stride + i * l->dilation - l->padding[0];
                    const int64_t ix = c * l->stride + j * l->dilation - l->padding[1];
                    /* zero padding is multiplied like any input (0 * inf is NaN, as torch) */
                    const int pad = iy < 0 || iy >= height || ix < 0 || ix >= width;
                    double xv =
                        pad ? 0.0
                            : cp_ref_load(dtype, src,
                                          (size_t)(((b * c_in + ci) * height + iy) * width + ix));
                    double wv = cp_ref_load(dtype, weights,
                                            (size_t)(((co * group_in + cg) * k + i) * k + j));
                    sum += xv * wv;
                    abs_sum += isinf(xv * wv) ? 0.0 : fabs(xv * wv); /* finite terms only */
                  }
              }
              if (bias != NULL) {
                const double bv = cp_ref_load(dtype, bias, (size_t)co);
                sum += bv;
                abs_sum += isinf(bv) ? 0.0 : fabs(bv);
              }
              if (residual != NULL) {
                const double rv =
                    cp_ref_load(dtype, residual, (size_t)(((b * c_out + co) * oh + r) * ow + c));
                sum += rv;
                abs_sum += fabs(rv);
              }
              if (l->activation == CONVPOOL_ACTIVATION_RELU && sum < 0) sum = 0;
              if (l->activation == CONVPOOL_ACTIVATION_CLAMP) {
                if (sum < l->clamp_min) sum = l->clamp_min;
                if (sum > l->clamp_max) sum = l->clamp_max;
              }
              if (isnan(sum)) seen_nan = 1;
              if (sum > best) best = sum;
              if (abs_sum > best_bound || isnan(abs_sum)) best_bound = abs_sum;
            }
          const size_t o = (size_t)(((b * c_out + co) * ph + y) * pw + x);
          out[o] = seen_nan ? NAN : best;
          if (bound != NULL) bound[o] = best_bound;
        }
}

void cp_reference_layer(const convpool_layer *l, const void *src, int64_t batch, int64_t height,
                        int64_t width, const void *weights, const void *bias, double *out,
                        double *bound) {
  cp_reference_layer_residual(l, src, batch, height, width, weights, bias, NULL, out, bound);
}

void cp_reference(convpool_dtype dtype, const void *src, int64_t batch, int64_t c_in,
                  int64_t height, int64_t width, const void *weights, int64_t c_out, int64_t k,
                  const void *bias, int64_t pool, double *out, double *bound) {
  convpool_layer l;
  convpool_layer_init(&l, dtype, c_out, c_in, k, pool);
  cp_reference_layer(&l, src, batch, height, width, weights, bias, out, bound);
}
