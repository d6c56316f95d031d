/*
 * Helpers shared by the reliability tests and the fuzz targets: a layer case
 * and its tensor sizes, random data, the tolerance of tests/test_layer.c, a
 * comparison against the scalar reference, an instrumented allocator, and a
 * failure counter with a check macro.
 *
 * Everything here is static inline, so a translation unit pays only for what
 * it uses and no unused-function warning is raised. Translation units that
 * include it define _POSIX_C_SOURCE (for posix_memalign) before any header.
 */
#ifndef CONVPOOL_REL_UTIL_H
#define CONVPOOL_REL_UTIL_H

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convpool.h"
#include "half.h"
#include "reference.h"
#include "testutil.h"

/* ---- failures: print, count, keep going ---- */

static inline int *rel_failure_count(void) {
  static int failures;
  return &failures;
}

static inline void rel_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void rel_fail_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL %s:%d: ", file, line);
  vprintf(fmt, ap);
  putchar('\n');
  fflush(stdout);
  va_end(ap);
  (*rel_failure_count())++;
}

/* REL_CHECK(condition, printf-style explanation): record a failure if false. */
#define REL_CHECK(cond, ...)                                   \
  do {                                                         \
    if (!(cond)) rel_fail_at(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- a layer case ---- */

typedef struct rel_case {
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, k, pool;
  int bias;
} rel_case;

/* Element counts of a case that the caller has checked to be valid and small. */
static inline size_t rel_x_count(const rel_case *c) {
  return (size_t)(c->batch * c->c_in * c->height * c->width);
}
static inline size_t rel_w_count(const rel_case *c) {
  return (size_t)(c->c_out * c->c_in * c->k * c->k);
}
static inline int64_t rel_ph(const rel_case *c) {
  return (c->height - c->k + 1) / c->pool;
}
static inline int64_t rel_pw(const rel_case *c) {
  return (c->width - c->k + 1) / c->pool;
}
static inline size_t rel_y_count(const rel_case *c) {
  return (size_t)(c->batch * c->c_out * rel_ph(c) * rel_pw(c));
}

static inline void rel_describe(const rel_case *c, char *s, size_t n) {
  snprintf(s, n, "%s B=%lld Cin=%lld Cout=%lld %lldx%lld k=%lld pool=%lld bias=%d",
           convpool_dtype_name(c->dtype), (long long)c->batch, (long long)c->c_in,
           (long long)c->c_out, (long long)c->height, (long long)c->width, (long long)c->k,
           (long long)c->pool, c->bias);
}

/* ---- data ---- */

/* Store v as element i of a dtype tensor (16-bit types round to nearest even). */
static inline void rel_set(convpool_dtype dtype, void *data, size_t i, float v) {
  tu_set(dtype, data, i, v);
}

/* n values uniform in [lo, hi), stored in dtype. */
static inline void rel_fill(void *data, size_t n, convpool_dtype dtype, tu_rng *rng, float lo,
                            float hi) {
  for (size_t i = 0; i < n; i++) rel_set(dtype, data, i, lo + (hi - lo) * tu_uniform(rng));
}

static inline double rel_get(convpool_dtype dtype, const void *data, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)data)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)data)[i]);
  return ((const float *)data)[i];
}

/* Ordinal of a 16-bit float on a line where adjacent finite values differ by 1. */
static inline int rel_ordinal16(uint16_t h) {
  return (h & 0x8000) ? -(int)(h & 0x7fff) : (int)h;
}

/*
 * The tolerance of tests/test_layer.c: |got - ref| <= 1e-5 * bound + 1e-6
 * (bound = max over the window of sum |x*w|), or within one unit in the last
 * place for float16 and bfloat16; NaN must give NaN and an infinity the same
 * infinity. Where the bound (over the finite terms, reference.h) reaches
 * the float32 range, fp32 sums may overflow, and which way depends on their
 * order (an infinity of either sign, NaN where both meet; a pooling window
 * then takes its max over what is left), as torch's do: any result that is
 * not required to be NaN is accepted there.
 */
