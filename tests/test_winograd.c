/*
 * Winograd F(4x4, 3x3) and F(2x2, 3x3) pieces, for each tile size: the
 * matrices in exact arithmetic, then whole items (weight transform, input
 * transform, multiply, output transform) of every transform implementation
 * this CPU runs against a float64 direct convolution, the range rule of the
 * input transform (which tiles go to the direct path: non-finite,
 * overflowing or high-dynamic-range input) and the weight side of it (which
 * channel blocks go direct); the vector transforms give the portable one's
 * bytes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "winograd/winograd.h"

static int failures;

#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      failures++;                            \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                 \
    }                                        \
  } while (0)

/* A^T [(G g G^T) . (B^T d B)] A equals the 3x3 correlation of d, in double. */
static void test_matrices(const cp_wino_kind *kd) {
  const int m = kd->m, al = kd->alpha;
  tu_rng rng = {7};
  double worst = 0;
  for (int trial = 0; trial < 100; trial++) {
    double g[3][3], d[6][6], t[6][6];
    for (int i = 0; i < 9; i++) g[i / 3][i % 3] = 2.0 * tu_uniform(&rng) - 1.0;
    for (int i = 0; i < 36; i++) d[i / 6][i % 6] = 2.0 * tu_uniform(&rng) - 1.0;
    for (int r = 0; r < al; r++)
      for (int s = 0; s < al; s++) {
        double a = 0, b = 0;
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3; j++) a += kd->g[r * 3 + i] * g[i][j] * kd->g[s * 3 + j];
        for (int i = 0; i < al; i++)
          for (int j = 0; j < al; j++) b += kd->bt[r * al + i] * d[i][j] * kd->bt[s * al + j];
        t[r][s] = a * b;
      }
    for (int p = 0; p < m; p++)
      for (int q = 0; q < m; q++) {
        double a = 0, ref = 0;
        for (int r = 0; r < al; r++)
          for (int s = 0; s < al; s++) a += kd->at[p * al + r] * t[r][s] * kd->at[q * al + s];
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3; j++) ref += d[p + i][q + j] * g[i][j];
        if (fabs(a - ref) > worst) worst = fabs(a - ref);
      }
  }
  CHECK(worst < 1e-12, "%s matrices: max |A^T(U.V)A - conv| = %g", kd->name, worst);
}

typedef struct item_case {
  int c_in, c_out, th, tw; /* F(4x4, 3x3)'s tiles th x tw; conv rows/cols used: rows x cols */
  int rows, cols;
  int signed_data;
  float spike; /* > 0: a few inputs multiplied by it (high dynamic range) */
} item_case;

/* The range rule of tile n in double, from the panel (winograd.h): the
   larger of its two ratios, each divided by its threshold (the tile is
   flagged above 1), over the outputs inside rows x cols. */
static double rule_ratio(const cp_wino_kind *kd, const float *panel, size_t cs, size_t ld,
                         size_t cin, size_t tw_pad, size_t n, int rows, int cols) {
  const size_t m = (size_t)kd->m, al = (size_t)kd->alpha;
  const size_t y0 = m * (n / tw_pad), x0 = m * (n % tw_pad);
  double dmax = 0, amax = 0, min_s = -1;
  for (size_t i = 0; i < al * al; i++) {
    double a = 0;
    for (size_t c = 0; c < cin; c++) {
      const double d = fabs(panel[c * cs + (y0 + i / al) * ld + x0 + i % al]);
      dmax = fmax(dmax, d), a += d;
    }
    amax = fmax(amax, a);
  }
  for (size_t p = 0; p < m; p++)
    for (size_t q = 0; q < m; q++) {
      if ((int)(y0 + p) >= rows || (int)(x0 + q) >= cols) continue;
      double s = 0;
      for (size_t c = 0; c < cin; c++)
        for (size_t i = 0; i < 9; i++)
          s += fabs(panel[c * cs + (y0 + p + i / 3) * ld + x0 + q + i % 3]);
      if (min_s < 0 || s < min_s) min_s = s;
    }
  if (min_s < 0 || amax == 0) return 0;
  return fmax((double)cin * dmax / CP_WINO_RATIO, sqrt((double)cin) * amax / CP_WINO_RATIO_SUM) /
         min_s;
}

/*
 * The input transform of an item as the library runs it: slices of
 * CP_WINO_SLICE input channels, each with its own sums, then the range rule
 * over the slices' sums into flags (returns the flagged count). V must be
 * the same bytes as one call over every channel makes (checked here).
 */
