/*
 * Depthwise: conv groups = C_in, so each input channel's plane is its own 2D
 * conv, read by the C_out / C_in output channels of its group (output
 * channel co reads input channel co / M). Two layouts, chosen per run
 * (cp_dw_layout):
 * - channel rows: conv positions run in the vector lanes and the K x K taps
 *   are scalar broadcast weights; nothing is transposed, and a vector does
 *   16 output positions of one channel (below);
 * - channels in lanes, where the kernel has them: 8 consecutive output
 *   channels per vector and each tap one weight vector, the input staged
 *   transposed and the conv outputs left in lanes for the epilogue
 *   (cp_dw_compute_lanes): small and strided planes, where rows of 7 or 14
 *   positions leave a rows sweep's vectors part empty.
 *
 * Channel rows: a channel block is up to CP_DW_MAX_BLOCK output channels of
 * one input channel. compute_block stages that input channel's window of the item
 * (zeros where the conv padding is, widened to fp32) in the tile buffer
 * past the block's outputs, so the staging, the kernel and the epilogue of
 * a block share the L1 cache; pack_item only lays out the taps and what the
 * item copies of each phase plane (the same for every channel).
 *
 * Stride and dilation are the staging's address arithmetic: the window is
 * split into phase planes, plane (a, b) holding the input rows P[a] + s*y
 * and columns P[b] + s*x of the window, P[a] = (a * d) mod s for the
 * `phases` distinct values of (i * d) mod s over the taps i. Tap (i, j) of
 * conv output (y, x) is then element (y + (i*d) / s, x + (j*d) / s) of plane
 * (i mod phases, j mod phases): every tap is a stride-1 shifted load, and a
 * stride-2 window is deinterleaved once by the staging instead of gathered
 * by every tap. Planes have rows of ld = conv columns + halo elements; the
 * kernel sweeps the item flat, position p = y * ld + x, so narrow rows
 * (7x7, 14x14) fill the vectors too, and the tile buffer's rows are ld apart
 * (or compact, for pool 1: see cp_dw_geometry).
 *
 * Every output sums its layer's own K x K taps, padding zeros included (0 *
 * inf is NaN, as torch), in the same order whatever the item: results do
 * not depend on the item split or the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../driver.h"
#include "../half.h"
#include "../kernels/dw-ukernel.h"
#include "../pack.h"
#include "algo.h"

/* The most output channels (of one input channel) per channel block. */
#define CP_DW_MAX_BLOCK 8

/* Compact rows of up to this many conv columns are swept flat, each vector's
   lanes packed row by row on the store (the kernels' compact sweep). */
#define CP_DW_NARROW 32

/* The setup's own state: the kernel and where its lanes layout's weights
   are (0: the kernel has none). */
typedef struct cp_dw_setup {
  const cp_dw_ukernel *uk;
  size_t lanes_weights; /* float index of the lanes layout's packed weights */
} cp_dw_setup;
CP_ALGO_STATE_FITS(cp_dw_setup);

/* The plan's own state: the staging of the item size. */
typedef struct cp_dw_plan {
  /* channels in lanes: ld is the staging's columns, stage and widen the
     float indices of the staging and of the 16-bit rows' widening (phases
     1, halo 0, plane and compact unused) */
  size_t widen;
  int64_t phases; /* phase planes per side: the distinct (i * d) mod s */
  int64_t halo;   /* ((k - 1) * d) / s: extra rows and columns of a plane */
  size_t ld;      /* floats between a plane's rows (and the tile buffer's) */
  size_t plane;   /* floats between planes */
  size_t stage;   /* floats of the tile buffer before the staging area */
  int compact;    /* the tile buffer's rows compact (buf_row_ld = conv columns) */
} cp_dw_plan;
CP_ALGO_STATE_FITS(cp_dw_plan);

/* What an item stages of a phase plane, the same for each of its channels:
   `rows` rows of n elements from the channel's image (element `from`, rows
   `from_ld` apart, elements `step` apart) to the staging (float `to`, rows
   ld apart). A stride-2 pair (`to2` not 0): the two column phases of the
   same input rows in one pass, the even elements from `from` to `to` (n of
   them), the odd ones to `to2` (n2). */
