/*
 * The layer against the scalar reference over a grid of shapes, dtypes, pools
 * and data; conv stride, dilation, groups (depthwise included) and a
 * residual; byte-identical results across thread counts and runs; NaN and
 * Inf propagation. Run it under CONVPOOL_ISA=avx512|avx2|scalar to cover each
 * path. An algorithm that does not compute a layer must decline it, naming
 * the value.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convpool.h"
#include "half.h"
#include "reference.h"
#include "testutil.h"

typedef struct layer_case {
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, k, pool;
  int bias, signed_data;
} layer_case;

static void fill_tensor(void *data, size_t n, convpool_dtype dtype, uint64_t seed,
                        int signed_data) {
  tu_rng rng = {seed};
  for (size_t i = 0; i < n; i++) {
    float v = tu_uniform(&rng);
    if (signed_data) v = 2.0f * v - 1.0f;
    tu_set(dtype, data, i, v);
  }
}

static double get(convpool_dtype dtype, const void *data, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)data)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)data)[i]);
  return ((const float *)data)[i];
}

/* Ordinal of a 16-bit float on a line where adjacent finite values differ by 1. */
static int ordinal16(uint16_t h) {
  return (h & 0x8000) ? -(int)(h & 0x7fff) : (int)h;
}

/* Is got acceptable for the reference value ref (bound = max sum |x*w|)? */
static int close_enough(convpool_dtype dtype, double got, double ref, double bound) {
  if (isnan(ref)) return isnan(got);
  if (isinf(ref)) return got == ref;
  double tol = 1e-5 * bound + 1e-6;
  if (fabs(got - ref) <= tol) return 1;
  /* 16-bit dtypes: within one unit in the last place of the rounded reference. */
  if (dtype == CONVPOOL_FLOAT16)
    return abs(ordinal16(cp_float_to_half((float)got)) - ordinal16(cp_float_to_half((float)ref))) <=
           1;
  if (dtype == CONVPOOL_BFLOAT16)
    return abs(ordinal16(cp_float_to_bf16((float)got)) - ordinal16(cp_float_to_bf16((float)ref))) <=
           1;
  return 0;
}

typedef struct tensors {
  void *x, *w, *bias;
  size_t x_n, w_n, y_n, y_bytes;
} tensors;

/* The tensors of a case whose conv has `groups` groups (weights
   [c_out, c_in / groups, k, k]). */
static void make_group_tensors(const layer_case *c, int64_t groups, uint64_t seed, tensors *t) {
  size_t es = convpool_dtype_size(c->dtype);
  t->x_n = (size_t)(c->batch * c->c_in * c->height * c->width);
  t->w_n = (size_t)(c->c_out * (c->c_in / groups) * c->k * c->k);
  int64_t ph = (c->height - c->k + 1) / c->pool, pw = (c->width - c->k + 1) / c->pool;
  t->y_n = (size_t)(c->batch * c->c_out * ph * pw);
  t->y_bytes = t->y_n * es;
  t->x = tu_xmalloc(t->x_n * es);
  t->w = tu_xmalloc(t->w_n * es);
  t->bias = c->bias ? tu_xmalloc((size_t)c->c_out * es) : NULL;
  fill_tensor(t->x, t->x_n, c->dtype, seed * 3 + 1, c->signed_data);
  fill_tensor(t->w, t->w_n, c->dtype, seed * 3 + 2, c->signed_data);
  if (t->bias) fill_tensor(t->bias, (size_t)c->c_out, c->dtype, seed * 3 + 3, 1);
}

static void make_tensors(const layer_case *c, uint64_t seed, tensors *t) {
  make_group_tensors(c, 1, seed, t);
}

static void free_tensors(tensors *t) {
  free(t->x);
  free(t->w);
  free(t->bias);
}

static convpool_algo g_algo = CONVPOOL_ALGO_AUTO;

/* Either Winograd tile size (the same rules, the same direct path). */
static int winograd(convpool_algo a) {
  return a == CONVPOOL_ALGO_WINOGRAD || a == CONVPOOL_ALGO_WINOGRAD_2X3;
}

/* What the algorithm under test must decline, and the value its message
   must name (into want): Winograd computes k = 3 with stride, dilation and
   groups 1; shift-reduce declines dilation (k > 1); depthwise computes
   groups = c_in only; im2col computes every layer. 0 when it computes the
   layer. */
static int must_decline(const convpool_layer *l, char *want, size_t capacity) {
  const long long dilation = l->k == 1 ? 1 : (long long)l->dilation;
  if (g_algo == CONVPOOL_ALGO_DEPTHWISE) {
    if (l->groups == l->c_in) return 0;
    snprintf(want, capacity, "groups = %lld, C_in = %lld", (long long)l->groups,
             (long long)l->c_in);
    return 1;
  }
  if (winograd(g_algo)) {
    if (l->k != 3)
      snprintf(want, capacity, "k = %lld", (long long)l->k);
    else if (l->stride != 1)
      snprintf(want, capacity, "stride = %lld", (long long)l->stride);
    else if (dilation != 1)
      snprintf(want, capacity, "dilation = %lld", dilation);
    else if (l->groups != 1)
      snprintf(want, capacity, "groups = %lld", (long long)l->groups);
    else
      return 0;
    return 1;
  }
  if (g_algo == CONVPOOL_ALGO_SHIFT_REDUCE && dilation != 1) {
    snprintf(want, capacity, "dilation = %lld", dilation);
    return 1;
  }
  return 0;
}

/* For a layer the algorithm must decline: 1 if it declines as it must
   (UNSUPPORTED at create, naming the value; the case counts as passed), -1
   if it does not; 0 when the case is to be run. */
static int check_decline(const convpool_layer *l) {
  char want[64];
  if (!must_decline(l, want, sizeof want)) return 0;
  convpool_options o;
  convpool_options_init(&o);
  o.algo = g_algo;
  const size_t w_n = (size_t)(l->c_out * (l->c_in / l->groups) * l->k * l->k);
  float *w = tu_xmalloc(w_n * sizeof(float));
  memset(w, 0, w_n * sizeof(float));
  convpool_layer f32 = *l;
  f32.dtype = CONVPOOL_FLOAT32;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create_layer(&f32, w, NULL, &o, &op);
  free(w);
  if (st == CONVPOOL_UNSUPPORTED && op == NULL && strstr(convpool_last_error(), want) != NULL)
    return 1;
  printf("%s with %s: %s (%s), want unsupported naming it\n", convpool_algo_name(g_algo), want,
         convpool_status_string(st), convpool_last_error());
  convpool_op_destroy(op);
  return -1;
}

/* check_decline() for the plain layer of c_in -> c_out channels, filter k. */
static int declined_dense(int64_t c_out, int64_t c_in, int64_t k) {
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, c_out, c_in, k, 1);
  return check_decline(&l);
}

static int run(const layer_case *c, const tensors *t, int threads, void *y) {
  convpool_options o;
  convpool_options_init(&o);
  o.threads = threads;
  o.algo = g_algo;
  convpool_status st =
      convpool_conv2d_maxpool(c->dtype, t->x, c->batch, c->c_in, c->height, c->width, t->w,
                              c->c_out, c->k, t->bias, c->pool, y, t->y_bytes, &o);
  if (st != CONVPOOL_SUCCESS) {
    printf("run failed: %s: %s\n", convpool_status_string(st), convpool_last_error());
    return 0;
  }
  return 1;
}

static void describe(const layer_case *c, char *s, size_t n) {
  snprintf(s, n, "%s B=%lld Cin=%lld Cout=%lld %lldx%lld k=%lld pool=%lld bias=%d signed=%d",
           convpool_dtype_name(c->dtype), (long long)c->batch, (long long)c->c_in,
           (long long)c->c_out, (long long)c->height, (long long)c->width, (long long)c->k,
           (long long)c->pool, c->bias, c->signed_data);
}

/* Compare against the reference; returns 1 if every element is acceptable. */
static int check_case(const layer_case *c, uint64_t seed, int threads) {
  const int declined = declined_dense(c->c_out, c->c_in, c->k);
  if (declined) return declined > 0;
  tensors t;
  make_tensors(c, seed, &t);
  void *y = tu_xmalloc(t.y_bytes);
  int ok = run(c, &t, threads, y);
  if (ok) {
    double *ref = tu_xmalloc(t.y_n * sizeof(double)), *bound = tu_xmalloc(t.y_n * sizeof(double));
    cp_reference(c->dtype, t.x, c->batch, c->c_in, c->height, c->width, t.w, c->c_out, c->k, t.bias,
                 c->pool, ref, bound);
    for (size_t i = 0; i < t.y_n; i++) {
      double got = get(c->dtype, y, i);
      if (!close_enough(c->dtype, got, ref[i], bound[i])) {
        char d[160];
        describe(c, d, sizeof d);
        printf("mismatch %s at %zu: got %.9g want %.9g (bound %.3g)\n", d, i, got, ref[i],
               bound[i]);
        ok = 0;
        break;
      }
    }
    free(ref);
    free(bound);
  }
  free(y);
  free_tensors(&t);
  return ok;
}

