/*
 * Machine facts for the CLI's --profile and the benchmark: cpuid feature checks,
 * the CPU brand string and a measured FMA peak (register-only loops run on
 * several threads at once).
 */
#ifndef CONVPOOL_PEAK_H
#define CONVPOOL_PEAK_H

#ifdef __cplusplus
extern "C" {
#endif

/** What cpuid and xgetbv say the CPU and the OS support. */
typedef struct peak_cpu_features {
  int avx2_fma;   /* AVX2 + FMA3 and the OS saves YMM state */
  int avx512f;    /* AVX-512F and the OS saves ZMM and opmask state */
  int avx512bf16; /* AVX512_BF16 (vdpbf16ps) on top of avx512f */
} peak_cpu_features;

/** Peak loop variants. */
typedef enum peak_kind {
  PEAK_FP32_AVX512 = 0, /* vfmadd231ps zmm: 32 flop per instruction */
  PEAK_FP32_AVX2 = 1,   /* vfmadd231ps ymm: 16 flop per instruction */
  PEAK_BF16_AVX512 = 2, /* vdpbf16ps zmm: 64 flop per instruction */
  PEAK_COUNT = 3
} peak_kind;

/** Fill features from cpuid leaf 1 / 7 and xgetbv. */
void peak_cpu_get_features(peak_cpu_features *features);

/** The cpuid brand string (leaves 0x80000002..4), trimmed; "unknown" if absent. */
void peak_cpu_brand(char *text, int capacity);

/** Short name of a peak variant ("fp32 AVX-512", ...). */
const char *peak_name(peak_kind kind);

/**
 * Measure the FMA peak of one variant: `threads` pthreads run the
 * register-only loop at the same time for about `seconds` each; the best of
 * `trials` runs is returned in GFLOP/s (summed over threads). Returns 0 if the
 * CPU lacks the instructions (checked with cpuid first) or threads fail.
 */
double peak_fma(peak_kind kind, int threads, double seconds, int trials);

#ifdef __cplusplus
}
#endif

#endif
