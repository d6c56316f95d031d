/*
 * Winograd F(4x4, 3x3) (the algorithm winograd) and F(2x2, 3x3)
 * (winograd2x3), see winograd/winograd.h: per item, the input window is
 * packed into an fp32 panel (as for shift-reduce) and transformed into V,
 * points x (input channels x tiles) (36 or 16 points); per pass over a few
 * channel blocks, a GEMM per point multiplies V by the transformed weights U
 * into M; per channel block, the output transform writes the conv output
 * into the tile buffer for the epilogue. The products run on the
 * channels-in-lanes kernels (output channels in the lanes, each tile's V
 * broadcast, only tiles with outputs: F(2x2, 3x3) always, F(4x4, 3x3) by a
 * measured rule, cp_wino_f43_on_cl) or on the shift-reduce kernels with k =
 * 1 (tiles in the lanes: F(4x4, 3x3) otherwise); the same sums either way.
 *
 * Tiles lie on one grid over the whole conv output (items start at conv
 * rows and columns that are multiples of the tile size), so every output is
 * computed from the same tile whatever the items and threads. A tile whose
 * input holds a NaN or an Inf would spread it to outputs that do not see it,
 * and one whose input range is wide would spread its rounding errors to
 * outputs whose sum |x*w| is small; the range rule (winograd/winograd.h)
 * flags both, and such tiles are recomputed directly, on the products'
 * kind of kernel (shift-reduce's, weights kept in its blocked layout too,
 * bit for bit shift-reduce's outputs; or the channels-in-lanes kernel, on
 * the direct algorithm's weight layout).
 */
#include <stdio.h>
#include <string.h>

#include "../kernels/cl-ukernel.h"
#include "../winograd/winograd.h"
#include "sr-kernels.h"

/* The setup's own state: shift-reduce's first (a handed-over run and the
   direct tiles read it), then where U and the blocks' flags lie in the
   packed weights. */
typedef struct cp_wino_setup {
  cp_sr_setup sr;
  /* per tile size (cp_wino_kinds), where packed (u_floats > 0) */
  size_t u_offset[2];     /* floats before U */
  size_t u_floats[2];     /* floats of U */
  size_t flags_offset[2]; /* floats before the blocks' non-finite flags */
  /* F(2x2, 3x3) runs on the channels-in-lanes kernel: its products (output
     channels in the lanes, a tile's V broadcast: any tile count fills the
     register tile) and its direct tiles, whose weights lie [cb][c][9][MR]
     at cl_offset; U and the flags are in blocks of its MR */
  const cp_cl_ukernel *cl;
  size_t cl_offset;
  unsigned cl_kinds; /* the tile sizes (1 << index) whose products run on cl: F(2x2, 3x3)'s
                        always, F(4x4, 3x3)'s with vector kernels (cp_wino_f43_on_cl) */
  int direct_shares; /* direct's setup packs the cl_offset weights as laid out here (fp32:
                        not for bfloat16 where direct has pair kernels) */
} cp_wino_setup;
CP_ALGO_STATE_FITS(cp_wino_setup);

static const cp_wino_setup *cp_wino_setup_of(const cp_plan *pl) {
  return CP_ALGO_STATE(const cp_wino_setup, pl->setup->state);
}

/* The tile sizes: F(4x4, 3x3) is the algorithm winograd's, F(2x2, 3x3)
   winograd2x3's (auto's winograd packs both and hands small images to
   winograd2x3: cp_wino_hands_over). */
enum { CP_WINO_F43 = 0, CP_WINO_F23 = 1 };
static const cp_wino_kind *const cp_wino_kinds[2] = {&cp_wino_f43, &cp_wino_f23};

static int cp_wino_index(const cp_plan *pl) {
  return pl->algo == &cp_algorithm_winograd2x3 ? CP_WINO_F23 : CP_WINO_F43;
}

/* The plan's products, output transform and direct tiles run on the
   channels-in-lanes kernel (else on shift-reduce's). */
static int cp_wino_on_cl(const cp_plan *pl) {
  return cp_wino_setup_of(pl)->cl_kinds >> cp_wino_index(pl) & 1;
}

static const cp_wino_kind *cp_wino_kind_of(const cp_plan *pl) {
  return cp_wino_kinds[cp_wino_index(pl)];
}

static const char *cp_wino_declines_kind(const cp_wino_kind *kd, const cp_layer *layer, char *why,
                                         size_t capacity) {
  if (layer->k != 3) {
    snprintf(why, capacity, "Winograd %s computes 3x3 filters only (k = %lld)", kd->name,
             (long long)layer->k);
    return why;
  }
  if (layer->conv_stride != 1 || layer->dilation != 1) {
    snprintf(why, capacity,
             "Winograd %s computes stride 1 and dilation 1 only (stride = %lld, dilation = %lld)",
             kd->name, (long long)layer->conv_stride, (long long)layer->dilation);
    return why;
  }
  if (layer->groups != 1) {
    snprintf(why, capacity, "Winograd %s computes groups = 1 only (groups = %lld)", kd->name,
             (long long)layer->groups);
    return why;
  }
  return NULL;
}

static const char *cp_wino_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                    size_t capacity) {
  (void)cpu;
  return cp_wino_declines_kind(&cp_wino_f43, layer, why, capacity);
}

static const char *cp_wino2_declines(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                     size_t capacity) {
  (void)cpu;
  return cp_wino_declines_kind(&cp_wino_f23, layer, why, capacity);
}

/*
 * F(4x4, 3x3)'s products on the channels-in-lanes kernels (output channels
 * in the lanes, each tile's V broadcast, only the tiles with outputs) rather
 * than on shift-reduce's (tiles in the lanes), a measured rule: with vector
 * kernels, for 128 output channels or more. Zen 5, 2 threads, medians of
 * interleaved runs of two operators, hot, cl / sr: 256 -> 256 at 56x56 0.89
 * (3.94 / 4.44 ms), 64 -> 128 at 112x112 0.73, 128 -> 128 at 112x112 pool 2
 * 0.78, 512 -> 512 at 28x28 0.78-0.96, 128 -> 128 at 28x28 and 256 -> 256 at
 * 14x14 level; slower: 8 images of 256 -> 256 at 14x14 (16 tiles an item)
 * 1.07, and with 64 output channels (64 -> 64 at 56x56 1.13, at 224x224 pool
 * 2 1.17: two channel blocks, too few to split the items by). The
 * benchmark's VGG-16 suite against oneDNN, one run each: geometric mean 1.07
 * -> 0.95. The AVX2 kernels (run on Zen 5): 0.92-0.96 on the first three,
 * 8 images of 256 -> 256 at 14x14 1.22.
 */
#define CP_WINO_CL_MIN_C_OUT 128
static int cp_wino_f43_on_cl(const cp_layer *layer, const cp_cpu *cpu) {
  return cpu->isa >= CP_ISA_AVX2 && layer->c_out >= CP_WINO_CL_MIN_C_OUT;
}

/* fp32 kernels for every dtype: the transforms and the sums are fp32. The
   packed weights: the blocked ones for the direct tiles, then for each tile
   size packed (`kinds`, a mask of 1 << CP_WINO_F43 ...) its U and one flag
   per channel block. */
static convpool_status cp_wino_setup_kinds(const cp_layer *layer, const cp_cpu *cpu, unsigned kinds,
                                           cp_algo_setup *s) {
  const convpool_status st = cp_sr_setup_kernels(layer, cpu, CONVPOOL_FLOAT32, 1, s);
  if (st != CONVPOOL_SUCCESS) return st;
  cp_wino_setup *ws = CP_ALGO_STATE(cp_wino_setup, s->state);
  const int f43 = kinds >> CP_WINO_F43 & 1;
  ws->cl = cp_cl_ukernel_select(cpu->isa, 1);
  ws->cl_offset = 0;
  ws->direct_shares =
      layer->dtype != CONVPOOL_BFLOAT16 || cp_cl_ukernel_select(cpu->isa, 2) == NULL;
  ws->cl_kinds = (kinds & 1u << CP_WINO_F23) | (f43 && cp_wino_f43_on_cl(layer, cpu) ? 1u : 0u);
  if (!f43) { /* F(2x2, 3x3) alone: no shift-reduce weights; its kernel's blocks */
    s->packed_weight_bytes = 0;
    s->co_block = ws->cl->mr, s->positions = ws->cl->np, s->lanes = 0, s->kernel = ws->cl->name;
  }
  for (int i = 0; i < 2; i++) {
    ws->u_floats[i] = ws->u_offset[i] = ws->flags_offset[i] = 0;
    if (!(kinds >> i & 1)) continue;
    const int on_cl = ws->cl_kinds >> i & 1;
    const int mr = on_cl ? ws->cl->mr : ws->sr.uk->mr;
    const int mr_tail = on_cl ? ws->cl->mr : ws->sr.uk_tail->mr;
    const size_t blocks = ((size_t)layer->c_out + (size_t)mr - 1) / (size_t)mr;
    ws->u_floats[i] =
        cp_wino_weight_floats(cp_wino_kinds[i], layer->c_out, layer->c_in, mr, mr_tail);
    ws->u_offset[i] = cp_round_up(s->packed_weight_bytes, CP_CACHE_LINE) / sizeof(float);
    size_t ub;
    if (ws->u_floats[i] == 0 || !cp_add(ws->u_offset[i], ws->u_floats[i], &ws->flags_offset[i]) ||
        !cp_add(ws->flags_offset[i], blocks, &ub) ||
        !cp_mul(ub, sizeof(float), &s->packed_weight_bytes))
      return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                     "weights [%lld, %lld, 3, 3] have a byte count that overflows",
                     (long long)layer->c_out, (long long)layer->c_in);
  }
  if (ws->cl_kinds != 0) { /* then the direct tiles' weights, in blocks of cl's MR */
    const size_t mr = (size_t)ws->cl->mr, blocks = ((size_t)layer->c_out + mr - 1) / mr;
    size_t dw;
    ws->cl_offset = cp_round_up(s->packed_weight_bytes, CP_CACHE_LINE) / sizeof(float);
    if (!cp_mul(blocks * mr, (size_t)layer->c_in * 9, &dw) || !cp_add(ws->cl_offset, dw, &dw) ||
        !cp_mul(dw, sizeof(float), &s->packed_weight_bytes))
      return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                     "weights [%lld, %lld, 3, 3] have a byte count that overflows",
                     (long long)layer->c_out, (long long)layer->c_in);
  }
  return CONVPOOL_SUCCESS;
}

