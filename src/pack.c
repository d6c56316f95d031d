/* The packers (see pack.h). */
#include "pack.h"

#include <string.h>

#include "half.h"

float cp_load_elem(convpool_dtype dtype, const void *base, size_t index) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[index]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[index]);
  return ((const float *)base)[index];
}

/* Channel steps of one conv group of a weight packing (0 on overflow). */
static size_t cp_weight_group_steps(const cp_weight_blocks *wb) {
  const size_t phases = (size_t)cp_split_phases(wb->k, wb->split);
  size_t channels;
  if (!cp_mul((size_t)(wb->c_in / wb->groups), phases * phases, &channels)) return 0;
  return (channels + wb->cpack - 1) / wb->cpack;
}

int cp_size_weights_blocked(const cp_weight_blocks *wb, size_t *bytes, size_t *block_bytes) {
  const size_t mr = wb->mr, c_out = (size_t)(wb->c_out / wb->groups);
  const size_t k = (size_t)cp_split_k(wb->k, wb->split);
  const size_t blocks = (size_t)wb->groups * ((c_out + mr - 1) / mr);
  const size_t steps = cp_weight_group_steps(wb);
  /* full blocks of MR, the last one of the tail kernel's MR */
  const size_t channels = c_out % mr ? (blocks - 1) * mr + wb->mr_tail : blocks * mr;
  size_t per_channel;
  return steps > 0 && k <= SIZE_MAX / k && cp_mul(steps, k * k, &per_channel) &&
         cp_mul(per_channel, sizeof(float), &per_channel) && cp_mul(channels, per_channel, bytes) &&
         cp_mul(mr, per_channel, block_bytes);
}

/* The weight of output channel co (of the group's c_out) for channel (or
   phase channel) u < channels of group g at tap t of the packed filter, as
   the index into w, or SIZE_MAX where it is zero. */
static size_t cp_weight_index(const cp_weight_blocks *wb, size_t g, size_t co, size_t u, size_t t) {
  const size_t c_in = (size_t)(wb->c_in / wb->groups), c_out = (size_t)(wb->c_out / wb->groups);
  const size_t k = (size_t)wb->k, split = wb->split > 1 ? (size_t)wb->split : 1;
  const size_t phases = (size_t)cp_split_phases(wb->k, wb->split);
  const size_t kk = (size_t)cp_split_k(wb->k, wb->split);
  if (co >= c_out || u >= c_in * phases * phases) return SIZE_MAX;
  const size_t c = u / (phases * phases), r = u / phases % phases, p = u % phases;
  const size_t i = r + split * (t / kk), j = p + split * (t % kk);
  if (i >= k || j >= k) return SIZE_MAX;
  return (((g * c_out + co) * c_in + c) * k + i) * k + j;
}

void cp_pack_weights_blocked(convpool_dtype dtype, const void *weights, const cp_weight_blocks *wb,
                             float *packed) {
  const size_t kk = (size_t)cp_split_k(wb->k, wb->split), taps = kk * kk;
  const size_t main_mr = wb->mr, c_out = (size_t)(wb->c_out / wb->groups);
  const size_t per_group = (c_out + main_mr - 1) / main_mr;
  const size_t blocks = (size_t)wb->groups * per_group;
  const size_t cpack = wb->cpack, steps = cp_weight_group_steps(wb);
  const uint16_t *w16 = weights;
  for (size_t cb = 0; cb < blocks; cb++) {
    const size_t g = cb / per_group, b = cb % per_group;
    const size_t mr = b + 1 == per_group ? wb->mr_tail : main_mr;
    float *block = packed + cb * main_mr * steps * taps;
    uint32_t *pairs = (uint32_t *)block;
    for (size_t s = 0; s < steps; s++)
      for (size_t t = 0; t < taps; t++)
        for (size_t m = 0; m < mr; m++) {
          const size_t co = b * main_mr + m, to = (s * taps + t) * mr + m;
          if (cpack == 1) {
            const size_t at = cp_weight_index(wb, g, co, s, t);
            block[to] = at != SIZE_MAX ? cp_load_elem(dtype, weights, at) : 0.0f;
            continue;
          }
          const size_t lo = cp_weight_index(wb, g, co, 2 * s, t);
          const size_t hi = cp_weight_index(wb, g, co, 2 * s + 1, t);
          pairs[to] = (lo != SIZE_MAX ? (uint32_t)w16[lo] : 0u) |
                      (hi != SIZE_MAX ? (uint32_t)w16[hi] << 16 : 0u);
        }
  }
}

