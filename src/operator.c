/*
 * The public API and the operator's lifecycle: validation at the boundary,
 * create (choose the algorithm, pack the weights, start the threads), run,
 * destroy, introspection and the one-shot call. The plan is plan.c, the
 * work is driver.c and the algorithms are in algo/. CONVPOOL_VERBOSE=1 makes
 * create and run print one line each to stderr (the only output of the
 * library).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "driver.h"
#include "pack.h"
#include "validate.h"

#define CP_OP_MAGIC 0x43504f50u /* "CPOP" */

/* The operator's state: one atomic transition claims it for a run, a read of
   the statistics, or its destruction, so exactly one of them wins. */
enum { CP_OP_IDLE = 0, CP_OP_BUSY = 1, CP_OP_DEAD = 2 };

struct convpool_op {
  unsigned magic;
  atomic_int state;
  cp_layer layer;
  convpool_algo requested; /* as asked (auto, or a named algorithm) */
  const cp_algorithm *algo;
  cp_algo_setup setup;
  cp_handover handover[CP_MAX_HANDOVERS]; /* the setups packs_for asked for; algo NULL past them */
  /* auto settled at create for options' expected shape (cp_settle): algo
     set up alone, runs planned as named; chosen_first is auto's choice for
     the layer, which handed that shape's run to algo (or algo itself) */
  int settled;
  int64_t settled_shape[3]; /* batch, height, width */
  const cp_algorithm *chosen_first;
  int threads;                         /* of its own pool; 0 on the shared pool */
  int shared;                          /* runs on the process-wide pool */
  int rows_per_item;                   /* forced, or 0 */
  convpool_allocator allocator_copy;   /* the caller's struct need not outlive the op */
  const convpool_allocator *allocator; /* &allocator_copy */
  cp_widen_fn widen; /* 16-bit dtype -> fp32 rows (panel packing); NULL for fp32 */
  cp_epilogue epilogue;
  unsigned char *scratch; /* per-thread scratch, kept between runs */
  size_t scratch_bytes;
  unsigned char *workspace; /* the run's shared workspace, kept between runs */
  size_t workspace_bytes;
  cp_phase_times *times; /* per-thread phase times of the current run */
  int times_count;       /* threads `times` has room for */
  convpool_run_stats last_stats;
  float *packed;               /* the algorithm's packed weights */
  float *bias;                 /* [co_blocks * MR], zeros past c_out */
  cp_threadpool *pool_threads; /* its own pool; NULL on the shared pool */
  /* The plan of the last run and what it was made for (threads, batch,
     height, width): a run of the same shape reuses it. Planning costs
     5-25 us, as much as a small layer's run. Only a run, which holds the
     operator, reads or writes it. */
  cp_plan run_plan;
  int64_t run_plan_key[4];
  int run_plan_valid;
};

/* ---- CONVPOOL_VERBOSE ---- */

static int cp_verbose_on;
static pthread_once_t cp_verbose_once = PTHREAD_ONCE_INIT;

