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
 * holds a NaN or an Inf would spread it to outputs that do not see it, and
 * one whose input range is wide would spread its rounding errors to outputs
 * whose sum |x*w| is small; the range rule (winograd/winograd.h) flags both,
 * and such tiles are recomputed with the shift-reduce kernel (weights kept
 * in its blocked layout too): their outputs are bit for bit shift-reduce's.
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

static int64_t cp_lcm(int64_t a, int64_t b) {
  return a / cp_gcd(a, b) * b;
}

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
  const size_t blocks = ((size_t)layer->c_out + (size_t)s->uk->mr - 1) / (size_t)s->uk->mr;
  size_t ub;
  if (!cp_size_weights_blocked(layer, s) || uf == 0 || !cp_add(uf, blocks, &ub) ||
      !cp_mul(ub, sizeof(float), &ub) ||
      !cp_add(cp_round_up(s->packed_weight_bytes, CP_CACHE_LINE), ub, &s->packed_weight_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, 3, 3] have a byte count that overflows",
                   (long long)layer->c_out, (long long)layer->c_in);
  return CONVPOOL_SUCCESS;
}

/* Per channel block, after U: cp_wino_block_scale's verdict, the block's
   largest |U| (>= 0) or -1 for a block that shift-reduce computes over every
   tile (a weight that is not finite, whose transform would mix inf - inf
   into every point; a U that overflows or is too large; uneven taps; fewer
   than CP_WINO_MIN_CHANNELS input channels). */
static const float *cp_wino_block_flags(const cp_plan *pl, const float *packed) {
  return packed + pl->packed_weight_bytes / sizeof(float) - (size_t)pl->co_blocks;
}

static int cp_wino_block_direct(const cp_plan *pl, const float *packed, int64_t cb) {
  return !(cp_wino_block_flags(pl, packed)[cb] >= 0.0f);
}

/* Blocked weights for the direct path first, then U, then the blocks' verdicts. */
static void cp_wino_pack_weights_all(const cp_layer *layer, const cp_algo_setup *s,
                                     const void *weights, float *packed) {
  const size_t uf = cp_wino_u_floats(layer->c_out, layer->c_in, s->uk, s->uk_tail);
  const size_t mr = (size_t)s->uk->mr, blocks = ((size_t)layer->c_out + mr - 1) / mr;
  float *flags = packed + s->packed_weight_bytes / sizeof(float) - blocks;
  cp_pack_weights_blocked(layer, s, weights, packed);
  cp_wino_pack_weights(layer->dtype, weights, layer->c_out, layer->c_in, s->uk->mr, s->uk_tail->mr,
                       flags - uf);
  for (size_t cb = 0; cb < blocks; cb++)
    flags[cb] = cp_wino_block_scale(layer->dtype, weights, layer->c_out, layer->c_in, s->uk->mr,
                                    s->uk_tail->mr, flags - uf, cb);
}

/* The tiles of an item: those of the global grid that cover its conv region
   (rows [y0, y0 + ny), columns [x0, x0 + nx)). */
typedef struct cp_wino_tiles {
  size_t ty0, tx0;       /* first tile row and column on the grid */
  size_t dy, dx;         /* the region's origin within the first tile */
  size_t th, tw, tw_pad; /* tile rows, tiles per row, tiles per row rounded up to 4 */
  size_t tiles;          /* th * tw_pad: kernel lanes used */
  size_t nblk, t_alloc;  /* blocks of NR lanes, and their lanes */
} cp_wino_tiles;

static cp_wino_tiles cp_wino_tiles_at(const cp_plan *pl, int64_t y0, int64_t ny, int64_t x0,
                                      int64_t nx) {
  cp_wino_tiles t;
  const size_t nr = (size_t)pl->uk->nr;
  t.ty0 = (size_t)y0 / 4, t.tx0 = (size_t)x0 / 4;
  t.dy = (size_t)y0 % 4, t.dx = (size_t)x0 % 4;
  t.th = ((size_t)(y0 + ny) + 3) / 4 - t.ty0;
  t.tw = ((size_t)(x0 + nx) + 3) / 4 - t.tx0;
  t.tw_pad = cp_round_up(t.tw, 4);
  t.tiles = t.th * t.tw_pad;
  t.nblk = (t.tiles + nr - 1) / nr;
  t.t_alloc = t.nblk * nr;
  return t;
}

