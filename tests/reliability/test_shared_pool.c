/*
 * The process-wide thread pool (options.shared_pool, convpool_shared_pool_*),
 * also run under ThreadSanitizer (run_sanitizers.sh runs every test whose
 * name has "threads").
 *
 *  1. The API's refusals: sizes out of range, shared_pool other than 0 or 1,
 *     shared_pool with threads > 0; an options struct of the size before
 *     shared_pool existed is still read (and means an own pool).
 *  2. Sizes: an operator on the shared pool plans and runs with the pool's
 *     size at the time of the run, resized between runs from 1 to 5 threads,
 *     and its output is byte-identical to the one-thread result.
 *  3. Serialised runs: while one run holds the shared pool (kept inside it by
 *     its allocator), a second shared-pool operator's run and a resize wait,
 *     an operator with its own threads runs through; once the first run ends,
 *     the waiting ones finish with correct outputs.
 *  4. Stress: four threads run their own shared-pool operators (every
 *     algorithm) while a fifth resizes the pool between 1 and 4 threads;
 *     every output is byte-identical to the one-thread result.
 *  5. OpenMP mode (convpool_shared_pool_use_openmp): its refusals; where the
 *     build has OpenMP, every algorithm on the pool's OpenMP threads, sized
 *     2, 3 and 1, byte-identical to the one-thread result, then the pool's
 *     own threads again; without OpenMP, enabling it is CONVPOOL_UNSUPPORTED
 *     and the mode stays. (The sanitizer script builds its ThreadSanitizer
 *     run without OpenMP, whose runtime is not instrumented.)
 *
 * Usage: test_shared_pool [rounds]   (default 50)
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rel_util.h"

#define RUNNERS 4

static int g_rounds = 50;
static const rel_case g_case = {CONVPOOL_FLOAT32, 2, 8, 19, 30, 27, 3, 2, 1};
static void *g_x, *g_w, *g_bias;
static void *g_expected[3]; /* one-thread result per algorithm */
static size_t g_y_bytes;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int make_data(void) {
  tu_rng rng = {777};
  const size_t es = sizeof(float);
  g_y_bytes = rel_y_count(&g_case) * es;
  g_x = malloc(rel_x_count(&g_case) * es);
  g_w = malloc(rel_w_count(&g_case) * es);
  g_bias = malloc((size_t)g_case.c_out * es);
  if (!g_x || !g_w || !g_bias) return 0;
  rel_fill(g_x, rel_x_count(&g_case), g_case.dtype, &rng, -1.0f, 1.0f);
  rel_fill(g_w, rel_w_count(&g_case), g_case.dtype, &rng, -1.0f, 1.0f);
  rel_fill(g_bias, (size_t)g_case.c_out, g_case.dtype, &rng, -1.0f, 1.0f);
  for (int a = 0; a < 3; a++) {
    g_expected[a] = malloc(g_y_bytes);
    if (g_expected[a] == NULL) return 0;
    if (!rel_one_thread_result(&g_case, g_x, g_w, g_bias, a, g_expected[a], g_y_bytes,
                               "one-thread result"))
      return 0;
  }
  return 1;
}

/* An operator of the case on the shared pool (or its own threads). */
static convpool_op *make_op(convpool_algo algo, int shared, const convpool_allocator *allocator) {
  convpool_options o;
  convpool_options_init(&o);
  o.algo = algo;
  o.shared_pool = shared;
  o.threads = shared ? 0 : 2;
  o.allocator = allocator;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in,
                                          g_case.k, g_case.pool, &o, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "create (algo %d, shared %d): %s", (int)algo, shared,
            convpool_last_error());
  return st == CONVPOOL_SUCCESS ? op : NULL;
}

static convpool_status run(convpool_op *op, void *y) {
  return convpool_op_run(op, g_x, g_case.batch, g_case.height, g_case.width, y, g_y_bytes);
}

/* ---- 1. refusals ---- */

