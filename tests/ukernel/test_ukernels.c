/*
 * Tests of the shift-reduce microkernels (src/kernels/ukernel.h) against
 * scalar oracles written here. CMake registers one ctest per line of
 * src/kernels/sr-ukernels.inc (see CMakeLists.txt beside this file).
 *
 *   test_ukernels NAME          test one listed kernel (exit 77: CPU lacks its ISA)
 *   test_ukernels --all         every listed kernel this CPU can run
 *   test_ukernels --list        the listed kernel names
 *   test_ukernels --dispatch NAME...
 *                               the list matches NAME... (the names CMake read
 *                               from the .inc), its metadata, and the choices of
 *                               cp_sr_ukernel_select and cp_sr_ukernel_tail
 *   test_ukernels --self-test   the checks below catch deliberately broken
 *                               software models of a kernel (and pass correct ones)
 *
 * What a kernel test checks, on a grid of c_in 1,2,3,5,16,17 x k 1,2,3,5 x
 * four stride layouts (the GEMM strip rs = 0, cs = NR; a tight panel; odd
 * strides; strides that overlap) with tile ld = NR, an odd ld > NR and
 * ld > 2 NR, plus NaN / Inf / -0 / subnormal data:
 *
 *  - the values. The oracle depends on the kernel (see ukernel.h for the sum):
 *    * f32 on a vector ISA: one fused multiply-add per term in (c, i, j)
 *      order, so the result must be bit-identical to a scalar fmaf() loop in
 *      that order. (NaN results only need to be NaN: payloads may differ.)
 *    * f32 scalar: compiled without FMA, so a rounded product then a rounded
 *      sum per term; bit-identical to that loop. A build that contracts the
 *      loop to FMAs is also within the contract ("one FMA per term where the
 *      ISA has one"), so a tile bit-identical to the fmaf() loop passes too.
 *    * bf16 pairs (vdpbf16ps): no bit-exact reference is assumed. Intel's SDM
 *      defines the instruction as two FMAs (odd pair element, then even), each
 *      rounded to nearest even, subnormal inputs read as zero (DAZ), subnormal
 *      outputs flushed to zero (FTZ). Products of two bf16 values are exact in
 *      fp32, so each pair step rounds at most twice whatever the association
 *      (two FMAs, or the pair summed first). The test sums the exact products
 *      in double (in the same order, inputs with DAZ) and bounds the error
 *      with a running forward bound: per step E += u (2 + u) M + 4 * 2^-126,
 *      u = 2^-24, M the largest magnitude any such rounding can see (partial
 *      sums +- E); the 2^-126 terms cover FTZ. |kernel - exact| <= E must hold.
 *      The test also reports how many elements match a software model of the
 *      SDM definition bit for bit (informational only).
 *  - the finish (ukernel.h: cp_sr_finish, the pool-1 epilogue done at the
 *    store): a third call with a residual, a bias per row, a clamp (none,
 *    ReLU, or a band) and fewer rows than MR must store exactly
 *    clamp((sum + res) + bias) from the first call's sums in its first rows,
 *    bit for bit (NaN for NaN), and nothing in the rows after them.
 *  - the writes: the tile sits inside a buffer of sentinel values (guard rows
 *    above and below, and the ld - NR columns between rows); every sentinel
 *    must survive, and the tile's old contents must not leak into the result.
 *  - the reads: x and w each end exactly at a page followed by a PROT_NONE page
 *    (and, in a second call, start right after one), so reading past the
 *    documented range x[c*cs + i*rs + j + n] (n < NR) or past the packed
 *    weights faults; elements inside the range that the sum does not use hold
 *    NaN, so using one shows in the result.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/ukernel.h"
#include "testutil.h"

enum { EXIT_SKIP = 77, EXIT_FAULT = 3, MAX_REPORTS = 8 };

#define SENTINEL 0x7FA0C0DEu    /* tile guard value: a signalling NaN pattern */
#define POISON_F32 0x7FC0BAD0u  /* unused x elements: a quiet NaN */
#define POISON_PAIR 0x7FC17FC1u /* unused x elements of pair kernels: two bf16 NaNs */

/* ---- bits ---- */

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* A bf16 value widened to fp32 (exact). */
static float bf16_raw(uint16_t h) {
  return u2f((uint32_t)h << 16);
}
/* vdpbf16ps's FTZ: a subnormal result becomes a zero of the same sign. */
static float ftz(float v) {
  return fabsf(v) < FLT_MIN ? copysignf(0.0f, v) : v;
}

/* ---- fault reporting ---- */

/* What is running, for the SIGSEGV handler (written before every kernel call). */
static char g_context[320];
static volatile sig_atomic_t g_quiet;

static void on_fault(int sig) {
  if (!g_quiet) {
    static const char head[] =
        "FAIL: memory fault (a read or write outside the documented range?) in ";
    ssize_t r = write(2, head, sizeof head - 1);
    r = write(2, g_context, strlen(g_context));
    r = write(2, "\n", 1);
    (void)r;
  }
  (void)sig;
  _exit(EXIT_FAULT);
}

static void install_fault_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fault;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}

/* A buffer whose data pages lie between two PROT_NONE pages. */
typedef struct guarded {
  unsigned char *base, *lo, *hi; /* mapping; first and one-past-last data byte */
  size_t len;
} guarded;

static void guarded_map(guarded *g, size_t bytes) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t data = cp_round_up(bytes ? bytes : 1, page);
  g->len = data + 2 * page;
  void *p = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  g->base = p;
  g->lo = g->base + page;
  g->hi = g->lo + data;
  if (mprotect(g->base, page, PROT_NONE) != 0 || mprotect(g->hi, page, PROT_NONE) != 0) {
    perror("mprotect");
    exit(2);
  }
}

