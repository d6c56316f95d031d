/*
 * Depthwise microkernel tests, one ctest per line of dw-ukernels.inc:
 *
 *   test_dw_ukernels NAME   test one listed kernel (exit 77: CPU lacks its ISA)
 *
 * Each kernel against a scalar model of its contract (dw-ukernel.h) over
 * random taps and offsets, 1..40 rows of 1..70 positions, flat calls
 * (x_ld = 0) and compact rows: bit for bit (the model sums the taps in the
 * kernel's order, with fmaf for the FMA kernels and a product then a sum
 * for the portable one), and nothing written outside the rows; its flat
 * sweep into compact rows the same way. Then its row
 * copies (rows, rows2 and split2), in place too for rows. NaN and Inf among the
 * inputs propagate as in the model. Where the ISA has channels in lanes,
 * its tile (against fmaf per lane) and its staging transpose.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dw-ukernel.h"
#include "testutil.h"

enum { EXIT_SKIP = 77 };

#define SENTINEL 12345.5f

static int check_kernel(const cp_dw_ukernel *u, tu_rng *rng) {
  const int fused = u->isa != CP_ISA_SCALAR;
  const size_t taps = 1 + tu_next(rng) % 25, rows = 1 + tu_next(rng) % 40;
  const size_t n = 1 + tu_next(rng) % 70, flat = tu_next(rng) % 3 == 0;
  const size_t x_ld = flat ? 0 : n + tu_next(rng) % 9;
  const size_t out_ld = flat ? 0 : n + (tu_next(rng) % 2 ? 0 : tu_next(rng) % 5);
  const size_t call_rows = flat ? 1 : rows;
  ptrdiff_t off[25];
  size_t max_off = 0;
  for (size_t t = 0; t < taps; t++) {
    off[t] = (ptrdiff_t)(tu_next(rng) % 300);
    if ((size_t)off[t] > max_off) max_off = (size_t)off[t];
  }
  const size_t x_n = max_off + (call_rows - 1) * x_ld + (n + 15) / 16 * 16 + 1;
  const size_t out_n = (call_rows - 1) * out_ld + n + 64;
  float *x = malloc(x_n * sizeof(float)), *w = malloc(taps * sizeof(float));
  float *out = malloc(out_n * sizeof(float));
  for (size_t i = 0; i < x_n; i++) x[i] = 2.0f * tu_uniform(rng) - 1.0f;
  for (size_t t = 0; t < taps; t++) w[t] = 2.0f * tu_uniform(rng) - 1.0f;
  if (tu_next(rng) % 4 == 0) { /* a few non-finite inputs */
    const float specials[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) x[tu_next(rng) % x_n] = specials[i];
  }
  for (size_t i = 0; i < out_n; i++) out[i] = SENTINEL;
  u->fn(x, off, taps, w, call_rows, n, x_ld, out, out_ld);
  int ok = 1;
  for (size_t i = 0; ok && i < out_n; i++) {
    const size_t y = out_ld ? i / out_ld : 0, c = out_ld ? i % out_ld : i;
    const int inside = y < call_rows && c < n;
    float want = SENTINEL;
    if (inside) {
      want = 0.0f;
      for (size_t t = 0; t < taps; t++) {
        const float v = x[(size_t)off[t] + y * x_ld + c];
        want = fused ? fmaf(w[t], v, want) : want + w[t] * v;
      }
    }
    const int same = memcmp(&want, &out[i], sizeof want) == 0 || (isnan(want) && isnan(out[i]));
    if (!same) {
      printf(
          "%s: taps %zu rows %zu n %zu x_ld %zu out_ld %zu: element %zu (row %zu, col %zu, "
          "%s) is %.9g, want %.9g\n",
          u->name, taps, call_rows, n, x_ld, out_ld, i, y, c, inside ? "inside" : "outside",
          (double)out[i], (double)want);
      ok = 0;
    }
  }
  free(x), free(w), free(out);
  return ok;
}

/* The flat sweep into compact rows against the same model. */
static int check_compact(const cp_dw_ukernel *u, tu_rng *rng) {
  const int fused = u->isa != CP_ISA_SCALAR;
  const size_t taps = 1 + tu_next(rng) % 25, rows = 1 + tu_next(rng) % 20;
  const size_t nx = 1 + tu_next(rng) % 40, ld = nx + tu_next(rng) % 7;
  const size_t len = (rows - 1) * ld + nx;
  ptrdiff_t off[25];
  size_t max_off = 0;
  for (size_t t = 0; t < taps; t++) {
    off[t] = (ptrdiff_t)(tu_next(rng) % 200);
    if ((size_t)off[t] > max_off) max_off = (size_t)off[t];
  }
  const size_t x_n = max_off + (len + 15) / 16 * 16, out_n = rows * nx + 64;
  float *x = malloc(x_n * sizeof(float)), *w = malloc(taps * sizeof(float));
  float *out = malloc(out_n * sizeof(float));
  for (size_t i = 0; i < x_n; i++) x[i] = 2.0f * tu_uniform(rng) - 1.0f;
  for (size_t t = 0; t < taps; t++) w[t] = 2.0f * tu_uniform(rng) - 1.0f;
  for (size_t i = 0; i < out_n; i++) out[i] = SENTINEL;
  u->compact(x, off, taps, w, len, ld, nx, out);
  int ok = 1;
  for (size_t i = 0; ok && i < out_n; i++) {
    float want = SENTINEL;
    if (i < rows * nx) {
      const size_t p = i / nx * ld + i % nx;
      want = 0.0f;
      for (size_t t = 0; t < taps; t++)
        want =
            fused ? fmaf(w[t], x[(size_t)off[t] + p], want) : want + w[t] * x[(size_t)off[t] + p];
    }
    if (memcmp(&want, &out[i], sizeof want) != 0) {
      printf("%s: compact taps %zu rows %zu nx %zu ld %zu: element %zu is %.9g, want %.9g\n",
             u->name, taps, rows, nx, ld, i, (double)out[i], (double)want);
      ok = 0;
    }
  }
  free(x), free(w), free(out);
  return ok;
}