typedef struct cp_dw_copy {
  size_t from, from_ld, step, to, rows, n, to2, n2;
} cp_dw_copy;

static const cp_dw_setup *cp_dw_setup_of(const cp_algo_setup *setup) {
  return CP_ALGO_STATE(const cp_dw_setup, setup->state);
}

static const char *cp_dw_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                  size_t capacity) {
  (void)cpu;
  if (layer->groups != layer->c_in) {
    snprintf(why, capacity,
             "depthwise computes layers whose conv groups equal C_in: groups = %lld, C_in = %lld",
             (long long)layer->groups, (long long)layer->c_in);
    return why;
  }
  return NULL;
}

static convpool_status cp_dw_setup_layer(const cp_layer *layer, const cp_cpu *cpu,
                                         cp_algo_setup *setup) {
  cp_dw_setup *s = CP_ALGO_STATE(cp_dw_setup, setup->state);
  s->uk = cp_dw_ukernel_select(cpu->isa);
  const int64_t multiplier = layer->c_out / layer->c_in;
  setup->co_block = (int)(multiplier < CP_DW_MAX_BLOCK ? multiplier : CP_DW_MAX_BLOCK);
  setup->positions = s->uk->nr;
  setup->isa = s->uk->isa;
  setup->kernel = s->uk->name;
  /* the channel rows' weights, then, where the kernel has channels in
     lanes (offered to the runs: cp_dw_layout), theirs */
  const size_t c_out = (size_t)layer->c_out, lanes = CP_DW_LANES;
  size_t n = c_out, taps;
  s->lanes_weights = 0;
  if (s->uk->lanes_fn != NULL) {
    setup->lanes = CP_DW_LANES;
    s->lanes_weights = n;
    n += (c_out + lanes - 1) / lanes * lanes;
  }
  if (!cp_mul((size_t)layer->k, (size_t)layer->k, &taps) || !cp_mul(n, taps, &n) ||
      !cp_mul(taps, s->lanes_weights, &s->lanes_weights) ||
      !cp_mul(n, sizeof(float), &setup->packed_weight_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, 1, %lld, %lld] have a byte count that overflows",
                   (long long)layer->c_out, (long long)layer->k, (long long)layer->k);
  return CONVPOOL_SUCCESS;
}

/* fp32 [c_out][k * k]: the weights [c_out, 1, k, k] as they are, widened;
   then, for channels in lanes, [block][k * k][CP_DW_LANES] (zeros past
   c_out). */
static void cp_dw_pack_weights(const cp_layer *layer, const cp_algo_setup *setup,
                               const void *weights, float *packed) {
  const size_t taps = (size_t)layer->k * (size_t)layer->k, c_out = (size_t)layer->c_out;
  for (size_t i = 0; i < c_out * taps; i++) packed[i] = cp_load_elem(layer->dtype, weights, i);
  if (cp_dw_setup_of(setup)->lanes_weights == 0) return;
  packed += cp_dw_setup_of(setup)->lanes_weights;
  const size_t lanes = CP_DW_LANES, blocks = (c_out + lanes - 1) / lanes;
  for (size_t b = 0; b < blocks; b++)
    for (size_t t = 0; t < taps; t++)
      for (size_t l = 0; l < lanes; l++) {
        const size_t co = b * lanes + l;
        packed[(b * taps + t) * lanes + l] =
            co < c_out ? cp_load_elem(layer->dtype, weights, co * taps + t) : 0.0f;
      }
}

