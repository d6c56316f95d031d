/*
 * Winograd F(4x4, 3x3) pieces: the matrices in exact arithmetic, then whole
 * items (weight transform, input transform, multiply, output transform) of
 * every transform implementation this CPU runs against a float64 direct
 * convolution, and the non-finite detection of the input transform.
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
static void test_matrices(void) {
  tu_rng rng = {7};
  double worst = 0;
  for (int trial = 0; trial < 100; trial++) {
    double g[3][3], d[6][6], u[6][6], v[6][6], t[6][6], y[4][4];
    for (int i = 0; i < 9; i++) g[i / 3][i % 3] = 2.0 * tu_uniform(&rng) - 1.0;
    for (int i = 0; i < 36; i++) d[i / 6][i % 6] = 2.0 * tu_uniform(&rng) - 1.0;
    for (int r = 0; r < 6; r++)
      for (int s = 0; s < 6; s++) {
        double a = 0, b = 0;
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3; j++) a += cp_wino_g[r][i] * g[i][j] * cp_wino_g[s][j];
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++) b += cp_wino_bt[r][i] * d[i][j] * cp_wino_bt[s][j];
        u[r][s] = a, v[r][s] = b, t[r][s] = a * b;
      }
    (void)u, (void)v;
    for (int p = 0; p < 4; p++)
      for (int q = 0; q < 4; q++) {
        double a = 0, ref = 0;
        for (int r = 0; r < 6; r++)
          for (int s = 0; s < 6; s++) a += cp_wino_at[p][r] * t[r][s] * cp_wino_at[q][s];
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3; j++) ref += d[p + i][q + j] * g[i][j];
        y[p][q] = a;
        if (fabs(a - ref) > worst) worst = fabs(a - ref);
      }
    (void)y;
  }
  CHECK(worst < 1e-12, "matrices: max |A^T(U.V)A - conv| = %g", worst);
}

typedef struct item_case {
  int c_in, c_out, th, tw; /* tiles th x tw; conv rows/cols used: rows x cols */
  int rows, cols;
  int signed_data;
} item_case;

/* One item through every stage with transforms t and the kernels of its ISA. */
static void run_item(const cp_wino_transforms *t, const item_case *ic, double *max_rel) {
  const cp_sr_ukernel *uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, t->isa);
  const int mr = uk->mr, nr = uk->nr;
  const cp_sr_ukernel *tail = cp_sr_ukernel_tail(uk, ic->c_out % mr);
  const size_t tw_pad = ((size_t)ic->tw + 3) / 4 * 4, tiles = (size_t)ic->th * tw_pad;
  const size_t nblk = (tiles + (size_t)nr - 1) / (size_t)nr, t_alloc = nblk * (size_t)nr;
  const size_t ld = 4 * tw_pad + 4, prow = 4 * (size_t)ic->th + 2, cs = prow * ld + 16;
  const size_t cin = (size_t)ic->c_in, cout = (size_t)ic->c_out;
  const size_t in_rows = (size_t)ic->rows + 2, in_cols = (size_t)ic->cols + 2;
  const int co_blocks = (ic->c_out + mr - 1) / mr;
  tu_rng rng = {(uint64_t)(ic->c_in * 1000 + ic->c_out * 10 + ic->th)};

  float *panel = tu_xmalloc(cin * cs * sizeof(float));
  memset(panel, 0, cin * cs * sizeof(float));
  for (size_t c = 0; c < cin; c++)
    for (size_t y = 0; y < in_rows; y++)
      for (size_t x = 0; x < in_cols; x++) {
        float val = tu_uniform(&rng);
        panel[c * cs + y * ld + x] = ic->signed_data ? 2 * val - 1 : val;
      }
  float *w = tu_xmalloc(cout * cin * 9 * sizeof(float));
  for (size_t i = 0; i < cout * cin * 9; i++) {
    float val = tu_uniform(&rng);
    w[i] = ic->signed_data ? 2 * val - 1 : val;
  }
  const size_t uf = cp_wino_weight_floats(ic->c_out, ic->c_in, mr, tail->mr);
  float *u = tu_xmalloc(uf * sizeof(float));
  cp_wino_pack_weights(CONVPOOL_FLOAT32, w, ic->c_out, ic->c_in, mr, tail->mr, u);
  const size_t vs = cp_wino_v_stride(cin, (size_t)nr);
  float *v = tu_xmalloc(nblk * CP_WINO_POINTS * vs * sizeof(float));
  unsigned char *flags = tu_xmalloc(tiles);
  size_t bad = t->input(panel, cs, ld, cin, tiles, tw_pad, (size_t)nr, v, vs, flags);
  CHECK(bad == 0, "%s: finite input reported as non-finite", t->name);
  const size_t mfloats = (size_t)co_blocks * CP_WINO_POINTS * (size_t)mr * t_alloc;
  float *m = tu_xmalloc(mfloats * sizeof(float));
  cp_wino_multiply(uk, tail, co_blocks, u, uf / CP_WINO_POINTS, v, vs, cin, nblk, 0, co_blocks, m);
  const size_t buf_ld = 4 * tw_pad, buf_cols = 4 * (size_t)ic->th * buf_ld;
  float *buf = tu_xmalloc((size_t)mr * buf_cols * sizeof(float));
  for (int cb = 0; cb < co_blocks; cb++) {
    const size_t mr_used = cb + 1 == co_blocks ? cout - (size_t)cb * (size_t)mr : (size_t)mr;
    t->output(m + (size_t)cb * CP_WINO_POINTS * (size_t)mr * t_alloc, t_alloc, (size_t)mr, mr_used,
              tiles, tw_pad, 0, 0, buf, buf_cols, buf_ld);
    for (size_t mm = 0; mm < mr_used; mm++) {
      const size_t co = (size_t)cb * (size_t)mr + mm;
      for (int y = 0; y < ic->rows; y++)
        for (int x = 0; x < ic->cols; x++) {
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
            CHECK(0, "%s c_in %d c_out %d tiles %dx%d: co %zu (%d, %d) got %.9g want %.9g", t->name,
                  ic->c_in, ic->c_out, ic->th, ic->tw, co, y, x, got, ref);
            goto done;
          }
        }
    }
  }