static void test_refusals(void) {
  int threads = -1;
  REL_CHECK(convpool_shared_pool_get_threads(&threads) == CONVPOOL_SUCCESS && threads >= 1,
            "get_threads before first use: %d", threads);
  REL_CHECK(convpool_shared_pool_get_threads(NULL) == CONVPOOL_INVALID_ARGUMENT,
            "get_threads(NULL) accepted");
  const int bad[] = {-1, 1025, -2147483647 - 1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    convpool_status st = convpool_shared_pool_set_threads(bad[i]);
    char want[32];
    snprintf(want, sizeof want, "threads = %d ", bad[i]);
    REL_CHECK(st == CONVPOOL_INVALID_ARGUMENT && strstr(convpool_last_error(), want) != NULL,
              "set_threads(%d): %s \"%s\"", bad[i], convpool_status_string(st),
              convpool_last_error());
  }
  convpool_options o;
  convpool_options_init(&o);
  REL_CHECK(o.shared_pool == 0, "options_init: shared_pool = %d", o.shared_pool);
  convpool_op *op = NULL;
  o.shared_pool = 2;
  convpool_status st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in,
                                          g_case.k, g_case.pool, &o, &op);
  REL_CHECK(st == CONVPOOL_INVALID_ARGUMENT && op == NULL &&
                strstr(convpool_last_error(), "shared_pool = 2") != NULL,
            "shared_pool = 2: %s \"%s\"", convpool_status_string(st), convpool_last_error());
  o.shared_pool = 1;
  o.threads = 3;
  st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in, g_case.k,
                          g_case.pool, &o, &op);
  REL_CHECK(st == CONVPOOL_INVALID_ARGUMENT && op == NULL &&
                strstr(convpool_last_error(), "threads = 3 with shared_pool") != NULL,
            "shared_pool with threads = 3: %s \"%s\"", convpool_status_string(st),
            convpool_last_error());
  /* A caller built before shared_pool: its struct ends before the field. */
  union {
    convpool_options options;
    unsigned char bytes[sizeof(convpool_options) + 16];
  } old;
  memset(&old, 0xAB, sizeof old); /* what lies past the old struct must not be read */
  convpool_options_init(&o);
  o.threads = 1;
  o.size = offsetof(convpool_options, shared_pool);
  memcpy(&old, &o, o.size);
  st = convpool_op_create(g_case.dtype, g_w, g_bias, g_case.c_out, g_case.c_in, g_case.k,
                          g_case.pool, &old.options, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "options of the older size: %s", convpool_last_error());
  if (st == CONVPOOL_SUCCESS) {
    convpool_plan_info info;
    st = convpool_op_plan(op, g_case.batch, g_case.height, g_case.width, &info);
    REL_CHECK(st == CONVPOOL_SUCCESS && info.threads == 1, "older options: plan threads %d",
              info.threads);
    convpool_op_destroy(op);
  }
  printf(
      "refusals: sizes out of range, shared_pool = 2, shared_pool with threads; older "
      "options read\n");
}

/* ---- 2. sizes ---- */