static void cp_verbose_read(void) {
  const char *v = getenv("CONVPOOL_VERBOSE");
  cp_verbose_on = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Whether to print; the environment is read once per process. */
static int cp_verbose(void) {
  pthread_once(&cp_verbose_once, cp_verbose_read);
  return cp_verbose_on;
}

/* ---- validation ---- */

static int cp_op_valid(const convpool_op *op) {
  return op != NULL && op->magic == CP_OP_MAGIC;
}

/* Claim an idle operator (IDLE -> to); fails if a run holds it. */
static convpool_status cp_op_claim(convpool_op *op, int to, const char *what) {
  int idle = CP_OP_IDLE;
  if (!atomic_compare_exchange_strong(&op->state, &idle, to))
    return cp_fail(CONVPOOL_INVALID_STATE,
                   "op %p is already running on another thread; %s after the run", (void *)op,
                   what);
  return CONVPOOL_SUCCESS;
}

/* The plan of a run on `threads` threads. */
static convpool_status cp_op_plan_threads(const convpool_op *op, int threads, int64_t batch,
                                          int64_t height, int64_t width, cp_plan *pl) {
  if (op->requested == CONVPOOL_ALGO_AUTO && !op->settled)
    return cp_plan_make_auto(&op->layer, op->algo, &op->setup, op->handover, threads,
                             op->rows_per_item, batch, height, width, pl);
  return cp_plan_make(&op->layer, op->algo, &op->setup, threads, op->rows_per_item, batch, height,
                      width, pl);
}

/* The plan of a run now: on the operator's threads, or the shared pool's size. */
static convpool_status cp_op_plan(const convpool_op *op, int64_t batch, int64_t height,
                                  int64_t width, cp_plan *pl) {
  return cp_op_plan_threads(op, op->shared ? cp_shared_pool_threads() : op->threads, batch, height,
                            width, pl);
}

/* The start of a query: a live operator, its output pointer `out` (named
   `name`) not NULL, and the plan of the shape. */
static convpool_status cp_op_query(const convpool_op *op, const char *name, const void *out,
                                   int64_t batch, int64_t height, int64_t width, cp_plan *pl) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (out == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s is NULL", name);
  return cp_op_plan(op, batch, height, width, pl);
}

/* ---- lifecycle ---- */

/* Bytes of the layer's weights [c_out, c_in / groups, k, k]; 0 on overflow. */
/* Bytes of the weights [c_out, c_in / groups, k, k]; 0 when they overflow
   or exceed PTRDIFF_MAX (every later product of the filter sizes is bounded
   by this byte count). */
static int cp_weight_bytes(const cp_layer *l, size_t *bytes) {
  const size_t k = (size_t)l->k;
  return k <= SIZE_MAX / k && cp_mul((size_t)l->c_out, (size_t)(l->c_in / l->groups), bytes) &&
         cp_mul(*bytes, k * k, bytes) && cp_mul(*bytes, convpool_dtype_size(l->dtype), bytes) &&
         *bytes <= (size_t)PTRDIFF_MAX;
}

/* The epilogue of the layer: pool window and stride, bias (after the max
   unless a bias is not finite), the activation clamp, the dtype's store. */
static void cp_setup_epilogue(convpool_op *op, const cp_cpu *cpu, int bias_finite) {
  cp_epilogue_params *p = &op->epilogue.params;
  const convpool_dtype dtype = op->layer.dtype;
  p->pool = (size_t)op->layer.pool;
  p->stride = (size_t)op->layer.stride;
  p->bias = op->layer.has_bias ? op->bias : NULL;
  p->bias_first = op->layer.has_bias && !bias_finite;
  p->min = op->layer.act_min;
  p->max = op->layer.act_max;
  p->store = dtype == CONVPOOL_FLOAT16    ? CP_STORE_F16
             : dtype == CONVPOOL_BFLOAT16 ? CP_STORE_BF16
                                          : CP_STORE_F32;
  p->narrow = cp_narrow_select(dtype, cpu->isa);
  p->residual = op->layer.has_residual;
  p->res_widen = cp_widen_select(dtype, cpu->isa);
  cp_epilogue_select(&op->epilogue, cpu->isa);
}

convpool_status convpool_op_create(convpool_dtype dtype, const void *weights, const void *bias,
                                   int64_t c_out, int64_t c_in, int64_t k, int64_t pool,
                                   const convpool_options *options, convpool_op **op_out) {
  convpool_layer layer;
  convpool_layer_init(&layer, dtype, c_out, c_in, k, pool);
  return convpool_op_create_layer(&layer, weights, bias, options, op_out);
}

/*
 * Auto settled for the expected shape (convpool_options.expected_*): the
 * algorithm the plan of that shape runs (a hand-over's target, with the
 * tile size it reads for Winograd's), set up alone as if asked for by name,
 * where that packs fewer bytes than auto's setups for any shape (Winograd's
 * two tile sizes and the direct algorithm's weights: 73 MB for 512 -> 512
 * 3x3 where one run at 7x7 reads direct's 9.4). Its runs are those of the
 * named algorithm: the same bytes as auto's for the expected shape (every
 * algorithm's sums are the same whatever its plan and kernel width), and
 * correct ones for any other shape. *settled stays 0 where nothing was
 * expected or there is nothing to drop.
 */
static convpool_status cp_settle(const cp_layer *layer, const cp_cpu *cpu,
                                 const convpool_options *o, const cp_algorithm **algo,
                                 cp_algo_setup *setup, cp_handover *handover, int *settled) {
  *settled = 0;
  if (o->algo != CONVPOOL_ALGO_AUTO || o->expected_batch == 0) return CONVPOOL_SUCCESS;
  cp_plan pl;
  convpool_status st =
      cp_plan_make_auto(layer, *algo, setup, handover, 1, o->rows_per_item, o->expected_batch,
                        o->expected_height, o->expected_width, &pl);
  if (st != CONVPOOL_SUCCESS) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", convpool_last_error());
    return cp_fail(st, "expected shape [%lld, %lld, %lld, %lld]: %s", (long long)o->expected_batch,
                   (long long)layer->c_in, (long long)o->expected_height,
                   (long long)o->expected_width, saved);
  }
  size_t held = setup->packed_weight_bytes;
  char why[256];
  cp_algo_setup alone;
  memset(&alone, 0, sizeof alone);
  if (pl.algo->declines(layer, cpu, why, sizeof why) != NULL ||
      pl.algo->setup(layer, cpu, &alone) != CONVPOOL_SUCCESS || alone.packed_weight_bytes >= held) {
    cp_clear_error();
    return CONVPOOL_SUCCESS; /* auto's setups as they are */
  }
  *algo = pl.algo, *setup = alone, *settled = 1;
  memset(handover, 0, CP_MAX_HANDOVERS * sizeof *handover);
  return CONVPOOL_SUCCESS;
}

