/*
 * The operator: validation, weight packing, the plan, and the shift-reduce
 * driver (work items -> sweeps -> microkernel tiles -> pooling epilogue).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "convert.h"
#include "half.h"
#include "internal.h"
#include "kernels/pool.h"
#include "plan.h"
#include "threadpool.h"

#define CP_OP_MAGIC 0x43504f50u /* "CPOP" */
#define CP_MAX_THREADS 1024
#define CP_CACHE_LINE 64
#define CP_PACK_AHEAD 16 /* rows of input prefetched ahead of the panel copy */

/* Phase times of one thread, padded to a cache line against false sharing. */
typedef struct cp_phase_times {
  double pack, compute, epilogue;
  char pad[CP_CACHE_LINE - 3 * sizeof(double)];
} cp_phase_times;

struct convpool_op {
  unsigned magic;
  convpool_dtype dtype;
  int64_t c_out, c_in, k, pool;
  int threads;
  int rows_per_item; /* forced, or 0 */
  convpool_algo algo; /* shift-reduce or im2col (auto resolved at create) */
  int auto_algo;      /* the algorithm was chosen by the library */
  int has_bias;
  convpool_allocator allocator_copy; /* the caller's struct need not outlive the op */
  const convpool_allocator *allocator; /* &allocator_copy */
  const cp_sr_ukernel *uk;      /* main kernel */
  const cp_sr_ukernel *uk_tail; /* kernel of the last channel block (may be uk) */
  cp_widen_fn widen;   /* 16-bit dtype -> fp32 rows (panel packing); NULL for fp32 */
  cp_narrow_fn narrow; /* fp32 -> 16-bit dtype rows (the store); NULL for fp32 */
  cp_pool_row_fn pool_row; /* vector epilogue row for this pool size, or NULL */
  cp_store_kind store;     /* what pool_row stores */
  unsigned char *scratch; /* per-thread scratch, kept between runs */
  cp_phase_times *times;  /* per-thread phase times of the current run */
  convpool_run_stats last_stats;
  size_t scratch_bytes;
  float *packed; /* [co_block][c][i][j][MR] */
  float *bias;   /* [co_blocks * MR], zeros past c_out */
  size_t packed_bytes;
  cp_threadpool *pool_threads;
  atomic_int busy;
};

static double cp_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- validation helpers ---- */

static convpool_status cp_check_dtype(convpool_dtype dtype) {
  if (dtype == CONVPOOL_FLOAT32 || dtype == CONVPOOL_FLOAT16 || dtype == CONVPOOL_BFLOAT16)
    return CONVPOOL_SUCCESS;
  return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dtype = %d is not a convpool_dtype", (int)dtype);
}

static convpool_status cp_check_positive(const char *name, int64_t value) {
  if (value < 1) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s = %lld must be >= 1", name,
                                (long long)value);
  return CONVPOOL_SUCCESS;
}

static int cp_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

static int cp_op_valid(const convpool_op *op) { return op != NULL && op->magic == CP_OP_MAGIC; }

/* ---- the plan ---- */

/* One copied panel element costs about as much as one vector FMA (16 lanes). */
#define CP_COPY_COST 16.0

/* Panel and sweep geometry for `g` pooled rows x `cw` conv columns; 0 on overflow. */
static int cp_geometry(cp_plan *pl, int64_t g, int64_t cw) {
  const size_t nr = (size_t)pl->uk->nr, mr = (size_t)pl->uk->mr, k = (size_t)pl->k;
  const size_t p = (size_t)pl->pool, es = sizeof(float);
  size_t conv_rows, rows, ld, cs, n;
  if (!cp_mul((size_t)g, p, &conv_rows) || !cp_add(conv_rows, k - 1, &rows)) return 0;
  if (pl->im2col) {
    /* The strip: for each tile of NR conv positions, c_steps*k*k rows of NR
       elements (kernel view: k = 1, channel stride NR). Flat tiles run over
       the positions row after row with no halo. */
    size_t flat_tiles = (conv_rows * (size_t)cw + nr - 1) / nr;
    size_t row_tiles = conv_rows * (((size_t)cw + nr - 1) / nr);
    pl->flat = flat_tiles < row_tiles;
    pl->tiles = pl->flat ? flat_tiles : row_tiles;
    pl->group = g, pl->col_block = cw;
    pl->panel_rows = (int64_t)rows, pl->panel_ld = 0, pl->panel_cs = nr;
    if (!cp_mul((size_t)pl->c_steps, k * k, &n) || !cp_mul(n, nr, &n) ||
        !cp_mul(n, pl->tiles, &pl->panel_floats) ||
        !cp_mul(pl->panel_floats, es, &pl->panel_bytes))
      return 0;
    pl->buf_row_ld = pl->flat ? (size_t)cw : cp_round_up((size_t)cw, nr);
    pl->buf_cols = pl->flat ? pl->tiles * nr : conv_rows * pl->buf_row_ld;
    return cp_mul(pl->buf_cols, mr * es, &pl->buf_bytes);
  }
  ld = (size_t)cw + k - 1;
  if (!cp_mul(rows, ld, &cs)) return 0;
  /* An odd number of cache lines between channels spreads the c_in row
     streams over every L1 set instead of piling them on a few. */
  cs = cp_round_up(cs, CP_CACHE_LINE / es);
  if ((cs / (CP_CACHE_LINE / es)) % 2 == 0) cs += CP_CACHE_LINE / es;
  if (!cp_mul((size_t)pl->c_steps, cs, &n) || !cp_add(n, 2 * nr, &n)) return 0;
  pl->group = g, pl->col_block = cw;
  pl->panel_rows = (int64_t)rows, pl->panel_ld = ld, pl->panel_cs = cs, pl->panel_floats = n;
  if (!cp_mul(n, es, &pl->panel_bytes)) return 0;
  size_t flat_len = (conv_rows - 1) * ld + (size_t)cw;
  size_t flat_tiles = (flat_len + nr - 1) / nr;
  size_t row_tiles = conv_rows * (((size_t)cw + nr - 1) / nr);
  pl->flat = flat_tiles < row_tiles;
  pl->tiles = pl->flat ? flat_tiles : row_tiles;
  if (pl->flat) {
    pl->buf_row_ld = ld;
    pl->buf_cols = flat_tiles * nr;
  } else {
    pl->buf_row_ld = cp_round_up((size_t)cw, nr);
    pl->buf_cols = conv_rows * pl->buf_row_ld;
  }
  return cp_mul(pl->buf_cols, mr * es, &pl->buf_bytes);
}

