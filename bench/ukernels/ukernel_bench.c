/*
 * convpool-ukernel-bench: every shift-reduce microkernel listed in
 * src/kernels/sr-ukernels.inc, timed alone on one thread on a few shapes,
 * against the measured single-thread peak of the instruction it is built on
 * (cli/peak.c: vfmadd231ps zmm for avx512f, ymm for avx2, vdpbf16ps zmm for
 * avx512bf16; none for scalar).
 *
 *   convpool-ukernel-bench [--kernel NAME] [--seconds S]
 *
 * Each measurement calls the kernel over and over on the same input panel,
 * weights and tile, so the data stays in cache (the footprint of each shape is
 * printed beside the L1d size); kernels and peaks alike report the best of
 * three runs of S/3 seconds.
 * A call computes MR x NR outputs of c_in * k * k multiply-adds each: 2 MR NR
 * c_in k^2 flop, c_in counting input channels (a bf16 pair counts two). The
 * panel layouts are the operator's (src/operator.c): a conv row for k > 1,
 * rows rs = NR + k - 1 apart and channels an odd number of cache lines apart;
 * for k = 1 the im2col GEMM strip (cs = NR, rs = 0).
 *
 * Then the channels-in-lanes kernels of src/kernels/cl-ukernels.inc (the
 * direct algorithm), on a conv row of NP positions at stride 1 and 2 and on
 * a 1x1 GEMM column: a call computes MR x NP outputs, 2 MR NP c_in k^2 flop
 * (a pair kernel's c_in rounded up to even).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cl-ukernel.h"
#include "kernels/ukernel.h"
#include "peak.h"

typedef struct shape {
  const char *label;
  size_t c_in; /* input channels */
  size_t k;
} shape;

enum { TRIALS = 3 };

static const shape shapes[] = {
    {"k=3 c_in=16", 16, 3},   /* a 3x3 conv layer's tile, small enough for any L1d */
    {"k=3 c_in=64", 64, 3},   /* the same with more channels */
    {"k=1 c_in=256", 256, 1}, /* the im2col GEMM use: one strip of 256 rows */
};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

/* Panel geometry of a shape for a kernel, in 32-bit elements. */
typedef struct geometry {
  size_t steps, cs, rs, x_elems, w_elems;
  double flop;  /* per call */
  size_t bytes; /* x + w + tile */
} geometry;

static geometry geometry_of(const cp_sr_ukernel *u, const shape *s) {
  geometry g;
  const size_t nr = (size_t)u->nr, mr = (size_t)u->mr, k = s->k;
  g.steps = (s->c_in + (size_t)u->cpack - 1) / (size_t)u->cpack;
  if (k == 1) {
    g.rs = 0, g.cs = nr;
  } else {
    g.rs = nr + k - 1;
    g.cs = cp_round_up(k * g.rs, 16); /* 16 elements: one 64-byte line */
    if ((g.cs / 16) % 2 == 0) g.cs += 16;
  }
  g.x_elems = (g.steps - 1) * g.cs + (k - 1) * g.rs + (k - 1) + nr;
  g.w_elems = g.steps * k * k * mr;
  g.flop = 2.0 * (double)(mr * nr) * (double)(g.steps * (size_t)u->cpack) * (double)(k * k);
  g.bytes = 4 * (g.x_elems + g.w_elems + mr * nr);
  return g;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xaligned(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
    fprintf(stderr, "convpool-ukernel-bench: out of memory\n");
    exit(2);
  }
  return p;
}

/* Values in +-[0.5, 1): no subnormals, no overflow; bf16 pairs for cpack 2. */
static void fill(uint32_t *p, size_t n, int pair, uint64_t *state) {
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = (uint32_t)(*state >> 32);
    const uint32_t a = 0x3f000000u | (r & 0x807fffffu); /* fp32 in +-[0.5, 1) */
    const uint32_t b = 0x3f000000u | ((r << 7) & 0x807f0000u);
    p[i] = pair ? (a >> 16) | (b & 0xffff0000u) : a;
  }
}

/* GFLOP/s of flop per call of call(ctx): the best of TRIALS windows of
   seconds / TRIALS each, the way the peak is measured (peak_fma). */