/*
 * F(2x2, 3x3) instead of F(4x4, 3x3), a measured rule, where F(4x4, 3x3)'s
 * U is 8 MiB or more: for one image whose F(4x4, 3x3) tiles fill at most
 * one 16-lane register tile (a conv output of 16x16 or less), and for
 * images of 8x8 or less at any batch. Each byte of U then serves few
 * products, U comes from memory (a network's layers read their weights
 * once per pass), and F(2x2, 3x3)'s U is 16/36 of it. Zen 5, 2 threads,
 * benchmark runs (cold weights), F(4x4, 3x3) -> F(2x2, 3x3): 256 -> 256 at
 * 14x14 0.83-0.87 -> 0.50-0.69 ms, 512 -> 512 at 14x14 2.12-2.18 ->
 * 1.73-2.2, 512 -> 512 at 7x7 (handed to shift-reduce before, 1.09-1.12)
 * 0.80-0.96. Images of 8x8 or less, all of whose F(4x4, 3x3) tiles lie at
 * corners (cp_wino_hands_over), go side by side: 8 images of 512 -> 512 at
 * 7x7, 7.2 ms with shift-reduce, 5.6 (benchmark); on ReLU'd normal data with
 * the weights hot 8.0 and 6.9 (2 images: 1.70 and 1.71). Where the direct
 * algorithm's weights are packed too, images of 8x8 or less go on to it
 * (cp_wino_hands_over: a network's activations flag F(2x2, 3x3)'s corner
 * tiles there). With the weights
 * hot, and at 8 images of 14x14, where U stays in L3 from one image to the
 * next, F(4x4, 3x3)'s fewer products win (256 -> 256 at 14x14, 8 images: 3.1
 * against 5.7 ms; 512 -> 512, 15.9 against 17.0; 128 -> 128 at 28x28, one
 * image, 0.42 against 0.80). With AVX2 alone, where the FMAs rather than U
 * bound the run, the one image of 16x16 or less takes F(2x2, 3x3) only from
 * a U of 32 MiB (a VM presenting an EPYC of family 23, 16 FLOP a cycle, 2
 * threads): F(4x4, 3x3) against F(2x2, 3x3), best CLI medians of 4
 * alternating rounds, 256 -> 256 at 14x14 (U 9 MiB) 1.62 against 1.95 ms
 * (benchmark runs: 1.78-1.86 against 1.99-2.19), 256 -> 512 (18 MiB) 3.43
 * / 3.41, 384 -> 384 (20 MiB) 3.81 / 3.89, 512 -> 512 (36 MiB) 6.75 /
 * 6.83, in the benchmark (cold weights) 7.28 / 6.84.
 */
#define CP_WINO_F23_MAX_TILES 16
#define CP_WINO_F23_MIN_U_BYTES (8.0 * 1024 * 1024)
#define CP_WINO_F23_MIN_U_BYTES_AVX2 (32.0 * 1024 * 1024)
static double cp_wino_u43_bytes(const cp_layer *layer) {
  return (double)CP_WINO_POINTS * (double)layer->c_in * (double)layer->c_out * sizeof(float);
}

static int cp_wino_too_small(const cp_wino_kind *kd, const cp_layer *layer, const cp_blocking *cfg,
                             int64_t batch, int64_t oh, int64_t ow);

static int cp_wino_prefers_f23(const cp_layer *layer, const cp_blocking *cfg, int64_t batch,
                               int64_t oh, int64_t ow) {
  const int64_t th = (oh + 3) / 4, tw = (ow + 3) / 4;
  /* images of only corner tiles that F(4x4, 3x3) hands over (cp_wino_too_small) */
  const int corners_handed =
      th <= 2 && tw <= 2 && cp_wino_too_small(&cp_wino_f43, layer, cfg, batch, oh, ow);
  const double u = cp_wino_u43_bytes(layer);
  const double one_image_u =
      cfg->isa >= CP_ISA_AVX512 ? CP_WINO_F23_MIN_U_BYTES : CP_WINO_F23_MIN_U_BYTES_AVX2;
  return u >= CP_WINO_F23_MIN_U_BYTES &&
         (corners_handed || (batch == 1 && th * tw <= CP_WINO_F23_MAX_TILES && u >= one_image_u));
}

/* winograd: F(4x4, 3x3), and F(2x2, 3x3) too where auto chose it and the
   rule above can hand it runs (they read it). */
static convpool_status cp_wino_setup_layer(const cp_layer *layer, const cp_cpu *cpu,
                                           cp_algo_setup *s) {
  const int f23 = s->auto_choice && cp_wino_u43_bytes(layer) >= CP_WINO_F23_MIN_U_BYTES;
  return cp_wino_setup_kinds(layer, cpu, 1u << CP_WINO_F43 | (f23 ? 1u << CP_WINO_F23 : 0), s);
}

static convpool_status cp_wino2_setup_layer(const cp_layer *layer, const cp_cpu *cpu,
                                            cp_algo_setup *s) {
  return cp_wino_setup_kinds(layer, cpu, 1u << CP_WINO_F23, s);
}

/* The run's channel blocks: on the channels-in-lanes products its kernel's
   MR (the setup's are shift-reduce's where auto's winograd hands the run
   over). */
static void cp_wino_layout(cp_plan *pl) {
  if (cp_wino_on_cl(pl)) {
    pl->co_block = cp_wino_setup_of(pl)->cl->mr;
    pl->kernel = cp_wino_setup_of(pl)->cl->name; /* its products' */
    pl->positions = cp_wino_setup_of(pl)->cl->np;
  }
  pl->lanes = 0;
}

/* Per channel block, after U: cp_wino_block_scale's verdict, the block's
   largest |U| (>= 0) or -1 for a block that shift-reduce computes over every
   tile (a weight that is not finite, whose transform would mix inf - inf
   into every point; a U that overflows or is too large; uneven taps; fewer
   than CP_WINO_MIN_CHANNELS input channels). */
static const float *cp_wino_block_flags(const cp_plan *pl, const float *packed) {
  return packed + cp_wino_setup_of(pl)->flags_offset[cp_wino_index(pl)];
}

static int cp_wino_block_direct(const cp_plan *pl, const float *packed, int64_t cb) {
  return !(cp_wino_block_flags(pl, packed)[cb] >= 0.0f);
}

/* Blocked weights for the direct path first, then per tile size U and the
   blocks' verdicts (and F(2x2, 3x3)'s direct weights). */
static void cp_wino_pack_weights_all(const cp_layer *layer, const cp_algo_setup *s,
                                     const void *weights, float *packed) {
  const cp_wino_setup *ws = CP_ALGO_STATE(const cp_wino_setup, s->state);
  if (ws->u_floats[CP_WINO_F43] > 0) cp_sr_pack_weights(layer, s, weights, packed);
  for (int i = 0; i < 2; i++) {
    if (ws->u_floats[i] == 0) continue;
    const int on_cl = ws->cl_kinds >> i & 1;
    const int mr = on_cl ? ws->cl->mr : ws->sr.uk->mr;
    const int mr_tail = on_cl ? ws->cl->mr : ws->sr.uk_tail->mr;
    const size_t blocks = ((size_t)layer->c_out + (size_t)mr - 1) / (size_t)mr;
    float *flags = packed + ws->flags_offset[i], *u = packed + ws->u_offset[i];
    cp_wino_pack_weights(cp_wino_kinds[i], layer->dtype, weights, layer->c_out, layer->c_in, mr,
                         mr_tail, u);
    for (size_t cb = 0; cb < blocks; cb++)
      flags[cb] = cp_wino_block_scale(cp_wino_kinds[i], layer->dtype, weights, layer->c_out,
                                      layer->c_in, mr, mr_tail, u, cb);
  }
  if (ws->cl_kinds != 0) { /* [cb][c][9][MR], zero past c_out */
    const size_t mr = (size_t)ws->cl->mr, cin = (size_t)layer->c_in, cout = (size_t)layer->c_out;
    float *to = packed + ws->cl_offset;
    for (size_t cb = 0; cb < (cout + mr - 1) / mr; cb++)
      for (size_t c = 0; c < cin; c++)
        for (size_t t = 0; t < 9; t++)
          for (size_t m = 0; m < mr; m++, to++) {
            const size_t co = cb * mr + m;
            *to = co < cout ? cp_load_elem(layer->dtype, weights, (co * cin + c) * 9 + t) : 0.0f;
          }
  }
}

/* The tiles of an item: those of the global grid that cover its conv region
   (rows [y0, y0 + ny), columns [x0, x0 + nx)). */
typedef struct cp_wino_tiles {
  size_t ty0, tx0;       /* first tile row and column on the grid */
  size_t dy, dx;         /* the region's origin within the first tile */
  size_t th, tw, tw_pad; /* tile rows, tiles per row, tiles per row rounded up (col_pad) */
  size_t tiles;          /* th * tw_pad: kernel lanes used */
  size_t nblk, t_alloc;  /* blocks of NR lanes, and their lanes */
  size_t slot, slots;    /* images side by side: slots of slot tile columns (0: one image) */
} cp_wino_tiles;

/* The plan's own state, for the item size. */
typedef struct cp_wino_plan {
  cp_panel_layout panel;        /* the input of an item's tiles (then V, the sums, the flags) */
  cp_wino_tiles max;            /* the most tile rows and tiles per row of any item */
  size_t v_floats;              /* V of the largest item */
  size_t slices;                /* of the input channels (cp_wino_slices) */
  size_t sum_floats;            /* the range rule's sums of one slice, for the largest item */
  size_t pass;                  /* channel blocks multiplied per pass over V */
  const cp_sr_ukernel *uk;      /* the products' kernel: NR tiles of V per register tile */
  const cp_sr_ukernel *uk_tail; /* and that of the last channel block (NULL on the
                                   channels-in-lanes products) */
  const cp_cl_ukernel *cl;      /* on cl: the products' member of the setup's family */
  size_t nr;                    /* tiles per block of V */
  const cp_wino_transforms *tf;
} cp_wino_plan;
CP_ALGO_STATE_FITS(cp_wino_plan);