static int cp_fits(const cp_plan *pl) {
  return pl->panel_bytes <= pl->panel_budget && pl->buf_bytes <= pl->buf_budget;
}

/* Modelled cost per useful conv position: microkernel lanes plus copying. */
static double cp_cost(const cp_plan *pl) {
  double tiles = (double)(pl->buf_cols / (size_t)pl->uk->nr);
  double lanes = tiles * pl->uk->nr * (double)pl->c_steps * (double)(pl->k * pl->k) *
                 (double)((pl->co_blocks - 1) * pl->uk->mr + pl->uk_tail->mr);
  double copy = CP_COPY_COST * (double)pl->panel_floats;
  return (lanes + copy) / ((double)pl->group * (double)pl->pool * (double)pl->col_block);
}

/*
 * Choose the panel: column blocks are the whole used row or multiples of
 * lcm(pool, NR); for each, the most pooled rows that fit the budgets (or the
 * forced rows_per_item); keep the cheapest by the cost model. Then make enough
 * items for the threads: fewer rows per item first, then channel groups.
 */
static convpool_status cp_choose_blocks(const convpool_op *op, cp_plan *pl) {
  const int64_t nr = pl->uk->nr;
  int64_t a = pl->pool, b = nr;
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t step = pl->pool / a * nr; /* lcm(pool, NR) */
  const int64_t forced = op->rows_per_item;
  if (forced > pl->ph)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %lld exceeds the %lld pooled rows",
                   (long long)forced, (long long)pl->ph);
  double best_cost = 0;
  int64_t best_g = 0, best_cw = 0;
  for (int64_t m = 0; m <= 64; m++) {
    int64_t cw = m == 0 ? pl->ow_used : m * step;
    if (m > 0 && cw >= pl->ow_used) break;
    int64_t g = forced > 0 ? forced : 1;
    if (!cp_geometry(pl, g, cw) || (forced == 0 && !cp_fits(pl))) continue;
    if (forced == 0) { /* grow the row group while it fits */
      int64_t lo = 1, hi = pl->ph;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (cp_geometry(pl, mid, cw) && cp_fits(pl)) lo = mid;
        else hi = mid - 1;
      }
      g = lo;
      if (!cp_geometry(pl, g, cw)) continue;
    }
    double cost = cp_cost(pl);
    if (best_g == 0 || cost < best_cost) best_cost = cost, best_g = g, best_cw = cw;
  }
  if (best_g == 0) { /* nothing fits the budgets: the smallest panel, reported over budget */
    best_g = forced > 0 ? forced : 1;
    best_cw = step < pl->ow_used ? step : pl->ow_used;
  }
  if (!cp_geometry(pl, best_g, best_cw))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "input panel of %lld channels is too large",
                   (long long)pl->c_in);
  const int64_t target = 4 * (int64_t)pl->threads;
  pl->col_blocks = (pl->ow_used + pl->col_block - 1) / pl->col_block;
  for (;;) {
    pl->row_groups = (pl->ph + pl->group - 1) / pl->group;
    if (forced > 0 || pl->group == 1 || pl->batch * pl->row_groups * pl->col_blocks >= target)
      break;
    int64_t g = pl->group - 1;
    int64_t want_groups = (target + pl->batch * pl->col_blocks - 1) / (pl->batch * pl->col_blocks);
    int64_t g_items = (pl->ph + want_groups - 1) / want_groups;
    if (g_items < g) g = g_items;
    if (!cp_geometry(pl, g, pl->col_block))
      return cp_fail(CONVPOOL_INTERNAL_ERROR, "panel geometry failed for %lld rows", (long long)g);
  }
  int64_t panels = pl->batch * pl->row_groups * pl->col_blocks;
  int64_t groups = panels >= target ? 1 : (target + panels - 1) / panels;
  if (groups > pl->co_blocks) groups = pl->co_blocks;
  pl->co_blocks_per_group = (pl->co_blocks + groups - 1) / groups;
  pl->co_groups = (pl->co_blocks + pl->co_blocks_per_group - 1) / pl->co_blocks_per_group;
  pl->items = panels * pl->co_groups;
  return CONVPOOL_SUCCESS;
}