static void guarded_unmap(guarded *g) {
  munmap(g->base, g->len);
}

/* ---- test cases ---- */

typedef enum fill_kind {
  FILL_RANDOM,   /* values in (-1, 1), a quarter of them scaled by 2^-20 .. 2^20 */
  FILL_SPECIAL,  /* random, plus NaN (x[0] among them), +-Inf and -0 in x and w */
  FILL_NEG_ZERO, /* every x is -0: every product is a zero, the sum must be +0 */
  FILL_SUBNORMAL /* every x is subnormal (bf16: w near 2^100, so only DAZ gives 0) */
} fill_kind;

static const char *fill_name(fill_kind f) {
  switch (f) {
    case FILL_RANDOM:
      return "random";
    case FILL_SPECIAL:
      return "nan-inf-negzero";
    case FILL_NEG_ZERO:
      return "x=-0";
    case FILL_SUBNORMAL:
      return "subnormal-x";
  }
  return "?";
}

typedef struct tcase {
  size_t c_in, k, cs, rs, ld; /* c_in counts panel elements (bf16 pairs for cpack 2) */
  fill_kind fill;
  uint64_t seed;
} tcase;

/* The case grid for a kernel of width nr; returns the count (at most 128). */
static size_t make_cases(size_t nr, tcase *out) {
  static const size_t c_ins[] = {1, 2, 3, 5, 16, 17}, ks[] = {1, 2, 3, 5};
  const size_t lds[3] = {nr, nr + 5, 2 * nr + 3}; /* tight, odd, wider than 2 NR */
  size_t n = 0;
  for (size_t a = 0; a < sizeof c_ins / sizeof c_ins[0]; a++)
    for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
      for (int layout = 0; layout < 4; layout++) {
        tcase t = {c_ins[a], ks[b], 0, 0, lds[n % 3], FILL_RANDOM, 1000 + n};
        const size_t k = t.k;
        switch (layout) {
          case 0: /* k = 1: the im2col GEMM strip; else a tight one-row panel */
            if (k == 1)
              t.rs = 0, t.cs = nr;
            else
              t.rs = nr + k - 1, t.cs = k * t.rs;
            break;
          case 1: /* odd strides, not multiples of any vector length */
            t.rs = (nr + k + 4) | 1, t.cs = (k * t.rs + 7) | 1;
            break;
          case 2: /* the operator's layout: cs an odd number of cache lines */
            t.rs = nr + nr / 2 + k + 1;
            t.cs = cp_round_up(k * t.rs, 16);
            if ((t.cs / 16) % 2 == 0) t.cs += 16;
            break;
          default: /* rows and channels that overlap: the formula still holds */
            t.rs = 1, t.cs = 3;
            break;
        }
        out[n++] = t;
      }
  for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
    const size_t k = ks[b], rs = (nr + k + 4) | 1, cs = (k * rs + 7) | 1;
    static const size_t special_c[] = {1, 3, 17};
    for (size_t a = 0; a < 3; a++, n++)
      out[n] = (tcase){special_c[a], k, cs, rs, nr + 5, FILL_SPECIAL, 5000 + n};
    out[n] = (tcase){5, k, cs, rs, 2 * nr + 3, FILL_NEG_ZERO, 6000 + n};
    n++;
    out[n] = (tcase){3, k, cs, rs, nr, FILL_SUBNORMAL, 7000 + n};
    n++;
  }
  return n;
}

/* Number of x elements in the documented read range of a case. */
static size_t x_count(const tcase *t, size_t nr) {
  return (t->c_in - 1) * t->cs + (t->k - 1) * t->rs + (t->k - 1) + nr;
}

/* ---- data ---- */

static float rand_f32(tu_rng *r) {
  float v = 2.0f * tu_uniform(r) - 1.0f;
  if ((tu_next(r) & 3) == 0) v = ldexpf(v, (int)(tu_next(r) % 41) - 20);
  return v;
}
static uint16_t rand_bf16(tu_rng *r) {
  return (uint16_t)(f2u(2.0f * tu_uniform(r) - 1.0f) >> 16);
}

static uint32_t rand_elem(int pair, tu_rng *r) {
  if (!pair) return f2u(rand_f32(r));
  return (uint32_t)rand_bf16(r) | (uint32_t)rand_bf16(r) << 16;
}

/* Overwrite one value of element e (a random half of a pair) with `f`. */
static void put_special(uint32_t *e, int pair, float f, tu_rng *r) {
  if (!pair) {
    *e = f2u(f);
    return;
  }
  const uint32_t h = f2u(f) >> 16;
  *e = (tu_next(r) & 1) ? (*e & 0xffffu) | h << 16 : (*e & 0xffff0000u) | h;
}

