/* Scalar reference: the definition of the layer, written as plainly as possible. */
#include "reference.h"

#include <math.h>

#include "half.h"

static double cp_ref_load(convpool_dtype dtype, const void *base, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

void cp_reference(convpool_dtype dtype, const void *src, int64_t batch, int64_t c_in,
                  int64_t height, int64_t width, const void *weights, int64_t c_out, int64_t k,
                  const void *bias, int64_t pool, double *out, double *bound) {
  const int64_t oh = height - k + 1, ow = width - k + 1;
  const int64_t ph = oh / pool, pw = ow / pool;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t co = 0; co < c_out; co++)
      for (int64_t y = 0; y < ph; y++)
        for (int64_t x = 0; x < pw; x++) {
          double best = -INFINITY, best_bound = 0.0;
          int seen_nan = 0;
          for (int64_t dy = 0; dy < pool; dy++)
            for (int64_t dx = 0; dx < pool; dx++) {
              const int64_t r = y * pool + dy, c = x * pool + dx;
              double sum = 0.0, abs_sum = 0.0;
              for (int64_t ci = 0; ci < c_in; ci++)
                for (int64_t i = 0; i < k; i++)
                  for (int64_t j = 0; j < k; j++) {
                    double xv = cp_ref_load(
                        dtype, src, (size_t)(((b * c_in + ci) * height + r + i) * width + c + j));
                    double wv =
                        cp_ref_load(dtype, weights, (size_t)(((co * c_in + ci) * k + i) * k + j));
                    sum += xv * wv;
                    abs_sum += fabs(xv * wv);
                  }
              if (isnan(sum)) seen_nan = 1;
              if (sum > best) best = sum;
              if (abs_sum > best_bound || isnan(abs_sum)) best_bound = abs_sum;
            }
          double v = seen_nan ? NAN : best;
          if (bias != NULL) v += cp_ref_load(dtype, bias, (size_t)co);
          const size_t o = (size_t)(((b * c_out + co) * ph + y) * pw + x);
          out[o] = v;
          if (bound != NULL) bound[o] = best_bound;
        }
}