static void test_sizes(void) {
  convpool_op *op = make_op(CONVPOOL_ALGO_AUTO, 1, NULL);
  unsigned char *y = malloc(g_y_bytes);
  if (op == NULL || y == NULL) {
    free(y);
    convpool_op_destroy(op);
    return;
  }
  const int sizes[] = {1, 3, 2, 5, 1, 2};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    convpool_status st = convpool_shared_pool_set_threads(sizes[i]);
    REL_CHECK(st == CONVPOOL_SUCCESS, "set_threads(%d): %s", sizes[i], convpool_last_error());
    int threads = 0;
    convpool_shared_pool_get_threads(&threads);
    REL_CHECK(threads == sizes[i], "get_threads after set_threads(%d): %d", sizes[i], threads);
    convpool_plan_info info;
    st = convpool_op_plan(op, g_case.batch, g_case.height, g_case.width, &info);
    REL_CHECK(st == CONVPOOL_SUCCESS && info.threads == sizes[i], "plan on %d threads: %d",
              sizes[i], info.threads);
    memset(y, 0xC3, g_y_bytes);
    st = run(op, y);
    convpool_run_stats stats;
    convpool_op_last_run_stats(op, &stats);
    REL_CHECK(st == CONVPOOL_SUCCESS && memcmp(y, g_expected[0], g_y_bytes) == 0,
              "run on %d threads: %s, output %s", sizes[i], convpool_last_error(),
              st == CONVPOOL_SUCCESS ? "differs" : "-");
    REL_CHECK(stats.threads >= 1 && stats.threads <= sizes[i], "run on %d threads used %d",
              sizes[i], stats.threads);
  }
  /* 0 = the usable CPUs */
  REL_CHECK(convpool_shared_pool_set_threads(0) == CONVPOOL_SUCCESS, "set_threads(0): %s",
            convpool_last_error());
  convpool_info facts;
  convpool_get_info(&facts);
  int threads = 0;
  convpool_shared_pool_get_threads(&threads);
  REL_CHECK(threads == facts.usable_cpus, "set_threads(0) gave %d, usable CPUs %d", threads,
            facts.usable_cpus);
  REL_CHECK(convpool_op_destroy(op) == CONVPOOL_SUCCESS, "destroy: %s", convpool_last_error());
  free(y);
  printf(
      "sizes: one operator on the shared pool resized to 1, 3, 2, 5, 1, 2 and the usable "
      "CPUs: each plan and run on the pool's size, outputs byte-identical\n");
}

/* ---- 3. serialised runs ---- */

typedef struct hold {
  atomic_int inside;  /* the holding run is in its allocator */
  atomic_int release; /* let it go on */
} hold;

/* The allocator hook of the holding operator: its first run's scratch
   allocation happens while the run holds the shared pool. */
static void hold_hook(void *context, size_t size) {
  (void)size;
  hold *h = context;
  if (atomic_load(&h->release)) return;
  atomic_store(&h->inside, 1);
  while (!atomic_load(&h->release)) sched_yield();
}

typedef struct call {
  convpool_op *op;
  int resize; /* instead of a run: set_threads(resize) */
  void *y;
  atomic_int done;
  convpool_status st;
} call;

static void *do_call(void *raw) {
  call *c = raw;
  c->st = c->resize ? convpool_shared_pool_set_threads(c->resize) : run(c->op, c->y);
  atomic_store(&c->done, 1);
  return NULL;
}