/* Same bytes for every thread count and for a repeated run. */
static int check_determinism(const layer_case *c, uint64_t seed) {
  const int declined = declined_dense(c->c_out, c->c_in, c->k);
  if (declined) return declined > 0;
  tensors t;
  make_tensors(c, seed, &t);
  void *first = tu_xmalloc(t.y_bytes), *y = tu_xmalloc(t.y_bytes);
  int ok = run(c, &t, 1, first);
  const int threads[] = {2, 3, 8, 1};
  for (int i = 0; ok && i < 4; i++) {
    memset(y, 0xa5, t.y_bytes);
    ok = run(c, &t, threads[i], y) && memcmp(first, y, t.y_bytes) == 0;
    if (!ok) {
      char d[160];
      describe(c, d, sizeof d);
      printf("threads=%d differs from threads=1: %s\n", threads[i], d);
    }
  }
  free(first);
  free(y);
  free_tensors(&t);
  return ok;
}

/* NaN anywhere in a window gives NaN; Inf propagates; as torch. */
static int check_nonfinite(convpool_dtype dtype) {
  layer_case c = {dtype, 2, 3, 5, 11, 13, 3, 2, 1, 1};
  const int declined = declined_dense(c.c_out, c.c_in, c.k);
  if (declined) return declined > 0;
  tensors t;
  make_tensors(&c, 99, &t);
  size_t es = convpool_dtype_size(dtype);
  const float specials[] = {NAN, INFINITY, -INFINITY};
  const size_t where[] = {0, 17, 150, 2 * 3 * 11 * 13 - 1, 400};
  for (int i = 0; i < 5; i++) {
    tu_set(dtype, t.x, where[i], specials[i % 3]);
  }
  (void)es;
  void *y = tu_xmalloc(t.y_bytes);
  int ok = run(&c, &t, 2, y);
  double *ref = tu_xmalloc(t.y_n * sizeof(double)), *bound = tu_xmalloc(t.y_n * sizeof(double));
  cp_reference(dtype, t.x, c.batch, c.c_in, c.height, c.width, t.w, c.c_out, c.k, t.bias, c.pool,
               ref, bound);
  int nans = 0;
  for (size_t i = 0; ok && i < t.y_n; i++) {
    double got = get(dtype, y, i);
    nans += isnan(ref[i]);
    if (!close_enough(dtype, got, ref[i], bound[i])) {
      printf("non-finite %s at %zu: got %g want %g\n", convpool_dtype_name(dtype), i, got, ref[i]);
      ok = 0;
    }
  }
  if (ok && nans == 0) {
    printf("non-finite %s: the reference has no NaN, the test is not testing\n",
           convpool_dtype_name(dtype));
    ok = 0;
  }
  free(ref);
  free(bound);
  free(y);
  free_tensors(&t);
  return ok;
}

/* ---- layer parameters: padding, activation, general pooling ---- */

static void describe_layer(const convpool_layer *l, int64_t batch, int64_t h, int64_t w, char *s,
                           size_t n) {
  snprintf(s, n,
           "%s B=%lld Cin=%lld Cout=%lld %lldx%lld k=%lld stride=%lld dil=%lld groups=%lld res=%d "
           "pad=%lld,%lld,%lld,%lld act=%d[%g,%g] pool=%lld/%lld ppad=%lld,%lld,%lld,%lld ceil=%d",
           convpool_dtype_name(l->dtype), (long long)batch, (long long)l->c_in, (long long)l->c_out,
           (long long)h, (long long)w, (long long)l->k, (long long)l->stride,
           (long long)l->dilation, (long long)l->groups, (int)l->has_residual,
           (long long)l->padding[0], (long long)l->padding[1], (long long)l->padding[2],
           (long long)l->padding[3], (int)l->activation, (double)l->clamp_min, (double)l->clamp_max,
           (long long)l->pool, (long long)l->pool_stride, (long long)l->pool_padding[0],
           (long long)l->pool_padding[1], (long long)l->pool_padding[2],
           (long long)l->pool_padding[3], l->ceil_mode);
}

/* One layer against the reference, at 1 and 3 threads (same bytes), and
   for a batch also in items of one pooled row (no images side by side,
   another split: the same bytes); the specials (NaN,
   +inf, -inf) of special_bias in the bias, those of special_input scattered
   over x and the residual. */
static int check_layer_values(const convpool_layer *l, int64_t batch, int64_t h, int64_t w,
                              int bias, uint64_t seed, const float *special_bias,
                              const float *special_input) {
  const int declined = check_decline(l);
  if (declined) return declined > 0;
  layer_case c = {l->dtype, batch, l->c_in, l->c_out, h, w, l->k, l->pool, bias, (int)(seed & 1)};
  tensors t;
  make_group_tensors(&c, l->groups, seed, &t);
  if (special_bias != NULL && t.bias != NULL) {
    for (int64_t co = 0; co < l->c_out; co++) {
      const float v = special_bias[co % 3];
      tu_set(l->dtype, t.bias, co, v);
    }
  }
  if (special_input != NULL) /* sparse: most windows stay finite */
    for (size_t i = 7; i < t.x_n; i += 53) tu_set(l->dtype, t.x, i, special_input[i % 3]);
  int64_t ph, pw, oh, ow;
  cp_reference_shape(l, h, w, &ph, &pw);
  cp_reference_conv_shape(l, h, w, &oh, &ow);
  const size_t es = convpool_dtype_size(l->dtype), y_n = (size_t)(batch * l->c_out * ph * pw);
  const size_t r_n = l->has_residual ? (size_t)(batch * l->c_out * oh * ow) : 0;
  void *residual = NULL;
  if (l->has_residual) { /* signed, of the size of the conv output's values */
    residual = tu_xmalloc(r_n * es);
    fill_tensor(residual, r_n, l->dtype, seed * 3 + 4, 1);
    if (special_input != NULL)
      for (size_t i = 0; i < r_n; i += 37) tu_set(l->dtype, residual, i, special_input[i % 3]);
  }
  void *y1 = tu_xmalloc(y_n * es + 1), *y3 = tu_xmalloc(y_n * es + 1);
  double *ref = tu_xmalloc(y_n * sizeof(double) + 1), *bound = tu_xmalloc(y_n * sizeof(double) + 1);
  char d[384];
  describe_layer(l, batch, h, w, d, sizeof d);
  int ok = 1;
  for (int threads = 1; ok && threads <= 3; threads += 2) {
    convpool_options o;
    convpool_options_init(&o);
    o.threads = threads;
    o.algo = g_algo;
    convpool_status st = convpool_layer_run_residual(l, t.x, batch, h, w, t.w, t.bias, residual,
                                                     threads == 1 ? y1 : y3, y_n * es, &o);
    if (st != CONVPOOL_SUCCESS) {
      printf("layer %s: %s: %s\n", d, convpool_status_string(st), convpool_last_error());
      ok = 0;
    }
  }
  if (ok && memcmp(y1, y3, y_n * es) != 0) {
    printf("layer %s: threads=3 differs from threads=1\n", d);
    ok = 0;
  }
  if (ok && batch > 1) { /* items of one pooled row: no images side by side (plan.h) */
    convpool_options o;
    convpool_options_init(&o);
    o.threads = 2, o.rows_per_item = 1, o.algo = g_algo;
    convpool_status st =
        convpool_layer_run_residual(l, t.x, batch, h, w, t.w, t.bias, residual, y3, y_n * es, &o);
    if (st != CONVPOOL_SUCCESS) {
      printf("layer %s: rows_per_item=1: %s\n", d, convpool_status_string(st));
      ok = 0;
    }
    /* the same bytes, NaN signs included (a sum of two NaNs keeps one of
       them by the order of its operands: the portable depthwise kernel
       once gave a split-moved output another code shape, and its NaN the
       other sign) */
    for (size_t i = 0; ok && i < y_n; i++)
      if (memcmp((const char *)y1 + i * es, (const char *)y3 + i * es, es) != 0) {
        printf("layer %s: rows_per_item=1 differs at %zu: %.9g against %.9g\n", d, i,
               get(l->dtype, y3, i), get(l->dtype, y1, i));
        ok = 0;
      }
  }
  cp_reference_layer_residual(l, t.x, batch, h, w, t.w, t.bias, residual, ref, bound);
  for (size_t i = 0; ok && i < y_n; i++) {
    double got = get(l->dtype, y1, i);
    if (!close_enough(l->dtype, got, ref[i], bound[i])) {
      printf("layer %s at %zu: got %.9g want %.9g (bound %.3g)\n", d, i, got, ref[i], bound[i]);
      ok = 0;
    }
  }
  free(y1), free(y3), free(ref), free(bound), free(residual);
  free_tensors(&t);
  return ok;
}