static convpool_status cp_make_plan(const convpool_op *op, int64_t batch, int64_t height,
                                    int64_t width, cp_plan *pl) {
  convpool_status st;
  if ((st = cp_check_positive("batch", batch)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("height", height)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("width", width)) != CONVPOOL_SUCCESS) return st;
  if (height < op->k || width < op->k)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "input %lldx%lld is smaller than the filter k = %lld",
                   (long long)height, (long long)width, (long long)op->k);
  memset(pl, 0, sizeof *pl);
  pl->batch = batch, pl->c_in = op->c_in, pl->c_out = op->c_out;
  pl->c_steps = (op->c_in + op->uk->cpack - 1) / op->uk->cpack;
  pl->im2col = op->algo == CONVPOOL_ALGO_IM2COL;
  pl->height = height, pl->width = width, pl->k = op->k, pl->pool = op->pool;
  pl->oh = height - op->k + 1;
  pl->ow = width - op->k + 1;
  if (op->pool > pl->oh || op->pool > pl->ow)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "pool = %lld is larger than the conv output %lldx%lld",
                   (long long)op->pool, (long long)pl->oh, (long long)pl->ow);
  pl->ph = pl->oh / op->pool;
  pl->pw = pl->ow / op->pool;
  pl->ow_used = pl->pw * op->pool;
  pl->elem_size = convpool_dtype_size(op->dtype);

  /* Tensor sizes: every element index fits in size_t and ptrdiff_t. */
  size_t n;
  if (!cp_mul((size_t)batch, (size_t)op->c_in, &n) || !cp_mul(n, (size_t)height, &n) ||
      !cp_mul(n, (size_t)width, &n) || !cp_mul(n, pl->elem_size, &pl->src_bytes) ||
      pl->src_bytes > (size_t)PTRDIFF_MAX)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "src [%lld, %lld, %lld, %lld] has a byte count that overflows",
                   (long long)batch, (long long)op->c_in, (long long)height, (long long)width);
  if (!cp_mul((size_t)batch, (size_t)op->c_out, &n) || !cp_mul(n, (size_t)pl->ph, &n) ||
      !cp_mul(n, (size_t)pl->pw, &n) || !cp_mul(n, pl->elem_size, &pl->dst_bytes) ||
      pl->dst_bytes > (size_t)PTRDIFF_MAX)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "dst [%lld, %lld, %lld, %lld] has a byte count that overflows",
                   (long long)batch, (long long)op->c_out, (long long)pl->ph, (long long)pl->pw);

  const cp_cpu *cpu = cp_cpu_get();
  pl->uk = op->uk;
  pl->co_blocks = (op->c_out + op->uk->mr - 1) / op->uk->mr;
  pl->threads = op->threads;
  pl->packed_weight_bytes = op->packed_bytes;
  pl->weight_block_bytes =
      (size_t)op->uk->mr * (size_t)pl->c_steps * (size_t)(op->k * op->k) * sizeof(float);
  pl->uk_tail = op->uk_tail;
  pl->panel_budget = cpu->l2 / 2;
  pl->buf_budget = cpu->l2 / 4;
  if ((st = cp_choose_blocks(op, pl)) != CONVPOOL_SUCCESS) return st;
  pl->row_bytes = (size_t)pl->col_block * sizeof(float);
  if (!cp_add(cp_round_up(pl->panel_bytes, CP_CACHE_LINE), cp_round_up(pl->buf_bytes, CP_CACHE_LINE),
              &pl->scratch_bytes) ||
      !cp_add(pl->scratch_bytes, cp_round_up(pl->row_bytes, CP_CACHE_LINE), &pl->scratch_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "scratch size overflows");
  return CONVPOOL_SUCCESS;
}

/* ---- weight packing ---- */

static float cp_load_elem(convpool_dtype dtype, const void *base, size_t index) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[index]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[index]);
  return ((const float *)base)[index];
}

/*
 * packed[cb][c][i][j][m] = w[cb*MR + m][c][i][j] as fp32, zero past c_out.
 * Block cb starts at cb*MR*steps*k*k; the last block has the tail kernel's MR.
 * Pair kernels (cpack 2) take 32-bit bf16 pairs: channel 2c in the low half,
 * 2c+1 in the high half (zero past c_in).
 */
static void cp_pack_weights(const convpool_op *op, const void *weights, float *packed) {
  const size_t cin = (size_t)op->c_in, k = (size_t)op->k, kk = k * k;
  const size_t main_mr = (size_t)op->uk->mr, blocks = ((size_t)op->c_out + main_mr - 1) / main_mr;
  const size_t cpack = (size_t)op->uk->cpack, steps = (cin + cpack - 1) / cpack;
  const uint16_t *w16 = weights;
  for (size_t cb = 0; cb < blocks; cb++) {
    const size_t mr = cb + 1 == blocks ? (size_t)op->uk_tail->mr : main_mr;
    float *block = packed + cb * main_mr * steps * kk;
    uint32_t *pairs = (uint32_t *)block;
    for (size_t s = 0; s < steps; s++)
      for (size_t t = 0; t < kk; t++)
        for (size_t m = 0; m < mr; m++) {
          const size_t co = cb * main_mr + m, to = (s * kk + t) * mr + m;
          if (cpack == 1) {
            block[to] = co < (size_t)op->c_out
                            ? cp_load_elem(op->dtype, weights, (co * cin + s) * kk + t)
                            : 0.0f;
            continue;
          }
          uint32_t lo = 0, hi = 0;
          if (co < (size_t)op->c_out) {
            lo = w16[(co * cin + 2 * s) * kk + t];
            if (2 * s + 1 < cin) hi = w16[(co * cin + 2 * s + 1) * kk + t];
          }
          pairs[to] = lo | hi << 16;
        }
  }
}

/* ---- lifecycle ---- */