/* x (n_x elements, `used` marks the ones the sum reads) and w for a case. */
static void fill_case(const tcase *t, int pair, uint32_t *x, const unsigned char *used, size_t n_x,
                      uint32_t *w, size_t n_w) {
  tu_rng r = {t->seed};
  for (size_t i = 0; i < n_x; i++)
    x[i] = used[i] ? rand_elem(pair, &r) : (pair ? POISON_PAIR : POISON_F32);
  for (size_t i = 0; i < n_w; i++) w[i] = rand_elem(pair, &r);
  switch (t->fill) {
    case FILL_RANDOM:
      break;
    case FILL_SPECIAL: { /* a few specials at random places: most outputs stay finite */
      static const float xs[] = {NAN, INFINITY, -INFINITY, -0.0f, -0.0f, -0.0f};
      static const float ws[] = {NAN, INFINITY, -0.0f, -0.0f};
      for (size_t s = 0; s < sizeof xs / sizeof xs[0]; s++) {
        size_t i;
        do i = (size_t)(tu_next(&r) % n_x);
        while (!used[i]);
        put_special(&x[i], pair, xs[s], &r);
      }
      for (size_t s = 0; s < sizeof ws / sizeof ws[0]; s++)
        put_special(&w[tu_next(&r) % n_w], pair, ws[s], &r);
      /* x[0] feeds column 0 of every row: all of column 0 must come out NaN. */
      x[0] = pair ? 0x7FC07FC0u : f2u(NAN);
      break;
    }
    case FILL_NEG_ZERO:
      for (size_t i = 0; i < n_x; i++)
        if (used[i]) x[i] = pair ? 0x80008000u : f2u(-0.0f);
      break;
    case FILL_SUBNORMAL:
      for (size_t i = 0; i < n_x; i++) {
        if (!used[i]) continue;
        const uint32_t bits = (uint32_t)tu_next(&r);
        if (!pair) /* sign and a nonzero 23-bit fraction, exponent 0 */
          x[i] = (bits & 0x807fffffu) | 1u;
        else /* two bf16 subnormals */
          x[i] = (bits & 0x807f807fu) | 0x00010001u;
      }
      if (pair) /* large weights: a product of a subnormal and w is then a normal fp32 */
        for (size_t i = 0; i < n_w; i++) {
          const uint32_t lo = f2u(ldexpf(1.0f + tu_uniform(&r), 100)) >> 16;
          const uint32_t hi = f2u(-ldexpf(1.0f + tu_uniform(&r), 100)) >> 16;
          w[i] = lo | hi << 16;
        }
      break;
  }
}

/* ---- oracles ---- */

typedef enum check_mode { MODE_FMA, MODE_SCALAR, MODE_BF16 } check_mode;

static check_mode mode_of(const cp_sr_ukernel *u) {
  if (u->cpack == 2) return MODE_BF16;
  return u->isa == CP_ISA_SCALAR ? MODE_SCALAR : MODE_FMA;
}

typedef struct expected {
  uint32_t *fused;   /* f32: fmaf() per term; bf16: the SDM two-FMA model */
  uint32_t *unfused; /* f32: product then sum per term */
  double *exact;     /* bf16: exact sum in double (DAZ inputs) */
  double *bound;     /* bf16: bound on |kernel - exact| */
} expected;

/* The documented sum for one tile element, every way the modes need it. */
static void oracle_element(const tcase *t, int pair, int mr, const uint32_t *x, const uint32_t *w,
                           int m, int n, expected *e, size_t at) {
  const size_t k = t->k;
  if (!pair) {
    float fused = 0.0f, unfused = 0.0f;
    for (size_t c = 0; c < t->c_in; c++)
      for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) {
          const float xv = u2f(x[c * t->cs + i * t->rs + j + (size_t)n]);
          const float wv = u2f(w[((c * k + i) * k + j) * (size_t)mr + (size_t)m]);
          fused = fmaf(wv, xv, fused);
          unfused = unfused + wv * xv; /* built with -ffp-contract=off: two roundings */
        }
    e->fused[at] = f2u(fused);
    e->unfused[at] = f2u(unfused);
    return;
  }
  double s = 0.0, err = 0.0, abs_sum = 0.0;
  float model = 0.0f;
  for (size_t c = 0; c < t->c_in; c++)
    for (size_t i = 0; i < k; i++)
      for (size_t j = 0; j < k; j++) {
        const uint32_t xe = x[c * t->cs + i * t->rs + j + (size_t)n];
        const uint32_t we = w[((c * k + i) * k + j) * (size_t)mr + (size_t)m];
        const float xh = tu_bf16_daz((uint16_t)(xe >> 16)), xl = tu_bf16_daz((uint16_t)xe);
        const float wh = tu_bf16_daz((uint16_t)(we >> 16)), wl = tu_bf16_daz((uint16_t)we);
        /* The SDM model: odd (high) element first, then even (low). */
        model = ftz(fmaf(wh, xh, model));
        model = ftz(fmaf(wl, xl, model));
        /* Products of bf16 values are exact in double (and in fp32). */
        const double ph = (double)wh * xh, pl = (double)wl * xl;
        tu_pair_step(&s, &err, ph, pl);
        abs_sum += fabs(ph) + fabs(pl);
      }
  e->fused[at] = f2u(model);
  e->exact[at] = s;
  /* The double sums themselves round (relative 2^-53 per step): a margin for that. */
  e->bound[at] = err + 0x1p-40 * abs_sum;
}

/* ---- running a kernel ---- */

typedef struct stats {
  long cases, calls, failures, reports;
  long model_match, model_total;     /* bf16: elements equal to the SDM model */
  long scalar_unfused, scalar_fused; /* scalar: tiles matching each loop */
  double worst;                      /* bf16: largest |kernel - exact| / bound */
  int quiet;
} stats;

