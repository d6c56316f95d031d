/*
 * im2col + GEMM: each item's input is copied into a strip that repeats every
 * input element k*k times (one row per (channel, i, j), NR positions per
 * tile), and the same microkernels sweep it as a GEMM (kernel view k = 1,
 * channel stride NR, c_steps*k*k contraction rows). It holds k*k times the
 * shift-reduce panel for the same item, which is why auto tries it last.
 * The conv stride and dilation are the packer's address arithmetic, so it
 * computes every layer; with conv groups a tile's rows are group after
 * group, and a channel block contracts over its group's rows. The GEMM is
 * blocked as BLIS blocks one: the contraction in passes of rows whose slice
 * of a tile stays in L1 while a chunk of channel blocks (their weights'
 * slice in L2) multiplies it (cp_im2col_compute_block).
 */
#include <stdio.h>
#include <string.h>

#include "sr-kernels.h"

/* The plan's own state: the strip of the item size and the GEMM's blocks. */
typedef struct cp_im2col_plan {
  size_t floats; /* 32-bit elements of the strip */
  int flat;      /* tiles run flat over the positions (narrow rows), not per row */
  size_t tiles;  /* microkernel tiles per channel block of a full item */
  size_t kc;     /* contraction rows per pass (a tile's slice of them stays in L1) */
  size_t chunk;  /* channel blocks computed together (their weights' slice stays in L2) */
} cp_im2col_plan;
CP_ALGO_STATE_FITS(cp_im2col_plan);

static const char *cp_im2col_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                      size_t capacity) {
  (void)layer, (void)cpu, (void)why, (void)capacity;
  return NULL; /* every layer of the contract */
}

static convpool_status cp_im2col_setup(const cp_layer *layer, const cp_cpu *cpu, cp_algo_setup *s) {
  return cp_sr_setup_kernels(layer, cpu, layer->dtype, 1, s);
}