static size_t transform_item(const cp_wino_kind *kd, const cp_wino_transforms *t,
                             const float *panel, size_t cs, size_t ld, size_t cin, size_t tiles,
                             size_t tw_pad, size_t nr, float *v, size_t vs,
                             const cp_wino_screen *screen, cp_wino_mask *flags) {
  const size_t slices = cp_wino_slices(cin), sf = tiles * (size_t)kd->sums;
  const size_t points = (size_t)kd->points_n;
  const size_t nblk = (tiles + nr - 1) / nr, v_floats = nblk * points * vs;
  float *sums = tu_xmalloc(slices * sf * sizeof(float));
  float *whole = tu_xmalloc(v_floats * sizeof(float)), *one = tu_xmalloc(sf * sizeof(float));
  for (size_t i = 0; i < slices; i++) {
    const size_t c0 = i * CP_WINO_SLICE;
    const size_t n = cin - c0 < CP_WINO_SLICE ? cin - c0 : CP_WINO_SLICE;
    t->input(panel + c0 * cs, cs, ld, n, tiles, tw_pad, nr, v + c0 * nr, vs, sums + i * sf);
  }
  t->input(panel, cs, ld, cin, tiles, tw_pad, nr, whole, vs, one);
  int same = 1;
  for (size_t b = 0; b < nblk * points; b++)
    same &= memcmp(v + b * vs, whole + b * vs, cin * nr * sizeof(float)) == 0;
  CHECK(same, "%s c_in %zu: V of %zu slices differs from V of one call", t->name, cin, slices);
  if (slices == 1) /* one slice: its sums are the whole call's */
    CHECK(memcmp(sums, one, sf * sizeof(float)) == 0, "%s c_in %zu: the sums differ", t->name, cin);
  /* F(2x2, 3x3)'s transforms only add and subtract: the vector ones give the
     portable one's bytes, V of the tiles and the sums */
  if (kd == &cp_wino_f23 && t != &kd->impls[0]) {
    float *pv = tu_xmalloc(v_floats * sizeof(float)), *ps = tu_xmalloc(sf * sizeof(float));
    kd->impls[0].input(panel, cs, ld, cin, tiles, tw_pad, nr, pv, vs, ps);
    int equal = memcmp(ps, one, sf * sizeof(float)) == 0;
    for (size_t n = 0; n < tiles; n++)
      for (size_t x = 0; x < points; x++)
        for (size_t c = 0; c < cin; c++) {
          const size_t at = ((n / nr) * points + x) * vs + c * nr + n % nr;
          equal &= memcmp(&pv[at], &whole[at], sizeof(float)) == 0;
        }
    CHECK(equal, "%s c_in %zu tiles %zu: V or the sums differ from %s's", t->name, cin, tiles,
          kd->impls[0].name);
    free(ps), free(pv);
  }
  const size_t flagged = kd->screen_tiles(sums, slices, sf, cin, tiles, tw_pad, screen, flags);
  free(one), free(whole), free(sums);
  return flagged;
}

/*
 * One item through every stage with transforms t and the kernels of its ISA:
 * the tiles the range rule flags are those a float64 evaluation of the rule
 * flags, and every output of the other tiles is within the contract's bound
 * of a float64 direct convolution.
 */
