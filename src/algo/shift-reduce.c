/*
 * Shift-reduce: the item's input window is copied once into an fp32 panel
 * (bf16 channel pairs for the pair kernels), or read in place where it is a
 * window of a float32 source with no padding; the microkernel reads shifted
 * rows of it, so the im2col happens in registers. Tiles run per conv row, or
 * flat over the rows when rows are narrow (fewer tiles; the columns that run
 * into the k-1 halo are computed and discarded).
 *
 * A conv stride s is split off the filter (space to depth, pack.h): the
 * panel holds each input channel as min(s, k)^2 phase channels (rows and
 * columns s apart), over which the same kernels run a stride-1 conv with a
 * ceil(k/s) filter, the taps past k being zero. Those zero taps read inputs
 * of the next window, and 0 * inf is NaN: where an item's panel holds an
 * Inf or a NaN, the outputs the kernel made NaN are computed again by a
 * loop over the filter's own taps (cp_sr_exact_block). Conv groups: each
 * channel block contracts over its group's channels only, from the group's
 * first panel channel. Dilation is declined: the kernels read the k taps of
 * a filter row from consecutive panel columns.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sr-kernels.h"

/* The plan's own state: the panel of the item size. */
typedef struct cp_sr_plan {
  cp_panel_layout panel;
  int flat;     /* tiles run flat over the rows (narrow rows), not per row */
  int finish;   /* the kernels may finish outputs in dst (cp_sr_finishes) */
  size_t tiles; /* microkernel tiles per channel block of a full item */
} cp_sr_plan;
CP_ALGO_STATE_FITS(cp_sr_plan);
CP_ALGO_STATE_FITS(cp_sr_setup);

static const char *cp_sr_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                  size_t capacity) {
  (void)cpu;
  if (layer->dilation != 1) {
    snprintf(why, capacity,
             "shift-reduce reads a filter row's taps from consecutive input columns: dilation = "
             "%lld is im2col's",
             (long long)layer->dilation);
    return why;
  }
  return NULL;
}

/* The blocked weights of the setup's kernels for the layer. */
static cp_weight_blocks cp_sr_weight_blocks(const cp_layer *layer, const cp_sr_setup *s) {
  cp_weight_blocks wb;
  wb.c_out = layer->c_out, wb.c_in = layer->c_in, wb.k = layer->k;
  wb.mr = (size_t)s->uk->mr, wb.mr_tail = (size_t)s->uk_tail->mr, wb.cpack = (size_t)s->uk->cpack;
  wb.groups = layer->groups, wb.split = s->split;
  return wb;
}

convpool_status cp_sr_setup_kernels(const cp_layer *layer, const cp_cpu *cpu, convpool_dtype dtype,
                                    int64_t split, cp_algo_setup *setup) {
  cp_sr_setup *s = CP_ALGO_STATE(cp_sr_setup, setup->state);
  s->uk = dtype == CONVPOOL_BFLOAT16 ? cp_sr_ukernel_select(CONVPOOL_BFLOAT16, cpu->isa) : NULL;
  if (s->uk == NULL) s->uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, cpu->isa);
  if (s->uk == NULL)
    return cp_fail(CONVPOOL_UNSUPPORTED, "no %s kernel for isa %s",
                   convpool_dtype_name(layer->dtype), cp_isa_name(cpu->isa));
  s->uk_tail = cp_sr_ukernel_tail(s->uk, (int)(layer->c_out / layer->groups % s->uk->mr));
  s->split = split > 1 ? split : 1;
  s->phases = cp_split_phases(layer->k, s->split);
  s->k = cp_split_k(layer->k, s->split);
  s->layer_k = layer->k;
  s->zero_taps = s->phases * s->k > layer->k;
  setup->co_block = s->uk->mr;
  setup->positions = s->uk->nr;
  setup->isa = s->uk->isa;
  setup->kernel = s->uk->name;
  const cp_weight_blocks wb = cp_sr_weight_blocks(layer, s);
  size_t channels; /* of one group, phase channels included */
  if (!cp_mul((size_t)(layer->c_in / layer->groups), (size_t)(s->phases * s->phases), &channels) ||
      channels > (size_t)INT64_MAX ||
      !cp_size_weights_blocked(&wb, &setup->packed_weight_bytes, &s->weight_block_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, %lld, %lld] have a byte count that overflows",
                   (long long)layer->c_out, (long long)(layer->c_in / layer->groups),
                   (long long)layer->k, (long long)layer->k);
  s->c_steps = (int64_t)((channels + (size_t)s->uk->cpack - 1) / (size_t)s->uk->cpack);
  return CONVPOOL_SUCCESS;
}

void cp_sr_pack_weights(const cp_layer *layer, const cp_algo_setup *setup, const void *weights,
                        float *packed) {
  const cp_weight_blocks wb = cp_sr_weight_blocks(layer, cp_sr_setup_of(setup));
  cp_pack_weights_blocked(layer->dtype, weights, &wb, packed);
}

/* Panels are fp32 for every dtype, so one kernel family serves them all;
   bfloat16 uses its pair dot-product kernels where the CPU has them. A conv
   stride is split off the filter. */
