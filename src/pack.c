/* The packers (see pack.h). */
#include "pack.h"

#include <string.h>

#include "half.h"

float cp_load_elem(convpool_dtype dtype, const void *base, size_t index) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[index]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[index]);
  return ((const float *)base)[index];
}

int cp_size_weights_blocked(const cp_layer *layer, cp_algo_setup *setup) {
  const size_t mr = (size_t)setup->uk->mr, c_out = (size_t)layer->c_out, k = (size_t)layer->k;
  const size_t blocks = (c_out + mr - 1) / mr;
  const size_t steps = ((size_t)layer->c_in + (size_t)setup->uk->cpack - 1) / (size_t)setup->uk->cpack;
  /* full blocks of MR, then the tail kernel's MR */
  const size_t channels = c_out % mr ? (blocks - 1) * mr + (size_t)setup->uk_tail->mr : blocks * mr;
  size_t per_channel;
  return k <= SIZE_MAX / k && cp_mul(steps, k * k, &per_channel) &&
         cp_mul(per_channel, sizeof(float), &per_channel) &&
         cp_mul(channels, per_channel, &setup->packed_weight_bytes) &&
         cp_mul(mr, per_channel, &setup->weight_block_bytes);
}

void cp_pack_weights_blocked(const cp_layer *layer, const cp_algo_setup *setup,
                             const void *weights, float *packed) {
  const size_t cin = (size_t)layer->c_in, k = (size_t)layer->k, kk = k * k;
  const size_t main_mr = (size_t)setup->uk->mr, blocks = ((size_t)layer->c_out + main_mr - 1) / main_mr;
  const size_t cpack = (size_t)setup->uk->cpack, steps = (cin + cpack - 1) / cpack;
  const uint16_t *w16 = weights;
  for (size_t cb = 0; cb < blocks; cb++) {
    const size_t mr = cb + 1 == blocks ? (size_t)setup->uk_tail->mr : main_mr;
    float *block = packed + cb * main_mr * steps * kk;
    uint32_t *pairs = (uint32_t *)block;
    for (size_t s = 0; s < steps; s++)
      for (size_t t = 0; t < kk; t++)
        for (size_t m = 0; m < mr; m++) {
          const size_t co = cb * main_mr + m, to = (s * kk + t) * mr + m;
          if (cpack == 1) {
            block[to] = co < (size_t)layer->c_out
                            ? cp_load_elem(layer->dtype, weights, (co * cin + s) * kk + t)
                            : 0.0f;
            continue;
          }
          uint32_t lo = 0, hi = 0;
          if (co < (size_t)layer->c_out) {
            lo = w16[(co * cin + 2 * s) * kk + t];
            if (2 * s + 1 < cin) hi = w16[(co * cin + 2 * s + 1) * kk + t];
          }
          pairs[to] = lo | hi << 16;
        }
  }
}

