/*
 * Measured FMA peak and cpuid facts for the CLI's --profile and the benchmarks.
 *
 * Each peak variant is a loop over many independent accumulator chains that
 * lives entirely in registers: no loads or stores inside the loop, so the
 * only limit is the number of FMA-type instructions the core retires per
 * cycle. The chain count covers latency x throughput with room to spare
 * (e.g. 4-cycle FMA latency x 2 pipes needs 8; we use 24 zmm / 12 ymm).
 * The loops are compiled with per-function target attributes, so this file
 * needs no -m flags and the rest of the program stays baseline x86-64;
 * cpuid/xgetbv are checked before any variant runs.
 */
#define _GNU_SOURCE
#include "peak.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- cpuid ---- */

static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

void peak_cpu_get_features(peak_cpu_features *f) {
  unsigned a, b, c, d;
  memset(f, 0, sizeof *f);
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  const int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return;
  const uint64_t xcr0 = read_xcr0();
  const int os_ymm = (xcr0 & 0x6) == 0x6;   /* SSE + AVX state */
  const int os_zmm = (xcr0 & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
  if (__get_cpuid_max(0, 0) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  const int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1;
  f->avx2_fma = avx2 && fma && os_ymm;
  f->avx512f = avx512f && os_zmm;
  __cpuid_count(7, 1, a, b, c, d);
  f->avx512bf16 = f->avx512f && ((a >> 5) & 1);
}

void peak_cpu_brand(char *text, int capacity) {
  unsigned regs[12];
  if (capacity <= 0) return;
  if ((unsigned)__get_cpuid_max(0x80000000u, 0) < 0x80000004u) {
    strncpy(text, "unknown", (size_t)capacity - 1);
    text[capacity - 1] = '\0';
    return;
  }
  for (unsigned i = 0; i < 3; ++i)
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                &regs[4 * i + 3]);
  char raw[49];
  memcpy(raw, regs, 48);
  raw[48] = '\0';
  /* Trim leading/trailing blanks and collapse runs of spaces. */
  int n = 0;
  for (const char *p = raw; *p && n < capacity - 1; ++p) {
    if (*p == ' ' && (n == 0 || text[n - 1] == ' ')) continue;
    text[n++] = *p;
  }
  while (n > 0 && text[n - 1] == ' ') --n;
  text[n] = '\0';
}

const char *peak_name(peak_kind kind) {
  switch (kind) {
    case PEAK_FP32_AVX512:
      return "fp32 AVX-512 FMA";
    case PEAK_FP32_AVX2:
      return "fp32 AVX2 FMA";
    case PEAK_BF16_AVX512:
      return "bf16 AVX512-BF16 dot";
    default:
      return "unknown";
  }
}

/* ---- register-only loops ---- */

/* Repeat a statement for accumulator indices 0..11 / 0..23. */
#define REP12(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7) S(8) S(9) S(10) S(11)
#define REP24(S) REP12(S) S(12) S(13) S(14) S(15) S(16) S(17) S(18) S(19) S(20) S(21) S(22) S(23)

/* Flop per loop iteration of each variant (instructions x flop each). */
static const double flop_per_iter[PEAK_COUNT] = {
    24.0 * 2 * 16, /* 24 zmm FMAs, 16 lanes */
    12.0 * 2 * 8,  /* 12 ymm FMAs, 8 lanes */
    24.0 * 4 * 16, /* 24 vdpbf16ps, 16 lanes x 2 products x (mul + add) */
};

/* acc = acc * m + c converges to c / (1 - m) = 1: no overflow, no denormals. */
__attribute__((target("avx512f"), noinline)) static float loop_fp32_avx512(uint64_t n) {
  const volatile float mv = 0.999999f, cv = 1e-6f;
  const __m512 m = _mm512_set1_ps(mv), c = _mm512_set1_ps(cv);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + (float)(i)*1e-3f);
  REP24(DECL)
#undef DECL
  for (uint64_t it = 0; it < n; ++it) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    REP24(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
  REP24(SUM)
#undef SUM
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) static float loop_fp32_avx2(uint64_t n) {
  const volatile float mv = 0.999999f, cv = 1e-6f;
  const __m256 m = _mm256_set1_ps(mv), c = _mm256_set1_ps(cv);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (float)(i)*1e-3f);
  REP12(DECL)
#undef DECL
  for (uint64_t it = 0; it < n; ++it) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    REP12(STEP)
#undef STEP
  }
  __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, a##i);
  REP12(SUM)
