/*
 * convpool — fused Conv2D + bias + MaxPool for the CPU.
 *
 * Contract: src X [B, C_in, H, W] (NCHW, contiguous), weights [C_out, C_in, K, K]
 * (OIHW), optional bias [C_out]; convolution stride 1 with zero padding
 * (top, left, bottom, right; OH = H+top+bottom-K+1, OW = W+left+right-K+1);
 * an activation (none, ReLU or a clamp) of conv + bias; max pooling P x P with
 * stride S (default P), -inf padding and floor or ceil sizing (convpool_layer).
 * dst Y [B, C_out, PH, PW] has the dtype of X. The result equals
 * max_pool2d(act(conv2d(X, W, bias, padding)), P, S, pool_padding, ceil_mode)
 * of torch (ONNX Conv -> Relu/Clip -> MaxPool for asymmetric pads). The
 * convolution output is never written to memory.
 *
 * Every function returns a convpool_status. On failure, convpool_last_error()
 * gives a message (per thread) that names the offending value, and dst is left
 * untouched. The library never aborts, exits or prints.
 */
#ifndef CONVPOOL_H
#define CONVPOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONVPOOL_VERSION_MAJOR 0
#define CONVPOOL_VERSION_MINOR 1
#define CONVPOOL_VERSION_PATCH 0
#define CONVPOOL_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define CONVPOOL_API
#else
#define CONVPOOL_API __attribute__((visibility("default")))
#endif

/**
 * Status of every call: one list gives the enum values and their strings
 * (convpool_status_string); the library checks at compile time that the two
 * agree. X(name, value, string, meaning).
 */
#define CONVPOOL_STATUS_LIST(X)                                                                 \
  X(CONVPOOL_SUCCESS, 0, "success", "the call did what it was asked")                           \
  X(CONVPOOL_INVALID_ARGUMENT, 1, "invalid argument", "a pointer, size or option is not valid") \
  X(CONVPOOL_UNSUPPORTED, 2, "unsupported", "valid, but not implemented on this build or CPU")  \
  X(CONVPOOL_OUT_OF_MEMORY, 3, "out of memory", "an allocation failed; nothing was leaked")     \
  X(CONVPOOL_INVALID_STATE, 4, "invalid state", "the operator is in use by another call")       \
  X(CONVPOOL_INTERNAL_ERROR, 5, "internal error", "a resource other than memory failed (threads)")

typedef enum convpool_status {
#define CONVPOOL_STATUS_ENUM(name, value, string, meaning) name = value,
  CONVPOOL_STATUS_LIST(CONVPOOL_STATUS_ENUM)
#undef CONVPOOL_STATUS_ENUM
} convpool_status;

/** Element type of src, weights, bias and dst. */
typedef enum convpool_dtype {
  CONVPOOL_FLOAT32 = 0, /**< IEEE binary32 */
  CONVPOOL_FLOAT16 = 1, /**< IEEE binary16 storage; fp32 products and accumulation */
  CONVPOOL_BFLOAT16 = 2 /**< bfloat16 storage; fp32 products and accumulation. On CPUs
                             with AVX512_BF16 the kernel uses vdpbf16ps, which for each
                             channel pair adds the odd channel's product and then the even
                             one's into the fp32 sum, each step rounded to nearest even,
                             with subnormal bf16 inputs read as zero and every subnormal
                             step result flushed to zero (DAZ and FTZ whatever MXCSR
                             says): a sum of tiny products that stays subnormal gives 0
                             there, where other CPUs give the subnormal value. */
} convpool_dtype;

/**
 * Algorithm. The library keeps its algorithms in a best-first list; auto
 * takes the first that accepts the layer (convpool_op_describe says which and
 * why the others were passed over).
 */
typedef enum convpool_algo {
  CONVPOOL_ALGO_AUTO = 0,         /**< the library chooses (see README, "Choosing the algorithm") */
  CONVPOOL_ALGO_SHIFT_REDUCE = 1, /**< shifted loads from per-item input panels */
  CONVPOOL_ALGO_IM2COL = 2,       /**< per-item im2col strips and a GEMM */
  CONVPOOL_ALGO_WINOGRAD = 3      /**< Winograd F(4x4,3x3): k = 3 only; fp32 transforms and sums;
                                       tiles whose input range (and channel blocks whose weights)
                                       it cannot compute within the contract's bound go to the
                                       direct path (README, "Winograd") */
} convpool_algo;

