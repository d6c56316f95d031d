/*
 * The driver: work items over the thread pool. The algorithm's phase
 * before the items, if it has one, runs first over its own work items (a
 * barrier ends it); then an item is packed by its algorithm, each of its
 * channel blocks is computed into the tile buffer and pooled row by row by
 * the epilogue. Phase times are kept per thread.
 */
#ifndef CONVPOOL_DRIVER_H
#define CONVPOOL_DRIVER_H

#include "convert.h"
#include "epilogue/epilogue.h"
#include "plan.h"
#include "threadpool.h"

/* Phase times of one thread, padded to a cache line against false sharing. */
typedef struct cp_phase_times {
  double pack, compute, epilogue;
  char pad[CP_CACHE_LINE - 3 * sizeof(double)];
} cp_phase_times;

/* Everything a run reads; shared by the threads, read-only during the run. */
typedef struct cp_run {
  const cp_plan *pl;
  const float *packed; /* packed weights */
  cp_widen_fn widen;   /* 16-bit src -> fp32 rows; NULL for float32 */
  const cp_epilogue *epilogue;
  const unsigned char *src;
  const unsigned char *residual; /* [batch, c_out, oh, ow], or NULL without one */
  unsigned char *dst;
  unsigned char *scratch; /* threads x pl->scratch_bytes */
  unsigned char *shared;  /* pl->shared_bytes, written by the phase before the items */
  cp_phase_times *times;  /* one per thread */
} cp_run;

/* Channels per position where the run's channel blocks leave the tile
   buffer channels in lanes (plan.h: cp_plan.lanes), else 0: channel
   rows. The algorithm's compute_block and the driver both ask. */
static inline size_t cp_run_lanes(const cp_run *r) {
  return (size_t)r->pl->lanes;
}

/* Run every item of r->pl on the pool's threads; fill the phase times of
   stats (summed over threads), items and threads. */
void cp_driver_run(cp_threadpool *pool, const cp_run *r, convpool_run_stats *stats);

/* Monotonic seconds. */
double cp_seconds(void);

#endif