/* What half h of a channel step reads: an input channel's plane (NULL past
   the group's channels), its phase row r, and the input column of panel
   column 0 of a row whose first input column is ix0 (+ the phase column). */
typedef struct cp_panel_channel {
  const unsigned char *plane;
  int64_t r, p;
} cp_panel_channel;

static cp_panel_channel cp_panel_channel_of(const cp_panel_src *src, size_t t, size_t h) {
  cp_panel_channel ch = {NULL, 0, 0};
  const size_t phases = (size_t)src->phases, c_in = (size_t)(src->c_in / src->groups);
  const size_t g = t / src->group_steps, u = t % src->group_steps * src->cpack + h;
  if (u >= c_in * phases * phases) return ch;
  const size_t c = g * c_in + u / (phases * phases);
  ch.plane = src->image + c * (size_t)src->height * (size_t)src->width * src->elem_size;
  ch.r = (int64_t)(u / phases % phases), ch.p = (int64_t)(u % phases);
  return ch;
}

/* The input row of panel row y (NULL outside the input or the channels). */
static const unsigned char *cp_panel_row_of(const cp_panel_src *src, const cp_panel_channel *ch,
                                            int64_t iy0, size_t y) {
  const int64_t iy = iy0 + (int64_t)y * src->split + ch->r;
  if (ch->plane == NULL || iy < 0 || iy >= src->height) return NULL;
  return ch->plane + (size_t)iy * (size_t)src->width * src->elem_size;
}

/* The panel columns [*a, *e) of `cols` whose input column ix + x*split lies
   inside the input row. */
static void cp_panel_columns(const cp_panel_src *src, int64_t ix, size_t cols, size_t *a,
                             size_t *e) {
  const int64_t s = src->split, w = src->width;
  int64_t first, end;
  if (s == 1) {
    first = ix >= 0 ? 0 : -ix, end = w - ix;
  } else {
    first = ix >= 0 ? 0 : (-ix + s - 1) / s;
    end = ix >= w ? 0 : (w - ix + s - 1) / s;
  }
  *a = first < (int64_t)cols ? (size_t)first : cols;
  *e = end < 0 ? 0 : end < (int64_t)cols ? (size_t)end : cols;
  if (*e < *a) *e = *a;
}

/* Columns [a, e) of a panel row of fp32 from input row `row` (columns ix +
   x*split), widened from 16 bits where the src is. */
static void cp_pack_columns(const cp_panel_src *src, const unsigned char *row, int64_t ix, size_t a,
                            size_t e, float *to) {
  const size_t split = (size_t)src->split, n = e - a;
  const size_t from = (size_t)(ix + (int64_t)(a * split));
  if (split == 1) {
    if (src->widen != NULL)
      src->widen((const uint16_t *)row + from, to + a, n);
    else
      memcpy(to + a, (const float *)row + from, n * sizeof(float));
    return;
  }
  if (src->widen == NULL) {
    const float *f = (const float *)row + from;
    for (size_t x = 0; x < n; x++) to[a + x] = f[x * split];
    return;
  }
  const uint16_t *h = (const uint16_t *)row + from;
  uint16_t chunk[64];
  for (size_t x = 0; x < n; x += 64) {
    const size_t m = n - x < 64 ? n - x : 64;
    for (size_t i = 0; i < m; i++) chunk[i] = h[(x + i) * split];
    src->widen(chunk, to + a + x, m);
  }
}

/* One panel row: row y of the channel step read by lo (and hi, the high
   halves of bf16 pairs), input columns from ix0 (split apart), zero outside
   the input (conv padding) and past cols up to ld. */