static double rate_of(void (*call)(void *), void *ctx, double flop, double seconds) {
  const double window = seconds / TRIALS;
  /* Batches between clock reads of about a 20th of a window (at most 1 ms);
     finding the size also warms the caches and the vector units. */
  const double batch_s = window / 20 < 1e-3 ? window / 20 : 1e-3;
  size_t reps = 1;
  for (;;) {
    const double t0 = now_s();
    for (size_t r = 0; r < reps; r++) call(ctx);
    if (now_s() - t0 >= batch_s || reps >= ((size_t)1 << 30)) break;
    reps *= 2;
  }
  double best = 0.0;
  for (int trial = 0; trial < TRIALS; trial++) {
    size_t calls = 0;
    const double t0 = now_s();
    double t1;
    do {
      for (size_t r = 0; r < reps; r++) call(ctx);
      calls += reps;
      t1 = now_s();
    } while (t1 - t0 < window);
    const double rate = flop * (double)calls / (t1 - t0);
    if (rate > best) best = rate;
  }
  return best * 1e-9;
}

/* One shift-reduce call on a shape's data. */
typedef struct sr_call {
  const cp_sr_ukernel *u;
  const shape *s;
  geometry g;
  const uint32_t *x;
  const float *w;
  float *tile;
} sr_call;

static void sr_call_once(void *ctx) {
  const sr_call *c = ctx;
  c->u->fn(c->x, c->g.cs, c->g.rs, c->g.steps, c->s->k, c->w, c->tile, (size_t)c->u->nr, 0, NULL);
}

static double bench(const cp_sr_ukernel *u, const shape *s, double seconds) {
  const geometry g = geometry_of(u, s);
  uint64_t state = 42;
  uint32_t *x = xaligned(g.x_elems * 4), *w = xaligned(g.w_elems * 4);
  float *tile = xaligned((size_t)(u->mr * u->nr) * 4);
  fill(x, g.x_elems, u->cpack == 2, &state);
  fill(w, g.w_elems, u->cpack == 2, &state);
  sr_call c = {u, s, g, x, (const float *)(const void *)w, tile};
  const double gflops = rate_of(sr_call_once, &c, g.flop, seconds);
  /* Keep the results observable. */
  volatile float sink = tile[0];
  (void)sink;
  free(x), free(w), free(tile);
  return gflops;
}

/* The channels-in-lanes shapes: a conv row of NP positions `stride` apart
   over c_in channels of a k x k filter, or (k = 1) a GEMM column. */
typedef struct cl_shape {
  const char *label;
  size_t c_in, k, stride;
} cl_shape;

static const cl_shape cl_shapes[] = {
    {"k=3 c_in=16 s1", 16, 3, 1}, /* a 3x3 layer's row */
    {"k=3 c_in=64 s2", 64, 3, 2}, /* ResNet's 3x3 stride-2 layers */
    {"k=1 c_in=256", 256, 1, 1},  /* a 1x1 layer */
    {"k=7 c_in=3 s2", 3, 7, 2},   /* the ResNet stem */
};
enum { CL_SHAPES = sizeof cl_shapes / sizeof cl_shapes[0] };

typedef struct cl_call {
  const cp_cl_ukernel *u;
  const cl_shape *s;
  size_t cs, taps, steps; /* steps: 32-bit channel elements (bf16 pairs for cpack 2) */
  const float *x, *w;
  const ptrdiff_t *pos, *off;
  float *partial, *out;
} cl_call;

static void cl_call_once(void *ctx) {
  const cl_call *c = ctx;
  c->u->fn(c->x, c->cs, c->pos, c->off, c->taps, c->steps, c->w, c->partial, 1, c->out,
           (size_t)c->u->np, (size_t)c->u->np);
}

/* A panel of k rows of (NP - 1) * stride + k columns per channel step,
   steps an odd number of cache lines apart (the direct algorithm's layout);
   a pair kernel's steps hold two channels each (c_in rounded up to even). */
