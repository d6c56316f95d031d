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

static convpool_status cp_check_positive(const char *name, int64_t value) {
  if (value < 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s = %lld must be >= 1", name, (long long)value);
  return CONVPOOL_SUCCESS;
}

/* Pooled outputs per item unit: the fewest whose conv extent advances by a
   multiple of `conv_unit` conv outputs, i.e. lcm(conv_unit, stride) / stride. */
static int64_t cp_pooled_unit(int64_t conv_unit, int64_t stride) {
  return conv_unit / cp_gcd(stride, conv_unit);
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
  pl->conv_rows = cp_conv_extent(g < pl->ph ? g : pl->ph, pl->pool, pl->stride, pl->oh);
  pl->conv_cols = cp_conv_extent(n < pl->pw ? n : pl->pw, pl->pool, pl->stride, pl->ow);
  return pl->algo->geometry(pl);
}

/* A later candidate of the item search (fewer columns, fewer rows) replaces
   the best so far only when its modelled cost is this much lower: the model
   counts lanes and copies, not the fixed costs of more, shorter sweeps (64 ->
   64 1x1 at 56x56: 14 x 32 items model 0.03% cheaper than 7 x 56 and run 40%
   slower). */
#define CP_PLAN_COST_MARGIN 0.02

double cp_rows_cost(const cp_plan *pl, double (*item_cost)(const cp_plan *pl)) {
  const double full = item_cost(pl);
  const int64_t g = pl->group < pl->ph ? pl->group : pl->ph, last_rows = pl->ph % g;
  if (last_rows == 0) return full;
  cp_plan last = *pl;
  if (!cp_item_size(&last, last_rows, pl->col_block)) return full;
  return (full * (double)(pl->ph - last_rows) + item_cost(&last) * (double)last_rows) /
         (double)pl->ph;
}

static int cp_fits(const cp_plan *pl) {
  if (pl->algo->fits != NULL) return pl->algo->fits(pl);
  return pl->panel_bytes <= pl->panel_budget && pl->buf_bytes <= pl->buf_budget;
}

/* --show-tiling's word on one budget. */
static const char *cp_budget_verdict(const cp_plan *pl, int within) {
  if (within) return "fits";
  return pl->algo->fits != NULL && cp_fits(pl) ? "over, within the algorithm's own rule (fits)"
                                               : "over budget";
}

/* The size of an item of g pooled rows x n pooled columns, if it fits. */
static int cp_item_fits(cp_plan *pl, int64_t g, int64_t n) {
  return cp_item_size(pl, g, n) && cp_fits(pl);
}

/*
 * Image regions (batch groups x row groups x column blocks) for a target of
 * items, the rest of them channel groups. Each item streams the weights of
 * its channel blocks, and each channel group reads its region's input again
 * (packs it, or reads what a phase before the items prepared): where the
 * packed weights do not outweigh an image's input, the regions are the whole
 * target (rows split, no channel groups); where they do (deep layers, small
 * images), as few regions as the channel blocks allow. An algorithm that
 * says what its channel groups read (group_input_bytes: A, Winograd's V of
 * the image) and which weights its items stream (streamed_weight_bytes: W)
 * gets R regions x G channel groups by the R x W + G x A bytes they read,
 * the R of 2, 4, ..., target with the fewest, where they are at least
 * CP_REGIONS_MARGIN fewer than with the fewest regions (the bytes are not
 * all there is: a phase before the items and uneven row groups cost too).
 * Winograd 128 -> 256 at 56x56 (U 4.5 MiB, V of the image 3.9 MiB, 31%
 * fewer bytes), Intel Xeon (2 MiB of L2), 2 threads, CLI medians,
 * alternating: 1 region x 8 channel groups 2.90-3.23 ms, 2 x 4 2.46-2.63;
 * F(2x2, 3x3) 128 -> 128 at 28x28 (17% fewer) 2 x 4 424-425 us, 4 x 2
 * 534-535.
 */
#define CP_REGIONS_MARGIN 0.25
static int64_t cp_regions_wanted(const cp_plan *pl, int64_t target) {
  const double image = (double)pl->c_in *
                       (double)(pl->height + pl->pad[CP_TOP] + pl->pad[CP_BOTTOM]) *
                       (double)(pl->width + pl->pad[CP_LEFT] + pl->pad[CP_RIGHT]) * sizeof(float);
  if ((double)pl->setup->packed_weight_bytes <= image) return target;
  int64_t fewest = 0, best = 0;
  double fewest_bytes = 0, best_bytes = 0;
  for (int64_t r = 1;; r *= 2) {
    const int64_t regions = r < target ? r : target;
    int64_t groups = (target + regions - 1) / regions;
    if (groups > pl->co_blocks) groups = pl->co_blocks;
    const int64_t wanted = (target + groups - 1) / groups; /* regions for those groups */
    if (r == 1) fewest = wanted;
    if (pl->algo->group_input_bytes == NULL || pl->algo->streamed_weight_bytes == NULL) break;
    const double bytes = (double)wanted * (double)pl->algo->streamed_weight_bytes(pl) +
                         (double)groups * pl->algo->group_input_bytes(pl);
    if (r == 1) fewest_bytes = bytes;
    if (r == 1 || bytes < best_bytes) best = wanted, best_bytes = bytes;
    if (regions == target) break;
  }
  return best > 0 && best_bytes < fewest_bytes * (1.0 - CP_REGIONS_MARGIN) ? best : fewest;
}

/*
 * The same row groups with their rows spread evenly (in whole units), where
 * the algorithm's model finds the largest item no slower and all of them
 * together at most 5% dearer (wasted lanes): the threads' items then end
 * together. On a VM presenting an EPYC of family 23 (2 threads, best CLI
 * medians of 4 alternating rounds): 128 -> 256 3x3 stride 2 at 28x28
 * (direct, a region per thread) row groups of 8 and 6 rows -> 7 and 7,
 * 1.65 -> 1.43 ms (another round 1.95 -> 1.74); 3 -> 64 3x3 at 224x224
 * (shift-reduce) 24 -> 23 rows, 2.85 -> 2.74 ms (3.47 -> 3.34); 8 images of
 * the ResNet stem 11 -> 10 rows, level. Shift-reduce's 1x1 stride-2 512 -> 1024 at
 * 28x28, 8 + 6 rows -> 7 + 7, 14 tiles of 16 positions where 13 were,
 * went 2.85 -> 3.33 ms: more than CP_EVEN_ROWS_MARGIN, kept.
 */
#define CP_EVEN_ROWS_MARGIN 0.05
static void cp_even_rows(cp_plan *pl, int64_t unit) {
  if (pl->row_groups < 2) return;
  int64_t g = (pl->ph + pl->row_groups - 1) / pl->row_groups;
  g = (g + unit - 1) / unit * unit;
  if (g >= pl->group) return;
  cp_plan trial = *pl;
  if (!cp_item_size(&trial, g, pl->col_block)) return;
  trial.row_groups = (pl->ph + g - 1) / g;
  /* the same items: the largest one's modelled time (cp_items_time) no
     longer, all of them together at most CP_EVEN_ROWS_MARGIN more */
  const double cost = pl->algo->cost(pl), even = pl->algo->cost(&trial);
  if (trial.row_groups == pl->row_groups && even * (double)g <= cost * (double)pl->group &&
      even <= cost * (1.0 + CP_EVEN_ROWS_MARGIN))
    *pl = trial;
}

/*
 * Choose the item, one search for every algorithm: items start on whole
 * units of the algorithm (item_units: conv rows and columns, as pooled rows
 * and columns); column blocks are the whole pooled row or multiples of the
 * column unit; for each, the most row units that fit the budgets (or the
 * forced rows per item, rounded up to the unit); keep the cheapest by the
 * algorithm's cost model. Then make enough items for the threads: fewer
 * rows per item while the algorithm finds the smaller items worth it (the
 * plan then makes channel groups), and at least min_regions image regions
 * (batch groups x row groups x column blocks) where the rows allow.
 */
static convpool_status cp_choose_items(cp_plan *pl, int64_t forced, int64_t min_regions,
                                       int64_t *searched, int64_t *unit_rows) {
  int64_t conv_rows_unit, conv_cols_unit;
  pl->algo->item_units(pl, &conv_rows_unit, &conv_cols_unit);
  const int64_t unit = cp_pooled_unit(conv_rows_unit, pl->stride);
  *unit_rows = unit, *searched = 0;
  const int64_t col_step = cp_pooled_unit(conv_cols_unit, pl->stride);
  if (forced > pl->ph)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %lld exceeds the %lld pooled rows",
                   (long long)forced, (long long)pl->ph);
  if (pl->images > 1) { /* items of whole images */
    pl->row_groups = 1, pl->col_blocks = 1;
    if (!cp_item_size(pl, pl->ph, pl->pw))
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                     (long long)pl->c_in);
    return CONVPOOL_SUCCESS;
  }
  int64_t fixed = 0;
  if (forced > 0) { /* whole units */
    fixed = (forced + unit - 1) / unit * unit;
    if (fixed > pl->ph) fixed = pl->ph;
  }
  const int64_t units = (pl->ph + unit - 1) / unit; /* row units of the output */
  double best_cost = 0;
  int64_t best_g = 0, best_n = 0;
  for (int64_t m = 0; m <= pl->cfg->max_col_multiples; m++) {
    const int64_t n = m == 0 ? pl->pw : m * col_step;
    if (m > 0 && n >= pl->pw) break;
    /* the forced rows, or the most row units that fit and down to half as
       many: fewer rows may divide the image into items that waste fewer
       kernel lanes (the cost weighs in the last, shorter item) */
    int64_t most = 0, fewest = 0;
    if (fixed == 0) {
      if (!cp_item_fits(pl, unit < pl->ph ? unit : pl->ph, n)) continue;
      int64_t lo = 1, hi = units;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (cp_item_fits(pl, mid * unit < pl->ph ? mid * unit : pl->ph, n))
          lo = mid;
        else
          hi = mid - 1;
      }
      most = lo, fewest = (lo + 1) / 2;
    }
    for (int64_t u = most; u >= fewest; u--) {
      const int64_t g = fixed > 0 ? fixed : (u * unit < pl->ph ? u * unit : pl->ph);
      if (u < most && !cp_item_fits(pl, g, n)) continue;
      if (!cp_item_size(pl, g, n)) continue;
      const double cost = pl->algo->cost(pl);
      if (best_g == 0 || cost < best_cost * (1.0 - CP_PLAN_COST_MARGIN))
        best_cost = cost, best_g = g, best_n = n;
    }
  }
  if (best_g == 0) { /* nothing fits the budgets: the smallest item, reported over budget */
    best_g = fixed > 0 ? fixed : (unit < pl->ph ? unit : pl->ph);
    best_n = col_step < pl->pw ? col_step : pl->pw;
  }
  if (!cp_item_size(pl, best_g, best_n))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                   (long long)pl->c_in);
  *searched = best_g;
  /* Items for the threads: regions by the bytes they read, channel groups
     for the rest (cp_choose_groups). */
  int64_t target = cp_regions_wanted(pl, (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads);
  if (target < min_regions) target = min_regions;
  pl->col_blocks = (pl->pw + pl->col_block - 1) / pl->col_block;
  for (;;) {
    pl->row_groups = (pl->ph + pl->group - 1) / pl->group;
    if (fixed > 0 || pl->group <= unit ||
        cp_batch_groups(pl) * pl->row_groups * pl->col_blocks >= target)
      break;
    /* as many row groups as the threads want, in whole units; if the
       algorithm finds items that small not worth it, items of one unit
       (whose data may fit a cache that the wanted ones overflow), else one
       unit fewer */
    const int64_t want = (target + cp_batch_groups(pl) * pl->col_blocks - 1) /
                         (cp_batch_groups(pl) * pl->col_blocks);
    const int64_t step = pl->group - unit;
    int64_t g = (pl->ph + want - 1) / want;
    g = (g + unit - 1) / unit * unit;
    if (g > step) g = step;
    const int64_t tries[3] = {g, unit < g ? unit : g, step};
    cp_plan trial = *pl;
    for (int i = 0; i < 3; i++) {
      g = tries[i];
      if (!cp_item_size(&trial, g, pl->col_block))
        return cp_fail(CONVPOOL_INTERNAL_ERROR, "panel geometry failed for %lld rows",
                       (long long)g);
      if (pl->algo->worth_splitting_to == NULL || pl->algo->worth_splitting_to(&trial)) break;
    }
    if (pl->algo->worth_splitting_to != NULL && !pl->algo->worth_splitting_to(&trial)) break;
    *pl = trial;
  }
  if (fixed == 0) cp_even_rows(pl, unit);
  return CONVPOOL_SUCCESS;
}

