/*
 * Resource failures at every point. A counting allocator (passed through
 * options->allocator, and once installed with convpool_set_default_allocator)
 * refuses the k-th allocation of a call, for k = 1, 2, ... until the call
 * succeeds, along convpool_op_create, convpool_op_run and the one-shot call.
 * Every refused allocation must turn into CONVPOOL_OUT_OF_MEMORY with a
 * message, *op_out = NULL, dst untouched, no block left outstanding, and an
 * operator that still runs correctly afterwards.
 *
 * Thread creation is failed the same way through the linker's
 * --wrap=pthread_create (when the build supports it): EAGAIN must give
 * CONVPOOL_OUT_OF_MEMORY and any other error CONVPOOL_INTERNAL_ERROR (what
 * src/threadpool.c documents), with every started worker joined.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_util.h"

#define PATTERN 0x5A
#define MAX_POINTS 200 /* no call of this library makes anywhere near this many allocations */

/* ---- thread-creation failures through --wrap ---- */

#ifdef REL_WRAP_PTHREAD
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __real_pthread_join(pthread_t thread, void **result);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_join(pthread_t thread, void **result);

static atomic_long g_thread_calls, g_thread_fail_at, g_threads_started, g_threads_joined;
static atomic_int g_thread_error;

int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg) {
  long n = atomic_fetch_add(&g_thread_calls, 1) + 1;
  if (n == atomic_load(&g_thread_fail_at)) return atomic_load(&g_thread_error);
  int rc = __real_pthread_create(thread, attr, start, arg);
  if (rc == 0) atomic_fetch_add(&g_threads_started, 1);
  return rc;
}

int __wrap_pthread_join(pthread_t thread, void **result) {
  int rc = __real_pthread_join(thread, result);
  if (rc == 0) atomic_fetch_add(&g_threads_joined, 1);
  return rc;
}
#endif

/* ---- the walk ---- */

typedef struct scenario {
  const char *name;
  rel_case c;
  int threads, rows_per_item;
  int global; /* install the allocator with convpool_set_default_allocator */
  convpool_algo algo;
} scenario;

typedef struct tensors {
  void *x, *w, *bias, *y;
  size_t y_bytes; /* capacity of y */
} tensors;

/* The same layer on a larger input, to make a second run grow its scratch. */
static rel_case larger(const rel_case *c) {
  rel_case big = *c;
  big.height = 2 * c->height + 8;
  big.width = 4 * c->width + 16;
  return big;
}

/* Tensors for case c, with x and y large enough for larger(c) as well. */
static int make_tensors(const rel_case *c, tensors *t) {
  const rel_case big = larger(c);
  const size_t es = convpool_dtype_size(c->dtype);
  tu_rng rng = {(uint64_t)c->c_in * 131 + (uint64_t)c->height};
  t->y_bytes = rel_y_count(&big) * es;
  t->x = malloc(rel_x_count(&big) * es);
  t->w = malloc(rel_w_count(c) * es);
  t->bias = malloc((size_t)c->c_out * es);
  t->y = malloc(t->y_bytes);
  if (!t->x || !t->w || !t->bias || !t->y) return 0;
  rel_fill(t->x, rel_x_count(&big), c->dtype, &rng, -1.0f, 1.0f);
  rel_fill(t->w, rel_w_count(c), c->dtype, &rng, -1.0f, 1.0f);
  rel_fill(t->bias, (size_t)c->c_out, c->dtype, &rng, -1.0f, 1.0f);
  return 1;
}

static void free_tensors(tensors *t) {
  free(t->x);
  free(t->w);
  free(t->bias);
  free(t->y);
}

/* Compare y, the output of case c (the layer of s, maybe on another input size). */
static void check_result(const scenario *s, const rel_case *c, const tensors *t, const char *step) {
  char why[400];
  int ok = rel_check_output(c, t->x, t->w, c->bias ? t->bias : NULL, t->y, why, sizeof why);
  REL_CHECK(ok == 1, "%s: %s: %s", s->name, step, why);
}

