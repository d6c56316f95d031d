/*
 * Thread safety, also run under ThreadSanitizer (see run_sanitizers.sh).
 *
 *  1. One operator, several threads calling convpool_op_run on it at once:
 *     each call either succeeds with the correct output or is refused with
 *     CONVPOOL_INVALID_STATE and leaves its dst untouched. Meanwhile other
 *     threads query the same operator (output_shape, plan, describe).
 *  2. One operator per thread (different thread counts and algorithms), all
 *     running at once: every output is byte-identical to the single-threaded
 *     result of its algorithm, which matches the reference; the same for a
 *     depthwise layer on the depthwise algorithm and auto; the same for
 *     Winograd with a batch of 7x7 images side by side (and apart).
 *  3. Concurrent failures on different threads: each thread's
 *     convpool_last_error() names its own offending value.
 *  4. Create/destroy churn and one-shot calls on many threads at once.
 *  5. Destroy racing a run: while a run is inside the operator, destroy
 *     from another thread returns CONVPOOL_INVALID_STATE and frees nothing;
 *     once the run is over it succeeds. The operator's memory comes from an
 *     allocator that unmaps every block on free, so a destroy that freed
 *     under a running call would fault.
 *
 * Usage: test_threads [rounds]   (default 100 rounds per thread)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_util.h"

#define PATTERN 0xC3
#define THREADS 4

static int g_rounds = 100;

/* The shared layer: results must be identical for every thread count. */
static const rel_case g_case = {CONVPOOL_FLOAT32, 2, 8, 19, 30, 27, 3, 2, 1};
static void *g_x, *g_w, *g_bias, *g_expected;
static void *g_expected_algo[3]; /* single-threaded result of each algorithm */
static size_t g_y_bytes;

static int make_shared(void) {
  tu_rng rng = {4242};
  const size_t es = sizeof(float);
  g_y_bytes = rel_y_count(&g_case) * es;
  g_x = malloc(rel_x_count(&g_case) * es);
  g_w = malloc(rel_w_count(&g_case) * es);
  g_bias = malloc((size_t)g_case.c_out * es);
  g_expected = malloc(g_y_bytes);
  if (!g_x || !g_w || !g_bias || !g_expected) return 0;
  rel_fill(g_x, rel_x_count(&g_case), g_case.dtype, &rng, -1.0f, 1.0f);
  rel_fill(g_w, rel_w_count(&g_case), g_case.dtype, &rng, -1.0f, 1.0f);
  rel_fill(g_bias, (size_t)g_case.c_out, g_case.dtype, &rng, -1.0f, 1.0f);
  /* Expected bytes of each algorithm: one thread, checked against the reference. */
  int ok = 1;
  for (int a = 0; a < 3; a++) {
    g_expected_algo[a] = malloc(g_y_bytes);
    if (g_expected_algo[a] == NULL) return 0;
    ok &= rel_one_thread_result(&g_case, g_x, g_w, g_bias, a, g_expected_algo[a], g_y_bytes,
                                "single-threaded result");
  }
  memcpy(g_expected, g_expected_algo[CONVPOOL_ALGO_AUTO], g_y_bytes);
  return ok;
}

static void start_all(pthread_t *t, int n, void *(*fn)(void *), void *args, size_t arg_size) {
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * arg_size) != 0) {
      fprintf(stderr, "test_threads: cannot start a thread\n");
      exit(2);
    }
}

