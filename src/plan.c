/*
 * The plan (see plan.h): shapes and their byte counts, then the item size.
 * The algorithm's geometry says what an item of g pooled rows x cw conv
 * columns costs in panel and tile-buffer bytes; the plan keeps the item that
 * fits the per-ISA budgets (config.c) with the lowest modelled cost, then
 * splits the work into enough items for the threads.
 */
#include "plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "driver.h"

static convpool_status cp_check_positive(const char *name, int64_t value) {
  if (value < 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s = %lld must be >= 1", name, (long long)value);
  return CONVPOOL_SUCCESS;
}

static int cp_fits(const cp_plan *pl) {
  return pl->panel_bytes <= pl->panel_budget && pl->buf_bytes <= pl->buf_budget;
}

/* Modelled cost per conv position the item advances over: microkernel lanes
   plus copying. */
static double cp_cost(const cp_plan *pl) {
  double tiles = (double)(pl->buf_cols / (size_t)pl->uk->nr);
  double lanes = tiles * pl->uk->nr * (double)pl->c_steps * (double)(pl->k * pl->k) *
                 (double)((pl->co_blocks - 1) * pl->uk->mr + pl->uk_tail->mr);
  double copy = pl->cfg->copy_cost * (double)pl->panel_floats;
  return (lanes + copy) /
         ((double)pl->group * (double)pl->col_block * (double)pl->stride * (double)pl->stride);
}

/* The largest conv extent of `n` pooled outputs along a side of `conv`. */
static int64_t cp_conv_extent(int64_t n, int64_t pool, int64_t stride, int64_t conv) {
  const int64_t e = (n - 1) * stride + pool;
  return e < conv ? e : conv;
}

/* Item size: g pooled rows x n pooled columns; the algorithm's geometry for
   its conv region. 0 on overflow. */
static int cp_item_size(cp_plan *pl, int64_t g, int64_t n) {
  pl->group = g, pl->col_block = n;
  pl->conv_rows = cp_conv_extent(g, pl->pool, pl->stride, pl->oh);
  pl->conv_cols = cp_conv_extent(n, pl->pool, pl->stride, pl->ow);
  return pl->algo->geometry(pl, pl->conv_rows, pl->conv_cols);
}

/*
 * Choose the item: column blocks are the whole pooled row or multiples of
 * lcm(stride, NR) / stride pooled columns (so an item advances a multiple of
 * NR conv columns); for each, the most pooled rows that fit the budgets (or
 * the forced rows per item); keep the cheapest by the cost model. Then make
 * enough items for the threads: fewer rows per item first, then channel groups.
 */
static convpool_status cp_choose_items(cp_plan *pl, int64_t forced) {
  int (*geometry)(cp_plan *, int64_t, int64_t) = cp_item_size;
  const int64_t nr = pl->uk->nr;
  int64_t a = pl->stride, b = nr;
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t step = nr / a; /* lcm(stride, NR) / stride */
  if (forced > pl->ph)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %lld exceeds the %lld pooled rows",
                   (long long)forced, (long long)pl->ph);
  double best_cost = 0;
  int64_t best_g = 0, best_cw = 0;
  for (int64_t m = 0; m <= pl->cfg->max_col_multiples; m++) {
    int64_t cw = m == 0 ? pl->pw : m * step;
    if (m > 0 && cw >= pl->pw) break;
    int64_t g = forced > 0 ? forced : 1;
    if (!geometry(pl, g, cw) || (forced == 0 && !cp_fits(pl))) continue;
    if (forced == 0) { /* grow the row group while it fits */
      int64_t lo = 1, hi = pl->ph;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (geometry(pl, mid, cw) && cp_fits(pl))
          lo = mid;
        else
          hi = mid - 1;
      }
      g = lo;
      if (!geometry(pl, g, cw)) continue;
    }
    double cost = cp_cost(pl);
    if (best_g == 0 || cost < best_cost) best_cost = cost, best_g = g, best_cw = cw;
  }
  if (best_g == 0) { /* nothing fits the budgets: the smallest item, reported over budget */
    best_g = forced > 0 ? forced : 1;
    best_cw = step < pl->pw ? step : pl->pw;
  }
  if (!geometry(pl, best_g, best_cw))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                   (long long)pl->c_in);
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  pl->col_blocks = (pl->pw + pl->col_block - 1) / pl->col_block;
  for (;;) {
    pl->row_groups = (pl->ph + pl->group - 1) / pl->group;
    if (forced > 0 || pl->group == 1 || pl->batch * pl->row_groups * pl->col_blocks >= target)
      break;
    int64_t g = pl->group - 1;
    int64_t want_groups = (target + pl->batch * pl->col_blocks - 1) / (pl->batch * pl->col_blocks);
    int64_t g_items = (pl->ph + want_groups - 1) / want_groups;
    if (g_items < g) g = g_items;
    if (!geometry(pl, g, pl->col_block))
      return cp_fail(CONVPOOL_INTERNAL_ERROR, "panel geometry failed for %lld rows", (long long)g);
  }
  return CONVPOOL_SUCCESS;
}