convpool_status convpool_op_create(convpool_dtype dtype, const void *weights, const void *bias,
                                   int64_t c_out, int64_t c_in, int64_t k, int64_t pool,
                                   const convpool_options *options, convpool_op **op_out) {
  cp_clear_error();
  if (op_out == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "op_out is NULL");
  *op_out = NULL;
  convpool_options defaults;
  convpool_options_init(&defaults);
  const convpool_options *o = options != NULL ? options : &defaults;
  convpool_status st;
  if ((st = cp_check_dtype(dtype)) != CONVPOOL_SUCCESS) return st;
  if (weights == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "weights is NULL");
  if ((st = cp_check_positive("c_out", c_out)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("c_in", c_in)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("k", k)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_positive("pool", pool)) != CONVPOOL_SUCCESS) return st;
  if (o->threads < 0 || o->threads > CP_MAX_THREADS)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "threads = %d must be in 0..%d (0 = all usable)",
                   o->threads, CP_MAX_THREADS);
  if (o->rows_per_item < 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %d must be >= 0",
                   o->rows_per_item);
  if (o->algo != CONVPOOL_ALGO_AUTO && o->algo != CONVPOOL_ALGO_SHIFT_REDUCE &&
      o->algo != CONVPOOL_ALGO_IM2COL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "algo = %d is not a convpool_algo", (int)o->algo);
  if (o->allocator != NULL && (o->allocator->alloc == NULL || o->allocator->free == NULL))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "options->allocator has a NULL function");

  const cp_cpu *cpu = cp_cpu_get();
  /* Panels are fp32 for every dtype, so one kernel family serves them all;
     bfloat16 uses its pair dot-product kernels where the CPU has them. */
  const cp_sr_ukernel *uk = NULL;
  if (dtype == CONVPOOL_BFLOAT16) uk = cp_sr_ukernel_select(CONVPOOL_BFLOAT16, cpu->isa);
  if (uk == NULL) uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, cpu->isa);
  if (uk == NULL)
    return cp_fail(CONVPOOL_UNSUPPORTED, "no %s kernel for isa %s", convpool_dtype_name(dtype),
                   cp_isa_name(cpu->isa));
  const size_t mr = (size_t)uk->mr;
  const cp_sr_ukernel *uk_tail = cp_sr_ukernel_tail(uk, (int)((size_t)c_out % mr));
  size_t wbytes, packed_bytes, blocks = ((size_t)c_out + mr - 1) / mr, bias_bytes;
  /* packed channels: full blocks of MR, then the tail kernel's MR */
  const size_t packed_channels = (size_t)c_out % mr ? (blocks - 1) * mr + (size_t)uk_tail->mr
                                                    : blocks * mr;
  if ((size_t)k > SIZE_MAX / (size_t)k || !cp_mul((size_t)c_out, (size_t)c_in, &wbytes) ||
      !cp_mul(wbytes, (size_t)k, &wbytes) ||
      !cp_mul(wbytes, (size_t)k, &wbytes) || !cp_mul(wbytes, convpool_dtype_size(dtype), &wbytes) ||
      !cp_mul(packed_channels, ((size_t)c_in + (size_t)uk->cpack - 1) / (size_t)uk->cpack,
              &packed_bytes) ||
      !cp_mul(packed_bytes, (size_t)k * (size_t)k, &packed_bytes) ||
      !cp_mul(packed_bytes, sizeof(float), &packed_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "weights [%lld, %lld, %lld, %lld] have a byte count that overflows",
                   (long long)c_out, (long long)c_in, (long long)k, (long long)k);
  bias_bytes = blocks * mr * sizeof(float);

  const convpool_allocator *a = cp_allocator_or_default(o->allocator);
  convpool_op *op = cp_alloc(a, sizeof *op);
  if (op == NULL) return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate the operator");
  memset(op, 0, sizeof *op);
  op->dtype = dtype;
  op->c_out = c_out, op->c_in = c_in, op->k = k, op->pool = pool;
  op->threads = o->threads > 0 ? o->threads : cpu->usable_cpus;
  op->rows_per_item = o->rows_per_item;
  /* auto: shift-reduce. Its panel holds each input element once and the
     kernel's shifted loads do the im2col in registers; an im2col strip holds
     it k*k times. The benchmark measures im2col slower on every shape tried
     (README), so auto never picks it. */
  op->auto_algo = o->algo == CONVPOOL_ALGO_AUTO;
  op->algo = op->auto_algo ? CONVPOOL_ALGO_SHIFT_REDUCE : o->algo;
  op->has_bias = bias != NULL;
  op->allocator_copy = *a;
  op->allocator = a = &op->allocator_copy;
  op->uk = uk;
  op->uk_tail = uk_tail;
  op->widen = cp_widen_select(dtype, cpu->isa);
  op->narrow = cp_narrow_select(dtype, cpu->isa);
  op->store = dtype == CONVPOOL_FLOAT16    ? CP_STORE_F16
              : dtype == CONVPOOL_BFLOAT16 ? CP_STORE_BF16
                                           : CP_STORE_F32;
  if (cpu->isa >= CP_ISA_AVX512 && (pool == 1 || pool == 2))
    op->pool_row = pool == 1 ? cp_pool1_row_avx512f : cp_pool2_row_avx512f;
  op->packed_bytes = packed_bytes;
  atomic_init(&op->busy, 0);
  op->packed = cp_alloc(a, packed_bytes);
  if (op->packed == NULL) {
    st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %zu bytes of packed weights",
                 packed_bytes);
    goto error;
  }
  op->bias = cp_alloc(a, bias_bytes);
  if (op->bias == NULL) {
    st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate the bias (%zu bytes)", bias_bytes);
    goto error;
  }
  op->times = cp_alloc(a, (size_t)op->threads * sizeof *op->times);
  if (op->times == NULL) {
    st = cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate per-thread statistics");
    goto error;
  }
  cp_pack_weights(op, weights, op->packed);
  for (size_t co = 0; co < blocks * mr; co++)
    op->bias[co] = bias != NULL && co < (size_t)c_out ? cp_load_elem(dtype, bias, co) : 0.0f;
  st = cp_threadpool_create(op->threads, a, &op->pool_threads);
  if (st != CONVPOOL_SUCCESS) goto error;
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