static void join_all(pthread_t *t, int n) {
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* ---- 1. one operator, concurrent runs ---- */

typedef struct shared_arg {
  convpool_op *op;
  int index;
  atomic_int *go;
  long ok, refused, wrong; /* per thread, read after join */
  char first_wrong[300];
} shared_arg;

static void note_wrong(shared_arg *a, const char *what) {
  if (a->wrong++ == 0) snprintf(a->first_wrong, sizeof a->first_wrong, "%s", what);
}

static void *shared_runner(void *raw) {
  shared_arg *a = raw;
  unsigned char *y = malloc(g_y_bytes);
  if (y == NULL) {
    note_wrong(a, "out of memory in the test");
    return NULL;
  }
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < g_rounds; r++) {
    memset(y, PATTERN, g_y_bytes);
    convpool_status st =
        convpool_op_run(a->op, g_x, g_case.batch, g_case.height, g_case.width, y, g_y_bytes);
    if (st == CONVPOOL_SUCCESS) {
      a->ok++;
      if (memcmp(y, g_expected, g_y_bytes) != 0) note_wrong(a, "a successful run differs");
    } else if (st == CONVPOOL_INVALID_STATE) {
      a->refused++;
      if (!rel_all_bytes(y, g_y_bytes, PATTERN)) note_wrong(a, "a refused run wrote dst");
      if (strstr(convpool_last_error(), "already running") == NULL) {
        char m[300];
        snprintf(m, sizeof m, "refusal message \"%.200s\"", convpool_last_error());
        note_wrong(a, m);
      }
    } else {
      char m[300];
      snprintf(m, sizeof m, "run returned %s: %.200s", convpool_status_string(st),
               convpool_last_error());
      note_wrong(a, m);
    }
  }
  free(y);
  return NULL;
}

/* Queries of the same operator while it runs: immutable facts, always the same. */
static void *shared_querier(void *raw) {
  shared_arg *a = raw;
  char text[2048];
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < 4 * g_rounds; r++) {
    int64_t shape[4];
    size_t bytes = 0;
    convpool_plan_info info;
    convpool_status s1 =
        convpool_op_output_shape(a->op, g_case.batch, g_case.height, g_case.width, shape, &bytes);
    convpool_status s2 = convpool_op_plan(a->op, g_case.batch, g_case.height, g_case.width, &info);
    convpool_status s3 =
        convpool_op_describe(a->op, g_case.batch, g_case.height, g_case.width, text, sizeof text);
    if (s1 != CONVPOOL_SUCCESS || s2 != CONVPOOL_SUCCESS || s3 != CONVPOOL_SUCCESS)
      note_wrong(a, "a query failed");
    else if (bytes != g_y_bytes || shape[2] != rel_ph(&g_case) || shape[3] != rel_pw(&g_case) ||
             info.threads != 2 || strlen(text) == 0)
      note_wrong(a, "a query gave a different answer");
    else
      a->ok++;
  }
  return NULL;
}

static void test_shared_op(void) {
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 2;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in,
                                          g_case.k, g_case.pool, &o, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "shared op: %s", convpool_last_error());
  if (st != CONVPOOL_SUCCESS) return;
  enum { RUNNERS = THREADS, QUERIERS = 2 };
  pthread_t t[RUNNERS + QUERIERS];
  shared_arg args[RUNNERS + QUERIERS];
  atomic_int go;
  atomic_init(&go, 0);
  memset(args, 0, sizeof args);
  for (int i = 0; i < RUNNERS + QUERIERS; i++) args[i].op = op, args[i].index = i, args[i].go = &go;
  start_all(t, RUNNERS, shared_runner, args, sizeof args[0]);
  start_all(t + RUNNERS, QUERIERS, shared_querier, args + RUNNERS, sizeof args[0]);
  atomic_store(&go, 1);
  join_all(t, RUNNERS + QUERIERS);
  long ok = 0, refused = 0, queries = 0;
  for (int i = 0; i < RUNNERS + QUERIERS; i++) {
    REL_CHECK(args[i].wrong == 0, "shared op, thread %d: %ld wrong results, first: %s", i,
              args[i].wrong, args[i].first_wrong);
    if (i < RUNNERS)
      ok += args[i].ok, refused += args[i].refused;
    else
      queries += args[i].ok;
  }
  REL_CHECK(ok > 0, "shared op: no run succeeded");
  REL_CHECK(ok + refused == (long)RUNNERS * g_rounds, "shared op: %ld + %ld calls accounted for",
            ok, refused);
  /* The op is not left busy: a plain run and a destroy both work. */
  unsigned char *y = malloc(g_y_bytes);
  if (y != NULL) {
    st = convpool_op_run(op, g_x, g_case.batch, g_case.height, g_case.width, y, g_y_bytes);
    REL_CHECK(st == CONVPOOL_SUCCESS && memcmp(y, g_expected, g_y_bytes) == 0,
              "shared op: run after the race: %s", convpool_last_error());
    free(y);
  }
  st = convpool_op_destroy(op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "shared op: destroy: %s", convpool_last_error());
  printf("one operator, %d threads: %ld runs succeeded, %ld refused (busy), %ld queries\n", RUNNERS,
         ok, refused, queries);
}