/* Check one refused call: OOM, a message, no block leaked beyond `live_before`. */
static void check_refusal(const scenario *s, const char *step, long k, convpool_status st,
                          rel_alloc *a, long live_before) {
  REL_CHECK(st == CONVPOOL_OUT_OF_MEMORY, "%s: %s with allocation %ld refused: %s (%s)", s->name,
            step, k, convpool_status_string(st), convpool_last_error());
  REL_CHECK(convpool_last_error()[0] != '\0', "%s: %s, allocation %ld: no message", s->name, step,
            k);
  REL_CHECK(rel_alloc_live(a) == live_before,
            "%s: %s, allocation %ld: %ld blocks outstanding, %ld expected", s->name, step, k,
            rel_alloc_live(a), live_before);
}

/*
 * Walk the failure points of a run of case c on op: fail its k-th allocation
 * for k = 1, 2, ... until it succeeds. Each failed run must leave dst alone
 * and the op usable. Returns the points survived.
 */
static long walk_run(const scenario *s, const char *step, convpool_op *op, const rel_case *c,
                     tensors *t, rel_alloc *counting) {
  const long live_op = rel_alloc_live(counting);
  const size_t y_bytes = rel_y_count(c) * convpool_dtype_size(c->dtype);
  long k;
  for (k = 1; k <= MAX_POINTS; k++) {
    rel_alloc_arm(counting, k);
    memset(t->y, PATTERN, t->y_bytes);
    convpool_status st = convpool_op_run(op, t->x, c->batch, c->height, c->width, t->y, y_bytes);
    if (st == CONVPOOL_SUCCESS) {
      REL_CHECK(counting->calls < k, "%s: %s succeeded although allocation %ld was refused",
                s->name, step, k);
      check_result(s, c, t, step);
      break;
    }
    /* A run that needs more scratch may release the smaller block it kept
       before the refused allocation: one block fewer is fine, more is a leak. */
    const long live = rel_alloc_live(counting);
    check_refusal(s, step, k, st, counting, live == live_op - 1 ? live_op - 1 : live_op);
    REL_CHECK(rel_all_bytes(t->y, t->y_bytes, PATTERN), "%s: %s, allocation %ld: dst written",
              s->name, step, k);
  }
  rel_alloc_arm(counting, 0);
  return k - 1;
}

