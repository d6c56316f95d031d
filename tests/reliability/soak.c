/*
 * Soak test: random small layers against the scalar reference, with the
 * tolerance of tests/test_layer.c, over dtypes (float32, float16, bfloat16), pools,
 * filter sizes, thread counts, rows_per_item values, bias on/off, every
 * algorithm (auto, shift-reduce, im2col, Winograd with k = 3), and both the operator API (one
 * operator run on three input sizes) and the one-shot call. Half the layers also draw the layer
 * parameters: conv padding (0 .. k + 1 per side), activation, pool stride, pool padding and ceil
 * sizing. A third draw the conv fields: stride 1-3, dilation 1-3 (1 on shift-reduce, which
 * declines it for k > 1), groups (1, a common divisor of c_in and c_out, depthwise with
 * channel multiplier 1 or 2), a residual half the time, pool padding up to P - 1 and ceil
 * sizing; Winograd keeps stride, dilation and groups 1. Heights and widths then start at the
 * dilated filter's extent plus the pool's span.
 *
 * Resources are checked as it goes: every library allocation goes through a
 * counting allocator (nothing may be outstanding after a destroy), the
 * process's thread count must return to its starting value after every
 * destroy, and the resident set (/proc/self/statm) must not grow after the
 * warm-up (skipped in sanitizer builds and under valgrind, whose quarantine
 * and shadow memory grow it by design: memcheck's RSS grew 9 MB over 40
 * cases that hold 8 library blocks at most).
 *
 * Usage: soak [cases [seed]]     (default 300 cases, seed 1)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rel_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define REL_SANITIZED 1
#endif
#endif

/* Bounds of the random layers; buffers are allocated once at these sizes. */
#define MAX_BATCH 3
#define MAX_CIN 12
#define MAX_COUT 40
#define MAX_K 5
#define MAX_POOL 4
#define MAX_STRIDE 3
#define MAX_DILATION 3
#define MAX_EXTRA 30 /* height, width = extent + stride (pool - 1) + [0, MAX_EXTRA] */
#define MAX_HW (MAX_DILATION * (MAX_K - 1) + 1 + MAX_STRIDE * (MAX_POOL - 1) + MAX_EXTRA)
#define RSS_SLACK_KIB 8192 /* allowed growth after warm-up */

