/* The packers (see pack.h). */
#include "pack.h"

#include <string.h>

#include "half.h"

float cp_load_elem(convpool_dtype dtype, const void *base, size_t index) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[index]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[index]);
  return ((const float *)base)[index];
}

int cp_size_weights_blocked(const cp_weight_blocks *wb, size_t *bytes, size_t *block_bytes) {
  const size_t mr = wb->mr, c_out = (size_t)wb->c_out, k = (size_t)wb->k;
  const size_t blocks = (c_out + mr - 1) / mr;
  const size_t steps = ((size_t)wb->c_in + wb->cpack - 1) / wb->cpack;
  /* full blocks of MR, then the tail kernel's MR */
  const size_t channels = c_out % mr ? (blocks - 1) * mr + wb->mr_tail : blocks * mr;
  size_t per_channel;
  return k <= SIZE_MAX / k && cp_mul(steps, k * k, &per_channel) &&
         cp_mul(per_channel, sizeof(float), &per_channel) && cp_mul(channels, per_channel, bytes) &&
         cp_mul(mr, per_channel, block_bytes);
}

void cp_pack_weights_blocked(convpool_dtype dtype, const void *weights, const cp_weight_blocks *wb,
                             float *packed) {
  const size_t cin = (size_t)wb->c_in, k = (size_t)wb->k, kk = k * k;
  const size_t main_mr = wb->mr, blocks = ((size_t)wb->c_out + main_mr - 1) / main_mr;
  const size_t cpack = wb->cpack, steps = (cin + cpack - 1) / cpack;
  const uint16_t *w16 = weights;
  for (size_t cb = 0; cb < blocks; cb++) {
    const size_t mr = cb + 1 == blocks ? wb->mr_tail : main_mr;
    float *block = packed + cb * main_mr * steps * kk;
    uint32_t *pairs = (uint32_t *)block;
    for (size_t s = 0; s < steps; s++)
      for (size_t t = 0; t < kk; t++)
        for (size_t m = 0; m < mr; m++) {
          const size_t co = cb * main_mr + m, to = (s * kk + t) * mr + m;
          if (cpack == 1) {
            block[to] = co < (size_t)wb->c_out
                            ? cp_load_elem(dtype, weights, (co * cin + s) * kk + t)
                            : 0.0f;
            continue;
          }
          uint32_t lo = 0, hi = 0;
          if (co < (size_t)wb->c_out) {
            lo = w16[(co * cin + 2 * s) * kk + t];
            if (2 * s + 1 < cin) hi = w16[(co * cin + 2 * s + 1) * kk + t];
          }
          pairs[to] = lo | hi << 16;
        }
  }
}

/* One panel row: input row iy, columns [ix0, ix0 + cols) of channel step s,
   zero outside the input (conv padding) and past cols up to ld. */
static void cp_pack_panel_row(const cp_panel_src *src, size_t s, int64_t iy, int64_t ix0,
                              size_t cols, size_t ld, float *to) {
  const int64_t w = src->width;
  const size_t hw = (size_t)src->height * (size_t)w, cin = (size_t)src->c_in;
  int64_t a = ix0 < 0 ? 0 : ix0, e = ix0 + (int64_t)cols;
  if (e > w) e = w;
  if (iy < 0 || iy >= src->height || a >= e) {
    memset(to, 0, ld * sizeof(float));
    return;
  }
  const size_t lead = (size_t)(a - ix0), n = (size_t)(e - a);
  const size_t from = s * src->cpack * hw + (size_t)iy * (size_t)w + (size_t)a;
  memset(to, 0, lead * sizeof(float));
  if (src->cpack == 2) { /* bf16 channel pairs, interleaved */
    const uint16_t *lo = (const uint16_t *)src->image + from;
    const uint16_t *hi = 2 * s + 1 < cin ? lo + hw : NULL;
    uint32_t *t32 = (uint32_t *)to + lead;
    for (size_t x = 0; x < n; x++) t32[x] = lo[x] | (hi ? (uint32_t)hi[x] << 16 : 0u);
  } else if (src->widen != NULL) {
    src->widen((const uint16_t *)src->image + from, to + lead, n);
  } else {
    memcpy(to + lead, (const float *)src->image + from, n * sizeof(float));
  }
  memset(to + lead + n, 0, (ld - lead - n) * sizeof(float));
}

void cp_pack_panel(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                   const cp_panel_layout *layout, float *panel) {
  const size_t w = (size_t)src->width, hw = (size_t)src->height * w, es = src->elem_size;
  const size_t ld = layout->ld, cs = layout->cs, cin = (size_t)src->c_in, cpack = src->cpack;
  const size_t steps = (cin + cpack - 1) / cpack;
  /* the prefetched span: the part of the rows inside the input */
  const int64_t pa = ix0 < 0 ? 0 : ix0,
                pe = ix0 + (int64_t)cols < src->width ? ix0 + (int64_t)cols : src->width;
  const size_t span_bytes = pa < pe ? (size_t)(pe - pa) * es : 0;
  for (size_t s = 0; s < steps; s++) {
    float *to = panel + s * cs;
    for (size_t y = 0; y < rows; y++, to += ld) {
      /* The rows are short and far apart, so the hardware prefetchers do not
         follow them: ask for the row ahead_rows rows ahead (measured: the
         pack of the headline case goes from ~10 ms to ~6.5 ms on one core). */
      const size_t ahead = s * rows + y + src->ahead_rows;
      const int64_t ay = iy0 + (int64_t)(ahead % rows);
      if (ahead / rows < steps && span_bytes > 0 && ay >= 0 && ay < src->height) {
        const unsigned char *p =
            src->image + ((ahead / rows) * cpack * hw + (size_t)ay * w + (size_t)pa) * es;
        for (size_t c = 0; c < cpack && (ahead / rows) * cpack + c < cin; c++, p += hw * es) {
          for (size_t o = 0; o < span_bytes; o += CP_CACHE_LINE) __builtin_prefetch(p + o, 0, 3);
          __builtin_prefetch(p + span_bytes - 1, 0, 3);
        }
      }
      cp_pack_panel_row(src, s, iy0 + (int64_t)y, ix0, cols, ld, to);
    }
    memset(to, 0, (cs - rows * ld) * sizeof(float));
  }
  memset(panel + steps * cs, 0, (layout->floats - steps * cs) * sizeof(float));
}
