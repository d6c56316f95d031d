/* Scalar reference: the definition of the layer, written as plainly as possible. */
#include "reference.h"

#include <math.h>

#include "half.h"

static double cp_ref_load(convpool_dtype dtype, const void *base, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

/* Pooled outputs along a side, torch's rule (floor or ceil; with ceil, a last
   window that would start in the bottom/right padding is dropped). */
static int64_t cp_ref_pooled(int64_t conv, int64_t pool, int64_t stride, int64_t lo, int64_t hi,
                             int ceil_mode) {
  const int64_t span = conv + lo + hi - pool;
  if (span < 0) return 0;
  int64_t n = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (n - 1) * stride >= conv + lo) n--;
  return n;
}

void cp_reference_shape(const convpool_layer *l, int64_t height, int64_t width, int64_t *ph,
                        int64_t *pw) {
  const int64_t s = l->pool_stride ? l->pool_stride : l->pool;
  const int64_t oh = height + l->padding[0] + l->padding[2] - l->k + 1;
  const int64_t ow = width + l->padding[1] + l->padding[3] - l->k + 1;
  *ph = oh < 1
            ? 0
            : cp_ref_pooled(oh, l->pool, s, l->pool_padding[0], l->pool_padding[2], l->ceil_mode);
  *pw = ow < 1
            ? 0
            : cp_ref_pooled(ow, l->pool, s, l->pool_padding[1], l->pool_padding[3], l->ceil_mode);
}

void cp_reference_layer(const convpool_layer *l, const void *src, int64_t batch, int64_t height,
                        int64_t width, const void *weights, const void *bias, double *out,
                        double *bound) {
  const convpool_dtype dtype = l->dtype;
  const int64_t c_in = l->c_in, c_out = l->c_out, k = l->k, pool = l->pool;
  const int64_t stride = l->pool_stride ? l->pool_stride : pool;
  const int64_t oh = height + l->padding[0] + l->padding[2] - k + 1;
  const int64_t ow = width + l->padding[1] + l->padding[3] - k + 1;
  int64_t ph, pw;
  cp_reference_shape(l, height, width, &ph, &pw);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t co = 0; co < c_out; co++)
      for (int64_t y = 0; y < ph; y++)
        for (int64_t x = 0; x < pw; x++) {
          double best = -INFINITY, best_bound = 0.0;
          int seen_nan = 0;
          for (int64_t dy = 0; dy < pool; dy++)
            for (int64_t dx = 0; dx < pool; dx++) {
              const int64_t r = y * stride - l->pool_padding[0] + dy;
              const int64_t c = x * stride - l->pool_padding[1] + dx;
              if (r < 0 || r >= oh || c < 0 || c >= ow) continue; /* -inf padding */
              double sum = 0.0, abs_sum = 0.0;
              for (int64_t ci = 0; ci < c_in; ci++)
                for (int64_t i = 0; i < k; i++)
                  for (int64_t j = 0; j < k; j++) {
                    const int64_t iy = r + i - l->padding[0], ix = c + j - l->padding[1];
                    /* zero padding is multiplied like any input (0 * inf is NaN, as torch) */
                    const int pad = iy < 0 || iy >= height || ix < 0 || ix >= width;
                    double xv =
                        pad ? 0.0
                            : cp_ref_load(dtype, src,
                                          (size_t)(((b * c_in + ci) * height + iy) * width + ix));
                    double wv =
                        cp_ref_load(dtype, weights, (size_t)(((co * c_in + ci) * k + i) * k + j));
                    sum += xv * wv;
                    abs_sum += isinf(xv * wv) ? 0.0 : fabs(xv * wv); /* finite terms only */
                  }
              if (bias != NULL) {
                const double bv = cp_ref_load(dtype, bias, (size_t)co);
                sum += bv;
                abs_sum += isinf(bv) ? 0.0 : fabs(bv);
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

void cp_reference(convpool_dtype dtype, const void *src, int64_t batch, int64_t c_in,
                  int64_t height, int64_t width, const void *weights, int64_t c_out, int64_t k,
                  const void *bias, int64_t pool, double *out, double *bound) {
  convpool_layer l;
  convpool_layer_init(&l, dtype, c_out, c_in, k, pool);
  cp_reference_layer(&l, src, batch, height, width, weights, bias, out, bound);
}