/* ---- 2. one operator per thread ---- */

typedef struct own_arg {
  int threads; /* threads of the thread's own operator */
  convpool_algo algo;
  atomic_int *go;
  long runs, wrong;
  char first_wrong[300];
} own_arg;

static void *own_runner(void *raw) {
  own_arg *a = raw;
  unsigned char *y = malloc(g_y_bytes);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = a->threads;
  o.algo = a->algo;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in,
                                          g_case.k, g_case.pool, &o, &op);
  if (st != CONVPOOL_SUCCESS || y == NULL) {
    snprintf(a->first_wrong, sizeof a->first_wrong, "create: %.200s", convpool_last_error());
    a->wrong++;
    free(y);
    return NULL;
  }
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < g_rounds; r++) {
    memset(y, PATTERN, g_y_bytes);
    st = convpool_op_run(op, g_x, g_case.batch, g_case.height, g_case.width, y, g_y_bytes);
    a->runs++;
    if (st != CONVPOOL_SUCCESS || memcmp(y, g_expected_algo[a->algo], g_y_bytes) != 0) {
      if (a->wrong++ == 0)
        snprintf(a->first_wrong, sizeof a->first_wrong, "run %d: %s %.200s", r,
                 convpool_status_string(st), convpool_last_error());
    }
  }
  convpool_op_destroy(op);
  free(y);
  return NULL;
}

static void test_own_ops(void) {
  pthread_t t[THREADS];
  own_arg args[THREADS];
  atomic_int go;
  atomic_init(&go, 0);
  memset(args, 0, sizeof args);
  for (int i = 0; i < THREADS; i++) {
    args[i].threads = 1 + i % 3;
    args[i].algo = (convpool_algo)(i % 3); /* auto, shift-reduce, im2col */
    args[i].go = &go;
  }
  start_all(t, THREADS, own_runner, args, sizeof args[0]);
  atomic_store(&go, 1);
  join_all(t, THREADS);
  long runs = 0;
  for (int i = 0; i < THREADS; i++) {
    REL_CHECK(args[i].wrong == 0, "own op, thread %d (%d threads): %ld wrong, first: %s", i,
              args[i].threads, args[i].wrong, args[i].first_wrong);
    runs += args[i].runs;
  }
  printf(
      "one operator per thread, %d threads, every algorithm: %ld runs, all byte-identical to "
      "the single-threaded result\n",
      THREADS, runs);
}

/* ---- 2b. depthwise operators per thread ---- */

/* A depthwise layer (multiplier 2, stride 2, pool 2) on THREADS threads at
   once, each with its own operator of the depthwise algorithm (and auto,
   which takes it) and 1..3 threads: every output byte-identical to the
   single-threaded run. */
typedef struct dw_arg {
  int threads;
  convpool_algo algo;
  int64_t batch, height, width;
  int rows_per_item;
  const convpool_layer *layer;
  const void *x, *w, *expected;
  size_t y_bytes;
  atomic_int *go;
  long runs, wrong;
  char first_wrong[300];
} dw_arg;

enum { DW_BATCH = 2, DW_H = 29, DW_W = 31 };

