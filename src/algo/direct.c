/*
 * Direct convolution with output channels in the vector lanes: a block of
 * MR output channels (two vectors) times NP consecutive conv positions per
 * register tile (row after row, cp_direct_flat), each position's input
 * broadcast from the item's input panel, each tap's MR weights one pair of
 * vector loads (src/kernels/cl-ukernel.h). The conv stride and dilation
 * are address arithmetic of the kernel (positions xs = stride panel columns
 * apart, taps at their dilated offsets), so no tap is ever a zero one and no
 * input is copied more than once per item: where shift-reduce splits a
 * stride-2 filter into phases (16 taps for 9 of a 3x3) or im2col repeats
 * each input k*k times, this reads the panel as it is. The register tiles
 * leave the registers as they are, channels in lanes, and the driver's
 * epilogue pools them in that layout (epilogue.h: cp_lanes_row),
 * transposing only the pooled outputs; where the epilogue has no such row
 * for the layer's params, the last pass stores each tile transposed into
 * the tile buffer's channel rows.
 *
 * The panel is shift-reduce's (pack.h): every input channel of the item's
 * input rows and columns, zero where the conv padding is, channels an odd
 * number of cache lines apart; for bfloat16 on a CPU with the pair kernels
 * (vdpbf16ps), channel pairs (a step of two channels per 32-bit element,
 * the weights packed the same way), the kernels doing two multiply-adds a
 * lane where the fp32 ones do one. Each output sums its layer's taps in (c, i,
 * j) order (c: a channel, or a channel pair) from zero, whatever the item,
 * so results do not depend on the item split or the thread count. Conv groups: a channel block
 * never crosses one and contracts over its group's channels of the panel.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../driver.h"
#include "../kernels/cl-ukernel.h"
#include "../pack.h"
#include "algo.h"
#include "sr-kernels.h"

/* The setup's own state: the kernel. */
typedef struct cp_direct_state {
  const cp_cl_ukernel *uk;
} cp_direct_state;
CP_ALGO_STATE_FITS(cp_direct_state);

/* The plan's own state: the panel of the item size, its tiles and passes.
   The tile buffer holds, after the block's conv output in channel rows (MR
   x buf_cols floats; none where the blocks stay channels in lanes), the
   tiles' partial sums and their geometry (cp_direct_tile). */
typedef struct cp_direct_plan {
  cp_panel_layout panel;   /* the packed panel's, or the image's where read in place */
  size_t group_steps;      /* channel steps of a conv group: channels, or bf16 pairs */
  int in_place;            /* the items read the fp32 source itself (no conv padding) */
  size_t cols;             /* panel columns an item packs */
  size_t tiles;            /* register tiles of an item, at most */
  size_t kc;               /* channel steps per pass (weights filling half of L1, or all) */
  int prefetch;            /* prefetch the next pass's weights (cp_direct_prefetch) */
  size_t partial;          /* float index of the partial sums in the tile buffer */
  size_t geom;             /* float index of the item's tiles (cp_direct_tile) */
  size_t offsets;          /* float index of the taps' offsets (ptrdiff_t) */
  size_t slices;           /* prepare items per shared region: slices of the channel steps */
  const cp_cl_ukernel *uk; /* the setup's kernel, or a wider one of its family */
  size_t image_floats;     /* floats from an image's panel (or image) to the next's */
} cp_direct_plan;
CP_ALGO_STATE_FITS(cp_direct_plan);

/* A register tile of an item: its NP positions' panel offsets (lanes past
   the last position repeat it: valid reads, never stored), its first
   output's column in the tile buffer and its positions. */
typedef struct cp_direct_tile {
  ptrdiff_t pos[CP_CL_MAX_NP];
  size_t col, n;
} cp_direct_tile;

static const cp_direct_state *cp_direct_setup_of(const cp_algo_setup *setup) {
  return CP_ALGO_STATE(const cp_direct_state, setup->state);
}

/* Channel steps of a conv group for the kernel: its input channels, or
   their bf16 pairs (the last one half zero where they are odd). */
static size_t cp_direct_group_steps(int64_t c_in, int64_t groups, const cp_cl_ukernel *uk) {
  return ((size_t)(c_in / groups) + (size_t)uk->cpack - 1) / (size_t)uk->cpack;
}

static const char *cp_direct_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                      size_t capacity) {
  (void)layer, (void)cpu, (void)why, (void)capacity;
  return NULL; /* every layer of the contract */
}

/* The deep 1x1 layers direct computes on AVX-512 (Zen 5, 2 threads, median
   of alternating runs against shift-reduce): 2048 -> 512 at 7x7 0.31 ms
   against 0.37, 1024 -> 256 at 14x14 0.27 / 0.27 (8 images 2.12 / 2.27),
   1024 -> 512 at 14x14 0.53 / 0.54, 1024 -> 128 at 7x7 40 / 43 us; at 512
   channels, since its 32 x 14 tile and items of several small images
   (CLI medians, two alternating rounds): 512 -> 2048 at 7x7 0.26 / 0.30 ms
   (8 images 1.94-2.11 / 2.39-2.43), 512 -> 256 at 28x28 0.47-0.48 /
   0.52-0.54 (8 images 4.25-4.34 / 4.16, the one loss), 512 -> 128 at 28x28
   0.28 / 0.28-0.29. From 256 channels down shift-reduce is faster (256 ->
   64 at 56x56 0.46 / 0.43 in one benchmark run), but for 256 -> 1024 at
   14x14 (0.45 / 0.40 ms then; 0.237 / 0.250 in the latest Zen 5 suite
   run, and on an Intel Xeon, CLI medians, two alternating turns, 307-309 /
   337-343 us with direct's 64-channel tiles, 335-345 / 362-388 with 32;
   8 images 2.78-2.89 / 2.99-3.16 ms): 1x1 layers to 1024 channels or more
   from 256 or more go to direct as well; and on Zen 3 (AVX2) at 1024 too (1024 -> 256 at 14x14
   0.98 / 0.89 ms). Measured since on a VM presenting an EPYC of family 23
   (AVX2 at 16 FLOP a cycle, 2 threads) direct is faster on AVX2 where
   either side has 1024 channels or more, which in a network are its
   smallest images: one benchmark run of the ResNet suite (cold weights),
   direct / shift-reduce: 2048 -> 512 at 7x7 1.75 / 2.01 ms, 512 -> 2048 at
   7x7 1.75 / 1.90 (8 images 12.8 / 15.0), 1024 -> 256 at 14x14 1.55 / 1.73
   (8 images 12.3 / 12.9), 256 -> 1024 at 14x14 1.60 / 1.60; best medians of
   4 alternating CLI runs, 1024 -> 512 and 512 -> 1024 at 14x14 2.87 / 3.35
   and 2.95 / 3.19 ms (8 images 23.5 / 25.9 and 23.5 / 24.2). Below that
   shift-reduce is as fast or faster there: 512 -> 128 at 28x28 1.65 / 1.52
   ms (benchmark), 8 images of 512 -> 256 at 28x28 25.3 / 23.3 (CLI). */