static inline int rel_close_enough(convpool_dtype dtype, double got, double ref, double bound) {
  if (isnan(ref)) return isnan(got);
  if (!(bound < FLT_MAX)) return 1;
  if (isinf(ref)) return got == ref;
  if (fabs(got - ref) <= 1e-5 * bound + 1e-6) return 1;
  if (dtype == CONVPOOL_FLOAT16)
    return abs(rel_ordinal16(cp_float_to_half((float)got)) -
               rel_ordinal16(cp_float_to_half((float)ref))) <= 1;
  if (dtype == CONVPOOL_BFLOAT16)
    return abs(rel_ordinal16(cp_float_to_bf16((float)got)) -
               rel_ordinal16(cp_float_to_bf16((float)ref))) <= 1;
  return 0;
}

/*
 * Compare y (the library's output of `layer` on src [batch, c_in, height,
 * width], with `residual` or NULL) with the scalar reference. Returns 1 if
 * every element is acceptable; otherwise 0 with the first mismatch described
 * in why (capacity cap). Returns -1 if the check itself could not allocate.
 */
static inline int rel_check_residual_output(const convpool_layer *l, int64_t batch, int64_t height,
                                            int64_t width, const void *x, const void *w,
                                            const void *bias, const void *residual, const void *y,
                                            char *why, size_t cap) {
  int64_t ph, pw;
  cp_reference_shape(l, height, width, &ph, &pw);
  const size_t n = (size_t)(batch * l->c_out * ph * pw);
  double *ref = malloc((n ? n : 1) * sizeof(double));
  double *bound = malloc((n ? n : 1) * sizeof(double));
  int ok = ref != NULL && bound != NULL ? 1 : -1;
  if (ok == 1) {
    cp_reference_layer_residual(l, x, batch, height, width, w, bias, residual, ref, bound);
    for (size_t i = 0; i < n; i++) {
      double got = rel_get(l->dtype, y, i);
      if (!rel_close_enough(l->dtype, got, ref[i], bound[i])) {
        snprintf(why, cap,
                 "%s B=%lld %lld->%lld %lldx%lld k=%lld stride=%lld dil=%lld groups=%lld res=%d "
                 "pad=%lld,%lld,%lld,%lld act=%d pool=%lld/%lld ppad=%lld,%lld,%lld,%lld "
                 "ceil=%d: element %zu is %.9g, the reference %.9g (bound %.3g)",
                 convpool_dtype_name(l->dtype), (long long)batch, (long long)l->c_in,
                 (long long)l->c_out, (long long)height, (long long)width, (long long)l->k,
                 (long long)l->stride, (long long)l->dilation, (long long)l->groups,
                 residual != NULL, (long long)l->padding[0], (long long)l->padding[1],
                 (long long)l->padding[2], (long long)l->padding[3], (int)l->activation,
                 (long long)l->pool, (long long)l->pool_stride, (long long)l->pool_padding[0],
                 (long long)l->pool_padding[1], (long long)l->pool_padding[2],
                 (long long)l->pool_padding[3], l->ceil_mode, i, got, ref[i], bound[i]);
        ok = 0;
        break;
      }
    }
  }
  free(ref);
  free(bound);
  return ok;
}

/* rel_check_residual_output without a residual. */
static inline int rel_check_layer_output(const convpool_layer *l, int64_t batch, int64_t height,
                                         int64_t width, const void *x, const void *w,
                                         const void *bias, const void *y, char *why, size_t cap) {
  return rel_check_residual_output(l, batch, height, width, x, w, bias, NULL, y, why, cap);
}

/* rel_check_layer_output for case c (the defaults of convpool_layer_init). */
static inline int rel_check_output(const rel_case *c, const void *x, const void *w,
                                   const void *bias, const void *y, char *why, size_t cap) {
  convpool_layer l;
  convpool_layer_init(&l, c->dtype, c->c_out, c->c_in, c->k, c->pool);
  return rel_check_layer_output(&l, c->batch, c->height, c->width, x, w, c->bias ? bias : NULL, y,
                                why, cap);
}

/* The case on one thread with algorithm `algo` into y (y_bytes), checked
   against the reference: 1 if it ran and matched; a failure is reported as
   `what` of algo. */
