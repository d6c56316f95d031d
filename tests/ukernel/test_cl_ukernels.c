/*
 * Channels-in-lanes microkernel tests, one ctest per line of cl-ukernels.inc:
 *
 *   test_cl_ukernels NAME   test one listed kernel (exit 77: CPU lacks its ISA)
 *
 * Each kernel against a scalar model of its contract (cl-ukernel.h) over
 * random channel counts, taps at random offsets, positions at random offsets
 * (a conv stride, rows, repeated tail lanes), partial tiles (n < NP) and
 * output rows apart by more than n: fp32 kernels bit for bit (the model sums
 * in the kernel's (c, t) order, with fmaf for the FMA kernels and a product
 * then a sum for the portable one); bf16 pair kernels (vdpbf16ps) within a
 * forward error bound of the exact sum (testutil.h: tu_pair_step; subnormal
 * inputs, some among the data, read as zero). Nothing may be written outside
 * the MR x n values.
 * The positions reversed among the lanes must give each output the same
 * bits, NaN signs included (an item's tiles change with the split), and the
 * same contraction in two passes (the first storing its partial sums, the
 * second continuing them) the same bits as one.
 * The input's buffer ends where the kernel's last read lies, so a read past
 * the contract is a read past the allocation (AddressSanitizer in the
 * sanitizer builds). NaN and Inf among the inputs propagate as in the model.
 * Each listed kernel is reachable: the default of its ISA and pairing
 * (cp_cl_ukernel_select), or the member of that kernel's family that a
 * tile's worth of positions picks (cp_cl_ukernel_for_positions), whose
 * choices never leave the family nor cost more than the default.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cl-ukernel.h"
#include "testutil.h"

enum { EXIT_SKIP = 77 };

#define SENTINEL 12345.5f

/* A random input element: an fp32 value in [-1, 1), or (pairs) two bf16
   values there, now and then a subnormal one. */
static uint32_t random_elem(int pair, tu_rng *rng) {
  if (!pair) {
    const float v = 2.0f * tu_uniform(rng) - 1.0f;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
  }
  uint32_t e = 0;
  for (int h = 0; h < 2; h++) {
    uint16_t b = cp_float_to_bf16(2.0f * tu_uniform(rng) - 1.0f);
    if (tu_next(rng) % 64 == 0) b = (uint16_t)((b & 0x8000u) | (1 + tu_next(rng) % 0x7f));
    e |= (uint32_t)b << (16 * h);
  }
  return e;
}