#define CP_DIRECT_DEEP_1X1 512
#define CP_DIRECT_DEEP_1X1_AVX2 1024

/*
 * Auto's rule, measured on 2 cores of Zen 3 (AVX2) and Zen 5 (AVX-512;
 * README, "Choosing the algorithm"; auto passes direct over on the portable
 * kernel, where it was not measured): direct beats the algorithm auto takes
 * next on strided filters of k >= 3 in one conv group, where shift-reduce
 * splits the filter into zero taps and im2col copies each input k*k times.
 * Zen 3, fastest of 40 alternating runs: ResNet's stem, 3 -> 64 7x7 stride
 * 2, 2.66 ms against shift-reduce's 3.00; 3x3 stride 2, ResNet's 64 -> 128
 * at 56x56, 128 -> 256 at 28x28 and 256 -> 512 at 14x14: 1.21, 0.98 and
 * 1.10 ms against im2col's 1.58, 1.15 and 1.35. Zen 5, fastest of 2 runs
 * of 60: the stem 0.68 ms against shift-reduce's 0.98, 64 -> 128 at 56x56
 * 0.34 (batch 8: 2.55) against im2col's 0.44 (3.42). It ties shift-reduce
 * at stride 1 (Zen 3: 512 -> 512 3x3 at 7x7 2.19 / 2.21 ms, 1024 -> 256
 * 1x1 at 14x14 0.98 / 0.89) and loses on a strided 1x1 filter, whose panel
 * holds the input columns the stride skips (512 -> 1024 at 28x28: 2.57
 * against 1.89 ms; Zen 5 at batch 8, 256 -> 512 at 56x56: 6.0 against 4.6).
 * On AVX-512 shift-reduce hands it a strided 1x1 filter's runs of one or
 * two images, where direct reads the source in place (cp_sr_hands_over).
 */
static const char *cp_direct_auto_skips(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                        size_t capacity) {
  if (cpu->isa < CP_ISA_AVX2) { /* the rule's measurements are AVX2's and AVX-512's */
    snprintf(why, capacity, "measured faster with vector kernels only (isa %s: not measured)",
             cp_isa_name(cpu->isa));
    return why;
  }
  /* bfloat16 with the pair kernels, where direct's are pair kernels too
     (Zen 5, 2 threads, one benchmark run each of the ResNet and strided
     suites in bfloat16, direct / shift-reduce, ms): 1x1 over 1024 channels
     or more, 1024 -> 256 at 14x14 0.25 / 0.40 (8 images 1.44 / 1.46), 2048
     -> 512 at 7x7 0.24 / 0.32, and strided over 512 or more, 512 -> 1024
     stride 2 at 28x28 0.51 / 0.78; the ResNet stem 0.59 / 0.69 (8 images
     4.55 / 5.03) and the 3x3 stride 2 layers (0.19-0.24 / 0.58-0.63) as in
     fp32. Shift-reduce stays ahead on 1x1 of fewer channels (512 -> 2048 at
     7x7 0.30 / 0.26, 512 -> 128 at 28x28 0.25 / 0.23, 256 -> 512 stride 2
     at 56x56 0.52 / 0.46) and hands direct the 3x3 layers' small images
     (cp_sr_hands_over). */
  if (layer->dtype == CONVPOOL_BFLOAT16 && cp_sr_has_bf16_pairs(cpu)) {
    if (layer->groups == 1 &&
        ((layer->conv_stride >= 2 && layer->k >= 3) ||
         (layer->k == 1 &&
          layer->c_in >= (layer->conv_stride >= 2 ? CP_DIRECT_DEEP_1X1 : CP_DIRECT_DEEP_1X1_AVX2))))
      return NULL;
    snprintf(why, capacity,
             "bfloat16 with the pair kernels (isa %s): shift-reduce is as fast or faster unless "
             "the conv is strided with k >= 3, or 1x1 over >= %d input channels (>= %d "
             "strided), in one group (measured rule; shift-reduce hands it 3x3 runs of small "
             "images)",
             cp_isa_name(cpu->isa), CP_DIRECT_DEEP_1X1_AVX2, CP_DIRECT_DEEP_1X1);
    return why;
  }
  if (layer->conv_stride >= 2 && layer->k >= 3 && layer->groups == 1) return NULL;
  if (layer->k == 1 && layer->conv_stride == 1 && layer->groups == 1 &&
      (cpu->isa >= CP_ISA_AVX512
           ? layer->c_in >= CP_DIRECT_DEEP_1X1 ||
                 (layer->c_in >= CP_DIRECT_DEEP_1X1 / 2 && layer->c_out >= CP_DIRECT_DEEP_1X1_AVX2)
           : layer->c_in >= CP_DIRECT_DEEP_1X1_AVX2 || layer->c_out >= CP_DIRECT_DEEP_1X1_AVX2))
    return NULL;
  snprintf(why, capacity,
           "shift-reduce, im2col or depthwise is as fast or faster unless the conv is strided, "
           "k >= 3 and in one group, or 1x1 of stride 1 over >= %d input channels, or >= %d to "
           ">= %d (avx2: >= %d input or output channels) (measured rule)",
           CP_DIRECT_DEEP_1X1, CP_DIRECT_DEEP_1X1 / 2, CP_DIRECT_DEEP_1X1_AVX2,
           CP_DIRECT_DEEP_1X1_AVX2);
  return why;
}