static const cp_wino_plan *cp_wino_plan_of(const cp_plan *pl) {
  return CP_ALGO_STATE(const cp_wino_plan, pl->state);
}

/* Tiles per block of V (per register tile of the shift-reduce products). */
static size_t cp_wino_nr(const cp_plan *pl) {
  return cp_wino_plan_of(pl)->nr;
}

/* M's lanes per row for `lanes` lanes of V: the channels-in-lanes products
   write whole groups of their kernel's NP tiles. */
static size_t cp_wino_t_alloc(const cp_plan *pl, size_t lanes) {
  if (!cp_wino_on_cl(pl)) return lanes;
  return cp_round_up(lanes, (size_t)cp_wino_plan_of(pl)->cl->np);
}

/* Positions per register tile of the direct kernel (tiles flagged non-finite). */
static size_t cp_wino_direct_nr(const cp_plan *pl) {
  if (cp_wino_on_cl(pl)) return (size_t)cp_wino_setup_of(pl)->cl->np;
  return (size_t)cp_wino_setup_of(pl)->sr.uk->nr;
}

/*
 * The products' kernels for items of `tiles` tiles: the setup's, or those of
 * the same MR with fewer positions when they waste fewer lanes (16 tiles on
 * 32 lanes leave half of every register tile empty). From 128 input
 * channels on, a narrower kernel's lane costs CP_WINO_NARROW_COST of the
 * wider one's (a measured rule: the 12x16 AVX-512 kernel runs at 76-81% of
 * peak alone, the 12x32 at 91-94%; Zen 5, 2 threads, one image: 256 -> 256
 * at 56x56, 112 tiles per item, 4.48 -> 3.95 ms on 128 lanes of 12x32
 * instead of 112 of 12x16; 128 -> 128 at 112x112 pool 2 5.91 -> 5.52 ms;
 * the seed's 256 -> 256 at 224x224 pool 2 58.6 -> 56.2 ms; but 64 -> 64 at
 * 224x224, 392 tiles, 4.75 -> 5.0 ms on 416 lanes of 12x32: there the
 * narrow kernel stays).
 */
#define CP_WINO_WIDE_C_IN 128
#define CP_WINO_NARROW_COST 1.18
static void cp_wino_choose_products(cp_plan *pl, size_t tiles) {
  cp_wino_plan *wp = CP_ALGO_STATE(cp_wino_plan, pl->state);
  const cp_sr_setup *s = &cp_wino_setup_of(pl)->sr;
  const int lanes = cp_wino_transforms_select(cp_wino_kind_of(pl), pl->setup->isa)
                        ->lanes; /* V's blocks hold whole groups */
  const double narrow_cost = pl->c_in >= CP_WINO_WIDE_C_IN ? CP_WINO_NARROW_COST : 1.0;
  if (cp_wino_on_cl(pl)) { /* V's blocks: a vector group, 8 tiles at least */
    wp->uk = wp->uk_tail = NULL;
    wp->nr = lanes > 8 ? (size_t)lanes : 8;
    /* the family's member for the item's tiles, both tile sizes: F(4x4,
       3x3), 8 images of 256 -> 256 at 14x14, 16 tiles an item: 32 x 8 0.90
       of 32 x 6's time; F(2x2, 3x3) (Zen 5, 2 threads, best CLI medians of 5
       alternating rounds, against 32 x 6): 256 -> 256 at 14x14, 28 tiles an
       item, 32 x 14 373-384 against 417-426 us, 128 -> 128 at 28x28 340 /
       360, 512 -> 512 at 14x14 1.45 / 1.53 ms, 512 -> 512 at 7x7, 16 tiles,
       32 x 8 463-480 / 526-533 us; 8 images level (512 -> 512 at 7x7 side by
       side 3.43 / 3.35 ms, at 14x14 10.7 / 10.8) */
    wp->cl = cp_cl_ukernel_for_positions(cp_wino_setup_of(pl)->cl, tiles);
    pl->kernel = wp->cl->name, pl->positions = wp->cl->np;
    return;
  }
  wp->uk = s->uk, wp->uk_tail = s->uk_tail;
  for (int nr = s->uk->nr / 2; nr >= lanes && nr % lanes == 0; nr /= 2) {
    const cp_sr_ukernel *uk = cp_sr_ukernel_with_nr(s->uk, nr);
    const cp_sr_ukernel *tail = cp_sr_ukernel_with_nr(s->uk_tail, nr);
    const size_t n = (size_t)nr, wide = (size_t)wp->uk->nr;
    if (uk == NULL || tail == NULL ||
        (double)((tiles + n - 1) / n * n) * narrow_cost >=
            (double)((tiles + wide - 1) / wide * wide))
      break;
    wp->uk = uk, wp->uk_tail = tail;
  }
  wp->nr = (size_t)wp->uk->nr;
}

/*
 * V's budget per item, in bytes: the configured one (config.c), or a
 * quarter of U where that is more. Every item streams its channel groups'
 * share of U once, so an image split into two row groups (or a batch into
 * two items) reads U twice; where U is tens of MiB that costs more than a V
 * beyond the budget, whose 36th read per point still fits in L2. 512 -> 512
 * channels at 28x28 (U 36 MiB), Zen 5, 2 threads, one image: 7 tile rows of
 * V 4.6 MiB in one item instead of 6 + 1 in two, 6.06 -> 5.27 ms (median).
 */
static double cp_wino_v_budget(const cp_wino_kind *kd, const cp_blocking *cfg, int64_t c_in,
                               int64_t c_out) {
  const double configured = (double)cfg->wino_v_kib * 1024;
  const double u = kd->points_n * (double)c_in * (double)c_out * sizeof(float);
  return u / 4 > configured ? u / 4 : configured;
}

/*
 * Images side by side (plan.h: images): where a small image's tiles leave
 * most lanes of a register tile empty (a row of 4-tile vector loads pads a
 * 7x7 conv output's 2 x 2 tiles to 2 x 4), the items are whole images whose
 * panels lie side by side in each row, a slot of tw + 1 tile columns each
 * (the conv output's tw, then one whose outputs are dropped: its 6x6 input
 * reaches into the next slot, where a tile would need the image's own
 * zero columns). The tiles of several images then fill the lanes (8 images
 * at 7x7: 2 x 24 tiles, 32 of them outputs), and the products stream U once
 * for all of them. Each image's tiles are on the same grid as alone, with
 * the same sums and flags: the same bytes as items of one image.
 */
static size_t cp_wino_slot(const cp_plan *pl) {
  const size_t m = (size_t)cp_wino_kind_of(pl)->m;
  return ((size_t)pl->conv_cols + m - 1) / m + 1;
}

/*
 * Images per item for a batch of conv outputs oh x ow (1: one): all of the
 * batch where an image's tiles fill at most 16 lanes and side by side
 * wastes fewer lanes than alone, or where U is larger than L3 (every item
 * of one image would stream it from memory for its 16 tiles), halved until
 * V fits its budget. The second, a measured rule: 8 images of 512 -> 512 at
 * 14x14 pool 2 (U 36 MiB), Zen 5 (L3 32 MiB), 2 threads, CLI medians,
 * images of one item 1 / 2 / 4 / 8 with every region shared at once: 10.9 /
 * 8.2-9.2 / 8.4-8.6 / 8.1-8.6 ms; in three alternating rounds, one image an
 * item against 4 (V 5.6 MiB; the two regions of 9 MiB in two rounds, plan.h)
 * 8.3-8.7 against 7.2-7.3 ms. 256 -> 256 (U 9 MiB, in L3 from one image to
 * the next) 1.81-2.15 / 2.03-2.12 / 2.05-2.08 / 1.98-2.47, and 8 images of
 * 512 -> 512 at 28x28 (49 tiles an image) 24.6-25.0 / 24.7 for two: those
 * stay alone. The AVX2 kernels (on Zen 5), 8 images of 512 -> 512 at 14x14
 * pool 2: 14.8-14.9 -> 12.3-12.4 ms. Whatever L3 cpuid reports, U above
 * CP_WINO_IMAGES_U_BYTES counts as larger: an Intel Xeon VM's reports the
 * host's 480 MiB, while one core reads ~29 GB/s from it (4-64 MiB, one
 * thread); there 8 images of 512 -> 512 at 14x14 pool 2 took 12.1-12.4 ms
 * alone and 10.3-10.7 side by side (CLI medians, two alternating turns,
 * the L3 set to 32 MiB with CONVPOOL_L3_KIB).
 */
#define CP_WINO_IMAGES_U_BYTES ((double)(32u << 20))
static int64_t cp_wino_images(const cp_wino_kind *kd, const cp_blocking *cfg, int64_t c_in,
                              int64_t c_out, int64_t batch, int64_t oh, int64_t ow) {
  const int64_t m = kd->m, pad = kd->col_pad;
  const int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  const int64_t alone = (tw + pad - 1) / pad * pad;
  if (batch < 2) return 1;
  /* F(4x4, 3x3): by the rule above; F(2x2, 3x3), whose products take any
     tile count: wherever V fits, for U streamed once */
  const double u = kd->points_n * (double)c_in * (double)c_out * sizeof(float);
  const double l3 = (double)cp_cpu_get()->l3;
  const double u_max = l3 < CP_WINO_IMAGES_U_BYTES ? l3 : CP_WINO_IMAGES_U_BYTES;
  if (kd->col_pad > 1 && (th * alone > 16 || (alone <= tw + 1 && u <= u_max))) return 1;
  int64_t images = batch;
  for (; images > 1; images = (images + 1) / 2) {
    const double lanes =
        (double)((th * ((images * (tw + 1) + pad - 1) / pad * pad) + 15) / 16 * 16);
    if (kd->points_n * (double)c_in * lanes * sizeof(float) <=
        cp_wino_v_budget(kd, cfg, c_in, c_out))
      break;
  }
  return images;
}

