/*
 * Winograd F(4x4, 3x3) (see winograd/winograd.h): per item, the input window
 * is packed into an fp32 panel (as for shift-reduce) and transformed into V,
 * 36 x (input channels x tiles); per pass over a few channel blocks, the
 * shift-reduce kernels with k = 1 multiply V by the transformed weights U of
 * each of the 36 points into M; per channel block, the output transform
 * writes the conv output into the tile buffer for the epilogue.
 *
 * Tiles lie on one grid over the whole conv output (items start at conv
 * rows and columns that are multiples of 4), so every output is computed
 * from the same tile whatever the items and threads. A tile whose 6x6 input
 * holds a NaN or an Inf would spread it to outputs that do not see it, so
 * such tiles are recomputed with the shift-reduce kernel (weights kept in
 * its blocked layout too): their outputs are bit for bit shift-reduce's.
 */
#include <stdio.h>
#include <string.h>

#include "../pack.h"
#include "../winograd/winograd.h"
#include "algo.h"

static int64_t cp_gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int64_t cp_lcm(int64_t a, int64_t b) { return a / cp_gcd(a, b) * b; }

static const char *cp_wino_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                    size_t capacity) {
  (void)cpu;
  if (layer->k != 3) {
    snprintf(why, capacity, "Winograd F(4x4,3x3) computes 3x3 filters only (k = %lld)",
             (long long)layer->k);
    return why;
  }
  return NULL;
}

/* Floats of the transformed weights U (after the blocked ones). */
static size_t cp_wino_u_floats(int64_t c_out, int64_t c_in, const cp_sr_ukernel *uk,
                               const cp_sr_ukernel *tail) {
  return cp_wino_weight_floats(c_out, c_in, uk->mr, tail->mr);
}

/* fp32 kernels for every dtype: the transforms and the sums are fp32. */
static convpool_status cp_wino_setup(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *s) {
  s->uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, cpu->isa);
  if (s->uk == NULL)
    return cp_fail(CONVPOOL_UNSUPPORTED, "no float32 kernel for isa %s", cp_isa_name(cpu->isa));
  s->uk_tail = cp_sr_ukernel_tail(s->uk, (int)(layer->c_out % s->uk->mr));
  const size_t uf = cp_wino_u_floats(layer->c_out, layer->c_in, s->uk, s->uk_tail);
  size_t ub;
  if (!cp_size_weights_blocked(layer, s) || uf == 0 || !cp_mul(uf, sizeof(float), &ub) ||
      !cp_add(cp_round_up(s->packed_weight_bytes, CP_CACHE_LINE), ub, &s->packed_weight_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, 3, 3] have a byte count that overflows",
                   (long long)layer->c_out, (long long)layer->c_in);
  return CONVPOOL_SUCCESS;
}

/* Blocked weights for the non-finite tiles first, then U. */
static void cp_wino_pack_weights_all(const cp_layer *layer, const cp_algo_setup *s,
                                     const void *weights, float *packed) {
  const size_t uf = cp_wino_u_floats(layer->c_out, layer->c_in, s->uk, s->uk_tail);
  cp_pack_weights_blocked(layer, s, weights, packed);
  cp_wino_pack_weights(layer->dtype, weights, layer->c_out, layer->c_in, s->uk->mr,
                       s->uk_tail->mr, packed + s->packed_weight_bytes / sizeof(float) - uf);
}

/* The tiles of an item of g pooled rows x cw conv columns. */
typedef struct cp_wino_tiles {
  size_t th, tw, tw_pad; /* tile rows, tiles per row, tiles per row rounded up to 4 */
  size_t tiles;          /* th * tw_pad: kernel lanes used */
  size_t nblk, t_alloc;  /* blocks of NR lanes, and their lanes */
} cp_wino_tiles;

static cp_wino_tiles cp_wino_tiles_of(const cp_plan *pl, int64_t g, int64_t cw) {
  cp_wino_tiles t;
  const size_t nr = (size_t)pl->uk->nr;
  t.th = ((size_t)g * (size_t)pl->pool + 3) / 4;
  t.tw = ((size_t)cw + 3) / 4;
  t.tw_pad = cp_round_up(t.tw, 4);
  t.tiles = t.th * t.tw_pad;
  t.nblk = (t.tiles + nr - 1) / nr;
  t.t_alloc = t.nblk * nr;
  return t;
}

