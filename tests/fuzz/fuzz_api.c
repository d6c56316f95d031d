/*
 * libFuzzer target for the public API: layer_output_shape / layer_conv_shape,
 * create / output_shape / plan / describe / run / last_run_stats / destroy, and
 * the one-shot call, on small layers decoded from the input, valid or not.
 *
 * An independent oracle decides from the decoded arguments which statuses are
 * acceptable: CONVPOOL_SUCCESS when every argument is valid, otherwise one of
 * the statuses of the rules they break, and CONVPOOL_OUT_OF_MEMORY exactly
 * when the instrumented allocator refused an allocation. On success the
 * output is compared with the scalar reference (tolerance of
 * tests/test_layer.c) and bytes past the output must be untouched; on failure
 * dst must be untouched and convpool_last_error() non-empty; src and a residual
 * in its own buffer are never modified; no allocation is left outstanding. Any
 * violation aborts.
 *
 * Input layout (missing bytes read as 0):
 *   0 dtype      0-4 float32, 5-9 float16, 10-14 bfloat16, 15 an invalid value (next byte)
 *   1 batch      {1, 1, 2, 3, 0, -1}[b % 6]
 *   2 c_in       1 + b % 6, or 0 / negative for b >= 250
 *   3 c_out      1 + b % 12, or 0 / negative for b >= 250
 *   4 k          1 + b % 5, or 0 / negative for b >= 250
 *   5 pool       1 + b % 4, or 0 / negative for b >= 250
 *   6 height     k + pool - 1 + b % 14 for b < 220, else b - 236 (often too small)
 *   7 width      as height
 *   8 threads    b % 6; 254 -> 1025, 255 -> -1
 *   9 rows/item  0 for b < 128, else (b - 128) % 10; 255 -> -1
 *  10 algo       b % 8: 0-2 auto, 3-4 shift-reduce, 5-6 im2col, 7 an invalid value (next
 *                byte; an even one is winograd). Bit 8 (b & 8) with flag 32: the conv
 *                fields follow the layer's bytes (below); without flag 32 it is ignored
 *  11 flags      1 bias, 2 dst_bytes too small, 4 dst placed over src, 8 skip the
 *                one-shot call, 16 fail an allocation, 32 a convpool_layer (five more
 *                bytes follow the header, below; the calls are convpool_op_create_layer
 *                and convpool_layer_run), 64 an extreme value (one more byte, after
 *                the layer's), 128 wide values in the tensors (below)
 *  12 dst_bytes shortfall (1 + b % 8 bytes) / dst offset into src (4-byte steps)
 *  13 the allocation to fail (1 + b % 8)
 *  14 describe capacity (1 + b % 64, or 4096 for b >= 192)
 *  with flag 32:
 *  +0 conv padding: side s (top, left, bottom, right) = (b >> 2s) & 3
 *  +1 activation: b % 5: none, relu, clamp [-0.5, 6], clamp [3, 1] (invalid), an
 *     invalid activation value
 *  +2 pool stride: b % 6: 0 (= the window), 1, 2, 3, 4, -1 (invalid)
 *  +3 pool padding: side s = (b >> 2s) & 3 (invalid from pool on: at most pool - 1)
 *  +4 ceil_mode: b & 1, or 2 (invalid) for b >= 250
 *  with flag 32 and bit 8 of the algo byte, four more bytes (conv fields):
 *  +5 conv stride: b % 8: 0-3 stride 1-4, 4 -> 0, 5 -> -1, 6 -> 2^24 (the limit: one conv
 *     row), 7 -> 2^24 + 1, or INT64_MAX when b & 8
 *  +6 dilation: b % 8: 0-2 -> 1, 3 -> 2, 4 -> 3, 5 -> 0, 6 -> -1, 7 -> 2^24 + 1, or 2^24
 *     (the limit: an input too small unless k = 1) when b & 8
 *  +7 groups: b % 8: 0-1 -> 1, 2 -> 2, 3 -> gcd(c_in, c_out), 4 -> depthwise (groups =
 *     c_out = c_in), 5 -> depthwise with channel multiplier 2 (groups = c_in, c_out =
 *     2 c_in), 6 -> 0, or -1 when b & 8, 7 -> c_in + 1 (never divides c_in), or 3 when
 *     b & 8 (divides or not)
 *  +8 residual R: b % 8: 0-2 none; 3-4 R in a buffer of its own; 5 R starting (b >> 3)
 *     elements into dst's output (refused: it overlaps dst); 6 R = src (allowed: only dst
 *     is written, refused only where R reaches dst); 7 an invalid use by (b >> 3) % 4:
 *     has_residual = 1 with R NULL, R given with has_residual = 0, has_residual = 2, R
 *     one byte off its element alignment. Every use but none runs through
 *     convpool_op_run_residual and convpool_layer_run_residual. R's shape is the conv
 *     output's and the API takes no size for it, so a wrong size cannot be expressed:
 *     only the overlaps and misuses above.
 *  With the conv fields, height and width for b < 220 are d (k - 1) + 1 + s (pool - 1)
 *     + b % 14: the dilated filter's extent plus the pool's span (s, d: the stride and
 *     dilation where they are 1..4 and 1..3, else 1), so that most layers have an output.
 *  with flag 64, one byte after those, b % 14 (the heights and widths above are drawn first):
 *     0 k = 3037000500 (k * k > INT64_MAX), 1 k = 2^31, 2 c_out = 2^62,
 *     3 pool = CONVPOOL_MAX_POOL, 4 pool = CONVPOOL_MAX_POOL + 1, 5 pool = INT64_MAX,
 *     6 pool stride = CONVPOOL_MAX_POOL, 7 pool stride = INT64_MAX,
 *     8 pool and pool stride = CONVPOOL_MAX_POOL with pool padding CONVPOOL_MAX_POOL - 1,
 *     9 pool = INT64_MAX with pool padding INT64_MAX / 2,
 *    10 height = INT64_MAX - 10 with conv padding CONVPOOL_MAX_PADDING,
 *    11 width = INT64_MAX, 12 batch = INT64_MAX, 13 height = width = 2^31
 *     (layer fields apply with flag 32 only)
 *  then tensor data, one byte per element, cycled (x, then w, bias and R in its own
 *     buffer): (b - 128) / 16, except 0xfd -> -inf, 0xfe -> +inf, 0xff -> NaN; with
 *     flag 128, bytes 0xc0..0xfc are huge and tiny finite values instead (decode_wide),
 *     so that x, w, bias and R mix ordinary values with values up to FLT_MAX
 *     (high-dynamic-range Winograd tiles, sums that overflow)
 *
 * Old inputs decode as before the conv fields: they have bit 8 of the algo byte clear
 * wherever flag 32 is set.
 *
 * The oracle holds every algorithm, Winograd included, to the contract's bound for
 * every finite input (Winograd's range rule must send the tiles it cannot compute
 * within it to the direct path). It knows which algorithms decline which layers
 * (CONVPOOL_UNSUPPORTED): Winograd all but k = 3 with stride, dilation and groups 1,
 * shift-reduce a dilation above 1 with k > 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_util.h"

#define PATTERN 0x6B
/* Bounds that follow from the decoding above (checked for every valid shape): the
   largest height is the dilated extent 3 (5 - 1) + 1 plus the pool's span 4 (4 - 1)
   plus 13; conv outputs are at most the input plus 6 (conv padding 3 per side), pooled
   outputs at most the conv output plus 6 (pool padding 3 per side, stride 1); c_out is
   at most 12 (depthwise: 2 c_in, c_in <= 6). The residual has the conv output's shape. */
