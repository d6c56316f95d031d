/*
 * The measurement behind Winograd's range rule (winograd/winograd.h, README
 * "Winograd"): random items of 16 tiles, ordinary and high-dynamic-range,
 * through the library's transforms and multiply for the CPU's ISA, against a
 * float64 direct convolution. Per tile, in double: the rule's two ratios
 * r1 = c_in * max |d| / min_o S(o) and r2 = sqrt(c_in) * max_p A(p) /
 * min_o S(o), R = max(r1 / CP_WINO_RATIO, r2 / CP_WINO_RATIO_SUM) (flagged
 * above 1); the library's flag; and the tile's worst error e = max over its
 * outputs and channels of |y - ref| / sum |x*w|.
 *
 *   convpool-wino-range [trials [seed]]
 *
 * Prints, per c_in: the ratios of ordinary tiles and the share the library
 * flags; the worst e of the tiles it keeps, per kind of data (and, apart,
 * of the tiles the rule would keep in channel blocks that the weight side
 * sends direct: every block below CP_WINO_MIN_CHANNELS input channels); the
 * worst e per band of R (the envelope that the thresholds are read from);
 * and any tile whose flag disagrees with R > 1 away from the threshold.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "winograd/winograd.h"

enum { KINDS = 8, SIZES = 6, BANDS = 12, TW = 16 };

static const char *const kind_names[KINDS] = {"ordinary",     "spikes",     "all-channel",
                                              "2x2 block",    "rows/cols",  "channel scales",
                                              "pixel scales", "sparse huge"};
static const int sizes[SIZES] = {3, 6, 8, 16, 64, 256};
static const double band_top[BANDS] = {0.125, 0.25, 0.5, 0.75, 1,   1.5,
                                       2,     4,    16,  256,  1e5, INFINITY};

typedef struct rng {
  unsigned long long s;
} rng;

static unsigned long long next(rng *r) { /* splitmix64 */
  unsigned long long z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform(rng *r) {
  return (double)(next(r) >> 11) * 0x1p-53;
}

static double normal(rng *r) {
  return sqrt(-2.0 * log(uniform(r) + 0x1p-60)) * cos(6.283185307179586 * uniform(r));
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (p == NULL) {
    fprintf(stderr, "convpool-wino-range: out of memory\n");
    exit(1);
  }
  return p;
}

typedef struct stats {
  long ordinary, ordinary_flagged, kept[KINDS], flagged[KINDS], band_tiles[BANDS];
  double ordinary_max[2], kept_worst[KINDS], band_worst[BANDS], *ordinary_r[2];
  double direct_worst; /* of the tiles the rule would keep in blocks that go direct */
  size_t ordinary_cap;
} stats;

/* One input value of base distribution `base`. */
static double base_value(rng *r, int base) {
  if (base == 0) return uniform(r);
  if (base == 1) return normal(r);
  if (base == 2) return fmax(0.0, normal(r));
  return 2.0 * uniform(r) - 1.0;
}