static void cp_pack_panel_row(const cp_panel_src *src, const cp_panel_channel *lo_ch,
                              const cp_panel_channel *hi_ch, int64_t iy0, size_t y, int64_t ix0,
                              size_t cols, size_t ld, float *to) {
  const unsigned char *lo = cp_panel_row_of(src, lo_ch, iy0, y);
  const unsigned char *hi = src->cpack == 2 ? cp_panel_row_of(src, hi_ch, iy0, y) : NULL;
  const int64_t ix = ix0 + lo_ch->p, ix_hi = ix0 + hi_ch->p;
  size_t a = 0, e = 0, a_hi = 0, e_hi = 0;
  if (lo != NULL) cp_panel_columns(src, ix, cols, &a, &e);
  if (hi != NULL) cp_panel_columns(src, ix_hi, cols, &a_hi, &e_hi);
  if (src->cpack == 2 && (hi != NULL || lo != NULL)) { /* bf16 channel pairs, interleaved */
    const uint16_t *l16 = (const uint16_t *)lo, *h16 = (const uint16_t *)hi;
    const size_t split = (size_t)src->split;
    uint32_t *t32 = (uint32_t *)to;
    if (lo != NULL && split == 1 && (hi == NULL || (a_hi == a && e_hi == e))) { /* as one run */
      memset(t32, 0, a * sizeof(uint32_t));
      l16 += ix, h16 = h16 != NULL ? h16 + ix_hi : NULL;
      for (size_t x = a; x < e; x++) t32[x] = l16[x] | (h16 ? (uint32_t)h16[x] << 16 : 0u);
      memset(t32 + e, 0, (ld - e) * sizeof(uint32_t));
      return;
    }
    for (size_t x = 0; x < ld; x++) {
      const uint32_t l = x >= a && x < e ? l16[ix + (int64_t)(x * split)] : 0u;
      const uint32_t u = x >= a_hi && x < e_hi ? h16[ix_hi + (int64_t)(x * split)] : 0u;
      t32[x] = l | u << 16;
    }
    return;
  }
  if (a >= e) {
    memset(to, 0, ld * sizeof(float));
    return;
  }
  memset(to, 0, a * sizeof(float));
  cp_pack_columns(src, lo, ix, a, e, to);
  memset(to + e, 0, (ld - e) * sizeof(float));
}

/* The rows [*y_lo, *y_hi) of `rows` panel rows from input row iy0 on that
   lie inside the input (split 1). */
static void cp_panel_rows_inside(const cp_panel_src *src, int64_t iy0, size_t rows, size_t *y_lo,
                                 size_t *y_hi) {
  const int64_t h = src->height, n = (int64_t)rows;
  *y_lo = iy0 >= 0 ? 0 : (size_t)(-iy0 < n ? -iy0 : n);
  *y_hi = iy0 >= h ? *y_lo : (size_t)(h - iy0 < n ? h - iy0 : n);
}

/* The bytes [*p, *p + span) of row y of the channel read by ch that lie
   inside the input (span 0: none), for the prefetch. A function that
   prefetched itself would have no visible effect, and the compiler drops
   calls to such functions: the caller issues the prefetches. */
static size_t cp_panel_row_span(const cp_panel_src *src, const cp_panel_channel *ch, int64_t iy0,
                                size_t y, int64_t ix0, size_t cols, const unsigned char **p) {
  const unsigned char *row = cp_panel_row_of(src, ch, iy0, y);
  const int64_t ix = ix0 + ch->p;
  size_t a, e;
  if (row == NULL) return 0;
  cp_panel_columns(src, ix, cols, &a, &e);
  if (a >= e) return 0;
  *p = row + (size_t)(ix + (int64_t)(a * (size_t)src->split)) * src->elem_size;
  return ((e - 1 - a) * (size_t)src->split + 1) * src->elem_size;
}

/* What the plain-row packers below share: the panel's columns [a, e) and
   rows [y_lo, y_hi) inside the input (inside = y_hi - y_lo rows, or 0), and
   the bytes of a row they read (span, at least 1). */
typedef struct cp_plain_rows {
  size_t a, e, y_lo, y_hi, inside, span;
} cp_plain_rows;

static cp_plain_rows cp_plain_rows_of(const cp_panel_src *src, int64_t iy0, size_t rows,
                                      int64_t ix0, size_t cols, size_t elem_size) {
  cp_plain_rows r;
  cp_panel_columns(src, ix0, cols, &r.a, &r.e);
  cp_panel_rows_inside(src, iy0, rows, &r.y_lo, &r.y_hi);
  r.inside = r.y_hi > r.y_lo ? r.y_hi - r.y_lo : 0;
  r.span = r.e > r.a ? (r.e - r.a) * elem_size : 1;
  return r;
}

