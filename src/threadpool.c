/*
 * Persistent thread pool. A run publishes a task and a generation number under
 * the lock, and every thread (the caller included) takes work items from
 * atomic counters. Each item owns a disjoint part of the output, so which
 * thread runs which item never changes a result.
 *
 * Thread t of A first takes the items of its home range, [n t / A, n (t+1) /
 * A) of the run's n, one at a time from that range's counter, then helps the
 * other ranges (t+1, t+2, ... in turn) from theirs. So a thread runs the same
 * items run after run and phase after phase where the plan numbers them alike
 * (the items of a region follow its preparation's), and the data an item
 * reads stays in that thread's caches: on a host whose two cores share no
 * cache (a round trip between them of 500 ns), against items taken from one
 * counter in whatever order the threads came: 64 -> 64 at 56x56 0.39 ->
 * 0.35 ms, and Winograd's 256 -> 256 at 14x14 0.50 -> 0.44-0.46 with its
 * rows in a region per thread (plan.c: cp_wants_local_regions), whose items
 * read what the phase before them transformed. Stealing keeps the threads
 * busy to the end when one of them is slow.
 *
 * Between runs a worker first spins a while (CP_SPIN_ROUNDS pauses, about 40
 * microseconds on Zen 5) on the generation, then sleeps on a condition
 * variable; the caller likewise spins on the count of items done before it
 * sleeps. A futex wake-up costs tens of microseconds on a VM, and a layer
 * with a phase before its items runs the pool twice: on 7x7-14x14 layers of
 * a few hundred microseconds the sleeps were a tenth of the time. The spin is
 * bounded, so an idle pool sleeps.
 *
 * A run ends when its items are done, not when every worker has woken: a
 * worker that wakes late finds the items taken and sleeps again. (Waiting
 * for it made a layer of 15 us take 200 us after an idle pause of 0.2-1 ms
 * on a Zen 3 VM, where waking a sleeping vCPU is that slow.) So an item is
 * claimed with its run's tag: each home range's counter holds the run's
 * generation above the range's next item, and a worker whose copy of a run's
 * task is stale fails the compare-and-swap instead of running another run's
 * item with it.
 *
 * An operator owns a pool, or runs on the process-wide one (shared_pool),
 * which one lock hands to one run at a time.
 *
 * The process-wide pool can instead run on the OpenMP runtime's threads
 * (convpool_shared_pool_use_openmp, in builds with OpenMP): a run is one
 * parallel region whose threads take items from the same home ranges, and the
 * pool has no workers of its own. In a process whose other libraries run on
 * that runtime (torch, oneDNN) the regions reuse their threads, which spin
 * for a while after each of their regions, instead of sharing the cores
 * with them: two pools of spinning threads on two cores made every layer
 * after one of torch's run at about one thread's speed.
 */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#ifdef CONVPOOL_HAVE_OPENMP
#include <omp.h>
#endif

struct cp_threadpool {
  convpool_allocator allocator; /* a copy: the caller's struct need not outlive the pool */
  int threads;                  /* including the caller */
  int started;                  /* workers actually started */
  int openmp;                   /* runs are OpenMP parallel regions; no workers */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t work_ready;
  pthread_cond_t work_done;
  _Atomic unsigned long generation; /* written under the lock; also read while spinning */
  int active; /* threads taking part in the current run, the caller included */
  int stop;
  cp_task_fn fn; /* the current run's task, items [offset, offset + items) */
  void *context;
  int64_t items, offset;
  /* a counter per home range (threads of them, a cache line each): with
     own threads the run's tag, then the range's next item (CP_TICKET_*); in
     OpenMP regions the range's next item */
  struct cp_home *homes;
  _Atomic int64_t done; /* own threads: items of the current run done */
};

/* A home range's counter, alone in its cache line. */
typedef struct cp_home {
  _Atomic uint64_t ticket;
  char pad[CP_CACHE_LINE - sizeof(uint64_t)];
} cp_home;

/* A ticket: the low bits of the run's generation above the next item's
   index. A run of more items goes in rounds of CP_ROUND_ITEMS. The tag
   repeats after 2^40 runs: a worker would have to sleep through all of them
   for its stale copy to match. */
#define CP_TICKET_INDEX_BITS 24
#define CP_ROUND_ITEMS ((int64_t)1 << CP_TICKET_INDEX_BITS)
#define CP_TICKET_INDEX(t) ((int64_t)((t) & (uint64_t)(CP_ROUND_ITEMS - 1)))
#define CP_TICKET_TAG(generation) ((uint64_t)(generation) << CP_TICKET_INDEX_BITS)

/* A worker's copy of a run's task, taken under the lock. */
typedef struct cp_round {
  cp_task_fn fn;
  void *context;
  int64_t items, offset;
  uint64_t tag;
  int active; /* threads taking part: home ranges */
} cp_round;