static int check_layer(const convpool_layer *l, int64_t batch, int64_t h, int64_t w, int bias,
                       uint64_t seed, const float *special_bias) {
  return check_layer_values(l, batch, h, w, bias, seed, special_bias, NULL);
}

/* Pooling at its edges: windows of 2..5 on conv outputs of 1..9, strides up
   to P + 1, -inf pads up to P - 1 (ONNX; a third of the layers with all four
   at P - 1, a third with none), ceil sizing three times in four, so windows
   reach past the conv output and, with ceil, are larger than it (torch's one
   partial window). */
static int check_pool_grid(int *cases) {
  int failures = 0;
  tu_rng pick = {91};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  for (int n = 0, run = 0; run < 90 && n < 1000; n++) {
    convpool_layer l;
    const int64_t pool = 2 + (int64_t)(tu_next(&pick) % 4);
    const int64_t k = run % 2 == 0 ? 3 : 1 + (int64_t)(tu_next(&pick) % 3);
    convpool_layer_init(&l, dtypes[run % 3], 1 + (int64_t)(tu_next(&pick) % 17),
                        1 + (int64_t)(tu_next(&pick) % 9), k, pool);
    l.pool_stride = 1 + (int64_t)(tu_next(&pick) % (uint64_t)(pool + 1));
    for (int s = 0; s < 4; s++)
      l.pool_padding[s] = run % 3 == 0   ? pool - 1
                          : run % 3 == 1 ? (int64_t)(tu_next(&pick) % (uint64_t)pool)
                                         : 0;
    l.ceil_mode = run % 4 != 1;
    if (run % 4 == 0) l.padding[0] = l.padding[1] = l.padding[2] = l.padding[3] = 1;
    if (run % 5 == 1) l.activation = CONVPOOL_ACTIVATION_RELU;
    const int64_t h = k + (int64_t)(tu_next(&pick) % 9), w = k + (int64_t)(tu_next(&pick) % 9);
    int64_t ph, pw;
    cp_reference_shape(&l, h, w, &ph, &pw);
    if (ph < 1 || pw < 1) continue;
    run++;
    (*cases)++;
    if (!check_layer(&l, 1 + run % 2, h, w, run % 4 != 3, 500 + (uint64_t)run, NULL)) failures++;
  }
  /* ONNX test_maxpool_2d_pads: window 3, stride 1, pads 2 (28x28 -> 30x30; here 12x12). */
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 5, 3, 3, 3);
  l.padding[0] = l.padding[1] = l.padding[2] = l.padding[3] = 1;
  l.pool_stride = 1;
  l.pool_padding[0] = l.pool_padding[1] = l.pool_padding[2] = l.pool_padding[3] = 2;
  (*cases)++;
  if (!check_layer(&l, 1, 12, 12, 1, 601, NULL)) failures++;
  /* torch's MaxPool2d(3, 2, ceil_mode=True) on a 2x2 conv output: one partial window. */
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 13, 4, 3, 3);
  l.pool_stride = 2, l.ceil_mode = 1;
  (*cases)++;
  if (!check_layer(&l, 2, 4, 4, 1, 602, NULL)) failures++;
  /* pool 2, pads 1 on every side, no clamp: the AVX-512 pool-2 row takes the
     full windows, the portable row the clipped ones; floor and ceil. */
  for (int ceil = 0; ceil < 2; ceil++) {
    convpool_layer_init(&l, CONVPOOL_FLOAT32, 16, 8, 3, 2);
    l.pool_padding[0] = l.pool_padding[1] = l.pool_padding[2] = l.pool_padding[3] = 1;
    l.ceil_mode = ceil;
    (*cases)++;
    if (!check_layer(&l, 1, 19, 40, 1, 603 + (uint64_t)ceil, NULL)) failures++;
  }
  return failures;
}

/* Padding (symmetric or not, up to k and beyond), each activation, pool
   stride != window, pool padding and ceil sizing, on every dtype. */
static int check_layer_grid(int *cases) {
  int failures = 0;
  tu_rng pick = {77};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  const int64_t chans[] = {1, 3, 16, 17};
  for (int n = 0; n < 120; n++) {
    convpool_layer l;
    const int64_t k_any = 1 + (int64_t)(tu_next(&pick) % 4),
                  pool = 1 + (int64_t)(tu_next(&pick) % 3);
    const int64_t k = n < 40 ? 3 : k_any; /* k = 3 first: the filter of every algorithm */
    convpool_layer_init(&l, dtypes[n % 3], chans[tu_next(&pick) % 4], chans[tu_next(&pick) % 4], k,
                        pool);
    for (int s = 0; s < 4; s++) l.padding[s] = (int64_t)(tu_next(&pick) % (uint64_t)(k + 2));
    if (n % 4 == 0) l.padding[1] = l.padding[3] = l.padding[0] = l.padding[2]; /* symmetric */
    l.activation = (convpool_activation)(n % 3);
    if (l.activation == CONVPOOL_ACTIVATION_CLAMP)
      l.clamp_min = -0.5f, l.clamp_max = n % 2 ? 6.0f : 2.5f;
    l.pool_stride = (int64_t)(tu_next(&pick) % (uint64_t)(pool + 1)); /* 0: the window */
    for (int s = 0; s < 4; s++)                                       /* up to P - 1 (ONNX) */
      l.pool_padding[s] = (int64_t)(tu_next(&pick) % (uint64_t)pool);
    l.ceil_mode = (int)(tu_next(&pick) % 2);
    const int64_t h = 1 + (int64_t)(tu_next(&pick) % 20), w = 1 + (int64_t)(tu_next(&pick) % 40);
    int64_t ph, pw;
    cp_reference_shape(&l, h, w, &ph, &pw);
    if (ph < 1 || pw < 1 || h + l.padding[0] + l.padding[2] < k ||
        w + l.padding[1] + l.padding[3] < k)
      continue;
    (*cases)++;
    if (!check_layer(&l, 1 + n % 2, h, w, n % 5 != 0, 300 + (uint64_t)n, NULL)) failures++;
  }
  /* VGG-like: pad 1, ReLU, 2x2/2; AlexNet-like 3x3/2 overlapping pool; ONNX-like asymmetric. */
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 20, 19, 3, 2);
  for (int s = 0; s < 4; s++) l.padding[s] = 1;
  l.activation = CONVPOOL_ACTIVATION_RELU;
  (*cases)++;
  if (!check_layer(&l, 2, 30, 35, 1, 400, NULL)) failures++;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 16, 8, 5, 3);
  l.pool_stride = 2;
  l.padding[0] = l.padding[1] = l.padding[2] = l.padding[3] = 2;
  l.ceil_mode = 1;
  (*cases)++;
  if (!check_layer(&l, 1, 27, 27, 1, 401, NULL)) failures++;
  convpool_layer_init(&l, CONVPOOL_FLOAT16, 7, 5, 3, 3);
  l.padding[0] = 0, l.padding[1] = 2, l.padding[2] = 1, l.padding[3] = 0;
  l.pool_padding[0] = 1, l.pool_padding[3] = 1;
  l.activation = CONVPOOL_ACTIVATION_CLAMP, l.clamp_min = 0.0f, l.clamp_max = 6.0f;
  (*cases)++;
  if (!check_layer(&l, 2, 17, 12, 1, 402, NULL)) failures++;
  /* Blocked sweeps that split: 600 output channels per group in several of
     im2col's chunks of channel blocks, 100 input channels x 3x3 in several of
     im2col's and direct's contraction passes; with 2 conv groups (and stride
     2) a chunk stops at a group's end and a pass covers half as many
     channels. */
  for (int g = 1; g <= 2; g++) {
    convpool_layer_init(&l, CONVPOOL_FLOAT32, 600 * g, 100, 3, 1);
    l.groups = g, l.stride = g;
    for (int s = 0; s < 4; s++) l.padding[s] = 1;
    l.activation = CONVPOOL_ACTIVATION_RELU;
    (*cases)++;
    if (!check_layer(&l, 1, 9, 11, 1, 403 + (uint64_t)g, NULL)) failures++;
  }
  failures += check_pool_grid(cases);
  /* A non-finite bias: +-inf and NaN are added before the max, as torch does
     (max(-inf + inf, ...) is NaN, not inf). */
  const float specials[3] = {INFINITY, -INFINITY, NAN};
  for (int dt = 0; dt < 3; dt++) {
    convpool_layer_init(&l, dtypes[dt], 6, 3, 3, 2);
    (*cases)++;
    if (!check_layer(&l, 1, 11, 13, 1, 403, specials)) failures++;
  }
  return failures;
}

/* Conv stride 1..3, dilation 1..2, groups 1, 2 and depthwise (channel
   multiplier 1 or 2), a residual or none (NaN and Inf in the input and the
   residual of some), over
   filters 1..7, conv and pool padding, each activation and dtype; then
   named network layers. */