int main(int argc, char **argv) {
  const long trials = argc > 1 ? atol(argv[1]) : 4000;
  rng r = {argc > 2 ? strtoull(argv[2], NULL, 10) : 1};
  const cp_isa isa = cp_cpu_get()->isa;
  const cp_wino_transforms *t = cp_wino_transforms_select(&cp_wino_f43, isa);
  const cp_sr_ukernel *uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, isa);
  const size_t mr = (size_t)uk->mr, nr = (size_t)uk->nr, tiles = TW;
  const size_t nblk = (tiles + nr - 1) / nr, t_alloc = nblk * nr;
  const size_t ld = 4 * TW + 4, cs = 6 * ld + 16, cols = 4 * TW + 2;
  const size_t buf_ld = 4 * TW, buf_cols = 4 * buf_ld;
  stats st[SIZES];
  memset(st, 0, sizeof st);
  long mismatches = 0, direct_blocks = 0;
  for (long trial = 0; trial < trials; trial++) {
    const int si = (int)(next(&r) % SIZES);
    const size_t cin = (size_t)sizes[si];
    const int base = (int)(next(&r) % 4), kind = (int)(next(&r) % KINDS);
    const int border = (int)(next(&r) % 3), wdist = (int)(next(&r) % 3);
    const double mag = pow(10.0, 20.0 * uniform(&r) * uniform(&r));
    float *panel = xcalloc(cin * cs, sizeof(float)), *w = xcalloc(mr * cin * 9, sizeof(float));
    for (size_t c = 0; c < cin; c++)
      for (size_t y = 0; y < 6; y++)
        for (size_t x = 0; x < cols; x++) {
          /* border 1: the top row and first column of an image with conv
             padding 1; border 2: the bottom row and last column */
          const int pad =
              (border == 1 && (y == 0 || x == 0)) || (border == 2 && (y == 5 || x == cols - 1));
          panel[c * cs + y * ld + x] = pad ? 0.0f : (float)base_value(&r, base);
        }
    float *const p = panel;
    if (kind == 1) { /* a few single inputs */
      for (int k = 0; k < 8; k++)
        p[next(&r) % cin * cs + next(&r) % 6 * ld + next(&r) % cols] *= (float)mag;
    } else if (kind == 2) { /* one position in every channel */
      const size_t at = next(&r) % 6 * ld + next(&r) % cols;
      for (size_t c = 0; c < cin; c++) p[c * cs + at] *= (float)mag;
    } else if (kind == 3) { /* a 2x2 block in every channel */
      const size_t at = next(&r) % 5 * ld + next(&r) % (cols - 1);
      for (size_t c = 0; c < cin; c++)
        for (size_t i = 0; i < 4; i++) p[c * cs + at + i / 2 * ld + i % 2] *= (float)mag;
    } else if (kind == 4) { /* whole rows or whole columns scaled */
      const int by_row = (int)(next(&r) % 2);
      for (size_t k = 0; k < (by_row ? 6 : cols); k++) {
        const float s = (float)pow(mag, uniform(&r));
        for (size_t c = 0; c < cin; c++)
          for (size_t i = 0; i < (by_row ? cols : 6); i++)
            p[c * cs + (by_row ? k * ld + i : i * ld + k)] *= s;
      }
    } else if (kind == 5) { /* channels of different scales */
      for (size_t c = 0; c < cin; c++) {
        const float s = (float)pow(mag, uniform(&r));
        for (size_t i = 0; i < 6 * ld; i++) p[c * cs + i] *= s;
      }
    } else if (kind == 6) { /* every input scaled by its own factor */
      for (size_t i = 0; i < cin * cs; i++) p[i] *= (float)pow(mag, uniform(&r));
    } else if (kind == 7) { /* 5% of the inputs huge */
      for (size_t i = 0; i < cin * cs; i++)
        if (uniform(&r) < 0.05) p[i] *= (float)mag;
    }
    for (size_t i = 0; i < mr * cin * 9; i++)
      w[i] = (float)(wdist == 0 ? uniform(&r) : wdist == 1 ? normal(&r) : 2 * uniform(&r) - 1);

    const size_t uf =
        cp_wino_weight_floats(&cp_wino_f43, (int64_t)mr, (int64_t)cin, (int)mr, (int)mr);
    float *u = xcalloc(uf, sizeof(float));
    cp_wino_pack_weights(&cp_wino_f43, CONVPOOL_FLOAT32, w, (int64_t)mr, (int64_t)cin, (int)mr,
                         (int)mr, u);
    const float scale = cp_wino_block_scale(&cp_wino_f43, CONVPOOL_FLOAT32, w, (int64_t)mr,
                                            (int64_t)cin, (int)mr, (int)mr, u, 0);
    const int block_direct = scale < 0; /* measured all the same, counted apart */
    direct_blocks += block_direct;
    const cp_wino_screen screen = {CP_WINO_RATIO,
                                   CP_WINO_RATIO_SUM,
                                   cp_wino_limit(block_direct ? 1.0f : scale),
                                   4,
                                   4 * TW,
                                   0,
                                   0};
    const size_t vs = cp_wino_v_stride(cin, nr);
    float *v = xcalloc(nblk * CP_WINO_POINTS * vs, sizeof(float));
    float *m = xcalloc(CP_WINO_POINTS * mr * t_alloc, sizeof(float));
    float *buf = xcalloc(mr * buf_cols, sizeof(float));
    cp_wino_mask flags[TW];
    float *sums = xcalloc(cp_wino_slices(cin) * tiles * CP_WINO_SUMS, sizeof(float));
    for (size_t c0 = 0; c0 < cin; c0 += CP_WINO_SLICE) /* in slices, as the library */
      t->input(panel + c0 * cs, cs, ld, cin - c0 < CP_WINO_SLICE ? cin - c0 : CP_WINO_SLICE, tiles,
               TW, nr, v + c0 * nr, vs, sums + c0 / CP_WINO_SLICE * tiles * CP_WINO_SUMS);
    cp_wino_screen_tiles(sums, cp_wino_slices(cin), tiles * CP_WINO_SUMS, cin, tiles, TW, &screen,
                         flags);
    free(sums);
    cp_wino_multiply(&cp_wino_f43, uk, uk, 1, u, uf / CP_WINO_POINTS, v, vs, cin, nblk, 0, 1, m);
    t->output(m, t_alloc, mr, mr, tiles, TW, 0, 0, buf, buf_cols, buf_ld);

    stats *s = &st[si];
    for (size_t n = 0; n < tiles; n++) {
      double dmax = 0, amax = 0, min_s = INFINITY, worst = 0;
      for (size_t i = 0; i < 36; i++) {
        double a = 0;
        for (size_t c = 0; c < cin; c++) {
          const double d = fabs(p[c * cs + i / 6 * ld + 4 * n + i % 6]);
          dmax = fmax(dmax, d), a += d;
        }
        amax = fmax(amax, a);
      }
      for (size_t o = 0; o < 16; o++) {
        double sum = 0;
        for (size_t c = 0; c < cin; c++)
          for (size_t i = 0; i < 9; i++)
            sum += fabs(p[c * cs + (o / 4 + i / 3) * ld + 4 * n + o % 4 + i % 3]);
        min_s = fmin(min_s, sum);
      }
      const double r1 = dmax > 0 ? (double)cin * dmax / min_s : 0;
      const double r2 = amax > 0 ? sqrt((double)cin) * amax / min_s : 0;
      const double ratio = fmax(r1 / CP_WINO_RATIO, r2 / CP_WINO_RATIO_SUM);
      for (size_t co = 0; co < mr; co++)
        for (size_t o = 0; o < 16; o++) {
          double ref = 0, bound = 0;
          for (size_t c = 0; c < cin; c++)
            for (size_t i = 0; i < 9; i++) {
              const double x = p[c * cs + (o / 4 + i / 3) * ld + 4 * n + o % 4 + i % 3];
              ref += x * w[(co * cin + c) * 9 + i], bound += fabs(x * w[(co * cin + c) * 9 + i]);
            }
          const double got = buf[co * buf_cols + o / 4 * buf_ld + 4 * n + o % 4];
          const double e = bound > 0 ? fabs(got - ref) / bound : (got == ref ? 0 : INFINITY);
          worst = isnan(got) ? INFINITY : fmax(worst, e);
        }
      if (fabs(ratio - 1) > 1e-3 && (flags[n] != 0) != (ratio > 1)) {
        mismatches++;
        printf("flag %d but R %.6g (c_in %zu, %s)\n", flags[n], ratio, cin, kind_names[kind]);
      }
      if (kind == 0) {
        if (s->ordinary == (long)s->ordinary_cap) {
          s->ordinary_cap = s->ordinary_cap ? 2 * s->ordinary_cap : 1024;
          for (int k = 0; k < 2; k++) {
            s->ordinary_r[k] = realloc(s->ordinary_r[k], s->ordinary_cap * sizeof(double));
            if (s->ordinary_r[k] == NULL) return 1;
          }
        }
        s->ordinary_r[0][s->ordinary] = r1, s->ordinary_r[1][s->ordinary++] = r2;
        s->ordinary_flagged += flags[n] != 0;
        s->ordinary_max[0] = fmax(s->ordinary_max[0], r1);
        s->ordinary_max[1] = fmax(s->ordinary_max[1], r2);
      }
      if (block_direct) {
        if (!flags[n]) s->direct_worst = fmax(s->direct_worst, worst);
        continue;
      }
      int band = 0;
      while (!(ratio <= band_top[band])) band++;
      s->band_tiles[band]++;
      s->band_worst[band] = fmax(s->band_worst[band], worst);
      if (flags[n]) {
        s->flagged[kind]++;
      } else {
        s->kept[kind]++;
        s->kept_worst[kind] = fmax(s->kept_worst[kind], worst);
      }
    }
    free(buf), free(m), free(v), free(u), free(w), free(panel);
  }

  printf(
      "%s, %s; %ld items of %d tiles, thresholds %g (r1) and %g (r2); %ld weight blocks "
      "went direct\n",
      t->name, uk->name, trials, TW, (double)CP_WINO_RATIO, (double)CP_WINO_RATIO_SUM,
      direct_blocks);
  printf(
      "\nordinary tiles (uniform, N(0,1), ReLU'd N(0,1), uniform signed; borders of padding 1):\n");
  for (int si = 0; si < SIZES; si++) {
    stats *s = &st[si];
    double q[2] = {0, 0};
    for (int k = 0; k < 2 && s->ordinary > 0; k++) {
      double *v = s->ordinary_r[k];
      for (long i = 1; i < s->ordinary; i++) /* insertion sort: some thousands */
        for (long j = i; j > 0 && v[j - 1] > v[j]; j--) {
          const double x = v[j];
          v[j] = v[j - 1], v[j - 1] = x;
        }
      q[k] = v[(long)(0.999 * (double)(s->ordinary - 1))];
    }
    printf(
        "  c_in %3d: %6ld tiles, r1 99.9%% %6.3g max %6.3g, r2 99.9%% %6.3g max %6.3g, "
        "flagged %.3g%%\n",
        sizes[si], s->ordinary, q[0], s->ordinary_max[0], q[1], s->ordinary_max[1],
        s->ordinary ? 100.0 * (double)s->ordinary_flagged / (double)s->ordinary : 0.0);
  }
  printf("\nworst |err| / sum|x*w| of the tiles Winograd keeps (kept / flagged):\n  %-15s", "c_in");
  for (int si = 0; si < SIZES; si++) printf(" %17d", sizes[si]);
  for (int k = 0; k < KINDS; k++) {
    printf("\n  %-15s", kind_names[k]);
    for (int si = 0; si < SIZES; si++)
      printf(" %7.2g %4ld/%-4ld", st[si].kept_worst[k], st[si].kept[k], st[si].flagged[k]);
  }
  printf("\n  %-15s", "(blocks direct)");
  for (int si = 0; si < SIZES; si++) printf(" %7.2g %9s", st[si].direct_worst, "");
  printf(
      "\n\nworst |err| / sum|x*w| by band of R, every tile of a Winograd block (flagged or "
      "not):\n  %-15s",
      "R <=");
  for (int si = 0; si < SIZES; si++) printf(" %17d", sizes[si]);
  for (int b = 0; b < BANDS; b++) {
    printf("\n  %-15g", band_top[b]);
    for (int si = 0; si < SIZES; si++)
      printf(" %7.2g (%7ld)", st[si].band_worst[b], st[si].band_tiles[b]);
  }
  printf("\n\n%ld flags disagree with R > 1\n", mismatches);
  for (int si = 0; si < SIZES; si++) free(st[si].ordinary_r[0]), free(st[si].ordinary_r[1]);
  return mismatches != 0;
}