/* Items start on any conv row; columns advance by whole register tiles. */
/*
 * The run's layout, a measured rule of each kernel line (dw-ukernel.c;
 * MobileNetV2's depthwise 3x3 layers, README "Choosing the algorithm"):
 * channels in lanes where the conv output is at most the line's
 * lanes_max_ow wide (lanes_max_ow_strided for a strided conv), channel rows
 * elsewhere. In lanes, every vector is whole whatever the width, and a
 * stride-2 window is read in place, but each block's input and output
 * change layout (an 8x8 transpose in, and one in the epilogue) and its 8
 * channel planes are read and written side by side; on a wide plane the
 * rows sweep fills its vectors anyway. Zen 3 (AVX2, 8-position rows): in
 * lanes up to 28 columns, and every strided conv; Zen 5 (AVX-512,
 * 16-position rows): up to 10 columns (960 channels at 7x7, batch 1: 32 ->
 * 27 us; 576 at 14x14 stride 2: 29 -> 23 us; but 384 at 14x14: 26 -> 40).
 */
static void cp_dw_layout(cp_plan *pl) {
  const cp_dw_ukernel *uk = cp_dw_setup_of(pl->setup)->uk;
  const long max_ow = pl->conv_stride >= 2 ? uk->lanes_max_ow_strided : uk->lanes_max_ow;
  if (pl->lanes > 0 && pl->ow <= max_ow) {
    pl->co_block = CP_DW_LANES;
    pl->block_groups = 1; /* blocks of consecutive output channels, across the groups */
  } else {
    pl->lanes = 0;
  }
}

static void cp_dw_item_units(const cp_plan *pl, int64_t *rows, int64_t *cols) {
  *rows = 1;
  *cols = pl->lanes > 0 ? 4 * CP_DW_LANES_NP : cp_dw_setup_of(pl->setup)->uk->nr;
}

/* Channels in lanes: the block's conv outputs (conv row y, column x,
   channel m at (y * nx + x) * CP_DW_LANES + m), then the staging (the
   item's input window, rows of ld positions of CP_DW_LANES channels) and
   the widening of a 16-bit row per lane. */
static int cp_dw_geometry_lanes(cp_plan *pl, cp_dw_plan *dp) {
  const size_t s = (size_t)pl->conv_stride, extent = (size_t)pl->extent;
  const size_t cr = (size_t)pl->conv_rows, cw = (size_t)pl->conv_cols;
  const size_t lanes = CP_DW_LANES, line = CP_CACHE_LINE / sizeof(float);
  size_t rows, n;
  dp->phases = 1, dp->halo = 0, dp->plane = 0, dp->compact = 0;
  if (!cp_mul(cw - 1, s, &dp->ld) || !cp_add(dp->ld, extent, &dp->ld) ||
      !cp_mul(cr - 1, s, &rows) || !cp_add(rows, extent, &rows) || !cp_mul(cr, cw, &pl->buf_cols) ||
      !cp_mul(pl->buf_cols, lanes, &n))
    return 0;
  pl->buf_row_ld = cw;
  dp->stage = cp_round_up(n, line);
  if (!cp_mul(rows, dp->ld, &n) || !cp_mul(n, lanes, &n) || !cp_add(dp->stage, n, &n)) return 0;
  dp->widen = cp_round_up(n, line);
  if (!cp_mul(pl->dtype == CONVPOOL_FLOAT32 ? 0 : lanes, dp->ld, &n) || !cp_add(dp->widen, n, &n) ||
      !cp_mul(n, sizeof(float), &pl->buf_bytes))
    return 0;
  return cp_mul((size_t)(pl->k * pl->k), sizeof(ptrdiff_t), &pl->panel_bytes);
}