static int check_conv_grid(int *cases) {
  int failures = 0;
  tu_rng pick = {91};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  const int64_t ks[] = {1, 2, 3, 5, 7}, group_chans[] = {1, 2, 3, 8};
  const float specials[3] = {NAN, INFINITY, -INFINITY};
  for (int n = 0; n < 216; n++) {
    const int64_t stride = 1 + n % 3, dilation = 1 + n / 3 % 2, mode = n / 6 % 3;
    const int residual = n / 18 % 2;
    const int64_t k = n % 4 == 0 ? 3 : ks[tu_next(&pick) % 5];
    const int64_t pool = 1 + (int64_t)(tu_next(&pick) % 3);
    int64_t groups = 1, c_in, c_out;
    if (mode == 0) { /* dense */
      c_in = group_chans[tu_next(&pick) % 4] * 2, c_out = 1 + (int64_t)(tu_next(&pick) % 17);
    } else if (mode == 1) { /* two groups */
      groups = 2;
      c_in = 2 * group_chans[tu_next(&pick) % 4], c_out = 2 * (1 + (int64_t)(tu_next(&pick) % 9));
    } else { /* depthwise, channel multiplier 1 or 2 */
      c_in = groups = 1 + (int64_t)(tu_next(&pick) % 19);
      c_out = c_in * (1 + (int64_t)(tu_next(&pick) % 2));
    }
    convpool_layer l;
    convpool_layer_init(&l, dtypes[(n / 54 + n) % 3], c_out, c_in, k, pool);
    l.stride = stride, l.dilation = dilation, l.groups = groups, l.has_residual = residual;
    const int64_t extent = dilation * (k - 1) + 1;
    for (int side = 0; side < 4; side++)
      l.padding[side] = (int64_t)(tu_next(&pick) % (uint64_t)(extent / 2 + 2));
    if (n % 4 == 1) l.padding[1] = l.padding[3] = l.padding[0] = l.padding[2]; /* symmetric */
    l.activation = (convpool_activation)(n % 3);
    if (l.activation == CONVPOOL_ACTIVATION_CLAMP) l.clamp_min = -0.25f, l.clamp_max = 1.5f;
    l.pool_stride = (int64_t)(tu_next(&pick) % (uint64_t)(pool + 1));
    for (int side = 0; side < 4; side++)
      l.pool_padding[side] = (int64_t)(tu_next(&pick) % (uint64_t)(pool / 2 + 1));
    l.ceil_mode = (int)(tu_next(&pick) % 2);
    const int64_t h = extent + (int64_t)(tu_next(&pick) % 24) - l.padding[0] - l.padding[2];
    const int64_t w = extent + (int64_t)(tu_next(&pick) % 40) - l.padding[1] - l.padding[3];
    int64_t ph, pw;
    if (h < 1 || w < 1) continue;
    cp_reference_shape(&l, h, w, &ph, &pw);
    if (ph < 1 || pw < 1) continue;
    (*cases)++;
    const int nonfinite = n % 5 == 0;
    if (!check_layer_values(&l, 1 + n % 2, h, w, n % 7 != 0, 600 + (uint64_t)n, NULL,
                            nonfinite ? specials : NULL))
      failures++;
  }
  /* Network layers: the ResNet stem (7x7 stride 2, pad 3, ReLU, pool 3/2
     pad 1) on a small image, a ResNet downsampling 3x3 and 1x1 of stride 2
     with a residual, MobileNet depthwise 3x3 of stride 1 and 2, a dilated
     3x3 (DeepLab), groups of odd width in bfloat16 (channel pairs never
     cross a group), a grouped 3x3 (ResNeXt); ResNet's stride-1 layers of
     pool 1, whose outputs the kernels may finish in dst (a 1x1 whose tiles
     run flat over whole rows, a deep 1x1, a 3x3 per row, with and without
     a residual, channel counts that leave a partial last block). */
  typedef struct named {
    convpool_dtype dtype;
    int64_t c_in, c_out, k, stride, dilation, groups, pad, pool, pool_stride, pool_pad, h, w;
    int residual, relu;
  } named;
  const named layers[] = {
      {CONVPOOL_FLOAT32, 3, 16, 7, 2, 1, 1, 3, 3, 2, 1, 45, 38, 0, 1},
      {CONVPOOL_FLOAT16, 3, 16, 7, 2, 1, 1, 3, 3, 2, 1, 32, 32, 0, 1},
      {CONVPOOL_FLOAT32, 16, 32, 3, 2, 1, 1, 1, 1, 1, 0, 28, 28, 1, 1},
      {CONVPOOL_FLOAT32, 16, 32, 1, 2, 1, 1, 0, 1, 1, 0, 28, 27, 1, 0},
      {CONVPOOL_BFLOAT16, 16, 32, 1, 2, 1, 1, 0, 1, 1, 0, 28, 27, 1, 0},
      {CONVPOOL_FLOAT32, 24, 24, 3, 1, 1, 24, 1, 1, 1, 0, 30, 33, 0, 1},
      {CONVPOOL_FLOAT32, 24, 24, 3, 2, 1, 24, 1, 1, 1, 0, 30, 33, 0, 1},
      {CONVPOOL_FLOAT16, 20, 40, 3, 2, 1, 20, 1, 2, 2, 0, 30, 33, 1, 1},
      {CONVPOOL_FLOAT32, 12, 20, 3, 1, 2, 1, 2, 2, 2, 0, 26, 29, 1, 1},
      {CONVPOOL_BFLOAT16, 12, 20, 3, 1, 3, 1, 3, 1, 1, 0, 21, 22, 0, 0},
      {CONVPOOL_BFLOAT16, 9, 15, 3, 1, 1, 3, 1, 2, 2, 0, 19, 23, 1, 1},
      {CONVPOOL_BFLOAT16, 10, 4, 3, 2, 1, 2, 1, 1, 1, 0, 17, 16, 0, 0},
      {CONVPOOL_FLOAT32, 64, 64, 3, 1, 1, 8, 1, 2, 2, 0, 20, 20, 1, 1},
      {CONVPOOL_FLOAT32, 5, 7, 4, 3, 1, 1, 0, 2, 1, 0, 31, 29, 1, 0},
      {CONVPOOL_FLOAT32, 5, 7, 2, 3, 1, 1, 1, 1, 1, 0, 31, 29, 0, 0},
      {CONVPOOL_FLOAT32, 40, 23, 1, 1, 1, 1, 0, 1, 1, 0, 14, 14, 1, 1},
      {CONVPOOL_FLOAT32, 20, 37, 1, 1, 1, 1, 0, 1, 1, 0, 19, 21, 0, 1},
      {CONVPOOL_FLOAT32, 300, 13, 1, 1, 1, 1, 0, 1, 1, 0, 7, 7, 1, 0},
      {CONVPOOL_FLOAT32, 8, 14, 3, 1, 1, 1, 1, 1, 1, 0, 12, 35, 1, 1},
      {CONVPOOL_FLOAT32, 8, 14, 3, 1, 1, 1, 1, 1, 1, 0, 12, 35, 0, 0},
      /* 128 or more output channels a group: direct's 64-channel tiles
         (cp_direct_kernel) where the CPU takes them or CONVPOOL_DIRECT_MR=64
         says so, with a partial last block, a 1x1 at 7x7 (tiles of 7), two
         groups of stride 2, a dilated one in float16 */
      {CONVPOOL_FLOAT32, 40, 136, 3, 1, 1, 1, 1, 2, 2, 0, 9, 11, 1, 1},
      {CONVPOOL_FLOAT32, 24, 192, 1, 1, 1, 1, 0, 1, 1, 0, 7, 7, 1, 0},
      {CONVPOOL_FLOAT32, 16, 256, 3, 2, 1, 2, 1, 1, 1, 0, 15, 13, 0, 1},
      {CONVPOOL_FLOAT16, 20, 130, 3, 1, 2, 1, 2, 3, 2, 1, 12, 12, 0, 1},
  };
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
    const named *x = &layers[i];
    convpool_layer l;
    convpool_layer_init(&l, x->dtype, x->c_out, x->c_in, x->k, x->pool);
    l.stride = x->stride, l.dilation = x->dilation, l.groups = x->groups;
    l.has_residual = x->residual;
    for (int side = 0; side < 4; side++)
      l.padding[side] = x->pad, l.pool_padding[side] = x->pool_pad;
    l.pool_stride = x->pool_stride;
    if (x->relu) l.activation = CONVPOOL_ACTIVATION_RELU;
    (*cases)++;
    if (!check_layer(&l, 2, x->h, x->w, 1, 700 + i, NULL)) failures++;
  }
  return failures;
}

