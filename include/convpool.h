/*
 * convpool — fused Conv2D + bias + MaxPool for the CPU.
 *
 * Contract: src X [B, C_in, H, W] (NCHW, contiguous), weights
 * [C_out, C_in/G, K, K] (OIHW), optional bias [C_out]; convolution with
 * stride s, dilation d, G groups and zero padding (top, left, bottom, right;
 * OH = (H+top+bottom-d*(K-1)-1)/s + 1, OW likewise); an optional residual R
 * [B, C_out, OH, OW] added to conv + bias; an activation (none, ReLU or a
 * clamp) of conv + bias + R; max pooling P x P with stride S (default P),
 * -inf padding and floor or ceil sizing (convpool_layer). dst Y
 * [B, C_out, PH, PW] has the dtype of X. The result equals
 * max_pool2d(act(conv2d(X, W, bias, s, padding, d, G) + R), P, S,
 * pool_padding, ceil_mode) of torch for symmetric pool pads up to P/2, and
 * ONNX Conv -> Add -> Relu/Clip -> MaxPool for asymmetric pads and pool pads
 * up to P - 1. Neither the convolution output nor the sum with R is
 * ever written to memory.
 *
 * Every function returns a convpool_status. On failure, convpool_last_error()
 * gives a message (per thread) that names the offending value, and dst is left
 * untouched. The library never aborts or exits, and prints only when asked:
 * with CONVPOOL_VERBOSE=1 in the environment (read once, at the first
 * operator created) it writes one line to stderr per operator created (its
 * algorithm, kernel, layer shape and threads), per run (input and output
 * shapes, threads, work items, wall time) and per failed create or run (the
 * status and message).
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

/**
 * Limits. Every size the API takes is checked against them before the
 * library computes with it, so no sum or product of sizes overflows; a value
 * past a limit is refused with CONVPOOL_INVALID_ARGUMENT and a message that
 * names it.
 *
 * - conv padding (convpool_layer.padding): each side 0..CONVPOOL_MAX_PADDING;
 * - pool window and pool stride: 1..CONVPOOL_MAX_POOL; pool padding 0..pool - 1;
 * - tensors: the byte counts of src [batch, c_in, height, width], of the
 *   weights [c_out, c_in, k, k] and of dst [batch, c_out, PH, PW] must each be
 *   at most PTRDIFF_MAX (this bounds batch, c_in, c_out, k * k, height and width);
 * - threads (convpool_options): 0..1024.
 */
#define CONVPOOL_MAX_PADDING ((int64_t)1 << 24) /**< 16777216 */
#define CONVPOOL_MAX_POOL ((int64_t)1 << 40)    /**< 1099511627776 */

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
  CONVPOOL_ALGO_SHIFT_REDUCE = 1, /**< shifted loads from per-item input panels; a conv stride
                                       splits the input into phases (space to depth); declines
                                       dilation above 1 */
  CONVPOOL_ALGO_IM2COL = 2,       /**< per-item im2col strips and a GEMM; every layer */
  CONVPOOL_ALGO_WINOGRAD = 3,     /**< Winograd F(4x4,3x3): k = 3, stride, dilation and groups 1
                                       only; fp32 transforms and sums; tiles whose input range
                                       (and channel blocks whose weights) it cannot compute
                                       within the contract's bound go to the direct path
                                       (README, "Winograd") */
  CONVPOOL_ALGO_DEPTHWISE = 4,    /**< depthwise layers only (groups = c_in, any channel
                                       multiplier): one channel's plane per vector sweep, conv
                                       positions in the lanes, stride and dilation as phase
                                       planes of the staged input */
  CONVPOOL_ALGO_DIRECT = 5,       /**< output channels in the lanes, each position's input
                                       broadcast from the item's panel: stride and dilation
                                       are address arithmetic (no zero taps, no repeated
                                       inputs); every layer */
  CONVPOOL_ALGO_WINOGRAD_2X3 = 6  /**< Winograd F(2x2,3x3): as CONVPOOL_ALGO_WINOGRAD on 2x2
                                       output tiles (16 points, 1.8x the weights' bytes where
                                       F(4x4,3x3) takes 4x): auto's Winograd hands it the
                                       small images (README, "Choosing the algorithm") */
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
 * `size`. The library accepts the size of every released version of the
 * struct and reads only the fields that fit in it, so a caller built against
 * an older header (a smaller struct) keeps working when fields are added at
 * the end, and the later fields take their defaults; any other size is
 * refused (CONVPOOL_INVALID_ARGUMENT), naming it.
 */