static cp_wino_tiles cp_wino_tiles_of_item(const cp_plan *pl, const cp_item *it) {
  return cp_wino_tiles_at(pl, it->y0, it->ny, it->x0, it->nx);
}

/* Conv span of n pooled outputs from q (as the driver clips it). */
static void cp_wino_span(int64_t q, int64_t n, int64_t pool, int64_t stride, int64_t pad,
                         int64_t conv, int64_t *lo, int64_t *count) {
  int64_t a = q * stride - pad, b = (q + n - 1) * stride - pad + pool;
  if (a < 0) a = 0;
  if (b > conv) b = conv;
  *lo = a, *count = b - a;
}

/* Tile rows of the items starting at pooled row q (and tiles per row, padded
   to 4, of those starting at pooled column q). */
static size_t cp_wino_th(const cp_plan *pl, int64_t q) {
  int64_t y0, ny;
  const int64_t n = pl->ph - q < pl->group ? pl->ph - q : pl->group;
  cp_wino_span(q, n, pl->pool, pl->stride, pl->pool_pad[CP_TOP], pl->oh, &y0, &ny);
  return ((size_t)(y0 + ny) + 3) / 4 - (size_t)y0 / 4;
}

static size_t cp_wino_tw_pad(const cp_plan *pl, int64_t q) {
  int64_t x0, nx;
  const int64_t n = pl->pw - q < pl->col_block ? pl->pw - q : pl->col_block;
  cp_wino_span(q, n, pl->pool, pl->stride, pl->pool_pad[CP_LEFT], pl->ow, &x0, &nx);
  return cp_round_up(((size_t)(x0 + nx) + 3) / 4 - (size_t)x0 / 4, 4);
}