static int cp_dw_geometry(cp_plan *pl) {
  cp_dw_plan *dp = CP_ALGO_STATE(cp_dw_plan, pl->state);
  if (pl->lanes > 0) return cp_dw_geometry_lanes(pl, dp);
  const int64_t s = pl->conv_stride, d = pl->dilation, k = pl->k;
  const int64_t period = s / cp_gcd(s, d); /* (i * d) mod s repeats with this period */
  dp->phases = k < period ? k : period;
  dp->halo = (pl->extent - 1) / s;
  const size_t cr = (size_t)pl->conv_rows, cw = (size_t)pl->conv_cols, hs = (size_t)dp->halo;
  const size_t np = (size_t)dp->phases, line = CP_CACHE_LINE / sizeof(float);
  size_t ld, rows, plane, len, n;
  if (!cp_add(cw, hs, &ld) || !cp_add(cr, hs, &rows) || !cp_mul(rows, ld, &plane) ||
      !cp_add(plane, CP_DW_MAX_LANES + line, &plane) || !cp_mul(cr - 1, ld, &len) ||
      !cp_add(len, cw + line, &len))
    return 0;
  /* the flat sweep's last vector reads up to CP_DW_MAX_LANES - 1 past the
     plane's rows */
  dp->ld = ld;
  dp->plane = cp_round_up(plane - line, line);
  /* Pool 1 of stride 1 over whole rows: the driver pools a channel's rows in
     one call when they lie compact, which saves a call per row (half the
     time of a 7x7 channel); packing the rows on the kernel's stores, or
     moving them together after the sweep, costs less. */
  dp->compact = pl->pool == 1 && pl->stride == 1 && !pl->has_residual && pl->col_block >= pl->pw;
  pl->buf_row_ld = dp->compact ? cw : ld;
  pl->buf_cols = cp_round_up(len - line, line);
  if (!cp_mul(pl->buf_cols, (size_t)pl->setup->co_block, &dp->stage) ||
      !cp_mul(np * np, dp->plane, &n) || !cp_add(n, dp->stage, &n) ||
      !cp_mul(n, sizeof(float), &pl->buf_bytes))
    return 0;
  /* the panel: the taps' offsets, then a copy per phase plane */
  if (!cp_mul((size_t)k * (size_t)k, sizeof(ptrdiff_t), &pl->panel_bytes) ||
      !cp_add(pl->panel_bytes, (np * np + 1) * sizeof(cp_dw_copy), &pl->panel_bytes))
    return 0;
  return 1;
}

/* The tile buffer (outputs and staging) within the tile-buffer budget; the
   panel is small (the taps' offsets and the plane copies). */
static int cp_dw_fits(const cp_plan *pl) {
  return pl->buf_bytes <= pl->buf_budget;
}

/* Kernel lanes of a block, the staging copy, and a block's and an epilogue
   row's fixed costs, per pooled output. */
static double cp_dw_cost(const cp_plan *pl) {
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const double rows = (double)(pl->group < pl->ph ? pl->group : pl->ph);
  const double cols = (double)(pl->col_block < pl->pw ? pl->col_block : pl->pw);
  if (pl->lanes > 0) { /* tiles of whole vectors, the staging in and out */
    const double lanes = CP_DW_LANES, positions = (double)pl->conv_rows * (double)pl->conv_cols;
    const double tiles = ceil(positions / CP_DW_LANES_NP);
    const double stage =
        2.0 * lanes * (double)dp->ld * (double)((pl->conv_rows - 1) * pl->conv_stride + pl->extent);
    return (tiles * CP_DW_LANES_NP * lanes * (double)(pl->k * pl->k) + stage + 256.0) /
           (lanes * rows * cols);
  }
  const double mr = (double)pl->setup->co_block;
  const double lanes = mr * (double)pl->buf_cols * (double)(pl->k * pl->k);
  const double copy =
      2.0 * (double)(dp->phases * dp->phases) * (double)(pl->conv_rows + dp->halo) * (double)dp->ld;
  const double fixed = 256.0 + 32.0 * mr * (double)pl->conv_rows;
  return (lanes + copy + fixed) / (mr * rows * cols);
}

/* Channel blocks give the threads their items (each block restages only its
   own channel); rows are split only when the blocks are too few. */
static int cp_dw_worth_splitting_to(const cp_plan *pl) {
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  return pl->batch * pl->row_groups * pl->col_blocks * pl->co_blocks < target;
}

/* The panel: the offset of each tap (i, j) in the staging (see above), then
   the number of copies of the item's staging and the copies. */