#define MAX_HW (3 * (5 - 1) + 1 + 4 * (4 - 1) + 13)
#define X_CAP ((size_t)3 * 6 * MAX_HW * MAX_HW)
#define W_CAP ((size_t)12 * 6 * 5 * 5)
#define Y_CAP ((size_t)3 * 12 * (MAX_HW + 12) * (MAX_HW + 12))
#define R_CAP ((size_t)3 * 12 * (MAX_HW + 6) * (MAX_HW + 6))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader {
  const uint8_t *p;
  size_t n, i;
} reader;

static unsigned next(reader *r) {
  return r->i < r->n ? r->p[r->i++] : 0u;
}

static int64_t small_dim(unsigned b, unsigned mod) {
  if (b >= 250) return -(int64_t)(b - 250); /* 0, -1, ..., -5 */
  return 1 + (int64_t)(b % mod);
}

static float decode_value(uint8_t b) {
  if (b == 0xfd) return -INFINITY;
  if (b == 0xfe) return INFINITY;
  if (b == 0xff) return NAN;
  return ((float)b - 128.0f) / 16.0f;
}

/* Flag 128: 0xc0..0xfc are +-1.5 * 2^(8j - 100) for j = 0..28 (1e-30 .. 3e37) and
   +-FLT_MAX (even bytes positive); the others decode as without it. */
static float decode_wide(uint8_t b) {
  if (b < 0xc0 || b >= 0xfd) return decode_value(b);
  const unsigned k = (unsigned)b - 0xc0u, j = k / 2;
  const float sign = k % 2 ? -1.0f : 1.0f;
  return j >= 29 ? sign * FLT_MAX : sign * ldexpf(1.5f, 8 * (int)j - 100);
}

static void fill_from(void *dst, size_t n, convpool_dtype dtype, const uint8_t *bytes, size_t count,
                      size_t *cursor, int wide) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t b = count ? bytes[(*cursor)++ % count] : 128;
    rel_set(dtype, dst, i, wide ? decode_wide(b) : decode_value(b));
  }
}

#define FUZZ_ASSERT(cond, ...)                   \
  do {                                           \
    if (!(cond)) {                               \
      fprintf(stderr, "fuzz_api: " __VA_ARGS__); \
      fputc('\n', stderr);                       \
      abort();                                   \
    }                                            \
  } while (0)