/* Depthwise layers (groups = c_in) over K 1..7, conv stride 1..4, dilation
   1..3, channel multiplier 1, 2, 3 and 9 (more than one channel block of an
   input channel), asymmetric conv padding, odd widths, channel counts that
   are not multiples of 16, batch 1..3, pools that do not divide the conv
   output, a residual, NaN and Inf in the input and the residual, each
   activation and dtype; then MobileNetV2's 3x3 layers at small sizes. */
static int check_depthwise_grid(int *cases) {
  int failures = 0, ran = 0;
  tu_rng pick = {4711};
  const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  const int64_t chans[] = {1, 5, 16, 17, 24, 33}, multipliers[] = {1, 2, 1, 2, 3, 9};
  const float specials[3] = {NAN, INFINITY, -INFINITY};
  for (int n = 0; n < 180; n++) {
    const int64_t k = 1 + n % 7, stride = 1 + n / 7 % 4;
    const int64_t dilation = 1 + (int64_t)(tu_next(&pick) % 3);
    const int64_t c_in = chans[tu_next(&pick) % 6];
    const int64_t c_out = c_in * multipliers[tu_next(&pick) % 6];
    const int64_t pool = 1 + (int64_t)(tu_next(&pick) % 3);
    convpool_layer l;
    convpool_layer_init(&l, dtypes[n % 3], c_out, c_in, k, pool);
    l.stride = stride, l.dilation = dilation, l.groups = c_in, l.has_residual = n % 3 == 1;
    const int64_t extent = dilation * (k - 1) + 1;
    for (int side = 0; side < 4; side++)
      l.padding[side] = (int64_t)(tu_next(&pick) % (uint64_t)(extent / 2 + 2));
    l.activation = (convpool_activation)(n / 3 % 3);
    if (l.activation == CONVPOOL_ACTIVATION_CLAMP) l.clamp_min = 0.0f, l.clamp_max = 6.0f;
    l.pool_stride = (int64_t)(tu_next(&pick) % (uint64_t)(pool + 1));
    for (int side = 0; side < 4; side++)
      l.pool_padding[side] = (int64_t)(tu_next(&pick) % (uint64_t)(pool / 2 + 1));
    l.ceil_mode = (int)(tu_next(&pick) % 2);
    const int64_t h = extent + (int64_t)(tu_next(&pick) % 30) - l.padding[0] - l.padding[2];
    const int64_t w = extent + (int64_t)(tu_next(&pick) % 70) - l.padding[1] - l.padding[3];
    int64_t ph, pw;
    if (h < 1 || w < 1) continue;
    cp_reference_shape(&l, h, w, &ph, &pw);
    if (ph < 1 || pw < 1) continue;
    (*cases)++, ran++;
    const int64_t batch = n % 4 == 3 ? 3 : 1 + n % 2;
    if (!check_layer_values(&l, batch, h, w, n % 5 != 0, 900 + (uint64_t)n, NULL,
                            n % 5 == 0 ? specials : NULL))
      failures++;
  }
  if (ran < 150) {
    printf("depthwise grid: only %d layers ran\n", ran);
    failures++;
  }
  /* MobileNetV2: 3x3 pad 1, ReLU6, stride 1 and 2, with and without a
     residual; odd sizes. */
  const int64_t mb[][5] = {{32, 1, 56, 57, 0},  {96, 2, 56, 55, 0}, {144, 1, 28, 28, 1},
                           {144, 2, 29, 28, 0}, {40, 1, 7, 7, 1},   {24, 2, 15, 14, 0}};
  for (size_t i = 0; i < sizeof mb / sizeof mb[0]; i++) {
    for (int dt = 0; dt < 3; dt++) {
      convpool_layer l;
      convpool_layer_init(&l, dtypes[dt], mb[i][0], mb[i][0], 3, 1);
      l.stride = mb[i][1], l.groups = mb[i][0], l.has_residual = (int)mb[i][4];
      for (int side = 0; side < 4; side++) l.padding[side] = 1;
      l.activation = CONVPOOL_ACTIVATION_CLAMP, l.clamp_min = 0.0f, l.clamp_max = 6.0f;
      (*cases)++;
      if (!check_layer(&l, 1 + dt % 2, mb[i][2], mb[i][3], 1, 980 + i, NULL)) failures++;
    }
  }
  return failures;
}

/* A depthwise layer's bytes are the same for every thread count and item
   split (rows per item), NaN and Inf in the input included. */
static int check_depthwise_splits(void) {
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 34, 17, 3, 2);
  l.groups = 17, l.stride = 2, l.dilation = 2, l.pool_stride = 1, l.has_residual = 1;
  l.padding[0] = 2, l.padding[1] = 1, l.padding[2] = 0, l.padding[3] = 3;
  const int declined = check_decline(&l);
  if (declined) return declined > 0;
  const int64_t batch = 2, h = 61, w = 45;
  int64_t ph, pw, oh, ow;
  cp_reference_shape(&l, h, w, &ph, &pw);
  cp_reference_conv_shape(&l, h, w, &oh, &ow);
  layer_case c = {l.dtype, batch, l.c_in, l.c_out, h, w, l.k, l.pool, 1, 1};
  tensors t;
  make_group_tensors(&c, l.groups, 77, &t);
  const float specials[3] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 11; i < t.x_n; i += 997) tu_set(l.dtype, t.x, i, specials[i % 3]);
  const size_t y_n = (size_t)(batch * l.c_out * ph * pw), r_n = (size_t)(batch * l.c_out * oh * ow);
  float *residual = tu_xmalloc(r_n * sizeof(float));
  fill_tensor(residual, r_n, l.dtype, 78, 1);
  float *first = tu_xmalloc(y_n * sizeof(float)), *y = tu_xmalloc(y_n * sizeof(float));
  const int threads[] = {1, 2, 3, 8, 2, 3, 1};
  const int64_t rows[] = {0, 0, 0, 0, 1, 2, 5};
  int ok = 1;
  for (int i = 0; ok && i < 7; i++) {
    convpool_options o;
    convpool_options_init(&o);
    o.threads = threads[i], o.rows_per_item = rows[i], o.algo = g_algo;
    memset(y, 0xa5, y_n * sizeof(float));
    ok =
        convpool_layer_run_residual(&l, t.x, batch, h, w, t.w, t.bias, residual, i == 0 ? first : y,
                                    y_n * sizeof(float), &o) == CONVPOOL_SUCCESS;
    if (!ok) printf("depthwise splits: %s\n", convpool_last_error());
    if (ok && i > 0 && memcmp(first, y, y_n * sizeof(float)) != 0) {
      printf("depthwise splits: threads=%d rows_per_item=%lld differs\n", threads[i],
             (long long)rows[i]);
      ok = 0;
    }
  }
  free(first), free(y), free(residual);
  free_tensors(&t);
  return ok;
}

/* x = [[-inf, 1], [1, 1]], w = 1, bias = +inf, pool 2: torch gives NaN. */
static int check_infinite_bias(void) {
  const int declined = declined_dense(1, 1, 1);
  if (declined) return declined > 0;
  const float x[4] = {-INFINITY, 1, 1, 1}, w[1] = {1}, b[1] = {INFINITY};
  float y[1] = {0};
  convpool_options o;
  convpool_options_init(&o);
  o.algo = g_algo;
  convpool_status st =
      convpool_conv2d_maxpool(CONVPOOL_FLOAT32, x, 1, 1, 2, 2, w, 1, 1, b, 2, y, sizeof y, &o);
  if (st != CONVPOOL_SUCCESS || !isnan(y[0])) {
    printf("infinite bias: got %g (status %s), torch gives nan\n", (double)y[0],
           convpool_status_string(st));
    return 0;
  }
  return 1;
}

/* Winograd and shift-reduce agree on which outputs are NaN or +-Inf, and on
   their values, for scattered non-finite inputs (tiles holding one are
   computed directly, on the products' kind of kernel); the finite outputs
   agree within the bound. 13 output channels: F(4x4, 3x3)'s products on
   shift-reduce's kernels; 130 (with vector kernels): on the
   channels-in-lanes ones, a partial block of 2 channels last. */
static int check_nonfinite_vs_sr_case(layer_case c);
static int check_nonfinite_vs_sr(convpool_dtype dtype) {
  const layer_case a = {dtype, 2, 8, 13, 37, 41, 3, 2, 1, 1};
  const layer_case b = {dtype, 2, 8, 130, 21, 19, 3, 2, 1, 1};
  return check_nonfinite_vs_sr_case(a) && check_nonfinite_vs_sr_case(b);
}