static convpool_status cp_op_create(const convpool_layer *public_layer, const void *weights,
                                    const void *bias, const convpool_options *options,
                                    convpool_op **op_out) {
  if (op_out == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "op_out is NULL");
  *op_out = NULL;
  convpool_options opts;
  convpool_status st = cp_read_options(options, &opts);
  if (st != CONVPOOL_SUCCESS) return st;
  const convpool_options *o = &opts;
  cp_layer layer;
  if ((st = cp_layer_from_public(public_layer, bias != NULL, &layer)) != CONVPOOL_SUCCESS)
    return st;
  const convpool_dtype dtype = layer.dtype;
  const int64_t c_out = layer.c_out, c_in = layer.c_in / layer.groups, k = layer.k;
  if (weights == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "weights is NULL");
  if ((st = cp_check_aligned("weights", weights, dtype)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_aligned("bias", bias, dtype)) != CONVPOOL_SUCCESS) return st;
  size_t wbytes;
  if (!cp_weight_bytes(&layer, &wbytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, %lld, %lld] have a byte count that overflows",
                   (long long)c_out, (long long)c_in, (long long)k, (long long)k);

  const cp_cpu *cpu = cp_cpu_get();
  const cp_algorithm *algo;
  if ((st = cp_algorithm_choose(o->algo, &layer, cpu, &algo, NULL, 0)) != CONVPOOL_SUCCESS)
    return st;
  cp_algo_setup setup;
  memset(&setup, 0, sizeof setup);
  setup.auto_choice = o->algo == CONVPOOL_ALGO_AUTO;
  if ((st = algo->setup(&layer, cpu, &setup)) != CONVPOOL_SUCCESS) return st;
  cp_handover handover[CP_MAX_HANDOVERS];
  memset(handover, 0, sizeof handover);
  int handovers = 0; /* room for others' weights */
  for (int i = 0; setup.auto_choice && algo->packs_for != NULL && i < CP_MAX_HANDOVERS; i++) {
    size_t offset = 0;
    int co_block = 0;
    const cp_algorithm *to = algo->packs_for(&setup, i, &offset, &co_block);
    if (to == NULL) break;
    cp_handover *h = &handover[handovers];
    h->setup.co_block_wanted = co_block;
    if (to->setup(&layer, cpu, &h->setup) == CONVPOOL_SUCCESS &&
        offset <= setup.packed_weight_bytes / sizeof(float) &&
        h->setup.packed_weight_bytes <= setup.packed_weight_bytes - offset * sizeof(float))
      h->algo = to, h->packed_offset = offset, handovers++;
    else
      memset(h, 0, sizeof *h); /* no hand-over to it: those runs stay algo's */
    cp_clear_error();
  }
  const cp_algorithm *chosen_first = algo;
  int settled;
  if ((st = cp_settle(&layer, cpu, o, &algo, &setup, handover, &settled)) != CONVPOOL_SUCCESS)
    return st;
  if (settled) handovers = 0;
  /* the bias covers the channel blocks of every setup */
  size_t mr = (size_t)setup.co_block, co_padded = ((size_t)c_out + mr - 1) / mr * mr;
  for (int i = 0; i < handovers; i++) {
    mr = (size_t)handover[i].setup.co_block;
    const size_t other = ((size_t)c_out + mr - 1) / mr * mr;
    if (other > co_padded) co_padded = other;
  }
  const size_t bias_bytes = co_padded * sizeof(float);

  const convpool_allocator *a = cp_allocator_or_default(o->allocator);
  convpool_op *op = cp_alloc(a, sizeof *op);
  if (op == NULL) return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate the operator");
  memset(op, 0, sizeof *op);
  atomic_init(&op->state, CP_OP_IDLE);
  op->layer = layer;
  op->requested = o->algo;
  op->algo = algo;
  op->setup = setup;
  memcpy(op->handover, handover, sizeof handover);
  op->settled = settled, op->chosen_first = chosen_first;
  op->settled_shape[0] = o->expected_batch, op->settled_shape[1] = o->expected_height;
  op->settled_shape[2] = o->expected_width;
  op->shared = o->shared_pool;
  op->threads = op->shared ? 0 : o->threads > 0 ? o->threads : cp_cpu_usable_now(); /* now */
  op->rows_per_item = o->rows_per_item;
  op->allocator_copy = *a;
  op->allocator = a = &op->allocator_copy;
  op->widen = cp_widen_select(dtype, cpu->isa);
  op->packed = cp_alloc(a, setup.packed_weight_bytes);
  if (op->packed == NULL) {
    st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %zu bytes of packed weights",
                 setup.packed_weight_bytes);
    goto error;
  }
  op->bias = cp_alloc(a, bias_bytes);
  if (op->bias == NULL) {
    st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate the bias (%zu bytes)", bias_bytes);
    goto error;
  }
  if (!op->shared) { /* on the shared pool: at the run, for the pool's size then */
    op->times = cp_alloc(a, (size_t)op->threads * sizeof *op->times);
    if (op->times == NULL) {
      st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate per-thread statistics");
      goto error;
    }
    op->times_count = op->threads;
  }
  algo->pack_weights(&layer, &setup, weights, op->packed);
  for (int i = 0; i < handovers; i++)
    handover[i].algo->pack_weights(&layer, &op->handover[i].setup, weights,
                                   op->packed + handover[i].packed_offset);
  int bias_finite = 1;
  for (size_t co = 0; co < bias_bytes / sizeof(float); co++) {
    op->bias[co] = bias != NULL && co < (size_t)c_out ? cp_load_elem(dtype, bias, co) : 0.0f;
    bias_finite &= isfinite(op->bias[co]) != 0;
  }
  cp_setup_epilogue(op, cpu, bias_finite);
  /* blocks left channels in lanes only where the epilogue pools that layout */
  if (op->epilogue.lanes_row == NULL || op->setup.lanes % 8 != 0 || op->setup.lanes > CP_LANES_MAX)
    op->setup.lanes = 0;
  for (int i = 0; i < handovers; i++)
    if (op->epilogue.lanes_row == NULL || op->handover[i].setup.lanes % 8 != 0 ||
        op->handover[i].setup.lanes > CP_LANES_MAX)
      op->handover[i].setup.lanes = 0;
  if (op->shared) { /* its threads start with the first operator on it */
    if ((st = cp_shared_pool_start()) != CONVPOOL_SUCCESS) goto error;
  } else if ((st = cp_threadpool_create(op->threads, a, &op->pool_threads)) != CONVPOOL_SUCCESS) {
    goto error;
  }
  op->magic = CP_OP_MAGIC;
  *op_out = op;
  return CONVPOOL_SUCCESS;