/*
 * Auto passes a dense 3x3-like filter of stride 2 on to im2col: the split
 * filter multiplies (ceil(k/s) * min(s, k))^2 / k^2 as many taps (16/9 for
 * 3x3 of stride 2), which im2col, with no zero taps, does not pay. Measured
 * on 2 cores (README, "Choosing the algorithm"): 64->128 3x3 stride 2 at
 * 56x56 0.87 ms with shift-reduce against 0.64 with im2col, 128->256 at
 * 28x28 1.05 / 0.86, 256->512 at 14x14 1.11 / 0.97, the same at batch 8
 * 6.9 / 4.5; shift-reduce stays faster where the waste is smaller (7x7 and
 * 5x5 of stride 2: 1.30 / 2.48 ms on the ResNet stem) or the contraction is
 * short (3 -> 32 3x3 stride 2: 182 / 225 us; 16 channels per group: even).
 */
static const char *cp_sr_auto_skips(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                    size_t capacity) {
  (void)cpu;
  const int64_t s = layer->conv_stride, k = layer->k;
  if (s <= 1 || layer->dilation != 1 || layer->c_in / layer->groups < 32) return NULL;
  const int64_t taps = cp_split_k(k, s) * cp_split_phases(k, s);
  if (2 * taps * taps < 3 * k * k) return NULL; /* waste below 1.5 */
  snprintf(why, capacity,
           "im2col is faster: the %lldx%lld filter split for stride %lld multiplies %lld/%lld as "
           "many taps (measured rule)",
           (long long)k, (long long)k, (long long)s, (long long)(taps * taps), (long long)(k * k));
  return why;
}

int cp_sr_has_bf16_pairs(const cp_cpu *cpu) {
  return cp_sr_ukernel_select(CONVPOOL_BFLOAT16, cpu->isa) != NULL;
}

/*
 * Auto's hand-overs, on weights of the other algorithms' own that the
 * setup packs after the blocked ones (cp_sr_packs_for), measured rules:
 *
 * Strided 1x1 filters (fp32, no conv padding, AVX-512): runs of one or two
 * images go to the direct algorithm, which reads the source in place at the
 * stride; larger batches stay here. Zen 5, 2 threads, best CLI medians of 4
 * alternating runs, direct / shift-reduce, stride 2: one image of 64 -> 128
 * at 56x56 60 / 69 us, 256 -> 512 at 56x56 670 / 739, 512 -> 1024 at 28x28
 * 701 / 804, 1024 -> 2048 at 14x14 811 / 1018; two images of 512 -> 1024
 * 1.27 / 1.35 ms, 1024 -> 2048 1.46 / 1.64; slower from four: 512 -> 1024
 * 2.93 / 2.76, eight images of 256 -> 512 at 56x56 6.06 / 5.40, of 1024 ->
 * 2048 6.83 / 6.40. In the fused ResNet-50 (CONVPOOL_VERBOSE, one image,
 * medians of 7 runs) 256 -> 512 0.75 -> 0.69 ms, 1024 -> 2048 0.94 -> 0.67.
 * With AVX2 alone (Zen 3) direct was slower on one image too (512 -> 1024
 * at 28x28 2.57 against 1.89 ms, through a packed panel then).
 *
 * bfloat16 3x3 filters where the CPU has the pair kernels (auto takes
 * shift-reduce for them: Winograd's and direct's products are fp32): conv
 * outputs of 14x14 or more that Winograd F(4x4, 3x3) would keep (its own
 * hand-over rule finds no better algorithm) go to it, as auto's fp32 rules
 * would send them; the rest stay on the pair kernels, whose weights are half
 * of fp32's bytes and run at twice its rate. Zen 5, 2 threads, one
 * benchmark run of the ResNet suite in bfloat16, shift-reduce against auto
 * before (ms): 512 -> 512 at 7x7 0.54 against 0.92 (direct), 8 images 3.39
 * against 5.26 (direct; F(2x2, 3x3) 3.19). From 14x14 the two disagree by
 * run and cache state (256 -> 256 at 14x14: shift-reduce 0.52 against
 * Winograd's 0.56-0.59 in a benchmark run, 0.66 against 0.54 in CLI
 * medians with the weights hot), and larger images are Winograd's (VGG-16
 * suite: 256 -> 512 at 28x28 1.98 against 2.82, 512 -> 512 at 28x28 3.78
 * against 5.18). Layers of fewer than 64 channels on either side stay here
 * at every size (not measured against Winograd in bfloat16).
 *
 * bfloat16 3x3 filters of stride 1 over 256 input channels or more, where
 * direct has the pair kernels too: conv outputs of at most 14x14 go to
 * direct (before Winograd: the rule above then takes only larger ones).
 * Zen 5, 2 threads, one benchmark run each of the ResNet and VGG-16 suites
 * in bfloat16 once both packed channel pairs with plain row loops, direct
 * / auto before (ms): 256 -> 256 at 14x14 0.36 / 0.49 (8 images 2.60 /
 * 3.05, Winograd), 512 -> 512 at 14x14 1.55 / 1.76 (8 images, pool 2: 9.6
 * / 12.1, Winograd), 8 images of 512 -> 512 at 7x7 2.78 / 3.54 (one image
 * 0.49-0.55 / 0.51-0.56 in three runs); from 28x28 Winograd or
 * shift-reduce is ahead (512 -> 512 at 28x28 5.49 / 5.21, 128 -> 128 0.38
 * / 0.38).
 */