/* The packed weights: pack.h's channel blocks of MR (split 1, every block
   of MR, the lanes past a group's last output channel zero), channel steps
   of the kernel's: [block][step][k*k][MR]. */
static cp_weight_blocks cp_direct_weight_blocks(const cp_layer *layer, const cp_cl_ukernel *uk) {
  cp_weight_blocks wb;
  wb.c_out = layer->c_out, wb.c_in = layer->c_in, wb.k = layer->k;
  wb.mr = wb.mr_tail = (size_t)uk->mr;
  wb.cpack = (size_t)uk->cpack;
  wb.groups = layer->groups, wb.split = 1;
  return wb;
}

static int cp_direct_block_in_one_pass(size_t block_bytes, size_t l2_bytes);

/*
 * The kernel: bfloat16 on the pair kernels where the CPU has them, else fp32
 * (from widened panels for bfloat16); the fp32 AVX-512 tiles of the CPU's
 * width (cpu.h: direct_mr) where the layer fills at least two such blocks of
 * output channels per group and a block's weights go in one pass, or in
 * passes, as they would in 32-channel blocks (a block of 64 channels holds
 * twice the weights). Each output's sum is the same in either (cl-ukernel.h).
 * 64 x 7 against 32 x 14 on an Intel Xeon (2 threads, CLI medians, 2-3
 * alternating turns, us): 1x1 at 7x7 512 -> 2048 375-389 -> 336-341, 2048
 * -> 512 351-369 -> 304-321; 512 -> 128 1x1 at 28x28 379-384 -> 346-359;
 * 512 -> 1024 1x1 stride 2 at 28x28 834-841 -> 711-717; 512 -> 512 3x3 at
 * 7x7 788-831 -> 729-790 (8 images 5.58-5.69 -> 5.40-5.46 ms); 256 ->
 * 1024 1x1 at 14x14 326-329 -> 309; 8 images of 1024 -> 256 1x1 at 14x14
 * 2.79-2.82 -> 2.66 ms; level: 64 -> 128 and 128 -> 256 3x3 stride 2, 256
 * -> 512 1x1 stride 2 at 56x56; slower: 8 images of 1x1 at 7x7 (2.56-2.65
 * -> 2.63-2.69 ms), and 256 -> 512 3x3 stride 2 at 14x14 where its 64-channel
 * blocks went in passes (418-426 -> 511-525 us; hence the pass rule).
 * `wanted` > 0: tiles of that many channels (a hand-over's room laid out so,
 * cp_algo_setup.co_block_wanted), where the kernel list has them.
 */
static const cp_cl_ukernel *cp_direct_kernel(const cp_layer *layer, const cp_cpu *cpu, int wanted) {
  const cp_cl_ukernel *uk =
      layer->dtype == CONVPOOL_BFLOAT16 ? cp_cl_ukernel_select(cpu->isa, 2) : NULL;
  if (uk == NULL) uk = cp_cl_ukernel_select(cpu->isa, 1);
  if (wanted > 0) return cp_cl_ukernel_with_mr(uk, wanted); /* the caller checks its MR */
  const cp_cl_ukernel *wide = cp_cl_ukernel_with_mr(uk, cpu->direct_mr);
  if (wide == uk || layer->c_out / layer->groups < 2 * (int64_t)wide->mr) return uk;
  const size_t steps = cp_direct_group_steps(layer->c_in, layer->groups, uk);
  const size_t bytes = steps * (size_t)(layer->k * layer->k) * (size_t)uk->mr * sizeof(float);
  const size_t wide_bytes = bytes / (size_t)uk->mr * (size_t)wide->mr;
  return cp_direct_block_in_one_pass(bytes, cpu->l2) ==
                 cp_direct_block_in_one_pass(wide_bytes, cpu->l2)
             ? wide
             : uk;
}

static convpool_status cp_direct_setup(const cp_layer *layer, const cp_cpu *cpu,
                                       cp_algo_setup *setup) {
  cp_direct_state *s = CP_ALGO_STATE(cp_direct_state, setup->state);
  s->uk = cp_direct_kernel(layer, cpu, setup->co_block_wanted);
  if (setup->co_block_wanted > 0 && s->uk->mr != setup->co_block_wanted)
    return cp_fail(CONVPOOL_UNSUPPORTED, "direct has no kernel of %d output channels for %s",
                   setup->co_block_wanted, cp_isa_name(cpu->isa));
  const cp_weight_blocks wb = cp_direct_weight_blocks(layer, s->uk);
  size_t block_bytes;
  if (!cp_size_weights_blocked(&wb, &setup->packed_weight_bytes, &block_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, %lld, %lld] have a byte count that overflows",
                   (long long)layer->c_out, (long long)layer->c_in, (long long)layer->k,
                   (long long)layer->k);
  setup->co_block = s->uk->mr;
  setup->positions = s->uk->np;
  setup->lanes = s->uk->mr; /* its tiles' sums are channels in lanes */
  setup->isa = s->uk->isa;
  setup->kernel = s->uk->name;
  return CONVPOOL_SUCCESS;
}

static void cp_direct_pack_weights(const cp_layer *layer, const cp_algo_setup *setup,
                                   const void *weights, float *packed) {
  const cp_weight_blocks wb = cp_direct_weight_blocks(layer, cp_direct_setup_of(setup)->uk);
  cp_pack_weights_blocked(layer->dtype, weights, &wb, packed);
}

/* Items start on any conv row and span the conv width (a unit of ow
   pooled columns): their tiles then run flat over the rows, whatever the
   width (cp_direct_tiles), where column blocks of whole tiles would leave
   a narrow last block (7 columns: blocks of 6 and 1). */