static void *dw_runner(void *raw) {
  dw_arg *a = raw;
  unsigned char *y = malloc(a->y_bytes);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = a->threads;
  o.algo = a->algo;
  o.rows_per_item = a->rows_per_item;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create_layer(a->layer, a->w, NULL, &o, &op);
  if (st != CONVPOOL_SUCCESS || y == NULL) {
    snprintf(a->first_wrong, sizeof a->first_wrong, "create: %.200s", convpool_last_error());
    a->wrong++;
    free(y);
    return NULL;
  }
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < g_rounds; r++) {
    memset(y, PATTERN, a->y_bytes);
    st = convpool_op_run(op, a->x, a->batch, a->height, a->width, y, a->y_bytes);
    a->runs++;
    if (st != CONVPOOL_SUCCESS || memcmp(y, a->expected, a->y_bytes) != 0) {
      if (a->wrong++ == 0)
        snprintf(a->first_wrong, sizeof a->first_wrong, "run %d: %s %.200s", r,
                 convpool_status_string(st), convpool_last_error());
    }
  }
  convpool_op_destroy(op);
  free(y);
  return NULL;
}

static void test_depthwise_ops(void) {
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 48, 24, 3, 2);
  l.groups = 24, l.stride = 2;
  for (int s = 0; s < 4; s++) l.padding[s] = 1;
  const size_t x_n = (size_t)DW_BATCH * 24 * DW_H * DW_W, w_n = 48 * 9;
  const size_t y_bytes = (size_t)DW_BATCH * 48 * 7 * 8 * sizeof(float); /* conv 15x16, pool 2 */
  float *x = malloc(x_n * sizeof(float)), *w = malloc(w_n * sizeof(float));
  void *expected = malloc(y_bytes);
  if (x == NULL || w == NULL || expected == NULL) {
    REL_CHECK(0, "depthwise ops: out of memory");
    free(x), free(w), free(expected);
    return;
  }
  tu_rng rng = {77};
  rel_fill(x, x_n, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  rel_fill(w, w_n, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 1;
  o.algo = CONVPOOL_ALGO_DEPTHWISE;
  convpool_status st =
      convpool_layer_run(&l, x, DW_BATCH, DW_H, DW_W, w, NULL, expected, y_bytes, &o);
  REL_CHECK(st == CONVPOOL_SUCCESS, "depthwise ops: single-threaded run: %s",
            convpool_last_error());
  if (st == CONVPOOL_SUCCESS) {
    pthread_t t[THREADS];
    dw_arg args[THREADS];
    atomic_int go;
    atomic_init(&go, 0);
    memset(args, 0, sizeof args);
    for (int i = 0; i < THREADS; i++) {
      args[i].threads = 1 + i % 3;
      args[i].algo = i % 2 ? CONVPOOL_ALGO_AUTO : CONVPOOL_ALGO_DEPTHWISE;
      args[i].layer = &l, args[i].x = x, args[i].w = w, args[i].expected = expected;
      args[i].y_bytes = y_bytes, args[i].go = &go;
      args[i].batch = DW_BATCH, args[i].height = DW_H, args[i].width = DW_W;
    }
    start_all(t, THREADS, dw_runner, args, sizeof args[0]);
    atomic_store(&go, 1);
    join_all(t, THREADS);
    long runs = 0;
    for (int i = 0; i < THREADS; i++) {
      REL_CHECK(args[i].wrong == 0, "depthwise op, thread %d (%d threads): %ld wrong, first: %s", i,
                args[i].threads, args[i].wrong, args[i].first_wrong);
      runs += args[i].runs;
    }
    printf(
        "depthwise operator per thread, %d threads: %ld runs, all byte-identical to the "
        "single-threaded result\n",
        THREADS, runs);
  }
  free(x), free(w), free(expected);
}

/* ---- 2c. Winograd with images side by side, operators per thread ---- */

/* 7x7 images of a batch side by side in one Winograd item (plan.h: images),
   on THREADS threads at once, each its own operator of 1..3 threads, half of
   them with one image per item (rows_per_item forced): every output
   byte-identical to the single-threaded run with the images side by side. */
enum { SBS_BATCH = 6, SBS_H = 7, SBS_W = 7 };

static void test_side_by_side_ops(void) {
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 40, 24, 3, 1);
  for (int s = 0; s < 4; s++) l.padding[s] = 1;
  l.activation = CONVPOOL_ACTIVATION_RELU;
  const size_t x_n = (size_t)SBS_BATCH * 24 * SBS_H * SBS_W, w_n = 40 * 24 * 9;
  const size_t y_bytes = (size_t)SBS_BATCH * 40 * SBS_H * SBS_W * sizeof(float);
  float *x = malloc(x_n * sizeof(float)), *w = malloc(w_n * sizeof(float));
  void *expected = malloc(y_bytes);
  if (x == NULL || w == NULL || expected == NULL) {
    REL_CHECK(0, "side by side: out of memory");
    free(x), free(w), free(expected);
    return;
  }
  tu_rng rng = {78};
  rel_fill(x, x_n, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  rel_fill(w, w_n, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 1;
  o.algo = CONVPOOL_ALGO_WINOGRAD;
  convpool_status st =
      convpool_layer_run(&l, x, SBS_BATCH, SBS_H, SBS_W, w, NULL, expected, y_bytes, &o);
  REL_CHECK(st == CONVPOOL_SUCCESS, "side by side: single-threaded run: %s", convpool_last_error());
  if (st == CONVPOOL_SUCCESS) {
    pthread_t t[THREADS];
    dw_arg args[THREADS];
    atomic_int go;
    atomic_init(&go, 0);
    memset(args, 0, sizeof args);
    for (int i = 0; i < THREADS; i++) {
      args[i].threads = 1 + i % 3;
      args[i].algo = CONVPOOL_ALGO_WINOGRAD;
      args[i].rows_per_item = i % 2 ? 7 : 0;
      args[i].layer = &l, args[i].x = x, args[i].w = w, args[i].expected = expected;
      args[i].y_bytes = y_bytes, args[i].go = &go;
      args[i].batch = SBS_BATCH, args[i].height = SBS_H, args[i].width = SBS_W;
    }
    start_all(t, THREADS, dw_runner, args, sizeof args[0]);
    atomic_store(&go, 1);
    join_all(t, THREADS);
    long runs = 0, wrong = 0;
    for (int i = 0; i < THREADS; i++) {
      REL_CHECK(args[i].wrong == 0,
                "side by side, thread %d (%d threads, rows %d): %ld wrong, first: %s", i,
                args[i].threads, args[i].rows_per_item, args[i].wrong, args[i].first_wrong);
      runs += args[i].runs, wrong += args[i].wrong;
    }
    if (wrong == 0)
      printf(
          "Winograd with images side by side, operator per thread, %d threads: %ld runs, all "
          "byte-identical to the single-threaded result\n",
          THREADS, runs);
  }
  free(x), free(w), free(expected);
}

/* ---- 3. per-thread error messages ---- */

typedef struct err_arg {
  int index;
  atomic_int *go;
  long wrong;
  char first_wrong[300];
} err_arg;

static void *err_runner(void *raw) {
  err_arg *a = raw;
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < 50 * g_rounds; r++) {
    /* c_out = -(1000 * (index + 1) + r): a value no other thread uses. */
    const long long bad = -(1000LL * (a->index + 1) + r);
    convpool_op *op = NULL;
    convpool_status st = convpool_op_create(CONVPOOL_FLOAT32, g_w, NULL, bad, 1, 1, 1, NULL, &op);
    char want[64];
    snprintf(want, sizeof want, "c_out = %lld ", bad);
    if (st != CONVPOOL_INVALID_ARGUMENT || strstr(convpool_last_error(), want) == NULL) {
      if (a->wrong++ == 0)
        snprintf(a->first_wrong, sizeof a->first_wrong, "want \"%s\", got %s \"%.200s\"", want,
                 convpool_status_string(st), convpool_last_error());
    }
  }
  return NULL;
}

static void test_error_messages(void) {
  pthread_t t[THREADS];
  err_arg args[THREADS];
  atomic_int go;
  atomic_init(&go, 0);
  memset(args, 0, sizeof args);
  for (int i = 0; i < THREADS; i++) args[i].index = i, args[i].go = &go;
  start_all(t, THREADS, err_runner, args, sizeof args[0]);
  atomic_store(&go, 1);
  join_all(t, THREADS);
  for (int i = 0; i < THREADS; i++)
    REL_CHECK(args[i].wrong == 0, "error messages, thread %d: %ld wrong, first: %s", i,
              args[i].wrong, args[i].first_wrong);
  printf("per-thread error messages: %d threads x %d failures, each named its own value\n", THREADS,
         50 * g_rounds);
}

/* ---- 4. create/destroy churn and one-shot calls ---- */

typedef struct churn_arg {
  int index;
  atomic_int *go;
  rel_alloc *counting;
  long calls, wrong;
  char first_wrong[300];
} churn_arg;

static void *churn_runner(void *raw) {
  churn_arg *a = raw;
  unsigned char *y = malloc(g_y_bytes);
  if (y == NULL) {
    a->wrong++;
    return NULL;
  }
  convpool_allocator iface = rel_alloc_interface(a->counting);
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < g_rounds / 2 + 1; r++) {
    convpool_options o;
    convpool_options_init(&o);
    o.threads = 1 + (a->index + r) % 4;
    o.allocator = (r % 2) ? &iface : NULL;
    convpool_status st;
    if ((a->index + r) % 2) { /* create, maybe run, destroy */
      convpool_op *op = NULL;
      st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in, g_case.k,
                              g_case.pool, &o, &op);
      if (st == CONVPOOL_SUCCESS && r % 3 == 0)
        st = convpool_op_run(op, g_x, g_case.batch, g_case.height, g_case.width, y, g_y_bytes);
      convpool_status d = convpool_op_destroy(op);
      if (st == CONVPOOL_SUCCESS) st = d;
      if (st == CONVPOOL_SUCCESS && r % 3 == 0 && memcmp(y, g_expected, g_y_bytes) != 0)
        st = CONVPOOL_INTERNAL_ERROR;
    } else {
      st = convpool_conv2d_maxpool(g_case.dtype, g_x, g_case.batch, g_case.c_in, g_case.height,
                                   g_case.width, g_w, g_case.c_out, g_case.k, g_bias, g_case.pool,
                                   y, g_y_bytes, &o);
      if (st == CONVPOOL_SUCCESS && memcmp(y, g_expected, g_y_bytes) != 0)
        st = CONVPOOL_INTERNAL_ERROR;
    }
    a->calls++;
    if (st != CONVPOOL_SUCCESS && a->wrong++ == 0)
      snprintf(a->first_wrong, sizeof a->first_wrong, "round %d: %s %.200s", r,
               convpool_status_string(st), convpool_last_error());
  }
  free(y);
  return NULL;
}