void cp_pack_panel(const cp_run *r, int64_t b, size_t oh0, size_t rows, size_t col0, size_t cols,
                   float *panel) {
  const cp_plan *pl = r->pl;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w;
  const size_t ld = pl->panel_ld, cs = pl->panel_cs, cin = (size_t)pl->c_in;
  const size_t steps = (size_t)pl->c_steps, cpack = (size_t)pl->uk->cpack;
  const size_t base = (size_t)b * cin * hw + oh0 * w + col0;
  const size_t row_bytes = cols * pl->elem_size;
  for (size_t s = 0; s < steps; s++) {
    float *to = panel + s * cs;
    for (size_t y = 0; y < rows; y++, to += ld) {
      const size_t from = base + s * hw + y * w;
      /* The rows are short and far apart, so the hardware prefetchers do not
         follow them: ask for the row pl->cfg->pack_ahead_rows rows ahead (measured: the
         pack of the headline case goes from ~10 ms to ~6.5 ms on one core). */
      const size_t ahead = s * rows + y + pl->cfg->pack_ahead_rows;
      if (ahead / rows < steps) {
        const unsigned char *p =
            r->src + (base + (ahead / rows) * cpack * hw + (ahead % rows) * w) * pl->elem_size;
        for (size_t c = 0; c < cpack; c++, p += hw * pl->elem_size) {
          for (size_t o = 0; o < row_bytes; o += CP_CACHE_LINE) __builtin_prefetch(p + o, 0, 3);
          __builtin_prefetch(p + row_bytes - 1, 0, 3);
        }
      }
      if (pl->uk->cpack == 2) { /* bf16 channel pairs, interleaved */
        const uint16_t *lo = (const uint16_t *)r->src + base + 2 * s * hw + y * w;
        const uint16_t *hi = 2 * s + 1 < cin ? lo + hw : NULL;
        uint32_t *t32 = (uint32_t *)to;
        for (size_t x = 0; x < cols; x++) t32[x] = lo[x] | (hi ? (uint32_t)hi[x] << 16 : 0u);
      } else if (r->widen != NULL) {
        r->widen((const uint16_t *)r->src + from, to, cols);
      } else {
        memcpy(to, (const float *)r->src + from, cols * sizeof(float));
      }
      if (cols < ld) memset(to + cols, 0, (ld - cols) * sizeof(float));
    }
    memset(to, 0, (cs - rows * ld) * sizeof(float));
  }
  memset(panel + steps * cs, 0, (pl->panel_floats - steps * cs) * sizeof(float));
}

void cp_pack_im2col(const cp_run *r, int64_t b, size_t oh0, size_t conv_rows, size_t col0,
                    size_t cw, float *strip) {
  const cp_plan *pl = r->pl;
  const size_t nr = (size_t)pl->uk->nr, k = (size_t)pl->k, steps = (size_t)pl->c_steps;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w, cin = (size_t)pl->c_in;
  const size_t per_row = (cw + nr - 1) / nr;
  const size_t base = (size_t)b * cin * hw + oh0 * w + col0;
  float *to = strip;
  for (size_t t = 0; t < pl->tiles; t++) {
    size_t off[CP_MAX_NR]; /* source offset of each position in the plane, or SIZE_MAX */
    for (size_t n = 0; n < nr; n++) {
      size_t row, col;
      if (pl->flat) { /* rows are col_block positions apart, as in the tile buffer */
        size_t p = t * nr + n;
        row = p / (size_t)pl->col_block, col = p % (size_t)pl->col_block;
      } else {
        row = t / per_row, col = (t % per_row) * nr + n;
      }
      off[n] = row < conv_rows && col < cw ? row * w + col : SIZE_MAX;
    }
    /* Common case: the valid positions are one run within a row, then padding. */
    size_t run = 0;
    while (run < nr && off[run] != SIZE_MAX && off[run] == off[0] + run) run++;
    int contiguous = 1;
    for (size_t n = run; n < nr; n++) contiguous &= off[n] == SIZE_MAX;
    for (size_t s = 0; s < steps; s++)
      for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++, to += nr) {
          const size_t at = base + s * pl->uk->cpack * hw + i * w + j;
          if (pl->uk->cpack == 2) {
            const uint16_t *lo = (const uint16_t *)r->src + at;
            const int has_hi = 2 * s + 1 < cin;
            uint32_t *t32 = (uint32_t *)to;
            for (size_t n = 0; n < nr; n++)
              t32[n] = off[n] == SIZE_MAX ? 0u
                       : lo[off[n]] | (has_hi ? (uint32_t)lo[off[n] + hw] << 16 : 0u);
          } else if (contiguous && run > 0) {
            if (r->widen != NULL)
              r->widen((const uint16_t *)r->src + at + off[0], to, run);
            else
              memcpy(to, (const float *)r->src + at + off[0], run * sizeof(float));
            memset(to + run, 0, (nr - run) * sizeof(float));
          } else {
            for (size_t n = 0; n < nr; n++)
              to[n] = off[n] == SIZE_MAX ? 0.0f : cp_load_elem(pl->dtype, r->src, at + off[n]);
          }
        }
  }
}