/* Channel groups until there are enough items for the threads. */
static void cp_choose_groups(cp_plan *pl) {
  const int64_t target = (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads;
  int64_t panels = cp_batch_groups(pl) * pl->row_groups * pl->col_blocks;
  int64_t groups = panels >= target ? 1 : (target + panels - 1) / panels;
  if (groups > pl->co_blocks) groups = pl->co_blocks;
  pl->co_blocks_per_group = (pl->co_blocks + groups - 1) / groups;
  pl->co_groups = (pl->co_blocks + pl->co_blocks_per_group - 1) / pl->co_blocks_per_group;
  pl->items = panels * pl->co_groups;
}

/* The work items of the algorithm's phase before the items, were it to
   schedule the plan (0: none). */
static int64_t cp_phase_items(const cp_plan *pl) {
  if (pl->algo->schedule == NULL) return 0;
  cp_plan scheduled = *pl;
  return pl->algo->schedule(&scheduled) ? scheduled.prepare_items : 0;
}

/* The modelled time of the plan's items: the cost per pooled output times a
   full item's outputs and share of the channel blocks times the items each
   thread runs, the last round counted whole (items are claimed one at a
   time). */
static double cp_items_time(const cp_plan *pl) {
  const int64_t rounds = (pl->items + pl->threads - 1) / pl->threads;
  const int64_t rows = pl->group < pl->ph ? pl->group : pl->ph;
  return pl->algo->cost(pl) * (double)rows * (double)pl->col_block *
         (double)pl->co_blocks_per_group / (double)pl->co_blocks * (double)rounds;
}

/*
 * The split makes row groups until they alone give the threads their items;
 * fewer, larger ones with channel groups may waste fewer kernel lanes and
 * balance the threads better (128 -> 512 1x1 at 28x28: 10 items of 3 rows,
 * 84 positions in 96 lanes, 5 rounds of 86 blocks, against 14 items of 4
 * rows and 43 blocks, 112 positions in 112 lanes, 7 rounds: 934 -> 833 us).
 * Keep the item size, between the split's and the search's, whose items the
 * model says the threads finish soonest, where neither has a phase before
 * the items: a phase adds a barrier and packs the input once per region for
 * the channel groups, which the model does not weigh (a 1x1 stride-2 layer
 * ran 15% slower with one, Winograd's 64 -> 64 at 56x56 6% slower with
 * items of twice the rows).
 */
static void cp_balance_items(cp_plan *pl, int64_t searched, int64_t unit) {
  if (cp_phase_items(pl) > 0) return;
  cp_plan best = *pl;
  double best_time = cp_items_time(pl);
  for (int64_t g = pl->group + unit; g < searched + unit; g += unit) {
    cp_plan trial = *pl;
    const int64_t rows = g < searched ? g : searched;
    if (!cp_item_size(&trial, rows, pl->col_block) || !cp_fits(&trial)) continue;
    trial.row_groups = (pl->ph + rows - 1) / rows;
    cp_choose_groups(&trial);
    if (cp_phase_items(&trial) > 0) continue;
    const double t = cp_items_time(&trial);
    if (t < best_time * (1.0 - CP_PLAN_COST_MARGIN)) best = trial, best_time = t;
  }
  *pl = best;
}

/*
 * Where the channel groups share a region prepared in a phase before the
 * items, a region per thread keeps what the phase writes on the thread that
 * reads it (the pool's home ranges give a thread a region's preparation and
 * its items alike), at the price of every thread reading all of the weights:
 * for the algorithms that say which weights their items read
 * (streamed_weight_bytes), while those are at most local_region_l2 L2s.
 * Measured on a host whose two cores share no cache (a round trip between
 * them of 500 ns), two libraries alternating in one process, before ->
 * after: Winograd 256 -> 256 at 14x14 (U 4 MiB) 0.50 -> 0.44 ms, 128 -> 256
 * at 56x56 (U 4.5 MiB) 2.46 -> 2.39; direct 3x3 stride 2 256 -> 512 at
 * 14x14 (4.5 MiB) 0.40 -> 0.37, 128 -> 256 at 28x28 0.355 -> 0.343. Not for
 * shift-reduce: its 1x1 stride-2 512 -> 1024 at 28x28 (2 MiB) went 0.71 ->
 * 0.79 ms (half as many positions per item in its 32-wide tiles). Larger
 * weights lose: Winograd 256 -> 512 at 28x28 (U 18 MiB) and 512 -> 512 at
 * 14x14 (36 MiB) ran 15-20% slower against oneDNN in the benchmark. Where
 * the cores share a cache (cp_cpu_cores_share_cache: a Zen 5 VM, 101 ns
 * round trip), only for the algorithms measured to gain there too
 * (local_regions_sharing_cache): Winograd F(2x2, 3x3) 256 -> 256 at 14x14,
 * region per thread / one region, medians of 60 runs with every cache
 * evicted before each: 0.35-0.45 / 0.30-0.42 ms, one region faster in 8 of
 * 10 alternating pairs (one level, one disturbed); hot 0.30-0.31 /
 * 0.255-0.264; 128 -> 256 at 56x56 level evicted, 3-4% slower hot, 128 ->
 * 128 at 28x28 and 256 -> 256 at 56x56 level (their plans keep their rows
 * for other reasons); direct keeps them (3x3 stride 2 256 -> 512 at 14x14 0.367-0.385 /
 * 0.370-0.398 ms evicted, 1.15-1.21 / 1.34 of oneDNN's time in two
 * benchmark runs; 64 -> 128 at 56x56 0.320-0.327 / 0.329-0.335).
 * Whatever the L2, at most CP_LOCAL_REGION_MAX_BYTES of weights: 8 L2s of
 * an Intel Xeon (2 MiB L2, cores sharing an L3 that gives one core ~29 GB/s
 * from 4 to 64 MiB) took direct 512 -> 512 3x3 at 7x7 (9.4 MB) into a
 * region per thread, 1.02-1.05 ms against 0.82-0.84 with one region (CLI
 * medians, 3 alternating turns). Where the cores share a cache, at most
 * CP_LOCAL_REGION_SHARED_MAX_BYTES: on that Xeon (its two cores sharing an
 * L3) direct 256 -> 512 3x3 stride 2 at 14x14 (4.7 MB) took 0.70-0.74 ms
 * with every cache evicted before each run against 0.58-0.61 with one
 * region (hot 0.407-0.410 / 0.392-0.393), 256 -> 256 at 14x14 (2.4 MB)
 * 0.87-0.88 / 0.82-0.83 evicted, while 128 -> 256 stride 2 at 28x28 (1.2
 * MB) was level evicted and 361-365 / 417-431 us hot, and 64 -> 128 stride
 * 2 at 56x56 (295 KB) level; Zen 5 had measured the 4.7 MB one level.
 */
#define CP_LOCAL_REGION_MAX_BYTES ((double)(8u << 20))
#define CP_LOCAL_REGION_SHARED_MAX_BYTES ((double)(2u << 20))
static int cp_wants_local_regions(const cp_plan *pl) {
  if (pl->threads < 2 || pl->algo->streamed_weight_bytes == NULL ||
      pl->items / pl->co_groups >= pl->threads || cp_phase_items(pl) == 0)
    return 0;
  const double weights = (double)pl->algo->streamed_weight_bytes(pl);
  const int shared = cp_cpu_cores_share_cache(NULL) == 1;
  return weights <= (double)pl->cfg->local_region_l2 * (double)pl->l2_bytes &&
         weights <= CP_LOCAL_REGION_MAX_BYTES &&
         (!shared ||
          (pl->algo->local_regions_sharing_cache && weights <= CP_LOCAL_REGION_SHARED_MAX_BYTES));
}

/* The item size, then channel groups until there are enough items for the
   threads. */
static convpool_status cp_choose_blocks(cp_plan *pl, int64_t forced) {
  int64_t searched, unit;
  const cp_plan start = *pl;
  const convpool_status st = cp_choose_items(pl, forced, 0, &searched, &unit);
  if (st != CONVPOOL_SUCCESS) return st;
  cp_choose_groups(pl);
  if (forced == 0 && pl->images == 1 && pl->group < searched) cp_balance_items(pl, searched, unit);
  if (forced == 0 && cp_wants_local_regions(pl)) {
    cp_plan trial = start;
    if (cp_choose_items(&trial, 0, pl->threads, &searched, &unit) == CONVPOOL_SUCCESS) {
      cp_choose_groups(&trial);
      if (trial.items / trial.co_groups >= pl->threads) *pl = trial;
    }
  }
  return CONVPOOL_SUCCESS;
}

void cp_conv_span(int64_t q, int64_t n, int64_t pool, int64_t stride, int64_t pad, int64_t conv,
                  int64_t *lo, int64_t *count) {
  int64_t a = q * stride - pad, b = (q + n - 1) * stride - pad + pool;
  if (a < 0) a = 0;
  if (b > conv) b = conv;
  *lo = a, *count = b - a;
}

cp_item cp_item_of(const cp_plan *pl, int64_t item) {
  cp_item it;
  const int64_t cg = item % pl->co_groups;
  item /= pl->co_groups;
  const int64_t cbk = item % pl->col_blocks;
  item /= pl->col_blocks;
  const int64_t rg = item % pl->row_groups;
  it.b = item / pl->row_groups * pl->images;
  it.nb = pl->batch - it.b < pl->images ? pl->batch - it.b : pl->images;
  it.q0 = rg * pl->group;
  it.nq = pl->ph - it.q0 < pl->group ? pl->ph - it.q0 : pl->group;
  it.c0 = cbk * pl->col_block;
  it.nc = pl->pw - it.c0 < pl->col_block ? pl->pw - it.c0 : pl->col_block;
  cp_conv_span(it.q0, it.nq, pl->pool, pl->stride, pl->pool_pad[CP_TOP], pl->oh, &it.y0, &it.ny);
  cp_conv_span(it.c0, it.nc, pl->pool, pl->stride, pl->pool_pad[CP_LEFT], pl->ow, &it.x0, &it.nx);
  it.cb0 = cg * pl->co_blocks_per_group;
  it.cb1 = it.cb0 + pl->co_blocks_per_group < pl->co_blocks ? it.cb0 + pl->co_blocks_per_group
                                                            : pl->co_blocks;
  it.flags = 0;
  it.aux = NULL;
  return it;
}

/*
 * The regions share a workspace in rounds: as many regions at a time as fit
 * its share of L3 (at least one), so that what the phase writes is still in
 * L3 when the items read it. Items of a round of regions are consecutive
 * (cp_item_of: channel groups vary fastest), and so are the phase's items
 * (region-major in every algorithm's prepare). Where one region outgrows
 * the share (8 images of 512 -> 512 at 14x14 side by side, Winograd's V),
 * rounds still pack and transform each region once for all channel groups,
 * where every channel group's item would otherwise do it again.
 */
int cp_plan_share_regions(cp_plan *pl) {
  const int64_t regions = pl->items / pl->co_groups;
  const size_t region = cp_round_up(pl->panel_bytes, CP_CACHE_LINE);
  pl->prepare_items = 0, pl->shared_bytes = 0, pl->round_regions = 0;
  if (pl->co_groups == 1) return 1;
  const size_t budget = cp_cpu_get()->l3 / pl->cfg->shared_l3_div;
  int64_t round =
      region > 0 && budget / region < (size_t)regions ? (int64_t)(budget / region) : regions;
  if (round < 1) round = 1;
  if (!cp_mul((size_t)round, region, &pl->shared_bytes)) return 0;
  pl->prepare_items = regions, pl->round_regions = round;
  return 1;
}

int64_t cp_item_region(const cp_plan *pl, const cp_item *it) {
  return (it->b / pl->images * pl->row_groups + it->q0 / pl->group) * pl->col_blocks +
         it->c0 / pl->col_block;
}

size_t cp_region_offset(const cp_plan *pl, int64_t region) {
  return (size_t)(region % pl->round_regions) * cp_round_up(pl->panel_bytes, CP_CACHE_LINE);
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
                                   const cp_algo_setup *setup, const cp_handover *handover,
                                   int threads, int64_t rows_per_item, int64_t batch,
                                   int64_t height, int64_t width, cp_plan *pl);

convpool_status cp_plan_make(const cp_layer *layer, const cp_algorithm *algo,
                             const cp_algo_setup *setup, int threads, int64_t rows_per_item,
                             int64_t batch, int64_t height, int64_t width, cp_plan *pl) {
  return cp_plan_run(layer, algo, 0, setup, NULL, threads, rows_per_item, batch, height, width, pl);
}

convpool_status cp_plan_make_auto(const cp_layer *layer, const cp_algorithm *algo,
                                  const cp_algo_setup *setup, const cp_handover *handover,
                                  int threads, int64_t rows_per_item, int64_t batch, int64_t height,
                                  int64_t width, cp_plan *pl) {
  return cp_plan_run(layer, algo, 1, setup, handover, threads, rows_per_item, batch, height, width,
                     pl);
}

convpool_status cp_plan_shape(const cp_layer *layer, int64_t batch, int64_t height, int64_t width,
                              cp_plan *pl) {
  convpool_status st;
  if ((st = cp_check_positive("batch", batch)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("height", height)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("width", width)) != CONVPOOL_SUCCESS) return st;
  memset(pl, 0, sizeof *pl);
  pl->dtype = layer->dtype;
  pl->batch = batch, pl->c_in = layer->c_in, pl->c_out = layer->c_out;
  pl->height = height, pl->width = width, pl->k = layer->k;
  pl->pool = layer->pool, pl->stride = layer->stride;
  pl->conv_stride = layer->conv_stride, pl->dilation = layer->dilation;
  pl->groups = layer->groups, pl->extent = layer->extent;
  pl->has_residual = layer->has_residual;
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
  if (padded_h < layer->extent || padded_w < layer->extent) {
    char filter[96];
    if (layer->dilation == 1)
      snprintf(filter, sizeof filter, "the filter k = %lld", (long long)layer->k);
    else
      snprintf(filter, sizeof filter, "the dilated filter k = %lld, dilation = %lld (extent %lld)",
               (long long)layer->k, (long long)layer->dilation, (long long)layer->extent);
    if (layer->pad[0] == 0 && layer->pad[1] == 0 && layer->pad[2] == 0 && layer->pad[3] == 0)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input %lldx%lld is smaller than %s",
                     (long long)height, (long long)width, filter);
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "padded input %lldx%lld is smaller than %s",
                   (long long)padded_h, (long long)padded_w, filter);
  }
  pl->oh = (padded_h - layer->extent) / layer->conv_stride + 1;
  pl->ow = (padded_w - layer->extent) / layer->conv_stride + 1;
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
  if (layer->has_residual &&
      !cp_tensor_bytes(batch, layer->c_out, pl->oh, pl->ow, pl->elem_size, &pl->residual_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "residual [%lld, %lld, %lld, %lld] has a byte count that overflows",
                   (long long)batch, (long long)layer->c_out, (long long)pl->oh, (long long)pl->ow);
  return CONVPOOL_SUCCESS;
}