static int check_nonfinite_vs_sr_case(layer_case c) {
  const convpool_dtype dtype = c.dtype;
  tensors t;
  make_tensors(&c, 123, &t);
  const float specials[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 12; i++) {
    const size_t at = (size_t)(i * 7919) % t.x_n;
    const float v = specials[i % 3];
    tu_set(dtype, t.x, at, v);
  }
  void *ys = tu_xmalloc(t.y_bytes), *yw = tu_xmalloc(t.y_bytes);
  const convpool_algo keep = g_algo;
  g_algo = CONVPOOL_ALGO_SHIFT_REDUCE;
  int ok = run(&c, &t, 2, ys);
  g_algo = keep;
  ok = ok && run(&c, &t, 3, yw);
  double *ref = tu_xmalloc(t.y_n * sizeof(double)), *bound = tu_xmalloc(t.y_n * sizeof(double));
  cp_reference(dtype, t.x, c.batch, c.c_in, c.height, c.width, t.w, c.c_out, c.k, t.bias, c.pool,
               ref, bound);
  int specials_seen = 0;
  for (size_t i = 0; ok && i < t.y_n; i++) {
    const double s = get(dtype, ys, i), w = get(dtype, yw, i);
    if (isfinite(s) && isfinite(w)) {
      ok = close_enough(dtype, w, ref[i], bound[i]);
    } else {
      specials_seen++;
      ok = (isnan(s) && isnan(w)) || s == w;
    }
    if (!ok)
      printf("non-finite vs sr %s at %zu: winograd %g, shift-reduce %g\n",
             convpool_dtype_name(dtype), i, w, s);
  }
  if (ok && specials_seen == 0) {
    printf("non-finite vs sr: no non-finite output, the test is not testing\n");
    ok = 0;
  }
  free(ref), free(bound), free(ys), free(yw);
  free_tensors(&t);
  return ok;
}

/* ---- huge and high-dynamic-range finite data ---- */

static float normal_value(tu_rng *rng) {
  const double u = ((double)(tu_next(rng) >> 11) + 0.5) * 0x1p-53;
  const double v = (double)(tu_next(rng) >> 11) * 0x1p-53;
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/*
 * A float32 layer with conv padding 1 (no bias, no pooling) on x and wt,
 * against the reference: every output within the contract's bound, except
 * outputs whose sum |x*w| reaches the fp32 range, where fp32 sums overflow
 * (torch's too). For Winograd, also against shift-reduce: where that is not
 * finite, the same value (+inf where every product is positive, not NaN).
 * Returns 1 if so.
 */
static int check_data_case(const char *what, int64_t c_in, int64_t c_out, int64_t h, int64_t w,
                           const float *x, const float *wt) {
  if (declined_dense(c_out, c_in, 3)) return 1;
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, c_out, c_in, 3, 1);
  for (int s = 0; s < 4; s++) l.padding[s] = 1;
  const size_t n = (size_t)(c_out * h * w);
  float *y = tu_xmalloc(n * sizeof(float)), *ys = tu_xmalloc(n * sizeof(float));
  double *ref = tu_xmalloc(n * sizeof(double)), *bound = tu_xmalloc(n * sizeof(double));
  convpool_options o;
  convpool_options_init(&o);
  o.algo = g_algo;
  int ok =
      convpool_layer_run(&l, x, 1, h, w, wt, NULL, y, n * sizeof(float), &o) == CONVPOOL_SUCCESS;
  o.algo = CONVPOOL_ALGO_SHIFT_REDUCE;
  ok = ok &&
       convpool_layer_run(&l, x, 1, h, w, wt, NULL, ys, n * sizeof(float), &o) == CONVPOOL_SUCCESS;
  if (!ok) printf("%s: %s\n", what, convpool_last_error());
  cp_reference_layer(&l, x, 1, h, w, wt, NULL, ref, bound);
  size_t bad = 0, first = 0;
  for (size_t i = 0; ok && i < n; i++) {
    int good = close_enough(CONVPOOL_FLOAT32, y[i], ref[i], bound[i]) || !(bound[i] < FLT_MAX);
    if (winograd(g_algo) && !isfinite(ys[i])) good = (isnan(ys[i]) && isnan(y[i])) || ys[i] == y[i];
    if (!good && bad++ == 0) first = i;
  }
  if (bad > 0) {
    printf("%s: %zu outputs wrong, first %zu: got %.9g want %.9g (bound %.3g, shift-reduce %.9g)\n",
           what, bad, first, (double)y[first], ref[first], bound[first], (double)ys[first]);
    ok = 0;
  }
  free(y), free(ys), free(ref), free(bound);
  return ok;
}

/* One fp32 image of hw x hw through a 3x3 layer of conv padding 1, no bias,
   with each of `count` algorithms: y[a] (allocated here) their outputs;
   1 if every run succeeded. */
static int run_padded_3x3(int64_t c_in, int64_t c_out, int64_t hw, const float *x, const float *wt,
                          const convpool_algo *algos, int count, float **y) {
  const size_t n = (size_t)(c_out * hw * hw);
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, c_out, c_in, 3, 1);
  for (int side = 0; side < 4; side++) l.padding[side] = 1;
  int ok = 1;
  for (int a = 0; a < count; a++) {
    y[a] = tu_xmalloc(n * sizeof(float));
    convpool_options o;
    convpool_options_init(&o);
    o.algo = algos[a];
    ok = ok && convpool_layer_run(&l, x, 1, hw, hw, wt, NULL, y[a], n * sizeof(float), &o) ==
                   CONVPOOL_SUCCESS;
  }
  return ok;
}

/*
 * A tile the range rule flags in part (winograd.h, cp_wino_screen_tile): in
 * [0, 1) data, one input of 12 at row 2, column 2 of channel 0 lies in the
 * top-left tile of both tile sizes but outside its corner output's window,
 * which conv padding leaves 4 positions: that output fails the rule (c_in
 * x 12 above 4 times its window sum) and the tile's output (1, 1), whose
 * whole window holds the input, passes. The direct path recomputes the
 * corner output, shift-reduce's bits (F(4x4)'s shift-reduce path) or the
 * direct algorithm's (the channels-in-lanes path), in every channel, and
 * output (1, 1) keeps Winograd's, which differ from both in some channel.
 * Both paths: 32 -> 32 channels (shift-reduce products on AVX-512) and 24 ->
 * 136 (channels in lanes). Returns the failures.
 */
static int check_partly_flagged_tile(int *cases) {
  int failures = 0;
  const int64_t hw = 32, c_ins[2] = {32, 24}, c_outs[2] = {32, 136};
  for (int k = 0; k < 2; k++) {
    const int64_t c_in = c_ins[k], c_out = c_outs[k];
    if (declined_dense(c_out, c_in, 3)) continue;
    tu_rng rng = {777 + (uint64_t)k};
    const size_t n_x = (size_t)(c_in * hw * hw), n_w = (size_t)(c_out * c_in * 9);
    float *x = tu_xmalloc(n_x * sizeof(float)), *wt = tu_xmalloc(n_w * sizeof(float));
    for (size_t i = 0; i < n_x; i++) x[i] = tu_uniform(&rng);
    for (size_t i = 0; i < n_w; i++) wt[i] = 0.5f + 0.5f * tu_uniform(&rng); /* even filters */
    x[2 * hw + 2] = 12.0f;
    float *y[3];
    const convpool_algo algos[3] = {g_algo, CONVPOOL_ALGO_SHIFT_REDUCE, CONVPOOL_ALGO_DIRECT};
    const int ok = run_padded_3x3(c_in, c_out, hw, x, wt, algos, 3, y);
    (*cases)++;
    if (!ok) {
      printf("partly flagged tile, %lld -> %lld: %s\n", (long long)c_in, (long long)c_out,
             convpool_last_error());
      failures++;
    } else {
      int corner_direct = 1, kept = 0;
      for (int64_t co = 0; co < c_out; co++) {
        const size_t at = (size_t)(co * hw * hw), inner = at + (size_t)hw + 1;
        corner_direct &= y[0][at] == y[1][at] || y[0][at] == y[2][at];
        kept |= y[0][inner] != y[1][inner] && y[0][inner] != y[2][inner];
      }
      if (!corner_direct || !kept) {
        printf("partly flagged tile, %lld -> %lld: corner outputs %s, output (1, 1) %s\n",
               (long long)c_in, (long long)c_out,
               corner_direct ? "recomputed" : "not all recomputed directly",
               kept ? "Winograd's" : "recomputed in every channel");
        failures++;
      }
    }
    for (int a = 0; a < 3; a++) free(y[a]);
    free(x), free(wt);
  }
  return failures;
}

/*
 * Auto's Winograd with the direct tiles' weights packed by the direct
 * algorithm (cp_algorithm.packs_for, for its hand-overs) in the layout
 * Winograd's flagged tiles read: 512 -> 512 at 14x14 (F(2x2, 3x3) with
 * direct blocks of 64 channels where the CPU takes them, and of 32 in
 * Winograd's) with an outlier that flags tiles, against direct, whose outputs the flagged ones are
 * and the rest lie within 1e-4 of (a layout of 64-channel blocks read as 32 was 3% off in the fused
 * VGG-16).
 */