/* The most tile rows and tiles per row of any item of the plan's size. */
static cp_wino_tiles cp_wino_tiles_max(const cp_plan *pl) {
  cp_wino_tiles t;
  const size_t nr = (size_t)pl->uk->nr;
  memset(&t, 0, sizeof t);
  for (int64_t q = 0; q < pl->ph; q += pl->group) {
    const size_t th = cp_wino_th(pl, q);
    if (th > t.th) t.th = th;
  }
  for (int64_t q = 0; q < pl->pw; q += pl->col_block) {
    const size_t tw = cp_wino_tw_pad(pl, q);
    if (tw > t.tw_pad) t.tw_pad = tw;
  }
  t.tw = t.tw_pad;
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
 * Scratch of an item of at most conv_rows x conv_cols: panel = [input panel
 * of the tiles][V][tile flags]; buf = [conv output of MR channels][M of one
 * pass][one shift-reduce register tile].
 */
static int cp_wino_geometry(cp_plan *pl, int64_t conv_rows, int64_t conv_cols) {
  pl->conv_rows = conv_rows, pl->conv_cols = conv_cols;
  const cp_wino_tiles t = cp_wino_tiles_max(pl);
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
  pl->panel_rows = (int64_t)rows;
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

/* Item of g pooled rows x n pooled columns: the plan's fields and geometry. */
static int cp_wino_item_size(cp_plan *pl, int64_t g, int64_t n) {
  int64_t lo, rows, cols;
  pl->group = g, pl->col_block = n;
  cp_wino_span(0, g < pl->ph ? g : pl->ph, pl->pool, pl->stride, 0, pl->oh, &lo, &rows);
  cp_wino_span(0, n < pl->pw ? n : pl->pw, pl->pool, pl->stride, 0, pl->ow, &lo, &cols);
  return cp_wino_geometry(pl, rows, cols);
}

/* Modelled cost per pooled output, in kernel lanes, over all items of a
   batch image: the multiply's lanes (padding lanes included), the weights
   streamed once per item, the panel copy. */
static double cp_wino_cost(const cp_plan *pl) {
  const size_t nr = (size_t)pl->uk->nr;
  const double co = (double)((pl->co_blocks - 1) * pl->uk->mr + pl->uk_tail->mr);
  const double per_point = CP_WINO_POINTS * (double)pl->c_in * co;
  double lanes = 0, copy = 0, items = 0;
  for (int64_t qy = 0; qy < pl->ph; qy += pl->group) {
    const size_t th = cp_wino_th(pl, qy);
    for (int64_t qx = 0; qx < pl->pw; qx += pl->col_block) {
      const size_t tw = cp_wino_tw_pad(pl, qx);
      lanes += (double)((th * tw + nr - 1) / nr * nr);
      copy += (double)(4 * th + 2) * (double)(4 * tw + 2);
      items += 1;
    }
  }
  return (lanes * per_point + items * pl->cfg->wino_u_cost * per_point +
          copy * pl->cfg->copy_cost * (double)pl->c_in) /
         ((double)pl->ph * (double)pl->pw);
}

/*
 * Items: pooled rows in multiples of lcm(4, stride) / stride and pooled
 * columns in multiples of lcm(16, stride) / stride (items advance by whole
 * tiles, and whole loads of four tiles, of the global grid), the cheapest by
 * the cost model with V within its budget; fewer rows per item while the
 * threads lack items and the items keep four blocks of NR lanes (then the
 * plan makes channel groups).
 */
static convpool_status cp_wino_choose_items(cp_plan *pl, int64_t forced) {
  const int64_t unit = cp_lcm(4, pl->stride) / pl->stride;
  const int64_t col_step = cp_lcm(16, pl->stride) / pl->stride;
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
  int64_t best_g = 0, best_n = 0;
  for (int64_t m = 0; m <= pl->cfg->max_col_multiples; m++) {
    const int64_t n = m == 0 ? pl->pw : m * col_step;
    if (m > 0 && n >= pl->pw) break;
    for (int64_t g = fixed > 0 ? fixed : (unit < pl->ph ? unit : pl->ph);; g += unit) {
      if (g > pl->ph) g = pl->ph;
      if (!cp_wino_item_size(pl, g, n)) break;
      const cp_wino_tiles t = cp_wino_tiles_max(pl);
      size_t v;
      if (!cp_wino_v_floats(pl, &t, &v)) break;
      const int first = fixed > 0 || g <= unit;
      if (!first && v * sizeof(float) > v_budget) break;
      const double cost = cp_wino_cost(pl);
      if (best_g == 0 || cost < best_cost) best_cost = cost, best_g = g, best_n = n;
      if (fixed > 0 || g >= pl->ph) break;
    }
  }
  if (best_g == 0 || !cp_wino_item_size(pl, best_g, best_n))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                   (long long)pl->c_in);
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  pl->col_blocks = (pl->pw + pl->col_block - 1) / pl->col_block;
  for (;;) {
    pl->row_groups = (pl->ph + pl->group - 1) / pl->group;
    if (fixed > 0 || pl->group <= unit || pl->batch * pl->row_groups * pl->col_blocks >= target)
      break;
    const int64_t g = pl->group - unit;
    const int64_t n = pl->col_block;
    cp_plan trial = *pl;
    if (!cp_wino_item_size(&trial, g, n) || cp_wino_tiles_max(&trial).tiles < 4 * nr) break;
    *pl = trial;
  }
  return CONVPOOL_SUCCESS;
}

/* V and the tile flags behind the input panel. */
static float *cp_wino_v(const cp_plan *pl, const float *panel) {
  return (float *)panel + pl->panel_floats;
}

static unsigned char *cp_wino_flags(const cp_plan *pl, const float *panel) {
  const cp_wino_tiles t = cp_wino_tiles_max(pl);
  size_t v = 0;
  cp_wino_v_floats(pl, &t, &v);
  return (unsigned char *)(cp_wino_v(pl, panel) + v);
}

/*
 * With conv padding above 1, an output whose 3x3 window is mostly zeros has
 * a tiny sum |x*w| while its tile's error scales with the whole 6x6 input:
 * tiles whose input reaches into such padding go to shift-reduce too.
 * Returns 1 if any tile of the item was flagged.
 */
static unsigned cp_wino_flag_border(const cp_plan *pl, const cp_wino_tiles *t,
                                    unsigned char *flags) {
  const int64_t *pad = pl->pad;
  if (pad[CP_TOP] <= 1 && pad[CP_LEFT] <= 1 && pad[CP_BOTTOM] <= 1 && pad[CP_RIGHT] <= 1) return 0;
  unsigned any = 0;
  for (size_t tr = 0; tr < t->th; tr++) {
    const int64_t y = (int64_t)(4 * (t->ty0 + tr)) - pad[CP_TOP]; /* first input row */
    const int rows_out = (pad[CP_TOP] > 1 && y < 0) || (pad[CP_BOTTOM] > 1 && y + 6 > pl->height);
    for (size_t tc = 0; tc < t->tw; tc++) {
      const int64_t x = (int64_t)(4 * (t->tx0 + tc)) - pad[CP_LEFT];
      const int out =
          rows_out || (pad[CP_LEFT] > 1 && x < 0) || (pad[CP_RIGHT] > 1 && x + 6 > pl->width);
      if (out) flags[tr * t->tw_pad + tc] = 1, any = 1;
    }
  }
  return any;
}

/* The range rule's inputs for the tiles of t (winograd/winograd.h): the
   limit follows the largest |U| of the blocks that Winograd computes. */
static cp_wino_screen cp_wino_screen_of(const cp_run *r, const cp_wino_tiles *t) {
  const cp_plan *pl = r->pl;
  const float *scale = cp_wino_block_flags(pl, r->packed);
  float u_max = 0.0f;
  for (int64_t cb = 0; cb < pl->co_blocks; cb++)
    if (scale[cb] > u_max) u_max = scale[cb];
  cp_wino_screen sc;
  sc.ratio = CP_WINO_RATIO;
  sc.ratio_sum = CP_WINO_RATIO_SUM;
  sc.limit = cp_wino_limit(u_max);
  sc.rows = pl->oh - 4 * (int64_t)t->ty0;
  sc.cols = pl->ow - 4 * (int64_t)t->tx0;
  return sc;
}

static void cp_wino_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  const cp_wino_tiles t = cp_wino_tiles_of_item(pl, it);
  /* the input of every tile: inside the input or zero, whatever the item */
  cp_pack_panel(r, it->b, (int64_t)(4 * t.ty0) - pl->pad[CP_TOP], 4 * t.th + 2,
                (int64_t)(4 * t.tx0) - pl->pad[CP_LEFT], 4 * t.tw + 2, panel);
  const cp_wino_transforms *tf = cp_wino_transforms_select(pl->uk->isa);
  const size_t nr = (size_t)pl->uk->nr;
  const cp_wino_screen screen = cp_wino_screen_of(r, &t);
  const size_t flagged =
      tf->input(panel, pl->panel_cs, pl->panel_ld, (size_t)pl->c_in, t.tiles, t.tw_pad, nr,
                cp_wino_v(pl, panel), cp_wino_v_stride((size_t)pl->c_in, nr), &screen,
                cp_wino_flags(pl, panel));
  it->flags = (flagged != 0) | cp_wino_flag_border(pl, &t, cp_wino_flags(pl, panel));
}