#define CP_SR_DIRECT_MAX_BATCH 2
#define CP_SR_WINO_MIN_CHANNELS 64
#define CP_SR_DIRECT_BF16_MAX_SIDE 14
#define CP_SR_DIRECT_BF16_MIN_CHANNELS 256
/* Whether a bfloat16 layer on the pair kernels is one whose small images go
   to direct (its pair kernels). */
static int cp_sr_bf16_small_images(const cp_layer *layer) {
  return layer->k == 3 && layer->conv_stride == 1 && layer->dilation == 1 && layer->groups == 1 &&
         layer->c_in >= CP_SR_DIRECT_BF16_MIN_CHANNELS;
}

/* The algorithms the setup packs for, into to[]; their count. */
static int cp_sr_hand_targets(const cp_layer *layer, const cp_cpu *cpu,
                              const cp_algorithm *to[CP_MAX_HANDOVERS]) {
  int n = 0;
  if (cpu->isa >= CP_ISA_AVX512 && layer->dtype == CONVPOOL_FLOAT32 && layer->k == 1 &&
      layer->conv_stride >= 2 && layer->groups == 1 && cp_unpadded(layer->pad))
    to[n++] = &cp_algorithm_direct;
  if (layer->dtype != CONVPOOL_BFLOAT16 || !cp_sr_has_bf16_pairs(cpu)) return n;
  if (cp_sr_bf16_small_images(layer)) to[n++] = &cp_algorithm_direct;
  char why[256];
  if (layer->c_in >= CP_SR_WINO_MIN_CHANNELS && layer->c_out >= CP_SR_WINO_MIN_CHANNELS &&
      cp_algorithm_winograd.declines(layer, cpu, why, sizeof why) == NULL)
    to[n++] = &cp_algorithm_winograd;
  return n;
}

static convpool_status cp_sr_setup_layer(const cp_layer *layer, const cp_cpu *cpu,
                                         cp_algo_setup *s) {
  const convpool_status st = cp_sr_setup_kernels(layer, cpu, layer->dtype, layer->conv_stride, s);
  if (st != CONVPOOL_SUCCESS) return st;
  cp_sr_setup *ss = CP_ALGO_STATE(cp_sr_setup, s->state);
  memset(ss->hand_to, 0, sizeof ss->hand_to);
  memset(ss->hand_offset, 0, sizeof ss->hand_offset);
  const cp_algorithm *to[CP_MAX_HANDOVERS];
  const int targets = s->auto_choice ? cp_sr_hand_targets(layer, cpu, to) : 0;
  for (int i = 0, n = 0; i < targets; i++) { /* room for their weights, one after the other */
    cp_algo_setup other;
    memset(&other, 0, sizeof other);
    const size_t offset = cp_round_up(s->packed_weight_bytes, CP_CACHE_LINE) / sizeof(float);
    size_t bytes;
    if (to[i]->setup(layer, cpu, &other) == CONVPOOL_SUCCESS &&
        cp_add(offset * sizeof(float), other.packed_weight_bytes, &bytes))
      ss->hand_to[n] = to[i], ss->hand_offset[n++] = offset, s->packed_weight_bytes = bytes;
    cp_clear_error(); /* without the room, its runs stay here */
  }
  return CONVPOOL_SUCCESS;
}

static const cp_algorithm *cp_sr_hands_over(const cp_layer *layer, const cp_blocking *cfg,
                                            const cp_algorithm *packed_for, int64_t batch,
                                            int64_t oh, int64_t ow) {
  if (packed_for == &cp_algorithm_direct && layer->dtype == CONVPOOL_BFLOAT16)
    return oh <= CP_SR_DIRECT_BF16_MAX_SIDE && ow <= CP_SR_DIRECT_BF16_MAX_SIDE ? packed_for : NULL;
  if (packed_for == &cp_algorithm_direct)
    return batch <= CP_SR_DIRECT_MAX_BATCH ? packed_for : NULL;
  if (packed_for == &cp_algorithm_winograd) /* where Winograd would keep the run too */
    return oh >= CP_SR_WINO_MIN_SIDE && ow >= CP_SR_WINO_MIN_SIDE &&
                   cp_algorithm_winograd.hands_over(layer, cfg, NULL, batch, oh, ow) == NULL
               ? packed_for
               : NULL;
  return NULL;
}

static const cp_algorithm *cp_sr_packs_for(const cp_algo_setup *s, int index, size_t *offset,
                                           int *co_block) {
  const cp_sr_setup *ss = CP_ALGO_STATE(const cp_sr_setup, s->state);
  if (!s->auto_choice || index < 0 || index >= CP_MAX_HANDOVERS || ss->hand_to[index] == NULL)
    return NULL;
  *offset = ss->hand_offset[index];
  *co_block = 0; /* its runs only: any layout of the room */
  return ss->hand_to[index];
}