static const float *cp_dw_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const int64_t k = pl->k, s = pl->conv_stride, d = pl->dilation, np = dp->phases;
  ptrdiff_t *off = (ptrdiff_t *)(void *)panel;
  if (pl->lanes > 0) { /* tap (i, j): rows and columns of the staging */
    for (int64_t i = 0; i < k; i++)
      for (int64_t j = 0; j < k; j++)
        off[i * k + j] = (ptrdiff_t)(((size_t)(i * d) * dp->ld + (size_t)(j * d)) * CP_DW_LANES);
    return panel;
  }
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < k; j++)
      off[i * k + j] = (ptrdiff_t)((size_t)((i % np) * np + j % np) * dp->plane +
                                   (size_t)(i * d / s) * dp->ld + (size_t)(j * d / s));
  /* the copies of the planes' input: plane (a, b) row y, column x is input
     row ya + y * s, column xb + x * s; the rows and columns outside the
     input are the padding (zeros), the rest is copied */
  cp_dw_copy *copy = (cp_dw_copy *)(void *)(off + k * k), *first = copy + 1;
  const int64_t height = pl->height, width = pl->width, ld = (int64_t)dp->ld;
  const int64_t rows = it->ny + dp->halo;
  const int64_t iy0 = it->y0 * s - pl->pad[CP_TOP], ix0 = it->x0 * s - pl->pad[CP_LEFT];
  size_t count = 0;
  for (int64_t a = 0; a < np; a++) {
    const int64_t ya = iy0 + a * d % s;
    const int64_t y_lo = ya >= 0 ? 0 : (-ya + s - 1) / s;
    int64_t y_hi = ya >= height ? 0 : (height - ya + s - 1) / s;
    if (y_hi > rows) y_hi = rows;
    for (int64_t b = 0; b < np; b++) {
      const int64_t xb = ix0 + b * d % s;
      const int64_t lo = xb >= 0 ? 0 : (-xb + s - 1) / s;
      int64_t hi = xb >= width ? 0 : (width - xb + s - 1) / s;
      if (hi > ld) hi = ld;
      if (y_lo >= y_hi || lo >= hi) continue;
      cp_dw_copy *c = &first[count++];
      c->from = (size_t)(ya + y_lo * s) * (size_t)width + (size_t)(xb + lo * s);
      c->from_ld = (size_t)(width * s), c->step = (size_t)s;
      c->to = (size_t)(a * np + b) * dp->plane + (size_t)(y_lo * ld + lo);
      c->rows = (size_t)(y_hi - y_lo), c->n = (size_t)(hi - lo), c->to2 = 0, c->n2 = 0;
      /* stride 2, both column phases of these rows (their first input
         columns are 0 and 1, or ix0 and ix0 + 1): one pass */
      if (s == 2 && np == 2 && b == 1 && count >= 2 && first[count - 2].rows == c->rows &&
          first[count - 2].from / (size_t)width == c->from / (size_t)width &&
          first[count - 2].to / dp->plane == (size_t)(a * np)) {
        cp_dw_copy *e = &first[count - 2], pair = *c;
        const int even_first = e->from < c->from; /* plane (a, 0) holds the even columns */
        pair.from = even_first ? e->from : c->from;
        pair.to = even_first ? e->to : c->to, pair.n = even_first ? e->n : c->n;
        pair.to2 = even_first ? c->to : e->to, pair.n2 = even_first ? c->n : e->n;
        *e = pair;
        count--;
      }
    }
  }
  copy->n = count;
  return panel;
}

/* n elements of src row `from` (index of its first), `step` apart, as fp32. */
static void cp_dw_gather(const cp_run *r, const unsigned char *src, size_t from, size_t step,
                         size_t n, float *to) {
  const cp_plan *pl = r->pl;
  if (pl->dtype == CONVPOOL_FLOAT32) {
    const float *x = (const float *)(const void *)src + from;
    if (step == 1) {
      memcpy(to, x, n * sizeof(float));
    } else if (step == 2) {
      for (size_t i = 0; i < n; i++) to[i] = x[2 * i];
    } else {
      for (size_t i = 0; i < n; i++) to[i] = x[i * step];
    }
    return;
  }
  const uint16_t *x = (const uint16_t *)(const void *)src + from;
  if (step == 1) {
    r->widen(x, to, n);
  } else if (pl->dtype == CONVPOOL_BFLOAT16) {
    for (size_t i = 0; i < n; i++) to[i] = cp_bf16_to_float(x[i * step]);
  } else {
    for (size_t i = 0; i < n; i++) to[i] = cp_half_to_float(x[i * step]);
  }
}