static void run_item(const cp_wino_kind *kd, const cp_wino_transforms *t, int cl,
                     const item_case *ic, double *max_rel) {
  /* the products as the library runs them: on the shift-reduce kernels (NR
     tiles per block of V; F(4x4, 3x3) on the portable kernels) or on the
     channels-in-lanes kernel (cl: blocks of V of a vector group of tiles, 8
     at least, read in the input transform's lane order) */
  const cp_sr_ukernel *uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, t->isa);
  const cp_cl_ukernel *clk = cp_cl_ukernel_select(t->isa, 1);
  const int mr = cl ? clk->mr : uk->mr, nr = cl ? (t->lanes > 8 ? t->lanes : 8) : uk->nr;
  const cp_sr_ukernel *tail = cl ? NULL : cp_sr_ukernel_tail(uk, ic->c_out % mr);
  const int mr_tail = cl ? mr : tail->mr;
  const size_t km = (size_t)kd->m, pad = (size_t)kd->col_pad, points = (size_t)kd->points_n;
  /* the tiles that cover rows x cols (the case's th x tw for F(4x4, 3x3)) */
  const size_t th = ((size_t)ic->rows + km - 1) / km, tw = ((size_t)ic->cols + km - 1) / km;
  const size_t tw_pad = (tw + pad - 1) / pad * pad, tiles = th * tw_pad;
  const size_t nblk = (tiles + (size_t)nr - 1) / (size_t)nr;
  const size_t np = cl ? (size_t)clk->np : 1; /* M's rows: whole groups of the kernel's tiles */
  const size_t t_alloc = (nblk * (size_t)nr + np - 1) / np * np;
  const size_t ld = km * tw_pad + (size_t)kd->reach, prow = km * th + 2;
  const size_t cs = prow * ld + 16;
  const size_t cin = (size_t)ic->c_in, cout = (size_t)ic->c_out;
  const size_t in_rows = (size_t)ic->rows + 2, in_cols = (size_t)ic->cols + 2;
  const int co_blocks = (ic->c_out + mr - 1) / mr;
  tu_rng rng = {(uint64_t)(ic->c_in * 1000 + ic->c_out * 10 + ic->th) + (uint64_t)ic->spike};

  float *panel = tu_xmalloc(cin * cs * sizeof(float));
  memset(panel, 0, cin * cs * sizeof(float));
  for (size_t c = 0; c < cin; c++)
    for (size_t y = 0; y < in_rows; y++)
      for (size_t x = 0; x < in_cols; x++) {
        float val = tu_uniform(&rng);
        panel[c * cs + y * ld + x] = ic->signed_data ? 2 * val - 1 : val;
      }
  for (int k = 0; ic->spike > 0 && k < 3 + (int)(tiles / 8); k++)
    panel[(tu_next(&rng) % cin) * cs + (tu_next(&rng) % in_rows) * ld + tu_next(&rng) % in_cols] *=
        ic->spike;
  float *w = tu_xmalloc(cout * cin * 9 * sizeof(float));
  for (size_t i = 0; i < cout * cin * 9; i++) {
    float val = tu_uniform(&rng);
    w[i] = ic->signed_data ? 2 * val - 1 : val + 0.5f; /* even taps: no block goes direct */
  }
  const size_t uf = cp_wino_weight_floats(kd, ic->c_out, ic->c_in, mr, mr_tail);
  /* the kernels' weights lie on cache lines, as in the library's packed weights */
  float *u = aligned_alloc(64, (uf * sizeof(float) + 63) / 64 * 64);
  if (u == NULL) abort();
  cp_wino_pack_weights(kd, CONVPOOL_FLOAT32, w, ic->c_out, ic->c_in, mr, mr_tail, u);
  float u_max = 0;
  for (int cb = 0; cb < co_blocks; cb++) {
    const float scale = cp_wino_block_scale(kd, CONVPOOL_FLOAT32, w, ic->c_out, ic->c_in, mr,
                                            mr_tail, u, (size_t)cb);
    if (ic->c_in < CP_WINO_MIN_CHANNELS)
      CHECK(scale < 0, "%s: block %d of %d input channels is not direct", t->name, cb, ic->c_in);
    else if (!ic->signed_data)
      CHECK(scale >= 0, "%s: block %d of even weights goes direct", t->name, cb);
    u_max = scale > u_max ? scale : u_max;
  }
  const cp_wino_screen screen = {
      CP_WINO_RATIO, CP_WINO_RATIO_SUM, cp_wino_limit(u_max), ic->rows, ic->cols, 0, 0};
  const size_t vs = cp_wino_v_stride(cin, (size_t)nr);
  float *v = tu_xmalloc(nblk * points * vs * sizeof(float));
  cp_wino_mask *flags = tu_xmalloc(tiles * sizeof *flags);
  size_t bad =
      transform_item(kd, t, panel, cs, ld, cin, tiles, tw_pad, (size_t)nr, v, vs, &screen, flags);
  size_t want_flagged = 0;
  for (size_t n = 0; n < tiles; n++) {
    const double r = rule_ratio(kd, panel, cs, ld, cin, tw_pad, n, ic->rows, ic->cols);
    want_flagged += r > 1;
    if (fabs(r - 1) > 1e-3)
      CHECK((flags[n] != 0) == (r > 1),
            "%s c_in %d spike %g: tile %zu ratio / threshold %g flag %d", t->name, ic->c_in,
            (double)ic->spike, n, r, flags[n]);
  }
  if (ic->spike == 0) CHECK(bad == 0, "%s: %zu tiles of ordinary data flagged", t->name, bad);
  if (ic->spike >= 1e4f)
    CHECK(bad > 0, "%s: spikes of %g flag no tile", t->name, (double)ic->spike);
  (void)want_flagged;
  const size_t mfloats = (size_t)co_blocks * points * (size_t)mr * t_alloc;
  float *m = aligned_alloc(64, (mfloats * sizeof(float) + 63) / 64 * 64); /* as the scratch */
  if (m == NULL) abort();
  const cp_wino_tile_map map = cp_wino_tile_map_of(th, tw_pad, 0, 0); /* every tile */
  if (cl) {
    cp_wino_multiply_cl(kd, clk, u, uf / points, v, vs, (size_t)nr, (size_t)t->lane_u, cin, &map,
                        t_alloc, 0, co_blocks, m);
  } else {
    cp_wino_multiply(kd, uk, tail, co_blocks, u, uf / points, v, vs, cin, nblk, 0, co_blocks, m);
  }
  const size_t buf_ld = km * tw_pad, buf_cols = km * th * buf_ld;
  float *buf = tu_xmalloc((size_t)mr * buf_cols * sizeof(float));
  for (int cb = 0; cb < co_blocks; cb++) {
    const size_t mr_used = cb + 1 == co_blocks ? cout - (size_t)cb * (size_t)mr : (size_t)mr;
    const float *mb = m + (size_t)cb * points * (size_t)mr * t_alloc;
    if (cl)
      t->output_cl(mb, t_alloc, (size_t)mr, mr_used, &map, 0, 0, buf, buf_cols, buf_ld);
    else
      t->output(mb, t_alloc, (size_t)mr, mr_used, tiles, tw_pad, 0, 0, buf, buf_cols, buf_ld);
    for (size_t mm = 0; mm < mr_used; mm++) {
      const size_t co = (size_t)cb * (size_t)mr + mm;
      for (int y = 0; y < ic->rows; y++)
        for (int x = 0; x < ic->cols; x++) {
          /* the direct path's: the outputs the rule flags (of flagged tiles, the others
             are Winograd's and held to the bound here) */
          const unsigned bit = (unsigned)((size_t)y % km * km + (size_t)x % km);
          if (flags[(size_t)y / km * tw_pad + (size_t)x / km] >> bit & 1u) continue;
          double ref = 0, bound = 0;
          for (size_t c = 0; c < cin; c++)
            for (int i = 0; i < 3; i++)
              for (int j = 0; j < 3; j++) {
                double p = (double)panel[c * cs + (size_t)(y + i) * ld + (size_t)(x + j)] *
                           w[((co * cin + c) * 3 + (size_t)i) * 3 + (size_t)j];
                ref += p, bound += fabs(p);
              }
          const double got = buf[mm * buf_cols + (size_t)y * buf_ld + (size_t)x];
          const double err = fabs(got - ref);
          if (bound > 0 && err / bound > *max_rel) *max_rel = err / bound;
          if (!(err <= 1e-5 * bound + 1e-6)) {
            CHECK(0, "%s c_in %d c_out %d tiles %dx%d spike %g: co %zu (%d, %d) got %.9g want %.9g",
                  t->name, ic->c_in, ic->c_out, (int)th, (int)tw, (double)ic->spike, co, y, x, got,
                  ref);
            goto done;
          }
        }
    }
  }