static convpool_status cp_plan_run(const cp_layer *layer, const cp_algorithm *algo, int auto_choice,
                                   const cp_algo_setup *setup, const cp_handover *handover,
                                   int threads, int64_t rows_per_item, int64_t batch,
                                   int64_t height, int64_t width, cp_plan *pl) {
  convpool_status st;
  if ((st = cp_plan_shape(layer, batch, height, width, pl)) != CONVPOOL_SUCCESS) return st;
  const cp_cpu *cpu = cp_cpu_get();
  pl->algo = algo;
  pl->setup = setup;
  pl->packed_offset = 0;
  if (auto_choice && algo->hands_over != NULL) {
    /* each algorithm the packed weights hold, in turn (none: NULL once) */
    for (int i = 0; i < CP_MAX_HANDOVERS; i++) {
      const cp_handover *h = handover != NULL ? &handover[i] : NULL;
      const cp_algorithm *own = h != NULL ? h->algo : NULL;
      if (i > 0 && own == NULL) break;
      const cp_algorithm *to =
          algo->hands_over(layer, cp_blocking_for(setup->isa), own, batch, pl->oh, pl->ow);
      if (to == NULL) continue;
      pl->handed_over = algo, pl->algo = to;
      if (to == own) /* with its own setup and weights */
        pl->setup = &h->setup, pl->packed_offset = h->packed_offset;
      break;
    }
  }
  setup = pl->setup;
  pl->kernel = setup->kernel, pl->positions = setup->positions;
  pl->cfg = cp_blocking_for(setup->isa);
  pl->co_block = setup->co_block, pl->lanes = setup->lanes, pl->block_groups = layer->groups;
  if (pl->algo->layout != NULL) pl->algo->layout(pl);
  pl->group_co_blocks = (layer->c_out / pl->block_groups + pl->co_block - 1) / pl->co_block;
  pl->co_blocks = pl->block_groups * pl->group_co_blocks;
  pl->threads = threads;
  pl->panel_budget = cpu->l2 / pl->cfg->panel_l2_div;
  pl->buf_budget = cpu->l2 / pl->cfg->buf_l2_div;
  pl->l1_bytes = cpu->l1d;
  pl->l2_bytes = cpu->l2;
  pl->images = 1;
  if (rows_per_item == 0 && pl->algo->images_per_item != NULL)
    pl->images = pl->algo->images_per_item(pl);
  if ((st = cp_choose_blocks(pl, rows_per_item)) != CONVPOOL_SUCCESS) return st;
  if (pl->algo->schedule != NULL && !pl->algo->schedule(pl))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "shared workspace size overflows");
  /* the epilogue's row: column maxima of a window, then the pooled outputs,
     then a residual row as fp32 */
  pl->row_bytes =
      (size_t)((pl->has_residual ? 2 : 1) * pl->conv_cols + pl->col_block) * sizeof(float);
  if (!cp_add(cp_round_up(pl->panel_bytes, CP_CACHE_LINE),
              cp_round_up(pl->buf_bytes, CP_CACHE_LINE), &pl->scratch_bytes) ||
      !cp_add(pl->scratch_bytes, cp_round_up(pl->row_bytes, CP_CACHE_LINE), &pl->scratch_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "scratch size overflows");
  return CONVPOOL_SUCCESS;
}