/* Bytes of an item's staging: every phase plane's rows [0, ny + halo) of ld
   columns, then a vector (the flat sweep's last vector reads into it). */
static size_t cp_dw_stage_floats(const cp_dw_plan *dp, const cp_item *it) {
  const size_t planes = (size_t)(dp->phases * dp->phases);
  return (planes - 1) * dp->plane + (size_t)(it->ny + dp->halo) * dp->ld + CP_DW_MAX_LANES;
}

/* The staging of input channel c for an item: the panel's copies. The conv
   padding and the slack are zeros that the first block of the item wrote,
   the same for every channel. */
static void cp_dw_stage(const cp_run *r, const cp_item *it, const float *panel, int64_t c,
                        float *stage) {
  const cp_plan *pl = r->pl;
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const cp_dw_ukernel *uk = cp_dw_setup_of(pl->setup)->uk;
  const size_t plane = (size_t)pl->height * (size_t)pl->width, ld = dp->ld;
  const unsigned char *image =
      r->src + ((size_t)it->b * (size_t)pl->c_in + (size_t)c) * plane * pl->elem_size;
  const cp_dw_copy *copy =
      (const cp_dw_copy *)(const void *)((const ptrdiff_t *)(const void *)panel + pl->k * pl->k);
  const size_t count = copy->n;
  for (const cp_dw_copy *e = copy + 1; e < copy + 1 + count; e++) {
    if (e->to2 != 0) { /* a stride-2 pair */
      if (pl->dtype == CONVPOOL_FLOAT32) {
        uk->split2((const float *)(const void *)image + e->from, e->from_ld, stage + e->to,
                   stage + e->to2, ld, e->rows, e->n, e->n2);
        continue;
      }
      for (size_t y = 0; y < e->rows; y++) {
        cp_dw_gather(r, image, e->from + y * e->from_ld, 2, e->n, stage + e->to + y * ld);
        cp_dw_gather(r, image, e->from + 1 + y * e->from_ld, 2, e->n2, stage + e->to2 + y * ld);
      }
      continue;
    }
    if (e->step <= 2 && pl->dtype == CONVPOOL_FLOAT32) {
      (e->step == 1 ? uk->rows : uk->rows2)((const float *)(const void *)image + e->from,
                                            e->from_ld, stage + e->to, ld, e->rows, e->n);
      continue;
    }
    for (size_t y = 0; y < e->rows; y++)
      cp_dw_gather(r, image, e->from + y * e->from_ld, e->step, e->n, stage + e->to + y * ld);
  }
}

/*
 * Channels in lanes: the block's CP_DW_LANES output channels side by side,
 * lane l reading input channel (co0 + l) / multiplier (the last channel's
 * for lanes past the block's). The staging is the item's input window,
 * position after position, zero where the conv padding is (written by the
 * item's first block; buf is kept between its blocks): each row of the
 * input's channels a transpose. A register tile is CP_DW_LANES_NP conv
 * positions, flat over the item's rows, and tap (i, j) of position (y, x)
 * is staged position (y * s + i * d, x * s + j * d): stride and dilation
 * are the tile's addresses, with no phase planes. The conv outputs stay in
 * lanes for the epilogue (cp_run_lanes).
 */