/* The item size (the algorithm's own choice, or the search above), then
   channel groups until there are enough items for the threads. */
static convpool_status cp_choose_blocks(cp_plan *pl, int64_t forced) {
  const convpool_status st = pl->algo->choose_items != NULL ? pl->algo->choose_items(pl, forced)
                                                            : cp_choose_items(pl, forced);
  if (st != CONVPOOL_SUCCESS) return st;
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  int64_t panels = pl->batch * pl->row_groups * pl->col_blocks;
  int64_t groups = panels >= target ? 1 : (target + panels - 1) / panels;
  if (groups > pl->co_blocks) groups = pl->co_blocks;
  pl->co_blocks_per_group = (pl->co_blocks + groups - 1) / groups;
  pl->co_groups = (pl->co_blocks + pl->co_blocks_per_group - 1) / pl->co_blocks_per_group;
  pl->items = panels * pl->co_groups;
  return CONVPOOL_SUCCESS;
}

/* Byte count of a [d0, d1, d2, d3] tensor, or 0 if it overflows (or exceeds PTRDIFF_MAX). */
static int cp_tensor_bytes(int64_t d0, int64_t d1, int64_t d2, int64_t d3, size_t elem,
                           size_t *bytes) {
  size_t n;
  return cp_mul((size_t)d0, (size_t)d1, &n) && cp_mul(n, (size_t)d2, &n) &&
         cp_mul(n, (size_t)d3, &n) && cp_mul(n, elem, bytes) && *bytes <= (size_t)PTRDIFF_MAX;
}

/*
 * torch's pooling_output_shape: n = div_rtn(conv + pad_lo + pad_hi - pool
 * (+ stride - 1 with ceil), stride) + 1, then with ceil a last window that
 * would start in the bottom/right padding is dropped. So ceil sizing keeps one
 * partial window where the window is larger than the padded side, floor
 * sizing none. With pads below the window every window kept holds a conv
 * output. conv < 2^62 (src bytes) and pool, stride <= 2^40 (convpool.h): no
 * term overflows.
 */
int64_t cp_pooled_size(int64_t conv, int64_t pool, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                       int ceil_mode) {
  const int64_t span = conv + pad_lo + pad_hi - pool + (ceil_mode ? stride - 1 : 0);
  if (span < 0) return 0; /* div_rtn < 0: not even one window */
  int64_t n = span / stride + 1;
  if (ceil_mode && (n - 1) * stride >= conv + pad_lo) n--;
  return n;
}

static convpool_status cp_plan_run(const cp_layer *layer, const cp_algorithm *algo, int auto_choice,
                                   const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                                   int64_t batch, int64_t height, int64_t width, cp_plan *pl);

convpool_status cp_plan_make(const cp_layer *layer, const cp_algorithm *algo,
                             const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                             int64_t batch, int64_t height, int64_t width, cp_plan *pl) {
  return cp_plan_run(layer, algo, 0, setup, threads, rows_per_item, batch, height, width, pl);
}

convpool_status cp_plan_make_auto(const cp_layer *layer, const cp_algorithm *algo,
                                  const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                                  int64_t batch, int64_t height, int64_t width, cp_plan *pl) {
  return cp_plan_run(layer, algo, 1, setup, threads, rows_per_item, batch, height, width, pl);
}