done:
  /* A NaN, an Inf or a value that overflows the transforms anywhere in the
     item's input flags exactly the tiles whose 6x6 input window holds it. */
  const float specials[] = {NAN, INFINITY, -INFINITY, 3e38f, -1e37f, 1e36f};
  for (int trial = 0; ic->spike == 0 && trial < 12; trial++) {
    const size_t c = tu_next(&rng) % cin, y = tu_next(&rng) % in_rows, x = tu_next(&rng) % in_cols;
    float *p = &panel[c * cs + y * ld + x];
    const float keep = *p;
    *p = specials[trial % 6];
    size_t want = 0;
    bad =
        transform_item(kd, t, panel, cs, ld, cin, tiles, tw_pad, (size_t)nr, v, vs, &screen, flags);
    for (size_t n = 0; n < tiles; n++) {
      const size_t ty = km * (n / tw_pad), tx = km * (n % tw_pad), al = (size_t)kd->alpha;
      const int inside = y >= ty && y < ty + al && x >= tx && x < tx + al;
      want += (size_t)inside;
      CHECK((flags[n] != 0) == inside, "%s: %g at (%zu, %zu, %zu): tile %zu flag %d", t->name,
            (double)*p, c, y, x, n, flags[n]);
    }
    CHECK(bad == want, "%s: %zu tiles flagged, want %zu", t->name, bad, want);
    *p = keep;
  }
  free(flags), free(buf), free(m), free(v), free(u), free(w), free(panel);
}

/*
 * The weight side: blocks whose U is not finite or too large, or whose
 * filter taps are uneven, and every block of a layer with too few input
 * channels, go direct; even random filters do not.
 */