/* The row `ahead` rows on from row y of a step read at `from`, in this step
   or a later one (`step` bytes apart; addresses only: they may lie past the
   tensor, which a prefetch allows), and the same row `twin` bytes on where
   twin is not 0 (a bf16 pair's high channel). */
static inline void cp_prefetch_row_ahead(const void *from, const cp_plain_rows *r, size_t y,
                                         size_t ahead, size_t step, size_t row, size_t twin) {
  const size_t on = y + ahead;
  const ptrdiff_t d = (ptrdiff_t)(on / r->inside * step) +
                      ((ptrdiff_t)(on % r->inside) - (ptrdiff_t)y) * (ptrdiff_t)row;
  const uintptr_t p = (uintptr_t)from + (uintptr_t)d;
  for (size_t o = 0; o < r->span; o += CP_CACHE_LINE) {
    __builtin_prefetch((const void *)(p + o), 0, 3);
    if (twin != 0) __builtin_prefetch((const void *)(p + twin + o), 0, 3);
  }
  __builtin_prefetch((const void *)(p + r->span - 1), 0, 3);
  if (twin != 0) __builtin_prefetch((const void *)(p + twin + r->span - 1), 0, 3);
}

/*
 * The panel of a float32 source without a split: every channel step is one
 * channel, whose rows share the same columns inside the input, so the row
 * copy is a plain loop (the rows of deep layers are a few floats: a call per
 * row cost more than the copy). Rows ahead_rows ahead are prefetched, as in
 * the general packer.
 */
static void cp_pack_fp32_steps(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                               size_t cols, size_t step0, size_t step1,
                               const cp_panel_layout *layout, float *panel) {
  const size_t ld = layout->ld, cs = layout->cs, w = (size_t)src->width;
  const size_t plane = (size_t)src->height * w, c_in = (size_t)(src->c_in / src->groups);
  const cp_plain_rows r = cp_plain_rows_of(src, iy0, rows, ix0, cols, sizeof(float));
  const size_t a = r.a, e = r.e, ahead = src->ahead_rows;
  const float *image = (const float *)(const void *)src->image;
  for (size_t t = step0; t < step1; t++) {
    float *to = panel + t * cs;
    const size_t g = t / src->group_steps, u = t % src->group_steps;
    if (u >= c_in || a >= e || r.inside == 0) {
      memset(to, 0, cs * sizeof(float));
      continue;
    }
    const float *from = image + (g * c_in + u) * plane + (size_t)(iy0 + (int64_t)r.y_lo) * w;
    from += (size_t)(ix0 + (int64_t)a);
    memset(to, 0, r.y_lo * ld * sizeof(float));
    to += r.y_lo * ld;
    for (size_t y = 0; y < r.inside; y++, to += ld, from += w) {
      if (ahead > 0) /* the next channel's rows follow this one's */
        cp_prefetch_row_ahead(from, &r, y, ahead, plane * sizeof(float), w * sizeof(float), 0);
      for (size_t x = 0; x < a; x++) to[x] = 0.0f;
      for (size_t x = a; x < e; x++) to[x] = from[x - a];
      for (size_t x = e; x < ld; x++) to[x] = 0.0f;
    }
    memset(to, 0, (cs - r.y_hi * ld) * sizeof(float));
  }
}

/*
 * The panel of bf16 channel pairs without a split: step t interleaves the
 * group's channels 2u (low halves) and 2u + 1 (high halves, zero past the
 * group's channels), whose rows share the same columns inside the input, so
 * the row copy is one plain loop, as for float32 (through the general packer
 * each row's lookups cost more than its few elements: 1024 -> 256 channels
 * 1x1 at 14x14 spent 58% of its thread time packing). Rows ahead_rows ahead
 * are prefetched, both halves.
 */