/**
 * Memory allocator. alloc returns memory aligned to at least `alignment`
 * (a power of two, <= 4096) or NULL; free releases it (NULL is allowed).
 */
typedef struct convpool_allocator {
  void *(*alloc)(void *context, size_t size, size_t alignment);
  void (*free)(void *context, void *pointer);
  void *context;
} convpool_allocator;

/**
 * Options of an operator. Initialise with convpool_options_init(), which sets
 * `size`; the library reads only the fields that fit in `size`, so a caller
 * built against an older header (a smaller struct) keeps working when fields
 * are added at the end, and later fields take their defaults.
 */
typedef struct convpool_options {
  size_t size; /**< sizeof(convpool_options) of the caller; set by convpool_options_init */
  int threads; /**< threads (the caller's included), started at create; 0 = the usable
                    CPUs (affinity and cgroup quota, read at create). A count above the
                    usable CPUs is honoured as asked; a run uses at most one thread per
                    work item (convpool_run_stats.threads), the rest stay asleep */
  convpool_algo algo;
  int rows_per_item;                   /**< pooled rows per work item; 0 = the plan decides.
                                            Winograd rounds it up to whole 4x4 tiles
                                            (convpool_op_plan reports the value used) */
  const convpool_allocator *allocator; /**< NULL = the global allocator */
} convpool_options;

/** Activation applied to conv + bias, before the pooling. */
typedef enum convpool_activation {
  CONVPOOL_ACTIVATION_NONE = 0, /**< identity */
  CONVPOOL_ACTIVATION_RELU = 1, /**< max(v, 0); NaN stays NaN */
  CONVPOOL_ACTIVATION_CLAMP =
      2 /**< min(max(v, clamp_min), clamp_max); NaN stays NaN (ReLU6 = [0, 6]) */
} convpool_activation;

/**
 * The layer an operator computes. Initialise with convpool_layer_init(),
 * then change what differs from the defaults. Like convpool_options it
 * carries its size, so fields can be added at the end.
 *
 * Conv output: OH = H + padding[0] + padding[2] - k + 1 (>= 1), OW likewise
 * with padding[1] and padding[3]. Pooled output: PH = (OH + pool_padding[0] +
 * pool_padding[2] - pool) / S + 1, rounded down, or up with ceil_mode (then a
 * last window that would start in the bottom/right padding is dropped, as
 * torch does); PW likewise.
 */
typedef struct convpool_layer {
  size_t size;            /**< sizeof(convpool_layer); set by convpool_layer_init */
  convpool_dtype dtype;   /**< element type of weights, bias, src and dst */
  int64_t c_out, c_in, k; /**< filter [c_out, c_in, k, k] */
  int64_t padding[4];     /**< conv zero padding: top, left, bottom, right (>= 0) */
  int64_t stride;         /**< conv stride: only 1 */
  int64_t dilation;       /**< conv dilation: only 1 */
  int64_t groups;         /**< conv groups: only 1 */
  convpool_activation activation;
  float clamp_min, clamp_max; /**< bounds of CONVPOOL_ACTIVATION_CLAMP (min <= max, not NaN) */
  int64_t pool;               /**< max pooling window P x P (1 with stride 1: no pooling) */
  int64_t pool_stride;        /**< window stride S; 0 = pool */
  int64_t pool_padding[4];    /**< -inf padding: top, left, bottom, right, each <= pool / 2 */
  int ceil_mode;              /**< 1: ceil sizing (torch's rule), 0: floor */
} convpool_layer;