void cp_sr_item_units(const cp_plan *pl, int64_t *rows, int64_t *cols) {
  *rows = 1;
  *cols = cp_sr_setup_of(pl->setup)->uk->nr;
}

double cp_sr_cost(const cp_plan *pl, size_t tiles, size_t floats) {
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const double lanes = (double)tiles * s->uk->nr * (double)s->c_steps * (double)(s->k * s->k) *
                       (double)pl->groups *
                       (double)((pl->group_co_blocks - 1) * s->uk->mr + s->uk_tail->mr);
  const double copy = pl->cfg->copy_cost * (double)floats;
  return (lanes + copy) /
         ((double)pl->group * (double)pl->col_block * (double)pl->stride * (double)pl->stride);
}

static int cp_sr_geometry(cp_plan *pl) {
  cp_sr_plan *sp = CP_ALGO_STATE(cp_sr_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const size_t nr = (size_t)s->uk->nr, mr = (size_t)s->uk->mr, k = (size_t)s->k;
  const size_t es = sizeof(float), line = CP_CACHE_LINE / sizeof(float);
  const size_t conv_rows = (size_t)pl->conv_rows, cw = (size_t)pl->conv_cols;
  size_t rows, ld, cs, n;
  if (!cp_add(conv_rows, k - 1, &rows)) return 0;
  ld = cw + k - 1;
  if (!cp_mul(rows, ld, &cs)) return 0;
  /* An odd number of cache lines between channels spreads the c_in row
     streams over every L1 set instead of piling them on a few. */
  cs = cp_round_up(cs, line);
  if ((cs / line) % 2 == 0) cs += line;
  if (!cp_mul((size_t)s->c_steps, (size_t)pl->groups, &n) || !cp_mul(n, cs, &n) ||
      !cp_add(n, 2 * nr, &n))
    return 0;
  sp->panel.ld = ld, sp->panel.cs = cs, sp->panel.floats = n;
  if (!cp_mul(n, es, &pl->panel_bytes)) return 0;
  const size_t flat_len = (conv_rows - 1) * ld + cw;
  const size_t flat_tiles = (flat_len + nr - 1) / nr;
  const size_t row_tiles = conv_rows * ((cw + nr - 1) / nr);
  /* A 1x1 filter has no halo: flat tiles waste nothing, and when they are
     as many as per-row ones the buffer's rows lie compact (ld = the conv
     width), which the epilogue takes one channel at a time. */
  sp->flat = flat_tiles < row_tiles || (flat_tiles == row_tiles && k == 1);
  sp->tiles = sp->flat ? flat_tiles : row_tiles;
  sp->finish = pl->pool == 1 && pl->stride == 1 && pl->dtype == CONVPOOL_FLOAT32 && !s->zero_taps &&
               (!sp->flat || ld == (size_t)pl->ow);
  pl->buf_row_ld = sp->flat ? ld : cp_round_up(cw, nr);
  pl->buf_cols = sp->flat ? flat_tiles * nr : conv_rows * pl->buf_row_ld;
  return cp_mul(pl->buf_cols, mr * es, &pl->buf_bytes);
}

static double cp_sr_item_cost(const cp_plan *pl) {
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  return cp_sr_cost(pl, sp->tiles, sp->panel.floats);
}

static double cp_sr_plan_cost(const cp_plan *pl) {
  return cp_rows_cost(pl, cp_sr_item_cost);
}

/* Where the tile of positions [t, t + nr) of a run of len positions starts:
   a last tile that would pass the end moves back to end there (when the run
   holds a whole tile), so the kernels read nothing past the run's last
   position. An output is the same sum whichever tile computes it. */
static inline size_t cp_sr_tile_start(size_t t, size_t nr, size_t len) {
  return t + nr > len && len >= nr ? len - nr : t;
}

/* An item's flags (cp_item.flags): its panel holds an Inf or a NaN that a
   zero tap of the split filter may read; it reads the source in place. */
enum { CP_SR_NONFINITE = 1u, CP_SR_IN_PLACE = 2u };

/* Channel blocks one tile sweeps at most (cp_sr_sweep). */
#define CP_SR_SWEEP_BLOCKS 64

/* An item of one channel group with at most this many channel blocks reads
   its window in place too (below): the copy, a read and a write of every
   input, costs more than the panel's layout saves the kernels' few passes
   over it (256 -> 64 1x1 at 56x56, 6 blocks: 801 -> 682 us; 22 blocks: the
   same time either way). So does every 1x1 filter, whose window is the
   source's rows as they are: 64 -> 64 at 56x56, 11 blocks, 214 -> 192 us;
   1024 -> 256 at 14x14, 765 -> 637 us; none slower (fastest of 5 runs). */
#define CP_SR_FEW_BLOCKS 8

/*
 * Where channel groups split an image region, each of their items would copy
 * the same window again. Where that window is a window of the source as the
 * kernels read a panel — float32, no split, every row and column inside the
 * image (no conv padding to write), rows W apart when tiles run flat over
 * them — the kernels read the source in place instead, channel c at
 * c * H * W. (With one channel group the copy is made once and pays for
 * itself: measured, the kernels ran 6-14% slower on large planes read in
 * place, 224x224 and 56x56, than on the panel, whose channels lie an odd
 * number of cache lines apart; unless the item has few channel blocks, and
 * its planes are not a multiple of 4 KiB apart, where every channel's row
 * falls into the same L1 sets: 256 -> 256 1x1 at 224x224 ran 20% slower;
 * or the filter is 1x1, CP_SR_FEW_BLOCKS.) Reads
 * past the window (the discarded columns of a last tile) land in the next
 * channel or row of the same tensor; an item whose last tile would read past
 * the tensor's end is packed instead. The kernels read the same values
 * either way, so the results are the same bytes.
 *
 * Never where the planes lie further apart than the L1 stride prefetcher
 * follows (cp_cpu.stride_reach): each step of the kernels' channel loop
 * then waits for its lines from L2 or beyond. Intel Xeon (2 KiB reach), 2
 * threads, the input just written by the layer before (as in a network),
 * planes of 12.5 KiB: 256 -> 64 1x1 at 56x56 1.01 -> 0.63 ms on the panel;
 * of 3 KiB: 512 -> 128 at 28x28 0.75 -> 0.61; of 784 bytes, within reach,
 * 1024 -> 256 at 14x14 0.56 in place against 0.71 on the panel.
 */
static int cp_sr_planes_in_reach(const cp_plan *pl) {
  const size_t plane_bytes = (size_t)pl->height * (size_t)pl->width * sizeof(float);
  const size_t reach = cp_cpu_get()->stride_reach;
  return reach == 0 || plane_bytes <= reach;
}

static int cp_sr_reads_in_place(const cp_plan *pl) {
  const size_t plane_bytes = (size_t)pl->height * (size_t)pl->width * sizeof(float);
  return pl->dtype == CONVPOOL_FLOAT32 && cp_sr_setup_of(pl->setup)->split == 1 &&
         cp_sr_planes_in_reach(pl) &&
         (pl->co_groups > 1 ||
          ((pl->co_blocks_per_group <= CP_SR_FEW_BLOCKS || pl->k == 1) && plane_bytes % 4096));
}

static const float *cp_sr_source_window(const cp_run *r, const cp_item *it) {
  const cp_plan *pl = r->pl;
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  if (!cp_sr_reads_in_place(pl)) return NULL;
  const int64_t k = s->k, iy0 = it->y0 - pl->pad[CP_TOP], ix0 = it->x0 - pl->pad[CP_LEFT];
  if (iy0 < 0 || ix0 < 0 || iy0 + it->ny + k - 1 > pl->height || ix0 + it->nx + k - 1 > pl->width)
    return NULL;
  const size_t w = (size_t)pl->width, nr = (size_t)s->uk->nr, ny = (size_t)it->ny;
  const size_t nx = (size_t)it->nx;
  size_t last_tile; /* the start of the item's last tile */
  if (sp->flat) {
    if (sp->panel.ld != w) return NULL; /* the tile buffer's rows are the panel's */
    const size_t len = (ny - 1) * w + nx;
    last_tile = cp_sr_tile_start((len - 1) / nr * nr, nr, len);
  } else {
    last_tile = (ny - 1) * w + cp_sr_tile_start((nx - 1) / nr * nr, nr, nx);
  }
  const size_t plane = (size_t)pl->height * w, total = pl->src_bytes / sizeof(float);
  const size_t first =
      ((size_t)it->b * (size_t)pl->c_in * (size_t)pl->height + (size_t)iy0) * w + (size_t)ix0;
  const size_t reach =
      ((size_t)pl->c_in - 1) * plane + last_tile + nr - 1 + (size_t)(k - 1) * w + (size_t)(k - 1);
  if (first + reach >= total) return NULL;
  return (const float *)(const void *)r->src + first;
}

/* Channel steps [step0, step1) of the panel of the item's region, and the
   slack past the last step: conv row y0 reads input row y0 * stride - pad
   (phase 0). */
static void cp_sr_pack_steps(const cp_run *r, const cp_item *it, size_t step0, size_t step1,
                             float *panel) {
  const cp_plan *pl = r->pl;
  const size_t k = (size_t)cp_sr_setup_of(pl->setup)->k;
  const cp_panel_src src = cp_panel_src_of(r, it->b);
  cp_pack_panel_steps(&src, it->y0 * pl->conv_stride - pl->pad[CP_TOP], (size_t)it->ny + k - 1,
                      it->x0 * pl->conv_stride - pl->pad[CP_LEFT], (size_t)it->nx + k - 1, step0,
                      step1, &CP_ALGO_STATE(const cp_sr_plan, pl->state)->panel, panel);
  cp_pack_panel_slack(&src, &CP_ALGO_STATE(const cp_sr_plan, pl->state)->panel, panel);
}

/*
 * Where channel groups split the image regions and their items cannot read
 * the source in place (conv padding to write, a split stride, 16-bit
 * storage), each region's panel is packed once, before the items, and the
 * items of every channel group read it there (cp_plan_share_regions).
 */
static int cp_sr_schedule(cp_plan *pl) {
  const int in_place = pl->dtype == CONVPOOL_FLOAT32 && cp_sr_setup_of(pl->setup)->split == 1 &&
                       cp_sr_planes_in_reach(pl) && cp_unpadded(pl->pad);
  if (!in_place) return cp_plan_share_regions(pl);
  pl->prepare_items = 0, pl->shared_bytes = 0;
  return 1;
}

static float *cp_sr_region(const cp_run *r, int64_t region) {
  return (float *)(void *)(r->shared + cp_region_offset(r->pl, region));
}

/* Region `index` (the items of channel group 0 come in region order), every
   conv group's channels; none where the items read the source in place. */
static void cp_sr_prepare(const cp_run *r, int64_t index) {
  const cp_item it = cp_item_of(r->pl, index * r->pl->co_groups);
  if (cp_sr_source_window(r, &it) != NULL) return;
  const size_t steps = (size_t)r->pl->groups * (size_t)cp_sr_setup_of(r->pl->setup)->c_steps;
  cp_sr_pack_steps(r, &it, 0, steps, cp_sr_region(r, index));
}

/* The item's panel: the source in place, its region's prepared panel, or the
   conv groups of its channel blocks packed into its own. */
static const float *cp_sr_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const float *source = cp_sr_source_window(r, it);
  if (source != NULL) {
    it->flags = CP_SR_IN_PLACE;
    return source;
  }
  const size_t steps = (size_t)s->c_steps;
  const size_t step0 = (size_t)cp_block_group(pl, it->cb0) * steps;
  const size_t step1 = (size_t)(cp_block_group(pl, it->cb1 - 1) + 1) * steps;
  if (pl->prepare_items > 0)
    panel = cp_sr_region(r, cp_item_region(pl, it));
  else
    cp_sr_pack_steps(r, it, step0, step1, panel);
  const size_t cs = CP_ALGO_STATE(const cp_sr_plan, pl->state)->panel.cs;
  if (s->zero_taps)
    it->flags = cp_has_nonfinite(panel + step0 * cs, (step1 - step0) * cs, (size_t)s->uk->cpack)
                    ? CP_SR_NONFINITE
                    : 0u;
  return panel;
}