static int check_handover_layout(void) {
  const int64_t c = 512, hw = 14;
  tu_rng rng = {4242};
  const size_t n_x = (size_t)(c * hw * hw), n_w = (size_t)(c * c * 9), n = n_x;
  float *x = tu_xmalloc(n_x * sizeof(float)), *wt = tu_xmalloc(n_w * sizeof(float));
  for (size_t i = 0; i < n_x; i++) x[i] = tu_uniform(&rng);
  for (size_t i = 0; i < n_w; i++) wt[i] = tu_uniform(&rng) - 0.5f;
  for (int64_t ch = 0; ch < c; ch++) x[(size_t)(ch * hw * hw + 5 * hw + 6)] = 1000.0f;
  const convpool_algo algos[2] = {CONVPOOL_ALGO_AUTO, CONVPOOL_ALGO_DIRECT};
  float *y[2];
  const int ok = run_padded_3x3(c, c, hw, x, wt, algos, 2, y);
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; ok && i < n; i++) {
    const double d = fabs((double)y[0][i] - (double)y[1][i]);
    if (d > worst) worst = d;
    if (fabs((double)y[1][i]) > scale) scale = fabs((double)y[1][i]);
  }
  if (!ok)
    printf("hand-over layout: %s\n", convpool_last_error());
  else if (worst > 1e-4 * scale)
    printf("hand-over layout: auto differs from direct by %g (largest |output| %g)\n", worst,
           scale);
  free(x), free(wt), free(y[0]), free(y[1]);
  return ok && worst <= 1e-4 * scale;
}

/*
 * Winograd F(4x4) on images side by side where U outgrows L3 (winograd.c,
 * cp_wino_images), their regions shared by the channel groups in rounds
 * (plan.h): 8 images of 512 -> 512 at 14x14, pool 2, ReLU, the regions of 4
 * images each too large for two in half of a 32 MiB L3. The same bytes at
 * 1 and 3 threads and in items of one pooled row (one image each, no
 * phase), the first image within the bound of the reference. The plan says
 * whether this machine's caches took that path; the bytes are checked
 * either way.
 */
static int check_images_in_rounds(void) {
  const int64_t batch = 8, c = 512, hw = 14;
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, c, c, 3, 2);
  for (int s = 0; s < 4; s++) l.padding[s] = 1;
  l.activation = CONVPOOL_ACTIVATION_RELU;
  layer_case lc = {CONVPOOL_FLOAT32, batch, c, c, hw, hw, 3, 2, 1, 1};
  tensors t;
  make_tensors(&lc, 77, &t);
  const size_t n = (size_t)(batch * c * 7 * 7), image = (size_t)(c * 7 * 7);
  float *y[3];
  int ok = 1;
  for (int run = 0; run < 3; run++) {
    y[run] = tu_xmalloc(n * sizeof(float));
    convpool_options o;
    convpool_options_init(&o);
    o.algo = g_algo;
    o.threads = run == 1 ? 1 : run == 0 ? 2 : 3;
    if (run == 2) o.rows_per_item = 1;
    if (ok && convpool_layer_run(&l, t.x, batch, hw, hw, t.w, t.bias, y[run], n * sizeof(float),
                                 &o) != CONVPOOL_SUCCESS) {
      printf("images in rounds: %s\n", convpool_last_error());
      ok = 0;
    }
  }
  for (int run = 1; ok && run < 3; run++)
    if (memcmp(y[0], y[run], n * sizeof(float)) != 0) {
      printf("images in rounds: %s differs from 2 threads\n",
             run == 1 ? "1 thread" : "items of one pooled row");
      ok = 0;
    }
  double *ref = tu_xmalloc(image * sizeof(double)), *bound = tu_xmalloc(image * sizeof(double));
  cp_reference_layer(&l, t.x, 1, hw, hw, t.w, t.bias, ref, bound);
  for (size_t i = 0; ok && i < image; i++)
    if (!close_enough(CONVPOOL_FLOAT32, y[0][i], ref[i], bound[i])) {
      printf("images in rounds at %zu: got %.9g want %.9g (bound %.3g)\n", i, (double)y[0][i],
             ref[i], bound[i]);
      ok = 0;
    }
  convpool_options o;
  convpool_options_init(&o);
  o.algo = g_algo, o.threads = 2;
  convpool_op *op = NULL;
  char text[4096] = "";
  if (convpool_op_create_layer(&l, t.w, t.bias, &o, &op) == CONVPOOL_SUCCESS &&
      convpool_op_describe(op, batch, hw, hw, text, sizeof text) == CONVPOOL_SUCCESS)
    printf("images in rounds: %s side by side, %s\n",
           strstr(text, "images side by side") != NULL ? "images" : "no images",
           strstr(text, "in rounds of") != NULL ? "regions in rounds" : "no rounds");
  convpool_op_destroy(op);
  for (int run = 0; run < 3; run++) free(y[run]);
  free(ref), free(bound);
  free_tensors(&t);
  return ok;
}

/*
 * Finite data that Winograd's transforms used to turn into NaN or Inf, or
 * whose range spread its rounding errors past the contract's bound: one
 * input of 3e38 (its inner transform points overflowed); every input 1e38
 * with weights 1 (sums overflow: +inf as shift-reduce and torch, not NaN);
 * weights 2e38 (U overflowed fp32); one input 1e20 among N(0,1) values; one
 * input 1e3 or 1e5 among values in [0, 1); every 53rd input 1e4.
 */
static int check_huge_and_wide_data(int *cases) {
  int failures = 0;
  const int64_t c = 32, hw = 32, n_x = c * hw * hw, n_w = c * c * 9;
  float *x = tu_xmalloc((size_t)n_x * sizeof(float)), *wt = tu_xmalloc((size_t)n_w * sizeof(float));
  tu_rng rng = {4242};
  for (int64_t i = 0; i < n_x; i++) x[i] = tu_uniform(&rng);
  for (int64_t i = 0; i < n_w; i++) wt[i] = 1e-3f * tu_uniform(&rng);
  x[8 * hw + 8] = 3e38f;
  (*cases)++;
  failures += !check_data_case("one input 3e38", c, c, hw, hw, x, wt);
  for (int64_t i = 0; i < n_x; i++) x[i] = 1e38f;
  for (int64_t i = 0; i < n_w; i++) wt[i] = 1.0f;
  (*cases)++;
  failures += !check_data_case("every input 1e38, weights 1", c, c, hw, hw, x, wt);
  for (int64_t i = 0; i < n_x; i++) x[i] = 1e-6f;
  for (int64_t i = 0; i < n_w; i++) wt[i] = 2e38f;
  (*cases)++;
  failures += !check_data_case("weights 2e38, inputs 1e-6", c, c, hw, hw, x, wt);
  for (int64_t i = 0; i < n_x; i++) x[i] = normal_value(&rng);
  for (int64_t i = 0; i < n_w; i++) wt[i] = normal_value(&rng);
  x[8 * hw + 8] = 1e20f;
  (*cases)++;
  failures += !check_data_case("one input 1e20 among N(0,1)", c, c, hw, hw, x, wt);
  const float spikes[2] = {1e3f, 1e5f};
  for (int k = 0; k < 2; k++) {
    const int64_t c_in = 16, c_out = 64;
    for (int64_t i = 0; i < c_in * hw * hw; i++) x[i] = tu_uniform(&rng);
    float *w2 = tu_xmalloc((size_t)(c_out * c_in * 9) * sizeof(float));
    for (int64_t i = 0; i < c_out * c_in * 9; i++) w2[i] = tu_uniform(&rng);
    x[8 * hw + 8] = spikes[k];
    (*cases)++;
    failures += !check_data_case(
        k == 0 ? "one input 1e3 among [0, 1), 16 -> 64" : "one input 1e5 among [0, 1), 16 -> 64",
        c_in, c_out, hw, hw, x, w2);
    free(w2);
  }
  /* spikes all over: many flagged tiles per item, several register tiles of
     their outputs, input channels past a multiple of 16, a partial last
     block; with 136 output channels Winograd's products and flagged tiles
     run on the channels-in-lanes kernels (vector ISAs) */
  const int64_t spread_out[2] = {40, 136};
  for (int k = 0; k < 2; k++) {
    const int64_t c_in = 24, c_out = spread_out[k];
    for (int64_t i = 0; i < c_in * hw * hw; i++) x[i] = i % 53 == 0 ? 1e4f : tu_uniform(&rng);
    float *w2 = tu_xmalloc((size_t)(c_out * c_in * 9) * sizeof(float));
    for (int64_t i = 0; i < c_out * c_in * 9; i++) w2[i] = tu_uniform(&rng) - 0.25f;
    (*cases)++;
    failures += !check_data_case(k == 0 ? "every 53rd input 1e4 among [0, 1), 24 -> 40"
                                        : "every 53rd input 1e4 among [0, 1), 24 -> 136",
                                 c_in, c_out, hw, hw, x, w2);
    free(w2);
  }
  free(x), free(wt);
  return failures;
}