static void test_block_scale(const cp_wino_kind *kd) {
  const int c_in = CP_WINO_MIN_CHANNELS, c_out = 7, mr = 4, mr_tail = 4;
  float w[7 * CP_WINO_MIN_CHANNELS * 9];
  tu_rng rng = {99};
  const size_t uf = cp_wino_weight_floats(kd, c_out, c_in, mr, mr_tail);
  float *u = tu_xmalloc(uf * sizeof(float));
  for (int variant = 0; variant < 7; variant++) {
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = 0.5f + tu_uniform(&rng);
    const size_t co = 5, tap = 4; /* in block 1 */
    if (variant == 1) w[(co * c_in + 2) * 9 + tap] = INFINITY;
    if (variant == 2) w[(co * c_in + 2) * 9 + tap] = 2e38f; /* U overflows fp32 */
    if (variant == 3) w[(co * c_in + 2) * 9 + tap] = 1e25f; /* finite U above CP_WINO_U_MAX */
    if (variant == 4)                                       /* one tap in every channel */
      for (int c = 0; c < c_in; c++)
        for (size_t t = 0; t < 9; t++) w[(co * c_in + (size_t)c) * 9 + t] = t == tap ? 1.0f : 0.0f;
    if (variant == 5) /* a tap of 1/10 of the others in every channel */
      for (int c = 0; c < c_in; c++) w[(co * c_in + (size_t)c) * 9 + tap] = 0.1f;
    const int cin = variant == 6 ? c_in - 1 : c_in; /* too few channels: every block */
    cp_wino_pack_weights(kd, CONVPOOL_FLOAT32, w, c_out, cin, mr, mr_tail, u);
    const float b0 = cp_wino_block_scale(kd, CONVPOOL_FLOAT32, w, c_out, cin, mr, mr_tail, u, 0);
    const float b1 = cp_wino_block_scale(kd, CONVPOOL_FLOAT32, w, c_out, cin, mr, mr_tail, u, 1);
    CHECK(variant == 6 ? b0 < 0 : b0 > 0 && b0 < 14, "%s block scale: variant %d block 0 scale %g",
          kd->name, variant, (double)b0);
    CHECK(variant == 0 ? b1 > 0 : b1 < 0, "%s block scale: variant %d block 1 scale %g", kd->name,
          variant, (double)b1);
  }
  free(u);
}

int main(void) {
  const cp_cpu *cpu = cp_cpu_get();
  const cp_wino_kind *const kinds[] = {&cp_wino_f43, &cp_wino_f23};
  for (size_t kn = 0; kn < 2; kn++) {
    const cp_wino_kind *kd = kinds[kn];
    test_matrices(kd);
    test_block_scale(kd);
    const item_case cases[] = {
        {1, 1, 1, 1, 4, 4, 0, 0},       {3, 5, 2, 3, 7, 10, 1, 0},
        {17, 13, 3, 5, 12, 18, 0, 0},   {16, 24, 1, 9, 4, 34, 1, 0},
        {64, 12, 2, 8, 8, 32, 0, 0},    {256, 32, 1, 14, 4, 54, 0, 0},
        {256, 16, 2, 16, 8, 64, 1, 0},  {5, 7, 4, 2, 13, 5, 1, 0},
        {16, 12, 2, 16, 8, 64, 0, 30},  {16, 12, 2, 16, 8, 64, 1, 1e3},
        {64, 24, 2, 8, 8, 32, 0, 1e4},  {32, 12, 1, 16, 4, 64, 1, 1e20},
        {8, 12, 3, 8, 12, 32, 0, 300},  {130, 12, 2, 8, 8, 32, 1, 0},
        {130, 12, 2, 8, 7, 30, 0, 1e4},
    };
    for (size_t i = 0; i < kd->impl_count; i++) {
      const cp_wino_transforms *t = &kd->impls[i];
      if (t->isa > cpu->isa) {
        printf("%-18s skipped: the CPU (or CONVPOOL_ISA) allows %s\n", t->name,
               cp_isa_name(cpu->isa));
        continue;
      }
      /* F(2x2, 3x3)'s products run on the channels-in-lanes kernel only,
         F(4x4, 3x3)'s on either */
      for (int cl = kd == &cp_wino_f23; cl <= 1; cl++) {
        if (cl && t->output_cl == NULL) continue;
        double rel[2] = {0, 0};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
          run_item(kd, t, cl, &cases[c], &rel[cases[c].signed_data]);
        printf("%-18s %s products: max |err| / sum|x*w|: %.3g for data in [0,1), %.3g signed\n",
               t->name, cl ? "channels-in-lanes" : "shift-reduce", rel[0], rel[1]);
      }
    }
  }
  printf("%d failed\n", failures);
  return failures != 0;
}