static convpool_status cp_plan_run(const cp_layer *layer, const cp_algorithm *algo, int auto_choice,
                                   const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                                   int64_t batch, int64_t height, int64_t width, cp_plan *pl) {
  convpool_status st;
  if ((st = cp_check_positive("batch", batch)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("height", height)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("width", width)) != CONVPOOL_SUCCESS) return st;
  memset(pl, 0, sizeof *pl);
  pl->dtype = layer->dtype;
  pl->batch = batch, pl->c_in = layer->c_in, pl->c_out = layer->c_out;
  pl->height = height, pl->width = width, pl->k = layer->k;
  pl->pool = layer->pool, pl->stride = layer->stride;
  memcpy(pl->pad, layer->pad, sizeof pl->pad);
  memcpy(pl->pool_pad, layer->pool_pad, sizeof pl->pool_pad);
  pl->act_min = layer->act_min, pl->act_max = layer->act_max, pl->ceil_mode = layer->ceil_mode;
  pl->elem_size = convpool_dtype_size(layer->dtype);
  if (!cp_tensor_bytes(batch, layer->c_in, height, width, pl->elem_size, &pl->src_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "src [%lld, %lld, %lld, %lld] has a byte count that overflows", (long long)batch,
                   (long long)layer->c_in, (long long)height, (long long)width);
  /* height, width < 2^62 (src bytes) and pads <= 2^24: these sums do not overflow */
  const int64_t padded_h = height + layer->pad[CP_TOP] + layer->pad[CP_BOTTOM];
  const int64_t padded_w = width + layer->pad[CP_LEFT] + layer->pad[CP_RIGHT];
  if (padded_h < layer->k || padded_w < layer->k) {
    if (layer->pad[0] == 0 && layer->pad[1] == 0 && layer->pad[2] == 0 && layer->pad[3] == 0)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                     "input %lldx%lld is smaller than the filter k = %lld", (long long)height,
                     (long long)width, (long long)layer->k);
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "padded input %lldx%lld is smaller than the filter k = %lld",
                   (long long)padded_h, (long long)padded_w, (long long)layer->k);
  }
  pl->oh = padded_h - layer->k + 1;
  pl->ow = padded_w - layer->k + 1;
  pl->ph = cp_pooled_size(pl->oh, layer->pool, layer->stride, layer->pool_pad[CP_TOP],
                          layer->pool_pad[CP_BOTTOM], layer->ceil_mode);
  pl->pw = cp_pooled_size(pl->ow, layer->pool, layer->stride, layer->pool_pad[CP_LEFT],
                          layer->pool_pad[CP_RIGHT], layer->ceil_mode);
  if (pl->ph < 1 || pl->pw < 1)
    return cp_fail(
        CONVPOOL_INVALID_ARGUMENT, "pool = %lld is larger than the conv output %lldx%lld%s",
        (long long)layer->pool, (long long)pl->oh, (long long)pl->ow,
        layer->pool_pad[0] || layer->pool_pad[1] || layer->pool_pad[2] || layer->pool_pad[3]
            ? " with its pool padding"
            : "");
  if (!cp_tensor_bytes(batch, layer->c_out, pl->ph, pl->pw, pl->elem_size, &pl->dst_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "dst [%lld, %lld, %lld, %lld] has a byte count that overflows", (long long)batch,
                   (long long)layer->c_out, (long long)pl->ph, (long long)pl->pw);

  const cp_cpu *cpu = cp_cpu_get();
  pl->algo = algo;
  if (auto_choice && algo->hands_over != NULL && algo->hands_over(layer, batch, pl->oh, pl->ow)) {
    pl->handed_over = algo;
    pl->algo = algo->hand_over_to;
  }
  pl->uk = setup->uk;
  pl->uk_tail = setup->uk_tail;
  pl->cfg = cp_blocking_for(setup->uk->isa);
  pl->c_steps = (layer->c_in + setup->uk->cpack - 1) / setup->uk->cpack;
  pl->co_blocks = (layer->c_out + setup->uk->mr - 1) / setup->uk->mr;
  pl->threads = threads;
  pl->packed_weight_bytes = setup->packed_weight_bytes;
  pl->weight_block_bytes = setup->weight_block_bytes;
  pl->panel_budget = cpu->l2 / pl->cfg->panel_l2_div;
  pl->buf_budget = cpu->l2 / pl->cfg->buf_l2_div;
  if ((st = cp_choose_blocks(pl, rows_per_item)) != CONVPOOL_SUCCESS) return st;
  /* the epilogue's row: column maxima of a window, then the pooled outputs */
  pl->row_bytes = (size_t)(pl->conv_cols + pl->col_block) * sizeof(float);
  if (!cp_add(cp_round_up(pl->panel_bytes, CP_CACHE_LINE),
              cp_round_up(pl->buf_bytes, CP_CACHE_LINE), &pl->scratch_bytes) ||
      !cp_add(pl->scratch_bytes, cp_round_up(pl->row_bytes, CP_CACHE_LINE), &pl->scratch_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "scratch size overflows");
  return CONVPOOL_SUCCESS;
}

void cp_plan_describe(const cp_plan *pl, convpool_dtype dtype, const char *choice,
                      const char *epilogue, char *text, size_t capacity) {
  const cp_cpu *cpu = cp_cpu_get();
  char sweep[256], act[96];
  pl->algo->describe(pl, sweep, sizeof sweep);
  if (pl->act_min == -INFINITY && pl->act_max == INFINITY)
    snprintf(act, sizeof act, "none");
  else if (pl->act_min == 0.0f && pl->act_max == INFINITY)
    snprintf(act, sizeof act, "relu");
  else
    snprintf(act, sizeof act, "clamp [%.9g, %.9g]", (double)pl->act_min, (double)pl->act_max);
  snprintf(
      text, capacity,
      "algorithm      %s, kernel %s\n"
      "%s"
      "isa            %s (detected %s%s)\n"
      "caches         L1d %zu KiB, L2 %zu KiB, L3 %zu KiB (%s)\n"
      "shape          src [%lld, %lld, %lld, %lld] %s -> conv %lldx%lld -> pool %lld -> dst "
      "[%lld, %lld, %lld, %lld]\n"
      "padding        conv %lld,%lld,%lld,%lld (top,left,bottom,right); pool window %lld stride "
      "%lld padding %lld,%lld,%lld,%lld\n"
      "activation     %s\n"
      "pool sizing    %s\n"
      "register tile  %d output channels x %d positions; %lld channel blocks (last: %s)\n"
      "panel          %lld pooled rows x %lld pooled columns: conv %lld rows (%lld input rows) x "
      "%lld columns x %lld channels, %s\n"
      "work items     %lld = batch %lld x row groups %lld x column blocks %lld x channel "
      "groups %lld (%lld blocks each)\n"
      "epilogue       %s\n"
      "threads        %d\n"
      "packed weights %zu bytes (%zu per channel block)\n"
      "panel          %zu bytes per thread (budget L2/%u = %zu: %s)\n"
      "tile buffer    %zu bytes per thread (budget L2/%u = %zu: %s)\n"
      "scratch        %zu bytes per thread, %zu in all\n",
      pl->algo->name, pl->uk->name, choice, cp_isa_name(pl->uk->isa), cp_isa_name(cpu->detected),
      cpu->isa_cap_ignored ? "; CONVPOOL_ISA not recognised, ignored" : "", cpu->l1d >> 10,
      cpu->l2 >> 10, cpu->l3 >> 10, cpu->caches_from_cpuid ? "cpuid" : "fallback values",
      (long long)pl->batch, (long long)pl->c_in, (long long)pl->height, (long long)pl->width,
      convpool_dtype_name(dtype), (long long)pl->oh, (long long)pl->ow, (long long)pl->pool,
      (long long)pl->batch, (long long)pl->c_out, (long long)pl->ph, (long long)pl->pw,
      (long long)pl->pad[0], (long long)pl->pad[1], (long long)pl->pad[2], (long long)pl->pad[3],
      (long long)pl->pool, (long long)pl->stride, (long long)pl->pool_pad[0],
      (long long)pl->pool_pad[1], (long long)pl->pool_pad[2], (long long)pl->pool_pad[3], act,
      pl->ceil_mode ? "ceil" : "floor", pl->uk->mr, pl->uk->nr, (long long)pl->co_blocks,
      pl->uk_tail->name, (long long)pl->group, (long long)pl->col_block, (long long)pl->conv_rows,
      (long long)pl->panel_rows, (long long)pl->conv_cols, (long long)pl->c_in, sweep,
      (long long)pl->items, (long long)pl->batch, (long long)pl->row_groups,
      (long long)pl->col_blocks, (long long)pl->co_groups, (long long)pl->co_blocks_per_group,
      epilogue, pl->threads, pl->packed_weight_bytes, pl->weight_block_bytes, pl->panel_bytes,
      pl->cfg->panel_l2_div, pl->panel_budget,
      pl->panel_bytes <= pl->panel_budget ? "fits" : "over budget", pl->buf_bytes,
      pl->cfg->buf_l2_div, pl->buf_budget, pl->buf_bytes <= pl->buf_budget ? "fits" : "over budget",
      pl->scratch_bytes, pl->scratch_bytes * (size_t)pl->threads);
}