convpool_status convpool_op_destroy(convpool_op *op) {
  cp_clear_error();
  if (op == NULL) return CONVPOOL_SUCCESS;
  if (op->magic != CP_OP_MAGIC)
    return cp_fail(CONVPOOL_INVALID_STATE, "op %p is not a live operator", (void *)op);
  if (atomic_load(&op->busy))
    return cp_fail(CONVPOOL_INVALID_STATE, "op %p is running; destroy it after the run",
                   (void *)op);
  const convpool_allocator *a = op->allocator;
  op->magic = 0;
  cp_threadpool_destroy(op->pool_threads);
  cp_free(a, op->scratch);
  cp_free(a, op->times);
  cp_free(a, op->bias);
  cp_free(a, op->packed);
  cp_free(a, op);
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_output_shape(const convpool_op *op, int64_t batch, int64_t height,
                                         int64_t width, int64_t shape[4], size_t *bytes) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (shape == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "shape is NULL");
  cp_plan pl;
  convpool_status st = cp_make_plan(op, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  shape[0] = batch, shape[1] = op->c_out, shape[2] = pl.ph, shape[3] = pl.pw;
  if (bytes != NULL) *bytes = pl.dst_bytes;
  return CONVPOOL_SUCCESS;
}

/* ---- the driver ---- */

typedef struct cp_run {
  const convpool_op *op;
  const cp_plan *pl;
  const unsigned char *src;
  unsigned char *dst;
  unsigned char *scratch; /* threads x scratch_bytes */
} cp_run;

static inline float cp_maxf(float a, float b) { return (a > b || a != a) ? a : b; }

/*
 * The epilogue of one channel block: max over each P x P window of the tile
 * buffer (rows first, then columns, NaN-propagating), + bias, convert, store.
 * `row` is per-thread scratch of col_block floats.
 */
static void cp_pool_epilogue(const cp_run *r, float *buf, float *row, int64_t mr, int64_t prows,
                             int64_t pcols, const float *bias, size_t dst_index) {
  const cp_plan *pl = r->pl;
  const convpool_op *op = r->op;
  const size_t ld = pl->buf_row_ld, p = (size_t)pl->pool, n = (size_t)pcols;
  const size_t ncols = n * p, plane = (size_t)pl->ph * (size_t)pl->pw;
  for (int64_t m = 0; m < mr; m++) {
    const float b = bias[m];
    for (int64_t q = 0; q < prows; q++) {
      float *src = buf + (size_t)m * pl->buf_cols + (size_t)q * p * ld;
      const size_t out = dst_index + (size_t)m * plane + (size_t)q * (size_t)pl->pw;
      if (op->pool_row != NULL) {
        op->pool_row(src, ld, n, op->has_bias ? &bias[m] : NULL,
                     r->dst + out * pl->elem_size, op->store);
        continue;
      }
      float *pooled = src; /* pool 1: the conv row itself */
      if (p > 1) {
        for (size_t x = 0; x < ncols; x++) row[x] = src[x];
        for (size_t a = 1; a < p; a++)
          for (size_t x = 0; x < ncols; x++) row[x] = cp_maxf(row[x], src[a * ld + x]);
        if (p == 2) {
          for (size_t t = 0; t < n; t++) row[t] = cp_maxf(row[2 * t], row[2 * t + 1]);
        } else {
          for (size_t t = 0; t < n; t++) {
            float v = row[t * p];
            for (size_t c = 1; c < p; c++) v = cp_maxf(v, row[t * p + c]);
            row[t] = v;
          }
        }
        pooled = row;
      }
      if (op->has_bias)
        for (size_t t = 0; t < n; t++) pooled[t] += b;
      if (op->narrow != NULL) op->narrow(pooled, (uint16_t *)r->dst + out, n);
      else memcpy((float *)r->dst + out, pooled, n * sizeof(float));
    }
  }
}

/*
 * Pack the input panel of one item: every channel, conv rows [oh0, oh0 +
 * rows), columns [col0, col0 + cols), widened to fp32. Everything else the
 * microkernel may read (row ends, channel padding, the final slack) is zeroed.
 */
static void cp_pack_panel(const cp_run *r, int64_t b, size_t oh0, size_t rows, size_t col0,
                          size_t cols, float *panel) {
  const cp_plan *pl = r->pl;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w;
  const size_t ld = pl->panel_ld, cs = pl->panel_cs, cin = (size_t)pl->c_in;
  const size_t steps = (size_t)pl->c_steps, cpack = (size_t)pl->uk->cpack;
  const size_t base = (size_t)b * cin * hw + oh0 * w + col0;
  const size_t row_bytes = cols * pl->elem_size;
  for (size_t s = 0; s < steps; s++) {
    float *to = panel + s * cs;
    for (size_t y = 0; y < rows; y++, to += ld) {
      const size_t from = base + s * hw + y * w;
      /* The rows are short and far apart, so the hardware prefetchers do not
         follow them: ask for the row CP_PACK_AHEAD rows ahead (measured: the
         pack of the headline case goes from ~10 ms to ~6.5 ms on one core). */
      const size_t ahead = s * rows + y + CP_PACK_AHEAD;
      if (ahead / rows < steps) {
        const unsigned char *p =
            r->src + (base + (ahead / rows) * cpack * hw + (ahead % rows) * w) * pl->elem_size;
        for (size_t c = 0; c < cpack; c++, p += hw * pl->elem_size) {
          for (size_t o = 0; o < row_bytes; o += CP_CACHE_LINE) __builtin_prefetch(p + o, 0, 3);
          __builtin_prefetch(p + row_bytes - 1, 0, 3);
        }
      }
      if (pl->uk->cpack == 2) { /* bf16 channel pairs, interleaved */
        const uint16_t *lo = (const uint16_t *)r->src + base + 2 * s * hw + y * w;
        const uint16_t *hi = 2 * s + 1 < cin ? lo + hw : NULL;
        uint32_t *t32 = (uint32_t *)to;
        for (size_t x = 0; x < cols; x++) t32[x] = lo[x] | (hi ? (uint32_t)hi[x] << 16 : 0u);
      } else if (r->op->widen != NULL) {
        r->op->widen((const uint16_t *)r->src + from, to, cols);
      } else {
        memcpy(to, (const float *)r->src + from, cols * sizeof(float));
      }
      if (cols < ld) memset(to + cols, 0, (ld - cols) * sizeof(float));
    }
    memset(to, 0, (cs - rows * ld) * sizeof(float));
  }
  memset(panel + steps * cs, 0, (pl->panel_floats - steps * cs) * sizeof(float));
}

/*
 * Pack the im2col strip of one item: for each tile of NR conv positions (in
 * the order of the tile buffer), B[s][i][j][n] = x[s][row + i][col + j] for
 * position n at (row, col); positions past the item are zero. The element
 * is fp32, or a bf16 channel pair for pair kernels.
 */
static void cp_pack_im2col(const cp_run *r, int64_t b, size_t oh0, size_t conv_rows, size_t col0,
                           size_t cw, float *strip) {
  const cp_plan *pl = r->pl;
  const size_t nr = (size_t)pl->uk->nr, k = (size_t)pl->k, steps = (size_t)pl->c_steps;
  const size_t w = (size_t)pl->width, hw = (size_t)pl->height * w, cin = (size_t)pl->c_in;
  const size_t per_row = (cw + nr - 1) / nr;
  const size_t base = (size_t)b * cin * hw + oh0 * w + col0;
  float *to = strip;
  for (size_t t = 0; t < pl->tiles; t++) {
    size_t off[CP_MAX_NR]; /* source offset of each position in the plane, or SIZE_MAX */
    for (size_t n = 0; n < nr; n++) {
      size_t row, col;
      if (pl->flat) { /* rows are col_block positions apart, as in the tile buffer */
        size_t p = t * nr + n;
        row = p / (size_t)pl->col_block, col = p % (size_t)pl->col_block;
      } else {
        row = t / per_row, col = (t % per_row) * nr + n;
      }
      off[n] = row < conv_rows && col < cw ? row * w + col : SIZE_MAX;
    }
    /* Common case: the valid positions are one run within a row, then padding. */
    size_t run = 0;
    while (run < nr && off[run] != SIZE_MAX && off[run] == off[0] + run) run++;
    int contiguous = 1;
    for (size_t n = run; n < nr; n++) contiguous &= off[n] == SIZE_MAX;
    for (size_t s = 0; s < steps; s++)
      for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++, to += nr) {
          const size_t at = base + s * pl->uk->cpack * hw + i * w + j;
          if (pl->uk->cpack == 2) {
            const uint16_t *lo = (const uint16_t *)r->src + at;
            const int has_hi = 2 * s + 1 < cin;
            uint32_t *t32 = (uint32_t *)to;
            for (size_t n = 0; n < nr; n++)
              t32[n] = off[n] == SIZE_MAX ? 0u
                       : lo[off[n]] | (has_hi ? (uint32_t)lo[off[n] + hw] << 16 : 0u);
          } else if (contiguous && run > 0) {
            if (r->op->widen != NULL)
              r->op->widen((const uint16_t *)r->src + at + off[0], to, run);
            else
              memcpy(to, (const float *)r->src + at + off[0], run * sizeof(float));
            memset(to + run, 0, (nr - run) * sizeof(float));
          } else {
            for (size_t n = 0; n < nr; n++)
              to[n] = off[n] == SIZE_MAX ? 0.0f : cp_load_elem(r->op->dtype, r->src, at + off[n]);
          }
        }
  }
}