static void cp_direct_item_units(const cp_plan *pl, int64_t *rows, int64_t *cols) {
  *rows = 1;
  *cols = pl->ow * pl->stride;
}

/* An item of at most this many register tiles contracts all its channels in
   one pass where a block's weights fit in half of L2: each weight of an L1
   pass would serve few tiles, and the passes' partial sums going out and
   back cost more than reading the weights from L2. Measured on AVX-512
   (Zen 5, 2 threads, medians of eight alternations in one binary): 256 ->
   512 3x3 stride 2 at 14x14 (9 tiles) 444 -> 402 us (against the build
   before: 441-504 -> 419-460), 2048 -> 512 1x1 at 7x7 337 -> 320 us, 8
   images of either and layers of more tiles level; 512 -> 512 3x3 at 7x7,
   whose block weights are 590 KB, ran 6% slower in one pass; so one pass
   needs them within CP_DIRECT_ONE_PASS_BYTES too, whatever L2 holds: on an
   Intel Xeon (AVX-512, 2 MiB of L2) 512 -> 512 at 7x7 took 1.01-1.06 ms in
   one pass and 0.86-0.94 in passes (CLI, alternating, four turns). */
#define CP_DIRECT_ONE_PASS_TILES 16
#define CP_DIRECT_ONE_PASS_BYTES ((size_t)512 << 10)
static int cp_direct_block_in_one_pass(size_t block_bytes, size_t l2_bytes) {
  return block_bytes <= l2_bytes / 2 && block_bytes <= CP_DIRECT_ONE_PASS_BYTES;
}

/* Without conv padding an fp32 image is its own panel: rows width apart,
   channels a plane apart, every address a position or tap reads inside
   it. */
static int cp_direct_reads_in_place(const cp_plan *pl) {
  return pl->dtype == CONVPOOL_FLOAT32 && cp_unpadded(pl->pad);
}

/* Floats between a packed panel's channels for `floats` per channel: an odd
   number of cache lines (shift-reduce's). */
static size_t cp_direct_channel_stride(size_t floats) {
  const size_t line = CP_CACHE_LINE / sizeof(float);
  size_t cs = cp_round_up(floats, line);
  if ((cs / line) % 2 == 0) cs += line;
  return cs;
}

/* Whether a block's weights fit the one-pass rule (tiles aside). */
static int cp_direct_one_pass(const cp_plan *pl) {
  const cp_cl_ukernel *uk = cp_direct_setup_of(pl->setup)->uk;
  const size_t bytes = cp_direct_group_steps(pl->c_in, pl->groups, uk) * (size_t)(pl->k * pl->k) *
                       (size_t)uk->mr * sizeof(float);
  return pl->setup->isa >= CP_ISA_AVX512 && cp_direct_block_in_one_pass(bytes, pl->l2_bytes);
}

static int cp_direct_geometry(cp_plan *pl) {
  cp_direct_plan *dp = CP_ALGO_STATE(cp_direct_plan, pl->state);
  const size_t conv_rows = (size_t)pl->conv_rows, cw = (size_t)pl->conv_cols;
  /* the register tile: the family's kernel whose tiles best cover an
     item's positions, flat over its rows (of its images) where items span
     the width (cp_direct_tiles), else a row's: a 7x7 output in one item takes
     7 tiles of 7 (512 -> 512 3x3 0.73 -> 0.67 ms against 4 tiles of 14), in
     items of 4 and 3 rows (a region per thread) 2 and 2 of 14 (256 -> 512
     3x3 stride 2 at 14x14: 0.36 against 0.385 with tiles of 7, which the
     layer's 49 positions chose). Measured against 32 x 6 (Zen 5, 2 threads, CLI
     medians, alternating, one binary): 1024 -> 256 1x1 at 14x14 342-346 ->
     299-306 us with 32 x 14, the ResNet stem 846-871 -> 819-827, 512 -> 512
     3x3 at 7x7 798-852 -> 781-811, 2048 -> 512 1x1 at 7x7 324-415 ->
     299-312; slower: 256 -> 512 3x3 stride 2 at 14x14 400-418 -> 420-448. */
  const int flat = pl->lanes > 0 || pl->col_block >= pl->pw;
  const size_t images = (size_t)pl->images; /* > 1: whole images, flat (cp_direct_tiles) */
  const size_t ow = (size_t)pl->ow;
  const size_t item_rows = conv_rows < (size_t)pl->oh ? conv_rows : (size_t)pl->oh;
  dp->uk = cp_cl_ukernel_for_positions(cp_direct_setup_of(pl->setup)->uk,
                                       flat ? images * item_rows * ow : ow);
  pl->kernel = dp->uk->name, pl->positions = dp->uk->np;
  const cp_cl_ukernel *uk = dp->uk;
  const size_t np = (size_t)uk->np, mr = (size_t)uk->mr, s = (size_t)pl->conv_stride;
  const size_t extent = (size_t)pl->extent, taps = (size_t)(pl->k * pl->k);
  const size_t line = CP_CACHE_LINE / sizeof(float), es = sizeof(float);
  size_t rows, cs, n, at;
  if (!cp_mul(conv_rows - 1, s, &rows) || !cp_add(rows, extent, &rows) ||
      !cp_mul(cw - 1, s, &dp->cols) || !cp_add(dp->cols, extent, &dp->cols) ||
      !cp_mul(rows, dp->cols, &cs))
    return 0;
  /* the image itself (cp_direct_reads_in_place), or the packed panel */
  dp->group_steps = cp_direct_group_steps(pl->c_in, pl->groups, uk);
  dp->in_place = cp_direct_reads_in_place(pl);
  if (dp->in_place) {
    dp->panel.ld = (size_t)pl->width;
    dp->panel.cs = (size_t)pl->height * (size_t)pl->width;
    dp->panel.floats = 0;
    pl->panel_bytes = 0;
    if (!cp_mul((size_t)pl->c_in, dp->panel.cs, &dp->image_floats)) return 0;
  } else { /* a panel per image of the item, one after the other */
    dp->panel.ld = dp->cols;
    cs = cp_direct_channel_stride(cs);
    dp->panel.cs = cs;
    if (!cp_mul((size_t)pl->groups * dp->group_steps, cs, &dp->image_floats) ||
        !cp_mul(dp->image_floats, images, &dp->panel.floats) ||
        !cp_mul(dp->panel.floats, es, &pl->panel_bytes))
      return 0;
  }
  /* at most a tile per NP columns of each row of each image (fewer when flat) */
  if (!cp_mul(conv_rows * images, (cw + np - 1) / np, &dp->tiles)) return 0;
  const size_t l1 = pl->l1_bytes > 16384 ? pl->l1_bytes : 16384;
  const size_t per_step = taps * mr * es;
  dp->kc = l1 / 2 / per_step;
  if ((images * conv_rows * cw + np - 1) / np <= CP_DIRECT_ONE_PASS_TILES && cp_direct_one_pass(pl))
    dp->kc = dp->group_steps; /* one pass */
  if (dp->kc < 1) dp->kc = 1;
  dp->prefetch = dp->kc < dp->group_steps && pl->setup->packed_weight_bytes > pl->l2_bytes;
  pl->buf_row_ld = cw;                 /* compact rows: the kernels write only an item's columns */
  pl->buf_image_cols = conv_rows * cw; /* images side by side (plan.h: images) */
  if (!cp_mul(pl->buf_image_cols, images, &pl->buf_cols) || !cp_mul(pl->buf_cols, mr, &at))
    return 0;
  if (pl->lanes > 0) at = 0; /* the partial sums are the block's outputs: no rows */
  dp->partial = cp_round_up(at, line);
  if (!cp_mul(dp->tiles, np * mr, &n) || !cp_add(dp->partial, n, &at)) return 0;
  dp->geom = cp_round_up(at, line);
  if (!cp_mul(dp->tiles, sizeof(cp_direct_tile) / es, &n) || !cp_add(dp->geom, n, &at)) return 0;
  dp->offsets = cp_round_up(at, line);
  if (!cp_mul(taps, sizeof(ptrdiff_t) / es, &n) || !cp_add(dp->offsets, n, &at)) return 0;
  return cp_mul(at, es, &pl->buf_bytes);
}