static double bench_cl(const cp_cl_ukernel *u, const cl_shape *s, double seconds, size_t *bytes) {
  const size_t np = (size_t)u->np, mr = (size_t)u->mr, k = s->k, taps = k * k;
  const size_t cpack = (size_t)u->cpack, steps = (s->c_in + cpack - 1) / cpack;
  const size_t ld = (np - 1) * s->stride + k;
  size_t cs = cp_round_up(k * ld, 16);
  if ((cs / 16) % 2 == 0) cs += 16;
  const size_t x_elems = (steps - 1) * cs + k * ld, w_elems = steps * taps * mr;
  *bytes = 4 * (x_elems + w_elems + 2 * mr * np);
  uint64_t state = 42;
  uint32_t *x = xaligned(x_elems * 4), *w = xaligned(w_elems * 4);
  float *partial = xaligned(mr * np * 4), *out = xaligned(mr * np * 4);
  fill(x, x_elems, cpack == 2, &state);
  fill(w, w_elems, cpack == 2, &state);
  ptrdiff_t pos[CP_CL_MAX_NP], off[49];
  for (size_t p = 0; p < np; p++) pos[p] = (ptrdiff_t)(p * s->stride);
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j < k; j++) off[i * k + j] = (ptrdiff_t)(i * ld + j);
  cl_call c = {u,
               s,
               cs,
               taps,
               steps,
               (const float *)(const void *)x,
               (const float *)(const void *)w,
               pos,
               off,
               partial,
               out};
  const double flop = 2.0 * (double)(mr * np) * (double)(steps * cpack * taps);
  const double gflops = rate_of(cl_call_once, &c, flop, seconds);
  volatile float sink = out[0];
  (void)sink;
  free(x), free(w), free(partial), free(out);
  return gflops;
}

/* The peak instruction of a kernel's ISA, or -1 for none (scalar). */
static int peak_kind_of(cp_isa isa) {
  switch (isa) {
    case CP_ISA_AVX512_BF16:
      return PEAK_BF16_AVX512;
    case CP_ISA_AVX512:
      return PEAK_FP32_AVX512;
    case CP_ISA_AVX2:
      return PEAK_FP32_AVX2;
    case CP_ISA_SCALAR:
      return -1;
  }
  return -1;
}

/* A kernel's row: its name and ISA; 0 (and the reason) where this CPU
   cannot run it. */
static int row_start(const char *name, cp_isa isa, const cp_cpu *cpu) {
  printf("%-26s %-11s", name, cp_isa_name(isa));
  if (isa <= cpu->detected) return 1;
  printf("  skipped: CPU lacks %s\n", cp_isa_name(isa));
  return 0;
}

/* One shape's rate, with its % of the ISA's peak where there is one. */
static void print_rate(double gflops, int kind, const double *peak) {
  if (kind >= 0 && peak[kind] > 0.0)
    printf("  %9.1f %4.0f%%", gflops, 100.0 * gflops / peak[kind]);
  else
    printf("  %9.1f     -", gflops);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: convpool-ukernel-bench [--kernel NAME] [--seconds S]\n"
          "  Times each microkernel of src/kernels/sr-ukernels.inc and cl-ukernels.inc\n"
          "  alone, one thread,\n"
          "  and compares it with the measured single-thread FMA peak of its ISA.\n"
          "  --kernel NAME  only this kernel (e.g. f32-sr-6x16-avx2)\n"
          "  --seconds S    time per kernel and shape, and per peak (default 0.25)\n");
}