typedef struct convpool_options {
  size_t size; /**< sizeof(convpool_options) of the caller; set by convpool_options_init */
  int threads; /**< threads (the caller's included), started at create; 0 = the usable
                    CPUs (affinity and cgroup quota, read at create). A count above the
                    usable CPUs is honoured as asked; a run uses at most one thread per
                    work item (convpool_run_stats.threads), the rest stay asleep */
  convpool_algo algo;
  int rows_per_item;                   /**< pooled rows per work item; 0 = the plan decides
                                            (Winograd may then put the images of a batch of
                                            small ones side by side in one item; a forced
                                            value keeps one image per item). Winograd rounds
                                            it up to whole 4x4 tiles (convpool_op_plan
                                            reports the value used) */
  const convpool_allocator *allocator; /**< NULL = the global allocator */
  int shared_pool; /**< 1: run on the process-wide thread pool (convpool_shared_pool_set_threads)
                        instead of threads of the operator's own; `threads` must then be 0.
                        0 (default): the operator starts and owns its threads */
  int64_t expected_batch; /**< The run shape [batch, c_in, height, width] the operator is
                               made for: all three > 0, or all 0 (default: any shape). With
                               algo auto, create settles the choice for that shape (the
                               algorithm its plan runs, Winograd's tile size with it) and
                               packs only that algorithm's weights, as if it had been asked
                               for by name; without, auto packs what any shape may be
                               handed to (Winograd's two tile sizes and the direct
                               algorithm's weights: up to 8x the bytes one run reads).
                               Runs of other shapes stay correct, computed by the settled
                               algorithm. A shape the layer cannot take is refused at create,
                               with the run's message. Named algorithms ignore it. */
  int64_t expected_height, expected_width; /**< see expected_batch */
} convpool_options;