void cp_plan_describe(const cp_plan *pl, convpool_dtype dtype, const char *choice,
                      const char *epilogue, char *text, size_t capacity) {
  const cp_cpu *cpu = cp_cpu_get();
  char sweep[768], act[96], phase[256] = "", images[64] = "";
  if (pl->images > 1)
    snprintf(images, sizeof images, " groups of %lld images side by side", (long long)pl->images);
  if (pl->prepare_items > 0) {
    const int64_t regions = pl->items / pl->co_groups;
    char rounds[96] = "";
    if (pl->round_regions < regions)
      snprintf(rounds, sizeof rounds,
               "; in rounds of %lld of the %lld regions, each then its items",
               (long long)pl->round_regions, (long long)regions);
    snprintf(phase, sizeof phase,
             "first phase    %lld work items prepare what the channel groups share (%zu bytes), "
             "then a barrier%s\n",
             (long long)pl->prepare_items, pl->shared_bytes, rounds);
  }
  pl->algo->describe(pl, sweep, sizeof sweep);
  char cores[96] = ""; /* what the region-per-thread rule knows (cp_wants_local_regions) */
  if (pl->threads > 1) {
    double ns = 0.0;
    const int shared = cp_cpu_cores_share_cache(&ns);
    if (shared < 0)
      snprintf(cores, sizeof cores, " (whether the cores share a cache: not measured)");
    else
      snprintf(cores, sizeof cores, " (cores %s a cache: %.0f ns round trip)",
               shared ? "share" : "do not share", ns);
  }
  char reach[80] = "any stride";
  if (cpu->stride_reach > 0)
    snprintf(reach, sizeof reach, "strides up to %zu bytes (sr packs wider planes)",
             cpu->stride_reach);
  if (pl->act_min == -INFINITY && pl->act_max == INFINITY)
    snprintf(act, sizeof act, "none");
  else if (pl->act_min == 0.0f && pl->act_max == INFINITY)
    snprintf(act, sizeof act, "relu");
  else
    snprintf(act, sizeof act, "clamp [%.9g, %.9g]", (double)pl->act_min, (double)pl->act_max);
  snprintf(
      text, capacity,
      "algorithm      %s (%s), kernel %s\n"
      "%s"
      "isa            %s (detected %s%s)\n"
      "caches         L1d %zu KiB, L2 %zu KiB, L3 %zu KiB (%s); L1 stride prefetch: %s\n"
      "shape          src [%lld, %lld, %lld, %lld] %s -> conv %lldx%lld -> pool %lld -> dst "
      "[%lld, %lld, %lld, %lld]\n"
      "padding        conv %lld,%lld,%lld,%lld (top,left,bottom,right); pool window %lld stride "
      "%lld padding %lld,%lld,%lld,%lld\n"
      "conv           stride %lld, dilation %lld, groups %lld; %s\n"
      "activation     %s\n"
      "pool sizing    %s\n"
      "%s"
      "work items     %lld = batch %lld%s x row groups %lld x column blocks %lld x channel "
      "groups %lld (%lld blocks each)\n"
      "%s"
      "epilogue       %s\n"
      "threads        %d%s\n"
      "packed weights %zu bytes\n"
      "panel          %zu bytes per thread (budget L2/%u = %zu: %s)\n"
      "tile buffer    %zu bytes per thread (budget L2/%u = %zu: %s)\n"
      "scratch        %zu bytes per thread, %zu in all\n",
      pl->algo->name, cp_algorithm_short_name(pl->algo), pl->kernel, choice,
      cp_isa_name(pl->setup->isa), cp_isa_name(cpu->detected),
      cpu->isa_cap_ignored ? "; CONVPOOL_ISA not recognised, ignored" : "", cpu->l1d >> 10,
      cpu->l2 >> 10, cpu->l3 >> 10,
      cpu->l3_from_env > 0 ? (cpu->caches_from_cpuid ? "cpuid; L3 from CONVPOOL_L3_KIB"
                                                     : "fallback values; L3 from CONVPOOL_L3_KIB")
      : cpu->l3_from_env < 0
          ? (cpu->caches_from_cpuid ? "cpuid; CONVPOOL_L3_KIB not recognised, ignored"
                                    : "fallback values; CONVPOOL_L3_KIB not recognised, ignored")
      : cpu->caches_from_cpuid ? "cpuid"
                               : "fallback values",
      reach, (long long)pl->batch, (long long)pl->c_in, (long long)pl->height, (long long)pl->width,
      convpool_dtype_name(dtype), (long long)pl->oh, (long long)pl->ow, (long long)pl->pool,
      (long long)pl->batch, (long long)pl->c_out, (long long)pl->ph, (long long)pl->pw,
      (long long)pl->pad[0], (long long)pl->pad[1], (long long)pl->pad[2], (long long)pl->pad[3],
      (long long)pl->pool, (long long)pl->stride, (long long)pl->pool_pad[0],
      (long long)pl->pool_pad[1], (long long)pl->pool_pad[2], (long long)pl->pool_pad[3],
      (long long)pl->conv_stride, (long long)pl->dilation, (long long)pl->groups,
      pl->has_residual ? "a residual added before the activation" : "no residual", act,
      pl->ceil_mode ? "ceil" : "floor", sweep, (long long)pl->items, (long long)cp_batch_groups(pl),
      images, (long long)pl->row_groups, (long long)pl->col_blocks, (long long)pl->co_groups,
      (long long)pl->co_blocks_per_group, phase, epilogue, pl->threads, cores,
      pl->setup->packed_weight_bytes, pl->panel_bytes, pl->cfg->panel_l2_div, pl->panel_budget,
      cp_budget_verdict(pl, pl->panel_bytes <= pl->panel_budget), pl->buf_bytes,
      pl->cfg->buf_l2_div, pl->buf_budget, cp_budget_verdict(pl, pl->buf_bytes <= pl->buf_budget),
      pl->scratch_bytes, pl->scratch_bytes * (size_t)pl->threads);
}