error:
  cp_free(a, op->times);
  cp_free(a, op->bias);
  cp_free(a, op->packed);
  cp_free(a, op);
  return st;
}

/* The layer as one line: "float32 w [64, 3, 3, 3] bias pad 1 relu pool 2/2". */
static void cp_layer_text(const cp_layer *l, char *text, size_t capacity) {
  char act[64] = "", pads[64] = "", pool_pads[64] = "";
  if (l->act_min == 0.0f && l->act_max == INFINITY)
    snprintf(act, sizeof act, " relu");
  else if (l->act_min != -INFINITY || l->act_max != INFINITY)
    snprintf(act, sizeof act, " clamp [%g, %g]", (double)l->act_min, (double)l->act_max);
  if (l->pad[0] || l->pad[1] || l->pad[2] || l->pad[3])
    snprintf(pads, sizeof pads, " pad %lld,%lld,%lld,%lld", (long long)l->pad[0],
             (long long)l->pad[1], (long long)l->pad[2], (long long)l->pad[3]);
  if (l->pool_pad[0] || l->pool_pad[1] || l->pool_pad[2] || l->pool_pad[3])
    snprintf(pool_pads, sizeof pool_pads, " pool pad %lld,%lld,%lld,%lld",
             (long long)l->pool_pad[0], (long long)l->pool_pad[1], (long long)l->pool_pad[2],
             (long long)l->pool_pad[3]);
  snprintf(text, capacity, "%s w [%lld, %lld, %lld, %lld]%s%s%s pool %lld/%lld%s%s",
           convpool_dtype_name(l->dtype), (long long)l->c_out, (long long)l->c_in, (long long)l->k,
           (long long)l->k, l->has_bias ? " bias" : "", pads, act, (long long)l->pool,
           (long long)l->stride, pool_pads, l->ceil_mode ? " ceil" : "");
}