/* The panel within its budget, and the tile buffer within its own and what
   the panel leaves of its budget: where few input channels make the panel
   small, the buffer of an item's partial sums (one channel block at a time,
   read back at once by the epilogue) takes the rest, and the items grow to
   the threads' share of the rows. ResNet's stem on a VM presenting an EPYC
   of family 23 (L2 512 KiB, 2 threads, best CLI medians of 5 alternating
   rounds): 10 items of 6 pooled rows (13 conv rows for 12 new ones; five
   rounds for two threads) -> 8 of 7 rows, 4.04 -> 3.82 ms, 8 images 31.1 ->
   30.1; 3 -> 32 3x3 stride 2 at 224x224 0.540 -> 0.507, 8 images of 3 ->
   64 3x3 at 224x224 31.7 -> 30.5 (one image 3.95 -> 3.99). Letting the
   panel past its budget as well lost 2-4% (128 -> 256 3x3 stride 2 at
   28x28: 2.02 -> 2.10 ms). An item that reads the source in place counts
   the source rows its taps read, whole lines of every channel, as its
   panel, where one pooled row's would fit: each channel block reads them
   again. Zen 5 (L2 1 MiB), best CLI medians of 5 alternating rounds: 8
   images of 256 -> 512 1x1 stride 2 at 56x56, items of 28 rows (1.5 MiB of
   source each) -> 7, 6.54 -> 5.72 ms; level on 1024 -> 256 1x1 at 14x14
   (one image 268 / 270 us, eight 2.23 / 2.28 ms) and 512 -> 1024 1x1
   stride 2 at 28x28 (622 / 623 us). */
/* Rows of the source that `conv_rows` conv rows read. */
static int64_t cp_direct_source_rows(const cp_plan *pl, int64_t conv_rows) {
  const int64_t spanned = (conv_rows - 1) * pl->conv_stride + pl->extent;
  const int64_t tapped = conv_rows * pl->k;
  const int64_t rows = spanned < tapped ? spanned : tapped;
  return rows < pl->height ? rows : pl->height;
}

static int cp_direct_fits(const cp_plan *pl) {
  double panel = (double)pl->panel_bytes;
  if (CP_ALGO_STATE(const cp_direct_plan, pl->state)->in_place && pl->images == 1) {
    /* read in place: the whole lines of every channel in the source rows
       that an item's taps read count as its panel, where a pooled row's
       would fit */
    const double line = (double)pl->width * (double)pl->c_in * sizeof(float);
    if ((double)cp_direct_source_rows(pl, pl->pool) * line <= (double)pl->panel_budget)
      panel = (double)cp_direct_source_rows(pl, pl->conv_rows) * line;
  }
  return panel <= (double)pl->panel_budget &&
         panel + (double)pl->buf_bytes <= (double)(pl->panel_budget + pl->buf_budget);
}

/*
 * Images per item. Where one image's conv output fills few register tiles
 * (fewer than CP_DIRECT_IMAGE_POSITIONS positions), an item takes whole
 * images, up to CP_DIRECT_ITEM_POSITIONS positions, its tiles flat over all
 * of them (cp_direct_tiles), so that each pass's weights serve more tiles
 * from L1; where the input is packed, only if the weights go in passes
 * (cp_direct_geometry: in one pass every tile reads them from L2 anyway,
 * and the fewer, larger items take channel groups that pack the panels in
 * a phase of their own), and the item's panels within the panel budget.
 * Each output's sum is the same as alone. Measured (Zen 5, 2 threads, CLI
 * medians, this rule against items of one image, alternating, one binary):
 * 8 images of 512 -> 512 3x3 at 7x7 (passes) 6.45-6.82 against 7.0-7.34 ms,
 * 2048 -> 512 1x1 at 7x7 (in place) 2.37-2.65 against 2.71-2.83, 1024 ->
 * 2048 1x1 stride 2 at 14x14 5.92-6.12 against 6.49-6.73; in one pass on
 * packed input slower: 256 -> 512 3x3 stride 2 at 14x14 3.02-3.06 against
 * 2.71-2.74, 128 -> 128 3x3 at 7x7 0.41-0.44 against 0.35-0.40. On an Intel
 * Xeon (cp_cpu.direct_images_one_pass) faster in one pass too, against items
 * of one image, CLI medians, 2-3 alternating turns: 8 images of 256 -> 512
 * 3x3 stride 2 at 14x14 3.84-3.93 -> 3.15-3.41 ms, 256 -> 256 at 7x7
 * 1.65-1.76 -> 1.54-1.57, 64 -> 64 at 7x7 120-121 -> 112 us, 128 -> 128
 * at 7x7 level.
 */