/* Walk every failure point of create, run and the one-shot; returns the points survived. */
static long walk(const scenario *s) {
  tensors t;
  long points = 0;
  if (!make_tensors(&s->c, &t)) {
    REL_CHECK(0, "%s: out of memory in the test", s->name);
    free_tensors(&t);
    return 0;
  }
  const rel_case *c = &s->c;
  const void *bias = c->bias ? t.bias : NULL;
  rel_alloc counting;
  rel_alloc_init(&counting);
  convpool_allocator iface = rel_alloc_interface(&counting);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = s->threads;
  o.rows_per_item = s->rows_per_item;
  o.algo = s->algo;
  if (s->global) {
    convpool_status st = convpool_set_default_allocator(&iface);
    REL_CHECK(st == CONVPOOL_SUCCESS, "%s: set_default_allocator: %s", s->name,
              convpool_last_error());
  } else {
    o.allocator = &iface;
  }

  /* create */
  convpool_op *op = NULL;
  long k;
  for (k = 1; k <= MAX_POINTS; k++) {
    rel_alloc_arm(&counting, k);
    op = (convpool_op *)&t; /* any non-NULL value: must come back NULL on failure */
    convpool_status st =
        convpool_op_create(c->dtype, t.w, bias, c->c_out, c->c_in, c->k, c->pool, &o, &op);
    if (st == CONVPOOL_SUCCESS) {
      REL_CHECK(counting.calls < k, "%s: create succeeded although allocation %ld was refused",
                s->name, k);
      break;
    }
    check_refusal(s, "create", k, st, &counting, 0);
    REL_CHECK(op == NULL, "%s: create, allocation %ld: *op_out is not NULL", s->name, k);
    points++;
  }
  REL_CHECK(k > 1, "%s: create made no allocation through the allocator", s->name);
  const long create_points = k - 1;
  long run_points = 0, one_shot_points = 0;

  /* run: the first run allocates its scratch; a run on a larger input grows
     it; a run of the first size after a refused growth allocates again. */
  if (op != NULL && k <= MAX_POINTS) {
    const rel_case big = larger(c);
    long n = walk_run(s, "first run", op, c, &t, &counting);
    REL_CHECK(n > 0, "%s: the first run made no allocation through the allocator", s->name);
    run_points += n;
    run_points += walk_run(s, "run on a larger input", op, &big, &t, &counting);
    run_points += walk_run(s, "run after the larger input", op, c, &t, &counting);
    points += run_points;
    convpool_status st = convpool_op_destroy(op);
    REL_CHECK(st == CONVPOOL_SUCCESS, "%s: destroy: %s", s->name, convpool_last_error());
  }
  REL_CHECK(rel_alloc_live(&counting) == 0, "%s: %ld blocks outstanding after destroy", s->name,
            rel_alloc_live(&counting));

  /* one-shot */
  const size_t y_bytes = rel_y_count(c) * convpool_dtype_size(c->dtype);
  for (k = 1; k <= MAX_POINTS; k++) {
    rel_alloc_arm(&counting, k);
    memset(t.y, PATTERN, t.y_bytes);
    convpool_status st =
        convpool_conv2d_maxpool(c->dtype, t.x, c->batch, c->c_in, c->height, c->width, t.w,
                                c->c_out, c->k, bias, c->pool, t.y, y_bytes, &o);
    if (st == CONVPOOL_SUCCESS) {
      REL_CHECK(counting.calls < k, "%s: one-shot succeeded although allocation %ld was refused",
                s->name, k);
      check_result(s, c, &t, "one-shot after refused allocations");
      break;
    }
    check_refusal(s, "one-shot", k, st, &counting, 0);
    REL_CHECK(rel_all_bytes(t.y, t.y_bytes, PATTERN), "%s: one-shot, allocation %ld: dst written",
              s->name, k);
    points++, one_shot_points++;
  }
  REL_CHECK(rel_alloc_live(&counting) == 0, "%s: %ld blocks outstanding after the one-shot calls",
            s->name, rel_alloc_live(&counting));
  REL_CHECK(counting.bad_alignment == 0 && counting.bad_free == 0,
            "%s: %ld bad alignment requests, %ld frees of unknown pointers", s->name,
            counting.bad_alignment, counting.bad_free);
  if (s->global) convpool_set_default_allocator(NULL);
  printf("%-44s %ld create + %ld run + %ld one-shot failure points survived\n", s->name,
         create_points, run_points, one_shot_points);
  free_tensors(&t);
  return points;
}

#ifdef REL_WRAP_PTHREAD
/* Fail the k-th worker start of create and of the one-shot with `error`. */
static long walk_threads(int error, convpool_status want) {
  const rel_case c = {CONVPOOL_FLOAT32, 1, 3, 5, 10, 10, 3, 2, 1};
  const int threads = 4; /* three workers */
  tensors t;
  long points = 0;
  if (!make_tensors(&c, &t)) {
    REL_CHECK(0, "threads: out of memory in the test");
    free_tensors(&t);
    return 0;
  }
  rel_alloc counting;
  rel_alloc_init(&counting);
  convpool_allocator iface = rel_alloc_interface(&counting);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = threads;
  o.allocator = &iface;
  for (int one_shot = 0; one_shot < 2; one_shot++)
    for (long k = 1; k <= threads; k++) {
      atomic_store(&g_thread_calls, 0);
      atomic_store(&g_threads_started, 0);
      atomic_store(&g_threads_joined, 0);
      atomic_store(&g_thread_error, error);
      atomic_store(&g_thread_fail_at, k);
      memset(t.y, PATTERN, t.y_bytes);
      convpool_op *op = (convpool_op *)&t;
      convpool_status st =
          one_shot
              ? convpool_conv2d_maxpool(c.dtype, t.x, c.batch, c.c_in, c.height, c.width, t.w,
                                        c.c_out, c.k, t.bias, c.pool, t.y, t.y_bytes, &o)
              : convpool_op_create(c.dtype, t.w, t.bias, c.c_out, c.c_in, c.k, c.pool, &o, &op);
      atomic_store(&g_thread_fail_at, 0);
      const char *step = one_shot ? "one-shot" : "create";
      if (k == threads) { /* no k-th worker: the call must succeed */
        REL_CHECK(st == CONVPOOL_SUCCESS, "threads: %s: %s", step, convpool_last_error());
        if (!one_shot && st == CONVPOOL_SUCCESS) convpool_op_destroy(op);
        if (one_shot && st == CONVPOOL_SUCCESS) {
          scenario s = {"threads", c, threads, 0, 0, CONVPOOL_ALGO_AUTO};
          check_result(&s, &c, &t, "one-shot after refused threads");
        }
      } else {
        char needle[48];
        snprintf(needle, sizeof needle, "thread %ld of %d", k, threads - 1);
        REL_CHECK(st == want, "threads: %s with worker %ld failing (error %d): %s, want %s", step,
                  k, error, convpool_status_string(st), convpool_status_string(want));
        REL_CHECK(strstr(convpool_last_error(), needle) != NULL,
                  "threads: %s: message \"%s\" does not name \"%s\"", step, convpool_last_error(),
                  needle);
        if (!one_shot) REL_CHECK(op == NULL, "threads: create: *op_out is not NULL");
        REL_CHECK(rel_all_bytes(t.y, t.y_bytes, PATTERN), "threads: %s: dst written", step);
        points++;
      }
      REL_CHECK(atomic_load(&g_threads_started) == atomic_load(&g_threads_joined),
                "threads: %s, worker %ld failing: %ld started, %ld joined", step, k,
                atomic_load(&g_threads_started), atomic_load(&g_threads_joined));
      REL_CHECK(rel_alloc_live(&counting) == 0,
                "threads: %s, worker %ld failing: %ld blocks outstanding", step, k,
                rel_alloc_live(&counting));
    }
  free_tensors(&t);
  return points;
}
#endif