static int64_t cp_wino_images_per_item(const cp_plan *pl) {
  return cp_wino_images(cp_wino_kind_of(pl), pl->cfg, pl->c_in, pl->c_out, pl->batch, pl->oh,
                        pl->ow);
}

static cp_wino_tiles cp_wino_tiles_of_item(const cp_plan *pl, const cp_item *it) {
  cp_wino_tiles t;
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const size_t nr = cp_wino_nr(pl), m = (size_t)kd->m;
  t.ty0 = (size_t)it->y0 / m, t.tx0 = (size_t)it->x0 / m;
  t.dy = (size_t)it->y0 % m, t.dx = (size_t)it->x0 % m;
  t.th = ((size_t)(it->y0 + it->ny) + m - 1) / m - t.ty0;
  t.tw = ((size_t)(it->x0 + it->nx) + m - 1) / m - t.tx0;
  t.slot = 0, t.slots = 0;
  if (pl->images > 1) /* whole images side by side, a slot each */
    t.slot = cp_wino_slot(pl), t.slots = (size_t)it->nb, t.tw = t.slots * t.slot;
  t.tw_pad = cp_round_up(t.tw, (size_t)kd->col_pad);
  t.tiles = t.th * t.tw_pad;
  t.nblk = (t.tiles + nr - 1) / nr;
  t.t_alloc = cp_wino_t_alloc(pl, t.nblk * nr);
  return t;
}

/* Tile rows of the items starting at pooled row q (and tiles per row, padded
   to col_pad, of those starting at pooled column q). */
static size_t cp_wino_th(const cp_plan *pl, int64_t q) {
  int64_t y0, ny;
  const size_t m = (size_t)cp_wino_kind_of(pl)->m;
  const int64_t n = pl->ph - q < pl->group ? pl->ph - q : pl->group;
  cp_conv_span(q, n, pl->pool, pl->stride, pl->pool_pad[CP_TOP], pl->oh, &y0, &ny);
  return ((size_t)(y0 + ny) + m - 1) / m - (size_t)y0 / m;
}

static size_t cp_wino_tw_pad(const cp_plan *pl, int64_t q) {
  int64_t x0, nx;
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const size_t m = (size_t)kd->m;
  const int64_t n = pl->pw - q < pl->col_block ? pl->pw - q : pl->col_block;
  cp_conv_span(q, n, pl->pool, pl->stride, pl->pool_pad[CP_LEFT], pl->ow, &x0, &nx);
  return cp_round_up(((size_t)(x0 + nx) + m - 1) / m - (size_t)x0 / m, (size_t)kd->col_pad);
}

/* The most tile rows and tiles per row of any item of the plan's size. */
/*
 * The items along a side, for the plan's loops over them: every item start
 * when there are at most CP_WINO_SIDE_ITEMS, else the first and the last
 * CP_WINO_SIDE_ITEMS / 2 and one interior item standing for the rest
 * (weight: how many). Interior items all have the same span (items start on
 * whole tiles), so sums and maxima over the samples are exact unless the pool
 * padding clips more than half the samples' worth of items, where the
 * tile-count maximum takes the unclipped span (an upper bound) instead.
 */
#define CP_WINO_SIDE_ITEMS 64
typedef struct cp_wino_side {
  int64_t q[CP_WINO_SIDE_ITEMS + 1], weight[CP_WINO_SIDE_ITEMS + 1];
  int n;
  int64_t interior; /* index into q of the item standing for the rest, or -1 */
} cp_wino_side;

static cp_wino_side cp_wino_side_items(int64_t outputs, int64_t per_item) {
  cp_wino_side s;
  const int64_t count = (outputs + per_item - 1) / per_item, half = CP_WINO_SIDE_ITEMS / 2;
  s.n = 0, s.interior = -1;
  for (int64_t i = 0; i < count; i++) {
    if (count > CP_WINO_SIDE_ITEMS && i == half) { /* the interior ones */
      s.interior = s.n;
      s.q[s.n] = i * per_item, s.weight[s.n++] = count - 2 * half;
      i = count - half - 1;
      continue;
    }
    s.q[s.n] = i * per_item, s.weight[s.n++] = 1;
  }
  return s;
}

/* Tiles of the unclipped conv span of the items starting at pooled output q
   (all items have at most this many). */
static size_t cp_wino_tiles_unclipped(const cp_plan *pl, int64_t q, int64_t n, int64_t pad) {
  const int64_t m = cp_wino_kind_of(pl)->m;
  const int64_t a = q * pl->stride - pad, b = (q + n - 1) * pl->stride - pad + pl->pool;
  const int64_t lo = a >= 0 ? a / m : -((-a + m - 1) / m);
  const int64_t hi = b >= 0 ? (b + m - 1) / m : -(-b / m);
  return (size_t)(hi - lo);
}

/* The most tile rows and tiles per row of any item of the plan's size. */
static cp_wino_tiles cp_wino_tiles_max(cp_plan *pl) {
  cp_wino_tiles t;
  memset(&t, 0, sizeof t);
  const cp_wino_side rows = cp_wino_side_items(pl->ph, pl->group);
  const cp_wino_side cols = cp_wino_side_items(pl->pw, pl->col_block);
  for (int i = 0; i < rows.n; i++) {
    size_t th = cp_wino_th(pl, rows.q[i]);
    if (i == rows.interior)
      th = cp_wino_tiles_unclipped(pl, rows.q[i], pl->group, pl->pool_pad[CP_TOP]);
    if (th > t.th) t.th = th;
  }
  for (int i = 0; i < cols.n; i++) {
    size_t tw = cp_wino_tw_pad(pl, cols.q[i]);
    if (i == cols.interior)
      tw = cp_round_up(cp_wino_tiles_unclipped(pl, cols.q[i], pl->col_block, pl->pool_pad[CP_LEFT]),
                       (size_t)cp_wino_kind_of(pl)->col_pad);
    if (tw > t.tw_pad) t.tw_pad = tw;
  }
  if (pl->images > 1) /* the slots of a whole item */
    t.slot = cp_wino_slot(pl), t.slots = (size_t)pl->images,
    t.tw_pad = cp_round_up(t.slots * t.slot, (size_t)cp_wino_kind_of(pl)->col_pad);
  t.tw = t.tw_pad;
  t.tiles = t.th * t.tw_pad;
  /* the channels-in-lanes products take only the tiles with outputs (not a
     slot's last column), shift-reduce's every lane */
  cp_wino_choose_products(
      pl, cp_wino_on_cl(pl) ? cp_wino_tile_map_of(t.th, t.tw_pad, t.slot, t.slots).count : t.tiles);
  const size_t nr = cp_wino_nr(pl);
  t.nblk = (t.tiles + nr - 1) / nr;
  t.t_alloc = cp_wino_t_alloc(pl, t.nblk * nr);
  return t;
}

/* Channel blocks multiplied per pass over V: as many as M's budget holds. */
static size_t cp_wino_pass(const cp_plan *pl, size_t t_alloc) {
  const size_t mr = (size_t)pl->co_block;
  const size_t per = (size_t)cp_wino_kind_of(pl)->points_n * mr * t_alloc * sizeof(float);
  size_t pass = ((size_t)pl->cfg->wino_m_kib << 10) / per;
  if (pass > (size_t)pl->co_blocks) pass = (size_t)pl->co_blocks;
  return pass > 0 ? pass : 1;
}

/* Floats of V for an item's tiles. */
static int cp_wino_v_floats(const cp_plan *pl, const cp_wino_tiles *t, size_t *n) {
  const size_t vs = cp_wino_v_stride((size_t)pl->c_in, cp_wino_nr(pl));
  return cp_mul(t->nblk, (size_t)cp_wino_kind_of(pl)->points_n, n) && cp_mul(*n, vs, n);
}

/* Input channels per gather of the direct path's taps (cp_wino_direct_sr):
   9 x this many x NR floats, 18 KiB at NR = 32. */
#define CP_WINO_GATHER_CHANNELS 16

/*
 * Scratch of an item of the plan's size: panel = [input panel of the
 * tiles][V][tile flags]; buf = [conv output of MR channels][M of one
 * pass][one shift-reduce register tile][the direct path's gathered taps].
 */
static int cp_wino_geometry(cp_plan *pl) {
  cp_wino_plan *wp = CP_ALGO_STATE(cp_wino_plan, pl->state);
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const cp_wino_tiles t = cp_wino_tiles_max(pl);
  const size_t nr = cp_wino_direct_nr(pl), mr = (size_t)pl->co_block, m = (size_t)kd->m;
  const size_t points = (size_t)kd->points_n, line = CP_CACHE_LINE / 4;
  const size_t ld = m * t.tw_pad + (size_t)kd->reach, rows = m * t.th + 2;
  size_t cs, raw, flags, n, conv, mf;
  if (!cp_mul(rows, ld, &cs)) return 0;
  cs = cp_round_up(cs, line);
  if ((cs / line) % 2 == 0) cs += line; /* spread the channels over the L1 sets */
  /* slack: the shift-reduce kernel of a run of flagged tiles reads NR + 2 past it */
  if (!cp_mul((size_t)pl->c_in, cs, &raw) || !cp_add(raw, 2 * nr + 4, &raw)) return 0;
  raw = cp_round_up(raw, line);
  if (!cp_wino_v_floats(pl, &t, &wp->v_floats)) return 0;
  flags = cp_round_up(t.tiles * sizeof(cp_wino_mask), CP_CACHE_LINE) / sizeof(float);
  wp->slices = cp_wino_slices((size_t)pl->c_in);
  size_t sums;
  if (!cp_mul(t.tiles, (size_t)kd->sums, &wp->sum_floats) ||
      !cp_mul(wp->slices, wp->sum_floats = cp_round_up(wp->sum_floats, line), &sums) ||
      !cp_add(raw, wp->v_floats, &n) || !cp_add(n, sums, &n) || !cp_add(n, flags, &n) ||
      !cp_mul(n, sizeof(float), &pl->panel_bytes))
    return 0;
  wp->panel.ld = ld, wp->panel.cs = cs;
  wp->panel.floats = raw; /* what the packer fills (and zeroes) */
  wp->max = t;
  wp->pass = cp_wino_pass(pl, t.t_alloc);
  wp->tf = cp_wino_transforms_select(kd, pl->setup->isa);
  pl->buf_row_ld = m * t.tw_pad;
  pl->buf_image_cols = m * t.slot;
  pl->buf_cols = m * t.th * pl->buf_row_ld;
  if (!cp_mul(mr, pl->buf_cols, &conv) || !cp_mul(wp->pass * points * mr, t.t_alloc, &mf) ||
      !cp_add(cp_round_up(conv, line), mf, &n) || !cp_add(n, mr * nr, &n) ||
      !cp_add(n, 9 * CP_WINO_GATHER_CHANNELS * nr, &n) || !cp_mul(n, sizeof(float), &pl->buf_bytes))
    return 0;
  return 1;
}