/* The region of one work item. */
typedef struct cp_item {
  int64_t b, g0, g, col0, cw, cb0, cb1;
} cp_item;

static cp_item cp_item_of(const cp_plan *pl, int64_t item) {
  cp_item it;
  const int64_t cg = item % pl->co_groups;
  item /= pl->co_groups;
  const int64_t cbk = item % pl->col_blocks;
  item /= pl->col_blocks;
  const int64_t rg = item % pl->row_groups;
  it.b = item / pl->row_groups;
  it.g0 = rg * pl->group;
  it.g = pl->ph - it.g0 < pl->group ? pl->ph - it.g0 : pl->group;
  it.col0 = cbk * pl->col_block;
  it.cw = pl->ow_used - it.col0 < pl->col_block ? pl->ow_used - it.col0 : pl->col_block;
  it.cb0 = cg * pl->co_blocks_per_group;
  it.cb1 = it.cb0 + pl->co_blocks_per_group < pl->co_blocks ? it.cb0 + pl->co_blocks_per_group
                                                             : pl->co_blocks;
  return it;
}

/* One work item: (batch, pooled-row group, column block, channel-block group). */
static void cp_run_item(void *context, int64_t item, int thread) {
  const cp_run *r = context;
  const cp_plan *pl = r->pl;
  const convpool_op *op = r->op;
  const int64_t mr = pl->uk->mr, nr = pl->uk->nr, pool = pl->pool;
  const cp_item it = cp_item_of(pl, item);

  unsigned char *scratch = r->scratch + (size_t)thread * pl->scratch_bytes;
  float *panel = (float *)scratch;
  float *buf = (float *)(scratch + cp_round_up(pl->panel_bytes, CP_CACHE_LINE));
  float *row = (float *)((unsigned char *)buf + cp_round_up(pl->buf_bytes, CP_CACHE_LINE));

  cp_phase_times *times = &op->times[thread];
  double t0 = cp_seconds();
  const size_t conv_rows = (size_t)(it.g * pool), ld = pl->panel_ld;
  if (pl->im2col)
    cp_pack_im2col(r, it.b, (size_t)(it.g0 * pool), conv_rows, (size_t)it.col0, (size_t)it.cw,
                   panel);
  else
    cp_pack_panel(r, it.b, (size_t)(it.g0 * pool), conv_rows + (size_t)pl->k - 1,
                  (size_t)it.col0, (size_t)it.cw + (size_t)pl->k - 1, panel);

  const size_t plane = (size_t)pl->ph * (size_t)pl->pw;
  const size_t wblock = pl->weight_block_bytes / sizeof(float);
  double t1 = cp_seconds();
  times->pack += t1 - t0;
  for (int64_t cb = it.cb0; cb < it.cb1; cb++) {
    const float *w = op->packed + (size_t)cb * wblock;
    const cp_sr_ukernel_fn kernel = cb + 1 == pl->co_blocks ? pl->uk_tail->fn : pl->uk->fn;
    if (pl->im2col) { /* a GEMM: the same kernel with k = 1 over c_steps*k*k rows */
      const size_t kdim = (size_t)pl->c_steps * (size_t)(pl->k * pl->k);
      const size_t per_row = ((size_t)it.cw + (size_t)nr - 1) / (size_t)nr;
      for (size_t t = 0; t < pl->tiles; t++) {
        float *tile = pl->flat ? buf + t * (size_t)nr
                               : buf + (t / per_row) * pl->buf_row_ld + (t % per_row) * (size_t)nr;
        if (!pl->flat && t / per_row >= conv_rows) break;
        if (pl->flat && t * (size_t)nr >= conv_rows * (size_t)pl->col_block) break;
        kernel(panel + t * kdim * (size_t)nr, (size_t)nr, 0, kdim, 1, w, tile, pl->buf_cols);
      }
    } else if (pl->flat) {
      const size_t len = (conv_rows - 1) * ld + (size_t)it.cw;
      for (size_t t = 0; t < len; t += (size_t)nr)
        kernel(panel + t, pl->panel_cs, ld, (size_t)pl->c_steps, (size_t)pl->k, w, buf + t,
               pl->buf_cols);
    } else {
      for (size_t y = 0; y < conv_rows; y++)
        for (int64_t t = 0; t < it.cw; t += nr)
          kernel(panel + y * ld + (size_t)t, pl->panel_cs, ld, (size_t)pl->c_steps, (size_t)pl->k,
                 w, buf + y * pl->buf_row_ld + (size_t)t, pl->buf_cols);
    }
    double t2 = cp_seconds();
    times->compute += t2 - t1;
    const int64_t co0 = cb * mr;
    const int64_t mr_used = pl->c_out - co0 < mr ? pl->c_out - co0 : mr;
    const size_t dst_index = ((size_t)it.b * (size_t)pl->c_out + (size_t)co0) * plane +
                             (size_t)it.g0 * (size_t)pl->pw + (size_t)(it.col0 / pool);
    cp_pool_epilogue(r, buf, row, mr_used, it.g, it.cw / pool, op->bias + co0, dst_index);
    t1 = cp_seconds();
    times->epilogue += t1 - t2;
  }
}

