/*
 * Template of the epilogue of a channel block left channels in lanes
 * (epilogue.h: cp_lanes_row), as the channels-in-lanes kernels hold their
 * register tiles. Each pooled output is a vector of channels per step: the
 * window's maxima are vector maxima of whole positions, with no column
 * gathers and no strided loads whatever the pool stride. Eight pooled
 * outputs at a time are transposed (8x8, AVX2) into 8 outputs of each of 8
 * channels, which take the residual (pool 1: a row piece of the channel, as
 * dst's), the bias and the clamp and are stored as one row piece of dst
 * each: the only change of layout, after the pooling has made it smaller (a
 * 3x3 stride-2 pool: 4x), where the kernels' scalar stores of every conv
 * output into channel rows cost more than the whole pooling.
 *
 * The window maxima take CP_L_W channels per vector (8 or 16), and 8 at a
 * time for a block's channels past the last whole CP_L_W. Define before
 * including: CP_L_FN (the function), CP_L_W, and where CP_L_W is 16,
 * CP_L_V (its vector type), CP_L_LOADU(p), CP_L_STORE(p, v) and
 * CP_L_MAX_NAN(a, b) (a if it is a NaN, else b if it is one, else the larger).
 * Compiled with AVX2 at least.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../vec-avx2.h"
#include "epilogue.h"

/* The maximum of a column's window rows: rows `step` floats apart, in order. */
static inline __m256 cp_colmax8(const float *c, size_t rows, size_t step) {
  __m256 m = _mm256_loadu_ps(c);
  for (size_t a = 1; a < rows; a++) m = cp_max_nan8(m, _mm256_loadu_ps(c + a * step));
  return m;
}

#if CP_L_W == 16
static inline CP_L_V cp_colmax16(const float *c, size_t rows, size_t step) {
  CP_L_V m = CP_L_LOADU(c);
  size_t a = 1;
  for (; a + 1 < rows; a += 2) /* two rows a step: the same maxima in the same order */
    m = CP_L_MAX_NAN(CP_L_MAX_NAN(m, CP_L_LOADU(c + a * step)), CP_L_LOADU(c + (a + 1) * step));
  if (a < rows) m = CP_L_MAX_NAN(m, CP_L_LOADU(c + a * step));
  return m;
}
#endif

/* Pooled outputs per transposed group (the vector's lanes); the most
   columns of a group's windows whose maxima are kept (beyond: each window
   takes its own). */
#define CP_GROUP 8
#define CP_SPAN 64

/* The window maxima of a group of pooled outputs into stage, W channels a
   vector, from channel v on (the loop of CP_L_FN; pool 1: the conv outputs
   themselves, nothing here); lanes past the block's channels are never
   stored. */
#define CP_L_POOL(VT, W, COLMAX, MAX_NAN, STORE, colbuf)                                    \
  for (; v < row->channels && v + (W) <= L && P > 1; v += (W)) {                            \
    const float *c = row->src + v;                                                          \
    if (kept)                                                                               \
      for (size_t x = xs; x < xe; x++) colbuf[x - xs] = COLMAX(c + x * L, row->rows, step); \
    for (size_t i = 0; i < nt; i++) {                                                       \
      /* window [t*S - off, t*S - off + P) clipped to [0, cols); never empty */             \
      const size_t t = t0 + i, x0 = t * S > off ? t * S - off : 0;                          \
      const size_t x1 = t * S + P - off < cols ? t * S + P - off : cols;                    \
      VT w = kept ? colbuf[x0 - xs] : COLMAX(c + x0 * L, row->rows, step);                  \
      for (size_t x = x0 + 1; x < x1; x++)                                                  \
        w = MAX_NAN(w, kept ? colbuf[x - xs] : COLMAX(c + x * L, row->rows, step));         \
      STORE(stage + i * L + v, w);                                                          \
    }                                                                                       \
  }