/* bf16 subnormals: x = w = 1e-20, c_in = 2, k = 1. The products (1e-40) and
   their sum are subnormal: vdpbf16ps (the avx512bf16 kernel) flushes them
   to 0, every other kernel keeps them (convpool.h, CONVPOOL_BFLOAT16). */
static int check_bf16_subnormals(void) {
  const int declined = declined_dense(1, 2, 1);
  if (declined) return declined > 0;
  const uint16_t v = cp_float_to_bf16(1e-20f);
  const uint16_t x[2] = {v, v}, w[2] = {v, v};
  uint16_t y[1] = {0x7fff};
  convpool_options o;
  convpool_options_init(&o);
  o.algo = g_algo;
  convpool_op *op = NULL;
  convpool_plan_info info;
  if (convpool_op_create(CONVPOOL_BFLOAT16, w, NULL, 1, 2, 1, 1, &o, &op) != CONVPOOL_SUCCESS ||
      convpool_op_plan(op, 1, 1, 1, &info) != CONVPOOL_SUCCESS ||
      convpool_op_run(op, x, 1, 1, 1, y, sizeof y) != CONVPOOL_SUCCESS) {
    printf("bf16 subnormals: %s\n", convpool_last_error());
    convpool_op_destroy(op);
    return 0;
  }
  convpool_op_destroy(op);
  const float a = cp_bf16_to_float(v);
  const uint16_t want = strcmp(info.isa, "avx512bf16") == 0 ? 0 : cp_float_to_bf16(a * a + a * a);
  if (y[0] != want) {
    printf("bf16 subnormals on %s: got 0x%04x (%g), want 0x%04x\n", info.isa, y[0],
           (double)cp_bf16_to_float(y[0]), want);
    return 0;
  }
  printf("bf16 subnormals on %s (%s): %g as documented\n", info.isa, info.kernel,
         (double)cp_bf16_to_float(y[0]));
  return 1;
}

/* The ISA asked for with CONVPOOL_ISA must be the one that runs: exit 77
   (skipped) when this CPU lacks it, rather than test a lower one. */
static void skip_unless_isa_runs(void) {
  const char *want = getenv("CONVPOOL_ISA");
  convpool_info info;
  convpool_get_info(&info);
  if (want == NULL || strcmp(want, info.isa) == 0 ||
      (strcmp(want, "avx512") == 0 && strcmp(info.isa, "avx512f") == 0))
    return;
  printf("SKIP: CONVPOOL_ISA=%s but this CPU runs %s (it lacks %s)\n", want, info.isa, want);
  exit(77);
}

int main(int argc, char **argv) {
  int failures = 0, cases = 0;
  skip_unless_isa_runs();
  if (argc > 1 && convpool_algo_from_name(argv[1], &g_algo) != CONVPOOL_SUCCESS) {
    printf("%s\n", convpool_last_error());
    return 2;
  }
  const int64_t ks[] = {1, 2, 3, 5};
  const int64_t chans[] = {1, 3, 16, 17, 64};
  const int64_t sizes[] = {0, 1, 2, 4, 7, 12, 23, 36}; /* added to k */
  tu_rng pick = {2024};
  /* Every K x pool x dtype x bias/sign combination, with spread shapes. */
  for (int ki = 0; ki < 4; ki++)
    for (int64_t pool = 1; pool <= 3; pool++)
      for (int dt = 0; dt < 3; dt++)
        for (int variant = 0; variant < 4; variant++)
          for (int rep = 0; rep < 3; rep++) {
            layer_case c;
            const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
            c.dtype = dtypes[dt];
            c.k = ks[ki];
            c.pool = pool;
            c.bias = variant & 1;
            c.signed_data = (variant >> 1) & 1;
            c.batch = tu_next(&pick) % 3 == 0 ? 3 : 1;
            c.c_in = chans[tu_next(&pick) % 5];
            c.c_out = chans[tu_next(&pick) % 5];
            c.height = c.k + pool - 1 + sizes[tu_next(&pick) % 8];
            c.width = c.k + pool - 1 + sizes[tu_next(&pick) % 8];
            if (c.c_in * c.c_out > 1024 && c.height * c.width > 900) c.height = c.k + pool + 5;
            cases++;
            if (!check_case(&c, (uint64_t)cases, rep == 0 ? 1 : 2)) failures++;
          }
  /* Named edges: K = H (one conv row), OW = 1, pool not dividing, wide rows, big k. */
  const layer_case edges[] = {
      {CONVPOOL_FLOAT32, 1, 3, 5, 5, 9, 5, 1, 1, 1},
      {CONVPOOL_FLOAT32, 2, 4, 3, 9, 3, 3, 1, 0, 1},
      {CONVPOOL_FLOAT32, 1, 2, 17, 12, 40, 3, 3, 1, 1},
      {CONVPOOL_FLOAT16, 3, 17, 3, 40, 11, 2, 3, 1, 1},
      {CONVPOOL_FLOAT32, 1, 5, 13, 8, 300, 3, 2, 1, 0},
      {CONVPOOL_FLOAT32, 1, 2, 3, 20, 20, 7, 4, 1, 1},
      {CONVPOOL_FLOAT32, 1, 1, 1, 1, 1, 1, 1, 0, 1},
      {CONVPOOL_FLOAT16, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {CONVPOOL_FLOAT32, 1, 3, 2, 70, 70, 2, 33, 1, 1},
      {CONVPOOL_FLOAT32, 2, 200, 20, 9, 9, 3, 1, 1, 1},
  };
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    cases++;
    if (!check_case(&edges[i], 7 + i, 2)) failures++;
  }
  /* Determinism: thread counts 1, 2, 3, 8 and a repeated run. */
  const layer_case det[] = {
      {CONVPOOL_FLOAT32, 2, 17, 64, 30, 37, 3, 2, 1, 1},
      {CONVPOOL_FLOAT16, 3, 16, 17, 23, 19, 5, 3, 1, 1},
      {CONVPOOL_FLOAT32, 1, 64, 64, 34, 18, 3, 1, 0, 0},
      {CONVPOOL_BFLOAT16, 2, 33, 20, 21, 40, 3, 2, 1, 1},
  };
  for (size_t i = 0; i < sizeof det / sizeof det[0]; i++) {
    cases++;
    if (!check_determinism(&det[i], 50 + i)) failures++;
  }
  failures += check_layer_grid(&cases);
  failures += check_conv_grid(&cases);
  failures += check_depthwise_grid(&cases);
  cases++;
  if (!check_depthwise_splits()) failures++;
  cases++;
  if (!check_bf16_subnormals()) failures++;
  cases++;
  if (!check_infinite_bias()) failures++;
  cases += 3;
  if (!check_nonfinite(CONVPOOL_FLOAT32)) failures++;
  if (!check_nonfinite(CONVPOOL_FLOAT16)) failures++;
  if (!check_nonfinite(CONVPOOL_BFLOAT16)) failures++;
  failures += check_huge_and_wide_data(&cases);
  if (g_algo == CONVPOOL_ALGO_WINOGRAD) {
    /* auto's hand-overs from Winograd (U of 8 MiB or more): images of 8x8
       or less to direct on its own weights (batch 3 at 7x7; pool 2 over 8x8
       with 260 channels, a partial block), one image of 12x12 to F(2x2) */
    const layer_case handed[] = {
        {CONVPOOL_FLOAT32, 3, 256, 256, 9, 9, 3, 1, 1, 1},
        {CONVPOOL_BFLOAT16, 1, 256, 260, 10, 10, 3, 2, 1, 1},
        {CONVPOOL_FLOAT32, 1, 256, 256, 14, 14, 3, 1, 0, 1},
    };
    g_algo = CONVPOOL_ALGO_AUTO;
    for (size_t i = 0; i < sizeof handed / sizeof handed[0]; i++) {
      cases++;
      if (!check_case(&handed[i], 90 + i, 2)) failures++;
    }
    cases++;
    if (!check_determinism(&handed[0], 95)) failures++;
    g_algo = CONVPOOL_ALGO_WINOGRAD;
  }
  if (g_algo == CONVPOOL_ALGO_WINOGRAD) {
    cases += 2;
    if (!check_images_in_rounds()) failures++;
    if (!check_handover_layout()) failures++;
  }
  if (winograd(g_algo)) {
    failures += check_partly_flagged_tile(&cases);
    cases += 3;
    if (!check_nonfinite_vs_sr(CONVPOOL_FLOAT32)) failures++;
    if (!check_nonfinite_vs_sr(CONVPOOL_FLOAT16)) failures++;
    if (!check_nonfinite_vs_sr(CONVPOOL_BFLOAT16)) failures++;
  }
  convpool_info info;
  convpool_get_info(&info);
  printf("isa %s, algo %s: %d cases, %d failed\n", info.isa, argc > 1 ? argv[1] : "auto", cases,
         failures);
  return failures ? 1 : 0;
}