convpool_status convpool_op_run(convpool_op *op, const void *src, int64_t batch, int64_t height,
                                int64_t width, void *dst, size_t dst_bytes) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (src == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "src is NULL");
  if (dst == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst is NULL");
  cp_plan pl;
  convpool_status st = cp_make_plan(op, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  if (dst_bytes < pl.dst_bytes)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst_bytes = %zu is smaller than the output (%zu bytes)",
                   dst_bytes, pl.dst_bytes);
  if (cp_overlap(src, pl.src_bytes, dst, pl.dst_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst %p overlaps src %p", dst, (const void *)src);
  size_t scratch_bytes;
  if (!cp_mul(pl.scratch_bytes, (size_t)pl.threads, &scratch_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "scratch size overflows");
  int idle = 0;
  if (!atomic_compare_exchange_strong(&op->busy, &idle, 1))
    return cp_fail(CONVPOOL_INVALID_STATE, "op %p is already running on another thread",
                   (void *)op);
  if (scratch_bytes > op->scratch_bytes) { /* kept for the next run of the same size */
    cp_free(op->allocator, op->scratch);
    op->scratch_bytes = 0;
    op->scratch = cp_alloc(op->allocator, scratch_bytes);
    if (op->scratch == NULL) {
      atomic_store(&op->busy, 0);
      return cp_fail(CONVPOOL_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch",
                     scratch_bytes);
    }
    op->scratch_bytes = scratch_bytes;
  }
  const double start = cp_seconds();
  memset(op->times, 0, (size_t)op->threads * sizeof *op->times);
  cp_run r = {op, &pl, src, dst, op->scratch};
  cp_threadpool_run(op->pool_threads, cp_run_item, &r, pl.items);
  convpool_run_stats *s = &op->last_stats;
  memset(s, 0, sizeof *s);
  s->wall_seconds = cp_seconds() - start;
  for (int t = 0; t < op->threads; t++) {
    s->pack_seconds += op->times[t].pack;
    s->compute_seconds += op->times[t].compute;
    s->epilogue_seconds += op->times[t].epilogue;
  }
  s->items = pl.items;
  s->threads = pl.threads;
  atomic_store(&op->busy, 0);
  return CONVPOOL_SUCCESS;
}

/* ---- introspection ---- */

convpool_status convpool_op_plan(const convpool_op *op, int64_t batch, int64_t height,
                                 int64_t width, convpool_plan_info *info) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (info == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "info is NULL");
  cp_plan pl;
  convpool_status st = cp_make_plan(op, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  memset(info, 0, sizeof *info);
  info->threads = pl.threads;
  info->items = pl.items;
  info->rows_per_item = pl.group;
  info->mr = pl.uk->mr;
  info->nr = pl.uk->nr;
  info->col_block = pl.col_block;
  info->packed_weight_bytes = pl.packed_weight_bytes;
  info->scratch_bytes_per_thread = pl.scratch_bytes;
  info->isa = cp_isa_name(pl.uk->isa);
  info->kernel = pl.uk->name;
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_describe(const convpool_op *op, int64_t batch, int64_t height,
                                     int64_t width, char *text, size_t capacity) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (text == NULL || capacity == 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "text is NULL or capacity is 0");
  cp_plan pl;
  convpool_status st = cp_make_plan(op, batch, height, width, &pl);
  if (st != CONVPOOL_SUCCESS) return st;
  const cp_cpu *cpu = cp_cpu_get();
  snprintf(
      text, capacity,
      "algorithm      %s, kernel %s\n"
      "isa            %s (detected %s%s)\n"
      "caches         L1d %zu KiB, L2 %zu KiB, L3 %zu KiB (%s)\n"
      "shape          src [%lld, %lld, %lld, %lld] %s -> conv %lldx%lld -> pool %lld -> dst "
      "[%lld, %lld, %lld, %lld]\n"
      "register tile  %d output channels x %d positions; %lld channel blocks (last: %s)\n"
      "panel          %lld pooled rows (%lld input rows) x %lld conv columns x %lld channels, "
      "%s; sweep %s\n"
      "work items     %lld = batch %lld x row groups %lld x column blocks %lld x channel "
      "groups %lld (%lld blocks each)\n"
      "threads        %d\n"
      "packed weights %zu bytes (%zu per channel block)\n"
      "panel          %zu bytes per thread (budget L2/2 = %zu: %s)\n"
      "tile buffer    %zu bytes per thread (budget L2/4 = %zu: %s)\n"
      "scratch        %zu bytes per thread, %zu in all\n",
      pl.im2col ? "im2col + GEMM" : op->auto_algo ? "shift-reduce (auto: im2col copies each input k*k times and measured slower)" : "shift-reduce",
      pl.uk->name, cp_isa_name(pl.uk->isa),
      cp_isa_name(cpu->detected),
      cpu->isa_cap_ignored ? "; CONVPOOL_ISA not recognised, ignored" : "", cpu->l1d >> 10,
      cpu->l2 >> 10, cpu->l3 >> 10, cpu->caches_from_cpuid ? "cpuid" : "fallback values",
      (long long)pl.batch, (long long)pl.c_in, (long long)pl.height, (long long)pl.width,
      convpool_dtype_name(op->dtype), (long long)pl.oh, (long long)pl.ow, (long long)pl.pool,
      (long long)pl.batch, (long long)pl.c_out, (long long)pl.ph, (long long)pl.pw, pl.uk->mr,
      pl.uk->nr, (long long)pl.co_blocks, pl.uk_tail->name, (long long)pl.group, (long long)pl.panel_rows,
      (long long)pl.col_block, (long long)pl.c_in,
      pl.uk->cpack == 2 ? "bf16 channel pairs" : "fp32", pl.flat ? "flat over rows (narrow rows)" : "per conv row", (long long)pl.items,
      (long long)pl.batch, (long long)pl.row_groups, (long long)pl.col_blocks,
      (long long)pl.co_groups, (long long)pl.co_blocks_per_group, pl.threads,
      pl.packed_weight_bytes, pl.weight_block_bytes, pl.panel_bytes, pl.panel_budget,
      pl.panel_bytes <= pl.panel_budget ? "fits" : "over budget",
      pl.buf_bytes, pl.buf_budget, pl.buf_bytes <= pl.buf_budget ? "fits" : "over budget",
      pl.scratch_bytes, pl.scratch_bytes * (size_t)pl.threads);
  return CONVPOOL_SUCCESS;
}

convpool_status convpool_op_last_run_stats(const convpool_op *op, convpool_run_stats *stats) {
  cp_clear_error();
  if (!cp_op_valid(op)) return cp_fail(CONVPOOL_INVALID_STATE, "op is NULL or not a live operator");
  if (stats == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "stats is NULL");
  convpool_op *mut = (convpool_op *)op; /* the busy flag is the operator's lock */
  int idle = 0;
  if (!atomic_compare_exchange_strong(&mut->busy, &idle, 1))
    return cp_fail(CONVPOOL_INVALID_STATE, "op %p is running; read its statistics after the run",
                   (const void *)op);
  *stats = op->last_stats;
  atomic_store(&mut->busy, 0);
  return CONVPOOL_SUCCESS;
}

/* ---- one-shot ---- */

convpool_status convpool_conv2d_maxpool(convpool_dtype dtype, const void *src, int64_t batch,
                                        int64_t c_in, int64_t height, int64_t width,
                                        const void *weights, int64_t c_out, int64_t k,
                                        const void *bias, int64_t pool, void *dst,
                                        size_t dst_bytes, const convpool_options *options) {
  cp_clear_error();
  convpool_status st = cp_check_dtype(dtype);
  if (st != CONVPOOL_SUCCESS) return st;
  size_t wb;
  if (dst != NULL && weights != NULL && c_out > 0 && c_in > 0 && k > 0 &&
      cp_mul((size_t)c_out, (size_t)c_in, &wb) && cp_mul(wb, (size_t)k, &wb) &&
      cp_mul(wb, (size_t)k, &wb) && cp_mul(wb, convpool_dtype_size(dtype), &wb)) {
    if (cp_overlap(weights, wb, dst, dst_bytes))
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst %p overlaps weights %p", dst, weights);
    if (bias != NULL && cp_overlap(bias, (size_t)c_out * convpool_dtype_size(dtype), dst, dst_bytes))
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst %p overlaps bias %p", dst, bias);
  }
  convpool_op *op = NULL;
  st = convpool_op_create(dtype, weights, bias, c_out, c_in, k, pool, options, &op);
  if (st != CONVPOOL_SUCCESS) return st;
  st = convpool_op_run(op, src, batch, height, width, dst, dst_bytes);
  if (st != CONVPOOL_SUCCESS) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", convpool_last_error());
    convpool_op_destroy(op);
    return cp_fail(st, "%s", saved);
  }
  return convpool_op_destroy(op);
}