/* Statuses a call may return: a bit per status. */
typedef unsigned status_set;
#define BIT(s) (1u << (unsigned)(s))

/* The verdict on a call: refused allocations force OUT_OF_MEMORY. */
static void judge(const char *call, convpool_status st, status_set causes, long refused) {
  if (refused > 0) {
    FUZZ_ASSERT(st == CONVPOOL_OUT_OF_MEMORY, "%s: an allocation was refused but it returned %s",
                call, convpool_status_string(st));
  } else if (causes != 0) {
    FUZZ_ASSERT(st != CONVPOOL_SUCCESS && (causes & BIT(st)),
                "%s: returned %s for arguments that break rules with statuses 0x%x (%s)", call,
                convpool_status_string(st), causes, convpool_last_error());
  } else {
    FUZZ_ASSERT(st == CONVPOOL_SUCCESS, "%s: valid arguments refused: %s: %s", call,
                convpool_status_string(st), convpool_last_error());
  }
  if (st != CONVPOOL_SUCCESS)
    FUZZ_ASSERT(convpool_last_error()[0] != '\0', "%s: failed without a message", call);
}

/* 128-bit integers: the oracle's sizes cannot overflow, whatever it decodes. */
__extension__ typedef __int128 wide;

/* Whether d0 * d1 * d2 * d3 elements of es bytes fit PTRDIFF_MAX (each d >= 1). */
static int bytes_fit(int64_t d0, int64_t d1, int64_t d2, int64_t d3, size_t es) {
  const int64_t d[4] = {d0, d1, d2, d3};
  wide n = (wide)es;
  for (int i = 0; i < 4; i++)
    if ((n *= d[i]) > PTRDIFF_MAX) return 0;
  return 1;
}

