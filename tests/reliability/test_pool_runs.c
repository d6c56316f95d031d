/*
 * The thread pool's runs (src/threadpool.c), also run under ThreadSanitizer
 * (run_sanitizers.sh: "threads" in the test's name):
 *
 *  1. Every item of a run is done exactly once, on a thread index below the
 *     pool's size, and the run returns only when all of them are done; for
 *     pools of 1-4 threads and runs of 0 to 1000 items.
 *  2. Runs after idle pauses (0.1-2 ms, long enough for the workers to go
 *     to sleep): a run ends when its items are done, and a worker that wakes
 *     late must not run an item of a run that has ended. Each run's context
 *     lives on the caller's stack and is poisoned when the run returns; an
 *     item that sees a poisoned context, or a count of done items that
 *     moves after its run returned, fails the test.
 *  3. A run of more items than one round of the ticket holds (2^24 + 3):
 *     every item once.
 *  4. A pool destroyed right after a run, its workers still waking.
 *  5. Home ranges with stealing: thread 0's first item waits until another
 *     thread has run an item of thread 0's home range; without stealing the
 *     run would never end (the test gives up after 5 s and fails).
 *
 * Usage: test_pool_runs [runs]   (default 300 runs with pauses)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rel_util.h"
#include "threadpool.h"

#define ALIVE 0x600DC0DEu
#define POISON 0xDEADBEEFu

typedef struct run_context {
  _Atomic unsigned magic;
  _Atomic unsigned char *seen; /* per item: times done */
  _Atomic int64_t done;
  int threads;
  _Atomic int bad_thread, bad_context;
} run_context;

static void count_item(void *raw, int64_t item, int thread) {
  run_context *c = raw;
  if (atomic_load(&c->magic) != ALIVE) atomic_store(&c->bad_context, 1);
  if (thread < 0 || thread >= c->threads) atomic_store(&c->bad_thread, 1);
  atomic_fetch_add(&c->seen[item], 1);
  atomic_fetch_add(&c->done, 1);
}

static void pause_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* One run of `items` on `pool`, checked; returns 0 on a failure. */
static int checked_run(cp_threadpool *pool, int threads, int64_t items, const char *what) {
  run_context c;
  atomic_init(&c.magic, ALIVE);
  atomic_init(&c.done, 0);
  atomic_init(&c.bad_thread, 0);
  atomic_init(&c.bad_context, 0);
  c.threads = threads;
  c.seen = calloc(items > 0 ? (size_t)items : 1, 1);
  if (c.seen == NULL) {
    REL_CHECK(0, "%s: out of memory in the test", what);
    return 0;
  }
  const int used = cp_threadpool_run(pool, count_item, &c, items);
  const int64_t done_at_return = atomic_load(&c.done);
  int ok = 1;
  const int want = items < 1 ? 1 : items < threads ? (int)items : threads;
  REL_CHECK(used == want, "%s: %lld items on %d threads: %d took part, expected %d", what,
            (long long)items, threads, used, want);
  ok &= used == want;
  REL_CHECK(done_at_return == items, "%s: the run returned with %lld of %lld items done", what,
            (long long)done_at_return, (long long)items);
  ok &= done_at_return == items;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < items; i++)
    if (atomic_load(&c.seen[i]) != 1) {
      if (first < 0) first = i;
      wrong++;
    }
  REL_CHECK(wrong == 0, "%s: %lld of %lld items not done exactly once (first: item %lld, %d times)",
            what, (long long)wrong, (long long)items, (long long)first,
            first >= 0 ? (int)atomic_load(&c.seen[first]) : 0);
  ok &= wrong == 0;
  REL_CHECK(!atomic_load(&c.bad_thread), "%s: an item ran on a thread index outside 0..%d", what,
            threads - 1);
  /* Poison the context, give late workers time to wake, and check that none
     touched it (TSan and ASan would also see a use of the dead frame). */
  atomic_store(&c.magic, POISON);
  pause_us(200);
  REL_CHECK(atomic_load(&c.done) == done_at_return,
            "%s: %lld items were done after the run returned", what,
            (long long)(atomic_load(&c.done) - done_at_return));
  ok &= atomic_load(&c.done) == done_at_return && !atomic_load(&c.bad_context);
  free((void *)c.seen);
  return ok;
}