#undef SUM
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* Each vdpbf16ps adds 2 * 1e-3 * 1e-3 per lane: stays far from overflow. */
__attribute__((target("avx512f,avx512bf16"), noinline)) static float loop_bf16_avx512(uint64_t n) {
  const volatile float xv = 1e-3f;
  const __m512 x = _mm512_set1_ps(xv);
  const __m512bh p = _mm512_cvtne2ps_pbh(x, x), q = _mm512_cvtne2ps_pbh(x, x);
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i));
  REP24(DECL)
#undef DECL
  for (uint64_t it = 0; it < n; ++it) {
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, p, q);
    REP24(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
  REP24(SUM)
#undef SUM
  return _mm512_reduce_add_ps(s);
}

/* ---- threads ---- */

typedef struct peak_thread {
  pthread_t thread;
  peak_kind kind;
  double seconds;
  volatile int *go;  /* 0: wait, 1: run, -1: give up */
  double flop_per_s; /* result */
  float sink;        /* keeps the loop's result alive */
} peak_thread;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float run_chunk(peak_kind kind, uint64_t n) {
  switch (kind) {
    case PEAK_FP32_AVX512:
      return loop_fp32_avx512(n);
    case PEAK_FP32_AVX2:
      return loop_fp32_avx2(n);
    case PEAK_BF16_AVX512:
      return loop_bf16_avx512(n);
    default:
      return 0.0f;
  }
}

static void *peak_thread_main(void *arg) {
  peak_thread *t = (peak_thread *)arg;
  const uint64_t chunk = 1u << 15; /* ~0.1-0.3 ms per chunk */
  run_chunk(t->kind, chunk);       /* wake the vector units before timing */
  int go;
  while ((go = __atomic_load_n(t->go, __ATOMIC_ACQUIRE)) == 0) _mm_pause();
  if (go < 0) return NULL;
  uint64_t iters = 0;
  float sink = 0.0f;
  const double t0 = now_s();
  double t1 = t0;
  do {
    sink += run_chunk(t->kind, chunk);
    iters += chunk;
    t1 = now_s();
  } while (t1 - t0 < t->seconds);
  t->sink = sink;
  t->flop_per_s = (double)iters * flop_per_iter[t->kind] / (t1 - t0);
  return NULL;
}

double peak_fma(peak_kind kind, int threads, double seconds, int trials) {
  peak_cpu_features f;
  peak_cpu_get_features(&f);
  const int supported = kind == PEAK_FP32_AVX512   ? f.avx512f
                        : kind == PEAK_FP32_AVX2   ? f.avx2_fma
                        : kind == PEAK_BF16_AVX512 ? f.avx512bf16
                                                   : 0;
  if (!supported || threads < 1 || threads > 1024) return 0.0;
  peak_thread t[1024];
  double best = 0.0;
  for (int trial = 0; trial < trials; ++trial) {
    /* All threads start timing together once every one of them exists. */
    volatile int go = 0;
    int started = 0;
    for (int i = 0; i < threads; ++i) {
      t[i].kind = kind;
      t[i].seconds = seconds;
      t[i].go = &go;
      t[i].flop_per_s = 0.0;
      if (pthread_create(&t[i].thread, NULL, peak_thread_main, &t[i]) != 0) break;
      ++started;
    }
    __atomic_store_n(&go, started == threads ? 1 : -1, __ATOMIC_RELEASE);
    double total = 0.0;
    for (int i = 0; i < started; ++i) {
      pthread_join(t[i].thread, NULL);
      total += t[i].flop_per_s;
    }
    if (started != threads) return 0.0;
    if (total > best) best = total;
  }
  return best * 1e-9;
}