static int check_rows(const cp_dw_ukernel *u, tu_rng *rng) {
  const size_t rows = 1 + tu_next(rng) % 12, n = 1 + tu_next(rng) % 70;
  const size_t from_ld = 2 * n + tu_next(rng) % 7, to_ld = n + tu_next(rng) % 5;
  const size_t from_n = (rows - 1) * from_ld + 2 * n, to_n = (rows - 1) * to_ld + n + 32;
  float *from = malloc(from_n * sizeof(float)), *to = malloc(to_n * sizeof(float));
  int ok = 1;
  for (int every_other = 0; every_other < 2; every_other++) {
    for (size_t i = 0; i < from_n; i++) from[i] = (float)i;
    for (size_t i = 0; i < to_n; i++) to[i] = SENTINEL;
    (every_other ? u->rows2 : u->rows)(from, from_ld, to, to_ld, rows, n);
    for (size_t i = 0; ok && i < to_n; i++) {
      const size_t y = i / to_ld, c = i % to_ld;
      const float want =
          y < rows && c < n ? (float)(y * from_ld + (every_other ? 2 * c : c)) : SENTINEL;
      if (to[i] != want) {
        printf("%s: rows%s %zu x %zu: element %zu is %g, want %g\n", u->name,
               every_other ? "2" : "", rows, n, i, (double)to[i], (double)want);
        ok = 0;
      }
    }
  }
  /* both column phases in one pass: n_even = n_odd or n_odd + 1 */
  const size_t n_even = n, n_odd = n - (tu_next(rng) % 2 == 0 && n > 1 ? 1 : 0) - (n == 1);
  float *odd = malloc(to_n * sizeof(float));
  for (size_t i = 0; i < from_n; i++) from[i] = (float)i;
  for (size_t i = 0; i < to_n; i++) to[i] = SENTINEL, odd[i] = SENTINEL;
  u->split2(from, from_ld, to, odd, to_ld, rows, n_even, n_odd);
  for (size_t i = 0; ok && i < to_n; i++) {
    const size_t y = i / to_ld, c = i % to_ld;
    const float want_e = y < rows && c < n_even ? (float)(y * from_ld + 2 * c) : SENTINEL;
    const float want_o = y < rows && c < n_odd ? (float)(y * from_ld + 2 * c + 1) : SENTINEL;
    if (to[i] != want_e || odd[i] != want_o) {
      printf("%s: split2 %zu x %zu/%zu: element %zu is %g/%g, want %g/%g\n", u->name, rows, n_even,
             n_odd, i, (double)to[i], (double)odd[i], (double)want_e, (double)want_o);
      ok = 0;
    }
  }
  free(odd);
  /* in place: rows n + gap apart moved together (the compact rows) */
  const size_t gap = tu_next(rng) % 5, ld = n + gap, in_n = rows * ld;
  float *buf = malloc(in_n * sizeof(float));
  for (size_t i = 0; i < in_n; i++) buf[i] = (float)i;
  if (rows > 1) u->rows(buf + ld, ld, buf + n, n, rows - 1, n);
  for (size_t i = 0; ok && i < rows * n; i++) {
    const float want = (float)(i / n * ld + i % n);
    if (buf[i] != want) {
      printf("%s: rows in place %zu x %zu (gap %zu): element %zu is %g, want %g\n", u->name, rows,
             n, gap, i, (double)buf[i], (double)want);
      ok = 0;
    }
  }
  free(from), free(to), free(buf);
  return ok;
}

/* The channels-in-lanes tile (dw-ukernel.h: lanes_fn) against fmaf per
   lane, in the taps' order, bit for bit: the same bits as the ISA's
   position kernel on each channel. Positions past n repeat the last (as
   the callers pass them); nothing past n vectors is written. */