#define CP_DIRECT_IMAGE_POSITIONS 64
#define CP_DIRECT_ITEM_POSITIONS 128
static int64_t cp_direct_images_per_item(const cp_plan *pl) {
  if (pl->batch < 2 || pl->oh >= CP_DIRECT_IMAGE_POSITIONS || pl->ow >= CP_DIRECT_IMAGE_POSITIONS ||
      pl->oh * pl->ow >= CP_DIRECT_IMAGE_POSITIONS)
    return 1;
  int64_t images = CP_DIRECT_ITEM_POSITIONS / (pl->oh * pl->ow);
  if (images > pl->batch) images = pl->batch;
  if (!cp_direct_reads_in_place(pl)) { /* an image's panel (cp_direct_geometry), at most */
    if (cp_direct_one_pass(pl) && !cp_cpu_get()->direct_images_one_pass) return 1;
    const double rows = (double)((pl->oh - 1) * pl->conv_stride + pl->extent);
    const double cols = (double)((pl->ow - 1) * pl->conv_stride + pl->extent);
    if (rows * cols > 1e9) return 1;
    const size_t cs = cp_direct_channel_stride((size_t)(rows * cols));
    const double steps =
        (double)pl->groups *
        (double)cp_direct_group_steps(pl->c_in, pl->groups, cp_direct_setup_of(pl->setup)->uk);
    const double bytes = steps * (double)cs * sizeof(float);
    while (images > 1 && (double)images * bytes > (double)pl->panel_budget) images--;
  }
  return images;
}

/* Kernel lanes of an item (every channel block, whole register tiles) plus
   its copy, per pooled output. */
static double cp_direct_item_cost(const cp_plan *pl) {
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  const cp_cl_ukernel *uk = dp->uk;
  /* flat tiles where the item spans the conv width (cp_direct_tiles) */
  const double positions = (double)pl->conv_rows * (double)pl->conv_cols;
  const double tiles = pl->col_block >= pl->pw ? ceil(positions / uk->np) : (double)dp->tiles;
  const double lanes = tiles * uk->np * (double)dp->group_steps * (double)(pl->k * pl->k) *
                       (double)pl->co_blocks * uk->mr;
  const double copy = pl->cfg->copy_cost * (double)dp->panel.floats;
  return (lanes + copy) /
         ((double)pl->group * (double)pl->col_block * (double)pl->stride * (double)pl->stride);
}

static double cp_direct_cost(const cp_plan *pl) {
  return cp_rows_cost(pl, cp_direct_item_cost);
}

/* Where channel groups split an image region, its panel is packed once,
   before the items, and read by the items of every channel group; each
   slice of CP_DIRECT_SLICE input channels is an item of that phase, so
   that one region's copy (a small image's only one) is shared by the
   threads. 256 -> 512 channels 3x3 stride 2 at 14x14, Zen 5, 2 threads: the
   one copy took 46 of the layer's 530 us while the other thread waited. */
#define CP_DIRECT_SLICE 64
static int cp_direct_schedule(cp_plan *pl) {
  cp_direct_plan *dp = CP_ALGO_STATE(cp_direct_plan, pl->state);
  dp->slices = 1;
  if (dp->in_place) return 1; /* nothing to pack */
  if (!cp_plan_share_regions(pl)) return 0;
  dp->slices = ((size_t)pl->groups * dp->group_steps + CP_DIRECT_SLICE - 1) / CP_DIRECT_SLICE;
  pl->prepare_items *= (int64_t)dp->slices;
  return 1;
}

static float *cp_direct_region(const cp_run *r, int64_t region) {
  return (float *)(void *)(r->shared + cp_region_offset(r->pl, region));
}

/* Image b's panel of the item: input rows y0 * stride - pad_top on, columns
   x0 * stride - pad_left on, channel steps [c0, c1). */
static void cp_direct_pack_image(const cp_run *r, const cp_item *it, int64_t b, size_t c0,
                                 size_t c1, float *panel) {
  const cp_plan *pl = r->pl;
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  cp_panel_src src;
  src.image = r->src +
              (size_t)b * (size_t)pl->c_in * (size_t)pl->height * (size_t)pl->width * pl->elem_size;
  src.elem_size = pl->elem_size;
  src.c_in = pl->c_in, src.height = pl->height, src.width = pl->width;
  src.groups = pl->groups, src.split = 1, src.phases = 1;
  src.group_steps = dp->group_steps;
  src.cpack = (size_t)dp->uk->cpack;
  src.widen = src.cpack == 1 ? r->widen : NULL; /* pairs keep the bf16 bits */
  src.ahead_rows = (size_t)pl->cfg->pack_ahead_rows;
  const size_t rows = (size_t)((it->ny - 1) * pl->conv_stride + pl->extent);
  cp_pack_panel_steps(&src, it->y0 * pl->conv_stride - pl->pad[CP_TOP], rows,
                      it->x0 * pl->conv_stride - pl->pad[CP_LEFT], dp->cols, c0, c1, &dp->panel,
                      panel);
}

/* The item's panels, channel steps [c0, c1): each of its images', one
   after the other. */