static void test_churn(void) {
  pthread_t t[THREADS];
  churn_arg args[THREADS];
  rel_alloc counting;
  rel_alloc_init(&counting);
  atomic_int go;
  atomic_init(&go, 0);
  memset(args, 0, sizeof args);
  for (int i = 0; i < THREADS; i++)
    args[i].index = i, args[i].go = &go, args[i].counting = &counting;
  start_all(t, THREADS, churn_runner, args, sizeof args[0]);
  atomic_store(&go, 1);
  join_all(t, THREADS);
  long calls = 0;
  for (int i = 0; i < THREADS; i++) {
    REL_CHECK(args[i].wrong == 0, "churn, thread %d: %ld wrong, first: %s", i, args[i].wrong,
              args[i].first_wrong);
    calls += args[i].calls;
  }
  REL_CHECK(rel_alloc_live(&counting) == 0 && counting.bad_free == 0,
            "churn: %ld blocks outstanding, %ld bad frees", rel_alloc_live(&counting),
            counting.bad_free);
  printf(
      "create/run/destroy and one-shot churn: %ld calls on %d threads, shared allocator "
      "balanced (peak %ld live blocks)\n",
      calls, THREADS, counting.peak_live);
}

/* ---- destroy racing a run ---- */

/* Each block gets its own mapping, with a header page holding its size;
   free unmaps it, so any later access faults. */