static void cp_pack_pairs_steps(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                                size_t cols, size_t step0, size_t step1,
                                const cp_panel_layout *layout, float *panel) {
  const size_t ld = layout->ld, cs = layout->cs, w = (size_t)src->width;
  const size_t plane = (size_t)src->height * w, c_in = (size_t)(src->c_in / src->groups);
  const cp_plain_rows r = cp_plain_rows_of(src, iy0, rows, ix0, cols, sizeof(uint16_t));
  const size_t a = r.a, e = r.e, ahead = src->ahead_rows;
  const uint16_t *image = (const uint16_t *)(const void *)src->image;
  for (size_t t = step0; t < step1; t++) {
    uint32_t *to = (uint32_t *)(void *)(panel + t * cs);
    const size_t g = t / src->group_steps, u = t % src->group_steps * 2;
    if (u >= c_in || a >= e || r.inside == 0) {
      memset(to, 0, cs * sizeof(uint32_t));
      continue;
    }
    const uint16_t *lo = image + (g * c_in + u) * plane + (size_t)(iy0 + (int64_t)r.y_lo) * w;
    lo += (size_t)(ix0 + (int64_t)a);
    const int pair = u + 1 < c_in; /* else the high halves are zero */
    memset(to, 0, r.y_lo * ld * sizeof(uint32_t));
    to += r.y_lo * ld;
    for (size_t y = 0; y < r.inside; y++, to += ld, lo += w) {
      if (ahead > 0) /* both halves; the next step's pair two planes on */
        cp_prefetch_row_ahead(lo, &r, y, ahead, 2 * plane * sizeof(uint16_t), w * sizeof(uint16_t),
                              plane * sizeof(uint16_t));
      for (size_t x = 0; x < a; x++) to[x] = 0u;
      if (pair) {
        const uint16_t *hi = lo + plane;
        for (size_t x = a; x < e; x++) to[x] = (uint32_t)lo[x - a] | (uint32_t)hi[x - a] << 16;
      } else {
        for (size_t x = a; x < e; x++) to[x] = lo[x - a];
      }
      for (size_t x = e; x < ld; x++) to[x] = 0u;
    }
    memset(to, 0, (cs - r.y_hi * ld) * sizeof(uint32_t));
  }
}

/* Where channel step t of a float32 panel with a split stride reads: panel
   row y in [y_lo, y_hi) is row0 + (y - y_lo) * row_step, its columns [a, e)
   at + (x - a) * split; none (y_lo = y_hi) past the group's channels or
   outside the input. */
typedef struct cp_split_step {
  const float *row0;
  size_t row_step, a, e;
  int64_t y_lo, y_hi;
} cp_split_step;

static cp_split_step cp_split_step_of(const cp_panel_src *src, int64_t iy0, size_t rows,
                                      int64_t ix0, size_t cols, size_t t) {
  cp_split_step st = {NULL, 0, 0, 0, 0, 0};
  const size_t w = (size_t)src->width, c_in = (size_t)(src->c_in / src->groups);
  const int64_t split = src->split, phases = src->phases, h = src->height;
  const size_t pp = (size_t)(phases * phases);
  const size_t g = t / src->group_steps, u = t % src->group_steps;
  if (u >= c_in * pp) return st;
  const int64_t r = (int64_t)(u / (size_t)phases % (size_t)phases);
  const int64_t p = (int64_t)(u % (size_t)phases);
  cp_panel_columns(src, ix0 + p, cols, &st.a, &st.e);
  /* rows read input rows iy0 + r + y*split; those inside the input */
  const int64_t first = iy0 + r;
  st.y_lo = first >= 0 ? 0 : (-first + split - 1) / split;
  st.y_hi = first < h ? (h - 1 - first) / split + 1 : 0;
  if (st.y_lo > (int64_t)rows) st.y_lo = (int64_t)rows;
  if (st.y_hi > (int64_t)rows) st.y_hi = (int64_t)rows;
  if (st.y_hi <= st.y_lo || st.a >= st.e) {
    st.y_hi = st.y_lo;
    return st;
  }
  st.row_step = (size_t)split * w;
  st.row0 = (const float *)(const void *)src->image +
            ((g * c_in + u / pp) * (size_t)h + (size_t)(first + st.y_lo * split)) * w +
            (size_t)(ix0 + p + (int64_t)(st.a * (size_t)split));
  return st;
}

/* A position in the copy's order of rows (the rows that read the input, step
   after step), for the prefetch. */
