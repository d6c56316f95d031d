/* A persistent pool of worker threads that share a counter of work items. */
#ifndef CONVPOOL_THREADPOOL_H
#define CONVPOOL_THREADPOOL_H

#include "internal.h"

/* Process one work item on the thread with index `thread` (0 = the caller). */
typedef void (*cp_task_fn)(void *context, int64_t item, int thread);

typedef struct cp_threadpool cp_threadpool;

/* Start threads-1 workers (the caller is thread 0). */
convpool_status cp_threadpool_create(int threads, const convpool_allocator *allocator,
                                     cp_threadpool **out);
/* Run items 0..items-1 over at most `items` of the threads (the others stay
   asleep); returns, once every item is done, the number of threads the run
   was offered to (a worker that wakes after the items are taken does none:
   the run does not wait for it). */
int cp_threadpool_run(cp_threadpool *pool, cp_task_fn fn, void *context, int64_t items);
int cp_threadpool_threads(const cp_threadpool *pool);
void cp_threadpool_destroy(cp_threadpool *pool);

/* The process-wide pool (convpool_shared_pool_*). acquire starts it at first
   use and hands it to the caller, waiting while another run holds it; every
   successful acquire is followed by one release. */
convpool_status cp_shared_pool_acquire(cp_threadpool **pool);
void cp_shared_pool_release(void);
/* Start its threads if they are not yet (without waiting for a run otherwise). */
convpool_status cp_shared_pool_start(void);
/* Its size now (or at first use), without waiting for a run. */
int cp_shared_pool_threads(void);
/* Whether its runs are OpenMP parallel regions, without waiting for a run. */
int cp_shared_pool_openmp(void);

#endif