/** Library and machine facts. */
typedef struct convpool_info {
  const char *version; /**< CONVPOOL_VERSION_STRING */
  const char *isa;     /**< ISA chosen at run time: "avx512bf16", "avx512f", "avx2" or "scalar" */
  int usable_cpus;     /**< affinity mask intersected with the cgroup CPU quota */
  size_t l1d_bytes;    /**< data cache sizes per core (cpuid, or documented fallbacks) */
  size_t l2_bytes;
  size_t l3_bytes;
  int caches_from_cpuid; /**< 1 if the sizes came from cpuid, 0 if fallbacks */
} convpool_info;

/** Opaque operator: packed weights, plan and thread pool. */
typedef struct convpool_op convpool_op;

/** The name of a status ("success", "invalid argument", ...). Never NULL. */
CONVPOOL_API const char *convpool_status_string(convpool_status status);

/**
 * The message of the last failed call on this thread ("" if none). It names
 * the offending value, e.g. "pool = 5 is larger than the conv output 3x3".
 */
CONVPOOL_API const char *convpool_last_error(void);

/** Size of one element of dtype in bytes, or 0 for an unknown dtype. */
CONVPOOL_API size_t convpool_dtype_size(convpool_dtype dtype);

/** Name of a dtype ("float32", "float16", "bfloat16"), or "unknown". */
CONVPOOL_API const char *convpool_dtype_name(convpool_dtype dtype);

/** Short name of an algorithm ("auto", "sr", "im2col"), or NULL if it is not one. */
CONVPOOL_API const char *convpool_algo_name(convpool_algo algo);

/**
 * The algorithm with short name `name` (as convpool_algo_name gives it).
 * @returns CONVPOOL_SUCCESS, or CONVPOOL_INVALID_ARGUMENT naming the known names
 */
CONVPOOL_API convpool_status convpool_algo_from_name(const char *name, convpool_algo *algo);

/** Fill options with the defaults (all threads, auto algorithm, planned items). */
CONVPOOL_API void convpool_options_init(convpool_options *options);

/**
 * Replace the global allocator used when options->allocator is NULL.
 * @param allocator NULL restores the default (aligned malloc/free).
 * Call it while no operator exists.
 */
CONVPOOL_API convpool_status convpool_set_default_allocator(const convpool_allocator *allocator);

/** Library version, chosen ISA, usable CPUs and cache sizes. */
CONVPOOL_API convpool_status convpool_get_info(convpool_info *info);

/**
 * Create an operator: validate, pack the weights once, start the thread pool.
 * @param dtype     element type of weights, bias, src and dst
 * @param weights   [c_out, c_in, k, k]; not referenced after the call
 * @param bias      [c_out] or NULL for no bias; not referenced after the call
 * @param c_out, c_in, k  filter shape (all >= 1)
 * @param pool      max pooling window and stride (>= 1; 1 = no pooling)
 * @param options   NULL for the defaults
 * @param op_out    receives the operator
 * @returns CONVPOOL_SUCCESS, or a failure with *op_out set to NULL
 */
CONVPOOL_API convpool_status convpool_op_create(convpool_dtype dtype, const void *weights,
                                                const void *bias, int64_t c_out, int64_t c_in,
                                                int64_t k, int64_t pool,
                                                const convpool_options *options,
                                                convpool_op **op_out);

/**
 * Fill a layer with the defaults: no padding, no activation, pool window
 * `pool` with stride `pool`, no pool padding, floor sizing, conv stride,
 * dilation and groups 1.
 */
CONVPOOL_API void convpool_layer_init(convpool_layer *layer, convpool_dtype dtype, int64_t c_out,
                                      int64_t c_in, int64_t k, int64_t pool);

/**
 * Create an operator for a layer (convpool_op_create is this with the
 * defaults of convpool_layer_init).
 * @param layer     initialised with convpool_layer_init
 * @param weights   [c_out, c_in, k, k]; not referenced after the call
 * @param bias      [c_out] or NULL for no bias; not referenced after the call
 * @param options   NULL for the defaults
 * @param op_out    receives the operator
 */
CONVPOOL_API convpool_status convpool_op_create_layer(const convpool_layer *layer,
                                                      const void *weights, const void *bias,
                                                      const convpool_options *options,
                                                      convpool_op **op_out);