/** Activation applied to conv + bias (+ the residual), before the pooling. */
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
 * Conv output: OH = (H + padding[0] + padding[2] - dilation*(k-1) - 1) /
 * stride + 1, rounded down (the padded input must hold the dilated filter, so
 * OH >= 1), OW likewise with padding[1] and padding[3]. Pooled output, torch's
 * pooling_output_shape: PH = floor((OH + pool_padding[0] + pool_padding[2] -
 * pool) / S) + 1, or with ceil_mode the same rounded up, less one when that
 * last window would start in the bottom padding; PW likewise. PH and PW must
 * be >= 1: floor sizing refuses a window larger than the padded conv output,
 * ceil sizing keeps one partial window when the window is larger by less than
 * S (as torch does). Windows are clipped to the conv output; with pool
 * padding below the window (ONNX's bound) every window holds at least one
 * conv output.
 *
 * Released sizes: 168 bytes (up to ceil_mode) and the current one (with
 * has_residual). A caller of the older size gets has_residual = 0.
 */
typedef struct convpool_layer {
  size_t size;            /**< sizeof(convpool_layer); set by convpool_layer_init */
  convpool_dtype dtype;   /**< element type of weights, bias, src and dst */
  int64_t c_out, c_in, k; /**< filter [c_out, c_in / groups, k, k] */
  int64_t padding[4];     /**< conv zero padding: top, left, bottom, right, each
                               0..CONVPOOL_MAX_PADDING */
  int64_t stride;         /**< conv stride, rows and columns: 1..2^24 */
  int64_t dilation;       /**< conv dilation, rows and columns: 1..2^24 (the filter's taps
                               are dilation apart) */
  int64_t groups;         /**< conv groups: >= 1, dividing c_in and c_out; output channel
                               co sees input channels [g*c_in/groups, (g+1)*c_in/groups)
                               of its group g = co / (c_out/groups) (groups = c_in:
                               depthwise, c_out/c_in outputs per input channel) */
  convpool_activation activation;
  float clamp_min, clamp_max; /**< bounds of CONVPOOL_ACTIVATION_CLAMP (min <= max, not NaN) */
  int64_t pool;               /**< max pooling window P x P, 1..CONVPOOL_MAX_POOL (1 with
                                   stride 1: no pooling) */
  int64_t pool_stride;        /**< window stride S, 1..CONVPOOL_MAX_POOL; 0 = pool */
  int64_t pool_padding[4];    /**< -inf padding: top, left, bottom, right, each 0..pool - 1
                                   (ONNX's MaxPool; torch's max_pool2d takes pool / 2) */
  int ceil_mode;              /**< 1: ceil sizing (torch's rule), 0: floor */
  int64_t has_residual;       /**< 1: every run adds a residual R [B, c_out, OH, OW] of the
                                   layer's dtype to conv + bias before the activation
                                   (convpool_op_run_residual); 0: none. 64 bits, so that
                                   the struct grows past the older size */
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

/**
 * The dtype with name `name` (as convpool_dtype_name gives it).
 * @returns CONVPOOL_SUCCESS, or CONVPOOL_INVALID_ARGUMENT naming the known names
 */
CONVPOOL_API convpool_status convpool_dtype_from_name(const char *name, convpool_dtype *dtype);

/**
 * Convert `count` elements from src_dtype to dst_dtype, as the library does
 * at its own boundaries: exact widening to float32, one round to nearest even
 * when narrowing (overflow gives Inf; a NaN stays a NaN, a signalling one may
 * come out quiet).
 * @param src  count elements of src_dtype, aligned to its element size
 * @param dst  count elements of dst_dtype, aligned likewise; must not overlap src
 * @returns CONVPOOL_SUCCESS, or CONVPOOL_INVALID_ARGUMENT (unknown dtype, NULL or
 *          misaligned pointer, overlap, a byte count that overflows)
 */
CONVPOOL_API convpool_status convpool_convert(const void *src, convpool_dtype src_dtype, void *dst,
                                              convpool_dtype dst_dtype, size_t count);

/** Short name of an algorithm ("auto", "sr", "im2col", "winograd", ...: the library's list), or
    NULL if it is not one. */
CONVPOOL_API const char *convpool_algo_name(convpool_algo algo);

/**
 * The algorithm with short name `name` (as convpool_algo_name gives it).
 * @returns CONVPOOL_SUCCESS, or CONVPOOL_INVALID_ARGUMENT naming the known names
 */
CONVPOOL_API convpool_status convpool_algo_from_name(const char *name, convpool_algo *algo);

/**
 * The algorithms a caller may ask for: CONVPOOL_ALGO_AUTO first, then the
 * library's list in auto's order (best first). Writes the first
 * min(count, capacity) of them to `algos` (which may be NULL when capacity is 0).
 * @returns count, the number of algorithms
 */
CONVPOOL_API size_t convpool_algo_list(convpool_algo *algos, size_t capacity);

/** Fill options with the defaults (all threads, auto algorithm, planned items, own pool). */
CONVPOOL_API void convpool_options_init(convpool_options *options);

/**
 * The process-wide thread pool, run on by every operator created with
 * options.shared_pool = 1, so that a process with many operators (a whole
 * network) keeps one set of threads. Its size is the usable CPUs (read when
 * its threads start) unless set here; its threads start when the first such
 * operator is created and stay until the size changes.
 *
 * Runs on the shared pool are serialised: a run of a shared-pool operator
 * waits while another one's run holds the pool (it neither fails nor starts
 * threads of its own), then runs with every thread of the pool. Operators
 * with their own threads (shared_pool = 0) are not affected. Results do not
 * depend on the size, as for any thread count.
 *
 * @param threads  threads of the pool, the caller of a run included (1..1024;
 *                 1: runs on the calling thread only, no workers); 0 = the
 *                 usable CPUs, read now
 * @returns CONVPOOL_SUCCESS once a pool of that size is in place (waiting for
 *          a run in flight to end first); CONVPOOL_INVALID_ARGUMENT for a count
 *          out of range; CONVPOOL_OUT_OF_MEMORY or CONVPOOL_INTERNAL_ERROR if
 *          the new threads cannot be started, in which case the pool keeps its
 *          previous size
 */
CONVPOOL_API convpool_status convpool_shared_pool_set_threads(int threads);

/**
 * The size of the process-wide pool: the threads it has, or will start with
 * at first use.
 * @param threads  receives the count
 */
CONVPOOL_API convpool_status convpool_shared_pool_get_threads(int *threads);

/**
 * Run the process-wide pool on the OpenMP runtime's threads (1) or on
 * threads of its own (0, the default). In OpenMP mode a run is one parallel
 * region of the pool's size: in a process whose other libraries run on the
 * same OpenMP runtime (torch and oneDNN as Debian builds them, on libgomp)
 * the region reuses their threads, which spin for a while after each of
 * their regions, instead of competing with them for the cores. Results are
 * the same bytes in both modes. The pool's size still comes from
 * convpool_shared_pool_set_threads; the runtime may give a region fewer
 * threads (one, inside another parallel region). The runtime creates its
 * threads itself and, unlike the pool's own threads, ends the process if it
 * cannot (libgomp: "Thread creation failed"). Waits for a run in flight.
 *
 * @param enable  1: OpenMP's threads; 0: the pool's own
 * @returns CONVPOOL_SUCCESS; CONVPOOL_INVALID_ARGUMENT for another value;
 *          CONVPOOL_UNSUPPORTED for 1 when the library was built without
 *          OpenMP (CMake option CONVPOOL_OPENMP, or a compiler without it);
 *          CONVPOOL_OUT_OF_MEMORY or CONVPOOL_INTERNAL_ERROR if the pool's own
 *          threads cannot be started again, in which case the mode stays
 */
CONVPOOL_API convpool_status convpool_shared_pool_use_openmp(int enable);

/**
 * The process-wide pool's mode (convpool_shared_pool_use_openmp).
 * @param enabled  receives 1 (OpenMP's threads) or 0 (its own)
 */
CONVPOOL_API convpool_status convpool_shared_pool_get_openmp(int *enabled);

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
 * @param pool      max pooling window and stride (1..CONVPOOL_MAX_POOL; 1 = no pooling)
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
 * dilation and groups 1, no residual.
 */
CONVPOOL_API void convpool_layer_init(convpool_layer *layer, convpool_dtype dtype, int64_t c_out,
                                      int64_t c_in, int64_t k, int64_t pool);

/**
 * Create an operator for a layer (convpool_op_create is this with the
 * defaults of convpool_layer_init).
 * @param layer     initialised with convpool_layer_init
 * @param weights   [c_out, c_in / groups, k, k]; not referenced after the call
 * @param bias      [c_out] or NULL for no bias; not referenced after the call
 * @param options   NULL for the defaults
 * @param op_out    receives the operator
 */
CONVPOOL_API convpool_status convpool_op_create_layer(const convpool_layer *layer,
                                                      const void *weights, const void *bias,
                                                      const convpool_options *options,
                                                      convpool_op **op_out);

/**
 * Validate a layer and an input [batch, c_in, height, width] without weights
 * and give the shape of dst: the checks and messages of create and run (conv
 * and pool padding limits, stride, dilation and groups, a dilated filter
 * larger than the padded input, a pool larger than the conv output, byte
 * counts), before any tensor is allocated.
 * @param layer  initialised with convpool_layer_init
 * @param shape  receives {batch, c_out, PH, PW}
 * @param bytes  receives the byte size of dst (may be NULL)
 */
CONVPOOL_API convpool_status convpool_layer_output_shape(const convpool_layer *layer, int64_t batch,
                                                         int64_t height, int64_t width,
                                                         int64_t shape[4], size_t *bytes);

/**
 * The same checks, and the shape of the conv output [batch, c_out, OH, OW]:
 * the shape of the residual of a layer with has_residual.
 * @param shape  receives {batch, c_out, OH, OW}
 * @param bytes  receives its byte size in the layer's dtype (may be NULL)
 */
CONVPOOL_API convpool_status convpool_layer_conv_shape(const convpool_layer *layer, int64_t batch,
                                                       int64_t height, int64_t width,
                                                       int64_t shape[4], size_t *bytes);

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
 * A layer with has_residual is run with convpool_op_run_residual.
 * @param src       [batch, c_in, height, width] of the operator's dtype
 * @param dst       [batch, c_out, PH, PW]
 * @param dst_bytes capacity of dst in bytes; must be >= the output size
 */
CONVPOOL_API convpool_status convpool_op_run(convpool_op *op, const void *src, int64_t batch,
                                             int64_t height, int64_t width, void *dst,
                                             size_t dst_bytes);

/**
 * Run a layer with a residual: dst = pool(act(conv(src) + bias + residual)),
 * the residual read once, as the epilogue pools (oneDNN's sum post-op; NaN
 * and Inf in it propagate as in torch's conv2d(...) + residual). A layer
 * without has_residual takes residual = NULL (then this is convpool_op_run).
 * @param residual  [batch, c_out, OH, OW] of the operator's dtype
 *                  (convpool_layer_conv_shape); must not overlap dst
 */
CONVPOOL_API convpool_status convpool_op_run_residual(convpool_op *op, const void *src,
                                                      int64_t batch, int64_t height, int64_t width,
                                                      const void *residual, void *dst,
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

/** One-shot call for a layer: create, run, destroy (a layer without has_residual). */
CONVPOOL_API convpool_status convpool_layer_run(const convpool_layer *layer, const void *src,
                                                int64_t batch, int64_t height, int64_t width,
                                                const void *weights, const void *bias, void *dst,
                                                size_t dst_bytes, const convpool_options *options);

/** One-shot call for a layer with a residual (see convpool_op_run_residual); residual is
    NULL for a layer without has_residual. Weights, bias and residual must not overlap dst. */
CONVPOOL_API convpool_status convpool_layer_run_residual(
    const convpool_layer *layer, const void *src, int64_t batch, int64_t height, int64_t width,
    const void *weights, const void *bias, const void *residual, void *dst, size_t dst_bytes,
    const convpool_options *options);

#ifdef __cplusplus
}
#endif

#endif /* CONVPOOL_H */