/* Valgrind preloads its own libraries into the program it runs. */
static int under_valgrind(void) {
  const char *preload = getenv("LD_PRELOAD");
  return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

static long resident_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

/*
 * The thread count, once it has settled at `want` (or after about 0.5 s). A
 * joined thread can still be counted for a moment: pthread_join returns when
 * the thread has cleared its tid, slightly before the kernel reaps it.
 */
static int settled_thread_count(int want) {
  int n = thread_count();
  for (int i = 0; i < 500 && n != want; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    n = thread_count();
  }
  return n;
}

static int64_t pick(tu_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(tu_next(r) % (uint64_t)(hi - lo + 1));
}

/* A random input size for the layer l of c (keeps the filter and pool): at least the
   dilated filter's extent plus the pool's span in conv strides. */
static void random_input(tu_rng *r, rel_case *c, const convpool_layer *l) {
  const int64_t least = l->dilation * (c->k - 1) + 1 + l->stride * (c->pool - 1);
  c->batch = pick(r, 1, MAX_BATCH);
  c->height = least + pick(r, 0, MAX_EXTRA);
  c->width = least + pick(r, 0, MAX_EXTRA);
  if (pick(r, 0, 5) == 0) c->height = least; /* a single pooled row */
  if (pick(r, 0, 5) == 0) c->width = least;  /* a single pooled column */
}

typedef struct buffers {
  void *x, *w, *bias, *y, *residual;
  size_t y_cap; /* bytes of y, and of residual */
} buffers;

static int64_t gcd64(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* Run case c through op (or the one-shot call if op is NULL) and check it. */
static int run_and_check(convpool_op *op, const rel_case *c, const convpool_layer *l,
                         const convpool_options *o, const buffers *b, int threads,
                         int rows_per_item, long index) {
  const size_t es = convpool_dtype_size(c->dtype);
  tu_rng data = {(uint64_t)index * 7919 + 17};
  rel_fill(b->x, rel_x_count(c), c->dtype, &data, -1.0f, 1.0f);
  int64_t ph, pw, oh, ow;
  cp_reference_shape(l, c->height, c->width, &ph, &pw);
  cp_reference_conv_shape(l, c->height, c->width, &oh, &ow);
  const size_t y_bytes = (size_t)(c->batch * c->c_out * ph * pw) * es;
  const size_t r_bytes = (size_t)(c->batch * c->c_out * oh * ow) * es;
  char d[200];
  rel_describe(c, d, sizeof d);
  if (y_bytes > b->y_cap || r_bytes > b->y_cap) { /* the bounds above are wrong */
    REL_CHECK(0, "case %ld (%s): %zu and %zu bytes of output and residual, buffers of %zu", index,
              d, y_bytes, r_bytes, b->y_cap);
    return 0;
  }
  const void *residual = l->has_residual ? b->residual : NULL;
  if (residual != NULL) rel_fill(b->residual, r_bytes / es, c->dtype, &data, -1.0f, 1.0f);
  memset(b->y, 0xEE, y_bytes);
  convpool_status st = op != NULL ? convpool_op_run_residual(op, b->x, c->batch, c->height,
                                                             c->width, residual, b->y, y_bytes)
                                  : convpool_layer_run_residual(
                                        l, b->x, c->batch, c->height, c->width, b->w,
                                        c->bias ? b->bias : NULL, residual, b->y, y_bytes, o);
  /* rows_per_item larger than the pooled rows is refused; anything else must run. */
  if (rows_per_item > ph) {
    REL_CHECK(st == CONVPOOL_INVALID_ARGUMENT, "case %ld (%s, rows_per_item %d): %s, want refusal",
              index, d, rows_per_item, convpool_status_string(st));
    return st == CONVPOOL_INVALID_ARGUMENT;
  }
  if (st != CONVPOOL_SUCCESS) {
    REL_CHECK(0, "case %ld (%s, threads %d, rows_per_item %d): %s: %s", index, d, threads,
              rows_per_item, convpool_status_string(st), convpool_last_error());
    return 0;
  }
  char why[400];
  int ok = rel_check_residual_output(l, c->batch, c->height, c->width, b->x, b->w,
                                     c->bias ? b->bias : NULL, residual, b->y, why, sizeof why);
  REL_CHECK(ok == 1, "case %ld (threads %d, rows_per_item %d): %s", index, threads, rows_per_item,
            why);
  return ok == 1;
}

int main(int argc, char **argv) {
  long cases = argc > 1 ? atol(argv[1]) : 300;
  unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  if (cases < 1) cases = 1;
  const size_t fmax = sizeof(float);
  /* outputs: conv padding k + 1 per side and pool padding P - 1 keep the pooled and
     the conv output within MAX_HW + 2 MAX_K + 2 per side (run_and_check checks it) */
  const size_t y_cap =
      (size_t)MAX_BATCH * MAX_COUT * (MAX_HW + 2 * MAX_K + 2) * (MAX_HW + 2 * MAX_K + 2) * fmax;
  buffers b = {malloc((size_t)MAX_BATCH * MAX_CIN * MAX_HW * MAX_HW * fmax),
               malloc((size_t)MAX_COUT * MAX_CIN * MAX_K * MAX_K * fmax),
               malloc((size_t)MAX_COUT * fmax),
               malloc(y_cap),
               malloc(y_cap),
               y_cap};
  if (!b.x || !b.w || !b.bias || !b.y || !b.residual) {
    fprintf(stderr, "soak: out of memory\n");
    return 2;
  }
  rel_alloc counting;
  rel_alloc_init(&counting);
  convpool_allocator iface = rel_alloc_interface(&counting);
  tu_rng r = {seed};
  /* The baseline thread count is taken after one operator has come and gone,
     so helper threads that a runtime starts on first use (ThreadSanitizer's,
     for one) are part of it. */
  {
    convpool_options o;
    convpool_options_init(&o);
    o.threads = 2;
    convpool_op *op = NULL;
    rel_fill(b.w, 1, CONVPOOL_FLOAT32, &r, 0.0f, 1.0f);
    if (convpool_op_create(CONVPOOL_FLOAT32, b.w, NULL, 1, 1, 1, 1, &o, &op) == CONVPOOL_SUCCESS)
      convpool_op_destroy(op);
  }
  int threads_at_start = thread_count();
  for (int i = 0; i < 50; i++) { /* until two reads 10 ms apart agree */
    struct timespec ten_ms = {0, 10000000};
    nanosleep(&ten_ms, NULL);
    const int again = thread_count();
    if (again == threads_at_start) break;
    threads_at_start = again;
  }
  const long warmup = cases / 10 > 20 ? cases / 10 : (cases > 20 ? 20 : cases);
  long rss_warm = -1, rss_max = -1, runs = 0, passed = 0, done = 0;
  long by_dtype[3] = {0, 0, 0}, by_algo[2] = {0, 0}, one_shot = 0, forced_rows = 0, wino = 0,
       direct = 0, made_for_shape = 0;
  long with_params = 0, with_conv = 0, depthwise = 0, with_residual = 0;

  for (long i = 0; i < cases; i++) {
    rel_case c;
    static const convpool_dtype dtypes[3] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
    c.dtype = dtypes[pick(&r, 0, 2)];
    c.c_in = pick(&r, 1, MAX_CIN);
    c.c_out = pick(&r, 1, MAX_COUT);
    c.k = pick(&r, 1, MAX_K);
    static const convpool_algo algos[6] = {CONVPOOL_ALGO_AUTO,   CONVPOOL_ALGO_SHIFT_REDUCE,
                                           CONVPOOL_ALGO_IM2COL, CONVPOOL_ALGO_WINOGRAD,
                                           CONVPOOL_ALGO_DIRECT, CONVPOOL_ALGO_WINOGRAD_2X3};
    const convpool_algo algo = algos[pick(&r, 0, 5)];
    const int wino_algo = algo == CONVPOOL_ALGO_WINOGRAD || algo == CONVPOOL_ALGO_WINOGRAD_2X3;
    if (wino_algo) c.k = 3; /* its filter */
    c.pool = pick(&r, 1, MAX_POOL);
    c.bias = (int)pick(&r, 0, 1);
    convpool_layer l;
    convpool_layer_init(&l, c.dtype, c.c_out, c.c_in, c.k, c.pool);
    if (pick(&r, 0, 1)) { /* the layer parameters */
      for (int s = 0; s < 4; s++) l.padding[s] = pick(&r, 0, c.k + 1);
      l.activation = (convpool_activation)pick(&r, 0, 2);
      if (l.activation == CONVPOOL_ACTIVATION_CLAMP) l.clamp_min = -0.25f, l.clamp_max = 0.75f;
      l.pool_stride = pick(&r, 0, c.pool);
      for (int s = 0; s < 4; s++) l.pool_padding[s] = pick(&r, 0, c.pool - 1); /* ONNX: < P */
      l.ceil_mode = (int)pick(&r, 0, 1);
      with_params++;
    }
    if (pick(&r, 0, 2) == 0) { /* the conv fields, a third of the layers */
      if (!wino_algo) {        /* Winograd computes stride, dilation, groups 1 */
        l.stride = pick(&r, 1, MAX_STRIDE);
        if (algo != CONVPOOL_ALGO_SHIFT_REDUCE) l.dilation = pick(&r, 1, MAX_DILATION);
        switch (pick(&r, 0, 3)) {
          case 1: { /* a common divisor */
            const int64_t g = gcd64(c.c_in, c.c_out);
            l.groups = g;
            while (l.groups > 1 && pick(&r, 0, 1)) { /* now and then a smaller one */
              int64_t d = l.groups - 1;
              while (g % d != 0) d--;
              l.groups = d;
            }
            break;
          }
          case 2: /* depthwise, one or two outputs per input channel */
          case 3:
            l.groups = c.c_in;
            l.c_out = c.c_out = c.c_in * pick(&r, 1, 2);
            depthwise++;
            break;
          default:
            break;
        }
      }
      l.has_residual = pick(&r, 0, 1);
      for (int s = 0; s < 4; s++) l.pool_padding[s] = pick(&r, 0, c.pool - 1);
      l.ceil_mode = (int)pick(&r, 0, 1);
      with_conv++;
      with_residual += l.has_residual != 0;
    }
    random_input(&r, &c, &l);
    int64_t ph, pw;
    cp_reference_shape(&l, c.height, c.width, &ph, &pw);
    const int threads = (int)pick(&r, 1, 4);
    /* rows_per_item: planned (0) half the time, else 1 .. the pooled rows, now and then one more.
     */
    int rows_per_item = 0;
    if (pick(&r, 0, 1)) {
      rows_per_item = (int)pick(&r, 1, ph);
      if (pick(&r, 0, 9) == 0) rows_per_item = (int)ph + 1;
    }
    convpool_options o;
    convpool_options_init(&o);
    o.threads = threads;
    o.rows_per_item = rows_per_item;
    o.algo = algo;
    by_algo[o.algo == CONVPOOL_ALGO_IM2COL]++;
    wino += o.algo == CONVPOOL_ALGO_WINOGRAD || o.algo == CONVPOOL_ALGO_WINOGRAD_2X3;
    direct += o.algo == CONVPOOL_ALGO_DIRECT;
    o.allocator = &iface;
    tu_rng data = {(uint64_t)i * 104729 + seed};
    rel_fill(b.w, rel_w_count(&c), c.dtype, &data, -1.0f, 1.0f);
    rel_fill(b.bias, (size_t)c.c_out, c.dtype, &data, -1.0f, 1.0f);
    by_dtype[c.dtype == CONVPOOL_FLOAT32 ? 0 : c.dtype == CONVPOOL_FLOAT16 ? 1 : 2]++;
    forced_rows += rows_per_item > 0;

    int ok = 1;
    if (pick(&r, 0, 3) == 0) { /* one-shot */
      one_shot++;
      ok = run_and_check(NULL, &c, &l, &o, &b, threads, rows_per_item, i);
      runs++;
    } else { /* one operator, three input sizes: c, another, c again */
      /* a third of them made for c's shape (auto settles its choice there); the
         other size then runs on that choice */
      if (pick(&r, 0, 2) == 0 && rows_per_item <= ph) {
        o.expected_batch = c.batch, o.expected_height = c.height, o.expected_width = c.width;
        made_for_shape++;
      }
      convpool_op *op = NULL;
      convpool_status st = convpool_op_create_layer(&l, b.w, c.bias ? b.bias : NULL, &o, &op);
      REL_CHECK(st == CONVPOOL_SUCCESS, "case %ld: create: %s", i, convpool_last_error());
      ok = st == CONVPOOL_SUCCESS;
      if (ok) {
        rel_case other = c;
        random_input(&r, &other, &l);
        ok &= run_and_check(op, &c, &l, &o, &b, threads, rows_per_item, i);
        ok &= run_and_check(op, &other, &l, &o, &b, threads, rows_per_item, i);
        ok &= run_and_check(op, &c, &l, &o, &b, threads, rows_per_item, i);
        runs += 3;
        st = convpool_op_destroy(op);
        REL_CHECK(st == CONVPOOL_SUCCESS, "case %ld: destroy: %s", i, convpool_last_error());
      }
    }
    passed += ok;
    done++;
    REL_CHECK(rel_alloc_live(&counting) == 0, "case %ld: %ld library blocks outstanding", i,
              rel_alloc_live(&counting));
    const int now_threads = settled_thread_count(threads_at_start);
    REL_CHECK(now_threads == threads_at_start, "case %ld: %d threads alive, %d at start", i,
              now_threads, threads_at_start);
    if (*rel_failure_count() > 20) {
      printf("soak: stopping after 20 failures\n");
      break;
    }
    const long rss = resident_kib();
    if (i + 1 == warmup) rss_warm = rss;
    if (i + 1 > warmup && rss > rss_max) rss_max = rss;
  }
  const long rss_end = resident_kib();
  REL_CHECK(counting.bad_alignment == 0 && counting.bad_free == 0,
            "allocator: %ld bad alignments, %ld bad frees", counting.bad_alignment,
            counting.bad_free);
  if (done <= warmup) {
    printf("soak: resident set check skipped: no case ran after the %ld warm-up cases\n", warmup);
  } else if (rss_warm < 0 || rss_end < 0) {
    printf("soak: resident set check skipped: /proc/self/statm is not readable\n");
  } else {
    printf(
        "soak: resident set %ld KiB after %ld warm-up cases, at most %ld KiB after, %ld KiB at "
        "the end\n",
        rss_warm, warmup, rss_max, rss_end);
#ifdef REL_SANITIZED
    const int sanitized = 1;
#else
    const int sanitized = 0;
#endif
    if (sanitized || under_valgrind())
      printf(
          "soak: resident set check skipped: %s (quarantine and shadow memory grow it by "
          "design)\n",
          sanitized ? "sanitizer build" : "under valgrind");
    else
      REL_CHECK(rss_max - rss_warm <= RSS_SLACK_KIB,
                "resident set grew from %ld KiB after warm-up to %ld KiB (limit +%d KiB)", rss_warm,
                rss_max, RSS_SLACK_KIB);
  }
  int failures = *rel_failure_count();
  printf(
      "soak: %ld cases (%ld float32, %ld float16, %ld bfloat16; %ld im2col; %ld winograd; %ld "
      "direct; "
      "%ld one-shot; %ld operators made for their first shape; "
      "%ld with rows_per_item set; %ld with layer parameters; %ld with conv fields: %ld "
      "depthwise, %ld with a residual), %ld runs, seed %llu: %ld passed, %d failures; peak %ld "
      "library blocks, threads back to %d\n",
      done, by_dtype[0], by_dtype[1], by_dtype[2], by_algo[1], wino, direct, one_shot,
      made_for_shape, forced_rows, with_params, with_conv, depthwise, with_residual, runs, seed,
      passed, failures, counting.peak_live, threads_at_start);
  free(b.x);
  free(b.w);
  free(b.bias);
  free(b.y);
  free(b.residual);
  return failures ? 1 : 0;
}