/* A panel element of channel step t, half h, as fp32. */
static inline float cp_sr_panel_value(const float *at, size_t h, size_t cpack) {
  if (cpack == 1) return *at;
  uint32_t bits = (*(const uint32_t *)(const void *)at >> (16 * h)) << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/*
 * Outputs of channel block cb over the item that the kernel made NaN,
 * computed again as a loop over the taps of the layer's filter only (the
 * split's zero taps skipped), for an item whose panel holds an Inf or a NaN:
 * a zero tap reading one of them gives NaN (0 * inf) outside its window,
 * and every output it reached is NaN. The loop keeps the kernel's order of
 * sums and its rounding (one FMA per term where the ISA has one; bf16 pairs
 * odd channel first, as vdpbf16ps), and a zero tap adds an exact zero to a
 * finite sum, so an output is the kernel's whatever the item: results stay
 * the same for every thread count.
 */
static void cp_sr_exact_block(const cp_plan *pl, const cp_item *it, const float *panel, int64_t cb,
                              const float *w, float *buf) {
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const size_t k = (size_t)s->k, taps = k * k, ph = (size_t)s->phases, split = (size_t)s->split;
  const size_t cpack = (size_t)s->uk->cpack, steps = (size_t)s->c_steps;
  const size_t channels_in = (size_t)(pl->c_in / pl->groups) * ph * ph;
  const size_t ld = sp->panel.ld, cs = sp->panel.cs, layer_k = (size_t)s->layer_k;
  const size_t mr = (size_t)((cb + 1) % pl->group_co_blocks == 0 ? s->uk_tail->mr : s->uk->mr);
  const int fused = s->uk->isa != CP_ISA_SCALAR; /* the portable kernel multiplies, then adds */
  size_t co0, channels;
  cp_block_channels(pl, cb, &co0, &channels);
  for (size_t m = 0; m < channels; m++)
    for (size_t y = 0; y < (size_t)it->ny; y++)
      for (size_t x = 0; x < (size_t)it->nx; x++) {
        float *out = &buf[m * pl->buf_cols + y * pl->buf_row_ld + x];
        if (*out == *out) continue; /* not NaN: no zero tap reached a non-finite input */
        float acc = 0.0f;
        for (size_t t = 0; t < steps; t++)
          for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++)
              for (size_t hh = 0; hh < cpack; hh++) {
                const size_t h = cpack - 1 - hh; /* pairs: the odd channel first */
                const size_t u = t * cpack + h;  /* the phase channel */
                if (u >= channels_in || u / ph % ph + split * a >= layer_k ||
                    u % ph + split * b >= layer_k)
                  continue; /* a zero tap */
                const float wv = cp_sr_panel_value(&w[(t * taps + a * k + b) * mr + m], h, cpack);
                const float xv = cp_sr_panel_value(&panel[t * cs + (y + a) * ld + x + b], h, cpack);
                acc = fused ? fmaf(wv, xv, acc) : acc + wv * xv;
              }
        *out = acc;
      }
}