/* "2 threads", "shared pool of 2 threads" or "shared pool of 2 OpenMP threads". */
static void cp_threads_text(const convpool_op *op, int threads, char *text, size_t capacity) {
  snprintf(text, capacity, "%s%d %sthread%s", op->shared ? "shared pool of " : "", threads,
           op->shared && cp_shared_pool_openmp() ? "OpenMP " : "", threads == 1 ? "" : "s");
}

convpool_status convpool_op_create_layer(const convpool_layer *public_layer, const void *weights,
                                         const void *bias, const convpool_options *options,
                                         convpool_op **op_out) {
  cp_clear_error();
  const convpool_status st = cp_op_create(public_layer, weights, bias, options, op_out);
  if (!cp_verbose()) return st;
  if (st != CONVPOOL_SUCCESS) {
    fprintf(stderr, "convpool: create failed: %s: %s\n", convpool_status_string(st),
            convpool_last_error());
    return st;
  }
  const convpool_op *op = *op_out;
  char layer[256], threads[64];
  cp_layer_text(&op->layer, layer, sizeof layer);
  cp_threads_text(op, op->shared ? cp_shared_pool_threads() : op->threads, threads, sizeof threads);
  fprintf(stderr, "convpool: create op %p: %s: %s, kernel %s (%s), %s\n", (const void *)op, layer,
          cp_algorithm_short_name(op->algo), op->setup.kernel, cp_isa_name(op->setup.isa), threads);
  return st;
}