static int cp_im2col_geometry(cp_plan *pl) {
  cp_im2col_plan *ip = CP_ALGO_STATE(cp_im2col_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const size_t nr = (size_t)s->uk->nr, mr = (size_t)s->uk->mr, k = (size_t)pl->k;
  const size_t es = sizeof(float), conv_rows = (size_t)pl->conv_rows, cw = (size_t)pl->conv_cols;
  size_t n;
  /* Flat tiles run over the positions row after row with no halo. */
  const size_t flat_tiles = (conv_rows * cw + nr - 1) / nr;
  const size_t row_tiles = conv_rows * ((cw + nr - 1) / nr);
  ip->flat = flat_tiles <= row_tiles; /* ties too: compact rows for the epilogue */
  ip->tiles = ip->flat ? flat_tiles : row_tiles;
  if (!cp_mul((size_t)s->c_steps, (size_t)pl->groups, &n) || !cp_mul(n, k * k, &n) ||
      !cp_mul(n, nr, &n) || !cp_mul(n, ip->tiles, &ip->floats) ||
      !cp_mul(ip->floats, es, &pl->panel_bytes))
    return 0;
  pl->buf_row_ld = ip->flat ? cw : cp_round_up(cw, nr);
  pl->buf_cols = ip->flat ? ip->tiles * nr : conv_rows * pl->buf_row_ld;
  /* The blocked sweep (cp_im2col_compute_block): a tile's kc rows of the
     strip fill a quarter of L1 (the weights stream past them); a chunk's
     weights for those rows and the chunk's conv outputs together fill half
     of L2, so that the strip is read once per chunk. */
  const size_t l1 = pl->l1_bytes > 16384 ? pl->l1_bytes : 16384;
  size_t block_bytes;
  if (!cp_mul(pl->buf_cols, mr * es, &block_bytes)) return 0;
  ip->kc = l1 / 4 / (nr * es);
  ip->chunk = pl->buf_budget * 2 / (mr * ip->kc * es + block_bytes);
  if (ip->chunk > (size_t)pl->group_co_blocks) ip->chunk = (size_t)pl->group_co_blocks;
  if (ip->chunk < 1) ip->chunk = 1;
  return cp_mul(block_bytes, ip->chunk, &pl->buf_bytes);
}

static double cp_im2col_item_cost(const cp_plan *pl) {
  const cp_im2col_plan *ip = CP_ALGO_STATE(const cp_im2col_plan, pl->state);
  return cp_sr_cost(pl, ip->tiles, ip->floats);
}

static double cp_im2col_cost(const cp_plan *pl) {
  return cp_rows_cost(pl, cp_im2col_item_cost);
}

/* A run of a tile's positions: n0 .. n0 + len - 1, consecutive conv columns
   of one conv row (input columns `stride` apart from (iy, ix) for tap (0,
   0)), or positions past the item (valid = 0). */
typedef struct cp_im2col_run {
  size_t n0, len;
  int64_t iy, ix;
  int valid;
} cp_im2col_run;

/* The runs of tile t of an item; returns their count. */
static size_t cp_im2col_runs(const cp_plan *pl, const cp_im2col_plan *ip, const cp_item *it,
                             size_t t, size_t nr, cp_im2col_run *runs) {
  const size_t conv_rows = (size_t)it->ny, cw = (size_t)it->nx, per_row = (cw + nr - 1) / nr;
  size_t count = 0, last_row = SIZE_MAX, last_col = 0;
  for (size_t n = 0; n < nr; n++) {
    size_t row, col;
    if (ip->flat) { /* rows are buf_row_ld positions apart, as in the tile buffer */
      const size_t p = t * nr + n;
      row = p / pl->buf_row_ld, col = p % pl->buf_row_ld;
    } else {
      row = t / per_row, col = (t % per_row) * nr + n;
    }
    const int valid = row < conv_rows && col < cw;
    cp_im2col_run *prev = count > 0 ? &runs[count - 1] : NULL;
    if (prev != NULL &&
        (valid ? prev->valid && row == last_row && col == last_col + 1 : !prev->valid)) {
      prev->len++;
    } else {
      cp_im2col_run *run = &runs[count++];
      run->n0 = n, run->len = 1, run->valid = valid;
      run->iy = (it->y0 + (int64_t)row) * pl->conv_stride - pl->pad[CP_TOP];
      run->ix = (it->x0 + (int64_t)col) * pl->conv_stride - pl->pad[CP_LEFT];
    }
    last_row = row, last_col = col;
  }
  return count;
}

/* Where a run of len inputs of input row y, columns x, x + stride, ...
   lies inside the input: positions [*lo, *hi) (none: *lo = *hi = 0), and
   the input offset of position *lo within a channel's plane. */
static void cp_im2col_span(const cp_plan *pl, int64_t y, int64_t x, size_t len, size_t *lo,
                           size_t *hi, size_t *offset) {
  const int64_t stride = pl->conv_stride, w = pl->width;
  *lo = 0, *hi = 0, *offset = 0;
  if (y < 0 || y >= pl->height || x + (int64_t)(len - 1) * stride < 0 || x >= w) return;
  *lo = x >= 0 ? 0 : (size_t)((-x + stride - 1) / stride);
  *hi = (size_t)((w - 1 - x) / stride) + 1;
  if (*hi > len) *hi = len;
  if (*lo >= *hi) {
    *lo = *hi = 0;
    return;
  }
  *offset = (size_t)y * (size_t)w + (size_t)(x + (int64_t)*lo * stride);
}

/* n inputs from element `from` of the source, `step` apart, into to[0, n):
   fp32, 16-bit widened, or bf16 channel pairs (the channel and the next
   one, hw further, as the high half when has_hi). */
static void cp_im2col_copy(const cp_run *r, size_t from, size_t n, size_t step, size_t hw,
                           size_t cpack, int has_hi, float *to) {
  const cp_plan *pl = r->pl;
  if (pl->dtype == CONVPOOL_FLOAT32) {
    const float *src = (const float *)(const void *)r->src + from;
    if (step == 1)
      memcpy(to, src, n * sizeof(float));
    else
      for (size_t i = 0; i < n; i++) to[i] = src[i * step];
  } else if (cpack == 2) {
    const uint16_t *src = (const uint16_t *)(const void *)r->src + from;
    uint32_t *pair = (uint32_t *)(void *)to;
    for (size_t i = 0; i < n; i++)
      pair[i] = src[i * step] | (has_hi ? (uint32_t)src[i * step + hw] << 16 : 0u);
  } else if (step == 1) {
    r->widen((const uint16_t *)(const void *)r->src + from, to, n);
  } else {
    for (size_t i = 0; i < n; i++) to[i] = cp_load_elem(pl->dtype, r->src, from + i * step);
  }
}

/*
 * The strip of an item: for each tile of NR conv positions of its conv
 * region (in the order of the tile buffer), B[s][i][j][n] = x[s][row*stride
 * + i*dilation - pad_top][col*stride + j*dilation - pad_left] for position n
 * at conv (row, col), s running over the channel steps of every conv group
 * (group after group); positions past the item and inputs in the conv
 * padding are zero. A tile's positions are copied as runs along conv rows,
 * tap after tap: where a run lies inside the input is found once per tap,
 * then copied for every channel (256 -> 512 3x3 stride 2 at 14x14: the pack
 * 370 -> 280 us of thread time against finding it per channel and run).
 * cp_im2col_pack_tile writes tile t's rows of conv groups [g0, g1].
 */
static void cp_im2col_pack_tile(const cp_run *r, const cp_item *it, size_t t, size_t g0, size_t g1,
                                float *strip) {
  const cp_plan *pl = r->pl;
  const cp_im2col_plan *ip = CP_ALGO_STATE(const cp_im2col_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const size_t nr = (size_t)s->uk->nr, k = (size_t)pl->k, group_steps = (size_t)s->c_steps;
  const size_t hw = (size_t)pl->height * (size_t)pl->width, step = (size_t)pl->conv_stride;
  const size_t cpack = (size_t)s->uk->cpack, group_c_in = (size_t)(pl->c_in / pl->groups);
  const size_t plane0 = (size_t)it->b * (size_t)pl->c_in * hw;
  const size_t rows = (size_t)pl->groups * group_steps * k * k; /* of a tile */
  const int64_t dil = pl->dilation;
  cp_im2col_run runs[CP_MAX_NR];
  size_t lo[CP_MAX_NR], hi[CP_MAX_NR], offset[CP_MAX_NR];
  const size_t count = cp_im2col_runs(pl, ip, it, t, nr, runs);
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j < k; j++) {
      for (size_t u = 0; u < count; u++) {
        lo[u] = hi[u] = offset[u] = 0;
        if (runs[u].valid)
          cp_im2col_span(pl, runs[u].iy + (int64_t)i * dil, runs[u].ix + (int64_t)j * dil,
                         runs[u].len, &lo[u], &hi[u], &offset[u]);
      }
      if (pl->dtype == CONVPOOL_FLOAT32) {
        /* Each lane's input within a channel's plane (or none: zero); a
           tile whose lanes read consecutive inputs (a 1x1 filter, flat over
           whole rows) is one move per channel. No calls per channel, and the
           plane a few channels ahead prefetched: the copy waits on the
           loads, one cache line per channel (1024 -> 256 1x1 at 14x14, one
           thread: pack 810 -> 260 us). */
        size_t lane[CP_MAX_NR];
        int whole = step == 1;
        for (size_t u = 0; u < count; u++)
          for (size_t n = 0; n < runs[u].len; n++)
            lane[runs[u].n0 + n] =
                n >= lo[u] && n < hi[u] ? offset[u] + (n - lo[u]) * step : SIZE_MAX;
        whole &= lane[0] != SIZE_MAX;
        for (size_t n = 1; n < nr && whole; n++) whole = lane[n] == lane[0] + n;
        const float *src = (const float *)(const void *)r->src + plane0;
        const size_t c_end = (g1 + 1) * group_c_in, ahead = 8 * hw;
        for (size_t c = g0 * group_c_in; c < c_end; c++) {
          const float *from = src + c * hw;
          float *to = strip + (t * rows + (c * k + i) * k + j) * nr;
          if (c + 8 < c_end && lane[0] != SIZE_MAX) __builtin_prefetch(from + ahead + lane[0]);
          if (whole && nr == 16) { /* constant sizes: inlined moves */
            memcpy(to, from + lane[0], 16 * sizeof(float));
          } else if (whole && nr == 32) {
            memcpy(to, from + lane[0], 32 * sizeof(float));
          } else {
            for (size_t n = 0; n < nr; n++) to[n] = lane[n] != SIZE_MAX ? from[lane[n]] : 0.0f;
          }
        }
        continue;
      }
      for (size_t g = g0; g <= g1; g++)
        for (size_t st = 0; st < group_steps; st++) {
          const size_t c = g * group_c_in + st * cpack; /* the step's (first) channel */
          const int has_hi = cpack == 2 && st * cpack + 1 < group_c_in;
          float *to = strip + (t * rows + ((g * group_steps + st) * k + i) * k + j) * nr;
          for (size_t u = 0; u < count; u++) {
            float *run = to + runs[u].n0;
            const size_t len = runs[u].len;
            memset(run, 0, lo[u] * sizeof(float));
            if (hi[u] > lo[u])
              cp_im2col_copy(r, plane0 + c * hw + offset[u], hi[u] - lo[u], step, hw, cpack, has_hi,
                             run + lo[u]);
            memset(run + hi[u], 0, (len - (hi[u] > lo[u] ? hi[u] : 0)) * sizeof(float));
          }
        }
    }
}

/*
 * Where channel groups split an image region (plan.h: shared regions), the
 * region's strip is packed once, before the items, one tile per work item
 * (every conv group's rows), and each channel group's item reads it there:
 * 256 -> 512 3x3 stride 2 at 14x14, whose 4 channel groups each packed the
 * same strip, 999 -> 680 us (Zen 4, 2 threads).
 */
static float *cp_im2col_region(const cp_run *r, int64_t region) {
  return (float *)(void *)(r->shared + cp_region_offset(r->pl, region));
}

static int cp_im2col_schedule(cp_plan *pl) {
  if (!cp_plan_share_regions(pl)) return 0;
  pl->prepare_items *= (int64_t)CP_ALGO_STATE(const cp_im2col_plan, pl->state)->tiles;
  return 1;
}

/* Tile `index % tiles` of region `index / tiles` (the items of channel group
   0 come in region order). */
static void cp_im2col_prepare(const cp_run *r, int64_t index) {
  const int64_t tiles = (int64_t)CP_ALGO_STATE(const cp_im2col_plan, r->pl->state)->tiles;
  const int64_t region = index / tiles;
  const cp_item it = cp_item_of(r->pl, region * r->pl->co_groups);
  cp_im2col_pack_tile(r, &it, (size_t)(index % tiles), 0, (size_t)(r->pl->groups - 1),
                      cp_im2col_region(r, region));
}

/* The item's strip: its region's, or the conv groups of its channel blocks
   packed into its own. */
static const float *cp_im2col_pack_item(const cp_run *r, cp_item *it, float *strip) {
  const cp_plan *pl = r->pl;
  if (pl->prepare_items > 0) return cp_im2col_region(r, cp_item_region(pl, it));
  const size_t g0 = (size_t)cp_block_group(pl, it->cb0),
               g1 = (size_t)cp_block_group(pl, it->cb1 - 1);
  for (size_t t = 0; t < CP_ALGO_STATE(const cp_im2col_plan, pl->state)->tiles; t++)
    cp_im2col_pack_tile(r, it, t, g0, g1, strip);
  return strip;
}

/*
 * Channel block cb of the item, computed as a blocked GEMM: the blocks of a
 * chunk (cb and those after it in its conv group, up to ip->chunk) are
 * computed together when the driver asks for the chunk's first, each into
 * its own rows of buf, and returned one by one after. The contraction runs
 * in passes of kc rows; in a pass each tile's kc x NR slice of the strip
 * (in L1) is multiplied by every block of the chunk (their weights' slice
 * in L2), the kernels continuing the sums they stored in the last pass:
 * the same terms in the same order as one pass over all rows, so the same
 * bits. Against one pass per block and tile, Zen 3, 2 threads, fastest of
 * 100 alternating runs: 256 -> 512 3x3 stride 2 at 14x14 1446-1543 ->
 * 1242-1264 us, 128 -> 256 at 28x28 916-1362 -> 912-1089 us, 512 -> 1024
 * 1x1 stride 2 at 28x28 1934-2048 -> 1717-1765 us.
 */
static const float *cp_im2col_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                            int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_im2col_plan *ip = CP_ALGO_STATE(const cp_im2col_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const size_t nr = (size_t)s->uk->nr, mr = (size_t)s->uk->mr, conv_rows = (size_t)it->ny;
  const size_t kdim = (size_t)s->c_steps * (size_t)(pl->k * pl->k); /* rows of a group */
  const size_t rows = kdim * (size_t)pl->groups;                    /* of a tile */
  const size_t per_row = ((size_t)it->nx + nr - 1) / nr;
  const size_t block_floats = mr * pl->buf_cols;
  /* the chunk of cb: counted from the first block of its group in the item */
  const int64_t group = cp_block_group(pl, cb), group_first = group * pl->group_co_blocks;
  const int64_t first = it->cb0 > group_first ? it->cb0 : group_first;
  const size_t j = (size_t)(cb - first) % ip->chunk;
  if (j > 0) return buf + j * block_floats;
  int64_t end = cb + (int64_t)ip->chunk;
  if (end > it->cb1) end = it->cb1;
  if (end > group_first + pl->group_co_blocks) end = group_first + pl->group_co_blocks;
  panel += (size_t)group * kdim * nr; /* the group's rows */
  for (size_t k0 = 0; k0 < kdim; k0 += ip->kc) {
    const size_t kn = kdim - k0 < ip->kc ? kdim - k0 : ip->kc;
    for (size_t t = 0; t < ip->tiles; t++) {
      if (!ip->flat && t / per_row >= conv_rows) break;
      if (ip->flat && t * nr >= conv_rows * pl->buf_row_ld) break;
      const size_t at = ip->flat ? t * nr : (t / per_row) * pl->buf_row_ld + (t % per_row) * nr;
      const float *x = panel + (t * rows + k0) * nr;
      for (int64_t b = cb; b < end; b++) {
        const int tail = (b + 1) % pl->group_co_blocks == 0;
        const size_t block_mr = (size_t)(tail ? s->uk_tail->mr : s->uk->mr);
        const cp_sr_ukernel_fn kernel = tail ? s->uk_tail->fn : s->uk->fn;
        kernel(x, nr, 0, kn, 1, cp_sr_block_weights(r, b) + k0 * block_mr,
               buf + (size_t)(b - cb) * block_floats + at, pl->buf_cols, k0 > 0, NULL);
      }
    }
  }
  return buf;
}

static void cp_im2col_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_im2col_plan *ip = CP_ALGO_STATE(const cp_im2col_plan, pl->state);
  char sweep[128];
  snprintf(sweep, sizeof sweep, "im2col strip of %zu tiles (%s); sweep %s", ip->tiles,
           cp_sr_setup_of(pl->setup)->uk->cpack == 2 ? "bf16 channel pairs" : "fp32",
           ip->flat ? "flat over rows (narrow rows)" : "per conv row");
  cp_sr_describe_tile(pl, (pl->conv_rows - 1) * pl->conv_stride + pl->extent, sweep, text,
                      capacity);
}

const cp_algorithm cp_algorithm_im2col = {
    .name = "im2col + GEMM",
    .id = CONVPOOL_ALGO_IM2COL,
    .declines = cp_im2col_declines,
    .setup = cp_im2col_setup,
    .pack_weights = cp_sr_pack_weights,
    .item_units = cp_sr_item_units,
    .geometry = cp_im2col_geometry,
    .cost = cp_im2col_cost,
    .schedule = cp_im2col_schedule,
    .prepare = cp_im2col_prepare,
    .pack_item = cp_im2col_pack_item,
    .compute_block = cp_im2col_compute_block,
    .describe = cp_im2col_describe,
};