/* Channel blocks multiplied per pass over V: as many as M's budget holds. */
static size_t cp_wino_pass(const cp_plan *pl, size_t t_alloc) {
  const size_t per = CP_WINO_POINTS * (size_t)pl->uk->mr * t_alloc * sizeof(float);
  size_t pass = ((size_t)pl->cfg->wino_m_kib << 10) / per;
  if (pass > (size_t)pl->co_blocks) pass = (size_t)pl->co_blocks;
  return pass > 0 ? pass : 1;
}

/* Floats of V for an item's tiles. */
static int cp_wino_v_floats(const cp_plan *pl, const cp_wino_tiles *t, size_t *n) {
  const size_t vs = cp_wino_v_stride((size_t)pl->c_in, (size_t)pl->uk->nr);
  return cp_mul(t->nblk, CP_WINO_POINTS, n) && cp_mul(*n, vs, n);
}

/*
 * Scratch of an item: panel = [input panel][V][tile flags]; buf = [conv
 * tiles of MR channels][M of one pass][one shift-reduce register tile].
 */
static int cp_wino_geometry(cp_plan *pl, int64_t g, int64_t cw) {
  const cp_wino_tiles t = cp_wino_tiles_of(pl, g, cw);
  const size_t nr = (size_t)pl->uk->nr, mr = (size_t)pl->uk->mr, line = CP_CACHE_LINE / 4;
  const size_t ld = 4 * t.tw_pad + 4, rows = 4 * t.th + 2;
  size_t cs, raw, v, flags, n, conv, m;
  if (!cp_mul(rows, ld, &cs)) return 0;
  cs = cp_round_up(cs, line);
  if ((cs / line) % 2 == 0) cs += line; /* spread the channels over the L1 sets */
  /* slack: the shift-reduce kernel of a non-finite tile reads NR + 2 past it */
  if (!cp_mul((size_t)pl->c_in, cs, &raw) || !cp_add(raw, 2 * nr + 4, &raw)) return 0;
  raw = cp_round_up(raw, line);
  if (!cp_wino_v_floats(pl, &t, &v)) return 0;
  flags = cp_round_up(t.tiles, CP_CACHE_LINE) / sizeof(float);
  if (!cp_add(raw, v, &n) || !cp_add(n, flags, &n) || !cp_mul(n, sizeof(float), &pl->panel_bytes))
    return 0;
  pl->group = g, pl->col_block = cw;
  pl->panel_rows = g * pl->pool + 2;
  pl->panel_ld = ld, pl->panel_cs = cs;
  pl->panel_floats = raw; /* what the packer fills (and zeroes) */
  pl->flat = 0;
  pl->tiles = t.tiles;
  pl->buf_row_ld = 4 * t.tw_pad;
  pl->buf_cols = 4 * t.th * pl->buf_row_ld;
  if (!cp_mul(mr, pl->buf_cols, &conv) ||
      !cp_mul(cp_wino_pass(pl, t.t_alloc) * CP_WINO_POINTS * mr, t.t_alloc, &m) ||
      !cp_add(cp_round_up(conv, line), m, &n) || !cp_add(n, mr * nr, &n) ||
      !cp_mul(n, sizeof(float), &pl->buf_bytes))
    return 0;
  return 1;
}

/* Modelled cost per used conv output, in kernel lanes: the multiply's lanes
   (padding lanes included), the weights streamed once per item, the copy. */
static double cp_wino_cost(const cp_plan *pl) {
  const cp_wino_tiles t = cp_wino_tiles_of(pl, pl->group, pl->col_block);
  const double co = (double)((pl->co_blocks - 1) * pl->uk->mr + pl->uk_tail->mr);
  const double per_point = CP_WINO_POINTS * (double)pl->c_in * co;
  const double lanes = (double)t.t_alloc * per_point;
  const double weights = pl->cfg->wino_u_cost * per_point;
  const double copy = pl->cfg->copy_cost * (double)pl->c_in * (double)pl->panel_rows *
                      (double)(pl->col_block + 2);
  return (lanes + weights + copy) / ((double)pl->group * (double)pl->pool * (double)pl->col_block);
}

/*
 * Items: pooled rows in multiples of lcm(4, pool) / pool and column blocks
 * in multiples of lcm(16, pool) (whole tiles and whole loads of four tiles
 * on the global grid), the cheapest by the cost model with V within its
 * budget; fewer rows per item while the threads lack items and the items
 * keep four blocks of NR lanes (then the plan makes channel groups).
 */