int main(void) {
  const scenario scenarios[] = {
      {"float32, 1 thread, bias",
       {CONVPOOL_FLOAT32, 1, 3, 5, 10, 10, 3, 2, 1},
       1,
       0,
       0,
       CONVPOOL_ALGO_AUTO},
      {"float16, 3 threads, no bias",
       {CONVPOOL_FLOAT16, 2, 4, 13, 12, 11, 2, 3, 0},
       3,
       0,
       0,
       CONVPOOL_ALGO_AUTO},
      {"float32, 4 threads, rows_per_item 1",
       {CONVPOOL_FLOAT32, 1, 2, 7, 16, 9, 1, 1, 1},
       4,
       1,
       0,
       CONVPOOL_ALGO_AUTO},
      {"bfloat16, 2 threads, bias",
       {CONVPOOL_BFLOAT16, 1, 5, 9, 11, 14, 3, 2, 1},
       2,
       0,
       0,
       CONVPOOL_ALGO_AUTO},
      {"float32, 2 threads, default allocator",
       {CONVPOOL_FLOAT32, 2, 3, 4, 9, 9, 3, 2, 1},
       2,
       0,
       1,
       CONVPOOL_ALGO_AUTO},
      {"float32, 3 threads, im2col",
       {CONVPOOL_FLOAT32, 2, 5, 6, 12, 13, 3, 2, 1},
       3,
       0,
       0,
       CONVPOOL_ALGO_IM2COL},
      {"float16, 1 thread, im2col, rows_per_item 2",
       {CONVPOOL_FLOAT16, 1, 3, 4, 14, 10, 2, 2, 0},
       1,
       2,
       0,
       CONVPOOL_ALGO_IM2COL},
      {"float32, 2 threads, direct",
       {CONVPOOL_FLOAT32, 2, 5, 6, 12, 13, 3, 2, 1},
       2,
       0,
       0,
       CONVPOOL_ALGO_DIRECT},
  };
  long total = 0;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) total += walk(&scenarios[i]);
  long thread_points = 0;
#ifdef REL_WRAP_PTHREAD
  thread_points += walk_threads(EAGAIN, CONVPOOL_OUT_OF_MEMORY);
  thread_points += walk_threads(EPERM, CONVPOOL_INTERNAL_ERROR);
  printf(
      "thread creation: %ld failure points survived (EAGAIN -> out of memory, EPERM -> internal "
      "error)\n",
      thread_points);
#else
  printf("thread creation: skipped (this build has no --wrap=pthread_create)\n");
#endif
  int failures = *rel_failure_count();
  printf(
      "test_alloc_fail: %ld allocation failure points and %ld thread failure points survived, "
      "%d failures\n",
      total, thread_points, failures);
  return failures ? 1 : 0;
}
