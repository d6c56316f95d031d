/* f32 shift-reduce microkernel, 6 channels x 16 positions, AVX2 + FMA (16 ymm registers:
   12 accumulators, 2 input vectors, 1 broadcast). */
#include <stdint.h>

#include <immintrin.h>

#include "../vec-avx2.h"
#include "ukernel.h"

#define CP_FN cp_f32_sr_ukernel_6x16__avx2
#define CP_MR 6
#define CP_NRV 2
#define CP_ELEM float
#define CP_ACC __m256
#define CP_LANES 8
#define CP_ZERO() _mm256_setzero_ps()
#define CP_STORE(p, v) _mm256_storeu_ps(p, v)
#define CP_LOADACC(p) _mm256_loadu_ps(p)
#define CP_XVEC __m256
#define CP_LOAD(p) _mm256_loadu_ps(p)
#define CP_BVEC __m256
#define CP_BCAST(p) _mm256_broadcast_ss(p)
#define CP_MAC(acc, b, x) _mm256_fmadd_ps(b, x, acc)
#define CP_SET1(f) _mm256_set1_ps(f)
#define CP_ADD(a, b) _mm256_add_ps(a, b)
#define CP_CLAMP(v, lo, hi) cp_clamp8(v, lo, hi)
#define CP_PREFETCH_AHEAD 8       /* the 16 positions span at most 2 cache lines */
#define CP_PREFETCH_MIN_BYTES 128 /* not the packed strips (cs = 16 floats) */
#include "sr-template.h"
