/*
 * Template of the vector shift-reduce microkernels (see ukernel.h).
 * Lanes run along the conv positions; each (c, i, j) step loads NRV vectors of
 * shifted input (unaligned loads from the panel), broadcasts MR packed
 * weights and issues MR*NRV independent multiply-adds into the register tile,
 * which leaves the registers once, at the end. A channel step c is one fp32
 * channel, or one bf16 channel pair for the dot-product kernels.
 *
 * Define before including:
 *   CP_FN          function name (one kernel per file)
 *   CP_MR, CP_NRV  output channels, and vectors of CP_LANES positions, per tile
 *   CP_ELEM        32-bit panel element type
 *   CP_ACC, CP_LANES, CP_ZERO(), CP_STORE(ptr, acc), CP_LOADACC(ptr)
 *                              fp32 accumulator vectors
 *   CP_XVEC, CP_LOAD(ptr)      input vector type and its unaligned load
 *   CP_BVEC, CP_BCAST(ptr)     one packed weight in every lane
 *   CP_MAC(acc, b, x)          acc + b * x (or the pair dot product)
 *   CP_SET1(f), CP_ADD(a, b), CP_CLAMP(v, lo, hi)
 *                              fp32 vectors for the finish (ukernel.h): f in
 *                              every lane, a + b, the epilogue's clamp
 * and optionally
 *   CP_PREFETCH_AHEAD          in the GEMM loop (k = 1), prefetch the input of
 *   CP_PREFETCH_MIN_BYTES      the channel step this many steps ahead where
 *                              its rows are at least this many bytes apart,
 *                              too far apart for the hardware prefetcher when
 *                              c_in is deep (1x1 layers of 1024-2048 channels
 *                              on Zen 3: 1224 -> 910 us for 1024->256 at
 *                              14x14); rows nearer run without
 */
#include <immintrin.h>
#include <math.h>

/* One contraction step: NRV input vectors at xr times MR weights at w. */
static inline __attribute__((always_inline)) void cp_sr_step(const CP_ELEM *xr, const float *w,
                                                             CP_ACC acc[CP_MR][CP_NRV]) {
  CP_XVEC xin[CP_NRV];
#pragma GCC unroll 4
  for (int v = 0; v < CP_NRV; v++) xin[v] = CP_LOAD(xr + CP_LANES * v);
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++) {
    const CP_BVEC b = CP_BCAST(w + m);
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++) acc[m][v] = CP_MAC(acc[m][v], b, xin[v]);
  }
}

/* The tile's rows finished as the pool-1 epilogue finishes them (ukernel.h),
   to the outputs' places; rows past f->rows are not stored. */
static inline __attribute__((always_inline)) void cp_sr_finish_tile(CP_ACC acc[CP_MR][CP_NRV],
                                                                    const cp_sr_finish *f,
                                                                    float *tile, size_t ld) {
  const int clamp = f->lo > -INFINITY || f->hi < INFINITY;
  const CP_ACC lo = CP_SET1(f->lo), hi = CP_SET1(f->hi);
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++) {
    if (m >= f->rows) break;
    const CP_ACC b = CP_SET1(f->bias != NULL ? f->bias[m] : 0.0f);
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++) {
      CP_ACC o = acc[m][v];
      if (f->res != NULL) o = CP_ADD(o, CP_LOADACC(f->res + m * ld + CP_LANES * v));
      if (f->bias != NULL) o = CP_ADD(o, b);
      if (clamp) o = CP_CLAMP(o, lo, hi);
      CP_STORE(tile + m * ld + CP_LANES * v, o);
    }
  }
}

void CP_FN(const void *xv, size_t cs, size_t rs, size_t c_in, size_t k, const float *w, float *tile,
           size_t ld, int accumulate, const cp_sr_finish *finish) {
  const CP_ELEM *x = (const CP_ELEM *)xv;
  CP_ACC acc[CP_MR][CP_NRV];
  /* The finish's reads and writes (rows a plane apart, far from the last
     tile's), under way during the contraction: 64 -> 256 1x1 at 56x56, 2
     threads, 1288 -> 979 us fastest of 100 alternating runs; deeper
     contractions the same. */
  if (finish != NULL)
    for (int m = 0; m < CP_MR && m < finish->rows; m++) {
      if (finish->res != NULL) {
        _mm_prefetch((const char *)(finish->res + m * ld), _MM_HINT_T0);
        _mm_prefetch((const char *)(finish->res + m * ld + CP_LANES * CP_NRV - 1), _MM_HINT_T0);
      }
      _mm_prefetch((const char *)(tile + m * ld), _MM_HINT_T0);
      _mm_prefetch((const char *)(tile + m * ld + CP_LANES * CP_NRV - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++)
      acc[m][v] = accumulate ? CP_LOADACC(tile + m * ld + CP_LANES * v) : CP_ZERO();
  if (k == 1) { /* a GEMM (im2col, Winograd): one loop, the same order of sums */
    size_t c = 0;
#ifdef CP_PREFETCH_AHEAD
    /* Rows of consecutive channel steps far apart (a source read in place):
       prefetched. Near (a packed strip, cs = NR): the hardware prefetcher
       follows them, and the prefetches would only cost issue slots. */
    if (cs * sizeof(CP_ELEM) >= CP_PREFETCH_MIN_BYTES)
      for (; c < c_in; c++, w += CP_MR) {
        const CP_ELEM *ahead = x + (c + CP_PREFETCH_AHEAD) * cs;
        _mm_prefetch((const char *)ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + CP_LANES * CP_NRV - 1), _MM_HINT_T0);
        cp_sr_step(x + c * cs, w, acc);
      }
#endif
    for (; c < c_in; c++, w += CP_MR) cp_sr_step(x + c * cs, w, acc);
    c_in = 0;
  }
  for (size_t c = 0; c < c_in; c++)
    for (size_t i = 0; i < k; i++)
      for (size_t j = 0; j < k; j++, w += CP_MR) cp_sr_step(x + c * cs + i * rs + j, w, acc);
  if (finish != NULL) {
    cp_sr_finish_tile(acc, finish, tile, ld);
    return;
  }
#pragma GCC unroll 16
  for (int m = 0; m < CP_MR; m++)
#pragma GCC unroll 4
    for (int v = 0; v < CP_NRV; v++) CP_STORE(tile + m * ld + CP_LANES * v, acc[m][v]);
}