void CP_L_FN(const cp_epilogue_params *p, const cp_lanes_row *row) {
  const size_t P = p->pool, S = p->stride, L = row->lanes, n = row->n, cols = row->cols;
  const size_t off = row->off, step = row->ld * L, es = p->store == CP_STORE_F32 ? 4 : 2;
  const int clamp = p->min > -INFINITY || p->max < INFINITY;
  /* fp32 stores and no residual: whole groups take the unrolled path */
  const int plain = p->narrow == NULL && row->res == NULL, has_bias = row->bias != NULL;
  const size_t plane = row->plane;
  const __m256 lo = _mm256_set1_ps(p->min), hi = _mm256_set1_ps(p->max);
  float bias[CP_LANES_MAX] __attribute__((aligned(32)));
  float stage[CP_GROUP * CP_LANES_MAX] __attribute__((aligned(64)));
  float piece[CP_GROUP] __attribute__((aligned(32))) = {0};
  for (size_t m = 0; m < L; m++)
    bias[m] = row->bias != NULL && m < row->channels ? row->bias[m] : 0.0f;
  __m256 colmax[CP_SPAN];
#if CP_L_W == 16
  CP_L_V colmax16[CP_SPAN];
#endif
  for (size_t g = 0; g < n; g += CP_GROUP) {
    /* a row of CP_GROUP or more ends on its last CP_GROUP outputs (some
       computed and stored again, the same bits) rather than a partial
       group */
    const size_t t0 = n - g < CP_GROUP && n >= CP_GROUP ? n - CP_GROUP : g;
    const size_t nt = n - t0 < CP_GROUP ? n - t0 : CP_GROUP;
    /* the group's windows cover columns [xs, xe): each column's maximum
       once where they fit colmax (overlapping windows share columns) */
    const size_t xs = t0 * S > off ? t0 * S - off : 0;
    const size_t last = (t0 + nt - 1) * S + P - off, xe = last < cols ? last : cols;
    const int kept = xe - xs <= CP_SPAN;
    size_t v = 0;
#if CP_L_W == 16
    CP_L_POOL(CP_L_V, 16, cp_colmax16, CP_L_MAX_NAN, CP_L_STORE, colmax16)
#endif
    CP_L_POOL(__m256, 8, cp_colmax8, cp_max_nan8, _mm256_store_ps, colmax)
    for (size_t v = 0; v < row->channels; v += 8) {
      __m256 r[8];
      for (size_t i = 0; i < 8; i++) { /* past nt: a copy of the last, never stored */
        const size_t at = i < nt ? i : nt - 1;
        r[i] = P > 1 ? _mm256_load_ps(stage + at * L + v)
                     : _mm256_loadu_ps(row->src + (t0 + at) * S * L + v);
      }
      cp_transpose8(r);
      if (plain && nt == CP_GROUP && v + 8 <= row->channels) { /* 8 whole row pieces */
        float *to = (float *)row->dst + v * plane + t0;
#pragma GCC unroll 8
        for (size_t j = 0; j < 8; j++) {
          if (has_bias) r[j] = _mm256_add_ps(r[j], _mm256_set1_ps(bias[v + j]));
          if (clamp) r[j] = cp_clamp8(r[j], lo, hi);
          _mm256_storeu_ps(to + j * plane, r[j]);
        }
        continue;
      }
      for (size_t j = 0; j < 8 && v + j < row->channels; j++) {
        const size_t m = v + j;
        if (row->res != NULL) { /* pool 1 of stride 1: output t is conv column t */
          const unsigned char *at =
              (const unsigned char *)row->res + (m * row->res_plane + t0) * es;
          if (p->res_widen != NULL) {
            p->res_widen((const uint16_t *)(const void *)at, piece, nt);
          } else if (nt == CP_GROUP) {
            memcpy(piece, at, sizeof piece);
          } else {
            memcpy(piece, at, nt * sizeof(float));
          }
          r[j] = _mm256_add_ps(r[j], _mm256_load_ps(piece));
        }
        if (row->bias != NULL) r[j] = _mm256_add_ps(r[j], _mm256_set1_ps(bias[m]));
        if (clamp) r[j] = cp_clamp8(r[j], lo, hi);
        unsigned char *d = (unsigned char *)row->dst + (m * row->plane + t0) * es;
        if (p->narrow != NULL) {
          _mm256_store_ps(piece, r[j]);
          p->narrow(piece, (uint16_t *)(void *)d, nt);
        } else if (nt == CP_GROUP) {
          _mm256_storeu_ps((float *)(void *)d, r[j]);
        } else {
          _mm256_store_ps(piece, r[j]);
          memcpy(d, piece, nt * sizeof(float));
        }
      }
    }
  }
}

#undef CP_L_POOL