/* Items advance by whole tiles of the global grid, and by whole loads of
   four tiles along the row (config.c). */
static void cp_wino_item_units(const cp_plan *pl, int64_t *rows, int64_t *cols) {
  *rows = cp_wino_kind_of(pl)->m;
  *cols = pl->cfg->wino_col_unit;
}

/* V within its budget (cp_wino_v_budget); an item of one row unit of tiles
   always fits. */
static int cp_wino_fits(const cp_plan *pl) {
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const int64_t m = kd->m;
  const int64_t stride_gcd = pl->stride % m == 0 ? m : pl->stride % 2 == 0 ? 2 : 1;
  const int64_t row_unit = m / stride_gcd; /* lcm(m, stride) / stride pooled rows */
  return pl->group <= row_unit || (double)cp_wino_plan_of(pl)->v_floats * sizeof(float) <=
                                      cp_wino_v_budget(kd, pl->cfg, pl->c_in, pl->c_out);
}

/* Modelled cost per pooled output, in kernel lanes, over all items of a
   batch image: the multiply's lanes (padding lanes included), the weights
   streamed once per item, the panel copy. */
static double cp_wino_cost(const cp_plan *pl) {
  const cp_sr_setup *s = &cp_wino_setup_of(pl)->sr;
  const size_t nr = cp_wino_nr(pl);
  const double co = cp_wino_on_cl(pl) ? (double)pl->co_blocks * pl->co_block
                                      : (double)((pl->co_blocks - 1) * s->uk->mr + s->uk_tail->mr);
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const double m = kd->m, per_point = kd->points_n * (double)pl->c_in * co;
  double lanes = 0, copy = 0, items = 0;
  const cp_wino_side rows = cp_wino_side_items(pl->ph, pl->group);
  const cp_wino_side cols = cp_wino_side_items(pl->pw, pl->col_block);
  for (int i = 0; i < rows.n; i++) {
    const size_t th = cp_wino_th(pl, rows.q[i]);
    for (int j = 0; j < cols.n; j++) {
      const size_t tw = cp_wino_tw_pad(pl, cols.q[j]);
      const double weight = (double)rows.weight[i] * (double)cols.weight[j];
      lanes += weight * (double)((th * tw + nr - 1) / nr * nr);
      copy += weight * (m * (double)th + 2) * (m * (double)tw + 2);
      items += weight;
    }
  }
  return (lanes * per_point + items * pl->cfg->wino_u_cost * per_point +
          copy * pl->cfg->copy_cost * (double)pl->c_in) /
         ((double)pl->ph * (double)pl->pw);
}

/* Smaller items for the threads while they keep four blocks of NR lanes,
   whose products pay for a pass over U from L3 or memory; where U fits in
   half of L2, a thread's items read it there and any item is worth it
   (rows of one tile, a single channel group and no phase before the items).
   So are items whose U, V and M fit in L2 together where they alone give
   the threads their items (channel groups would transform the input
   again). 64 -> 64 at 56x56, U 576 KiB, 2 threads, alternating: 2 row
   groups x 3 channel groups (a shared phase, V and M past L2) against 14
   items of one tile row (V 146 KiB, M 162 KiB): Intel Xeon (2 MiB of L2)
   0.56-0.59 -> 0.37-0.39 ms, AMD Zen 5 (1 MiB) 0.58-0.60 -> 0.35-0.36 ms
   (two images 1.10 -> 0.69-0.74), where items of two tile rows took
   0.51-0.52 ms; 128 -> 32 at 28x28 in 7 such items and 2 channel groups
   0.12 -> 0.19 ms. */
static int cp_wino_worth_splitting_to(const cp_plan *pl) {
  const cp_wino_setup *ws = cp_wino_setup_of(pl);
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const double u = (double)ws->u_floats[cp_wino_index(pl)] * sizeof(float);
  if (u <= (double)pl->l2_bytes / 2) return 1;
  const double m = (double)wp->pass * cp_wino_kind_of(pl)->points_n * (double)pl->co_block *
                   (double)wp->max.t_alloc * sizeof(float);
  const int64_t items = cp_batch_groups(pl) * ((pl->ph + pl->group - 1) / pl->group) *
                        ((pl->pw + pl->col_block - 1) / pl->col_block);
  if (u + (double)wp->v_floats * sizeof(float) + m <= (double)pl->l2_bytes &&
      items >= (int64_t)pl->cfg->items_per_thread * (int64_t)pl->threads)
    return 1;
  return wp->max.tiles >= 4 * cp_wino_direct_nr(pl);
}

/* The U that the run's products read (the setup's packed weights also hold
   the other kind's and the direct path's). */
static size_t cp_wino_streamed_weight_bytes(const cp_plan *pl) {
  return cp_wino_setup_of(pl)->u_floats[cp_wino_index(pl)] * sizeof(float);
}

/* V, the range rule's sums of each slice and the tile flags behind the input panel. */
/* V of one image's tiles, which every channel group of its items reads. */
static double cp_wino_group_input_bytes(const cp_plan *pl) {
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const int64_t m = kd->m;
  const double th = (double)((pl->oh + m - 1) / m);
  const double tw = (double)cp_round_up((size_t)((pl->ow + m - 1) / m), (size_t)kd->col_pad);
  return kd->points_n * (double)pl->c_in * th * tw * sizeof(float);
}

static float *cp_wino_v(const cp_plan *pl, const float *panel) {
  return (float *)panel + cp_wino_plan_of(pl)->panel.floats;
}

static float *cp_wino_sums(const cp_plan *pl, const float *panel) {
  return cp_wino_v(pl, panel) + cp_wino_plan_of(pl)->v_floats;
}

static cp_wino_mask *cp_wino_flags(const cp_plan *pl, const float *panel) {
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  return (cp_wino_mask *)(void *)(cp_wino_sums(pl, panel) + wp->slices * wp->sum_floats);
}

/*
 * With conv padding above 1, an output whose 3x3 window is mostly zeros has
 * a tiny sum |x*w| while its tile's error scales with the whole 6x6 input:
 * tiles whose input reaches into such padding go to shift-reduce too.
 * Returns 1 if any tile of the item was flagged.
 */