/* Shift-reduce over the flagged tiles (every tile with `all`), into the tile buffer. */
static void cp_wino_direct_tiles(const cp_run *r, const cp_wino_tiles *t, const float *panel,
                                 int64_t cb, size_t channels, float *buf, float *tile, int all) {
  const cp_plan *pl = r->pl;
  const unsigned char *flags = cp_wino_flags(pl, panel);
  const float *w = r->packed + (size_t)cb * (pl->weight_block_bytes / sizeof(float));
  const cp_sr_ukernel_fn kernel = cb + 1 == pl->co_blocks ? pl->uk_tail->fn : pl->uk->fn;
  const size_t nr = (size_t)pl->uk->nr, ld = pl->panel_ld;
  for (size_t tr = 0; tr < t->th; tr++)
    for (size_t tc = 0; tc < t->tw_pad; tc++) {
      if (!all && !flags[tr * t->tw_pad + tc]) continue;
      const size_t x_begin = 4 * tc;
      while (tc < t->tw_pad && (all || flags[tr * t->tw_pad + tc])) tc++;
      const size_t x_end = 4 * tc; /* a run of flagged tiles */
      for (size_t y = 4 * tr; y < 4 * tr + 4; y++) {
        if (y < t->dy) continue;
        for (size_t x = x_begin; x < x_end; x += nr) {
          kernel(panel + y * ld + x, pl->panel_cs, ld, (size_t)pl->c_in, 3, w, tile, nr);
          const size_t n = x_end - x < nr ? x_end - x : nr, skip = x < t->dx ? t->dx - x : 0;
          for (size_t m = 0; m < channels; m++)
            for (size_t i = skip; i < n; i++)
              buf[m * pl->buf_cols + (y - t->dy) * pl->buf_row_ld + x + i - t->dx] =
                  tile[m * nr + i];
        }
      }
    }
}