convpool_status convpool_op_destroy(convpool_op *op) {
  cp_clear_error();
  if (op == NULL) return CONVPOOL_SUCCESS;
  if (op->magic != CP_OP_MAGIC)
    return cp_fail(CONVPOOL_INVALID_STATE, "op %p is not a live operator", (void *)op);
  convpool_status st = cp_op_claim(op, CP_OP_DEAD, "destroy it");
  if (st != CONVPOOL_SUCCESS) return st;
  const convpool_allocator *a = op->allocator;
  op->magic = 0;
  cp_threadpool_destroy(op->pool_threads);
  cp_free(a, op->scratch);
  cp_free(a, op->workspace);
  cp_free(a, op->times);
  cp_free(a, op->bias);
  cp_free(a, op->packed);
  cp_free(a, op);
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_output_shape(const convpool_op *op, int64_t batch, int64_t height,
                                         int64_t width, int64_t shape[4], size_t *bytes) {
  cp_plan pl;
  const convpool_status st = cp_op_query(op, "shape", shape, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  shape[0] = batch, shape[1] = op->layer.c_out, shape[2] = pl.ph, shape[3] = pl.pw;
  if (bytes != NULL) *bytes = pl.dst_bytes;
  return CONVPOOL_SUCCESS;
}

/* Room for `threads` per-thread phase times, scratch and the shared workspace
   of the plan, kept for the next run of the same size. A refused allocation
   releases what this call allocated: a failed run keeps no more than before. */
static convpool_status cp_op_reserve(convpool_op *op, const cp_plan *pl) {
  size_t scratch_bytes;
  convpool_status st = CONVPOOL_SUCCESS;
  int grew_scratch = 0, grew_times = 0;
  if (!cp_mul(pl->scratch_bytes, (size_t)pl->threads, &scratch_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "scratch size overflows");
  if (scratch_bytes > op->scratch_bytes) {
    cp_free(op->allocator, op->scratch);
    op->scratch_bytes = 0;
    op->scratch = cp_alloc(op->allocator, scratch_bytes);
    if (op->scratch == NULL)
      return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch", scratch_bytes);
    op->scratch_bytes = scratch_bytes, grew_scratch = 1;
  }
  if (pl->threads > op->times_count) { /* on the shared pool, after it grew */
    cp_free(op->allocator, op->times);
    op->times_count = 0;
    op->times = cp_alloc(op->allocator, (size_t)pl->threads * sizeof *op->times);
    if (op->times == NULL) {
      st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate per-thread statistics");
      goto undo;
    }
    op->times_count = pl->threads, grew_times = 1;
  }
  if (pl->shared_bytes > op->workspace_bytes) { /* the phase before the items writes it */
    cp_free(op->allocator, op->workspace);
    op->workspace_bytes = 0;
    op->workspace = cp_alloc(op->allocator, pl->shared_bytes);
    if (op->workspace == NULL) {
      st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %zu bytes of shared workspace",
                   pl->shared_bytes);
      goto undo;
    }
    op->workspace_bytes = pl->shared_bytes;
  }
  return CONVPOOL_SUCCESS;
undo:
  if (grew_times) {
    cp_free(op->allocator, op->times);
    op->times = NULL, op->times_count = 0;
  }
  if (grew_scratch) {
    cp_free(op->allocator, op->scratch);
    op->scratch = NULL, op->scratch_bytes = 0;
  }
  return st;
}

/* The run on `pool`, which this call holds, of an operator it has claimed. */
static convpool_status cp_op_run_on(convpool_op *op, cp_threadpool *pool, const void *src,
                                    int64_t batch, int64_t height, int64_t width,
                                    const void *residual, void *dst, size_t dst_bytes) {
  convpool_status st;
  if ((st = cp_check_aligned("src", src, op->layer.dtype)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_aligned("residual", residual, op->layer.dtype)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_aligned("dst", dst, op->layer.dtype)) != CONVPOOL_SUCCESS) return st;
  const int threads = cp_threadpool_threads(pool);
  const int64_t key[4] = {threads, batch, height, width};
  if (!op->run_plan_valid || memcmp(key, op->run_plan_key, sizeof key) != 0) {
    op->run_plan_valid = 0;
    if ((st = cp_op_plan_threads(op, threads, batch, height, width, &op->run_plan)) !=
        CONVPOOL_SUCCESS)
      return st;
    memcpy(op->run_plan_key, key, sizeof key);
    op->run_plan_valid = 1;
  }
  const cp_plan pl = op->run_plan;
  if (dst_bytes < pl.dst_bytes)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "dst_bytes = %zu is smaller than the output (%zu bytes)", dst_bytes,
                   pl.dst_bytes);
  if ((st = cp_check_disjoint("dst", dst, pl.dst_bytes, "src", src, pl.src_bytes)) !=
      CONVPOOL_SUCCESS)
    return st;
  if ((st = cp_check_disjoint("dst", dst, pl.dst_bytes, "residual", residual, pl.residual_bytes)) !=
      CONVPOOL_SUCCESS)
    return st;
  if ((st = cp_op_reserve(op, &pl)) != CONVPOOL_SUCCESS) return st;
  const double start = cp_seconds();
  const cp_run r = {&pl,           op->packed + pl.packed_offset,
                    op->widen,     &op->epilogue,
                    src,           residual,
                    dst,           op->scratch,
                    op->workspace, op->times};
  convpool_run_stats stats;
  memset(&stats, 0, sizeof stats);
  cp_driver_run(pool, &r, &stats);
  stats.wall_seconds = cp_seconds() - start;
  op->last_stats = stats;
  if (cp_verbose()) {
    char threads[64];
    cp_threads_text(op, stats.threads, threads, sizeof threads);
    fprintf(stderr,
            "convpool: run op %p: [%lld, %lld, %lld, %lld] -> [%lld, %lld, %lld, %lld]: %s, "
            "kernel %s, %s, %lld items: %.3f ms\n",
            (void *)op, (long long)batch, (long long)op->layer.c_in, (long long)height,
            (long long)width, (long long)batch, (long long)op->layer.c_out, (long long)pl.ph,
            (long long)pl.pw, cp_algorithm_short_name(pl.algo), pl.kernel, threads,
            (long long)stats.items, stats.wall_seconds * 1e3);
  }
  return CONVPOOL_SUCCESS;
}

/* The run proper, on an operator this call has claimed. */
static convpool_status cp_op_run_claimed(convpool_op *op, const void *src, int64_t batch,
                                         int64_t height, int64_t width, const void *residual,
                                         void *dst, size_t dst_bytes) {
  if (src == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "src is NULL");
  if (dst == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst is NULL");
  if (op->layer.has_residual && residual == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "residual is NULL, but the layer has one (has_residual = 1): run it with "
                   "convpool_op_run_residual");
  if (!op->layer.has_residual && residual != NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "residual %p given, but the layer has none (has_residual = 0)", residual);
  if (!op->shared)
    return cp_op_run_on(op, op->pool_threads, src, batch, height, width, residual, dst, dst_bytes);
  cp_threadpool *pool;
  convpool_status st = cp_shared_pool_acquire(&pool); /* waits for another run on it */
  if (st != CONVPOOL_SUCCESS) return st;
  st = cp_op_run_on(op, pool, src, batch, height, width, residual, dst, dst_bytes);
  cp_shared_pool_release();
  return st;
}

convpool_status convpool_op_run_residual(convpool_op *op, const void *src, int64_t batch,
                                         int64_t height, int64_t width, const void *residual,
                                         void *dst, size_t dst_bytes) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  /* claimed before anything else of the operator is read */
  convpool_status st = cp_op_claim(op, CP_OP_BUSY, "run it");
  if (st == CONVPOOL_SUCCESS) {
    st = cp_op_run_claimed(op, src, batch, height, width, residual, dst, dst_bytes);
    atomic_store(&op->state, CP_OP_IDLE);
  }
  if (st != CONVPOOL_SUCCESS && cp_verbose())
    fprintf(stderr, "convpool: run op %p failed: %s: %s\n", (void *)op, convpool_status_string(st),
            convpool_last_error());
  return st;
}

convpool_status convpool_op_run(convpool_op *op, const void *src, int64_t batch, int64_t height,
                                int64_t width, void *dst, size_t dst_bytes) {
  return convpool_op_run_residual(op, src, batch, height, width, NULL, dst, dst_bytes);
}

/* ---- introspection ---- */

convpool_status convpool_op_plan(const convpool_op *op, int64_t batch, int64_t height,
                                 int64_t width, convpool_plan_info *info) {
  cp_plan pl;
  const convpool_status st = cp_op_query(op, "info", info, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  memset(info, 0, sizeof *info);
  info->threads = pl.threads;
  info->items = pl.items;
  info->rows_per_item = pl.group;
  info->mr = pl.co_block;
  info->nr = pl.positions;
  info->col_block = pl.col_block;
  info->packed_weight_bytes = pl.setup->packed_weight_bytes;
  info->scratch_bytes_per_thread = pl.scratch_bytes;
  info->isa = cp_isa_name(pl.setup->isa);
  info->kernel = pl.kernel;
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_describe(const convpool_op *op, int64_t batch, int64_t height,
                                     int64_t width, char *text, size_t capacity) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (text == NULL || capacity == 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "text is NULL or capacity is 0");
  cp_plan pl;
  convpool_status st = cp_op_plan(op, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  char choice[1024] = "";
  const cp_algorithm *algo;
  if (op->requested == CONVPOOL_ALGO_AUTO)
    cp_algorithm_choose(CONVPOOL_ALGO_AUTO, &op->layer, cp_cpu_get(), &algo, choice, sizeof choice);
  if (op->settled) {
    const size_t used = strlen(choice);
    char from[160] = "";
    if (op->chosen_first != op->algo)
      snprintf(from, sizeof from,
               "%s hands that shape to %s (a measured rule: README, \"Choosing "
               "the algorithm\")",
               op->chosen_first->name, op->algo->name);
    else
      snprintf(from, sizeof from, "%s", op->algo->name);
    snprintf(choice + used, sizeof choice - used,
             "auto           settled at create for the expected shape [%lld, %lld, %lld, %lld]: "
             "%s; its weights alone (%zu bytes) packed, every run's algorithm\n",
             (long long)op->settled_shape[0], (long long)op->layer.c_in,
             (long long)op->settled_shape[1], (long long)op->settled_shape[2], from,
             op->setup.packed_weight_bytes);
  } else if (pl.handed_over != NULL) {
    const size_t used = strlen(choice);
    snprintf(choice + used, sizeof choice - used,
             "auto           %s hands this run to %s (a measured rule: README, \"Choosing the "
             "algorithm\"); the operator holds %zu bytes of packed weights for any shape "
             "(convpool_options.expected_*: the run's alone)\n",
             pl.handed_over->name, pl.algo->name, op->setup.packed_weight_bytes);
  }
  cp_plan_describe(&pl, op->layer.dtype, choice,
                   pl.lanes > 0 ? op->epilogue.lanes_name : op->epilogue.name, text, capacity);
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_last_run_stats(const convpool_op *op, convpool_run_stats *stats) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (stats == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "stats is NULL");
  convpool_op *mut = (convpool_op *)op; /* the state is the operator's lock */
  convpool_status st = cp_op_claim(mut, CP_OP_BUSY, "read its statistics");
  if (st != CONVPOOL_SUCCESS) return st;
  *stats = op->last_stats;
  atomic_store(&mut->state, CP_OP_IDLE);
  return CONVPOOL_SUCCESS;
}

/* ---- one-shot ---- */

convpool_status convpool_layer_run_residual(const convpool_layer *layer, const void *src,
                                            int64_t batch, int64_t height, int64_t width,
                                            const void *weights, const void *bias,
                                            const void *residual, void *dst, size_t dst_bytes,
                                            const convpool_options *options) {
  cp_clear_error();
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create_layer(layer, weights, bias, options, &op);
  if (st != CONVPOOL_SUCCESS) return st;
  int64_t shape[4];
  size_t out_bytes = 0, wbytes = 0;
  cp_weight_bytes(&op->layer, &wbytes); /* create checked it */
  const size_t es = convpool_dtype_size(op->layer.dtype);
  st = convpool_op_output_shape(op, batch, height, width, shape, &out_bytes);
  if (st == CONVPOOL_SUCCESS && dst != NULL)
    st = cp_check_disjoint("dst", dst, out_bytes, "weights", weights, wbytes);
  if (st == CONVPOOL_SUCCESS && dst != NULL && bias != NULL)
    st = cp_check_disjoint("dst", dst, out_bytes, "bias", bias, (size_t)op->layer.c_out * es);
  if (st == CONVPOOL_SUCCESS)
    st = convpool_op_run_residual(op, src, batch, height, width, residual, dst, dst_bytes);
  if (st != CONVPOOL_SUCCESS) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", convpool_last_error());
    convpool_op_destroy(op);
    return cp_fail(st, "%s", saved);
  }
  return convpool_op_destroy(op);
}

convpool_status convpool_layer_run(const convpool_layer *layer, const void *src, int64_t batch,
                                   int64_t height, int64_t width, const void *weights,
                                   const void *bias, void *dst, size_t dst_bytes,
                                   const convpool_options *options) {
  return convpool_layer_run_residual(layer, src, batch, height, width, weights, bias, NULL, dst,
                                     dst_bytes, options);
}

convpool_status convpool_conv2d_maxpool(convpool_dtype dtype, const void *src, int64_t batch,
                                        int64_t c_in, int64_t height, int64_t width,
                                        const void *weights, int64_t c_out, int64_t k,
                                        const void *bias, int64_t pool, void *dst, size_t dst_bytes,
                                        const convpool_options *options) {
  convpool_layer layer;
  convpool_layer_init(&layer, dtype, c_out, c_in, k, pool);
  return convpool_layer_run(&layer, src, batch, height, width, weights, bias, dst, dst_bytes,
                            options);
}