/*
 * Where a conv output is a pooled output (pool 1 of stride 1: every
 * ResNet-style layer) and the epilogue allows it (cp_epilogue.in_kernel),
 * the kernel finishes its tile in dst itself — residual, bias, clamp — and
 * the block never passes through the tile buffer: one store of each output
 * instead of a store, a load and a store. It takes an item whose tiles all
 * lie in its own outputs: rows at least a tile wide (per-row sweeps; a last
 * tile moves back inside its row), or flat tiles over whole rows of the conv
 * output (1x1, the panel's rows the output's). Not with a split stride's
 * zero taps (their NaNs are recomputed in the tile buffer).
 */
static int cp_sr_finishes(const cp_run *r, const cp_item *it) {
  const cp_plan *pl = r->pl;
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  const size_t nr = (size_t)cp_sr_setup_of(pl->setup)->uk->nr, nx = (size_t)it->nx;
  if (!sp->finish || !r->epilogue->in_kernel) return 0;
  if (!sp->flat) return nx >= nr;
  return it->nx == pl->ow && (size_t)(it->ny - 1) * nx + nx >= nr;
}

/* Where a sweep's tiles go: the tile buffer, or the outputs in dst with the
   kernels' finish (then res is the residual of the same outputs, or NULL). */
typedef struct cp_sr_out {
  float *at;
  const float *res;
  size_t ld, row;      /* between channels, between conv rows */
  cp_sr_finish finish; /* finish.rows = 0: sums to the tile buffer */
} cp_sr_out;