static void *unmap_alloc(void *context, size_t size, size_t alignment) {
  (void)context;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (alignment > page) return NULL;
  const size_t bytes = page + (size + page - 1) / page * page;
  unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  memcpy(p, &bytes, sizeof bytes);
  return p + page;
}

static void unmap_free(void *context, void *pointer) {
  (void)context;
  if (pointer == NULL) return;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *p = (unsigned char *)pointer - page;
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  munmap(p, bytes);
}

typedef struct race_arg {
  convpool_op *op;
  atomic_int inside; /* set by the run's scratch allocation: the run holds the op */
  convpool_status run_status;
  void *dst;
} race_arg;

static race_arg *g_race; /* the allocator's hook has no context of its own */

static void *race_alloc(void *context, size_t size, size_t alignment) {
  race_arg *a = g_race;
  if (a != NULL && a->op != NULL) atomic_store(&a->inside, 1);
  return unmap_alloc(context, size, alignment);
}

static void *race_runner(void *raw) {
  race_arg *a = raw;
  a->run_status =
      convpool_op_run(a->op, g_x, g_case.batch, g_case.height, g_case.width, a->dst, g_y_bytes);
  return NULL;
}

static void test_destroy_race(void) {
  convpool_allocator unmapping = {race_alloc, unmap_free, NULL};
  convpool_options o;
  convpool_options_init(&o);
  o.allocator = &unmapping;
  o.threads = 2;
  const int rounds = 20 * g_rounds;
  long refused = 0, wrong = 0;
  void *dst = malloc(g_y_bytes);
  for (int i = 0; i < rounds && wrong == 0; i++) {
    race_arg a;
    memset(&a, 0, sizeof a);
    atomic_init(&a.inside, 0);
    a.dst = dst;
    convpool_op *op = NULL;
    g_race = NULL;
    convpool_status st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in,
                                            g_case.k, g_case.pool, &o, &op);
    if (st != CONVPOOL_SUCCESS) {
      REL_CHECK(0, "destroy race: create: %s", convpool_last_error());
      break;
    }
    a.op = op;
    g_race = &a;
    pthread_t t;
    if (pthread_create(&t, NULL, race_runner, &a) != 0) {
      REL_CHECK(0, "destroy race: cannot start a thread");
      convpool_op_destroy(op);
      break;
    }
    while (!atomic_load(&a.inside)) sched_yield(); /* the run has claimed the op */
    int attempts = 0;
    for (;;) { /* destroy until it succeeds: refused while the run is inside */
      st = convpool_op_destroy(op);
      attempts++;
      if (st == CONVPOOL_SUCCESS) break;
      if (st != CONVPOOL_INVALID_STATE) {
        wrong++;
        REL_CHECK(0, "destroy race: destroy gave %s", convpool_status_string(st));
        break;
      }
      refused++;
      sched_yield();
    }
    pthread_join(t, NULL);
    if (a.run_status != CONVPOOL_SUCCESS) {
      wrong++;
      REL_CHECK(0, "destroy race: the run gave %s", convpool_status_string(a.run_status));
    } else if (memcmp(dst, g_expected, g_y_bytes) != 0) {
      wrong++;
      REL_CHECK(0, "destroy race: the run's output differs from the expected one");
    }
    (void)attempts;
  }
  g_race = NULL;
  free(dst);
  REL_CHECK(refused > 0, "destroy race: no destroy was ever refused during a run (%d rounds)",
            rounds);
  printf(
      "destroy racing a run: %d rounds, %ld destroys refused while a run held the operator, "
      "every run correct, blocks unmapped on free\n",
      rounds, refused);
}

int main(int argc, char **argv) {
  if (argc > 1) g_rounds = atoi(argv[1]);
  if (g_rounds < 1) g_rounds = 1;
  if (make_shared()) {
    test_shared_op();
    test_own_ops();
    test_depthwise_ops();
    test_side_by_side_ops();
    test_error_messages();
    test_churn();
    test_destroy_race();
  }
  free(g_x);
  free(g_w);
  free(g_bias);
  free(g_expected);
  for (int a = 0; a < 3; a++) free(g_expected_algo[a]);
  int failures = *rel_failure_count();
  printf("test_threads: %d rounds per thread, %d failures\n", g_rounds, failures);
  return failures ? 1 : 0;
}