done:
  /* Non-finite detection: NaN or Inf anywhere in the item's input flags
     exactly the tiles whose 6x6 input window holds it. */
  for (int trial = 0; trial < 6; trial++) {
    const size_t c = tu_next(&rng) % cin, y = tu_next(&rng) % in_rows, x = tu_next(&rng) % in_cols;
    float *p = &panel[c * cs + y * ld + x];
    const float keep = *p;
    *p = trial % 3 == 0 ? NAN : trial % 3 == 1 ? INFINITY : -INFINITY;
    size_t want = 0;
    bad = t->input(panel, cs, ld, cin, tiles, tw_pad, (size_t)nr, v, vs, flags);
    for (size_t n = 0; n < tiles; n++) {
      const size_t ty = 4 * (n / tw_pad), tx = 4 * (n % tw_pad);
      const int inside = y >= ty && y < ty + 6 && x >= tx && x < tx + 6;
      want += (size_t)inside;
      CHECK(flags[n] == inside, "%s: %g at (%zu, %zu, %zu): tile %zu flag %d", t->name, (double)*p,
            c, y, x, n, flags[n]);
    }
    CHECK(bad == want, "%s: %zu tiles flagged, want %zu", t->name, bad, want);
    *p = keep;
  }
  free(flags), free(buf), free(m), free(v), free(u), free(w), free(panel);
}

int main(void) {
  test_matrices();
  const cp_cpu *cpu = cp_cpu_get();
  size_t count;
  const cp_wino_transforms *list = cp_wino_transforms_list(&count);
  const item_case cases[] = {
      {1, 1, 1, 1, 4, 4, 0},      {3, 5, 2, 3, 7, 10, 1},   {17, 13, 3, 5, 12, 18, 0},
      {16, 24, 1, 9, 4, 34, 1},   {64, 12, 2, 8, 8, 32, 0}, {256, 32, 1, 14, 4, 54, 0},
      {256, 16, 2, 16, 8, 64, 1}, {5, 7, 4, 2, 13, 5, 1},
  };
  for (size_t i = 0; i < count; i++) {
    const cp_wino_transforms *t = &list[i];
    if (t->isa > cpu->isa) {
      printf("%-18s skipped: the CPU (or CONVPOOL_ISA) allows %s\n", t->name,
             cp_isa_name(cpu->isa));
      continue;
    }
    double rel[2] = {0, 0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
      run_item(t, &cases[c], &rel[cases[c].signed_data]);
    printf("%-18s max |err| / sum|x*w|: %.3g for data in [0,1), %.3g signed\n", t->name, rel[0],
           rel[1]);
  }
  printf("%d failed\n", failures);
  return failures != 0;
}