/* Channel block cb's outputs of the item. */
static cp_sr_out cp_sr_out_of(const cp_run *r, const cp_item *it, int64_t cb, float *buf,
                              int finish) {
  const cp_plan *pl = r->pl;
  cp_sr_out o = {buf, NULL, pl->buf_cols, pl->buf_row_ld, {NULL, NULL, 0.0f, 0.0f, 0}};
  if (!finish) return o;
  const cp_epilogue_params *p = &r->epilogue->params;
  size_t co0, channels;
  cp_block_channels(pl, cb, &co0, &channels);
  o.ld = (size_t)pl->oh * (size_t)pl->ow, o.row = (size_t)pl->ow;
  const size_t at =
      ((size_t)it->b * (size_t)pl->c_out + co0) * o.ld + (size_t)it->y0 * o.row + (size_t)it->x0;
  o.at = (float *)(void *)r->dst + at;
  if (r->residual != NULL) o.res = (const float *)(const void *)r->residual + at;
  o.finish.bias = p->bias != NULL ? p->bias + co0 : NULL;
  o.finish.lo = p->min, o.finish.hi = p->max, o.finish.rows = (int)channels;
  return o;
}

/*
 * The sweep of channel blocks [cb0, cb1) over the item's tiles: for each
 * tile, every block (the tile's input stays in L1 while the blocks' weights,
 * which the caller keeps within L2, pass through). One block is the
 * driver's order: the block's weights stay while its tiles pass.
 */
static void cp_sr_sweep(const cp_run *r, const cp_item *it, const float *panel, int64_t cb0,
                        int64_t cb1, float *buf, int finish) {
  const cp_plan *pl = r->pl;
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  const int in_place = (it->flags & CP_SR_IN_PLACE) != 0;
  const size_t nr = (size_t)s->uk->nr, nx = (size_t)it->nx;
  const size_t ld = in_place ? (size_t)pl->width : sp->panel.ld;
  const size_t cs = in_place ? (size_t)pl->height * (size_t)pl->width : sp->panel.cs;
  const size_t steps = (size_t)s->c_steps, k = (size_t)s->k;
  /* flat: one run of len positions; per row: ny runs of nx, ld apart */
  const size_t runs = sp->flat ? 1 : (size_t)it->ny;
  const size_t len = sp->flat ? ((size_t)it->ny - 1) * ld + nx : nx;
  cp_sr_out outs[CP_SR_SWEEP_BLOCKS];
  for (int64_t cb = cb0; cb < cb1; cb++) outs[cb - cb0] = cp_sr_out_of(r, it, cb, buf, finish);
  for (size_t y = 0; y < runs; y++)
    for (size_t t = 0; t < len; t += nr) {
      const size_t at = cp_sr_tile_start(t, nr, len);
      for (int64_t cb = cb0; cb < cb1; cb++) {
        cp_sr_out *o = &outs[cb - cb0];
        const size_t out_at = y * o->row + at;
        const float *x = panel + (size_t)cp_block_group(pl, cb) * steps * cs + y * ld + at;
        o->finish.res = o->res != NULL ? o->res + out_at : NULL;
        cp_sr_block_kernel(pl, cb)(x, cs, ld, steps, k, cp_sr_block_weights(r, cb), o->at + out_at,
                                   o->ld, 0, o->finish.rows > 0 ? &o->finish : NULL);
      }
    }
}