typedef struct cp_split_cursor {
  size_t t;
  int64_t y;
  cp_split_step st;
} cp_split_cursor;

/* Move the cursor to the next row that reads the input (t = step1 past the last). */
static void cp_split_advance(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                             size_t cols, size_t step1, cp_split_cursor *c) {
  while (c->t < step1 && ++c->y >= c->st.y_hi) {
    if (++c->t >= step1) return;
    c->st = cp_split_step_of(src, iy0, rows, ix0, cols, c->t);
    c->y = c->st.y_lo - 1;
  }
}

/*
 * The panel of a float32 source with a split stride: channel step t is phase
 * (r, p) of an input channel, whose panel row y is input row iy0 + y*split +
 * r at columns ix0 + p + x*split. Where each step reads is found once; the
 * rows are plain strided loops, and the row ahead_rows rows on in the copy
 * (in this step or a later one) is prefetched, as in the general packer.
 */
static void cp_pack_fp32_split_steps(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                                     size_t cols, size_t step0, size_t step1,
                                     const cp_panel_layout *layout, float *panel) {
  const size_t ld = layout->ld, cs = layout->cs, split = (size_t)src->split;
  cp_split_cursor ahead = {step0, 0, cp_split_step_of(src, iy0, rows, ix0, cols, step0)};
  ahead.y = ahead.st.y_lo - 1;
  for (size_t n = 0; n <= src->ahead_rows; n++)
    cp_split_advance(src, iy0, rows, ix0, cols, step1, &ahead);
  for (size_t t = step0; t < step1; t++) {
    float *to = panel + t * cs;
    const cp_split_step st = cp_split_step_of(src, iy0, rows, ix0, cols, t);
    memset(to, 0, (size_t)st.y_lo * ld * sizeof(float));
    for (int64_t y = st.y_lo; y < st.y_hi; y++) {
      if (src->ahead_rows > 0 && ahead.t < step1) {
        const char *next =
            (const char *)(ahead.st.row0 + (size_t)(ahead.y - ahead.st.y_lo) * ahead.st.row_step);
        const size_t span = ((ahead.st.e - ahead.st.a - 1) * split + 1) * sizeof(float);
        for (size_t o = 0; o < span; o += CP_CACHE_LINE) __builtin_prefetch(next + o, 0, 3);
        __builtin_prefetch(next + span - 1, 0, 3);
        cp_split_advance(src, iy0, rows, ix0, cols, step1, &ahead);
      }
      float *row = to + (size_t)y * ld;
      const float *from = st.row0 + (size_t)(y - st.y_lo) * st.row_step;
      for (size_t x = 0; x < st.a; x++) row[x] = 0.0f;
      for (size_t x = st.a; x < st.e; x++) row[x] = from[(x - st.a) * split];
      for (size_t x = st.e; x < ld; x++) row[x] = 0.0f;
    }
    memset(to + (size_t)st.y_hi * ld, 0, (cs - (size_t)st.y_hi * ld) * sizeof(float));
  }
}