static int check_lanes(const cp_dw_ukernel *u, tu_rng *rng) {
  enum { L = CP_DW_LANES, NP = CP_DW_LANES_NP };
  const size_t taps = 1 + tu_next(rng) % 49, n = 1 + tu_next(rng) % NP;
  ptrdiff_t off[49], pos[NP];
  size_t max_at = 0;
  for (size_t t = 0; t < taps; t++) off[t] = (ptrdiff_t)(tu_next(rng) % 200 * L);
  for (size_t p = 0; p < NP; p++) pos[p] = p < n ? (ptrdiff_t)(tu_next(rng) % 300 * L) : pos[n - 1];
  for (size_t t = 0; t < taps; t++)
    for (size_t p = 0; p < NP; p++)
      if ((size_t)(off[t] + pos[p]) > max_at) max_at = (size_t)(off[t] + pos[p]);
  const size_t x_n = max_at + L, out_n = NP * L + 16;
  float *x = malloc(x_n * sizeof(float)), *w = malloc(taps * L * sizeof(float));
  float *out = malloc(out_n * sizeof(float));
  for (size_t i = 0; i < x_n; i++) x[i] = 2.0f * tu_uniform(rng) - 1.0f;
  for (size_t i = 0; i < taps * L; i++) w[i] = 2.0f * tu_uniform(rng) - 1.0f;
  if (tu_next(rng) % 4 == 0) { /* a few non-finite inputs */
    const float specials[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) x[tu_next(rng) % x_n] = specials[i];
  }
  for (size_t i = 0; i < out_n; i++) out[i] = SENTINEL;
  u->lanes_fn(x, pos, off, taps, w, out, n);
  int ok = 1;
  for (size_t i = 0; ok && i < out_n; i++) {
    const size_t p = i / L, l = i % L;
    float want = SENTINEL;
    if (p < n) {
      want = 0.0f;
      for (size_t t = 0; t < taps; t++) want = fmaf(w[t * L + l], x[pos[p] + off[t] + l], want);
    }
    if (memcmp(&want, &out[i], sizeof want) != 0 && !(isnan(want) && isnan(out[i]))) {
      printf("%s lanes: taps=%zu n=%zu: out[%zu] = %a, want %a\n", u->name, taps, n, i,
             (double)out[i], (double)want);
      ok = 0;
    }
  }
  free(x), free(w), free(out);
  return ok;
}

/* The lanes staging's transpose (dw-ukernel.h: transpose): every element
   to its vector and lane, rows of `row` to_ld apart, nothing else written,
   nothing read past the runs (each run ends its own allocation). */
static int check_transpose(const cp_dw_ukernel *u, tu_rng *rng) {
  enum { L = CP_DW_LANES };
  const size_t n = 1 + tu_next(rng) % 90, row = 1 + tu_next(rng) % n;
  const size_t to_ld = row + tu_next(rng) % 4, rows = (n + row - 1) / row;
  const size_t to_n = (rows * to_ld + 2) * L;
  float *src[L], *to = malloc(to_n * sizeof(float));
  for (size_t l = 0; l < L; l++) {
    src[l] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) src[l][i] = (float)(l * 1000 + i);
  }
  for (size_t i = 0; i < to_n; i++) to[i] = SENTINEL;
  u->transpose((const float *const *)src, n, row, to_ld, to);
  int ok = 1;
  for (size_t i = 0; ok && i < to_n; i++) {
    const size_t v = i / L, l = i % L, y = v / to_ld, x = v % to_ld, e = y * row + x;
    const float want = x < row && e < n ? src[l][e] : SENTINEL;
    if (to[i] != want) {
      printf("%s transpose: n=%zu row=%zu to_ld=%zu: to[%zu] = %g, want %g\n", u->name, n, row,
             to_ld, i, (double)to[i], (double)want);
      ok = 0;
    }
  }
  for (size_t l = 0; l < L; l++) free(src[l]);
  free(to);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    printf("usage: test_dw_ukernels NAME\n");
    return 2;
  }
  size_t count;
  const cp_dw_ukernel *list = cp_dw_ukernel_list(&count), *u = NULL;
  for (size_t i = 0; i < count; i++)
    if (strcmp(list[i].name, argv[1]) == 0) u = &list[i];
  if (u == NULL) {
    printf("no depthwise kernel named %s\n", argv[1]);
    return 2;
  }
  const cp_cpu *cpu = cp_cpu_get();
  if (u->isa > cpu->detected) {
    printf("SKIP %s: this CPU lacks %s\n", u->name, cp_isa_name(u->isa));
    return EXIT_SKIP;
  }
  if (cp_dw_ukernel_select(u->isa) != u) {
    printf("%s: select(%s) does not give it\n", u->name, cp_isa_name(u->isa));
    return 1;
  }
  tu_rng rng = {2026};
  int failures = 0, cases = 0;
  for (int i = 0; i < 3000 && failures < 8; i++, cases++) failures += !check_kernel(u, &rng);
  for (int i = 0; i < 1000 && failures < 8; i++, cases++) failures += !check_compact(u, &rng);
  for (int i = 0; i < 500 && failures < 8; i++, cases++) failures += !check_rows(u, &rng);
  for (int i = 0; u->lanes_fn != NULL && i < 2000 && failures < 8; i++, cases++)
    failures += !check_lanes(u, &rng) + !check_transpose(u, &rng);
  printf("%s: %d cases, %d failed\n", u->name, cases, failures);
  return failures ? 1 : 0;
}