/* Test 5: items [0, home) are thread 0's home range. */
typedef struct steal_context {
  int64_t home;
  _Atomic int first_taken, stolen;
  _Atomic int64_t done;
  _Atomic int timed_out;
} steal_context;

static void steal_item(void *raw, int64_t item, int thread) {
  steal_context *c = raw;
  if (thread == 0 && !atomic_exchange(&c->first_taken, 1)) {
    for (int waited = 0; !atomic_load(&c->stolen); waited++) {
      if (waited >= 100000) { /* 5 s */
        atomic_store(&c->timed_out, 1);
        break;
      }
      pause_us(50);
    }
  }
  if (thread != 0 && item < c->home) atomic_store(&c->stolen, 1);
  atomic_fetch_add(&c->done, 1);
}

static int steal_run(int threads) {
  cp_threadpool *pool = NULL;
  if (cp_threadpool_create(threads, cp_allocator_or_default(NULL), &pool) != CONVPOOL_SUCCESS) {
    REL_CHECK(0, "create a pool of %d threads: %s", threads, convpool_last_error());
    return 0;
  }
  const int64_t items = 20 * threads;
  steal_context c = {.home = items / threads};
  atomic_init(&c.first_taken, 0);
  atomic_init(&c.stolen, 0);
  atomic_init(&c.done, 0);
  atomic_init(&c.timed_out, 0);
  cp_threadpool_run(pool, steal_item, &c, items);
  cp_threadpool_destroy(pool);
  REL_CHECK(!atomic_load(&c.timed_out),
            "pool of %d: no other thread took an item of a waiting thread's home range", threads);
  REL_CHECK(atomic_load(&c.done) == items, "pool of %d: %lld of %lld items done", threads,
            (long long)atomic_load(&c.done), (long long)items);
  return !atomic_load(&c.timed_out) && atomic_load(&c.done) == items;
}

int main(int argc, char **argv) {
  const int runs = argc > 1 ? atoi(argv[1]) : 300;
  int checked = 0;
  for (int threads = 1; threads <= 4; threads++) {
    cp_threadpool *pool = NULL;
    if (cp_threadpool_create(threads, cp_allocator_or_default(NULL), &pool) != CONVPOOL_SUCCESS) {
      REL_CHECK(0, "create a pool of %d threads: %s", threads, convpool_last_error());
      continue;
    }
    char what[96];
    static const int64_t counts[] = {0, 1, 2, 3, 5, 17, 1000};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
      snprintf(what, sizeof what, "back to back, pool of %d", threads);
      checked += checked_run(pool, threads, counts[i], what);
    }
    /* after pauses that let the workers sleep: 0.1 to 2 ms */
    unsigned seed = 12345u + (unsigned)threads;
    for (int r = 0; r < runs; r++) {
      seed = seed * 1103515245u + 12345u;
      pause_us(100 + (long)(seed >> 16) % 1900);
      snprintf(what, sizeof what, "run %d after a pause, pool of %d", r, threads);
      if (!checked_run(pool, threads, 1 + (int64_t)((seed >> 8) % 9), what)) break;
      checked++;
    }
    if (threads == 2) { /* more items than one ticket round */
      snprintf(what, sizeof what, "2^24 + 3 items, pool of %d", threads);
      checked += checked_run(pool, threads, ((int64_t)1 << 24) + 3, what);
    }
    /* destroyed right after a run, its workers possibly still waking */
    pause_us(1000);
    snprintf(what, sizeof what, "the last run before destroy, pool of %d", threads);
    checked += checked_run(pool, threads, 2, what);
    cp_threadpool_destroy(pool);
  }
  for (int threads = 2; threads <= 4; threads++) checked += steal_run(threads);
  const int failures = *rel_failure_count();
  printf("test_pool_runs: %d runs checked, %d failures\n", checked, failures);
  return failures ? 1 : 0;
}