static int ranges_overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + bn && b0 < a0 + an;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* Where the residual comes from (byte +8 of the conv fields). */
typedef enum residual_use {
  RES_NONE,      /* has_residual = 0, no residual */
  RES_OWN,       /* a buffer of its own */
  RES_OVER_DST,  /* starting inside dst's output: refused */
  RES_SRC,       /* the src tensor itself: allowed unless it reaches dst */
  RES_NULL,      /* has_residual = 1, residual NULL: refused at run */
  RES_UNWANTED,  /* a residual for a layer without one: refused at run */
  RES_BAD_FLAG,  /* has_residual = 2: refused at create */
  RES_MISALIGNED /* one byte off: refused at run */
} residual_use;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned char *arena, *x_copy, *w, *bias, *res_buf, *res_copy;
  static rel_alloc counting;
  if (arena == NULL) { /* once: buffers at their largest, and the allocator */
    arena = malloc(X_CAP * 4 + Y_CAP * 4);
    x_copy = malloc(X_CAP * 4);
    w = malloc(W_CAP * 4);
    bias = malloc(12 * 4);
    res_buf = malloc(R_CAP * 4 + 8); /* + 8: room for the misaligned residual */
    res_copy = malloc(R_CAP * 4 + 8);
    rel_alloc_init(&counting);
    if (!arena || !x_copy || !w || !bias || !res_buf || !res_copy) abort();
  }
  reader in = {data, size, 0};

  /* ---- decode ---- */
  const unsigned b_dtype = next(&in) % 16;
  convpool_dtype dtype = b_dtype < 5    ? CONVPOOL_FLOAT32
                         : b_dtype < 10 ? CONVPOOL_FLOAT16
                         : b_dtype < 15 ? CONVPOOL_BFLOAT16
                                        : (convpool_dtype)(3 + (int)(next(&in) % 100));
  static const int64_t batches[6] = {1, 1, 2, 3, 0, -1};
  int64_t batch = batches[next(&in) % 6];
  const int64_t c_in = small_dim(next(&in), 6);
  int64_t c_out = small_dim(next(&in), 12);
  int64_t k = small_dim(next(&in), 5);
  int64_t pool = small_dim(next(&in), 4);
  int64_t hw[2];
  unsigned b_hw[2];
  for (int i = 0; i < 2; i++) {
    unsigned b = b_hw[i] = next(&in);
    int64_t kk = k > 0 ? k : 1, pp = pool > 0 ? pool : 1;
    hw[i] = b < 220 ? kk + pp - 1 + (int64_t)(b % 14) : (int64_t)b - 236;
  }
  int64_t height = hw[0], width = hw[1];
  unsigned b = next(&in);
  const int threads = b == 255 ? -1 : b == 254 ? 1025 : (int)(b % 6);
  b = next(&in);
  const int rows_per_item = b == 255 ? -1 : b < 128 ? 0 : (int)((b - 128) % 10);
  const unsigned b_algo_raw = next(&in);
  b = b_algo_raw % 8;
  const unsigned b_algo = b == 7 ? next(&in) : 0;
  const convpool_algo algo = b < 3             ? CONVPOOL_ALGO_AUTO
                             : b < 5           ? CONVPOOL_ALGO_SHIFT_REDUCE
                             : b < 6           ? CONVPOOL_ALGO_IM2COL
                             : b < 7           ? CONVPOOL_ALGO_DIRECT
                             : b_algo % 3 == 0 ? CONVPOOL_ALGO_WINOGRAD
                             : b_algo % 3 == 1 ? CONVPOOL_ALGO_WINOGRAD_2X3
                                               : (convpool_algo)(7 + (int)(b_algo % 50));
  const unsigned flags = next(&in);
  const unsigned b_amount = next(&in);
  const unsigned b_fail = next(&in);
  const long fail_at = (flags & 16) ? 1 + (long)(b_fail % 8) : 0;
  /* options.expected_*: none, the run's shape, or a value refused (-1 height) */
  const int expect = (int)(b_fail >> 3) % 4, expect_run = expect == 2, expect_bad = expect == 3;
  b = next(&in);
  const size_t capacity = b >= 192 ? 4096 : 1 + b % 64;
  const int use_layer = (flags & 32) != 0;
  const int conv_fields = use_layer && (b_algo_raw & 8) != 0;
  convpool_layer layer;
  convpool_layer_init(&layer, dtype, c_out, c_in, k, pool);
  status_set layer_causes = 0;
  if (use_layer) {
    b = next(&in);
    for (int s = 0; s < 4; s++) layer.padding[s] = (b >> (2 * s)) & 3;
    b = next(&in) % 5;
    if (b == 1) layer.activation = CONVPOOL_ACTIVATION_RELU;
    if (b == 2 || b == 3) {
      layer.activation = CONVPOOL_ACTIVATION_CLAMP;
      layer.clamp_min = b == 2 ? -0.5f : 3.0f;
      layer.clamp_max = b == 2 ? 6.0f : 1.0f;
    }
    if (b == 4) layer.activation = (convpool_activation)9;
    if (b >= 3) layer_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
    b = next(&in) % 6;
    layer.pool_stride = b == 5 ? -1 : (int64_t)b;
    b = next(&in);
    for (int s = 0; s < 4; s++) layer.pool_padding[s] = (b >> (2 * s)) & 3;
    b = next(&in);
    layer.ceil_mode = b >= 250 ? 2 : (int)(b & 1);
    if (b >= 250) layer_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  }
  residual_use res_use = RES_NONE;
  unsigned b_res_offset = 0;
  if (conv_fields) {
    b = next(&in);
    static const int64_t strides[7] = {1, 2, 3, 4, 0, -1, (int64_t)1 << 24};
    layer.stride = b % 8 < 7 ? strides[b % 8] : (b & 8) ? INT64_MAX : ((int64_t)1 << 24) + 1;
    b = next(&in);
    static const int64_t dilations[7] = {1, 1, 1, 2, 3, 0, -1};
    layer.dilation = b % 8 < 7 ? dilations[b % 8]
                     : (b & 8) ? (int64_t)1 << 24
                               : ((int64_t)1 << 24) + 1;
    b = next(&in);
    switch (b % 8) {
      case 2:
        layer.groups = 2;
        break;
      case 3:
        layer.groups = c_in >= 1 && c_out >= 1 ? gcd64(c_in, c_out) : 1;
        break;
      case 4: /* depthwise */
      case 5: /* depthwise, two outputs per input channel */
        layer.groups = c_in;
        if (c_in >= 1) layer.c_out = c_out = (int64_t)(b % 8 - 3) * c_in;
        break;
      case 6:
        layer.groups = (b & 8) ? -1 : 0;
        break;
      case 7:
        layer.groups = (b & 8) ? 3 : c_in + 1;
        break;
      default:
        layer.groups = 1;
        break;
    }
    b = next(&in);
    b_res_offset = b >> 3;
    static const residual_use uses[7] = {RES_NONE, RES_NONE,     RES_NONE, RES_OWN,
                                         RES_OWN,  RES_OVER_DST, RES_SRC};
    static const residual_use invalid_uses[4] = {RES_NULL, RES_UNWANTED, RES_BAD_FLAG,
                                                 RES_MISALIGNED};
    res_use = b % 8 < 7 ? uses[b % 8] : invalid_uses[(b >> 3) % 4];
    layer.has_residual = res_use == RES_NONE || res_use == RES_UNWANTED ? 0
                         : res_use == RES_BAD_FLAG                      ? 2
                                                                        : 1;
    /* heights and widths that fit the dilated filter and the pool's span */
    const int64_t s = layer.stride >= 1 && layer.stride <= 4 ? layer.stride : 1;
    const int64_t d = layer.dilation >= 1 && layer.dilation <= 3 ? layer.dilation : 1;
    const int64_t kk = k > 0 ? k : 1, pp = pool > 0 ? pool : 1;
    for (int i = 0; i < 2; i++)
      hw[i] = b_hw[i] < 220 ? d * (kk - 1) + 1 + s * (pp - 1) + (int64_t)(b_hw[i] % 14)
                            : (int64_t)b_hw[i] - 236;
    height = hw[0], width = hw[1];
  }
  if (flags & 64) { /* one value at a limit of convpool.h, or past it */
    const int64_t max_pool = CONVPOOL_MAX_POOL;
    switch (next(&in) % 14) {
      case 0: /* k * k > INT64_MAX */
        k = 3037000500LL;
        break;
      case 1: /* 2^63 bytes of weights or more */
        k = (int64_t)1 << 31;
        break;
      case 2:
        c_out = (int64_t)1 << 62;
        break;
      case 3: /* valid: one window (ceil), or larger than the conv output (floor) */
        pool = max_pool;
        break;
      case 4:
        pool = max_pool + 1;
        break;
      case 5:
        pool = INT64_MAX;
        break;
      case 6: /* valid */
        layer.pool_stride = max_pool;
        break;
      case 7:
        layer.pool_stride = INT64_MAX;
        break;
      case 8: /* valid: two windows per side, each holding some conv outputs */
        pool = layer.pool_stride = max_pool;
        if (use_layer)
          for (int s = 0; s < 4; s++) layer.pool_padding[s] = max_pool - 1;
        break;
      case 9:
        pool = INT64_MAX;
        for (int s = 0; s < 4; s++) layer.pool_padding[s] = INT64_MAX / 2;
        break;
      case 10:
        height = INT64_MAX - 10;
        for (int s = 0; s < 4; s++) layer.padding[s] = CONVPOOL_MAX_PADDING;
        break;
      case 11:
        width = INT64_MAX;
        break;
      case 12:
        batch = INT64_MAX;
        break;
      default:
        height = width = (int64_t)1 << 31;
        break;
    }
    if (!use_layer) { /* convpool_op_create takes none of the layer's fields */
      convpool_layer_init(&layer, dtype, c_out, c_in, k, pool);
    } else {
      layer.c_out = c_out, layer.k = k, layer.pool = pool;
    }
  }
  if (use_layer) { /* after the extreme value, which may replace a field */
    for (int s = 0; s < 4; s++)
      if (pool >= 1 && layer.pool_padding[s] >= pool) /* ONNX's bound: P - 1 */
        layer_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
    if (layer.pool_stride < 0 || layer.pool_stride > CONVPOOL_MAX_POOL)
      layer_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
    /* the conv fields: stride and dilation 1..2^24, groups dividing both channel
       counts, has_residual 0 or 1, a dilated extent that fits int64 */
    const int64_t max_conv = (int64_t)1 << 24;
    if (layer.stride < 1 || layer.stride > max_conv || layer.dilation < 1 ||
        layer.dilation > max_conv || layer.groups < 1 || c_in % layer.groups != 0 ||
        c_out % layer.groups != 0 || (layer.has_residual != 0 && layer.has_residual != 1) ||
        (k >= 1 && (wide)layer.dilation * (k - 1) + 1 > INT64_MAX))
      layer_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  }
  const uint8_t *values = data + (in.i < size ? in.i : size);
  const size_t n_values = size - (in.i < size ? in.i : size);
  const int has_bias = flags & 1;

  /* ---- the oracle: which rules do the arguments break? ---- */
  status_set create_causes = 0, run_causes = 0;
  const int valid_dtype =
      dtype == CONVPOOL_FLOAT32 || dtype == CONVPOOL_FLOAT16 || dtype == CONVPOOL_BFLOAT16;
  /* the layer's own fields (what convpool_layer_output_shape checks besides the shape) */
  status_set field_causes = layer_causes;
  if (!valid_dtype) field_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (c_out < 1 || c_in < 1 || k < 1 || pool < 1 || pool > CONVPOOL_MAX_POOL)
    field_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  create_causes |= field_causes;
  if (threads < 0 || threads > 1024 || rows_per_item < 0 || expect_bad)
    create_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  const size_t es = valid_dtype ? convpool_dtype_size(dtype) : 4;
  /* weights [c_out, c_in / groups, k, k] (c_in where groups is refused anyway) */
  const int64_t group_in =
      layer.groups >= 1 && c_in >= 1 && c_in % layer.groups == 0 ? c_in / layer.groups : c_in;
  if (c_out >= 1 && group_in >= 1 && k >= 1 && !bytes_fit(c_out, group_in, k, k, es))
    create_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  const int wino = algo == CONVPOOL_ALGO_WINOGRAD || algo == CONVPOOL_ALGO_WINOGRAD_2X3;
  if (algo != CONVPOOL_ALGO_AUTO && algo != CONVPOOL_ALGO_SHIFT_REDUCE &&
      algo != CONVPOOL_ALGO_IM2COL && !wino && algo != CONVPOOL_ALGO_DIRECT)
    create_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  /* Winograd (both tile sizes) computes 3x3 filters of stride, dilation and groups 1 only */
  if (wino && (k != 3 || layer.stride != 1 || layer.dilation != 1 || layer.groups != 1))
    create_causes |= BIT(CONVPOOL_UNSUPPORTED);
  /* shift-reduce reads consecutive columns: no dilation (one tap has none to apply) */
  if (algo == CONVPOOL_ALGO_SHIFT_REDUCE && k != 1 && layer.dilation != 1)
    create_causes |= BIT(CONVPOOL_UNSUPPORTED);
  int64_t ph = 0, pw = 0, oh = 0, ow = 0;
  if (k >= 1 && pool >= 1 && layer_causes == 0) {
    cp_reference_shape(&layer, height, width, &ph, &pw);
    cp_reference_conv_shape(&layer, height, width, &oh, &ow);
  }
  const int sizes_ok = batch >= 1 && height >= 1 && width >= 1 && k >= 1 && pool >= 1 &&
                       c_in >= 1 && c_out >= 1 && layer_causes == 0;
  const wide extent = sizes_ok ? (wide)layer.dilation * (k - 1) + 1 : 0;
  /* the shape's rules, and the residual's byte count (checked when the layer has one,
     and always by convpool_layer_conv_shape) */
  const int shape_rules = sizes_ok && bytes_fit(batch, c_in, height, width, es) &&
                          (wide)height + layer.padding[0] + layer.padding[2] >= extent &&
                          (wide)width + layer.padding[1] + layer.padding[3] >= extent && ph >= 1 &&
                          pw >= 1 && bytes_fit(batch, c_out, ph, pw, es);
  const int residual_fits = shape_rules && bytes_fit(batch, c_out, oh, ow, es);
  const int shape_ok = shape_rules && (layer.has_residual != 1 || residual_fits);
  if (expect_run) { /* the run's shape expected: all three > 0 or all 0 (any), else refused */
    const int none = batch == 0 && height == 0 && width == 0;
    const int all = batch > 0 && height > 0 && width > 0;
    if (!none && !all) create_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
    /* auto plans that shape at create (settling its choice): the run's refusals */
    if (all && algo == CONVPOOL_ALGO_AUTO && !(shape_ok && rows_per_item <= ph))
      create_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  }
  rel_case c = {
      valid_dtype ? dtype : CONVPOOL_FLOAT32, batch, c_in, c_out, height, width, k, pool, has_bias};
  size_t need = 0, src_bytes = 0, res_bytes = 0;
  if (!shape_ok) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (shape_ok && rows_per_item > ph) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  const int tensors_ok = shape_ok && c_in >= 1 && c_out >= 1;
  if (tensors_ok) {
    need = (size_t)(batch * c_out * ph * pw) * es;
    src_bytes = rel_x_count(&c) * es;
    res_bytes = (size_t)(batch * c_out * oh * ow) * es;
    FUZZ_ASSERT(src_bytes <= X_CAP * 4 && need <= Y_CAP * 4 && res_bytes <= R_CAP * 4,
                "decoding: a valid shape past the buffers (%zu, %zu, %zu bytes)", src_bytes, need,
                res_bytes);
  }

  /* ---- tensors ---- */
  unsigned char *x = arena;
  size_t cursor = 0;
  memset(arena, PATTERN, X_CAP * 4 + Y_CAP * 4);
  const int wide_values = (flags & 128) != 0;
  if (tensors_ok) fill_from(x, rel_x_count(&c), c.dtype, values, n_values, &cursor, wide_values);
  if (c_in >= 1 && c_out >= 1 && c_out <= 12 && k >= 1 && k <= 5) /* the extremes are refused */
    fill_from(w, (size_t)(c_out * group_in * k * k), c.dtype, values, n_values, &cursor,
              wide_values);
  if (c_out >= 1 && c_out <= 12)
    fill_from(bias, (size_t)c_out, c.dtype, values, n_values, &cursor, wide_values);
  memcpy(x_copy, x, X_CAP * 4);
  unsigned char *dst = arena + X_CAP * 4; /* right after the largest src */
  size_t dst_bytes = Y_CAP * 4;
  if (flags & 4) dst = arena + 4 * (size_t)(b_amount % (X_CAP / 4)); /* somewhere over src */
  if (flags & 2) dst_bytes = need > 1 + b_amount % 8 ? need - 1 - b_amount % 8 : 0;
  if (tensors_ok && dst_bytes < need) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (tensors_ok && ranges_overlap(x, src_bytes, dst, need))
    run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);

  /* ---- the residual ---- */
  const unsigned char *residual = NULL;
  if (res_use == RES_OWN || res_use == RES_UNWANTED || res_use == RES_BAD_FLAG ||
      res_use == RES_MISALIGNED) {
    residual = res_buf + (res_use == RES_MISALIGNED);
    if (res_bytes > 0)
      fill_from(res_buf, res_bytes / es, c.dtype, values, n_values, &cursor, wide_values);
    memcpy(res_copy, res_buf, R_CAP * 4 + 8);
  } else if (res_use == RES_OVER_DST) {
    residual = dst + (need >= es ? es * (b_res_offset % (need / es)) : 0);
  } else if (res_use == RES_SRC) {
    residual = x;
  }
  const int residual_api = res_use != RES_NONE; /* the calls that take a residual */
  if (layer.has_residual == 1 && residual == NULL) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (layer.has_residual == 0 && residual != NULL) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (res_use == RES_MISALIGNED) run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  if (tensors_ok && layer.has_residual == 1 && residual != NULL &&
      ranges_overlap(residual, res_bytes, dst, need))
    run_causes |= BIT(CONVPOOL_INVALID_ARGUMENT);
  const size_t dst_room = (size_t)(arena + X_CAP * 4 + Y_CAP * 4 - dst);
  unsigned char *dst_copy = malloc(dst_room);
  if (dst_copy == NULL) abort();
  memcpy(dst_copy, dst, dst_room);

  convpool_allocator iface = rel_alloc_interface(&counting);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = threads;
  o.rows_per_item = rows_per_item;
  o.algo = algo;
  o.allocator = &iface;
  if (expect_run) o.expected_batch = batch, o.expected_height = height, o.expected_width = width;
  if (expect_bad) o.expected_batch = 1, o.expected_height = -1, o.expected_width = 1;
  const void *bias_arg = has_bias ? bias : NULL;
  convpool_status st;
  unsigned char *first = NULL; /* the operator API's output, to compare with the one-shot's */

  /* ---- the layer's shapes, without an operator ---- */
  {
    int64_t shape[4] = {-7, -7, -7, -7};
    size_t bytes = 0;
    st = convpool_layer_output_shape(&layer, batch, height, width, shape, &bytes);
    judge("layer_output_shape", st, field_causes | (shape_ok ? 0 : BIT(CONVPOOL_INVALID_ARGUMENT)),
          0);
    if (st == CONVPOOL_SUCCESS)
      FUZZ_ASSERT(shape[0] == batch && shape[1] == c_out && shape[2] == ph && shape[3] == pw &&
                      bytes == need,
                  "layer_output_shape: [%lld %lld %lld %lld] %zu bytes", (long long)shape[0],
                  (long long)shape[1], (long long)shape[2], (long long)shape[3], bytes);
    st = convpool_layer_conv_shape(&layer, batch, height, width, shape, &bytes);
    judge("layer_conv_shape", st,
          field_causes | (residual_fits ? 0 : BIT(CONVPOOL_INVALID_ARGUMENT)), 0);
    if (st == CONVPOOL_SUCCESS)
      FUZZ_ASSERT(shape[0] == batch && shape[1] == c_out && shape[2] == oh && shape[3] == ow &&
                      bytes == (size_t)(batch * c_out * oh * ow) * es,
                  "layer_conv_shape: [%lld %lld %lld %lld] %zu bytes", (long long)shape[0],
                  (long long)shape[1], (long long)shape[2], (long long)shape[3], bytes);
  }

  /* ---- the operator API ---- */
  counting.refused = 0;
  rel_alloc_arm(&counting, fail_at);
  convpool_op *op = NULL;
  st = use_layer ? convpool_op_create_layer(&layer, w, bias_arg, &o, &op)
                 : convpool_op_create(dtype, w, bias_arg, c_out, c_in, k, pool, &o, &op);
  judge("create", st, create_causes, counting.refused);
  FUZZ_ASSERT((st == CONVPOOL_SUCCESS) == (op != NULL), "create: op_out inconsistent with status");
  if (op != NULL) {
    int64_t shape[4] = {-7, -7, -7, -7};
    size_t bytes = 0;
    st = convpool_op_output_shape(op, batch, height, width, shape, &bytes);
    /* Shape queries plan the run, so a forced rows_per_item larger than the
       pooled rows is refused here too. */
    const status_set plan_causes =
        (shape_ok && rows_per_item <= ph) ? 0 : BIT(CONVPOOL_INVALID_ARGUMENT);
    judge("output_shape", st, plan_causes, 0);
    if (st == CONVPOOL_SUCCESS)
      FUZZ_ASSERT(shape[0] == batch && shape[1] == c_out && shape[2] == ph && shape[3] == pw &&
                      bytes == need,
                  "output_shape: [%lld %lld %lld %lld] %zu bytes", (long long)shape[0],
                  (long long)shape[1], (long long)shape[2], (long long)shape[3], bytes);
    convpool_plan_info info;
    st = convpool_op_plan(op, batch, height, width, &info);
    judge("plan", st, plan_causes, 0);
    if (st == CONVPOOL_SUCCESS)
      FUZZ_ASSERT(info.items >= 1 && info.threads >= 1 && info.rows_per_item >= 1 &&
                      info.rows_per_item <= ph &&
                      (rows_per_item == 0 || info.rows_per_item == rows_per_item ||
                       /* Winograd (named, or auto's choice for k = 3) rounds up to whole
                          tiles of 4 (or 2) conv rows */
                       (k == 3 && (wino || algo == CONVPOOL_ALGO_AUTO) &&
                        info.rows_per_item > rows_per_item)),
                  "plan: items %lld threads %d rows_per_item %lld", (long long)info.items,
                  info.threads, (long long)info.rows_per_item);
    char text[4096];
    memset(text, PATTERN, sizeof text);
    st = convpool_op_describe(op, batch, height, width, text, capacity);
    judge("describe", st, plan_causes, 0);
    if (st == CONVPOOL_SUCCESS)
      FUZZ_ASSERT(memchr(text, '\0', capacity) != NULL &&
                      (capacity == sizeof text || text[capacity] == (char)PATTERN),
                  "describe: text not terminated within capacity %zu", capacity);

    st = residual_api
             ? convpool_op_run_residual(op, x, batch, height, width, residual, dst, dst_bytes)
             : convpool_op_run(op, x, batch, height, width, dst, dst_bytes);
    judge("run", st, run_causes, counting.refused);
    if (st == CONVPOOL_SUCCESS) {
      char why[400];
      FUZZ_ASSERT(rel_check_residual_output(&layer, batch, height, width, x, w, bias_arg, residual,
                                            dst, why, sizeof why) != 0,
                  "run: %s", why);
      FUZZ_ASSERT(memcmp(dst + need, dst_copy + need, dst_room - need) == 0,
                  "run: bytes past the output were written");
      convpool_run_stats rs;
      FUZZ_ASSERT(convpool_op_last_run_stats(op, &rs) == CONVPOOL_SUCCESS && rs.items >= 1,
                  "last_run_stats after a run");
      first = malloc(need ? need : 1);
      if (first == NULL) abort();
      memcpy(first, dst, need);
    } else {
      FUZZ_ASSERT(memcmp(dst, dst_copy, dst_room) == 0, "run: failed and wrote dst");
    }
    FUZZ_ASSERT(convpool_op_destroy(op) == CONVPOOL_SUCCESS, "destroy: %s", convpool_last_error());
  }
  /* Bytes before dst (src and the rest of its buffer): never written. From dst
     on, the checks above cover every byte. */
  const size_t before_dst =
      dst - arena < (ptrdiff_t)(X_CAP * 4) ? (size_t)(dst - arena) : X_CAP * 4;
  FUZZ_ASSERT(memcmp(arena, x_copy, before_dst) == 0, "src was modified");
  if (residual != NULL && (residual == res_buf || residual == res_buf + 1))
    FUZZ_ASSERT(memcmp(res_buf, res_copy, R_CAP * 4 + 8) == 0, "the residual was modified");
  FUZZ_ASSERT(rel_alloc_live(&counting) == 0, "%ld blocks outstanding after destroy",
              rel_alloc_live(&counting));

  /* ---- the one-shot call ---- */
  if (!(flags & 8)) {
    memcpy(arena, x_copy, X_CAP * 4);
    memcpy(dst, dst_copy, dst_room);
    counting.refused = 0;
    rel_alloc_arm(&counting, fail_at);
    st = residual_api ? convpool_layer_run_residual(&layer, x, batch, height, width, w, bias_arg,
                                                    residual, dst, dst_bytes, &o)
         : use_layer
             ? convpool_layer_run(&layer, x, batch, height, width, w, bias_arg, dst, dst_bytes, &o)
             : convpool_conv2d_maxpool(dtype, x, batch, c_in, height, width, w, c_out, k, bias_arg,
                                       pool, dst, dst_bytes, &o);
    judge("one-shot", st, create_causes | run_causes, counting.refused);
    if (st == CONVPOOL_SUCCESS) {
      char why[400];
      FUZZ_ASSERT(rel_check_residual_output(&layer, batch, height, width, x, w, bias_arg, residual,
                                            dst, why, sizeof why) != 0,
                  "one-shot: %s", why);
      FUZZ_ASSERT(memcmp(dst + need, dst_copy + need, dst_room - need) == 0,
                  "one-shot: bytes past the output were written");
      if (first != NULL)
        FUZZ_ASSERT(memcmp(first, dst, need) == 0, "one-shot and operator outputs differ");
    } else {
      FUZZ_ASSERT(memcmp(dst, dst_copy, dst_room) == 0, "one-shot: failed and wrote dst");
    }
    FUZZ_ASSERT(memcmp(arena, x_copy, before_dst) == 0, "one-shot: src was modified");
    if (residual != NULL && (residual == res_buf || residual == res_buf + 1))
      FUZZ_ASSERT(memcmp(res_buf, res_copy, R_CAP * 4 + 8) == 0,
                  "one-shot: the residual was modified");
    FUZZ_ASSERT(rel_alloc_live(&counting) == 0, "one-shot: %ld blocks outstanding",
                rel_alloc_live(&counting));
  }
  FUZZ_ASSERT(counting.bad_alignment == 0 && counting.bad_free == 0,
              "allocator: %ld bad alignments, %ld bad frees", counting.bad_alignment,
              counting.bad_free);
  free(first);
  free(dst_copy);
  return 0;
}
