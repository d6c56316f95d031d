/*
 * Block sizes, one entry per ISA (as BLIS's per-architecture contexts): the
 * register tile of the main microkernel, the per-thread buffer budgets as
 * fractions of the L2 cache, the cost of copying one panel element in the
 * ISA's kernel lanes, how many work items each thread gets, and the
 * measured thresholds of the algorithms' rules. The plan and the algorithms
 * read these; nothing else hard-codes a block size or a threshold.
 */
#ifndef CONVPOOL_CONFIG_H
#define CONVPOOL_CONFIG_H

#include "internal.h"

typedef struct cp_blocking {
  cp_isa isa;
  int mr, nr;             /* register tile of the main kernel: channels x positions */
  unsigned panel_l2_div;  /* input panel budget: L2 / panel_l2_div per thread */
  unsigned shared_l3_div; /* a run's shared workspace (a phase before the items): L3 / this */
  unsigned buf_l2_div;    /* tile buffer budget: L2 / buf_l2_div per thread */
  double copy_cost;       /* one copied panel element costs this many kernel lanes */
  int items_per_thread;   /* work items wanted per thread (load balance) */
  int max_col_multiples;  /* column blocks tried: up to this many lcm(pool, NR) */
  int pack_ahead_rows;    /* input rows prefetched ahead of the panel copy */
  /* a region per thread where items would share one prepared before them,
     while the weights the items read are at most this many L2s */
  unsigned local_region_l2;
  /* Winograd: per-thread budgets of an item's transformed input V and of the
     products M of one pass over V, and what streaming one transformed weight
     per item costs in kernel lanes (larger items reuse the weights more). */
  unsigned wino_v_kib, wino_m_kib;
  double wino_u_cost;
  int wino_col_unit; /* conv columns an item's tiles advance by: whole loads of 4 tiles */
  /* auto hands a Winograd run to shift-reduce below these: tiles of the run,
     input channels, and batch x tiles x c_in x c_out */
  double wino_min_tiles;
  int64_t wino_min_c_in;
  double wino_min_work;
} cp_blocking;

/* The block sizes of an ISA (never NULL). */
const cp_blocking *cp_blocking_for(cp_isa isa);

#endif