static inline int rel_one_thread_result(const rel_case *c, const void *x, const void *w,
                                        const void *bias, int algo, void *y, size_t y_bytes,
                                        const char *what) {
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 1;
  o.algo = (convpool_algo)algo;
  const convpool_status st =
      convpool_conv2d_maxpool(c->dtype, x, c->batch, c->c_in, c->height, c->width, w, c->c_out,
                              c->k, bias, c->pool, y, y_bytes, &o);
  if (st != CONVPOOL_SUCCESS) {
    REL_CHECK(0, "%s of algo %d: %s", what, algo, convpool_last_error());
    return 0;
  }
  char why[400];
  const int good = rel_check_output(c, x, w, bias, y, why, sizeof why);
  REL_CHECK(good == 1, "%s of algo %d: %s", what, algo, why);
  return good == 1;
}

/* ---- an instrumented allocator ---- */

#define REL_ALLOC_SLOTS 4096

/*
 * Counts calls and outstanding blocks, checks every alignment request and
 * every pointer handed back, and can refuse the fail_at-th call (1-based;
 * 0 = never) or any request above max_size (0 = no cap). Thread-safe.
 */
typedef struct rel_alloc {
  pthread_mutex_t lock;
  long calls;   /* alloc calls since the last rel_alloc_arm */
  long fail_at; /* refuse this call (1-based), 0 = never */
  long refused; /* calls refused */
  long live;    /* blocks handed out and not yet freed */
  long peak_live;
  size_t max_size;
  long bad_alignment; /* requests whose alignment is not a power of two <= 4096 */
  long bad_free;      /* frees of a pointer this allocator does not own */
  void *slots[REL_ALLOC_SLOTS];
  /* Called (without the lock) at the start of every alloc, if set. */
  void (*hook)(void *hook_context, size_t size);
  void *hook_context;
} rel_alloc;

static inline void *rel_alloc_fn(void *context, size_t size, size_t alignment) {
  rel_alloc *a = context;
  if (a->hook != NULL) a->hook(a->hook_context, size);
  pthread_mutex_lock(&a->lock);
  a->calls++;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 4096) a->bad_alignment++;
  void *p = NULL;
  if ((a->fail_at != 0 && a->calls == a->fail_at) || (a->max_size != 0 && size > a->max_size)) {
    a->refused++;
  } else {
    size_t align = alignment < sizeof(void *) ? sizeof(void *) : alignment;
    if ((align & (align - 1)) != 0) align = 64;
    if (posix_memalign(&p, align, size ? size : 1) != 0) p = NULL;
    if (p != NULL) {
      int placed = 0;
      for (int i = 0; i < REL_ALLOC_SLOTS && !placed; i++)
        if (a->slots[i] == NULL) a->slots[i] = p, placed = 1;
      if (!placed) { /* more live blocks than slots: treat as a failure to track */
        free(p);
        p = NULL;
        a->bad_free++;
      } else if (++a->live > a->peak_live) {
        a->peak_live = a->live;
      }
    }
  }
  pthread_mutex_unlock(&a->lock);
  return p;
}

static inline void rel_free_fn(void *context, void *pointer) {
  rel_alloc *a = context;
  if (pointer == NULL) return;
  pthread_mutex_lock(&a->lock);
  int found = 0;
  for (int i = 0; i < REL_ALLOC_SLOTS && !found; i++)
    if (a->slots[i] == pointer) a->slots[i] = NULL, found = 1;
  if (found) {
    a->live--;
    free(pointer);
  } else {
    a->bad_free++; /* not ours (or freed twice): do not pass it to free() */
  }
  pthread_mutex_unlock(&a->lock);
}

static inline void rel_alloc_init(rel_alloc *a) {
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->lock, NULL);
}

/* Reset the call counter and refuse the fail_at-th call from now on (0 = none). */
static inline void rel_alloc_arm(rel_alloc *a, long fail_at) {
  pthread_mutex_lock(&a->lock);
  a->calls = 0;
  a->fail_at = fail_at;
  pthread_mutex_unlock(&a->lock);
}

static inline long rel_alloc_live(rel_alloc *a) {
  pthread_mutex_lock(&a->lock);
  long n = a->live;
  pthread_mutex_unlock(&a->lock);
  return n;
}

static inline convpool_allocator rel_alloc_interface(rel_alloc *a) {
  convpool_allocator i = {rel_alloc_fn, rel_free_fn, a};
  return i;
}

/* ---- buffers ---- */

/* Is every byte of p[0..n) equal to v? */
static inline int rel_all_bytes(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return 0;
  return 1;
}

#endif