static const float *cp_dw_compute_lanes(const cp_run *r, const cp_item *it, const float *panel,
                                        int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const cp_dw_ukernel *uk = cp_dw_setup_of(pl->setup)->uk;
  const size_t L = CP_DW_LANES, NP = CP_DW_LANES_NP, ld = dp->ld, es = pl->elem_size;
  const size_t s = (size_t)pl->conv_stride, nx = (size_t)it->nx, total = (size_t)it->ny * nx;
  const size_t rows = (size_t)((it->ny - 1) * pl->conv_stride + pl->extent);
  const size_t cols = (nx - 1) * s + (size_t)pl->extent;
  float *stage = buf + dp->stage, *out = buf, *widen = buf + dp->widen;
  if (cb == it->cb0) memset(stage, 0, rows * ld * L * sizeof(float));
  size_t co0, channels;
  cp_block_channels(pl, cb, &co0, &channels);
  /* the window's input columns [lo, hi) inside the image, for every row */
  const int64_t iy0 = it->y0 * pl->conv_stride - pl->pad[CP_TOP];
  const int64_t ix0 = it->x0 * pl->conv_stride - pl->pad[CP_LEFT];
  const size_t lo = ix0 < 0 ? (size_t)-ix0 : 0;
  const int64_t right = pl->width - ix0 > 0 ? pl->width - ix0 : 0;
  const size_t hi = (size_t)right < cols ? (size_t)right : cols;
  const size_t plane = (size_t)pl->height * (size_t)pl->width;
  const size_t multiplier = (size_t)(pl->c_out / pl->c_in);
  const unsigned char *image = r->src + (size_t)it->b * (size_t)pl->c_in * plane * es;
  /* the window's rows inside the image, [ya, yb) of the staging; fp32 rows
     of the whole image width are one run each channel (their transposes
     span rows), else a run per row */
  const size_t ya = iy0 < 0 ? (size_t)-iy0 : 0;
  const int64_t below = pl->height - iy0 > 0 ? pl->height - iy0 : 0;
  const size_t yb = (size_t)below < rows ? (size_t)below : rows;
  const size_t width = hi - lo;
  const int whole = pl->dtype == CONVPOOL_FLOAT32 && width == (size_t)pl->width;
  for (size_t y = ya; y < yb && lo < hi; y += whole ? yb - ya : 1) {
    const size_t iy = (size_t)(iy0 + (int64_t)y);
    const float *src[CP_DW_LANES];
    for (size_t l = 0; l < L; l++) {
      const size_t c = (co0 + (l < channels ? l : channels - 1)) / multiplier;
      const unsigned char *row =
          image +
          ((c * (size_t)pl->height + iy) * (size_t)pl->width + (size_t)(ix0 + (int64_t)lo)) * es;
      if (pl->dtype == CONVPOOL_FLOAT32) {
        src[l] = (const float *)(const void *)row;
      } else {
        r->widen((const uint16_t *)(const void *)row, widen + l * ld, width);
        src[l] = widen + l * ld;
      }
    }
    uk->transpose(src, whole ? (yb - ya) * width : width, width, ld, stage + (y * ld + lo) * L);
  }
  /* the tiles, flat over the item's positions */
  const ptrdiff_t *off = (const ptrdiff_t *)(const void *)panel;
  const float *w =
      r->packed + cp_dw_setup_of(pl->setup)->lanes_weights + co0 * (size_t)(pl->k * pl->k);
  ptrdiff_t pos[CP_DW_LANES_NP];
  size_t y = 0, x = 0;
  for (size_t q = 0; q < total; q += NP) {
    const size_t n = total - q < NP ? total - q : NP;
    for (size_t p = 0; p < NP; p++) {
      if (p >= n) {
        pos[p] = pos[n - 1];
        continue;
      }
      pos[p] = (ptrdiff_t)((y * s * ld + x * s) * L);
      if (++x == nx) x = 0, y++;
    }
    uk->lanes_fn(stage, pos, off, (size_t)(pl->k * pl->k), w, out + q * L, n);
  }
  return out;
}