static void report(stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(stats *st, const char *fmt, ...) {
  st->failures++;
  if (st->quiet || st->reports++ >= MAX_REPORTS) return;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static int same_bits_or_both_nan(uint32_t got, uint32_t want) {
  if (isnan(u2f(want))) return isnan(u2f(got));
  return got == want;
}

/* Check one tile (at tile[m*ld + n]) against the oracle; the caller checks guards. */
static void check_values(const cp_sr_ukernel *u, const tcase *t, const char *where,
                         const float *tile, const expected *e, stats *st) {
  const int mr = u->mr, nr = u->nr;
  const check_mode mode = mode_of(u);
  if (mode == MODE_SCALAR) {
    /* A whole tile must match one of the two loops (see the top comment). */
    int unfused_ok = 1, fused_ok = 1;
    for (int m = 0; m < mr; m++)
      for (int n = 0; n < nr; n++) {
        const uint32_t got = f2u(tile[(size_t)m * t->ld + (size_t)n]);
        unfused_ok &= same_bits_or_both_nan(got, e->unfused[m * nr + n]);
        fused_ok &= same_bits_or_both_nan(got, e->fused[m * nr + n]);
      }
    if (unfused_ok) st->scalar_unfused++;
    if (fused_ok && !unfused_ok) st->scalar_fused++;
    if (unfused_ok || fused_ok) return;
  }
  for (int m = 0; m < mr; m++)
    for (int n = 0; n < nr; n++) {
      const size_t at = (size_t)(m * nr + n);
      const float got = tile[(size_t)m * t->ld + (size_t)n];
      if (mode == MODE_BF16) {
        const double want = e->exact[at], bound = e->bound[at];
        int ok;
        if (isnan(want))
          ok = isnan(got);
        else if (isinf(want))
          ok = (double)got == want;
        else {
          const double diff = fabs((double)got - want);
          ok = diff <= bound; /* false for NaN */
          if (ok && diff / bound > st->worst) st->worst = diff / bound;
        }
        st->model_total++;
        if (same_bits_or_both_nan(f2u(got), e->fused[at])) st->model_match++;
        if (!ok)
          report(st, "%s [%s]: tile[m=%d][n=%d] = %.9g, exact %.9g, allowed error %.3g", u->name,
                 where, m, n, (double)got, want, bound);
        continue;
      }
      /* MODE_FMA, or MODE_SCALAR matching neither loop: report against the primary one. */
      const uint32_t want = mode == MODE_FMA ? e->fused[at] : e->unfused[at];
      if (!same_bits_or_both_nan(f2u(got), want))
        report(st, "%s [%s]: tile[m=%d][n=%d] = %.9g (0x%08x), expected %.9g (0x%08x)%s", u->name,
               where, m, n, (double)got, f2u(got), (double)u2f(want), want,
               mode == MODE_SCALAR ? " (unfused loop; the fmaf() loop differs too)" : "");
    }
}

/* The finish of one case (see the top comment): a call that finishes its
   sums with a residual, a bias and a clamp into rows of sentinels, against
   the plain tile of the first call. */
static void check_finish(const cp_sr_ukernel *u, const tcase *t, const char *where,
                         const uint32_t *xp, const uint32_t *wp, const float *tile, stats *st) {
  static const float clamps[][2] = {{-INFINITY, INFINITY}, {0.0f, INFINITY}, {-0.25f, 0.5f}};
  const int mr = u->mr, nr = u->nr;
  const size_t ld = t->ld, n = (size_t)(mr + 2) * ld;
  tu_rng rng = {t->seed ^ 0xF1F1u};
  float *out = tu_xmalloc(n * sizeof *out), *res = tu_xmalloc(n * sizeof *res);
  float bias[CP_MAX_NR];
  for (size_t i = 0; i < n; i++) {
    out[i] = u2f(SENTINEL);
    res[i] = 2.0f * tu_uniform(&rng) - 1.0f;
  }
  res[(size_t)(t->seed % (size_t)mr) * ld + t->seed % (size_t)nr] = NAN; /* NaN in, NaN out */
  for (int m = 0; m < mr; m++) bias[m] = tu_uniform(&rng) - 0.5f;
  const float *lohi = clamps[t->seed % 3];
  /* every row count over the grid, and sometimes no residual or no bias */
  const cp_sr_finish f = {t->seed % 5 == 1 ? NULL : bias, t->seed % 4 == 2 ? NULL : res, lohi[0],
                          lohi[1], 1 + (int)(t->seed % (uint64_t)mr)};
  u->fn(xp, t->cs, t->rs, t->c_in, t->k, (const float *)(const void *)wp, out, ld, 0, &f);
  st->calls++;
  for (int m = 0; m < mr; m++)
    for (size_t c = 0; c < ld; c++) {
      const uint32_t got = f2u(out[(size_t)m * ld + c]);
      if (m >= f.rows || c >= (size_t)nr) {
        if (got != SENTINEL) {
          report(st, "%s [%s]: the finish (%d of %d rows) wrote row %d, column %zu", u->name, where,
                 f.rows, mr, m, c);
          goto done;
        }
        continue;
      }
      float v = tile[(size_t)m * ld + c];
      if (f.res != NULL) v += res[(size_t)m * ld + c];
      if (f.bias != NULL) v += bias[m];
      if (v < f.lo) v = f.lo;
      if (v > f.hi) v = f.hi;
      if (!same_bits_or_both_nan(got, f2u(v))) {
        report(st,
               "%s [%s]: finished tile[m=%d][n=%zu] = %.9g (0x%08x), expected clamp((sum + res) + "
               "bias) = %.9g (0x%08x)",
               u->name, where, m, c, (double)u2f(got), got, (double)v, f2u(v));
        goto done;
      }
    }
done:
  free(out), free(res);
}

/* Run a kernel on one case: two calls (x and w ending at a guard page, then
   starting right after one), each checked for values, writes and reads. */
static void run_case(const cp_sr_ukernel *u, const tcase *t, stats *st) {
  const int pair = u->cpack == 2, mr = u->mr, nr = u->nr;
  const size_t n_x = x_count(t, (size_t)nr), n_w = t->c_in * t->k * t->k * (size_t)mr;
  unsigned char *used = tu_xmalloc(n_x);
  uint32_t *x = tu_xmalloc(n_x * sizeof *x), *w = tu_xmalloc(n_w * sizeof *w);
  memset(used, 0, n_x);
  for (size_t c = 0; c < t->c_in; c++)
    for (size_t i = 0; i < t->k; i++)
      for (size_t j = 0; j < t->k; j++)
        for (size_t n = 0; n < (size_t)nr; n++) used[c * t->cs + i * t->rs + j + n] = 1;
  fill_case(t, pair, x, used, n_x, w, n_w);

  const size_t tile_n = (size_t)(mr * nr);
  expected e = {tu_xmalloc(tile_n * 4), tu_xmalloc(tile_n * 4), tu_xmalloc(tile_n * 8),
                tu_xmalloc(tile_n * 8)};
  for (int m = 0; m < mr; m++)
    for (int n = 0; n < nr; n++) oracle_element(t, pair, mr, x, w, m, n, &e, (size_t)(m * nr + n));

  /* The tile buffer: two guard rows above, two below, 3 guard elements ahead. */
  const size_t ld = t->ld, buf_n = ((size_t)mr + 4) * ld + 8, tile_at = 2 * ld + 3;
  uint32_t *buf = tu_xmalloc(buf_n * sizeof *buf);

  guarded gx, gw;
  guarded_map(&gx, n_x * sizeof *x);
  guarded_map(&gw, n_w * sizeof *w);
  for (int placement = 0; placement < 2; placement++) {
    const char *place =
        placement == 0 ? "x and w end at a guard page" : "x and w start after a guard page";
    uint32_t *xp = placement == 0 ? (uint32_t *)(void *)gx.hi - n_x : (uint32_t *)(void *)gx.lo;
    uint32_t *wp = placement == 0 ? (uint32_t *)(void *)gw.hi - n_w : (uint32_t *)(void *)gw.lo;
    memcpy(xp, x, n_x * sizeof *x);
    memcpy(wp, w, n_w * sizeof *w);
    for (size_t i = 0; i < buf_n; i++) buf[i] = SENTINEL;
    char where[200];
    snprintf(where, sizeof where, "c_in=%zu k=%zu cs=%zu rs=%zu ld=%zu %s, %s", t->c_in, t->k,
             t->cs, t->rs, t->ld, fill_name(t->fill), place);
    snprintf(g_context, sizeof g_context, "%s [%s]", u->name, where);
    float *tile = (float *)(void *)(buf + tile_at);
    u->fn(xp, t->cs, t->rs, t->c_in, t->k, (const float *)(const void *)wp, tile, ld, 0, NULL);
    st->calls++;
    check_values(u, t, where, tile, &e, st);
    /* The same contraction in two calls, the second continuing the first's
       sums (a blocked GEMM's passes): the same bits. */
    if (t->c_in >= 2) {
      const size_t c1 = t->c_in / 2, taps = t->k * t->k;
      float *part = tu_xmalloc((size_t)mr * ld * sizeof *part);
      u->fn(xp, t->cs, t->rs, c1, t->k, (const float *)(const void *)wp, part, ld, 0, NULL);
      u->fn(xp + c1 * t->cs, t->cs, t->rs, t->c_in - c1, t->k,
            (const float *)(const void *)(wp + c1 * taps * (size_t)mr), part, ld, 1, NULL);
      st->calls += 2;
      for (int m = 0; m < mr; m++)
        if (memcmp(part + (size_t)m * ld, tile + (size_t)m * ld, (size_t)nr * sizeof *part) != 0) {
          report(st,
                 "%s [%s]: %zu + %zu channel steps continued (accumulate = 1) differ from one "
                 "call, row %d",
                 u->name, where, c1, t->c_in - c1, m);
          break;
        }
      free(part);
    }
    check_finish(u, t, where, xp, wp, tile, st);
    /* Every element outside the MR x NR tile must still hold the sentinel. */
    for (size_t i = 0; i < buf_n; i++) {
      const int inside =
          i >= tile_at && (i - tile_at) / ld < (size_t)mr && (i - tile_at) % ld < (size_t)nr;
      if (!inside && buf[i] != SENTINEL) {
        /* Row and column relative to the tile's first element (floor division). */
        const long off = (long)i - (long)tile_at, lld = (long)ld;
        const long row = off >= 0 ? off / lld : -((-off + lld - 1) / lld), col = off - row * lld;
        report(st, "%s [%s]: wrote outside the tile: row %ld, column %ld (ld %zu)", u->name, where,
               row, col, ld);
        break;
      }
    }
  }
  guarded_unmap(&gx);
  guarded_unmap(&gw);
  st->cases++;
  free(buf);
  free(e.fused), free(e.unfused), free(e.exact), free(e.bound);
  free(used), free(x), free(w);
}

/* Every case for one kernel; returns the failure count. */
static long run_kernel(const cp_sr_ukernel *u, stats *st) {
  tcase cases[128];
  const size_t n = make_cases((size_t)u->nr, cases);
  for (size_t i = 0; i < n; i++) run_case(u, &cases[i], st);
  return st->failures;
}

static const cp_sr_ukernel *find_kernel(const char *name) {
  size_t count;
  const cp_sr_ukernel *list = cp_sr_ukernel_list(&count);
  for (size_t i = 0; i < count; i++)
    if (strcmp(list[i].name, name) == 0) return &list[i];
  return NULL;
}

/* Test one listed kernel: 0 pass, 1 fail, EXIT_SKIP when the CPU lacks its ISA. */
static int test_kernel(const char *name) {
  const cp_sr_ukernel *u = find_kernel(name);
  if (u == NULL) {
    printf(
        "FAIL %s: no kernel of that name in cp_sr_ukernel_list() (the name CMake built from "
        "sr-ukernels.inc does not match ukernel.c's)\n",
        name);
    return 1;
  }
  const cp_cpu *cpu = cp_cpu_get();
  if (u->isa > cpu->detected) {
    printf("SKIP %s: this CPU lacks %s (it supports up to %s)\n", name, cp_isa_name(u->isa),
           cp_isa_name(cpu->detected));
    return EXIT_SKIP;
  }
  stats st = {0};
  run_kernel(u, &st);
  const check_mode mode = mode_of(u);
  if (st.failures) {
    printf("FAIL %s: %ld problem(s) in %ld calls (ran the %s kernel; CPU supports up to %s)\n",
           name, st.failures, st.calls, cp_isa_name(u->isa), cp_isa_name(cpu->detected));
    return 1;
  }
  printf(
      "PASS %s: %ld cases, %ld calls; ran the %s kernel (MR %d, NR %d) on a CPU that supports "
      "up to %s; ",
      name, st.cases, st.calls, cp_isa_name(u->isa), u->mr, u->nr, cp_isa_name(cpu->detected));
  if (mode == MODE_FMA)
    printf("every tile bit-identical to fmaf() in (c, i, j) order\n");
  else if (mode == MODE_SCALAR)
    printf("%ld tiles bit-identical to a product-then-sum loop, %ld to fmaf() in (c, i, j) order\n",
           st.scalar_unfused, st.scalar_fused);
  else
    printf(
        "every element within the rounding bound of the exact sum (largest error %.3g of its "
        "bound); %ld of %ld elements bit-identical to the SDM two-FMA model\n",
        st.worst, st.model_match, st.model_total);
  return 0;
}

/* ---- list, select and tail ---- */

static const char *dtype_tag(convpool_dtype d) {
  return d == CONVPOOL_FLOAT32 ? "f32" : d == CONVPOOL_BFLOAT16 ? "bf16" : "f16";
}

static int test_dispatch(int argc, char **argv) {
  size_t count;
  const cp_sr_ukernel *list = cp_sr_ukernel_list(&count);
  int bad = 0;
#define CHECK(cond, ...)         \
  do {                           \
    if (!(cond)) {               \
      printf("FAIL dispatch: "); \
      printf(__VA_ARGS__);       \
      printf("\n");              \
      bad++;                     \
    }                            \
  } while (0)

  /* The list is the .inc, line for line (CMake parsed the same file). */
  CHECK(count == (size_t)argc, "cp_sr_ukernel_list has %zu kernels, sr-ukernels.inc has %d lines",
        count, argc);
  for (size_t i = 0; i < count; i++) {
    const cp_sr_ukernel *u = &list[i];
    char want[96];
    snprintf(want, sizeof want, "%s-sr-%dx%d-%s", dtype_tag(u->dtype), u->mr, u->nr,
             cp_isa_name(u->isa));
    if (i < (size_t)argc)
      CHECK(strcmp(u->name, argv[i]) == 0, "kernel %zu is %s, the .inc line gives %s", i, u->name,
            argv[i]);
    CHECK(strcmp(u->name, want) == 0,
          "kernel %s: its fields say %s (the isa tag must be "
          "cp_isa_name of its ISA)",
          u->name, want);
    CHECK(u->mr >= 1 && u->nr >= 1 && u->nr <= CP_MAX_NR, "kernel %s: MR %d / NR %d out of range",
          u->name, u->mr, u->nr);
    CHECK(u->cpack == (u->dtype == CONVPOOL_BFLOAT16 ? 2 : 1), "kernel %s: cpack %d", u->name,
          u->cpack);
    CHECK(u->fn != NULL, "kernel %s: no function", u->name);
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(list[j].name, u->name) != 0, "kernel %s listed twice", u->name);
  }

  /* select: the first listed kernel of the highest ISA not above the cap. */
  static const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  for (size_t d = 0; d < 3; d++)
    for (int isa = CP_ISA_SCALAR; isa <= CP_ISA_AVX512_BF16; isa++) {
      const cp_sr_ukernel *want = NULL;
      for (size_t i = 0; i < count; i++)
        if (list[i].dtype == dtypes[d] && (int)list[i].isa <= isa &&
            (want == NULL || list[i].isa > want->isa))
          want = &list[i];
      const cp_sr_ukernel *got = cp_sr_ukernel_select(dtypes[d], (cp_isa)isa);
      CHECK(got == want, "select(%s, %s) = %s, expected %s", dtype_tag(dtypes[d]),
            cp_isa_name((cp_isa)isa), got ? got->name : "NULL", want ? want->name : "NULL");
      printf("select(%-4s, %-10s) = %s\n", dtype_tag(dtypes[d]), cp_isa_name((cp_isa)isa),
             got ? got->name : "NULL");
    }

  /* tail: for every main kernel and every remainder, the narrowest kernel of
     its family (dtype, ISA, NR) that covers the remainder. */
  for (size_t i = 0; i < count; i++) {
    const cp_sr_ukernel *mk = &list[i];
    if (cp_sr_ukernel_select(mk->dtype, mk->isa) != mk) continue; /* not a main kernel */
    printf("tail(%s):", mk->name);
    for (int r = -1; r <= mk->mr; r++) {
      const cp_sr_ukernel *got = cp_sr_ukernel_tail(mk, r), *want = mk;
      if (r > 0)
        for (size_t j = 0; j < count; j++) {
          const cp_sr_ukernel *v = &list[j];
          if (v->dtype == mk->dtype && v->isa == mk->isa && v->nr == mk->nr && v->mr >= r &&
              v->mr < want->mr)
            want = v;
        }
      CHECK(got == want, "tail(%s, %d) = %s, expected %s", mk->name, r, got ? got->name : "NULL",
            want->name);
      if (got == NULL) continue;
      CHECK(got->dtype == mk->dtype && got->isa == mk->isa && got->nr == mk->nr,
            "tail(%s, %d) = %s is not of the main kernel's family", mk->name, r, got->name);
      CHECK(r <= 0 || got->mr >= r, "tail(%s, %d) = %s does not cover the remainder", mk->name, r,
            got->name);
      if (r >= 1 && r < mk->mr) printf(" %d->%dx%d", r, got->mr, got->nr);
    }
    printf("\n");
  }
#undef CHECK
  if (bad) return 1;
  printf("PASS dispatch: %zu kernels match sr-ukernels.inc; select and tail as documented\n",
         count);
  return 0;
}

/* ---- self-test: software models of a kernel, correct and broken ---- */

enum flaw {
  FLAW_NONE,
  FLAW_MULADD,      /* f32: product then sum instead of one FMA */
  FLAW_WRITE_PAST,  /* writes one element past the end of the last tile row */
  FLAW_ACCUMULATE,  /* adds to the tile's old contents */
  FLAW_NO_CONTINUE, /* starts from zero when asked to continue the tile's sums */
  FLAW_READ_PAST,   /* reads x one element past the documented range */
  FLAW_READ_BEFORE, /* reads x one element before x */
  FLAW_W_PAST,      /* reads one element past the packed weights */
  FLAW_PAIR_FIRST,  /* bf16: sums the pair's products (one rounding) before adding: legal */
  FLAW_NO_HIGH,     /* bf16: ignores the high half of each pair */
  FLAW_NO_DAZ,      /* bf16: uses subnormal bf16 inputs as they are */
  FLAW_BIAS_FIRST,  /* finish: adds the bias before the residual */
  FLAW_ALL_ROWS,    /* finish: stores every row, not only finish->rows */
  FLAW_NO_CLAMP     /* finish: ignores the clamp */
};
static int g_flaw;
enum { MODEL_MR = 4, MODEL_NR = 16 };

static void model_tail_flaws(const uint32_t *x, size_t cs, size_t rs, size_t c_in, size_t k,
                             const uint32_t *w, float *tile, size_t ld) {
  volatile uint32_t sink;
  if (g_flaw == FLAW_WRITE_PAST) tile[(MODEL_MR - 1) * ld + MODEL_NR] = 0.0f;
  if (g_flaw == FLAW_READ_PAST) sink = x[(c_in - 1) * cs + (k - 1) * rs + (k - 1) + MODEL_NR];
  if (g_flaw == FLAW_READ_BEFORE) sink = *(const volatile uint32_t *)(uintptr_t)((uintptr_t)x - 4);
  if (g_flaw == FLAW_W_PAST) sink = w[c_in * k * k * MODEL_MR];
  (void)sink;
}

/* A model's sum of row m, column n to the tile: as it is, or finished. */
static void model_store(float *tile, size_t ld, size_t m, size_t n, float acc,
                        const cp_sr_finish *f) {
  if (f == NULL) {
    tile[m * ld + n] = acc;
    return;
  }
  if ((int)m >= f->rows && g_flaw != FLAW_ALL_ROWS) return;
  const float r = f->res != NULL ? f->res[m * ld + n] : 0.0f;
  const float b = f->bias != NULL && (int)m < f->rows ? f->bias[m] : 0.0f;
  if (g_flaw == FLAW_BIAS_FIRST) {
    if (f->bias != NULL) acc += b;
    if (f->res != NULL) acc += r;
  } else {
    if (f->res != NULL) acc += r;
    if (f->bias != NULL) acc += b;
  }
  if (g_flaw != FLAW_NO_CLAMP) {
    if (acc < f->lo) acc = f->lo;
    if (acc > f->hi) acc = f->hi;
  }
  tile[m * ld + n] = acc;
}

static void model_f32(const void *xv, size_t cs, size_t rs, size_t c_in, size_t k, const float *wf,
                      float *tile, size_t ld, int accumulate, const cp_sr_finish *finish) {
  const uint32_t *x = xv, *w = (const uint32_t *)(const void *)wf;
  for (size_t m = 0; m < MODEL_MR; m++)
    for (size_t n = 0; n < MODEL_NR; n++) {
      const int from_tile = g_flaw == FLAW_ACCUMULATE || (accumulate && g_flaw != FLAW_NO_CONTINUE);
      float acc = from_tile ? tile[m * ld + n] : 0.0f;
      for (size_t c = 0; c < c_in; c++)
        for (size_t i = 0; i < k; i++)
          for (size_t j = 0; j < k; j++) {
            const float xe = u2f(x[c * cs + i * rs + j + n]);
            const float we = u2f(w[((c * k + i) * k + j) * MODEL_MR + m]);
            acc = g_flaw == FLAW_MULADD ? acc + we * xe : fmaf(we, xe, acc);
          }
      model_store(tile, ld, m, n, acc, finish);
    }
  model_tail_flaws(x, cs, rs, c_in, k, w, tile, ld);
}

static void model_bf16(const void *xv, size_t cs, size_t rs, size_t c_in, size_t k, const float *wf,
                       float *tile, size_t ld, int accumulate, const cp_sr_finish *finish) {
  const uint32_t *x = xv, *w = (const uint32_t *)(const void *)wf;
  float (*in)(uint16_t) = g_flaw == FLAW_NO_DAZ ? bf16_raw : tu_bf16_daz;
  for (size_t m = 0; m < MODEL_MR; m++)
    for (size_t n = 0; n < MODEL_NR; n++) {
      float acc = accumulate && g_flaw != FLAW_NO_CONTINUE ? tile[m * ld + n] : 0.0f;
      for (size_t c = 0; c < c_in; c++)
        for (size_t i = 0; i < k; i++)
          for (size_t j = 0; j < k; j++) {
            const uint32_t xe = x[c * cs + i * rs + j + n];
            const uint32_t we = w[((c * k + i) * k + j) * MODEL_MR + m];
            const float xh = in((uint16_t)(xe >> 16)), xl = in((uint16_t)xe);
            const float wh = in((uint16_t)(we >> 16)), wl = in((uint16_t)we);
            if (g_flaw == FLAW_PAIR_FIRST)
              acc = ftz(acc + ftz((float)((double)wh * xh + (double)wl * xl)));
            else if (g_flaw == FLAW_NO_HIGH)
              acc = ftz(fmaf(wl, xl, acc));
            else
              acc = ftz(fmaf(wl, xl, ftz(fmaf(wh, xh, acc))));
          }
      model_store(tile, ld, m, n, acc, finish);
    }
  model_tail_flaws(x, cs, rs, c_in, k, w, tile, ld);
}

static int self_test(void) {
  enum { PASSES = 0, FAILS = 1, FAULTS = EXIT_FAULT };
  static const struct control {
    const char *what;
    int pair, isa, flaw, expect;
  } controls[] = {
      {"f32 fmaf() model, checked as a vector kernel", 0, CP_ISA_AVX2, FLAW_NONE, PASSES},
      {"f32 product-then-sum model, checked as a vector kernel", 0, CP_ISA_AVX2, FLAW_MULADD,
       FAILS},
      {"f32 product-then-sum model, checked as the scalar kernel", 0, CP_ISA_SCALAR, FLAW_MULADD,
       PASSES},
      {"f32 fmaf() model, checked as the scalar kernel", 0, CP_ISA_SCALAR, FLAW_NONE, PASSES},
      {"writes one element past a tile row", 0, CP_ISA_AVX2, FLAW_WRITE_PAST, FAILS},
      {"adds to the tile's old contents", 0, CP_ISA_AVX2, FLAW_ACCUMULATE, FAILS},
      {"starts from zero when asked to continue", 0, CP_ISA_AVX2, FLAW_NO_CONTINUE, FAILS},
      {"reads x one element past its range", 0, CP_ISA_AVX2, FLAW_READ_PAST, FAULTS},
      {"reads x one element before x", 0, CP_ISA_AVX2, FLAW_READ_BEFORE, FAULTS},
      {"reads one element past w", 0, CP_ISA_AVX2, FLAW_W_PAST, FAULTS},
      {"finish adds the bias before the residual", 0, CP_ISA_AVX2, FLAW_BIAS_FIRST, FAILS},
      {"finish stores rows past finish->rows", 0, CP_ISA_AVX2, FLAW_ALL_ROWS, FAILS},
      {"finish ignores the clamp", 0, CP_ISA_AVX2, FLAW_NO_CLAMP, FAILS},
      {"bf16 SDM model (two FMAs, DAZ, FTZ)", 1, CP_ISA_AVX512_BF16, FLAW_NONE, PASSES},
      {"bf16 model summing each pair first", 1, CP_ISA_AVX512_BF16, FLAW_PAIR_FIRST, PASSES},
      {"bf16 model ignoring the high half", 1, CP_ISA_AVX512_BF16, FLAW_NO_HIGH, FAILS},
      {"bf16 model without DAZ", 1, CP_ISA_AVX512_BF16, FLAW_NO_DAZ, FAILS},
      {"bf16 model writing past a tile row", 1, CP_ISA_AVX512_BF16, FLAW_WRITE_PAST, FAILS},
  };
  static const char *outcome[] = {"passes", "fails", "?", "faults"};
  int bad = 0;
  for (size_t i = 0; i < sizeof controls / sizeof controls[0]; i++) {
    const struct control *c = &controls[i];
    const cp_sr_ukernel model = {c->pair ? "model-bf16-sr-4x16" : "model-f32-sr-4x16",
                                 c->pair ? CONVPOOL_BFLOAT16 : CONVPOOL_FLOAT32,
                                 (cp_isa)c->isa,
                                 MODEL_MR,
                                 MODEL_NR,
                                 c->pair ? 2 : 1,
                                 c->pair ? model_bf16 : model_f32};
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) { /* the child runs the model through every case, silently */
      g_quiet = 1;
      g_flaw = c->flaw;
      stats st = {0};
      st.quiet = 1;
      const long failures = run_kernel(&model, &st);
      if (c->pair && !failures) /* how close a legal rounding comes to the bound */
        printf(
            "     %s: largest error %.3g of its bound; %ld of %ld elements equal the SDM model\n",
            c->what, st.worst, st.model_match, st.model_total);
      _exit(failures ? FAILS : PASSES);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const int got = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const int ok = got == c->expect;
    printf("%s self-test: %s: %s (expected: %s)\n", ok ? "ok  " : "FAIL", c->what,
           got >= 0 && got <= 3 ? outcome[got] : "died", outcome[c->expect]);
    bad += !ok;
  }
  if (bad) return 1;
  printf("PASS self-test: the checks pass correct models and catch each broken one\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  install_fault_handler();
  if (argc >= 2 && strcmp(argv[1], "--dispatch") == 0) return test_dispatch(argc - 2, argv + 2);
  if (argc == 2 && strcmp(argv[1], "--self-test") == 0) return self_test();
  if (argc == 2 && (strcmp(argv[1], "--list") == 0 || strcmp(argv[1], "--all") == 0)) {
    const int all = strcmp(argv[1], "--all") == 0;
    size_t count;
    const cp_sr_ukernel *list = cp_sr_ukernel_list(&count);
    int failed = 0;
    for (size_t i = 0; i < count; i++) {
      if (all)
        failed |= test_kernel(list[i].name) == 1; /* a skip is not a failure */
      else
        printf("%s\n", list[i].name);
    }
    return failed;
  }
  if (argc == 2 && argv[1][0] != '-') return test_kernel(argv[1]);
  fprintf(stderr,
          "usage: %s NAME | --all | --list | --dispatch NAME... | --self-test\n"
          "  NAME: a kernel of src/kernels/sr-ukernels.inc, e.g. f32-sr-6x16-avx2\n",
          argv[0]);
  return 2;
}