/**
 * Shape of dst for a run on src [batch, c_in, height, width].
 * @param shape receives {batch, c_out, PH, PW}
 * @param bytes receives the byte size of dst (may be NULL)
 */
CONVPOOL_API convpool_status convpool_op_output_shape(const convpool_op *op, int64_t batch,
                                                      int64_t height, int64_t width,
                                                      int64_t shape[4], size_t *bytes);

/**
 * Run the layer. Batch and spatial size may change from run to run.
 * src and dst must not overlap. One operator runs one call at a time: a call
 * made while another thread is inside convpool_op_run on the same operator
 * returns CONVPOOL_INVALID_STATE. Different operators run in parallel safely.
 * @param src       [batch, c_in, height, width] of the operator's dtype
 * @param dst       [batch, c_out, PH, PW]
 * @param dst_bytes capacity of dst in bytes; must be >= the output size
 */
CONVPOOL_API convpool_status convpool_op_run(convpool_op *op, const void *src, int64_t batch,
                                             int64_t height, int64_t width, void *dst,
                                             size_t dst_bytes);

/**
 * Describe the plan of a run on [batch, c_in, height, width] as text: ISA,
 * caches, block sizes, work items, threads, buffer bytes against their budgets.
 * The text is truncated to capacity-1 characters and always NUL-terminated.
 */
CONVPOOL_API convpool_status convpool_op_describe(const convpool_op *op, int64_t batch,
                                                  int64_t height, int64_t width, char *text,
                                                  size_t capacity);

/** Facts of the plan of a run, for tools and tests. */
typedef struct convpool_plan_info {
  int threads;           /**< threads used */
  int64_t items;         /**< work items */
  int64_t rows_per_item; /**< pooled rows per work item */
  int mr;                /**< output channels per register tile */
  int nr;                /**< conv columns per register tile */
  int64_t col_block;     /**< conv columns per column block */
  size_t packed_weight_bytes;
  size_t scratch_bytes_per_thread;
  const char *isa;
  const char *kernel; /**< microkernel name */
} convpool_plan_info;

/** Plan facts of a run on [batch, c_in, height, width]. */
CONVPOOL_API convpool_status convpool_op_plan(const convpool_op *op, int64_t batch, int64_t height,
                                              int64_t width, convpool_plan_info *info);

/** Where the time of a run went. Phase times are summed over the threads. */
typedef struct convpool_run_stats {
  double wall_seconds;     /**< the whole convpool_op_run call */
  double pack_seconds;     /**< copying (and widening) input panels */
  double compute_seconds;  /**< microkernel sweeps */
  double epilogue_seconds; /**< pooling, bias, conversion and store */
  int64_t items;           /**< work items run */
  int threads;             /**< threads that took part: at most one per work item */
} convpool_run_stats;

/**
 * Statistics of the operator's last successful run (zeros before the first).
 * Returns CONVPOOL_INVALID_STATE while a run of the operator is in progress.
 */
CONVPOOL_API convpool_status convpool_op_last_run_stats(const convpool_op *op,
                                                        convpool_run_stats *stats);

/** Destroy an operator (NULL is a no-op). */
CONVPOOL_API convpool_status convpool_op_destroy(convpool_op *op);

/**
 * One-shot call: create, run, destroy. Same arguments as above; weights and
 * bias must not overlap dst.
 */
CONVPOOL_API convpool_status convpool_conv2d_maxpool(convpool_dtype dtype, const void *src,
                                                     int64_t batch, int64_t c_in, int64_t height,
                                                     int64_t width, const void *weights,
                                                     int64_t c_out, int64_t k, const void *bias,
                                                     int64_t pool, void *dst, size_t dst_bytes,
                                                     const convpool_options *options);

/** One-shot call for a layer: create, run, destroy. */
CONVPOOL_API convpool_status convpool_layer_run(const convpool_layer *layer, const void *src,
                                                int64_t batch, int64_t height, int64_t width,
                                                const void *weights, const void *bias, void *dst,
                                                size_t dst_bytes, const convpool_options *options);

#ifdef __cplusplus
}
#endif

#endif /* CONVPOOL_H */