static void cp_direct_pack(const cp_run *r, const cp_item *it, size_t c0, size_t c1, float *panel) {
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, r->pl->state);
  for (int64_t j = 0; j < it->nb; j++)
    cp_direct_pack_image(r, it, it->b + j, c0, c1, panel + (size_t)j * dp->image_floats);
}

/* Slice `index % slices` of region `index / slices`. */
static void cp_direct_prepare(const cp_run *r, int64_t index) {
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, r->pl->state);
  const int64_t region = index / (int64_t)dp->slices;
  const size_t steps = (size_t)r->pl->groups * dp->group_steps;
  const size_t c0 = (size_t)(index % (int64_t)dp->slices) * CP_DIRECT_SLICE;
  const cp_item it = cp_item_of(r->pl, region * r->pl->co_groups);
  cp_direct_pack(r, &it, c0, c0 + CP_DIRECT_SLICE < steps ? c0 + CP_DIRECT_SLICE : steps,
                 cp_direct_region(r, region));
}

static const float *cp_direct_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const cp_plan *pl = r->pl;
  if (CP_ALGO_STATE(const cp_direct_plan, pl->state)->in_place)
    return (const float *)(const void *)r->src +
           (((size_t)it->b * (size_t)pl->c_in * (size_t)pl->height +
             (size_t)(it->y0 * pl->conv_stride)) *
                (size_t)pl->width +
            (size_t)(it->x0 * pl->conv_stride));
  if (pl->prepare_items > 0) return cp_direct_region(r, cp_item_region(pl, it));
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  cp_direct_pack(r, it, 0, (size_t)pl->groups * dp->group_steps, panel);
  return panel;
}

/* Whether the item's register tiles run flat over its positions (row after
   row): where the block stays channels in lanes (the tiles' sums, position
   after position, are the tile buffer), its rows are the tile buffer's (the
   item spans the conv width) or it has several images (plan.h: images);
   else they run per conv row. */
static int cp_direct_flat(const cp_plan *pl, const cp_item *it, size_t lanes) {
  return lanes > 0 || (size_t)it->nx == pl->buf_row_ld || it->nb > 1;
}

/* Flat positions of each image of the item: its conv outputs, or with
   several images the plan's columns per image (buf_image_cols, at least
   ny rows of the tile buffer's). */
static size_t cp_direct_image_cols(const cp_plan *pl, const cp_item *it) {
  return it->nb > 1 ? pl->buf_image_cols : (size_t)it->ny * (size_t)it->nx;
}

static size_t cp_direct_tile_count(const cp_plan *pl, const cp_item *it, size_t np, int flat) {
  const size_t nx = (size_t)it->nx, ny = (size_t)it->ny;
  return flat ? ((size_t)it->nb * cp_direct_image_cols(pl, it) + np - 1) / np
              : ny * ((nx + np - 1) / np);
}

/* Those tiles' positions, first columns and counts into tile[]. Flat
   position q is image q / image_cols's conv output (y, x) at q % image_cols
   = y * ld + x, ld the tile buffer's row (the item's conv columns where the
   block stays channels in lanes); the image's panel (or image) lies
   image_floats after the previous one's. A position past an image's
   outputs (x >= nx or y >= ny: the rest of a tile buffer row, or of the
   image's columns) reads its last column or row, and its sums go where the
   epilogue reads nothing. */
static void cp_direct_tiles(const cp_plan *pl, const cp_item *it, size_t np, int flat, size_t lanes,
                            cp_direct_tile *tile) {
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  const size_t nx = (size_t)it->nx, ny = (size_t)it->ny, s = (size_t)pl->conv_stride;
  const size_t per_row = (nx + np - 1) / np, image = cp_direct_image_cols(pl, it);
  const size_t ld = lanes > 0 || it->nb == 1 ? nx : pl->buf_row_ld;
  const size_t tiles = cp_direct_tile_count(pl, it, np, flat);
  /* the tiles' positions are consecutive q (a row's tiles end at its last
     column, the next row's begin at its first), so one cursor walks them:
     q = img * image + at, at = ay * ld + ax, with no division per position */
  size_t img = 0, at = 0, ay = 0, ax = 0;
  for (size_t i = 0; i < tiles; i++) {
    const size_t y = i / per_row, q0 = flat ? i * np : y * nx + (i % per_row) * np;
    const size_t end = flat ? (size_t)it->nb * image : (y + 1) * nx;
    tile[i].n = end - q0 < np ? end - q0 : np;
    tile[i].col = flat ? q0 : y * pl->buf_row_ld + (i % per_row) * np;
    for (size_t p = 0; p < tile[i].n; p++) {
      const size_t qy = ay < ny ? ay : ny - 1, qx = ax < nx ? ax : nx - 1;
      tile[i].pos[p] = (ptrdiff_t)(img * dp->image_floats + qy * s * dp->panel.ld + qx * s);
      if (++ax == ld) ax = 0, ay++;
      if (++at == image) at = 0, ay = 0, ax = 0, img++;
    }
    for (size_t p = tile[i].n; p < np; p++) tile[i].pos[p] = tile[i].pos[tile[i].n - 1];
  }
}

/*
 * Where a block's contraction runs in passes, the weights of the pass after
 * the current one (the next block's first pass, after the last), `share` of
 * their cache lines before each tile: the pass's first tile then reads
 * them from cache. A layer's weights come from memory in every run of a
 * network (each layer's are read once per pass over it), and with few
 * tiles a pass the first tile's reads had no compute to overlap. Zen 5, 2
 * threads, one image of 512 -> 512 3x3 at 7x7 (7 tiles a pass of 21
 * channels), caches evicted before each run, best medians of 8
 * alternating rounds: 0.68 -> 0.61 ms (hot: level within noise). Not in
 * one pass, where the next block's weights (up to half of L2) in bursts
 * before each tile made 256 -> 512 3x3 stride 2 at 14x14 (9 tiles) 15%
 * slower; nor where all the weights fit L2 (64 -> 128 3x3 stride 2 at
 * 56x56, 295 KB: 2-3% slower, the lines already there).
 */