static convpool_status cp_wino_choose_items(cp_plan *pl, int64_t forced) {
  const int64_t unit = cp_lcm(4, pl->pool) / pl->pool, col_step = cp_lcm(16, pl->pool);
  const size_t v_budget = (size_t)pl->cfg->wino_v_kib << 10, nr = (size_t)pl->uk->nr;
  if (forced > pl->ph)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %lld exceeds the %lld pooled rows",
                   (long long)forced, (long long)pl->ph);
  int64_t fixed = 0;
  if (forced > 0) { /* whole tiles: round up to the grid */
    fixed = (forced + unit - 1) / unit * unit;
    if (fixed > pl->ph) fixed = pl->ph;
  }
  double best_cost = 0;
  int64_t best_g = 0, best_cw = 0;
  for (int64_t m = 0; m <= pl->cfg->max_col_multiples; m++) {
    const int64_t cw = m == 0 ? pl->ow_used : m * col_step;
    if (m > 0 && cw >= pl->ow_used) break;
    for (int64_t g = fixed > 0 ? fixed : (unit < pl->ph ? unit : pl->ph);; g += unit) {
      if (g > pl->ph) g = pl->ph;
      if (!cp_wino_geometry(pl, g, cw)) break;
      const cp_wino_tiles t = cp_wino_tiles_of(pl, g, cw);
      size_t v;
      if (!cp_wino_v_floats(pl, &t, &v)) break;
      const int first = fixed > 0 || g <= unit;
      if (!first && v * sizeof(float) > v_budget) break;
      const double cost = cp_wino_cost(pl);
      if (best_g == 0 || cost < best_cost) best_cost = cost, best_g = g, best_cw = cw;
      if (fixed > 0 || g >= pl->ph) break;
    }
  }
  if (best_g == 0 || !cp_wino_geometry(pl, best_g, best_cw))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                   (long long)pl->c_in);
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  pl->col_blocks = (pl->ow_used + pl->col_block - 1) / pl->col_block;
  for (;;) {
    pl->row_groups = (pl->ph + pl->group - 1) / pl->group;
    if (fixed > 0 || pl->group <= unit || pl->batch * pl->row_groups * pl->col_blocks >= target)
      break;
    const int64_t g = pl->group - unit;
    if (cp_wino_tiles_of(pl, g, pl->col_block).tiles < 4 * nr) break;
    if (!cp_wino_geometry(pl, g, pl->col_block))
      return cp_fail(CONVPOOL_INTERNAL_ERROR, "panel geometry failed for %lld rows", (long long)g);
  }
  return CONVPOOL_SUCCESS;
}

/* V and the tile flags behind the input panel. */
static float *cp_wino_v(const cp_plan *pl, const float *panel) {
  return (float *)panel + pl->panel_floats;
}

static unsigned char *cp_wino_flags(const cp_plan *pl, const float *panel) {
  const cp_wino_tiles t = cp_wino_tiles_of(pl, pl->group, pl->col_block);
  size_t v = 0;
  cp_wino_v_floats(pl, &t, &v);
  return (unsigned char *)(cp_wino_v(pl, panel) + v);
}

static void cp_wino_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  const cp_wino_tiles t = cp_wino_tiles_of(pl, it->g, it->cw);
  cp_pack_panel(r, it->b, (size_t)(it->g0 * pl->pool), (size_t)(it->g * pl->pool) + 2,
                (size_t)it->col0, (size_t)it->cw + 2, panel);
  const cp_wino_transforms *tf = cp_wino_transforms_select(pl->uk->isa);
  const size_t nr = (size_t)pl->uk->nr;
  const size_t bad = tf->input(panel, pl->panel_cs, pl->panel_ld, (size_t)pl->c_in, t.tiles,
                               t.tw_pad, nr, cp_wino_v(pl, panel),
                               cp_wino_v_stride((size_t)pl->c_in, nr), cp_wino_flags(pl, panel));
  it->flags = bad != 0;
}