/* The first item of home range h of a round of n items over `active` threads. */
static int64_t cp_home_start(int64_t n, int h, int active) {
  return n * h / active;
}

typedef struct cp_worker_arg {
  cp_threadpool *pool;
  int index;
} cp_worker_arg;

/* Claim and run items of the round, the home range's first, then the other
   ranges' in turn, while its tag is their counters'; the one who finishes
   its last item wakes the caller. */
static void cp_take_round(cp_threadpool *p, const cp_round *round, int thread) {
  for (int k = 0; k < round->active; k++) {
    const int h = (thread + k) % round->active;
    const int64_t end = cp_home_start(round->items, h + 1, round->active);
    _Atomic uint64_t *ticket = &p->homes[h].ticket;
    uint64_t t = atomic_load_explicit(ticket, memory_order_acquire);
    for (;;) {
      if ((t & ~(uint64_t)(CP_ROUND_ITEMS - 1)) != round->tag || CP_TICKET_INDEX(t) >= end) break;
      if (!atomic_compare_exchange_weak_explicit(ticket, &t, t + 1, memory_order_acq_rel,
                                                 memory_order_acquire))
        continue;
      round->fn(round->context, round->offset + CP_TICKET_INDEX(t), thread);
      if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == round->items) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_signal(&p->work_done);
        pthread_mutex_unlock(&p->lock);
        return;
      }
      t = atomic_load_explicit(ticket, memory_order_acquire);
    }
  }
}

#define CP_SPIN_ROUNDS 2048

static inline void cp_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spin until *v differs from `was` or the rounds run out. */
static void cp_spin_while_ulong(_Atomic unsigned long *v, unsigned long was) {
  for (int i = 0; i < CP_SPIN_ROUNDS && atomic_load_explicit(v, memory_order_relaxed) == was; i++)
    cp_pause();
}

static void cp_spin_while_below(_Atomic int64_t *v, int64_t end) {
  for (int i = 0; i < CP_SPIN_ROUNDS && atomic_load_explicit(v, memory_order_relaxed) < end; i++)
    cp_pause();
}

static void *cp_worker_main(void *raw) {
  cp_threadpool *p = ((cp_worker_arg *)raw)->pool;
  int index = ((cp_worker_arg *)raw)->index;
  unsigned long seen = 0;
  for (;;) {
    cp_spin_while_ulong(&p->generation, seen); /* then the run's fields under the lock */
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->generation) == seen && !p->stop)
      pthread_cond_wait(&p->work_ready, &p->lock);
    if (p->stop) break;
    seen = atomic_load(&p->generation);
    const int needed = index < p->active; /* else not needed for this run */
    const cp_round round = {p->fn, p->context, p->items, p->offset, CP_TICKET_TAG(seen), p->active};
    pthread_mutex_unlock(&p->lock);
    if (needed) cp_take_round(p, &round, index);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Worker arguments live right after the pthread_t array in one allocation. */
static convpool_status cp_threadpool_start(int threads, int openmp, const convpool_allocator *a,
                                           cp_threadpool **out) {
  *out = NULL;
  /* the cache probe (cpu.h) while no worker of ours spins on a CPU it needs:
     asked first by a plan made after runs, it would race the pool's workers */
  if (threads > 1) (void)cp_cpu_cores_share_cache(NULL);
  cp_threadpool *p = cp_alloc(a, sizeof *p);
  if (p == NULL) return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate the thread pool");
  *p = (cp_threadpool){.allocator = *a, .threads = threads, .openmp = openmp};
  atomic_init(&p->generation, 0);
  atomic_init(&p->done, 0);
  int workers = openmp ? 0 : threads - 1;
  if (threads > 1) {
    p->homes = cp_alloc(a, (size_t)threads * sizeof(cp_home)); /* 64-byte aligned */
    if (workers > 0)
      p->workers = cp_alloc(a, (size_t)workers * (sizeof(pthread_t) + sizeof(cp_worker_arg)));
    if (p->homes == NULL || (workers > 0 && p->workers == NULL)) {
      cp_free(a, p->homes);
      cp_free(a, p->workers);
      cp_free(a, p);
      return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %d worker threads", workers);
    }
    for (int h = 0; h < threads; h++) atomic_init(&p->homes[h].ticket, 0);
  }
  if (pthread_mutex_init(&p->lock, NULL) != 0) goto error_mutex;
  if (pthread_cond_init(&p->work_ready, NULL) != 0) goto error_ready;
  if (pthread_cond_init(&p->work_done, NULL) != 0) goto error_done;
  cp_worker_arg *args = workers > 0 ? (cp_worker_arg *)(p->workers + workers) : NULL;
  for (int i = 0; i < workers; i++) {
    args[i] = (cp_worker_arg){p, i + 1};
    int rc = pthread_create(&p->workers[i], NULL, cp_worker_main, &args[i]);
    if (rc != 0) {
      cp_threadpool_destroy(p);
      return cp_fail(rc == EAGAIN ? CONVPOOL_OUT_OF_MEMORY : CONVPOOL_INTERNAL_ERROR,
                     "cannot start worker thread %d of %d (error %d)", i + 1, workers, rc);
    }
    p->started++;
  }
  *out = p;
  return CONVPOOL_SUCCESS;

error_done:
  pthread_cond_destroy(&p->work_ready);
error_ready:
  pthread_mutex_destroy(&p->lock);
error_mutex:
  cp_free(a, p->homes);
  cp_free(a, p->workers);
  cp_free(a, p);
  return cp_fail(CONVPOOL_INTERNAL_ERROR, "cannot initialise the thread pool's locks");
}