static const float *cp_dw_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                        int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  if (cp_run_lanes(r) > 0) return cp_dw_compute_lanes(r, it, panel, cb, buf);
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const cp_dw_ukernel *uk = cp_dw_setup_of(pl->setup)->uk;
  const size_t taps = (size_t)(pl->k * pl->k);
  float *stage = buf + dp->stage;
  size_t co0, channels;
  cp_block_channels(pl, cb, &co0, &channels);
  if (cb == it->cb0) /* the item's padding; buf is kept between its blocks */
    memset(stage, 0, cp_dw_stage_floats(dp, it) * sizeof(float));
  cp_dw_stage(r, it, panel, cp_block_group(pl, cb), stage);
  /* Flat over the rows (p = y * ld + x, the positions between rows
     discarded). Compact rows: narrow ones packed by the kernel's stores
     (its vectors span rows), wide ones moved together after the sweep. */
  const ptrdiff_t *off = (const ptrdiff_t *)(const void *)panel;
  const size_t nx = (size_t)it->nx, ny = (size_t)it->ny;
  for (size_t m = 0; m < channels; m++) {
    const float *w = r->packed + (co0 + m) * taps;
    float *out = buf + m * pl->buf_cols;
    if (dp->compact && nx <= CP_DW_NARROW) {
      uk->compact(stage, off, taps, w, (ny - 1) * dp->ld + nx, dp->ld, nx, out);
      continue;
    }
    uk->fn(stage, off, taps, w, 1, (ny - 1) * dp->ld + nx, 0, out, 0);
    if (dp->compact) uk->rows(out + dp->ld, dp->ld, out + nx, nx, ny - 1, nx);
  }
  return buf;
}

static void cp_dw_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_dw_plan *dp = CP_ALGO_STATE(const cp_dw_plan, pl->state);
  const cp_dw_setup *s = cp_dw_setup_of(pl->setup);
  if (pl->lanes > 0) {
    snprintf(text, capacity,
             "register tile  %d output channels (in the lanes) x %d positions, flat over the "
             "item's rows; %lld channel blocks across the groups (multiplier %lld)\n"
             "staging        %lld pooled rows x %lld pooled columns: conv %lld rows x %lld "
             "columns, the input window of %lld rows x %zu columns, %d channels per position, "
             "staged per channel block into the tile buffer (stride %lld, dilation %lld: "
             "addresses)\n",
             CP_DW_LANES, CP_DW_LANES_NP, (long long)pl->co_blocks,
             (long long)(pl->c_out / pl->c_in), (long long)pl->group, (long long)pl->col_block,
             (long long)pl->conv_rows, (long long)pl->conv_cols,
             (long long)((pl->conv_rows - 1) * pl->conv_stride + pl->extent), dp->ld, CP_DW_LANES,
             (long long)pl->conv_stride, (long long)pl->dilation);
    return;
  }
  snprintf(text, capacity,
           "register tile  1 output channel x %d positions (%d lanes), swept flat over rows of "
           "%zu; %lld channel blocks of up to %d output channels of one input channel "
           "(multiplier %lld)\n"
           "staging        %lld pooled rows x %lld pooled columns: conv %lld rows x %lld "
           "columns from %lldx%lld phase planes of %lld rows x %zu (stride %lld, dilation "
           "%lld), staged per channel block into the tile buffer\n",
           s->uk->nr, s->uk->lanes, dp->ld, (long long)pl->co_blocks, pl->setup->co_block,
           (long long)(pl->c_out / pl->c_in), (long long)pl->group, (long long)pl->col_block,
           (long long)pl->conv_rows, (long long)pl->conv_cols, (long long)dp->phases,
           (long long)dp->phases, (long long)(pl->conv_rows + dp->halo), dp->ld,
           (long long)pl->conv_stride, (long long)pl->dilation);
}

const cp_algorithm cp_algorithm_depthwise = {
    .name = "depthwise",
    .id = CONVPOOL_ALGO_DEPTHWISE,
    .declines = cp_dw_declines,
    .setup = cp_dw_setup_layer,
    .pack_weights = cp_dw_pack_weights,
    .layout = cp_dw_layout,
    .item_units = cp_dw_item_units,
    .geometry = cp_dw_geometry,
    .fits = cp_dw_fits,
    .cost = cp_dw_cost,
    .worth_splitting_to = cp_dw_worth_splitting_to,
    .pack_item = cp_dw_pack_item,
    .compute_block = cp_dw_compute_block,
    .describe = cp_dw_describe,
};