static void cp_wino_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                  int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_wino_tiles t = cp_wino_tiles_of_item(pl, it);
  const cp_wino_tiles full = cp_wino_tiles_max(pl);
  const size_t mr = (size_t)pl->uk->mr, nr = (size_t)pl->uk->nr;
  const size_t pass = cp_wino_pass(pl, full.t_alloc);
  const size_t per_block = CP_WINO_POINTS * mr * t.t_alloc;
  float *m = buf + cp_round_up(mr * pl->buf_cols, CP_CACHE_LINE / sizeof(float));
  const size_t j = (size_t)(cb - it->cb0) % pass;
  if (j == 0) { /* a pass: the products of the next `pass` blocks */
    const size_t uf = cp_wino_u_floats(pl->c_out, pl->c_in, pl->uk, pl->uk_tail);
    const float *u = cp_wino_block_flags(pl, r->packed) - uf;
    const int64_t cb1 = cb + (int64_t)pass < it->cb1 ? cb + (int64_t)pass : it->cb1;
    cp_wino_multiply(pl->uk, pl->uk_tail, pl->co_blocks, u, uf / CP_WINO_POINTS,
                     cp_wino_v(pl, panel), cp_wino_v_stride((size_t)pl->c_in, nr), (size_t)pl->c_in,
                     t.nblk, cb, cb1, m);
  }
  const size_t left = (size_t)pl->c_out - (size_t)cb * mr, channels = left < mr ? left : mr;
  const cp_wino_transforms *tf = cp_wino_transforms_select(pl->uk->isa);
  tf->output(m + j * per_block, t.t_alloc, mr, channels, t.tiles, t.tw_pad, t.dy, t.dx, buf,
             pl->buf_cols, pl->buf_row_ld);
  const int block_direct = cp_wino_block_direct(pl, r->packed, cb);
  if (it->flags || block_direct)
    cp_wino_direct_tiles(r, &t, panel, cb, channels, buf,
                         m + pass * CP_WINO_POINTS * mr * full.t_alloc, block_direct);
}

static void cp_wino_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_wino_tiles t = cp_wino_tiles_max(pl);
  size_t v = 0;
  cp_wino_v_floats(pl, &t, &v);
  snprintf(text, capacity,
           "fp32; F(4x4,3x3), points 0, +-5/8, +-3/2; up to %zu x %zu tiles per item (%zu lanes in "
           "%zu blocks of %d), V %zu KiB; products of %zu channel blocks per pass; transforms %s; "
           "shift-reduce: tiles of wide range or padding > 1; uneven/huge filters",
           t.th, t.tw, t.tiles, t.nblk, pl->uk->nr, v * sizeof(float) >> 10,
           cp_wino_pass(pl, t.t_alloc), cp_wino_transforms_select(pl->uk->isa)->name);
}

/*
 * Auto's rule, measured on 2 cores (README, "Choosing the algorithm"): the
 * transforms and the 36 points' weights (4x the direct weights, read once per
 * item) cost more than the products they save when a run has fewer than 8
 * tiles (conv outputs of 8x8 or less: 256 -> 256 channels on an 8x8 conv
 * output ran 1.9x slower than shift-reduce), or when batch x tiles x c_in x
 * c_out is below 2^16 (64 -> 64 channels on a 12x12 conv output), or with
 * fewer than 8 input channels, where the input transform is not amortised (3 ->
 * 64 channels at 224x224, pool 2: 5.5-7.0 ms against 7.0-7.4 ms): shift-reduce
 * computes those runs.
 */
static int cp_wino_hands_over(const cp_layer *layer, int64_t batch, int64_t oh, int64_t ow) {
  const double tiles = (double)batch * (double)((oh + 3) / 4) * (double)((ow + 3) / 4);
  return tiles < 8.0 || layer->c_in < 8 ||
         tiles * (double)layer->c_in * (double)layer->c_out < 65536.0;
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
    .hands_over = cp_wino_hands_over,
    .hand_over_to = &cp_algorithm_shift_reduce,
};