/* A NaN or an infinity in element e (pairs: in one of its halves). */
static void put_special(uint32_t *e, int pair, tu_rng *rng) {
  const uint32_t f32[3] = {0x7fc00000u, 0x7f800000u, 0xff800000u};
  const uint32_t v = f32[tu_next(rng) % 3];
  if (!pair) {
    *e = v;
    return;
  }
  const unsigned h = (unsigned)(tu_next(rng) % 2);
  *e = (*e & ~(0xffffu << (16 * h))) | (v >> 16) << (16 * h);
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int check_kernel(const cp_cl_ukernel *u, tu_rng *rng) {
  const int fused = u->isa != CP_ISA_SCALAR, pair = u->cpack == 2;
  const size_t mr = (size_t)u->mr, np = (size_t)u->np;
  const size_t c_in = 1 + tu_next(rng) % 40, taps = 1 + tu_next(rng) % 49;
  const size_t n = 1 + tu_next(rng) % np;
  const size_t out_ld = n + (tu_next(rng) % 2 ? 0 : tu_next(rng) % 7);
  ptrdiff_t off[49], pos[CP_CL_MAX_NP];
  size_t max_off = 0, max_pos = 0;
  for (size_t t = 0; t < taps; t++) {
    off[t] = (ptrdiff_t)(tu_next(rng) % 200);
    if ((size_t)off[t] > max_off) max_off = (size_t)off[t];
  }
  const size_t step = 1 + tu_next(rng) % 4; /* positions a conv stride apart, or anywhere */
  for (size_t p = 0; p < np; p++) {
    pos[p] = (ptrdiff_t)(tu_next(rng) % 3 ? p * step : tu_next(rng) % 90);
    if (p >= n && tu_next(rng) % 2) pos[p] = pos[n - 1]; /* a repeated tail lane */
    if ((size_t)pos[p] > max_pos) max_pos = (size_t)pos[p];
  }
  const size_t cs = max_off + max_pos + 1 + tu_next(rng) % 5;
  /* the last channel ends at its last read: nothing past it is allocated */
  const size_t x_n = (c_in - 1) * cs + max_off + max_pos + 1;
  const size_t w_n = c_in * taps * mr, out_n = (mr + 2) * out_ld + 8, out0 = out_ld + 3;
  uint32_t *xe = malloc(x_n * sizeof(uint32_t)), *we = malloc(w_n * sizeof(uint32_t));
  const float *x = (const float *)(const void *)xe, *w = (const float *)(const void *)we;
  float *out = malloc(out_n * sizeof(float)), *out2 = malloc(out_n * sizeof(float));
  float *partial = aligned_alloc(64, (np * mr * sizeof(float) + 63) / 64 * 64);
  for (size_t i = 0; i < x_n; i++) xe[i] = random_elem(pair, rng);
  for (size_t i = 0; i < w_n; i++) we[i] = random_elem(pair, rng);
  if (tu_next(rng) % 4 == 0) { /* non-finite inputs: a few, or one in 8 (Inf - Inf: NaN) */
    const size_t count = tu_next(rng) % 2 ? 3 : x_n / 8 + 1;
    for (size_t i = 0; i < count; i++) put_special(&xe[tu_next(rng) % x_n], pair, rng);
  }
  for (size_t i = 0; i < out_n; i++) out[i] = out2[i] = SENTINEL;
  u->fn(x, cs, pos, off, taps, c_in, w, partial, 1, out + out0, out_ld, n);
  int ok = 1;
  for (size_t i = 0; ok && i < out_n; i++) {
    const size_t rel = i - out0, m = rel / out_ld, p = rel % out_ld;
    const int inside = i >= out0 && m < mr && p < n;
    float want = SENTINEL;
    double exact = 0.0, bound = 0.0; /* pairs: the exact sum and the bound on the error */
    if (inside) {
      want = 0.0f;
      for (size_t c = 0; c < c_in; c++)
        for (size_t t = 0; t < taps; t++) {
          const uint32_t xb = xe[c * cs + (size_t)(off[t] + pos[p])],
                         wb = we[(c * taps + t) * mr + m];
          if (pair) {
            const double ph =
                (double)tu_bf16_daz((uint16_t)(wb >> 16)) * tu_bf16_daz((uint16_t)(xb >> 16));
            const double pl = (double)tu_bf16_daz((uint16_t)wb) * tu_bf16_daz((uint16_t)xb);
            tu_pair_step(&exact, &bound, ph, pl);
            continue;
          }
          const float xv = bits_f32(xb), wv = bits_f32(wb);
          want = fused ? fmaf(wv, xv, want) : want + wv * xv;
        }
    }
    const float got = out[i];
    int same = memcmp(&got, &want, sizeof got) == 0 || (isnan(got) && isnan(want));
    if (inside && pair) { /* NaN for NaN, the infinity for an infinity, else within the bound */
      want = (float)exact;
      same = isnan(exact)   ? isnan(got) != 0
             : isinf(exact) ? (double)got == exact
                            : !isnan(got) && fabs((double)got - exact) <= bound;
    }
    if (!same) {
      if (inside)
        printf(
            "%s: c_in=%zu taps=%zu n=%zu out_ld=%zu: channel %zu position %zu: got %.9g "
            "want %.9g%s\n",
            u->name, c_in, taps, n, out_ld, m, p, got, want, pair ? " (beyond the bound)" : "");
      else
        printf(
            "%s: c_in=%zu taps=%zu n=%zu out_ld=%zu: wrote element %zu outside its MR x n "
            "values\n",
            u->name, c_in, taps, n, out_ld, i);
      ok = 0;
    }
  }
  /* the positions reversed among the tile's lanes: each output the same
     bits, NaN signs included, whichever lane computes it (the tiles of an
     item change with the item split) */
  if (ok) {
    ptrdiff_t rev[CP_CL_MAX_NP];
    for (size_t p = 0; p < np; p++) rev[p] = p < n ? pos[n - 1 - p] : pos[p];
    for (size_t i = 0; i < out_n; i++) out2[i] = SENTINEL;
    u->fn(x, cs, rev, off, taps, c_in, w, partial, 1, out2 + out0, out_ld, n);
    for (size_t m = 0; ok && m < mr; m++)
      for (size_t p = 0; ok && p < n; p++)
        if (memcmp(&out2[out0 + m * out_ld + p], &out[out0 + m * out_ld + (n - 1 - p)],
                   sizeof(float)) != 0) {
          printf(
              "%s: c_in=%zu taps=%zu n=%zu: channel %zu differs when its position moves from "
              "lane %zu to lane %zu\n",
              u->name, c_in, taps, n, m, n - 1 - p, p);
          ok = 0;
        }
    for (size_t i = 0; i < out_n; i++) out2[i] = SENTINEL;
  }
  /* two passes: channels [0, c1) into the partial sums, then [c1, c_in) on */
  if (ok && c_in >= 2) {
    const size_t c1 = 1 + tu_next(rng) % (c_in - 1);
    u->fn(x, cs, pos, off, taps, c1, w, partial, 1, NULL, 0, n);
    u->fn(x + c1 * cs, cs, pos, off, taps, c_in - c1, w + c1 * taps * mr, partial, 0, out2 + out0,
          out_ld, n);
    if (memcmp(out, out2, out_n * sizeof *out) != 0) {
      printf("%s: c_in=%zu taps=%zu n=%zu: %zu + %zu channels in two passes differ from one\n",
             u->name, c_in, taps, n, c1, c_in - c1);
      ok = 0;
    }
  }
  free(xe), free(we), free(out), free(out2), free(partial);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    printf("usage: test_cl_ukernels NAME\n");
    return 2;
  }
  size_t count;
  const cp_cl_ukernel *list = cp_cl_ukernel_list(&count), *u = NULL;
  for (size_t i = 0; i < count; i++)
    if (strcmp(list[i].name, argv[1]) == 0) u = &list[i];
  if (u == NULL) {
    printf("no channels-in-lanes kernel named %s\n", argv[1]);
    return 2;
  }
  const cp_cpu *cpu = cp_cpu_get();
  if (u->isa > cpu->detected) {
    printf("SKIP %s: this CPU lacks %s\n", u->name, cp_isa_name(u->isa));
    return EXIT_SKIP;
  }
  /* reachable: select's kernel of its ISA, or the first of its ISA with
     another MR (cp_cl_ukernel_with_mr), or one of that kernel's family (same
     ISA and MR) that a tile's worth of positions picks */
  const cp_cl_ukernel *base = cp_cl_ukernel_select(u->isa, u->cpack);
  if (base != NULL) base = cp_cl_ukernel_with_mr(base, u->mr);
  if (base == NULL || base->isa != u->isa || base->cpack != u->cpack || base->mr != u->mr ||
      cp_cl_ukernel_for_positions(base, (size_t)u->np) != u) {
    printf("%s: neither select(%s, %d) (%s) nor its family for %d positions gives it\n", u->name,
           cp_isa_name(u->isa), u->cpack, base ? base->name : "none", u->np);
    return 1;
  }
  /* the family's choice never leaves the family, and never costs more than
     the kernel it started from */
  for (size_t positions = 1; positions <= 200; positions++) {
    const cp_cl_ukernel *got = cp_cl_ukernel_for_positions(base, positions);
    const size_t base_cost =
        (positions + (size_t)base->np - 1) / (size_t)base->np * ((size_t)base->np + 1);
    const size_t got_cost =
        (positions + (size_t)got->np - 1) / (size_t)got->np * ((size_t)got->np + 1);
    if (got->isa != base->isa || got->cpack != base->cpack || got->mr != base->mr ||
        got_cost > base_cost) {
      printf("%s: for %zu positions the family gives %s\n", base->name, positions, got->name);
      return 1;
    }
  }
  tu_rng rng = {2026};
  int failures = 0, cases = 0;
  for (int i = 0; i < 3000 && failures < 8; i++, cases++) failures += !check_kernel(u, &rng);
  printf("%s: %d cases, %d failed\n", u->name, cases, failures);
  return failures ? 1 : 0;
}