static unsigned cp_wino_flag_border(const cp_plan *pl, const cp_wino_tiles *t,
                                    cp_wino_mask *flags) {
  const int64_t *pad = pl->pad;
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const size_t m = (size_t)kd->m;
  if (pad[CP_TOP] <= 1 && pad[CP_LEFT] <= 1 && pad[CP_BOTTOM] <= 1 && pad[CP_RIGHT] <= 1) return 0;
  unsigned any = 0;
  for (size_t tr = 0; tr < t->th; tr++) {
    const int64_t y = (int64_t)(m * (t->ty0 + tr)) - pad[CP_TOP]; /* first input row */
    const int rows_out =
        (pad[CP_TOP] > 1 && y < 0) || (pad[CP_BOTTOM] > 1 && y + kd->alpha > pl->height);
    for (size_t tc = 0; tc < t->tw; tc++) {
      const size_t lc = t->slot > 0 ? tc % t->slot : tc; /* in its image */
      if (t->slot > 0 && lc + 1 == t->slot) continue;    /* a slot's last: no outputs */
      const int64_t x = (int64_t)(m * (t->tx0 + lc)) - pad[CP_LEFT];
      const int out = rows_out || (pad[CP_LEFT] > 1 && x < 0) ||
                      (pad[CP_RIGHT] > 1 && x + kd->alpha > pl->width);
      if (out) flags[tr * t->tw_pad + tc] = CP_WINO_ALL, any = 1;
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
  const int64_t m = cp_wino_kind_of(pl)->m;
  sc.rows = pl->oh - m * (int64_t)t->ty0;
  sc.cols = pl->ow - m * (int64_t)t->tx0;
  sc.slot = (int64_t)t->slot, sc.slots = (int64_t)t->slots;
  return sc;
}

/* Pack and transform input channels [c0, c1) of slice `slice` of item `it`
   into panel (the slack past the channels with the last slice). */
static void cp_wino_pack_slice(const cp_run *r, const cp_item *it, float *panel, size_t slice) {
  const cp_plan *pl = r->pl;
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const cp_wino_tiles t = cp_wino_tiles_of_item(pl, it);
  const cp_panel_src src = cp_panel_src_of(r, it->b);
  const size_t c_in = (size_t)pl->c_in, c0 = slice * CP_WINO_SLICE;
  const size_t c1 = c0 + CP_WINO_SLICE < c_in ? c0 + CP_WINO_SLICE : c_in;
  /* the input of every tile: inside the input or zero, whatever the item */
  const size_t m = (size_t)cp_wino_kind_of(pl)->m;
  const int64_t iy0 = (int64_t)(m * t.ty0) - pl->pad[CP_TOP];
  const int64_t ix0 = (int64_t)(m * t.tx0) - pl->pad[CP_LEFT];
  const size_t rows = m * t.th + 2;
  if (t.slot == 0) {
    cp_pack_panel_steps(&src, iy0, rows, ix0, m * t.tw + 2, c0, c1, &wp->panel, panel);
  } else { /* each image in its slot, zeros past the last slot and below the rows */
    const size_t width = m * t.slot, used = t.slots * width;
    const size_t ld = wp->panel.ld, cs = wp->panel.cs;
    for (size_t j = 0; j < t.slots; j++) {
      const cp_panel_src image = cp_panel_src_of(r, it->b + (int64_t)j);
      cp_pack_panel_slot(&image, iy0, rows, ix0, width, c0, c1, &wp->panel, panel + j * width);
    }
    for (size_t c = c0; c < c1; c++) {
      float *plane = panel + c * cs;
      for (size_t y = 0; y < rows; y++)
        memset(plane + y * ld + used, 0, (ld - used) * sizeof(float));
      memset(plane + rows * ld, 0, (cs - rows * ld) * sizeof(float));
    }
  }
  if (c1 == c_in) cp_pack_panel_slack(&src, &wp->panel, panel);
  const size_t nr = cp_wino_nr(pl);
  wp->tf->input(panel + c0 * wp->panel.cs, wp->panel.cs, wp->panel.ld, c1 - c0, t.tiles, t.tw_pad,
                nr, cp_wino_v(pl, panel) + c0 * nr, cp_wino_v_stride(c_in, nr),
                cp_wino_sums(pl, panel) + slice * wp->sum_floats);
}

/* The range rule over the tiles of item `it` from the slices' sums in
   panel, into flags; returns 1 if a tile goes to the direct path. */
static unsigned cp_wino_screen_item(const cp_run *r, const cp_item *it, const float *panel,
                                    cp_wino_mask *flags) {
  const cp_plan *pl = r->pl;
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const cp_wino_tiles t = cp_wino_tiles_of_item(pl, it);
  const cp_wino_screen screen = cp_wino_screen_of(r, &t);
  const size_t flagged =
      cp_wino_kind_of(pl)->screen_tiles(cp_wino_sums(pl, panel), wp->slices, wp->sum_floats,
                                        (size_t)pl->c_in, t.tiles, t.tw_pad, &screen, flags);
  return (flagged != 0) | cp_wino_flag_border(pl, &t, flags);
}

/*
 * The two-phase schedule (cp_plan_share_regions): when channel groups split
 * an image region, the region's input is packed and transformed once, before
 * the items, one slice of input channels per work item, and every channel
 * group's item reads it there. Each item applies the range rule to the
 * region's sums itself, into its own scratch.
 */
static float *cp_wino_region(const cp_run *r, int64_t region) {
  return (float *)(void *)(r->shared + cp_region_offset(r->pl, region));
}

static int cp_wino_schedule(cp_plan *pl) {
  if (!cp_plan_share_regions(pl)) return 0;
  pl->prepare_items *= (int64_t)cp_wino_plan_of(pl)->slices;
  return 1;
}

/* Slice `index % slices` of region `index / slices` (the items of channel
   group 0 come in region order). */
static void cp_wino_prepare(const cp_run *r, int64_t index) {
  const int64_t slices = (int64_t)cp_wino_plan_of(r->pl)->slices, region = index / slices;
  const cp_item it = cp_item_of(r->pl, region * r->pl->co_groups);
  cp_wino_pack_slice(r, &it, cp_wino_region(r, region), (size_t)(index % slices));
}

/* The item's V and input: its region's, or packed into panel; its flags go
   to panel's flags (the scratch is the item's own either way). */
static const float *cp_wino_pack_item(const cp_run *r, cp_item *it, float *panel) {
  const float *input = panel;
  if (r->pl->prepare_items > 0) {
    input = cp_wino_region(r, cp_item_region(r->pl, it));
  } else {
    for (size_t i = 0; i < cp_wino_plan_of(r->pl)->slices; i++) cp_wino_pack_slice(r, it, panel, i);
  }
  cp_wino_mask *flags = cp_wino_flags(r->pl, panel);
  it->flags = cp_wino_screen_item(r, it, input, flags);
  it->aux = flags;
  return input;
}

/* F(4x4, 3x3)'s direct path (cp_wino_direct_sr): the outputs gathered
   so far, in runs along conv rows (run u: lanes [lane[u], lane[u + 1]),
   read from panel offset at[u] on), and what every run needs. */
typedef struct cp_wino_gathered {
  const cp_run *r;
  const cp_wino_tiles *t;
  const float *panel, *w; /* w: the block's weights, [c][3][3][MR] */
  const cp_sr_ukernel *uk;
  size_t channels;
  float *buf, *tile, *gather;
  size_t lane[CP_MAX_NR + 1], at[CP_MAX_NR], runs, n;
} cp_wino_gathered;

/* The shift-reduce kernel over the gathered outputs, into the tile buffer. */
static void cp_wino_gather_flush(cp_wino_gathered *g) {
  const cp_plan *pl = g->r->pl;
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const size_t ld = wp->panel.ld, cs = wp->panel.cs, c_in = (size_t)pl->c_in;
  const size_t mr = (size_t)g->uk->mr, n = g->n, runs = g->runs;
  if (n == 0) return;
  g->lane[runs] = n;
  /* the kernel of the fewest lanes that hold them (the same MR and sums) */
  const cp_sr_ukernel *uk = g->uk;
  for (const cp_sr_ukernel *half;
       n <= (size_t)uk->nr / 2 && (half = cp_sr_ukernel_with_nr(uk, uk->nr / 2)) != NULL;)
    uk = half;
  const size_t kn = (size_t)uk->nr;
  for (size_t row = 0; n < kn && row < 9 * CP_WINO_GATHER_CHANNELS; row++) /* lanes past n */
    memset(g->gather + row * kn + n, 0, (kn - n) * sizeof(float));
  for (size_t c0 = 0; c0 < c_in; c0 += CP_WINO_GATHER_CHANNELS) {
    const size_t cn = c_in - c0 < CP_WINO_GATHER_CHANNELS ? c_in - c0 : CP_WINO_GATHER_CHANNELS;
    for (size_t c = 0; c < cn; c++)
      for (size_t u = 0; u < runs; u++) {
        const float *src = g->panel + (c0 + c) * cs + g->at[u];
        float *dst = g->gather + c * 9 * kn + g->lane[u];
        const size_t len = g->lane[u + 1] - g->lane[u];
        for (size_t i = 0; i < 3; i++)
          for (size_t j = 0; j < 3; j++) {
            const float *from = src + i * ld + j;
            float *to = dst + (3 * i + j) * kn;
            if (len == 4) /* a whole row of a tile: one vector move */
              memcpy(to, from, 4 * sizeof(float));
            else
              for (size_t p = 0; p < len; p++) to[p] = from[p];
          }
      }
    uk->fn(g->gather, kn, 0, 9 * cn, 1, g->w + c0 * 9 * mr, g->tile, kn, c0 > 0, NULL);
  }
  for (size_t u = 0; u < runs; u++) {
    const size_t y = g->at[u] / ld, x = g->at[u] % ld; /* the panel's row and column */
    float *out = g->buf + (y - g->t->dy) * pl->buf_row_ld + x - g->t->dx;
    for (size_t ch = 0; ch < g->channels; ch++)
      for (size_t p = g->lane[u]; p < g->lane[u + 1]; p++)
        out[ch * pl->buf_cols + p - g->lane[u]] = g->tile[ch * kn + p];
  }
  g->n = 0, g->runs = 0;
}

/*
 * F(4x4, 3x3)'s direct path over the flagged tiles (every tile with `all`),
 * into the tile buffer, with the shift-reduce kernel (the blocked weights):
 * a run of flagged tiles along a tile row that fills half of the kernel's
 * lanes or more, a call per conv row with a flagged output and NR columns
 * on the panel; the flagged outputs of the shorter runs (the rule's bits,
 * cp_wino_screen_tile), wherever they lie, gathered into the lanes
 * of calls of their own (the taps of 16 input channels at a time as a 1x1
 * panel of 9 x 16 rows, channel c, tap (i, j) at row 9 c + 3 i + j, the
 * weights' order, each gather continuing the last one's sums: ukernel.h,
 * accumulate). Both sum the same terms in the same order from zero: the
 * same bits. A lone tile used to take a 32-lane call for each of its 4
 * rows; measured on 256 -> 256 at 14x14, 8 images of a resnet50's
 * activations whose range flags some tiles (Zen 5, 2 threads, Python
 * operators, three alternations): 5.5-6.4 -> 3.9-4.3 ms.
 */
/* The flagged outputs of conv row y (of tile row tr) in tile column k: the
   rule's 4 bits of that row (cp_wino_screen_tile), every one with `all`. */
static inline unsigned cp_wino_row_bits(const cp_wino_tiles *t, const cp_wino_mask *flags,
                                        size_t tr, size_t k, size_t y, int all) {
  return all ? 0xfu : (unsigned)flags[tr * t->tw_pad + k] >> (4 * (y - 4 * tr)) & 0xfu;
}

static void cp_wino_direct_sr(const cp_run *r, const cp_wino_tiles *t, const float *panel,
                              const cp_wino_mask *flags, int64_t cb, size_t channels, float *buf,
                              float *tile, float *gather, int all) {
  const cp_plan *pl = r->pl;
  const cp_sr_setup *sr = &cp_wino_setup_of(pl)->sr;
  const cp_sr_ukernel *uk = /* cp_sr_block_kernel's choice */
      (cb + 1) % pl->group_co_blocks == 0 ? sr->uk_tail : sr->uk;
  const size_t nr = cp_wino_direct_nr(pl), ld = cp_wino_plan_of(pl)->panel.ld;
  const size_t cs = cp_wino_plan_of(pl)->panel.cs, c_in = (size_t)pl->c_in;
  cp_wino_gathered g;
  g.r = r, g.t = t, g.panel = panel, g.w = cp_sr_block_weights(r, cb), g.uk = uk;
  g.channels = channels, g.buf = buf, g.tile = tile, g.gather = gather, g.runs = 0, g.n = 0;
  for (size_t tr = 0; tr < t->th; tr++)
    for (size_t tc = 0; tc < t->tw_pad; tc++) {
      if (!all && !flags[tr * t->tw_pad + tc]) continue;
      const size_t x_begin = 4 * tc;
      while (tc < t->tw_pad && (all || flags[tr * t->tw_pad + tc])) tc++;
      const size_t x_end = 4 * tc;                         /* a run of flagged tiles */
      const size_t x0 = x_begin < t->dx ? t->dx : x_begin; /* from the item's first column */
      for (size_t y = 4 * tr; y < 4 * tr + 4; y++) {
        if (y < t->dy) continue; /* before the item's first row */
        unsigned row_any = 0;    /* the run's flagged outputs in row y */
        for (size_t k = x_begin / 4; k < x_end / 4; k++)
          row_any |= cp_wino_row_bits(t, flags, tr, k, y, all);
        if (row_any == 0) continue;
        if (2 * (x_end - x_begin) >= nr) { /* a long run: NR columns per call */
          for (size_t x = x_begin; x < x_end; x += nr) {
            const size_t n = x_end - x < nr ? x_end - x : nr, skip = x < t->dx ? t->dx - x : 0;
            uk->fn(panel + y * ld + x, cs, ld, c_in, 3, g.w, tile, nr, 0, NULL);
            for (size_t ch = 0; ch < channels; ch++)
              for (size_t i = skip; i < n; i++)
                buf[ch * pl->buf_cols + (y - t->dy) * pl->buf_row_ld + x + i - t->dx] =
                    tile[ch * nr + i];
          }
          continue;
        }
        for (size_t x = x0; x < x_end;) { /* gathered: each tile's flagged outputs of row y */
          const size_t end = (x / 4 + 1) * 4;
          const unsigned bits = cp_wino_row_bits(t, flags, tr, x / 4, y, all);
          if (!(bits >> (x % 4) & 1u)) {
            x++;
            continue;
          }
          size_t e = x + 1; /* a run of flagged outputs */
          while (e < end && (bits >> (e % 4) & 1u)) e++;
          const size_t len = e - x;
          if (g.n + len > nr) cp_wino_gather_flush(&g);
          g.lane[g.runs] = g.n, g.at[g.runs] = y * ld + x, g.runs++, g.n += len, x = e;
        }
      }
    }
  cp_wino_gather_flush(&g);
}

/* The channels-in-lanes kernel over the conv outputs (y[p], x[p]) of
   the item, p < n <= NP (positions past n repeat the last, read, not
   stored), into the tile buffer. */
static void cp_wino_cl_outputs(const cp_run *r, const cp_wino_tiles *t, const float *panel,
                               const float *w, const ptrdiff_t *off, const size_t *y,
                               const size_t *x, size_t n, size_t channels, float *buf,
                               float *tile) {
  const cp_plan *pl = r->pl;
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const cp_cl_ukernel *uk = cp_wino_setup_of(pl)->cl;
  const size_t np = (size_t)uk->np, ld = wp->panel.ld;
  ptrdiff_t pos[CP_CL_MAX_NP];
  for (size_t p = 0; p < np; p++)
    pos[p] = (ptrdiff_t)(y[p < n ? p : n - 1] * ld + x[p < n ? p : n - 1]);
  uk->fn(panel, wp->panel.cs, pos, off, 9, (size_t)pl->c_in, w, NULL, 1, tile, np, n);
  for (size_t ch = 0; ch < channels; ch++)
    for (size_t p = 0; p < n; p++)
      buf[ch * pl->buf_cols + (y[p] - t->dy) * pl->buf_row_ld + x[p] - t->dx] = tile[ch * np + p];
}

/*
 * F(2x2, 3x3)'s direct path over the flagged tiles (every tile with `all`),
 * into the tile buffer: their outputs, wherever they lie, NP per call of the
 * channels-in-lanes kernel (its weights [cb][c][9][MR]). An output's sum
 * does not depend on the others in its call, so these are the bits of the
 * call per row of each run of flagged tiles this replaces, which held the 2
 * outputs of a lone tile in 6 positions.
 */
static void cp_wino_direct_cl(const cp_run *r, const cp_wino_tiles *t, const float *panel,
                              const cp_wino_mask *flags, int64_t cb, size_t channels, float *buf,
                              float *tile, int all) {
  const cp_plan *pl = r->pl;
  const cp_wino_setup *ws = cp_wino_setup_of(pl);
  const size_t np = cp_wino_direct_nr(pl), ld = cp_wino_plan_of(pl)->panel.ld;
  const size_t c_in = (size_t)pl->c_in, m = (size_t)cp_wino_kind_of(pl)->m;
  const float *w = r->packed + ws->cl_offset + (size_t)cb * c_in * 9 * (size_t)ws->cl->mr;
  ptrdiff_t off[9];
  size_t y[CP_CL_MAX_NP], x[CP_CL_MAX_NP], n = 0;
  for (size_t i = 0; i < 9; i++) off[i] = (ptrdiff_t)((i / 3) * ld + i % 3);
  for (size_t k = 0; k < t->th * t->tw_pad; k++) {
    const unsigned mask = all ? CP_WINO_ALL : flags[k];
    if (mask == 0) continue;
    for (size_t q = 0; q < m * m; q++) {
      if (!(mask >> q & 1u)) continue; /* an output Winograd computes (the rule's bits) */
      const size_t yq = m * (k / t->tw_pad) + q / m, xq = m * (k % t->tw_pad) + q % m;
      if (yq < t->dy || xq < t->dx) continue; /* before the item's first row or column */
      y[n] = yq, x[n] = xq;
      if (++n == np) cp_wino_cl_outputs(r, t, panel, w, off, y, x, n, channels, buf, tile), n = 0;
    }
  }
  if (n > 0) cp_wino_cl_outputs(r, t, panel, w, off, y, x, n, channels, buf, tile);
}

static const float *cp_wino_compute_block(const cp_run *r, const cp_item *it, const float *panel,
                                          int64_t cb, float *buf) {
  const cp_plan *pl = r->pl;
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const cp_wino_setup *ws = cp_wino_setup_of(pl);
  const cp_wino_tiles t = cp_wino_tiles_of_item(pl, it);
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const int kind = cp_wino_index(pl), on_cl = cp_wino_on_cl(pl);
  const size_t mr = (size_t)pl->co_block, nr = cp_wino_nr(pl), points = (size_t)kd->points_n;
  const size_t per_block = points * mr * t.t_alloc, c_in = (size_t)pl->c_in;
  const size_t vs = cp_wino_v_stride(c_in, nr), u_xi = ws->u_floats[kind] / points;
  const cp_wino_tile_map map = cp_wino_tile_map_of(t.th, t.tw_pad, t.slot, t.slots);
  const float *u = r->packed + ws->u_offset[kind], *v = cp_wino_v(pl, panel);
  float *m = buf + cp_round_up(mr * pl->buf_cols, CP_CACHE_LINE / sizeof(float));
  const size_t j = (size_t)(cb - it->cb0) % wp->pass;
  if (j == 0) { /* a pass: the products of the next `pass` blocks */
    const int64_t cb1 = cb + (int64_t)wp->pass < it->cb1 ? cb + (int64_t)wp->pass : it->cb1;
    if (on_cl)
      cp_wino_multiply_cl(kd, wp->cl, u, u_xi, v, vs, nr, (size_t)wp->tf->lane_u, c_in, &map,
                          t.t_alloc, cb, cb1, m);
    else
      cp_wino_multiply(kd, wp->uk, wp->uk_tail, pl->co_blocks, u, u_xi, v, vs, c_in, t.nblk, cb,
                       cb1, m);
  }
  const size_t left = (size_t)pl->c_out - (size_t)cb * mr, channels = left < mr ? left : mr;
  if (on_cl)
    wp->tf->output_cl(m + j * per_block, t.t_alloc, mr, channels, &map, t.dy, t.dx, buf,
                      pl->buf_cols, pl->buf_row_ld);
  else
    wp->tf->output(m + j * per_block, t.t_alloc, mr, channels, t.tiles, t.tw_pad, t.dy, t.dx, buf,
                   pl->buf_cols, pl->buf_row_ld);
  const int block_direct = cp_wino_block_direct(pl, r->packed, cb);
  float *tile = m + wp->pass * points * mr * wp->max.t_alloc;
  if (it->flags || block_direct) { /* the direct path: flagged tiles, or every one */
    if (on_cl)
      cp_wino_direct_cl(r, &t, panel, it->aux, cb, channels, buf, tile, block_direct);
    else
      cp_wino_direct_sr(r, &t, panel, it->aux, cb, channels, buf, tile,
                        tile + mr * cp_wino_direct_nr(pl), block_direct);
  }
  return buf;
}

static void cp_wino_describe(const cp_plan *pl, char *text, size_t capacity) {
  const cp_wino_plan *wp = cp_wino_plan_of(pl);
  const cp_wino_kind *kd = cp_wino_kind_of(pl);
  const cp_wino_tiles *t = &wp->max;
  char sweep[512], side[96] = "";
  if (t->slot > 0)
    snprintf(side, sizeof side, ", %zu images side by side in slots of %zu tile columns", t->slots,
             t->slot);
  snprintf(sweep, sizeof sweep,
           "fp32; %s, points %s; up to %zu x %zu tiles per item%s (%zu lanes in %zu blocks of "
           "%zu), V %zu KiB; products (%s) of %zu channel blocks per pass; transforms %s; "
           "shift-reduce: tiles of wide range or padding > 1; uneven/huge filters",
           kd->name, kd->points, t->th, t->tw, side, t->tiles, t->nblk, cp_wino_nr(pl),
           wp->v_floats * sizeof(float) >> 10, wp->uk != NULL ? wp->uk->name : wp->cl->name,
           wp->pass, wp->tf->name);
  const int64_t input_rows = (int64_t)((size_t)kd->m * t->th + 2);
  if (wp->uk != NULL) {
    cp_sr_describe_tile(pl, input_rows, sweep, text, capacity);
    return;
  }
  const cp_cl_ukernel *cl = wp->cl;
  snprintf(text, capacity,
           "register tile  %d output channels x %d tiles (%s); %lld channel blocks\n"
           "panel          %lld pooled rows x %lld pooled columns: conv %lld rows (%lld input "
           "rows) x %lld columns x %lld channels, %s\n",
           cl->mr, cl->np, cl->name, (long long)pl->co_blocks, (long long)pl->group,
           (long long)pl->col_block, (long long)pl->conv_rows, (long long)input_rows,
           (long long)pl->conv_cols, (long long)pl->c_in, sweep);
}

/*
 * Auto's rule, measured on 2 cores (README, "Choosing the algorithm"; the
 * thresholds are config.c's): the transforms and the 36 points' weights (4x
 * the direct weights, read once per item) cost more than the products they
 * save when an item has few tiles (one conv output of 8x8 or less; images
 * side by side count together), little work in all (batch x tiles x c_in x
 * c_out), or few input channels, where the input transform is not
 * amortised: shift-reduce computes those runs. 512 -> 512 channels at 7x7,
 * Zen 4: 1 image 1.6 ms with shift-reduce; side by side, 2 images 2.65 ms
 * against 2.96, 4 images 4.0 against 6.7, 8 images 6.5 against 13.5. Those
 * were uniform random inputs. On a network's activations (ReLU'd, a few
 * values 20x the mean) the range rule flags the tiles at an image's
 * corners, and in an image of at most 2x2 tiles (a conv output of 8x8 or
 * less) every tile holds a corner: their shift-reduce recompute made
 * ResNet-18's 512 -> 512 layers at 7x7, batch 8, take 40-90 ms against
 * 13.5-18 with shift-reduce alone (Zen 3, 2 threads). Shift-reduce computes
 * those runs at every batch. So it stays with F(4x4, 3x3)'s products on the
 * channels-in-lanes kernels, which on uniform inputs are the fastest there
 * (8 images of 512 -> 512 at 7x7, Zen 5, benchmark: 2.80 ms against direct's
 * 4.92): in fused ResNet-18 (batch 8, CONVPOOL_VERBOSE) those layers took
 * 5.2-9.5 ms each against 4.6-4.9 with direct, where auto hands them.
 *
 * Since the range rule flags outputs rather than whole tiles
 * (cp_wino_screen_tile: a flagged corner tile had all 16 outputs
 * recomputed, where one or two of them fail the test), AVX-512 keeps those
 * images where at least CP_WINO_CORNER_MIN_TILES tiles go side by side (4
 * images of 7x7). Zen 5, 2 threads, the layer-4 input of a random-init
 * torchvision ResNet-18 (eval mode, 8 images of uniform noise; 14 of their
 * 392 outputs flagged, in 14 of 32 tiles), 512 -> 512 at 7x7, best medians of 3
 * alternating rounds, weights hot / caches evicted before each run: 8
 * images, F(4x4, 3x3) 2.29 / 2.58 ms (5.03 / 5.24 with whole tiles
 * flagged), direct 4.10 / 4.26; 4 images 1.42 against direct's 1.90; 2
 * images 1.02 against 0.95, so fewer tiles go on to direct as before. On
 * the benchmark's uniform inputs (no flags), 8 images of 128 -> 128 and
 * 256 -> 256 at 7x7: 0.16 and 0.50 ms against shift-reduce's 0.34 and 1.32
 * (direct 0.26 and 1.00). With AVX2 alone those runs stay as they were
 * (not measured there).
 */
#define CP_WINO_CORNER_MIN_TILES 16
/* Whether tile size kd has too little work in a run (the rule above). */
static int cp_wino_too_small(const cp_wino_kind *kd, const cp_layer *layer, const cp_blocking *cfg,
                             int64_t batch, int64_t oh, int64_t ow) {
  const int64_t m = kd->m, th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  /* the tiles of an item's images are what one pass over U serves */
  const double tiles = (double)th * (double)tw *
                       (double)cp_wino_images(kd, cfg, layer->c_in, layer->c_out, batch, oh, ow);
  const int corners_only = th <= 2 && tw <= 2;
  return (corners_only && (cfg->isa < CP_ISA_AVX512 || tiles < CP_WINO_CORNER_MIN_TILES)) ||
         tiles < cfg->wino_min_tiles || layer->c_in < cfg->wino_min_c_in ||
         (double)batch * tiles * (double)layer->c_in * (double)layer->c_out < cfg->wino_min_work;
}

/*
 * Where F(2x2, 3x3) would take images of 8x8 or less (their F(4x4, 3x3)
 * tiles all at corners), the direct algorithm computes the run, on weights
 * of its own that the setup packed (cp_wino_packs_for). On a network's
 * activations the range rule flags F(2x2, 3x3)'s corner tiles too (one
 * image of ResNet-18's 512 -> 512 at 7x7: 2 of its 16 tiles, in every
 * run), and the direct path over them reads the block's direct weights on
 * top of U: 26 MB a run where direct reads 9.4. Measured in the model (Intel
 * Xeon with AVX-512, 2 threads, fused ResNet-18, CONVPOOL_VERBOSE times of
 * each 512 -> 512 layer at 7x7): one image 2.0-2.4 ms with F(2x2, 3x3)
 * against 1.2-1.4 with direct; 8 images 8.7-12.2 against 7.6-8.2. On
 * normal random inputs (no flags) the two were level (0.98 ms, one image).
 * With AVX2 alone F(2x2, 3x3) keeps them: its products, 16 tiles x 16
 * points per pair of channels against direct's 49 outputs x 9 taps, count
 * where the FMAs are the bottleneck (a VM presenting an EPYC of family 23, 16
 * FLOP a cycle, 2 threads, fused ResNet-18, CONVPOOL_VERBOSE times of the
 * 512 -> 512 layers at 7x7: 8 images 22.5-25.8 ms against 28.0-34.6 with
 * direct; one image 3.4-5.7, median 4.0, against 3.8-4.5, median 4.0; the
 * benchmark's inputs: 2.88 against 3.77 ms, 8 images 19.7 against 29.6).
 */
static const cp_algorithm *cp_wino_hands_over(const cp_layer *layer, const cp_blocking *cfg,
                                              const cp_algorithm *packed_for, int64_t batch,
                                              int64_t oh, int64_t ow) {
  const int f23 = cp_wino_prefers_f23(layer, cfg, batch, oh, ow);
  if (cp_wino_too_small(f23 ? &cp_wino_f23 : &cp_wino_f43, layer, cfg, batch, oh, ow))
    return &cp_algorithm_sr;
  if (f23 && oh <= 8 && ow <= 8 && packed_for == &cp_algorithm_direct && cfg->isa >= CP_ISA_AVX512)
    return packed_for;
  return f23 ? &cp_algorithm_winograd2x3 : NULL;
}

/* A setup that auto chose and that packed F(2x2, 3x3) holds its direct
   tiles' weights [cb][c][9][MR] at cl_offset: the direct algorithm's
   layout, in blocks of the same MR (cp_algo_setup.co_block_wanted: direct
   would take 64-channel blocks on some CPUs, cp_direct_kernel), which the
   operator writes there for the hand-over above; not
   where direct's are bf16 pairs (its pair kernels), which this algorithm's
   fp32 direct tiles cannot read: those runs stay here. */
static const cp_algorithm *cp_wino_packs_for(const cp_algo_setup *s, int index, size_t *offset,
                                             int *co_block) {
  const cp_wino_setup *ws = CP_ALGO_STATE(const cp_wino_setup, s->state);
  if (!s->auto_choice || index > 0 || ws->u_floats[CP_WINO_F23] == 0 || !ws->direct_shares)
    return NULL;
  *offset = ws->cl_offset;
  *co_block = ws->cl->mr; /* its direct tiles read them in blocks of cl's MR */
  return &cp_algorithm_direct;
}

/* The hooks of both tile sizes (each reads its tile size from the plan). */
/* clang-format off */
#define CP_WINO_HOOKS                                     \
  .pack_weights = cp_wino_pack_weights_all,               \
  .layout = cp_wino_layout,                               \
  .item_units = cp_wino_item_units,                       \
  .geometry = cp_wino_geometry,                           \
  .fits = cp_wino_fits,                                   \
  .cost = cp_wino_cost,                                   \
  .images_per_item = cp_wino_images_per_item,             \
  .worth_splitting_to = cp_wino_worth_splitting_to,       \
  .streamed_weight_bytes = cp_wino_streamed_weight_bytes, \
  .group_input_bytes = cp_wino_group_input_bytes, \
  .schedule = cp_wino_schedule,                           \
  .prepare = cp_wino_prepare,                             \
  .pack_item = cp_wino_pack_item,                         \
  .compute_block = cp_wino_compute_block,                 \
  .describe = cp_wino_describe
/* clang-format on */

/* bfloat16 where the CPU has shift-reduce's pair kernels: auto takes
   shift-reduce, which hands this algorithm the large images (a measured
   rule, cp_sr_hands_over). */
static const char *cp_wino_auto_skips(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                      size_t capacity) {
  if (layer->dtype != CONVPOOL_BFLOAT16 || !cp_sr_has_bf16_pairs(cpu)) return NULL;
  snprintf(why, capacity,
           "bfloat16 with the pair kernels (isa %s): shift-reduce runs them and hands this "
           "algorithm the conv outputs of %dx%d or more (the %dx%d ones over 256 input channels "
           "or more go to direct; measured rule)",
           cp_isa_name(cpu->isa), CP_SR_WINO_MIN_SIDE, CP_SR_WINO_MIN_SIDE, CP_SR_WINO_MIN_SIDE,
           CP_SR_WINO_MIN_SIDE);
  return why;
}

const cp_algorithm cp_algorithm_winograd = {
    .name = "winograd",
    .id = CONVPOOL_ALGO_WINOGRAD,
    .declines = cp_wino_declines,
    .auto_skips = cp_wino_auto_skips,
    .setup = cp_wino_setup_layer,
    CP_WINO_HOOKS,
    .hands_over = cp_wino_hands_over,
    .packs_for = cp_wino_packs_for,
};

/* F(2x2, 3x3): the same algorithm on smaller tiles. Auto reaches it through
   winograd's hand-over only (its auto_skips), where it is faster. */
static const char *cp_wino2_auto_skips(const cp_layer *layer, const cp_cpu *cpu, char *why,
                                       size_t capacity) {
  (void)layer, (void)cpu, (void)why, (void)capacity;
  return "winograd hands it the runs where it is faster (a measured rule)";
}

const cp_algorithm cp_algorithm_winograd2x3 = {
    .name = "winograd2x3",
    .id = CONVPOOL_ALGO_WINOGRAD_2X3,
    .declines = cp_wino2_declines,
    .auto_skips = cp_wino2_auto_skips,
    .setup = cp_wino2_setup_layer,
    CP_WINO_HOOKS,
};