static void test_serialised(void) {
  convpool_shared_pool_set_threads(2);
  hold h;
  atomic_init(&h.inside, 0);
  atomic_init(&h.release, 1); /* not while creating */
  rel_alloc counting;
  rel_alloc_init(&counting);
  counting.hook = hold_hook;
  counting.hook_context = &h;
  convpool_allocator holding_allocator = rel_alloc_interface(&counting);
  convpool_op *holder = make_op(CONVPOOL_ALGO_AUTO, 1, &holding_allocator);
  convpool_op *waiter = make_op(CONVPOOL_ALGO_SHIFT_REDUCE, 1, NULL);
  convpool_op *own = make_op(CONVPOOL_ALGO_AUTO, 0, NULL);
  void *ys[4];
  for (int i = 0; i < 4; i++) ys[i] = malloc(g_y_bytes);
  if (holder && waiter && own && ys[0] && ys[1] && ys[2] && ys[3]) {
    REL_CHECK(run(waiter, ys[1]) == CONVPOOL_SUCCESS, "warm-up: %s", convpool_last_error());
    atomic_store(&h.release, 0);
    call calls[4] = {{.op = holder, .y = ys[0]},
                     {.op = waiter, .y = ys[1]},
                     {.resize = 3},
                     {.op = own, .y = ys[3]}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) atomic_init(&calls[i].done, 0);
    pthread_create(&t[0], NULL, do_call, &calls[0]);
    while (!atomic_load(&h.inside)) sched_yield(); /* the holder has the pool */
    for (int i = 1; i < 4; i++) pthread_create(&t[i], NULL, do_call, &calls[i]);
    pthread_join(t[3], NULL); /* the own-threads operator does not wait */
    sleep_ms(200);
    REL_CHECK(!atomic_load(&calls[1].done), "a run on the shared pool ended while another held it");
    REL_CHECK(!atomic_load(&calls[2].done), "set_threads ended while a run held the pool");
    REL_CHECK(calls[3].st == CONVPOOL_SUCCESS && memcmp(ys[3], g_expected[0], g_y_bytes) == 0,
              "own-threads run beside the held pool: %s", convpool_status_string(calls[3].st));
    atomic_store(&h.release, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    REL_CHECK(calls[0].st == CONVPOOL_SUCCESS && memcmp(ys[0], g_expected[0], g_y_bytes) == 0,
              "the holding run: %s", convpool_status_string(calls[0].st));
    REL_CHECK(calls[1].st == CONVPOOL_SUCCESS && memcmp(ys[1], g_expected[1], g_y_bytes) == 0,
              "the waiting run: %s", convpool_status_string(calls[1].st));
    REL_CHECK(calls[2].st == CONVPOOL_SUCCESS, "the waiting resize: %s",
              convpool_status_string(calls[2].st));
  }
  convpool_op_destroy(holder);
  convpool_op_destroy(waiter);
  convpool_op_destroy(own);
  REL_CHECK(rel_alloc_live(&counting) == 0, "holder: %ld blocks outstanding",
            rel_alloc_live(&counting));
  for (int i = 0; i < 4; i++) free(ys[i]);
  printf(
      "serialised: while a run held the shared pool, another shared-pool run and a resize "
      "waited, an own-threads run did not; all correct afterwards\n");
}

/* ---- 4. stress ---- */

typedef struct runner {
  convpool_algo algo;
  atomic_int *go, *running;
  long runs, wrong;
  char first_wrong[300];
} runner;

static void *stress_runner(void *raw) {
  runner *a = raw;
  unsigned char *y = malloc(g_y_bytes);
  convpool_op *op = make_op(a->algo, 1, NULL);
  while (!atomic_load(a->go)) sched_yield();
  for (int r = 0; r < g_rounds && op != NULL && y != NULL; r++) {
    memset(y, 0xC3, g_y_bytes);
    convpool_status st = run(op, y);
    a->runs++;
    if ((st != CONVPOOL_SUCCESS || memcmp(y, g_expected[a->algo], g_y_bytes) != 0) &&
        a->wrong++ == 0)
      snprintf(a->first_wrong, sizeof a->first_wrong, "run %d: %s %.200s", r,
               convpool_status_string(st), convpool_last_error());
  }
  convpool_op_destroy(op);
  free(y);
  atomic_fetch_sub(a->running, 1);
  return NULL;
}

static void test_stress(void) {
  atomic_int go, running;
  atomic_init(&go, 0);
  atomic_init(&running, RUNNERS);
  runner args[RUNNERS];
  pthread_t t[RUNNERS];
  memset(args, 0, sizeof args);
  for (int i = 0; i < RUNNERS; i++) {
    args[i].algo = (convpool_algo)(i % 3);
    args[i].go = &go;
    args[i].running = &running;
    pthread_create(&t[i], NULL, stress_runner, &args[i]);
  }
  atomic_store(&go, 1);
  long resizes = 0, failed = 0;
  while (atomic_load(&running) > 0) {
    if (convpool_shared_pool_set_threads(1 + (int)(resizes % 4)) != CONVPOOL_SUCCESS) failed++;
    resizes++;
    sched_yield();
  }
  long runs = 0;
  for (int i = 0; i < RUNNERS; i++) {
    pthread_join(t[i], NULL);
    REL_CHECK(args[i].wrong == 0, "stress, runner %d: %ld wrong, first: %s", i, args[i].wrong,
              args[i].first_wrong);
    runs += args[i].runs;
  }
  REL_CHECK(failed == 0, "stress: %ld resizes failed", failed);
  printf(
      "stress: %d threads, %ld runs on the shared pool while it was resized %ld times, all "
      "byte-identical\n",
      RUNNERS, runs, resizes);
}

/* ---- 5. OpenMP mode ---- */

static void test_openmp(void) {
  convpool_status st = convpool_shared_pool_use_openmp(2);
  REL_CHECK(st == CONVPOOL_INVALID_ARGUMENT && strstr(convpool_last_error(), "enable = 2") != NULL,
            "use_openmp(2): %s, %s", convpool_status_string(st), convpool_last_error());
  REL_CHECK(convpool_shared_pool_get_openmp(NULL) == CONVPOOL_INVALID_ARGUMENT,
            "get_openmp(NULL) accepted");
  int mode = -1;
  st = convpool_shared_pool_use_openmp(1);
  convpool_shared_pool_get_openmp(&mode);
  if (st == CONVPOOL_UNSUPPORTED) {
    REL_CHECK(mode == 0, "use_openmp(1) unsupported, but the mode is %d", mode);
    printf("openmp: this build has no OpenMP: use_openmp(1) is refused (%s), the mode stays 0\n",
           convpool_last_error());
    return;
  }
  REL_CHECK(st == CONVPOOL_SUCCESS && mode == 1, "use_openmp(1): %s, mode %d",
            convpool_last_error(), mode);
  unsigned char *y = malloc(g_y_bytes);
  const int sizes[] = {2, 3, 1};
  for (int a = 0; a < 3 && y != NULL; a++) {
    convpool_op *op = make_op((convpool_algo)a, 1, NULL);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && op != NULL; i++) {
      REL_CHECK(convpool_shared_pool_set_threads(sizes[i]) == CONVPOOL_SUCCESS,
                "set_threads(%d) in OpenMP mode: %s", sizes[i], convpool_last_error());
      memset(y, 0xC3, g_y_bytes);
      st = run(op, y);
      convpool_run_stats stats;
      convpool_op_last_run_stats(op, &stats);
      REL_CHECK(st == CONVPOOL_SUCCESS && memcmp(y, g_expected[a], g_y_bytes) == 0,
                "algo %d on %d OpenMP threads: %s, output %s", a, sizes[i], convpool_last_error(),
                st == CONVPOOL_SUCCESS ? "differs" : "-");
      REL_CHECK(stats.threads >= 1 && stats.threads <= sizes[i],
                "algo %d on %d OpenMP threads used %d", a, sizes[i], stats.threads);
    }
    convpool_op_destroy(op);
  }
  st = convpool_shared_pool_use_openmp(0);
  convpool_shared_pool_get_openmp(&mode);
  REL_CHECK(st == CONVPOOL_SUCCESS && mode == 0, "use_openmp(0): %s, mode %d",
            convpool_last_error(), mode);
  convpool_op *op = make_op(CONVPOOL_ALGO_AUTO, 1, NULL);
  if (op != NULL && y != NULL) {
    REL_CHECK(convpool_shared_pool_set_threads(2) == CONVPOOL_SUCCESS, "set_threads(2): %s",
              convpool_last_error());
    memset(y, 0xC3, g_y_bytes);
    st = run(op, y);
    REL_CHECK(st == CONVPOOL_SUCCESS && memcmp(y, g_expected[0], g_y_bytes) == 0,
              "own threads again: %s", convpool_last_error());
  }
  convpool_op_destroy(op);
  free(y);
  printf(
      "openmp: every algorithm on the pool's OpenMP threads (2, 3, 1) byte-identical to one "
      "thread; back to the pool's own threads\n");
}

int main(int argc, char **argv) {
  if (argc > 1) g_rounds = atoi(argv[1]);
  if (g_rounds < 1) g_rounds = 1;
  if (make_data()) {
    test_refusals();
    test_sizes();
    test_serialised();
    test_stress();
    test_openmp();
  }
  convpool_shared_pool_set_threads(1); /* no workers left at exit */
  free(g_x);
  free(g_w);
  free(g_bias);
  for (int a = 0; a < 3; a++) free(g_expected[a]);
  int failures = *rel_failure_count();
  printf("test_shared_pool: %d rounds per thread, %d failures\n", g_rounds, failures);
  return failures ? 1 : 0;
}
