/* Small helpers shared by the C tests. */
#ifndef CONVPOOL_TESTUTIL_H
#define CONVPOOL_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "convpool.h"
#include "half.h"

typedef struct tu_rng {
  uint64_t state;
} tu_rng;

/* splitmix64 */
static inline uint64_t tu_next(tu_rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 bits. */
static inline float tu_uniform(tu_rng *r) {
  return (float)(tu_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Store v as element i of a dtype tensor (16-bit types round to nearest even). */
static inline void tu_set(convpool_dtype dtype, void *data, size_t i, float v) {
  if (dtype == CONVPOOL_FLOAT16)
    ((uint16_t *)data)[i] = cp_float_to_half(v);
  else if (dtype == CONVPOOL_BFLOAT16)
    ((uint16_t *)data)[i] = cp_float_to_bf16(v);
  else
    ((float *)data)[i] = v;
}

/* A bf16 value (its 16 bits) as fp32, a subnormal read as zero (the DAZ of
   vdpbf16ps). */
static inline float tu_bf16_daz(uint16_t h) {
  return cp_bf16_to_float((h & 0x7f80u) == 0 ? (uint16_t)(h & 0x8000u) : h);
}

/*
 * One vdpbf16ps step of an fp32 sum, modelled in double: s, the exact sum so
 * far, takes the pair's two products ph and pl (bf16 products: exact), and
 * err, a bound on |fp32 sum - s|, grows by what the step's at most two
 * roundings to nearest (u = 2^-24 each, in whatever order the instruction
 * adds) and a flushed subnormal (2^-126 each) can add: the largest value any
 * rounding of the step can see is the partial sums' magnitude plus err.
 */
static inline void tu_pair_step(double *s, double *err, double ph, double pl) {
  const double u = 0x1p-24, tiny = 0x1p-126;
  double big = fabs(*s + ph);
  big = fmax(big, fabs(*s + pl));
  big = fmax(big, fabs(ph + pl));
  big = fmax(big, fabs(*s + ph + pl));
  *err += u * (2.0 + u) * (big + *err) + 4.0 * tiny;
  *s += ph + pl;
}

static inline void *tu_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "test: out of memory (%zu bytes)\n", n);
    exit(2);
  }
  return p;
}

#endif