void cp_pack_panel_steps(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0,
                         size_t cols, size_t step0, size_t step1, const cp_panel_layout *layout,
                         float *panel) {
  const size_t ld = layout->ld, cs = layout->cs;
  if (src->cpack == 1 && src->widen == NULL && src->elem_size == 4) {
    if (src->split == 1)
      cp_pack_fp32_steps(src, iy0, rows, ix0, cols, step0, step1, layout, panel);
    else
      cp_pack_fp32_split_steps(src, iy0, rows, ix0, cols, step0, step1, layout, panel);
    return;
  }
  if (src->cpack == 2 && src->split == 1) {
    cp_pack_pairs_steps(src, iy0, rows, ix0, cols, step0, step1, layout, panel);
    return;
  }
  cp_panel_channel ahead_ch[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
  size_t ahead_step = SIZE_MAX;
  for (size_t s = step0; s < step1; s++) {
    float *to = panel + s * cs;
    const cp_panel_channel lo = cp_panel_channel_of(src, s, 0);
    const cp_panel_channel hi = src->cpack == 2 ? cp_panel_channel_of(src, s, 1) : lo;
    for (size_t y = 0; y < rows; y++, to += ld) {
      /* The rows are short and far apart, so the hardware prefetchers do not
         follow them: ask for the row ahead_rows rows ahead (measured: the
         pack of the headline case goes from ~10 ms to ~6.5 ms on one core). */
      const size_t ahead = (s - step0) * rows + y + src->ahead_rows;
      const size_t t = step0 + ahead / rows;
      if (t < step1) {
        if (t != ahead_step)
          for (size_t h = 0; h < src->cpack; h++) ahead_ch[h] = cp_panel_channel_of(src, t, h);
        ahead_step = t;
        for (size_t h = 0; h < src->cpack; h++) {
          const unsigned char *p = NULL;
          const size_t span =
              cp_panel_row_span(src, &ahead_ch[h], iy0, ahead % rows, ix0, cols, &p);
          for (size_t o = 0; o < span; o += CP_CACHE_LINE) __builtin_prefetch(p + o, 0, 3);
          if (span > 0) __builtin_prefetch(p + span - 1, 0, 3);
        }
      }
      cp_pack_panel_row(src, &lo, &hi, iy0, y, ix0, cols, ld, to);
    }
    memset(to, 0, (cs - rows * ld) * sizeof(float));
  }
}

void cp_pack_panel_slot(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                        size_t step0, size_t step1, const cp_panel_layout *layout, float *panel) {
  if (src->cpack == 1 && src->widen == NULL && src->elem_size == 4 && src->split == 1 &&
      src->groups == 1) { /* float32 channels as they are: the plain loop */
    const size_t w = (size_t)src->width, plane = (size_t)src->height * w;
    size_t a, e;
    cp_panel_columns(src, ix0, cols, &a, &e);
    size_t y_lo, y_hi;
    cp_panel_rows_inside(src, iy0, rows, &y_lo, &y_hi);
    const float *image = (const float *)(const void *)src->image;
    for (size_t s = step0; s < step1; s++) {
      float *to = panel + s * layout->cs;
      const float *from =
          image + s * plane + (size_t)(iy0 + (int64_t)y_lo) * w + (size_t)(ix0 + (int64_t)a);
      for (size_t y = 0; y < rows; y++, to += layout->ld) {
        if (y < y_lo || y >= y_hi || a >= e) {
          memset(to, 0, cols * sizeof(float));
          continue;
        }
        for (size_t x = 0; x < a; x++) to[x] = 0.0f;
        for (size_t x = a; x < e; x++) to[x] = from[x - a];
        for (size_t x = e; x < cols; x++) to[x] = 0.0f;
        from += w;
      }
    }
    return;
  }
  for (size_t s = step0; s < step1; s++) {
    const cp_panel_channel lo = cp_panel_channel_of(src, s, 0);
    const cp_panel_channel hi = src->cpack == 2 ? cp_panel_channel_of(src, s, 1) : lo;
    float *to = panel + s * layout->cs;
    for (size_t y = 0; y < rows; y++, to += layout->ld)
      cp_pack_panel_row(src, &lo, &hi, iy0, y, ix0, cols, cols, to);
  }
}

void cp_pack_panel_slack(const cp_panel_src *src, const cp_panel_layout *layout, float *panel) {
  const size_t end = (size_t)src->groups * src->group_steps * layout->cs;
  memset(panel + end, 0, (layout->floats - end) * sizeof(float));
}

int cp_has_nonfinite(const float *panel, size_t n, size_t cpack) {
  const uint32_t *u = (const uint32_t *)(const void *)panel;
  /* exponent fields all ones: fp32, or the two bf16 halves */
  const uint32_t mask = cpack == 2 ? 0x7f807f80u : 0x7f800000u;
  uint32_t any = 0;
  for (size_t i = 0; i < n; i++) {
    const uint32_t e = u[i] & mask;
    any |= (e & 0xffff0000u) == (mask & 0xffff0000u) || (cpack == 2 && (e & 0xffffu) == 0x7f80u);
  }
  return any != 0;
}

void cp_pack_panel(const cp_panel_src *src, int64_t iy0, size_t rows, int64_t ix0, size_t cols,
                   const cp_panel_layout *layout, float *panel) {
  cp_pack_panel_steps(src, iy0, rows, ix0, cols, 0, (size_t)src->groups * src->group_steps, layout,
                      panel);
  cp_pack_panel_slack(src, layout, panel);
}