static const float *cp_sr_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                        int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  if (cp_sr_finishes(r, it)) {
    /* every block at the first: where a tile's input fits in L1, tiles
       outer and blocks in chunks whose weights fill at most a quarter of L2;
       else a block at a time (its weights stay, the input passes). Against
       the driver's block at a time, fastest of 5 runs, 2 threads, Zen 3:
       64 -> 64 1x1 at 56x56 254 -> 160 us, 256 -> 64 819 -> 595, 64 -> 256
       882 -> 620, 128 -> 512 at 28x28 833 -> 714; deep ones (2048 -> 512
       at 7x7) 5-10% slower, hence the L1 rule. (Contraction passes whose
       slice of a tile's input fits L1, sums continued in dst, measured no
       faster on 512 -> 128 and deeper.) */
    if (cb != it->cb0) return NULL;
    const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
    const size_t wb = s->weight_block_bytes, k = (size_t)s->k;
    const size_t tile_bytes =
        (size_t)s->c_steps * k *
        cp_round_up(((size_t)s->uk->nr + k - 1) * sizeof(float), CP_CACHE_LINE);
    int64_t chunk = (int64_t)(pl->l2_bytes / 4 / (wb > 0 ? wb : 1));
    chunk = chunk < 1 || tile_bytes > pl->l1_bytes ? 1
            : chunk > CP_SR_SWEEP_BLOCKS           ? CP_SR_SWEEP_BLOCKS
                                                   : chunk;
    for (int64_t c0 = it->cb0; c0 < it->cb1; c0 += chunk)
      cp_sr_sweep(r, it, panel, c0, c0 + chunk < it->cb1 ? c0 + chunk : it->cb1, buf, 1);
    return NULL;
  }
  cp_sr_sweep(r, it, panel, cb, cb + 1, buf, 0);
  if (it->flags & CP_SR_NONFINITE) {
    const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
    const size_t cs = CP_ALGO_STATE(const cp_sr_plan, pl->state)->panel.cs;
    cp_sr_exact_block(pl, it, panel + (size_t)cp_block_group(pl, cb) * (size_t)s->c_steps * cs, cb,
                      cp_sr_block_weights(r, cb), buf);
  }
  return buf;
}

void cp_sr_describe_tile(const cp_plan *pl, int64_t input_rows, const char *sweep, char *text,
                         size_t capacity) {
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  char groups[96] = "";
  if (pl->groups > 1)
    snprintf(groups, sizeof groups, " in %lld conv groups of %lld", (long long)pl->groups,
             (long long)pl->group_co_blocks);
  snprintf(text, capacity,
           "register tile  %d output channels x %d positions; %lld channel blocks%s (last: %s)\n"
           "panel          %lld pooled rows x %lld pooled columns: conv %lld rows (%lld input "
           "rows) x %lld columns x %lld channels, %s\n",
           s->uk->mr, s->uk->nr, (long long)pl->co_blocks, groups, s->uk_tail->name,
           (long long)pl->group, (long long)pl->col_block, (long long)pl->conv_rows,
           (long long)input_rows, (long long)pl->conv_cols, (long long)pl->c_in, sweep);
}

static void cp_sr_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_sr_plan *sp = CP_ALGO_STATE(const cp_sr_plan, pl->state);
  const cp_sr_setup *s = cp_sr_setup_of(pl->setup);
  char sweep[384], split[128] = "";
  if (s->split > 1)
    snprintf(split, sizeof split,
             "; stride %lld split into %lld phase channels per channel, a %lldx%lld filter",
             (long long)s->split, (long long)(s->phases * s->phases), (long long)s->k,
             (long long)s->k);
  snprintf(
      sweep, sizeof sweep, "%s%s; sweep %s%s%s", s->uk->cpack == 2 ? "bf16 channel pairs" : "fp32",
      split, sp->flat ? "flat over rows" : "per conv row",
      cp_sr_reads_in_place(pl) ? "; an item whose window lies inside the image reads it in place"
                               : "",
      sp->finish ? "; the kernels finish outputs in dst (pool 1, a finite bias)" : "");
  cp_sr_describe_tile(pl, (pl->conv_rows - 1) * pl->conv_stride + pl->extent, sweep, text,
                      capacity);
}

const cp_algorithm cp_algorithm_sr = {
    .name = "shift-reduce",
    .id = CONVPOOL_ALGO_SHIFT_REDUCE,
    .declines = cp_sr_declines,
    .auto_skips = cp_sr_auto_skips,
    .setup = cp_sr_setup_layer,
    .pack_weights = cp_sr_pack_weights,
    .item_units = cp_sr_item_units,
    .geometry = cp_sr_geometry,
    .cost = cp_sr_plan_cost,
    .schedule = cp_sr_schedule,
    .prepare = cp_sr_prepare,
    .pack_item = cp_sr_pack_item,
    .compute_block = cp_sr_compute_block,
    .describe = cp_sr_describe,
    .hands_over = cp_sr_hands_over,
    .packs_for = cp_sr_packs_for,
};