int main(int argc, char **argv) {
  const char *only = NULL;
  double seconds = 0.25;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      char *end;
      seconds = strtod(argv[++i], &end);
      if (*end != '\0' || !(seconds > 0.0) || seconds > 60.0) {
        fprintf(stderr, "convpool-ukernel-bench: --seconds wants a number in (0, 60]\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }

  size_t count;
  const cp_sr_ukernel *list = cp_sr_ukernel_list(&count);
  int selected = 0;
  for (size_t i = 0; i < count; i++) selected += only == NULL || strcmp(list[i].name, only) == 0;
  size_t cl_listed;
  const cp_cl_ukernel *cl_list = cp_cl_ukernel_list(&cl_listed);
  for (size_t i = 0; i < cl_listed; i++)
    if (only != NULL && strcmp(cl_list[i].name, only) == 0) selected = -1;
  if (selected == 0) {
    fprintf(stderr, "convpool-ukernel-bench: no kernel named %s; the kernels are:\n", only);
    for (size_t i = 0; i < count; i++) fprintf(stderr, "  %s\n", list[i].name);
    for (size_t i = 0; i < cl_listed; i++) fprintf(stderr, "  %s\n", cl_list[i].name);
    return 2;
  }

  const cp_cpu *cpu = cp_cpu_get();
  char brand[64];
  peak_cpu_brand(brand, sizeof brand);
  printf(
      "convpool-ukernel-bench: one thread, each kernel alone; kernels and peaks: best of %d "
      "runs of %.3g s\n",
      TRIALS, seconds / TRIALS);
  printf("CPU: %s; supports up to %s; L1d %zu KiB\n", brand, cp_isa_name(cpu->detected),
         cpu->l1d >> 10);

  /* The measured single-thread peak of each instruction a selected kernel needs. */
  double peak[PEAK_COUNT] = {0};
  int need[PEAK_COUNT] = {0};
  for (size_t i = 0; i < count; i++) {
    const int kind = peak_kind_of(list[i].isa);
    if (kind >= 0 && (only == NULL || strcmp(list[i].name, only) == 0)) need[kind] = 1;
  }
  for (size_t i = 0; i < cl_listed; i++) {
    const int kind = peak_kind_of(cl_list[i].isa);
    if (kind >= 0 && (only == NULL || strcmp(cl_list[i].name, only) == 0)) need[kind] = 1;
  }
  printf("single-thread peak:");
  const char *sep = " ";
  for (int kind = 0; kind < PEAK_COUNT; kind++) {
    if (!need[kind]) continue;
    peak[kind] = peak_fma((peak_kind)kind, 1, seconds / TRIALS, TRIALS);
    if (peak[kind] > 0.0)
      printf("%s%s %.1f GFLOP/s", sep, peak_name((peak_kind)kind), peak[kind]);
    else
      printf("%s%s: CPU lacks it", sep, peak_name((peak_kind)kind));
    sep = "; ";
  }
  printf("\n");

  if (selected < 0) goto channels_in_lanes; /* only a channels-in-lanes kernel asked for */
  /* The shapes, with the data footprint across the selected kernels. */
  for (int s = 0; s < SHAPES; s++) {
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t i = 0; i < count; i++) {
      if (only != NULL && strcmp(list[i].name, only) != 0) continue;
      const geometry g = geometry_of(&list[i], &shapes[s]);
      if (g.bytes < lo) lo = g.bytes;
      if (g.bytes > hi) hi = g.bytes;
    }
    printf("shape %c: %-13s %s; data %.1f-%.1f KiB (%s L1d)\n", 'A' + s, shapes[s].label,
           shapes[s].k == 1 ? "GEMM strip, cs = NR, rs = 0" : "conv row, rs = NR + k - 1",
           lo / 1024.0, hi / 1024.0,
           hi <= cpu->l1d  ? "fits"
           : lo > cpu->l1d ? "exceeds"
                           : "some exceed");
  }

  printf("%-26s %-11s", "kernel", "isa");
  for (int s = 0; s < SHAPES; s++) printf("  %c GFLOP/s %%peak", 'A' + s);
  printf("\n");
  for (size_t i = 0; i < count; i++) {
    const cp_sr_ukernel *u = &list[i];
    if (only != NULL && strcmp(u->name, only) != 0) continue;
    if (!row_start(u->name, u->isa, cpu)) continue;
    for (int s = 0; s < SHAPES; s++)
      print_rate(bench(u, &shapes[s], seconds), peak_kind_of(u->isa), peak);
    printf("\n");
  }

  /* The channels-in-lanes kernels, against the same peaks. */
channels_in_lanes:;
  const size_t cl_count = cl_listed;
  const cp_cl_ukernel *cl = cl_list;
  int cl_selected = 0;
  for (size_t i = 0; i < cl_count; i++)
    cl_selected += only == NULL || strcmp(cl[i].name, only) == 0;
  if (cl_selected == 0) return 0;
  printf("channels-in-lanes kernels (direct), shapes:");
  for (int s = 0; s < CL_SHAPES; s++) printf(" %c: %s;", 'A' + s, cl_shapes[s].label);
  printf("\n%-26s %-11s", "kernel", "isa");
  for (int s = 0; s < CL_SHAPES; s++) printf("  %c GFLOP/s %%peak", 'A' + s);
  printf("\n");
  for (size_t i = 0; i < cl_count; i++) {
    const cp_cl_ukernel *u = &cl[i];
    if (only != NULL && strcmp(u->name, only) != 0) continue;
    if (!row_start(u->name, u->isa, cpu)) continue;
    for (int s = 0; s < CL_SHAPES; s++) {
      size_t bytes;
      print_rate(bench_cl(u, &cl_shapes[s], seconds, &bytes), peak_kind_of(u->isa), peak);
    }
    printf("\n");
  }
  return 0;
}