convpool_status cp_threadpool_create(int threads, const convpool_allocator *a,
                                     cp_threadpool **out) {
  return cp_threadpool_start(threads, 0, a, out);
}

int cp_threadpool_threads(const cp_threadpool *p) {
  return p->threads;
}

#ifdef CONVPOOL_HAVE_OPENMP
/* The home range's items, then the other ranges' in turn, of a region of
   `team` threads. */
static void cp_take_items(cp_threadpool *p, int thread, int team) {
  for (int k = 0; k < team; k++) {
    const int h = (thread + k) % team;
    const int64_t end = cp_home_start(p->items, h + 1, team);
    for (;;) {
      const uint64_t item = atomic_fetch_add_explicit(&p->homes[h].ticket, 1, memory_order_relaxed);
      if ((int64_t)item >= end) break;
      p->fn(p->context, (int64_t)item, thread);
    }
  }
}

/* One parallel region of at most `active` threads; the runtime may give
   fewer (a region inside another one gets one), never more: the home ranges
   are the team's. */
static int cp_threadpool_run_openmp(cp_threadpool *p, int active) {
  int used = 1;
#pragma omp parallel num_threads(active)
  {
    const int thread = omp_get_thread_num(), team = omp_get_num_threads();
#pragma omp single
    {
      used = team;
      for (int h = 0; h < team; h++)
        atomic_store_explicit(&p->homes[h].ticket, (uint64_t)cp_home_start(p->items, h, team),
                              memory_order_relaxed);
    } /* the single's barrier: every range is set before any thread takes from it */
    cp_take_items(p, thread, team);
  }
  return used;
}
#endif

int cp_threadpool_run(cp_threadpool *p, cp_task_fn fn, void *context, int64_t items) {
  /* at most one thread per item: the others stay asleep */
  const int64_t threads = p->openmp ? p->threads : (int64_t)p->started + 1;
  const int active = items < threads ? (int)(items < 1 ? 1 : items) : (int)threads;
  if (active == 1) {
    for (int64_t i = 0; i < items; i++) fn(context, i, 0);
    return 1;
  }
#ifdef CONVPOOL_HAVE_OPENMP
  if (p->openmp) { /* the run's fields are the region's: no lock, no workers */
    p->fn = fn;
    p->context = context;
    p->items = items;
    return cp_threadpool_run_openmp(p, active);
  }
#endif
  for (int64_t offset = 0; offset < items; offset += CP_ROUND_ITEMS) {
    const int64_t n = items - offset < CP_ROUND_ITEMS ? items - offset : CP_ROUND_ITEMS;
    pthread_mutex_lock(&p->lock);
    /* no item of the last round is outstanding: every claimed one is done */
    const unsigned long generation = atomic_load(&p->generation) + 1;
    const cp_round round = {fn, context, n, offset, CP_TICKET_TAG(generation), active};
    p->fn = fn, p->context = context, p->items = n, p->offset = offset;
    p->active = active;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    for (int h = 0; h < active; h++)
      atomic_store_explicit(&p->homes[h].ticket, round.tag | (uint64_t)cp_home_start(n, h, active),
                            memory_order_release);
    atomic_store(&p->generation, generation);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
    cp_take_round(p, &round, 0);
    cp_spin_while_below(&p->done, n);
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->done) < n) pthread_cond_wait(&p->work_done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
  return active;
}

void cp_threadpool_destroy(cp_threadpool *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->started; i++) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->work_done);
  pthread_cond_destroy(&p->work_ready);
  pthread_mutex_destroy(&p->lock);
  const convpool_allocator a = p->allocator;
  cp_free(&a, p->homes);
  cp_free(&a, p->workers);
  cp_free(&a, p);
}

/* ---- the process-wide pool ---- */

/* One lock serialises the runs on the shared pool and its resizing. The size
   is also kept in an atomic, for queries that should not wait for a run. */
