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
  const size_t steps =
      ((size_t)layer->c_in + (size_t)setup->uk->cpack - 1) / (size_t)setup->uk->cpack;
  /* full blocks of MR, then the tail kernel's MR */
  const size_t channels = c_out % mr ? (blocks - 1) * mr + (size_t)setup->uk_tail->mr : blocks * mr;
  size_t per_channel;
  return k <= SIZE_MAX / k && cp_mul(steps, k * k, &per_channel) &&
         cp_mul(per_channel, sizeof(float), &per_channel) &&
         cp_mul(channels, per_channel, &setup->packed_weight_bytes) &&
         cp_mul(mr, per_channel, &setup->weight_block_bytes);
}

void cp_pack_weights_blocked(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                             float *packed) {
  const size_t cin = (size_t)layer->c_in, k = (size_t)layer->k, kk = k * k;
  const size_t main_mr = (size_t)setup->uk->mr,
               blocks = ((size_t)layer->c_out + main_mr - 1) / main_mr;
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

/* One panel row: input row iy, columns [ix0, ix0 + cols) of channel step s,
   zero outside the input (conv padding) and past cols up to ld. */
static void cp_pack_panel_row(const cp_run *r, size_t plane0, size_t s, int64_t iy, int64_t ix0,
                              size_t cols, float *to) {
  const cp_plan *pl = r->pl;
  const int64_t w = pl->width;
  const size_t hw = (size_t)pl->height * (size_t)w, cin = (size_t)pl->c_in;
  int64_t a = ix0 < 0 ? 0 : ix0, e = ix0 + (int64_t)cols;
  if (e > w) e = w;
  if (iy < 0 || iy >= pl->height || a >= e) {
    memset(to, 0, pl->panel_ld * sizeof(float));
    return;
  }
  const size_t lead = (size_t)(a - ix0), n = (size_t)(e - a);
  const size_t from = plane0 + s * (size_t)pl->uk->cpack * hw + (size_t)iy * (size_t)w + (size_t)a;
  memset(to, 0, lead * sizeof(float));
  if (pl->uk->cpack == 2) { /* bf16 channel pairs, interleaved */
    const uint16_t *lo = (const uint16_t *)r->src + from;
    const uint16_t *hi = 2 * s + 1 < cin ? lo + hw : NULL;
    uint32_t *t32 = (uint32_t *)to + lead;
    for (size_t x = 0; x < n; x++) t32[x] = lo[x] | (hi ? (uint32_t)hi[x] << 16 : 0u);
  } else if (r->widen != NULL) {
    r->widen((const uint16_t *)r->src + from, to + lead, n);
  } else {
    memcpy(to + lead, (const float *)r->src + from, n * sizeof(float));
  }
  memset(to + lead + n, 0, (pl->panel_ld - lead - n) * sizeof(float));
}

void cp_pack_panel(const cp_run *r, int64_t b, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                   float *panel) {
  const cp_plan *pl = r->pl;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w, es = pl->elem_size;
  const size_t ld = pl->panel_ld, cs = pl->panel_cs, cin = (size_t)pl->c_in;
  const size_t steps = (size_t)pl->c_steps, cpack = (size_t)pl->uk->cpack;
  const size_t plane0 = (size_t)b * cin * hw;
  /* the prefetched span: the part of the rows inside the input */
  const int64_t pa = ix0 < 0 ? 0 : ix0,
                pe = ix0 + (int64_t)cols < pl->width ? ix0 + (int64_t)cols : pl->width;
  const size_t span_bytes = pa < pe ? (size_t)(pe - pa) * es : 0;
  for (size_t s = 0; s < steps; s++) {
    float *to = panel + s * cs;
    for (size_t y = 0; y < rows; y++, to += ld) {
      /* The rows are short and far apart, so the hardware prefetchers do not
         follow them: ask for the row pack_ahead_rows rows ahead (measured: the
         pack of the headline case goes from ~10 ms to ~6.5 ms on one core). */
      const size_t ahead = s * rows + y + (size_t)pl->cfg->pack_ahead_rows;
      const int64_t ay = iy0 + (int64_t)(ahead % rows);
      if (ahead / rows < steps && span_bytes > 0 && ay >= 0 && ay < pl->height) {
        const unsigned char *p =
            r->src + (plane0 + (ahead / rows) * cpack * hw + (size_t)ay * w + (size_t)pa) * es;
        for (size_t c = 0; c < cpack && (ahead / rows) * cpack + c < cin; c++, p += hw * es) {
          for (size_t o = 0; o < span_bytes; o += CP_CACHE_LINE) __builtin_prefetch(p + o, 0, 3);
          __builtin_prefetch(p + span_bytes - 1, 0, 3);
        }
      }
      cp_pack_panel_row(r, plane0, s, iy0 + (int64_t)y, ix0, cols, to);
    }
    memset(to, 0, (cs - rows * ld) * sizeof(float));
  }
  memset(panel + steps * cs, 0, (pl->panel_floats - steps * cs) * sizeof(float));
}

void cp_pack_im2col(const cp_run *r, const cp_item *it, float *strip) {
  const cp_plan *pl = r->pl;
  const size_t nr = (size_t)pl->uk->nr, k = (size_t)pl->k, steps = (size_t)pl->c_steps;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w, cin = (size_t)pl->c_in;
  const size_t cpack = (size_t)pl->uk->cpack, conv_rows = (size_t)it->ny, cw = (size_t)it->nx;
  const size_t per_row = (cw + nr - 1) / nr;
  const size_t plane0 = (size_t)it->b * cin * hw;
  float *to = strip;
  for (size_t t = 0; t < pl->tiles; t++) {
    /* input row and column of (i, j) = (0, 0) for each position, and whether
       every (i, j) of the position lies inside the input */
    int64_t iy[CP_MAX_NR], ix[CP_MAX_NR];
    int valid[CP_MAX_NR], inside[CP_MAX_NR], interior = 1;
    for (size_t n = 0; n < nr; n++) {
      size_t row, col;
      if (pl->flat) { /* rows are buf_row_ld positions apart, as in the tile buffer */
        size_t p = t * nr + n;
        row = p / pl->buf_row_ld, col = p % pl->buf_row_ld;
      } else {
        row = t / per_row, col = (t % per_row) * nr + n;
      }
      valid[n] = row < conv_rows && col < cw;
      iy[n] = it->y0 + (int64_t)row - pl->pad[CP_TOP];
      ix[n] = it->x0 + (int64_t)col - pl->pad[CP_LEFT];
      inside[n] = valid[n] && iy[n] >= 0 && iy[n] + (int64_t)k <= pl->height && ix[n] >= 0 &&
                  ix[n] + (int64_t)k <= pl->width;
      interior &= inside[n] || !valid[n];
    }
    /* Common case: the valid positions are one run within a row, then padding. */
    size_t run = 0;
    while (interior && run < nr && valid[run] && iy[run] == iy[0] &&
           ix[run] == ix[0] + (int64_t)run)
      run++;
    int contiguous = interior;
    for (size_t n = run; n < nr; n++) contiguous &= !valid[n];
    for (size_t s = 0; s < steps; s++)
      for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++, to += nr) {
          const size_t at = plane0 + s * cpack * hw;
          if (contiguous && run > 0 && cpack == 1) {
            const size_t from = at + (size_t)(iy[0] + (int64_t)i) * w + (size_t)ix[0] + j;
            if (r->widen != NULL)
              r->widen((const uint16_t *)r->src + from, to, run);
            else
              memcpy(to, (const float *)r->src + from, run * sizeof(float));
            memset(to + run, 0, (nr - run) * sizeof(float));
            continue;
          }
          for (size_t n = 0; n < nr; n++) {
            const int64_t y = iy[n] + (int64_t)i, x = ix[n] + (int64_t)j;
            const int in = valid[n] && y >= 0 && y < pl->height && x >= 0 && x < pl->width;
            const size_t from = in ? at + (size_t)y * w + (size_t)x : 0;
            if (cpack == 2) {
              const uint16_t *lo = (const uint16_t *)r->src;
              ((uint32_t *)to)[n] =
                  in ? lo[from] | (2 * s + 1 < cin ? (uint32_t)lo[from + hw] << 16 : 0u) : 0u;
            } else {
              to[n] = in ? cp_load_elem(pl->dtype, r->src, from) : 0.0f;
            }
          }
        }
  }
}