static void cp_direct_prefetch(const float *next, const float *end, size_t bytes, size_t tile,
                               size_t tiles) {
  const size_t have = next < end ? (size_t)(end - next) * sizeof(float) : 0;
  const size_t lines = (have < bytes ? have : bytes) / CP_CACHE_LINE;
  const char *at = (const char *)next;
  for (size_t l = lines * tile / tiles; l < lines * (tile + 1) / tiles; l++)
    __builtin_prefetch(at + l * CP_CACHE_LINE, 0, 2);
}

/*
 * Channel block cb: the contraction in passes of kc input channels, the
 * pass's weights in L1 while every tile of the item multiplies them, each
 * tile's sums kept between passes in the partial sums (the kernels continue
 * them: the same bits as one pass). Where the run leaves blocks channels in
 * lanes (cp_run_lanes), the flat tiles' partial sums after the last pass
 * are the block's conv outputs in that layout, position after position;
 * otherwise the last pass stores them transposed into the block's rows of
 * buf.
 */
static const float *cp_direct_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                            int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  const cp_cl_ukernel *uk = dp->uk;
  const size_t np = (size_t)uk->np, mr = (size_t)uk->mr, cs = dp->panel.cs;
  const size_t taps = (size_t)(pl->k * pl->k), gs = dp->group_steps;
  float *partial = buf + dp->partial;
  cp_direct_tile *tile = (cp_direct_tile *)(void *)(buf + dp->geom);
  ptrdiff_t *off = (ptrdiff_t *)(void *)(buf + dp->offsets);
  const size_t lanes = cp_run_lanes(r);
  const int flat = cp_direct_flat(pl, it, lanes);
  /* the item's taps and tiles, once: buf is kept between its blocks */
  if (cb == it->cb0) {
    for (int64_t i = 0; i < pl->k; i++)
      for (int64_t j = 0; j < pl->k; j++)
        off[i * pl->k + j] =
            (ptrdiff_t)(i * pl->dilation * (int64_t)dp->panel.ld + j * pl->dilation);
    cp_direct_tiles(pl, it, np, flat, lanes, tile);
  }
  const size_t tiles = cp_direct_tile_count(pl, it, np, flat);
  const float *w = r->packed + (size_t)cb * gs * taps * mr;
  panel += (size_t)cp_block_group(pl, cb) * gs * cs; /* the group's channel steps */
  /* the item's blocks' weights end here (cp_direct_prefetch reads no further) */
  const float *end = r->packed + (size_t)it->cb1 * gs * taps * mr;
  for (size_t c0 = 0; c0 < gs; c0 += dp->kc) {
    const size_t kn = gs - c0 < dp->kc ? gs - c0 : dp->kc;
    const int store = c0 + kn == gs && lanes == 0; /* the last pass, to channel rows */
    const float *next = dp->prefetch ? w + (c0 + kn) * taps * mr : end;
    for (size_t i = 0; i < tiles; i++) {
      cp_direct_prefetch(next, end, kn * taps * mr * sizeof(float), i, tiles);
      uk->fn(panel + c0 * cs, cs, tile[i].pos, off, taps, kn, w + c0 * taps * mr,
             partial + i * np * mr, c0 == 0, store ? buf + tile[i].col : NULL, pl->buf_cols,
             tile[i].n);
    }
  }
  return lanes > 0 ? partial : buf;
}

static size_t cp_direct_streamed_weight_bytes(const cp_plan *pl) {
  return pl->setup->packed_weight_bytes;
}

static void cp_direct_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_direct_plan *dp = CP_ALGO_STATE(const cp_direct_plan, pl->state);
  const cp_cl_ukernel *uk = dp->uk;
  const cp_cpu *cpu = cp_cpu_get();
  char width[160] = ""; /* the fp32 AVX-512 tiles' width, where the run's kernels are those */
  if (uk->isa >= CP_ISA_AVX512 && uk->cpack == 1)
    snprintf(width, sizeof width, "; fp32 AVX-512 tiles of %d channels%s", cpu->direct_mr,
             cpu->direct_mr_from_env > 0   ? " (CONVPOOL_DIRECT_MR)"
             : cpu->direct_mr_from_env < 0 ? " (CONVPOOL_DIRECT_MR not recognised, ignored)"
                                           : " on this CPU where they fit (cp_direct_kernel)");
  snprintf(text, capacity,
           "register tile  %d output channels (in the lanes) x %d conv positions, row after row "
           "(input broadcast); %lld channel blocks%s\n"
           "panel          %lld pooled rows x %lld pooled columns: conv %lld rows (%lld input "
           "rows) x %lld columns x %lld channels, %s, %s; stride and dilation read in place\n",
           uk->mr, uk->np, (long long)pl->co_blocks, width, (long long)pl->group,
           (long long)pl->col_block, (long long)pl->conv_rows,
           (long long)((pl->conv_rows - 1) * pl->conv_stride + pl->extent),
           (long long)pl->conv_cols, (long long)pl->c_in,
           uk->cpack == 2 ? "bf16 channel pairs" : "fp32",
           dp->in_place ? "the source itself (no conv padding): nothing packed" : "packed");
}

const cp_algorithm cp_algorithm_direct = {
    .name = "channels-in-lanes direct",
    .id = CONVPOOL_ALGO_DIRECT,
    .declines = cp_direct_declines,
    .auto_skips = cp_direct_auto_skips,
    .setup = cp_direct_setup,
    .pack_weights = cp_direct_pack_weights,
    .item_units = cp_direct_item_units,
    .images_per_item = cp_direct_images_per_item,
    .geometry = cp_direct_geometry,
    .fits = cp_direct_fits,
    .cost = cp_direct_cost,
    .schedule = cp_direct_schedule,
    .prepare = cp_direct_prepare,
    .pack_item = cp_direct_pack_item,
    .compute_block = cp_direct_compute_block,
    .streamed_weight_bytes = cp_direct_streamed_weight_bytes,
    .local_regions_sharing_cache = 1,
    .describe = cp_direct_describe,
};