static pthread_mutex_t cp_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static cp_threadpool *cp_shared;     /* NULL before first use; guarded by cp_shared_lock */
static atomic_int cp_shared_size;    /* threads of cp_shared, or asked for it; 0 = usable CPUs */
static atomic_int cp_shared_started; /* cp_shared is not NULL (and never will be again) */
static atomic_int cp_shared_openmp;  /* its runs are OpenMP regions; written under cp_shared_lock */

convpool_status cp_shared_pool_acquire(cp_threadpool **pool) {
  *pool = NULL;
  pthread_mutex_lock(&cp_shared_lock);
  if (cp_shared == NULL) {
    int threads = atomic_load(&cp_shared_size);
    if (threads == 0) threads = cp_cpu_usable_now();
    const convpool_status st = cp_threadpool_start(threads, atomic_load(&cp_shared_openmp),
                                                   cp_allocator_or_default(NULL), &cp_shared);
    if (st != CONVPOOL_SUCCESS) {
      pthread_mutex_unlock(&cp_shared_lock);
      return st;
    }
    atomic_store(&cp_shared_size, threads);
    atomic_store(&cp_shared_started, 1);
  }
  *pool = cp_shared;
  return CONVPOOL_SUCCESS;
}

convpool_status cp_shared_pool_start(void) {
  if (atomic_load(&cp_shared_started)) return CONVPOOL_SUCCESS; /* no wait for a run */
  cp_threadpool *pool;
  const convpool_status st = cp_shared_pool_acquire(&pool);
  if (st == CONVPOOL_SUCCESS) cp_shared_pool_release();
  return st;
}

void cp_shared_pool_release(void) {
  pthread_mutex_unlock(&cp_shared_lock);
}

int cp_shared_pool_threads(void) {
  const int threads = atomic_load(&cp_shared_size);
  return threads > 0 ? threads : cp_cpu_usable_now();
}

convpool_status convpool_shared_pool_set_threads(int threads) {
  cp_clear_error();
  if (threads < 0 || threads > CP_MAX_THREADS)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "threads = %d must be in 0..%d (0 = all usable)",
                   threads, CP_MAX_THREADS);
  if (threads == 0) threads = cp_cpu_usable_now();
  convpool_status st = CONVPOOL_SUCCESS;
  pthread_mutex_lock(&cp_shared_lock); /* waits for a run in flight */
  if (cp_shared == NULL) {
    atomic_store(&cp_shared_size, threads); /* started at first use */
  } else if (cp_shared->threads != threads) {
    /* the new threads first: if they cannot start, the pool stays as it was */
    cp_threadpool *fresh;
    st = cp_threadpool_start(threads, atomic_load(&cp_shared_openmp), cp_allocator_or_default(NULL),
                             &fresh);
    if (st == CONVPOOL_SUCCESS) {
      cp_threadpool_destroy(cp_shared);
      cp_shared = fresh;
      atomic_store(&cp_shared_size, threads);
    }
  }
  pthread_mutex_unlock(&cp_shared_lock);
  return st;
}

convpool_status convpool_shared_pool_get_threads(int *threads) {
  cp_clear_error();
  if (threads == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "threads is NULL");
  *threads = cp_shared_pool_threads();
  return CONVPOOL_SUCCESS;
}

int cp_shared_pool_openmp(void) {
  return atomic_load(&cp_shared_openmp);
}

convpool_status convpool_shared_pool_use_openmp(int enable) {
  cp_clear_error();
  if (enable != 0 && enable != 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "enable = %d must be 0 or 1", enable);
#ifndef CONVPOOL_HAVE_OPENMP
  if (enable)
    return cp_fail(CONVPOOL_UNSUPPORTED,
                   "this build of the library has no OpenMP (the compiler had none, or it was "
                   "configured with -DCONVPOOL_OPENMP=OFF)");
#endif
  convpool_status st = CONVPOOL_SUCCESS;
  pthread_mutex_lock(&cp_shared_lock); /* waits for a run in flight */
  if (cp_shared != NULL && cp_shared->openmp != enable) {
    /* the new pool first: if its threads cannot start, the pool stays as it was */
    cp_threadpool *fresh;
    st = cp_threadpool_start(cp_shared->threads, enable, cp_allocator_or_default(NULL), &fresh);
    if (st == CONVPOOL_SUCCESS) {
      cp_threadpool_destroy(cp_shared);
      cp_shared = fresh;
    }
  }
  if (st == CONVPOOL_SUCCESS) atomic_store(&cp_shared_openmp, enable);
  pthread_mutex_unlock(&cp_shared_lock);
  return st;
}

convpool_status convpool_shared_pool_get_openmp(int *enabled) {
  cp_clear_error();
  if (enabled == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "enabled is NULL");
  *enabled = cp_shared_pool_openmp();
  return CONVPOOL_SUCCESS;
}