/* Shift-reduce over the tiles flagged non-finite, into the tile buffer. */
static void cp_wino_direct_tiles(const cp_run *r, const cp_wino_tiles *t, const float *panel,
                                 int64_t cb, size_t channels, float *buf, float *tile) {
  const cp_plan *pl = r->pl;
  const unsigned char *flags = cp_wino_flags(pl, panel);
  const float *w = r->packed + (size_t)cb * (pl->weight_block_bytes / sizeof(float));
  const cp_sr_ukernel_fn kernel = cb + 1 == pl->co_blocks ? pl->uk_tail->fn : pl->uk->fn;
  const size_t nr = (size_t)pl->uk->nr, ld = pl->panel_ld;
  for (size_t tr = 0; tr < t->th; tr++)
    for (size_t tc = 0; tc < t->tw_pad; tc++) {
      if (!flags[tr * t->tw_pad + tc]) continue;
      const size_t x_begin = 4 * tc;
      while (tc < t->tw_pad && flags[tr * t->tw_pad + tc]) tc++;
      const size_t x_end = 4 * tc; /* a run of flagged tiles */
      for (size_t y = 4 * tr; y < 4 * tr + 4; y++)
        for (size_t x = x_begin; x < x_end; x += nr) {
          kernel(panel + y * ld + x, pl->panel_cs, ld, (size_t)pl->c_in, 3, w, tile, nr);
          const size_t n = x_end - x < nr ? x_end - x : nr;
          for (size_t m = 0; m < channels; m++)
            memcpy(buf + m * pl->buf_cols + y * pl->buf_row_ld + x, tile + m * nr,
                   n * sizeof(float));
        }
    }
}

static void cp_wino_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                  int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_wino_tiles t = cp_wino_tiles_of(pl, it->g, it->cw);
  const cp_wino_tiles full = cp_wino_tiles_of(pl, pl->group, pl->col_block);
  const size_t mr = (size_t)pl->uk->mr, nr = (size_t)pl->uk->nr;
  const size_t pass = cp_wino_pass(pl, full.t_alloc);
  const size_t per_block = CP_WINO_POINTS * mr * t.t_alloc;
  float *m = buf + cp_round_up(mr * pl->buf_cols, CP_CACHE_LINE / sizeof(float));
  const size_t j = (size_t)(cb - it->cb0) % pass;
  if (j == 0) { /* a pass: the products of the next `pass` blocks */
    const size_t uf = cp_wino_u_floats(pl->c_out, pl->c_in, pl->uk, pl->uk_tail);
    const float *u = r->packed + pl->packed_weight_bytes / sizeof(float) - uf;
    const int64_t cb1 = cb + (int64_t)pass < it->cb1 ? cb + (int64_t)pass : it->cb1;
    cp_wino_multiply(pl->uk, pl->uk_tail, pl->co_blocks, u, uf / CP_WINO_POINTS,
                     cp_wino_v(pl, panel), cp_wino_v_stride((size_t)pl->c_in, nr),
                     (size_t)pl->c_in, t.nblk, cb, cb1, m);
  }
  const size_t channels = (size_t)pl->c_out - (size_t)cb * mr < mr ? (size_t)pl->c_out - (size_t)cb * mr : mr;
  const cp_wino_transforms *tf = cp_wino_transforms_select(pl->uk->isa);
  tf->output(m + j * per_block, t.t_alloc, mr, channels, t.tiles, t.tw_pad, buf, pl->buf_cols,
             pl->buf_row_ld);
  if (it->flags)
    cp_wino_direct_tiles(r, &t, panel, cb, channels, buf, m + pass * CP_WINO_POINTS * mr * full.t_alloc);
}

static void cp_wino_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_wino_tiles t = cp_wino_tiles_of(pl, pl->group, pl->col_block);
  size_t v = 0;
  cp_wino_v_floats(pl, &t, &v);
  snprintf(text, capacity,
           "fp32; F(4x4,3x3), points 0, +-5/8, +-3/2; %zu x %zu tiles per item (%zu lanes in "
           "%zu blocks of %d), V %zu KiB; products of %zu channel blocks per pass; transforms %s; "
           "tiles with a NaN or Inf input: shift-reduce",
           t.th, t.tw, t.tiles, t.nblk, pl->uk->nr, v * sizeof(float) >> 10,
           cp_wino_pass(pl, t.t_alloc), cp_wino_transforms_select(pl->uk->isa)->name);
}

const cp_algorithm cp_algorithm_winograd = {
    .name = "winograd",
    .id = CONVPOOL_ALGO_WINOGRAD,
    .cli = "winograd",
    .declines = cp_wino_declines,
    .setup = cp_wino_setup,
    .pack_weights = cp_wino_pack_weights_all,
    .geometry = cp_wino_geometry,
    .choose_items = cp_wino_choose_items,
    .pack_item = cp_wino_pack_item,
    .compute_block = cp_wino_compute_block,
    .describe = cp_wino_describe,
};
