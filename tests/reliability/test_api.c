/*
 * The bad-argument paths of every public function. Each refused call must
 * return the documented status, leave a message in convpool_last_error() that
 * names the offending value (the number, name or pointer is looked for in the
 * message), and leave every output -- dst, shape, bytes, plan info, text,
 * *op_out -- exactly as it was (outputs are filled with a pattern first).
 * Boundary calls that must succeed (adjacent but not overlapping buffers,
 * rows_per_item equal to the pooled rows, ...) are checked alongside, so an
 * over-eager check fails the test as well as a missing one.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_util.h"

#define PATTERN 0xA5

static int g_refused; /* bad inputs refused as expected */
static int g_checked; /* calls checked in all */

/* Every output a failed call must leave alone; filled with PATTERN before each call. */
static struct outputs {
  unsigned char dst[8192];
  int64_t shape[4];
  size_t bytes;
  convpool_plan_info plan;
  convpool_info info;
  char text[512];
} g_out;

static void arm_outputs(void) {
  memset(&g_out, PATTERN, sizeof g_out);
}

/*
 * Check a call that must be refused with `want`: status, a non-empty message
 * containing needle1 and needle2 (either may be NULL), untouched outputs.
 */
static void expect_refused(const char *file, int line, const char *what, convpool_status got,
                           convpool_status want, const char *needle1, const char *needle2) {
  const char *msg = convpool_last_error();
  g_checked++;
  int ok = 1;
  if (got != want) {
    rel_fail_at(file, line, "%s: status %s, want %s (message \"%s\")", what,
                convpool_status_string(got), convpool_status_string(want), msg);
    ok = 0;
  }
  if (msg == NULL || msg[0] == '\0') {
    rel_fail_at(file, line, "%s: convpool_last_error() is empty", what);
    ok = 0;
  } else {
    const char *needles[2] = {needle1, needle2};
    for (int i = 0; i < 2; i++)
      if (needles[i] != NULL && strstr(msg, needles[i]) == NULL) {
        rel_fail_at(file, line, "%s: message \"%s\" does not name \"%s\"", what, msg, needles[i]);
        ok = 0;
      }
  }
  if (!rel_all_bytes(&g_out, sizeof g_out, PATTERN)) {
    rel_fail_at(file, line, "%s: an output was written by a refused call", what);
    ok = 0;
  }
  if (ok) g_refused++;
}

/* REFUSED("what", call, status, needle1, needle2): arm outputs, call, check. */
#define REFUSED(what, call, want, n1, n2)                                \
  do {                                                                   \
    arm_outputs();                                                       \
    convpool_status st_ = (call);                                        \
    expect_refused(__FILE__, __LINE__, (what), st_, (want), (n1), (n2)); \
  } while (0)

#define EXPECT_OK(what, call)                                                              \
  do {                                                                                     \
    convpool_status st_ = (call);                                                          \
    g_checked++;                                                                           \
    REL_CHECK(st_ == CONVPOOL_SUCCESS, "%s: %s (%s)", (what), convpool_status_string(st_), \
              convpool_last_error());                                                      \
  } while (0)

/* "%p" of a pointer, as the library prints it. */
static const char *ptr_text(const void *p, char *buf, size_t cap) {
  snprintf(buf, cap, "%p", p);
  return buf;
}

/* ---- fixtures ---- */

#define XN (2 * 3 * 9 * 9) /* src [2, 3, 9, 9] */
#define WN (4 * 3 * 3 * 3) /* weights [4, 3, 3, 3] */
#define YN (2 * 4 * 3 * 3) /* dst [2, 4, 3, 3] with k = 3, pool = 2 */

static float g_x[XN], g_w[WN], g_bias[4];
static float g_x_copy[XN], g_w_copy[WN], g_bias_copy[4];
static const rel_case g_case = {CONVPOOL_FLOAT32, 2, 3, 4, 9, 9, 3, 2, 1};

static void make_fixtures(void) {
  tu_rng rng = {7};
  rel_fill(g_x, XN, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  rel_fill(g_w, WN, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  rel_fill(g_bias, 4, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  memcpy(g_x_copy, g_x, sizeof g_x);
  memcpy(g_w_copy, g_w, sizeof g_w);
  memcpy(g_bias_copy, g_bias, sizeof g_bias);
}

static convpool_op *make_op(convpool_dtype dtype, int64_t c_out, int64_t c_in, int64_t k,
                            int64_t pool, int threads, int rows_per_item, const void *w) {
  convpool_options o;
  convpool_options_init(&o);
  o.threads = threads;
  o.rows_per_item = rows_per_item;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create(dtype, w, NULL, c_out, c_in, k, pool, &o, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS && op != NULL, "fixture op: %s", convpool_last_error());
  return op;
}

/* A correct run of the fixture case: the op still works after refusals. */
static void check_op_still_works(convpool_op *op, const char *when) {
  arm_outputs();
  convpool_status st = convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, YN * sizeof(float));
  g_checked++;
  REL_CHECK(st == CONVPOOL_SUCCESS, "run %s: %s", when, convpool_last_error());
  if (st != CONVPOOL_SUCCESS) return;
  char why[400];
  int ok = rel_check_output(&g_case, g_x, g_w, g_bias, g_out.dst, why, sizeof why);
  REL_CHECK(ok == 1, "run %s: %s", when, why);
}

/* ---- the public functions without a status ---- */

static void test_plain_functions(void) {
  const int statuses[] = {0, 1, 2, 3, 4, 5, 6, -1, 1000};
  for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
    const char *s = convpool_status_string((convpool_status)statuses[i]);
    g_checked++;
    REL_CHECK(s != NULL && s[0] != '\0', "convpool_status_string(%d) is empty", statuses[i]);
  }
  REL_CHECK(strcmp(convpool_status_string((convpool_status)99), "unknown status") == 0,
            "status 99 is not \"unknown status\"");
  /* Every dtype that exists has a size and a name. */
  const convpool_dtype known[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  const size_t sizes[] = {4, 2, 2};
  const char *names[] = {"float32", "float16", "bfloat16"};
  for (int i = 0; i < 3; i++) {
    g_checked += 2;
    REL_CHECK(convpool_dtype_size(known[i]) == sizes[i], "dtype_size(%s)", names[i]);
    REL_CHECK(strcmp(convpool_dtype_name(known[i]), names[i]) == 0, "dtype_name(%d)", i);
  }
  const int dtypes[] = {3, -1, 1000, INT_MIN};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    g_checked += 2;
    REL_CHECK(convpool_dtype_size((convpool_dtype)dtypes[i]) == 0, "dtype_size(%d) != 0",
              dtypes[i]);
    REL_CHECK(strcmp(convpool_dtype_name((convpool_dtype)dtypes[i]), "unknown") == 0,
              "dtype_name(%d) is not \"unknown\"", dtypes[i]);
  }
  convpool_options_init(NULL); /* must not crash */
  const char *e = convpool_last_error();
  REL_CHECK(e != NULL, "convpool_last_error() is NULL");
}

/* ---- name queries, conversions, the output shape of a layer ---- */

static void test_dtype_names(void) {
  const convpool_dtype known[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  for (int i = 0; i < 3; i++) {
    convpool_dtype d = (convpool_dtype)-1;
    EXPECT_OK("dtype_from_name", convpool_dtype_from_name(convpool_dtype_name(known[i]), &d));
    REL_CHECK(d == known[i], "dtype_from_name(%s) = %d", convpool_dtype_name(known[i]), (int)d);
  }
  convpool_dtype d = CONVPOOL_FLOAT16;
  const char *bad[] = {"int8", "", "Float32", "float32 ", "unknown"};
  char what[96];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char needle[32];
    snprintf(what, sizeof what, "dtype_from_name('%s')", bad[i]);
    snprintf(needle, sizeof needle, "'%s'", bad[i]);
    REFUSED(what, convpool_dtype_from_name(bad[i], &d), CONVPOOL_INVALID_ARGUMENT, needle,
            "float32, float16, bfloat16");
    REL_CHECK(d == CONVPOOL_FLOAT16, "%s changed the dtype", what);
  }
  REFUSED("dtype_from_name(NULL)", convpool_dtype_from_name(NULL, &d), CONVPOOL_INVALID_ARGUMENT,
          "NULL", NULL);
  REFUSED("dtype_from_name(dtype NULL)", convpool_dtype_from_name("float32", NULL),
          CONVPOOL_INVALID_ARGUMENT, "NULL", NULL);
}

static void test_algo_list(void) {
  convpool_algo algos[64];
  const size_t n = convpool_algo_list(algos, 64);
  g_checked++;
  REL_CHECK(n >= 2 && n <= 64, "convpool_algo_list gives %zu algorithms", n);
  REL_CHECK(convpool_algo_list(NULL, 0) == n, "convpool_algo_list(NULL, 0) != %zu", n);
  REL_CHECK(n > 0 && algos[0] == CONVPOOL_ALGO_AUTO, "the list does not start with auto");
  for (size_t i = 0; i < n && i < 64; i++) {
    const char *name = convpool_algo_name(algos[i]);
    REL_CHECK(name != NULL, "algorithm %d of the list has no name", (int)algos[i]);
    if (name == NULL) continue;
    convpool_algo back = (convpool_algo)-1;
    EXPECT_OK("algo_from_name", convpool_algo_from_name(name, &back));
    REL_CHECK(back == algos[i], "algo_from_name(%s) = %d, want %d", name, (int)back, (int)algos[i]);
    for (size_t j = 0; j < i; j++)
      REL_CHECK(algos[j] != algos[i], "algorithm %d is listed twice", (int)algos[i]);
  }
  /* A short array gets the first entries only. */
  convpool_algo two[3] = {(convpool_algo)-1, (convpool_algo)-1, (convpool_algo)-1};
  REL_CHECK(convpool_algo_list(two, 2) == n && two[0] == algos[0] && two[1] == algos[1] &&
                two[2] == (convpool_algo)-1,
            "convpool_algo_list(capacity 2) wrote past its capacity");
}

static void test_convert(void) {
  /* Against the library's own scalar conversions, on every float16 and
     bfloat16 pattern and on random float32 values with ties and specials. */
  enum { N = 65536 + 64 };
  static float f[N], back[N];
  static uint16_t h[N], b[N], h2[N], b2[N];
  tu_rng rng = {7};
  for (size_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  const float special[] = {0.0f,     -0.0f,    INFINITY, -INFINITY, NAN,         65504.0f,
                           65519.0f, 65520.0f, 1e-8f,    -3e-8f,    1.00048828f, 1.00390625f,
                           3.4e38f,  -3.4e38f, 1e-40f,   5.96e-8f};
  for (size_t i = 0; i < N; i++)
    f[i] = i < 16 ? special[i] : (tu_uniform(&rng) - 0.5f) * ldexpf(1.0f, (int)(i % 80) - 40);
  EXPECT_OK("convert(float32 -> float16)",
            convpool_convert(f, CONVPOOL_FLOAT32, h2, CONVPOOL_FLOAT16, N));
  EXPECT_OK("convert(float32 -> bfloat16)",
            convpool_convert(f, CONVPOOL_FLOAT32, b2, CONVPOOL_BFLOAT16, N));
  int bad_h = 0, bad_b = 0;
  for (size_t i = 0; i < N; i++) {
    bad_h += h2[i] != cp_float_to_half(f[i]);
    bad_b += b2[i] != cp_float_to_bf16(f[i]);
  }
  REL_CHECK(bad_h == 0 && bad_b == 0, "convert from float32: %d float16, %d bfloat16 differ", bad_h,
            bad_b);
  EXPECT_OK("convert(float16 -> float32)",
            convpool_convert(h, CONVPOOL_FLOAT16, back, CONVPOOL_FLOAT32, 65536));
  int bad = 0;
  for (size_t i = 0; i < 65536; i++) { /* a signalling NaN may come out quiet (F16C) */
    const float want = cp_half_to_float(h[i]);
    bad += isnan(want) ? !isnan(back[i]) : memcmp(&back[i], &want, sizeof want) != 0;
  }
  REL_CHECK(bad == 0, "convert(float16 -> float32): %d of 65536 patterns differ", bad);
  EXPECT_OK("convert(float16 -> bfloat16)",
            convpool_convert(h, CONVPOOL_FLOAT16, b, CONVPOOL_BFLOAT16, 65536));
  bad = 0;
  for (size_t i = 0; i < 65536; i++) bad += b[i] != cp_float_to_bf16(cp_half_to_float(h[i]));
  REL_CHECK(bad == 0, "convert(float16 -> bfloat16): %d of 65536 patterns differ", bad);
  EXPECT_OK("convert(bfloat16 -> float16)",
            convpool_convert(h, CONVPOOL_BFLOAT16, b, CONVPOOL_FLOAT16, 65536));
  bad = 0;
  for (size_t i = 0; i < 65536; i++) bad += b[i] != cp_float_to_half(cp_bf16_to_float(h[i]));
  REL_CHECK(bad == 0, "convert(bfloat16 -> float16): %d of 65536 patterns differ", bad);
  EXPECT_OK("convert(float32 -> float32)",
            convpool_convert(f, CONVPOOL_FLOAT32, back, CONVPOOL_FLOAT32, N));
  REL_CHECK(memcmp(f, back, sizeof f) == 0, "convert(float32 -> float32) is not a copy");
  EXPECT_OK("convert(count 0, NULL)",
            convpool_convert(NULL, CONVPOOL_FLOAT32, NULL, CONVPOOL_FLOAT16, 0));

  const convpool_status BAD = CONVPOOL_INVALID_ARGUMENT;
  memcpy(h2, h, sizeof h2);
  REFUSED("convert(src_dtype 7)", convpool_convert(f, (convpool_dtype)7, h2, CONVPOOL_FLOAT16, 4),
          BAD, "src_dtype = 7", NULL);
  REFUSED("convert(dst_dtype -1)", convpool_convert(f, CONVPOOL_FLOAT32, h2, (convpool_dtype)-1, 4),
          BAD, "dst_dtype = -1", NULL);
  REFUSED("convert(src NULL)", convpool_convert(NULL, CONVPOOL_FLOAT32, h2, CONVPOOL_FLOAT16, 4),
          BAD, "src is NULL", NULL);
  REFUSED("convert(dst NULL)", convpool_convert(f, CONVPOOL_FLOAT32, NULL, CONVPOOL_FLOAT16, 4),
          BAD, "dst is NULL", NULL);
  REFUSED("convert(count overflows)",
          convpool_convert(f, CONVPOOL_FLOAT32, h2, CONVPOOL_FLOAT16, SIZE_MAX / 2), BAD,
          "overflows", NULL);
  REFUSED("convert(src + 1 byte)",
          convpool_convert((const char *)f + 1, CONVPOOL_FLOAT32, h2, CONVPOOL_FLOAT16, 4), BAD,
          "src", "not aligned");
  REFUSED("convert(dst + 1 byte)",
          convpool_convert(f, CONVPOOL_FLOAT32, (char *)h2 + 1, CONVPOOL_FLOAT16, 4), BAD, "dst",
          "not aligned");
  REFUSED("convert(in place, widening)",
          convpool_convert(h2, CONVPOOL_FLOAT16, h2, CONVPOOL_FLOAT32, 4), BAD, "overlaps", NULL);
  REL_CHECK(memcmp(h2, h, sizeof h2) == 0, "a refused conversion wrote into dst");
  /* Adjacent buffers are fine. */
  EXPECT_OK("convert(adjacent)",
            convpool_convert(h2, CONVPOOL_FLOAT16, h2 + 4, CONVPOOL_FLOAT16, 4));
}

static void test_layer_output_shape(void) {
  /* The shape and bytes of an operator's output_shape, without weights. */
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT16, 5, 3, 3, 3);
  l.padding[0] = 1, l.padding[1] = 0, l.padding[2] = 2, l.padding[3] = 1;
  l.pool_stride = 2, l.pool_padding[0] = 1, l.pool_padding[3] = 1, l.ceil_mode = 1;
  static uint16_t w[5 * 3 * 3 * 3];
  convpool_op *op = NULL;
  EXPECT_OK("create_layer", convpool_op_create_layer(&l, w, NULL, NULL, &op));
  const int64_t sizes[][3] = {{1, 2, 3}, {2, 9, 9}, {3, 14, 5}, {1, 31, 40}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int64_t want[4] = {0}, got[4] = {0};
    size_t want_bytes = 0, got_bytes = 0;
    EXPECT_OK("output_shape", convpool_op_output_shape(op, sizes[i][0], sizes[i][1], sizes[i][2],
                                                       want, &want_bytes));
    EXPECT_OK("layer_output_shape", convpool_layer_output_shape(&l, sizes[i][0], sizes[i][1],
                                                                sizes[i][2], got, &got_bytes));
    REL_CHECK(memcmp(want, got, sizeof want) == 0 && want_bytes == got_bytes,
              "layer_output_shape on %lldx%lld: [%lld, %lld, %lld, %lld] %zu bytes, the "
              "operator's [%lld, %lld, %lld, %lld] %zu bytes",
              (long long)sizes[i][1], (long long)sizes[i][2], (long long)got[0], (long long)got[1],
              (long long)got[2], (long long)got[3], got_bytes, (long long)want[0],
              (long long)want[1], (long long)want[2], (long long)want[3], want_bytes);
  }
  convpool_op_destroy(op);
  int64_t shape[4];
  EXPECT_OK("layer_output_shape(bytes NULL)",
            convpool_layer_output_shape(&l, 2, 9, 9, shape, NULL));
}

/* ---- get_info, set_default_allocator ---- */

static void *never_alloc(void *context, size_t size, size_t alignment) {
  (void)context, (void)size, (void)alignment;
  return NULL;
}
static void never_free(void *context, void *p) {
  (void)context, (void)p;
}

static void test_global_functions(void) {
  REFUSED("get_info(NULL)", convpool_get_info(NULL), CONVPOOL_INVALID_ARGUMENT, "info", NULL);
  const convpool_allocator no_alloc = {NULL, never_free, NULL};
  const convpool_allocator no_free = {never_alloc, NULL, NULL};
  REFUSED("set_default_allocator(alloc NULL)", convpool_set_default_allocator(&no_alloc),
          CONVPOOL_INVALID_ARGUMENT, "alloc", NULL);
  REFUSED("set_default_allocator(free NULL)", convpool_set_default_allocator(&no_free),
          CONVPOOL_INVALID_ARGUMENT, "free", NULL);
  /* The refused allocators must not have been installed: a create still works. */
  convpool_op *op = make_op(CONVPOOL_FLOAT32, 4, 3, 3, 2, 1, 0, g_w);
  convpool_op_destroy(op);
  EXPECT_OK("set_default_allocator(NULL)", convpool_set_default_allocator(NULL));
  EXPECT_OK("get_info", convpool_get_info(&g_out.info));
}

/* ---- convpool_op_create ---- */

static void test_create(void) {
  convpool_options o;
  convpool_op *op = NULL;
  const void *W = g_w;
  const convpool_dtype F32 = CONVPOOL_FLOAT32;

/* CREATE(what, dtype, weights, c_out, c_in, k, pool, options, want, n1, n2):
   also checks that *op_out is set to NULL on failure. */
#define CREATE(what, dt, w, co, ci, kk, pp, opts, want, n1, n2)                              \
  do {                                                                                       \
    op = (convpool_op *)(uintptr_t)0x1234;                                                   \
    REFUSED(what, convpool_op_create(dt, w, NULL, co, ci, kk, pp, opts, &op), want, n1, n2); \
    REL_CHECK(op == NULL, "%s: *op_out is not NULL after a failure", what);                  \
  } while (0)

  REFUSED("create(op_out NULL)", convpool_op_create(F32, W, NULL, 4, 3, 3, 2, NULL, NULL),
          CONVPOOL_INVALID_ARGUMENT, "op_out", NULL);
  CREATE("create(dtype 3)", (convpool_dtype)3, W, 4, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT,
         "dtype = 3", NULL);
  CREATE("create(dtype 7)", (convpool_dtype)7, W, 4, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT,
         "dtype = 7", NULL);
  CREATE("create(dtype -1)", (convpool_dtype)-1, W, 4, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT,
         "dtype = -1", NULL);
  CREATE("create(weights NULL)", F32, NULL, 4, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "weights",
         NULL);
  CREATE("create(c_out 0)", F32, W, 0, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "c_out = 0", NULL);
  CREATE("create(c_out -3)", F32, W, -3, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "c_out = -3",
         NULL);
  CREATE("create(c_out INT64_MIN)", F32, W, INT64_MIN, 3, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT,
         "-9223372036854775808", NULL);
  CREATE("create(c_in 0)", F32, W, 4, 0, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "c_in = 0", NULL);
  CREATE("create(c_in -1)", F32, W, 4, -1, 3, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "c_in = -1",
         NULL);
  CREATE("create(k 0)", F32, W, 4, 3, 0, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "k = 0", NULL);
  CREATE("create(k -2)", F32, W, 4, 3, -2, 2, NULL, CONVPOOL_INVALID_ARGUMENT, "k = -2", NULL);
  CREATE("create(pool 0)", F32, W, 4, 3, 3, 0, NULL, CONVPOOL_INVALID_ARGUMENT, "pool = 0", NULL);
  CREATE("create(pool -1)", F32, W, 4, 3, 3, -1, NULL, CONVPOOL_INVALID_ARGUMENT, "pool = -1",
         NULL);

  /* Byte counts that overflow size_t: c_out*c_in, k*k, and c_out*c_in*k*k*4. */
  CREATE("create(c_out 2^30, c_in 2^40)", F32, W, (int64_t)1 << 30, (int64_t)1 << 40, 1, 1, NULL,
         CONVPOOL_INVALID_ARGUMENT, "1099511627776", "1073741824");
  CREATE("create(k 2^32)", F32, W, 1, 1, (int64_t)1 << 32, 1, NULL, CONVPOOL_INVALID_ARGUMENT,
         "4294967296", NULL);
  CREATE("create(c_out 2^62, c_in 4)", F32, W, (int64_t)1 << 62, 4, 1, 1, NULL,
         CONVPOOL_INVALID_ARGUMENT, "4611686018427387904", NULL);
  CREATE("create(c_out INT64_MAX)", F32, W, INT64_MAX, 1, 1, 1, NULL, CONVPOOL_INVALID_ARGUMENT,
         "9223372036854775807", NULL);
  CREATE("create(float16 c_in 2^31, k 2^16)", CONVPOOL_FLOAT16, W, 1, (int64_t)1 << 31,
         (int64_t)1 << 16, 1, NULL, CONVPOOL_INVALID_ARGUMENT, "2147483648", "65536");

  /* c_in = 2^40 alone does not overflow (4 TiB of weights): the packed weights
     cannot be allocated. A capped allocator makes that deterministic. */
  {
    rel_alloc counting;
    rel_alloc_init(&counting);
    counting.max_size = (size_t)1 << 30;
    convpool_allocator a = rel_alloc_interface(&counting);
    convpool_options_init(&o);
    o.allocator = &a;
    CREATE("create(c_in 2^40, 4 TiB of weights)", F32, W, 1, (int64_t)1 << 40, 1, 1, &o,
           CONVPOOL_OUT_OF_MEMORY, "packed weights", "bytes");
    /* The message names the byte count: at least 2^40 * 4. */
    const char *m = convpool_last_error();
    const char *digits = strpbrk(m, "0123456789");
    unsigned long long named = digits ? strtoull(digits, NULL, 10) : 0;
    REL_CHECK(named >= (1ull << 42), "OOM message \"%s\" does not name the byte count", m);
    REL_CHECK(counting.live == 0 && counting.bad_free == 0,
              "c_in 2^40: %ld blocks outstanding, %ld bad frees", counting.live, counting.bad_free);
  }

  /* Options. */
  convpool_options_init(&o);
  o.threads = -1;
  CREATE("create(threads -1)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT, "threads = -1",
         NULL);
  o.threads = 1025;
  CREATE("create(threads 1025)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "threads = 1025", NULL);
  o.threads = INT_MIN;
  CREATE("create(threads INT_MIN)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "-2147483648", NULL);
  o.threads = INT_MAX;
  CREATE("create(threads INT_MAX)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT, "2147483647",
         NULL);
  convpool_options_init(&o);
  o.rows_per_item = -1;
  CREATE("create(rows_per_item -1)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "rows_per_item = -1", NULL);
  convpool_options_init(&o);
  o.algo = (convpool_algo)1000;
  CREATE("create(algo 1000)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT, "algo = 1000",
         NULL);
  o.algo = (convpool_algo)-1;
  CREATE("create(algo -1)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT, "algo = -1", NULL);
  convpool_options_init(&o);
  o.expected_height = -2;
  CREATE("create(expected_height -2)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "expected_height = -2", NULL);
  convpool_options_init(&o);
  o.expected_batch = 1, o.expected_height = 9;
  CREATE("create(expected width missing)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "expected_width = 0", "all three");
  o.expected_width = 2; /* a 3x3 filter on 9x2: no conv output */
  CREATE("create(expected shape too narrow)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "expected shape [1, 3, 9, 2]", NULL);
  convpool_options_init(&o);
  const convpool_allocator half_a = {never_alloc, NULL, NULL};
  const convpool_allocator half_b = {NULL, never_free, NULL};
  o.allocator = &half_a;
  CREATE("create(allocator free NULL)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "allocator", NULL);
  o.allocator = &half_b;
  CREATE("create(allocator alloc NULL)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_INVALID_ARGUMENT,
         "allocator", NULL);
  o.allocator = NULL;
  /* An allocator that always fails: out of memory, named. */
  const convpool_allocator empty = {never_alloc, never_free, NULL};
  o.allocator = &empty;
  CREATE("create(allocator always NULL)", F32, W, 4, 3, 3, 2, &o, CONVPOOL_OUT_OF_MEMORY,
         "allocate", NULL);

  /* Boundaries that must be accepted: threads 0 and 1, every algo that exists. */
  const int threads_ok[] = {0, 1};
  const convpool_algo algos_ok[] = {CONVPOOL_ALGO_AUTO, CONVPOOL_ALGO_SHIFT_REDUCE,
                                    CONVPOOL_ALGO_IM2COL, CONVPOOL_ALGO_DIRECT};
  for (int t = 0; t < 2; t++)
    for (int a = 0; a < 4; a++) {
      convpool_options_init(&o);
      o.threads = threads_ok[t];
      o.algo = algos_ok[a];
      op = NULL;
      EXPECT_OK("create(valid options)", convpool_op_create(F32, W, g_bias, 4, 3, 3, 2, &o, &op));
      if (op != NULL) {
        check_op_still_works(op, "with valid options");
        convpool_op_destroy(op);
      }
    }
#undef CREATE
}

/* ---- run, output_shape, plan, describe on bad shapes ---- */

typedef struct bad_shape {
  const char *what;
  int which_op; /* 0: the fixture op (c_in 3, c_out 4, k 3, pool 2); 1: c_in 1, c_out 16, k 1 */
  int64_t batch, height, width;
  const char *n1, *n2;
} bad_shape;

static const bad_shape g_bad_shapes[] = {
    {"batch 0", 0, 0, 9, 9, "batch = 0", NULL},
    {"batch -1", 0, -1, 9, 9, "batch = -1", NULL},
    {"batch INT64_MIN", 0, INT64_MIN, 9, 9, "-9223372036854775808", NULL},
    {"height 0", 0, 1, 0, 9, "height = 0", NULL},
    {"height -5", 0, 1, -5, 9, "height = -5", NULL},
    {"width 0", 0, 1, 9, 0, "width = 0", NULL},
    {"width -7", 0, 1, 9, -7, "width = -7", NULL},
    {"height < k", 0, 1, 2, 9, "2x9", "k = 3"},
    {"width < k", 0, 1, 9, 2, "9x2", "k = 3"},
    {"pool > conv rows", 0, 1, 3, 9, "pool = 2", "1x7"},
    {"pool > conv cols", 0, 1, 9, 3, "pool = 2", "7x1"},
    {"height*width overflows", 0, 1, (int64_t)1 << 31, (int64_t)1 << 31, "2147483648", NULL},
    {"height INT64_MAX", 0, 1, INT64_MAX, 4, "9223372036854775807", NULL},
    /* 48038396025285291 * 3 * 4 * 4 * 4 bytes = 2^63 + 64: fits size_t, exceeds PTRDIFF_MAX */
    {"src bytes > PTRDIFF_MAX", 0, 48038396025285291LL, 4, 4, "48038396025285291", NULL},
    /* src 2^59 * 4 bytes fits; dst 2^59 * 16 * 4 bytes overflows */
    {"dst bytes overflow", 1, (int64_t)1 << 59, 1, 1, "576460752303423488", "dst"},
};

static void test_bad_shapes(convpool_op *ops[2]) {
  char what[160];
  for (size_t i = 0; i < sizeof g_bad_shapes / sizeof g_bad_shapes[0]; i++) {
    const bad_shape *b = &g_bad_shapes[i];
    convpool_op *op = ops[b->which_op];
    snprintf(what, sizeof what, "run(%s)", b->what);
    REFUSED(what,
            convpool_op_run(op, g_x, b->batch, b->height, b->width, g_out.dst, sizeof g_out.dst),
            CONVPOOL_INVALID_ARGUMENT, b->n1, b->n2);
    snprintf(what, sizeof what, "output_shape(%s)", b->what);
    REFUSED(what,
            convpool_op_output_shape(op, b->batch, b->height, b->width, g_out.shape, &g_out.bytes),
            CONVPOOL_INVALID_ARGUMENT, b->n1, b->n2);
    /* The same layer without an operator. */
    convpool_layer l;
    if (b->which_op == 0)
      convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
    else
      convpool_layer_init(&l, CONVPOOL_FLOAT32, 16, 1, 1, 1);
    snprintf(what, sizeof what, "layer_output_shape(%s)", b->what);
    REFUSED(
        what,
        convpool_layer_output_shape(&l, b->batch, b->height, b->width, g_out.shape, &g_out.bytes),
        CONVPOOL_INVALID_ARGUMENT, b->n1, b->n2);
    snprintf(what, sizeof what, "plan(%s)", b->what);
    REFUSED(what, convpool_op_plan(op, b->batch, b->height, b->width, &g_out.plan),
            CONVPOOL_INVALID_ARGUMENT, b->n1, b->n2);
    snprintf(what, sizeof what, "describe(%s)", b->what);
    REFUSED(what,
            convpool_op_describe(op, b->batch, b->height, b->width, g_out.text, sizeof g_out.text),
            CONVPOOL_INVALID_ARGUMENT, b->n1, b->n2);
  }
}

/* ---- run: pointers, dst_bytes, overlap, rows_per_item ---- */

static void test_run(convpool_op *op) {
  const size_t need = YN * sizeof(float);
  char what[160], p1[32], p2[32];
  REFUSED("run(op NULL)", convpool_op_run(NULL, g_x, 2, 9, 9, g_out.dst, need),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("run(src NULL)", convpool_op_run(op, NULL, 2, 9, 9, g_out.dst, need),
          CONVPOOL_INVALID_ARGUMENT, "src", NULL);
  REFUSED("run(dst NULL)", convpool_op_run(op, g_x, 2, 9, 9, NULL, need), CONVPOOL_INVALID_ARGUMENT,
          "dst", NULL);
  char needed_text[32], small_text[32];
  snprintf(needed_text, sizeof needed_text, "(%zu bytes)", need);
  snprintf(small_text, sizeof small_text, "dst_bytes = %zu", need - 1);
  REFUSED("run(dst_bytes = need - 1)", convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, need - 1),
          CONVPOOL_INVALID_ARGUMENT, small_text, needed_text);
  REFUSED("run(dst_bytes 0)", convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, 0),
          CONVPOOL_INVALID_ARGUMENT, "dst_bytes = 0", needed_text);
  /* The same holds for output_shape, plan and describe pointers. */
  REFUSED("output_shape(shape NULL)", convpool_op_output_shape(op, 2, 9, 9, NULL, &g_out.bytes),
          CONVPOOL_INVALID_ARGUMENT, "shape", NULL);
  REFUSED("plan(info NULL)", convpool_op_plan(op, 2, 9, 9, NULL), CONVPOOL_INVALID_ARGUMENT, "info",
          NULL);
  REFUSED("describe(text NULL)", convpool_op_describe(op, 2, 9, 9, NULL, 100),
          CONVPOOL_INVALID_ARGUMENT, "text", NULL);
  REFUSED("describe(capacity 0)", convpool_op_describe(op, 2, 9, 9, g_out.text, 0),
          CONVPOOL_INVALID_ARGUMENT, "capacity", NULL);

  /* Overlap: one arena [pad | src | pad], dst placed over and next to src. */
  const size_t xb = sizeof g_x;
  unsigned char *arena = malloc(need + xb + need);
  unsigned char *arena_copy = malloc(need + xb + need);
  if (arena == NULL || arena_copy == NULL) {
    REL_CHECK(0, "out of memory in the test");
    free(arena);
    free(arena_copy);
    return;
  }
  memset(arena, PATTERN, need + xb + need);
  unsigned char *src = arena + need;
  memcpy(src, g_x, xb);
  memcpy(arena_copy, arena, need + xb + need);
  struct {
    const char *what;
    unsigned char *dst;
  } overlaps[] = {
      {"dst == src", src},
      {"dst starts inside src", src + xb - sizeof(float)},
      {"dst ends inside src", src - need + sizeof(float)},
      {"dst inside src", src + 8},
  };
  for (size_t i = 0; i < sizeof overlaps / sizeof overlaps[0]; i++) {
    snprintf(what, sizeof what, "run(%s)", overlaps[i].what);
    REFUSED(what, convpool_op_run(op, src, 2, 9, 9, overlaps[i].dst, need),
            CONVPOOL_INVALID_ARGUMENT, ptr_text(overlaps[i].dst, p1, sizeof p1),
            ptr_text(src, p2, sizeof p2));
    REL_CHECK(memcmp(arena, arena_copy, need + xb + need) == 0,
              "%s: src or dst was written by a refused call", what);
  }
  /* Adjacent buffers do not overlap: both must run, and give the right result. */
  unsigned char *adjacent[2] = {src + xb, src - need};
  for (int i = 0; i < 2; i++) {
    g_checked++;
    convpool_status st = convpool_op_run(op, src, 2, 9, 9, adjacent[i], need);
    REL_CHECK(st == CONVPOOL_SUCCESS, "run(dst adjacent to src, %s): %s", i ? "before" : "after",
              convpool_last_error());
    if (st == CONVPOOL_SUCCESS) {
      char why[400];
      REL_CHECK(rel_check_output(&g_case, g_x, g_w, g_bias, adjacent[i], why, sizeof why) == 1,
                "adjacent dst: %s", why);
      REL_CHECK(memcmp(src, g_x, xb) == 0, "adjacent dst: src was modified");
    }
  }
  free(arena);
  free(arena_copy);
}

static void test_rows_per_item(void) {
  /* 9x9, k 3, pool 2: 3 pooled rows. rows_per_item 3 runs; 4 and 1<<30 are refused at run. */
  const int accepted[] = {1, 2, 3};
  for (int i = 0; i < 3; i++) {
    convpool_op *op = make_op(CONVPOOL_FLOAT32, 4, 3, 3, 2, 2, accepted[i], g_w);
    if (op == NULL) continue;
    convpool_status st = convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, sizeof g_out.dst);
    g_checked++;
    REL_CHECK(st == CONVPOOL_SUCCESS, "rows_per_item %d: %s", accepted[i], convpool_last_error());
    convpool_op_destroy(op);
  }
  const struct {
    int rpi;
    const char *n1;
  } refused[] = {{4, "rows_per_item = 4"}, {1 << 30, "rows_per_item = 1073741824"}};
  for (int i = 0; i < 2; i++) {
    convpool_op *op = make_op(CONVPOOL_FLOAT32, 4, 3, 3, 2, 2, refused[i].rpi, g_w);
    if (op == NULL) continue;
    char what[96];
    snprintf(what, sizeof what, "run(rows_per_item %d on 3 pooled rows)", refused[i].rpi);
    REFUSED(what, convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, sizeof g_out.dst),
            CONVPOOL_INVALID_ARGUMENT, refused[i].n1, "3 pooled rows");
    snprintf(what, sizeof what, "plan(rows_per_item %d on 3 pooled rows)", refused[i].rpi);
    REFUSED(what, convpool_op_plan(op, 2, 9, 9, &g_out.plan), CONVPOOL_INVALID_ARGUMENT,
            refused[i].n1, NULL);
    /* The same op is fine on a taller input. */
    int64_t h = 2 * (int64_t)refused[i].rpi + 2;
    if (h < 64) {
      convpool_status st = convpool_op_output_shape(op, 1, h, 9, g_out.shape, NULL);
      g_checked++;
      REL_CHECK(st == CONVPOOL_SUCCESS && g_out.shape[2] == refused[i].rpi,
                "rows_per_item %d on %lld rows: %s", refused[i].rpi, (long long)h,
                convpool_last_error());
    }
    convpool_op_destroy(op);
  }
}

/* ---- run statistics ---- */

static int stats_equal(const convpool_run_stats *a, const convpool_run_stats *b) {
  return a->wall_seconds == b->wall_seconds && a->pack_seconds == b->pack_seconds &&
         a->compute_seconds == b->compute_seconds && a->epilogue_seconds == b->epilogue_seconds &&
         a->items == b->items && a->threads == b->threads;
}

static void test_stats(void) {
  convpool_op *op = make_op(CONVPOOL_FLOAT32, 4, 3, 3, 2, 2, 0, g_w);
  if (op == NULL) return;
  convpool_run_stats s, before;
  REFUSED("last_run_stats(stats NULL)", convpool_op_last_run_stats(op, NULL),
          CONVPOOL_INVALID_ARGUMENT, "stats", NULL);
  memset(&s, PATTERN, sizeof s);
  EXPECT_OK("last_run_stats before a run", convpool_op_last_run_stats(op, &s));
  REL_CHECK(s.items == 0 && s.threads == 0 && s.wall_seconds == 0.0,
            "last_run_stats before the first run is not zero (items %lld)", (long long)s.items);
  EXPECT_OK("run", convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, sizeof g_out.dst));
  EXPECT_OK("last_run_stats after a run", convpool_op_last_run_stats(op, &before));
  REL_CHECK(before.items > 0 && before.threads == 2 && before.wall_seconds >= 0.0,
            "last_run_stats after a run: items %lld threads %d", (long long)before.items,
            before.threads);
  /* A refused run does not change the statistics of the last successful one. */
  REFUSED("run(height 2) for stats", convpool_op_run(op, g_x, 2, 2, 9, g_out.dst, sizeof g_out.dst),
          CONVPOOL_INVALID_ARGUMENT, "2x9", NULL);
  EXPECT_OK("last_run_stats after a refused run", convpool_op_last_run_stats(op, &s));
  REL_CHECK(stats_equal(&s, &before), "a refused run changed last_run_stats");
  convpool_op_destroy(op);
}

/* ---- operators that are not live ---- */

static void test_not_live(void) {
  /* Memory that never held an operator (zeroed, suitably aligned). */
  static union {
    max_align_t align;
    unsigned char bytes[1024];
  } fake;
  memset(&fake, 0, sizeof fake);
  convpool_op *op = (convpool_op *)(void *)&fake;
  char p[32];
  REFUSED("run(never created)", convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, sizeof g_out.dst),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("output_shape(op NULL)", convpool_op_output_shape(NULL, 2, 9, 9, g_out.shape, NULL),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("output_shape(never created)", convpool_op_output_shape(op, 2, 9, 9, g_out.shape, NULL),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("plan(op NULL)", convpool_op_plan(NULL, 2, 9, 9, &g_out.plan), CONVPOOL_INVALID_STATE,
          "op", NULL);
  REFUSED("plan(never created)", convpool_op_plan(op, 2, 9, 9, &g_out.plan), CONVPOOL_INVALID_STATE,
          "op", NULL);
  REFUSED("describe(op NULL)", convpool_op_describe(NULL, 2, 9, 9, g_out.text, sizeof g_out.text),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("describe(never created)",
          convpool_op_describe(op, 2, 9, 9, g_out.text, sizeof g_out.text), CONVPOOL_INVALID_STATE,
          "op", NULL);
  convpool_run_stats stats;
  memset(&stats, PATTERN, sizeof stats);
  REFUSED("last_run_stats(op NULL)", convpool_op_last_run_stats(NULL, &stats),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REFUSED("last_run_stats(never created)", convpool_op_last_run_stats(op, &stats),
          CONVPOOL_INVALID_STATE, "op", NULL);
  REL_CHECK(rel_all_bytes(&stats, sizeof stats, PATTERN),
            "last_run_stats: a refused call wrote stats");
  REFUSED("destroy(never created)", convpool_op_destroy(op), CONVPOOL_INVALID_STATE,
          ptr_text(op, p, sizeof p), NULL);
  REL_CHECK(rel_all_bytes(&fake, sizeof fake, 0), "a call wrote into a non-operator");
  EXPECT_OK("destroy(NULL)", convpool_op_destroy(NULL));
  /* A destroyed operator cannot be probed without touching freed memory, so
     that case is left to the sanitizer builds of the other tests. */
}

/* ---- the one-shot call ---- */

static void test_one_shot(void) {
  const size_t need = YN * sizeof(float);
  const convpool_dtype F32 = CONVPOOL_FLOAT32;
  char what[160], p1[32], p2[32];
  rel_alloc counting;
  rel_alloc_init(&counting);
  convpool_allocator a = rel_alloc_interface(&counting);
  convpool_options o;
  convpool_options_init(&o);
  o.allocator = &a;

/* ONESHOT(what, want, n1, n2, args...): with the counting allocator; no block may remain. */
#define ONESHOT(what, want, n1, n2, ...)                                        \
  do {                                                                          \
    REFUSED(what, convpool_conv2d_maxpool(__VA_ARGS__), want, n1, n2);          \
    REL_CHECK(counting.live == 0 && counting.bad_free == 0,                     \
              "%s: %ld blocks outstanding, %ld bad frees", what, counting.live, \
              counting.bad_free);                                               \
  } while (0)

  ONESHOT("one-shot(dtype -2)", CONVPOOL_INVALID_ARGUMENT, "dtype = -2", NULL, (convpool_dtype)-2,
          g_x, 2, 3, 9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(dtype 5)", CONVPOOL_INVALID_ARGUMENT, "dtype = 5", NULL, (convpool_dtype)5, g_x,
          2, 3, 9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(src NULL)", CONVPOOL_INVALID_ARGUMENT, "src", NULL, F32, NULL, 2, 3, 9, 9, g_w,
          4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(weights NULL)", CONVPOOL_INVALID_ARGUMENT, "weights", NULL, F32, g_x, 2, 3, 9,
          9, NULL, 4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(dst NULL)", CONVPOOL_INVALID_ARGUMENT, "dst", NULL, F32, g_x, 2, 3, 9, 9, g_w,
          4, 3, g_bias, 2, NULL, need, &o);
  ONESHOT("one-shot(batch 0)", CONVPOOL_INVALID_ARGUMENT, "batch = 0", NULL, F32, g_x, 0, 3, 9, 9,
          g_w, 4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(c_in -4)", CONVPOOL_INVALID_ARGUMENT, "c_in = -4", NULL, F32, g_x, 2, -4, 9, 9,
          g_w, 4, 3, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(c_out 0)", CONVPOOL_INVALID_ARGUMENT, "c_out = 0", NULL, F32, g_x, 2, 3, 9, 9,
          g_w, 0, 3, g_bias, 2, g_out.dst, need, &o);
  /* create packs the weights before the run sees the input: they must be 4x3x10x10. */
  static float big_w[4 * 3 * 10 * 10];
  ONESHOT("one-shot(k 10 > 9x9)", CONVPOOL_INVALID_ARGUMENT, "k = 10", "9x9", F32, g_x, 2, 3, 9, 9,
          big_w, 4, 10, g_bias, 2, g_out.dst, need, &o);
  ONESHOT("one-shot(pool 8 > conv 7x7)", CONVPOOL_INVALID_ARGUMENT, "pool = 8", "7x7", F32, g_x, 2,
          3, 9, 9, g_w, 4, 3, g_bias, 8, g_out.dst, need, &o);
  ONESHOT("one-shot(pool 0)", CONVPOOL_INVALID_ARGUMENT, "pool = 0", NULL, F32, g_x, 2, 3, 9, 9,
          g_w, 4, 3, g_bias, 0, g_out.dst, need, &o);
  char small_text[32];
  snprintf(small_text, sizeof small_text, "dst_bytes = %zu", need - 4);
  ONESHOT("one-shot(dst_bytes too small)", CONVPOOL_INVALID_ARGUMENT, small_text, NULL, F32, g_x, 2,
          3, 9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need - 4, &o);
  ONESHOT("one-shot(c_out 2^30 x c_in 2^40)", CONVPOOL_INVALID_ARGUMENT, "1099511627776", NULL, F32,
          g_x, 1, (int64_t)1 << 40, 9, 9, g_w, (int64_t)1 << 30, 1, NULL, 1, g_out.dst, need, &o);
  ONESHOT("one-shot(height*width overflows)", CONVPOOL_INVALID_ARGUMENT, "4294967296", NULL, F32,
          g_x, 1, 3, (int64_t)1 << 32, (int64_t)1 << 32, g_w, 4, 3, g_bias, 2, g_out.dst, need, &o);

  convpool_options bad;
  bad = o;
  bad.threads = -3;
  ONESHOT("one-shot(threads -3)", CONVPOOL_INVALID_ARGUMENT, "threads = -3", NULL, F32, g_x, 2, 3,
          9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need, &bad);
  bad = o;
  bad.threads = 2000;
  ONESHOT("one-shot(threads 2000)", CONVPOOL_INVALID_ARGUMENT, "threads = 2000", NULL, F32, g_x, 2,
          3, 9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need, &bad);
  bad = o;
  bad.algo = (convpool_algo)42;
  ONESHOT("one-shot(algo 42)", CONVPOOL_INVALID_ARGUMENT, "algo = 42", NULL, F32, g_x, 2, 3, 9, 9,
          g_w, 4, 3, g_bias, 2, g_out.dst, need, &bad);
  bad = o;
  bad.rows_per_item = 4;
  ONESHOT("one-shot(rows_per_item 4 > 3)", CONVPOOL_INVALID_ARGUMENT, "rows_per_item = 4", NULL,
          F32, g_x, 2, 3, 9, 9, g_w, 4, 3, g_bias, 2, g_out.dst, need, &bad);

  /* dst overlapping src, weights or bias: one arena per input, dst over and next to it. */
  struct {
    const char *name;
    const void *data;
    size_t bytes;
    int which; /* 0 src, 1 weights, 2 bias */
  } inputs[] = {{"src", g_x, sizeof g_x, 0},
                {"weights", g_w, sizeof g_w, 1},
                {"bias", g_bias, sizeof g_bias, 2}};
  for (int i = 0; i < 3; i++) {
    const size_t total = need + inputs[i].bytes + need;
    unsigned char *arena = malloc(total), *copy = malloc(total);
    if (arena == NULL || copy == NULL) {
      REL_CHECK(0, "out of memory in the test");
      free(arena);
      free(copy);
      return;
    }
    memset(arena, PATTERN, total);
    unsigned char *in = arena + need;
    memcpy(in, inputs[i].data, inputs[i].bytes);
    memcpy(copy, arena, total);
    const void *x = inputs[i].which == 0 ? (const void *)in : g_x;
    const void *w = inputs[i].which == 1 ? (const void *)in : g_w;
    const void *b = inputs[i].which == 2 ? (const void *)in : g_bias;
    unsigned char *dsts[3] = {in, in + inputs[i].bytes - sizeof(float), in - need + sizeof(float)};
    const char *where[3] = {"at", "starting inside", "ending inside"};
    for (int d = 0; d < 3; d++) {
      snprintf(what, sizeof what, "one-shot(dst %s %s)", where[d], inputs[i].name);
      ONESHOT(what, CONVPOOL_INVALID_ARGUMENT, ptr_text(dsts[d], p1, sizeof p1),
              ptr_text(in, p2, sizeof p2), F32, x, 2, 3, 9, 9, w, 4, 3, b, 2, dsts[d], need, &o);
      REL_CHECK(strstr(convpool_last_error(), inputs[i].name) != NULL,
                "%s: message \"%s\" does not say %s", what, convpool_last_error(), inputs[i].name);
      REL_CHECK(memcmp(arena, copy, total) == 0, "%s: the arena was written", what);
    }
    /* Adjacent, not overlapping: accepted, correct. */
    unsigned char *next[2] = {in + inputs[i].bytes, in - need};
    for (int d = 0; d < 2; d++) {
      convpool_status st =
          convpool_conv2d_maxpool(F32, x, 2, 3, 9, 9, w, 4, 3, b, 2, next[d], need, &o);
      g_checked++;
      REL_CHECK(st == CONVPOOL_SUCCESS, "one-shot(dst adjacent to %s): %s", inputs[i].name,
                convpool_last_error());
      char why[400];
      if (st == CONVPOOL_SUCCESS)
        REL_CHECK(rel_check_output(&g_case, x, w, b, next[d], why, sizeof why) == 1,
                  "one-shot(dst adjacent to %s): %s", inputs[i].name, why);
      REL_CHECK(memcmp(in, inputs[i].data, inputs[i].bytes) == 0,
                "one-shot(dst adjacent to %s): the input was modified", inputs[i].name);
    }
    free(arena);
    free(copy);
  }
  REL_CHECK(counting.bad_alignment == 0 && counting.bad_free == 0,
            "one-shot allocator: %ld bad alignments, %ld bad frees", counting.bad_alignment,
            counting.bad_free);
#undef ONESHOT
}

/* ---- calls on an operator that is running ---- */

/*
 * The allocator hook runs inside convpool_op_run, after the operator has been
 * marked busy (the scratch allocation): a nested run and a destroy must be
 * refused with CONVPOOL_INVALID_STATE, and the outer run must still succeed.
 */
typedef struct busy_probe {
  convpool_op *op;
  int armed, fired;
  convpool_status run_status, destroy_status;
  char run_msg[512], destroy_msg[512];
  int dst_untouched;
} busy_probe;

static void busy_hook(void *context, size_t size) {
  busy_probe *b = context;
  (void)size;
  if (!b->armed || b->fired) return;
  b->fired = 1;
  static unsigned char dst[YN * sizeof(float)];
  memset(dst, PATTERN, sizeof dst);
  b->run_status = convpool_op_run(b->op, g_x, 2, 9, 9, dst, sizeof dst);
  snprintf(b->run_msg, sizeof b->run_msg, "%s", convpool_last_error());
  b->dst_untouched = rel_all_bytes(dst, sizeof dst, PATTERN);
  b->destroy_status = convpool_op_destroy(b->op);
  snprintf(b->destroy_msg, sizeof b->destroy_msg, "%s", convpool_last_error());
}

static void test_busy(void) {
  rel_alloc counting;
  rel_alloc_init(&counting);
  busy_probe probe;
  memset(&probe, 0, sizeof probe);
  counting.hook = busy_hook;
  counting.hook_context = &probe;
  convpool_allocator a = rel_alloc_interface(&counting);
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 2;
  o.allocator = &a;
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create(CONVPOOL_FLOAT32, g_w, g_bias, 4, 3, 3, 2, &o, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "busy: create: %s", convpool_last_error());
  if (st != CONVPOOL_SUCCESS) return;
  probe.op = op;
  probe.armed = 1;
  check_op_still_works(op, "while nested calls are refused");
  REL_CHECK(probe.fired, "busy: the run made no allocation, the probe did not run");
  if (probe.fired) {
    char p[32];
    ptr_text(op, p, sizeof p);
    g_checked += 2;
    REL_CHECK(probe.run_status == CONVPOOL_INVALID_STATE, "busy: nested run gave %s",
              convpool_status_string(probe.run_status));
    REL_CHECK(strstr(probe.run_msg, "already running") && strstr(probe.run_msg, p),
              "busy: nested run message \"%s\"", probe.run_msg);
    REL_CHECK(probe.dst_untouched, "busy: the refused nested run wrote dst");
    REL_CHECK(probe.destroy_status == CONVPOOL_INVALID_STATE, "busy: destroy while running gave %s",
              convpool_status_string(probe.destroy_status));
    REL_CHECK(strstr(probe.destroy_msg, "running") && strstr(probe.destroy_msg, p),
              "busy: destroy message \"%s\"", probe.destroy_msg);
    if (probe.run_status == CONVPOOL_INVALID_STATE) g_refused++;
    if (probe.destroy_status == CONVPOOL_INVALID_STATE) g_refused++;
  }
  probe.armed = 0;
  EXPECT_OK("destroy after the run", convpool_op_destroy(op));
  REL_CHECK(counting.live == 0, "busy: %ld blocks outstanding after destroy", counting.live);
}

/* ---- the layer descriptor, alignment and overlap ---- */

static void test_layer_refusals(void) {
  const size_t need = YN * sizeof(float);
  convpool_op *op = NULL;
  convpool_layer l;
  char what[160];
  /* LAYER(what, field = value, status, needle): one bad field on the defaults */
#define LAYER(text, change, want, needle)                                                         \
  do {                                                                                            \
    convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);                                        \
    change;                                                                                       \
    snprintf(what, sizeof what, "create_layer(%s)", text);                                        \
    REFUSED(what, convpool_op_create_layer(&l, g_w, g_bias, NULL, &op), want, needle, NULL);      \
    REL_CHECK(op == NULL, "%s: op_out is not NULL", what);                                        \
    snprintf(what, sizeof what, "layer_run(%s)", text);                                           \
    REFUSED(what, convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, need, NULL), want, \
            needle, NULL);                                                                        \
    snprintf(what, sizeof what, "layer_output_shape(%s)", text);                                  \
    REFUSED(what, convpool_layer_output_shape(&l, 2, 9, 9, g_out.shape, &g_out.bytes), want,      \
            needle, NULL);                                                                        \
  } while (0)
  const convpool_status BAD = CONVPOOL_INVALID_ARGUMENT, NO = CONVPOOL_UNSUPPORTED;
  LAYER("padding top -1", l.padding[0] = -1, BAD, "padding top = -1");
  LAYER("padding right 2^40", l.padding[3] = (int64_t)1 << 40, BAD,
        "padding right = 1099511627776");
  LAYER("pool_padding left 2 = P", l.pool_padding[1] = 2, BAD, "pool_padding left = 2");
  LAYER("pool_padding bottom -1", l.pool_padding[2] = -1, BAD, "pool_padding bottom = -1");
  LAYER("pool_stride -3", l.pool_stride = -3, BAD, "pool_stride = -3");
  LAYER("activation 7", l.activation = (convpool_activation)7, BAD, "activation = 7");
  LAYER("clamp 6 > 0", (l.activation = CONVPOOL_ACTIVATION_CLAMP, l.clamp_min = 6, l.clamp_max = 0),
        BAD, "clamp [6, 0]");
  LAYER("clamp NaN", (l.activation = CONVPOOL_ACTIVATION_CLAMP, l.clamp_min = NAN), BAD, "NaN");
  LAYER("ceil_mode 2", l.ceil_mode = 2, BAD, "ceil_mode = 2");
  LAYER("conv stride 0", l.stride = 0, BAD, "conv stride = 0");
  LAYER("conv stride -2", l.stride = -2, BAD, "conv stride = -2");
  LAYER("conv stride 2^24 + 1", l.stride = ((int64_t)1 << 24) + 1, BAD, "conv stride = 16777217");
  LAYER("dilation 0", l.dilation = 0, BAD, "conv dilation = 0");
  LAYER("dilation 2^40", l.dilation = (int64_t)1 << 40, BAD, "conv dilation = 1099511627776");
  LAYER("groups 3 (c_out 4)", l.groups = 3, BAD, "conv groups = 3");
  LAYER("groups 2 (c_in 3)", l.groups = 2, BAD, "conv groups = 2");
  LAYER("groups 0", l.groups = 0, BAD, "conv groups = 0");
  LAYER("groups -1", l.groups = -1, BAD, "conv groups = -1");
  LAYER("k 2^62, dilation 4: extent overflows", (l.k = (int64_t)1 << 62, l.dilation = 4), BAD,
        "extent overflows");
  LAYER("has_residual 2", l.has_residual = 2, BAD, "has_residual = 2");
  LAYER("has_residual -1", l.has_residual = -1, BAD, "has_residual = -1");
  LAYER("size 172", l.size = 172, BAD, "layer->size = 172");
  LAYER("size 8", l.size = 8, BAD, "layer->size = 8");
  LAYER("dtype 9", l.dtype = (convpool_dtype)9, BAD, "dtype = 9");
  LAYER("c_in 0", l.c_in = 0, BAD, "c_in = 0");
  LAYER("pool 0", l.pool = 0, BAD, "pool = 0");
#undef LAYER
  /* An algorithm asked by name declines what it does not compute, naming it. */
  convpool_options named;
  convpool_options_init(&named);
  named.algo = CONVPOOL_ALGO_WINOGRAD;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  l.stride = 2;
  REFUSED("create_layer(winograd, stride 2)",
          convpool_op_create_layer(&l, g_w, g_bias, &named, &op), NO, "stride = 2", NULL);
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 3, 3, 3, 2);
  l.groups = 3;
  REFUSED("create_layer(winograd, groups 3)",
          convpool_op_create_layer(&l, g_w, g_bias, &named, &op), NO, "groups = 3", NULL);
  named.algo = CONVPOOL_ALGO_SHIFT_REDUCE;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  l.dilation = 2;
  REFUSED("create_layer(sr, dilation 2)", convpool_op_create_layer(&l, g_w, g_bias, &named, &op),
          NO, "dilation = 2", NULL);
  REFUSED("layer_run(sr, dilation 2)",
          convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, need, &named), NO,
          "dilation = 2", NULL);
  /* ... and what they compute, they compute: boundaries that must succeed */
  l.dilation = 1, l.k = 1; /* dilation of a 1x1 filter is no dilation */
  l.dilation = 3;
  EXPECT_OK("create_layer(sr, k 1, dilation 3)",
            convpool_op_create_layer(&l, g_w, g_bias, &named, &op));
  convpool_op_destroy(op);
  op = NULL;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  l.size = 168; /* the first released size: no has_residual */
  l.has_residual = 1;
  EXPECT_OK("layer_run(layer->size 168)",
            convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, need, NULL));
  REFUSED("create_layer(NULL)", convpool_op_create_layer(NULL, g_w, g_bias, NULL, &op), BAD,
          "layer is NULL", NULL);
  REFUSED("layer_output_shape(NULL)",
          convpool_layer_output_shape(NULL, 2, 9, 9, g_out.shape, &g_out.bytes), BAD,
          "layer is NULL", NULL);
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  REFUSED("layer_output_shape(shape NULL)",
          convpool_layer_output_shape(&l, 2, 9, 9, NULL, &g_out.bytes), BAD, "shape is NULL", NULL);
  convpool_options o;
  convpool_options_init(&o);
  o.size = sizeof o + 8;
  REFUSED("create(options->size too large)",
          convpool_op_create(CONVPOOL_FLOAT32, g_w, g_bias, 4, 3, 3, 2, &o, &op), BAD,
          "options->size", NULL);
  /* a window larger than the padded conv output */
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  l.padding[0] = 1;
  REFUSED("layer_run(padded input 2x9 < k)",
          convpool_layer_run(&l, g_x, 2, 1, 9, g_w, g_bias, g_out.dst, need, NULL), BAD,
          "padded input 2x9", NULL);
  REFUSED("layer_output_shape(padded input 2x9 < k)",
          convpool_layer_output_shape(&l, 2, 1, 9, g_out.shape, &g_out.bytes), BAD,
          "padded input 2x9", NULL);
  /* a dilated filter larger than the input: 2 * (3 - 1) + 1 = 5 > 4 */
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 1);
  l.dilation = 2;
  REFUSED("layer_run(input 4x9 < the dilated filter)",
          convpool_layer_run(&l, g_x, 2, 4, 9, g_w, g_bias, g_out.dst, need, NULL), BAD,
          "input 4x9 is smaller than the dilated filter k = 3, dilation = 2 (extent 5)", NULL);
  REFUSED("layer_output_shape(input 4x9 < the dilated filter)",
          convpool_layer_output_shape(&l, 2, 4, 9, g_out.shape, &g_out.bytes), BAD, "extent 5",
          NULL);

  /* Alignment: tensors are read as their element type; +1 byte is refused. */
  static uint16_t h_x[XN + 2], h_w[WN + 2], h_b[6];
  static float f_y[YN + 2];
  const struct {
    convpool_dtype dtype;
    const void *x, *w, *b;
  } dts[2] = {{CONVPOOL_FLOAT32, g_x, g_w, g_bias}, {CONVPOOL_FLOAT16, h_x, h_w, h_b}};
  for (int d = 0; d < 2; d++) {
    const convpool_dtype dt = dts[d].dtype;
    const char *name = convpool_dtype_name(dt);
    const unsigned char *x1 = (const unsigned char *)dts[d].x + 1;
    const unsigned char *w1 = (const unsigned char *)dts[d].w + 1;
    const unsigned char *b1 = (const unsigned char *)dts[d].b + 1;
    unsigned char *y1 = (unsigned char *)f_y + 1;
    snprintf(what, sizeof what, "one-shot(%s src + 1 byte)", name);
    REFUSED(what,
            convpool_conv2d_maxpool(dt, x1, 2, 3, 9, 9, dts[d].w, 4, 3, dts[d].b, 2, g_out.dst,
                                    need, NULL),
            BAD, "src", "not aligned");
    snprintf(what, sizeof what, "one-shot(%s weights + 1 byte)", name);
    REFUSED(what,
            convpool_conv2d_maxpool(dt, dts[d].x, 2, 3, 9, 9, w1, 4, 3, dts[d].b, 2, g_out.dst,
                                    need, NULL),
            BAD, "weights", "not aligned");
    snprintf(what, sizeof what, "one-shot(%s bias + 1 byte)", name);
    REFUSED(what,
            convpool_conv2d_maxpool(dt, dts[d].x, 2, 3, 9, 9, dts[d].w, 4, 3, b1, 2, g_out.dst,
                                    need, NULL),
            BAD, "bias", "not aligned");
    snprintf(what, sizeof what, "one-shot(%s dst + 1 byte)", name);
    arm_outputs();
    convpool_status st = convpool_conv2d_maxpool(dt, dts[d].x, 2, 3, 9, 9, dts[d].w, 4, 3, dts[d].b,
                                                 2, y1, need, NULL);
    expect_refused(__FILE__, __LINE__, what, st, BAD, "dst", "not aligned");
  }

  /* Overlap is judged on the bytes actually written: weights just past the
     output, inside dst's unused capacity, are fine; inside the output, not. */
  static float big[YN + WN + 4];
  memcpy(big + YN, g_w, sizeof g_w);
  EXPECT_OK("one-shot(weights in dst's unused capacity)",
            convpool_conv2d_maxpool(CONVPOOL_FLOAT32, g_x, 2, 3, 9, 9, big + YN, 4, 3, g_bias, 2,
                                    big, sizeof big, NULL));
  memcpy(big + YN - 1, g_w, sizeof g_w);
  REFUSED("one-shot(weights overlap the output's last element)",
          convpool_conv2d_maxpool(CONVPOOL_FLOAT32, g_x, 2, 3, 9, 9, big + YN - 1, 4, 3, g_bias, 2,
                                  big, sizeof big, NULL),
          BAD, "overlaps weights", NULL);
}

/* ---- sizes at the limits of convpool.h: no arithmetic may overflow ---- */

/* A layer of the fixture (c_out 4, c_in 3, k 3, pool 2). */
static void fixture_layer(convpool_layer *l) {
  convpool_layer_init(l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
}

/* layer_run of l on the fixture must succeed with dst [2, 4, ph, pw] and match the reference. */
static void expect_layer_runs(const char *what, const convpool_layer *l, int64_t ph, int64_t pw) {
  arm_outputs();
  int64_t shape[4] = {0, 0, 0, 0};
  convpool_op *op = NULL;
  convpool_status st = convpool_op_create_layer(l, g_w, g_bias, NULL, &op);
  if (st == CONVPOOL_SUCCESS) st = convpool_op_output_shape(op, 2, 9, 9, shape, NULL);
  convpool_op_destroy(op);
  if (st == CONVPOOL_SUCCESS)
    st = convpool_layer_run(l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, sizeof g_out.dst, NULL);
  g_checked++;
  REL_CHECK(st == CONVPOOL_SUCCESS, "%s: %s (%s)", what, convpool_status_string(st),
            convpool_last_error());
  if (st != CONVPOOL_SUCCESS) return;
  REL_CHECK(shape[0] == 2 && shape[1] == 4 && shape[2] == ph && shape[3] == pw,
            "%s: output [%lld, %lld, %lld, %lld], want [2, 4, %lld, %lld]", what,
            (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3],
            (long long)ph, (long long)pw);
  char why[400];
  REL_CHECK(rel_check_layer_output(l, 2, 9, 9, g_x, g_w, g_bias, g_out.dst, why, sizeof why) == 1,
            "%s: %s", what, why);
}

/*
 * Values the API takes whose sums and products once overflowed int64 inside
 * the library (UBSan: signed-integer-overflow). Each is either within the
 * limits stated in convpool.h and computed correctly, or refused at the
 * boundary with a message naming it (never a negative size).
 */
static void test_size_limits(void) {
  const convpool_status BAD = CONVPOOL_INVALID_ARGUMENT;
  const int64_t big = CONVPOOL_MAX_POOL; /* 2^40 */
  convpool_op *op = NULL;
  convpool_layer l;
  char what[160];

  /* k * k: 3037000500^2 > INT64_MAX; 2^31 squared fits, but its bytes do not fit PTRDIFF_MAX */
  REFUSED("create(k 3037000500)",
          convpool_op_create(CONVPOOL_FLOAT32, g_w, NULL, 1, 1, 3037000500LL, 1, NULL, &op), BAD,
          "3037000500", NULL);
  REFUSED("create(float16 k 3037000500)",
          convpool_op_create(CONVPOOL_FLOAT16, g_w, NULL, 1, 1, 3037000500LL, 1, NULL, &op), BAD,
          "3037000500", NULL);
  REFUSED("create(bfloat16 k 2^31: 2^63 bytes of weights)",
          convpool_op_create(CONVPOOL_BFLOAT16, g_w, NULL, 1, 1, (int64_t)1 << 31, 1, NULL, &op),
          BAD, "2147483648", NULL);

  /* The pool window, its stride and its padding: up to CONVPOOL_MAX_POOL. */
  struct {
    const char *what;
    int64_t pool, stride, pad;
    int ceil_mode;
    const char *needle;
  } refused[] = {
      {"pool 2^40 + 1", big + 1, 0, 0, 0, "pool = 1099511627777"},
      {"pool INT64_MAX, pool_padding INT64_MAX/2", INT64_MAX, 0, INT64_MAX / 2, 0,
       "pool = 9223372036854775807"},
      {"pool INT64_MAX, ceil", INT64_MAX, 1, 0, 1, "pool = 9223372036854775807"},
      {"pool_stride 2^40 + 1", 2, big + 1, 0, 0, "pool_stride = 1099511627777"},
      {"pool_stride INT64_MAX, ceil", 2, INT64_MAX, 0, 1, "pool_stride = 9223372036854775807"},
      {"pool_padding = pool", 3, 0, 3, 0, "pool_padding top = 3"},
      {"pool_padding INT64_MAX", 2, 0, INT64_MAX, 0, "pool_padding top = 9223372036854775807"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    fixture_layer(&l);
    l.pool = refused[i].pool, l.pool_stride = refused[i].stride, l.ceil_mode = refused[i].ceil_mode;
    for (int s = 0; s < 4; s++) l.pool_padding[s] = refused[i].pad;
    snprintf(what, sizeof what, "create_layer(%s)", refused[i].what);
    REFUSED(what, convpool_op_create_layer(&l, g_w, g_bias, NULL, &op), BAD, refused[i].needle,
            NULL);
    snprintf(what, sizeof what, "layer_run(%s)", refused[i].what);
    REFUSED(what,
            convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, sizeof g_out.dst, NULL),
            BAD, refused[i].needle, NULL);
  }
  REFUSED("one-shot(pool INT64_MAX)",
          convpool_conv2d_maxpool(CONVPOOL_FLOAT32, g_x, 2, 3, 9, 9, g_w, 4, 3, g_bias, INT64_MAX,
                                  g_out.dst, sizeof g_out.dst, NULL),
          BAD, "pool = 9223372036854775807", NULL);

  /* At the limits, on the 7x7 conv output of the fixture. */
  fixture_layer(&l);
  l.pool_stride = big; /* the plan's cost once squared it */
  expect_layer_runs("pool_stride 2^40", &l, 1, 1);
  l.ceil_mode = 1;
  expect_layer_runs("pool_stride 2^40, ceil", &l, 1, 1);
  fixture_layer(&l);
  l.pool = l.pool_stride = big; /* one window over the whole conv output: the global max */
  for (int s = 0; s < 4; s++) l.pool_padding[s] = big / 2;
  expect_layer_runs("pool and pool_stride 2^40, pool_padding 2^39", &l, 1, 1);
  l.ceil_mode = 1;
  expect_layer_runs("pool and pool_stride 2^40, pool_padding 2^39, ceil", &l, 1, 1);
  fixture_layer(&l);
  l.pool = l.pool_stride = big, l.ceil_mode = 1; /* one partial window: the global max */
  expect_layer_runs("pool and pool_stride 2^40, ceil", &l, 1, 1);
  for (int s = 0; s < 4; s++) l.pool_padding[s] = big - 1;
  expect_layer_runs("pool and pool_stride 2^40, pool_padding 2^40 - 1, ceil", &l, 2, 2);
  l.ceil_mode = 0;
  expect_layer_runs("pool and pool_stride 2^40, pool_padding 2^40 - 1", &l, 2, 2);
  fixture_layer(&l);
  l.pool = big;
  REFUSED("layer_run(pool 2^40 > conv 7x7, floor)",
          convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, sizeof g_out.dst, NULL), BAD,
          "pool = 1099511627776", "7x7");

  /* The input size plus the largest conv padding: once a negative size in the message. */
  fixture_layer(&l);
  for (int s = 0; s < 4; s++) l.padding[s] = CONVPOOL_MAX_PADDING;
  op = NULL;
  convpool_status st = convpool_op_create_layer(&l, g_w, g_bias, NULL, &op);
  REL_CHECK(st == CONVPOOL_SUCCESS, "create_layer(padding 2^24): %s", convpool_last_error());
  if (op == NULL) return;
  const struct {
    const char *what;
    int64_t batch, height, width;
    const char *needle;
  } sizes[] = {
      {"height INT64_MAX - 10", 1, INT64_MAX - 10, 9, "9223372036854775797"},
      {"width INT64_MAX", 1, 9, INT64_MAX, "9223372036854775807"},
      {"height and width INT64_MAX", 1, INT64_MAX, INT64_MAX, "9223372036854775807"},
      {"batch INT64_MAX", INT64_MAX, 9, 9, "9223372036854775807"},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const int64_t b = sizes[i].batch, h = sizes[i].height, w = sizes[i].width;
    snprintf(what, sizeof what, "output_shape(padding 2^24, %s)", sizes[i].what);
    REFUSED(what, convpool_op_output_shape(op, b, h, w, g_out.shape, &g_out.bytes), BAD,
            sizes[i].needle, NULL);
    REL_CHECK(strstr(convpool_last_error(), "-") == NULL, "%s: a negative size in \"%s\"", what,
              convpool_last_error());
    snprintf(what, sizeof what, "run(padding 2^24, %s)", sizes[i].what);
    REFUSED(what, convpool_op_run(op, g_x, b, h, w, g_out.dst, sizeof g_out.dst), BAD,
            sizes[i].needle, NULL);
    snprintf(what, sizeof what, "plan(padding 2^24, %s)", sizes[i].what);
    REFUSED(what, convpool_op_plan(op, b, h, w, &g_out.plan), BAD, sizes[i].needle, NULL);
    snprintf(what, sizeof what, "describe(padding 2^24, %s)", sizes[i].what);
    REFUSED(what, convpool_op_describe(op, b, h, w, g_out.text, sizeof g_out.text), BAD,
            sizes[i].needle, NULL);
  }
  convpool_op_destroy(op);

  /* A huge conv output within the limits: every algorithm plans it at once
     (Winograd's plan once walked every item for each candidate size: 2^25
     pooled rows here). The ctest timeout catches a hang. */
  const convpool_algo algos[] = {CONVPOOL_ALGO_AUTO,         CONVPOOL_ALGO_WINOGRAD,
                                 CONVPOOL_ALGO_WINOGRAD_2X3, CONVPOOL_ALGO_SHIFT_REDUCE,
                                 CONVPOOL_ALGO_IM2COL,       CONVPOOL_ALGO_DIRECT};
  static float w8[8 * 8 * 3 * 3];
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    convpool_layer huge;
    convpool_layer_init(&huge, CONVPOOL_FLOAT32, 8, 8, 3, 1);
    for (int s = 0; s < 4; s++) huge.padding[s] = CONVPOOL_MAX_PADDING;
    convpool_options o;
    convpool_options_init(&o);
    o.algo = algos[a];
    op = NULL;
    st = convpool_op_create_layer(&huge, w8, NULL, &o, &op);
    REL_CHECK(st == CONVPOOL_SUCCESS, "create_layer(8 channels, padding 2^24, %s): %s",
              convpool_algo_name(algos[a]), convpool_last_error());
    if (op == NULL) continue;
    int64_t shape[4];
    st = convpool_op_output_shape(op, 1, 9, 9, shape, NULL);
    REL_CHECK(st == CONVPOOL_SUCCESS && shape[2] == 9 + 2 * CONVPOOL_MAX_PADDING - 2,
              "output_shape(padding 2^24, %s): %s", convpool_algo_name(algos[a]),
              convpool_last_error());
    st = convpool_op_describe(op, 1, 9, 9, g_out.text, sizeof g_out.text);
    REL_CHECK(st == CONVPOOL_SUCCESS, "describe(padding 2^24, %s): %s",
              convpool_algo_name(algos[a]), convpool_last_error());
    convpool_op_destroy(op);
  }
}

/* ---- the residual input ---- */

static void test_residual(void) {
  const size_t need = YN * sizeof(float);
  enum { RN = 2 * 4 * 7 * 7 }; /* the conv output [2, 4, 7, 7] of the fixture */
  static float residual[RN + 1], big[RN + YN + 4];
  tu_rng rng = {11};
  rel_fill(residual, RN + 1, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
  convpool_layer l;
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  l.has_residual = 1;
  int64_t shape[4] = {0};
  size_t bytes = 0;
  EXPECT_OK("layer_conv_shape", convpool_layer_conv_shape(&l, 2, 9, 9, shape, &bytes));
  REL_CHECK(shape[0] == 2 && shape[1] == 4 && shape[2] == 7 && shape[3] == 7 &&
                bytes == RN * sizeof(float),
            "layer_conv_shape: [%lld, %lld, %lld, %lld] %zu bytes, want [2, 4, 7, 7] %zu",
            (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3],
            bytes, (size_t)RN * sizeof(float));
  REFUSED("layer_conv_shape(shape NULL)", convpool_layer_conv_shape(&l, 2, 9, 9, NULL, &bytes),
          CONVPOOL_INVALID_ARGUMENT, "shape is NULL", NULL);
  REFUSED("layer_conv_shape(dilation 0)",
          (l.dilation = 0, convpool_layer_conv_shape(&l, 2, 9, 9, g_out.shape, &g_out.bytes)),
          CONVPOOL_INVALID_ARGUMENT, "conv dilation = 0", NULL);
  l.dilation = 1;
  convpool_op *op = NULL, *plain = NULL;
  EXPECT_OK("create_layer(residual)", convpool_op_create_layer(&l, g_w, g_bias, NULL, &op));
  convpool_layer_init(&l, CONVPOOL_FLOAT32, 4, 3, 3, 2);
  EXPECT_OK("create_layer(no residual)", convpool_op_create_layer(&l, g_w, g_bias, NULL, &plain));
  if (op == NULL || plain == NULL) {
    convpool_op_destroy(op);
    convpool_op_destroy(plain);
    return;
  }
  const convpool_status BAD = CONVPOOL_INVALID_ARGUMENT;
  REFUSED("run(a layer with a residual)", convpool_op_run(op, g_x, 2, 9, 9, g_out.dst, need), BAD,
          "residual is NULL", "convpool_op_run_residual");
  REFUSED("run_residual(residual NULL)",
          convpool_op_run_residual(op, g_x, 2, 9, 9, NULL, g_out.dst, need), BAD,
          "residual is NULL", NULL);
  char p[32];
  REFUSED("run_residual(a layer without one)",
          convpool_op_run_residual(plain, g_x, 2, 9, 9, residual, g_out.dst, need), BAD,
          ptr_text(residual, p, sizeof p), "has_residual = 0");
  REFUSED("run_residual(residual + 1 byte)",
          convpool_op_run_residual(op, g_x, 2, 9, 9, (const unsigned char *)residual + 1, g_out.dst,
                                   need),
          BAD, "residual", "not aligned");
  REFUSED("run_residual(residual overlaps dst)",
          convpool_op_run_residual(op, g_x, 2, 9, 9, g_out.dst + 8, g_out.dst, need), BAD,
          "overlaps residual", NULL);
  EXPECT_OK("run_residual(residual NULL, a layer without one)",
            convpool_op_run_residual(plain, g_x, 2, 9, 9, NULL, g_out.dst, need));
  /* the residual right after the output, in dst's unused capacity, is fine */
  memcpy(big + YN, residual, RN * sizeof(float));
  EXPECT_OK("run_residual(residual in dst's unused capacity)",
            convpool_op_run_residual(op, g_x, 2, 9, 9, big + YN, big, sizeof big));
  memcpy(big + YN - 1, residual, RN * sizeof(float));
  REFUSED("run_residual(residual overlaps the output's last element)",
          convpool_op_run_residual(op, g_x, 2, 9, 9, big + YN - 1, big, sizeof big), BAD,
          "overlaps residual", NULL);
  /* the one-shot calls */
  l.has_residual = 1;
  REFUSED("layer_run(a layer with a residual)",
          convpool_layer_run(&l, g_x, 2, 9, 9, g_w, g_bias, g_out.dst, need, NULL), BAD,
          "residual is NULL", NULL);
  EXPECT_OK("layer_run_residual",
            convpool_layer_run_residual(&l, g_x, 2, 9, 9, g_w, g_bias, residual, big, need, NULL));
  convpool_op_destroy(op);
  convpool_op_destroy(plain);
}

/* ---- a run's plan, reused while the shape stays ---- */

/* Runs of one operator on changing shapes (and, on the shared pool, a
   changing pool size, each shape twice) each give the bytes of a fresh operator's run on that
   shape, with the item count of that shape's plan: a plan kept from the
   previous run is never used for another shape. */
static void test_plan_reuse(void) {
  static const int64_t shapes[][3] = {{2, 9, 9}, {1, 9, 9}, {2, 6, 9}, {2, 9, 9}, {1, 4, 5}};
  enum { N = sizeof shapes / sizeof shapes[0] };
  for (int shared = 0; shared < 2; shared++) {
    convpool_options o;
    convpool_options_init(&o);
    o.threads = shared ? 0 : 2;
    o.shared_pool = shared;
    convpool_op *op = NULL;
    EXPECT_OK("create (plan reuse)",
              convpool_op_create(CONVPOOL_FLOAT32, g_w, g_bias, 4, 3, 3, 2, &o, &op));
    if (op == NULL) continue;
    for (int i = 0; i < 2 * N; i++) { /* each shape twice, the pool's size changed between */
      const int64_t *sh = shapes[i / 2];
      if (shared) EXPECT_OK("shared_pool_set_threads", convpool_shared_pool_set_threads(1 + i % 2));
      float got[YN], want[YN];
      size_t bytes = 0;
      int64_t shape[4];
      EXPECT_OK("output_shape (plan reuse)",
                convpool_op_output_shape(op, sh[0], sh[1], sh[2], shape, &bytes));
      memset(got, PATTERN, sizeof got);
      memset(want, PATTERN, sizeof want);
      convpool_op *fresh = NULL;
      EXPECT_OK("create fresh (plan reuse)",
                convpool_op_create(CONVPOOL_FLOAT32, g_w, g_bias, 4, 3, 3, 2, &o, &fresh));
      if (fresh == NULL) break;
      convpool_run_stats s, fs;
      convpool_plan_info info;
      EXPECT_OK("run (plan reuse)", convpool_op_run(op, g_x, sh[0], sh[1], sh[2], got, sizeof got));
      EXPECT_OK("stats (plan reuse)", convpool_op_last_run_stats(op, &s));
      EXPECT_OK("plan (plan reuse)", convpool_op_plan(op, sh[0], sh[1], sh[2], &info));
      EXPECT_OK("run fresh", convpool_op_run(fresh, g_x, sh[0], sh[1], sh[2], want, sizeof want));
      EXPECT_OK("stats fresh", convpool_op_last_run_stats(fresh, &fs));
      g_checked++;
      REL_CHECK(memcmp(got, want, sizeof got) == 0,
                "run %d (%s pool) on [%lld, 3, %lld, %lld] after other shapes differs from a "
                "fresh operator's (or wrote past its %zu bytes)",
                i, shared ? "shared" : "own", (long long)sh[0], (long long)sh[1], (long long)sh[2],
                bytes);
      REL_CHECK(s.items == fs.items && s.items == info.items && s.threads == fs.threads,
                "run %d (%s pool): %lld items on %d threads, a fresh plan has %lld on %d", i,
                shared ? "shared" : "own", (long long)s.items, s.threads, (long long)fs.items,
                fs.threads);
      convpool_op_destroy(fresh);
    }
    convpool_op_destroy(op);
  }
  /* one thread: the pool keeps no workers, so none is alive at exit (valgrind) */
  EXPECT_OK("shared_pool_set_threads (none left)", convpool_shared_pool_set_threads(1));
}

/* An allocator that records the largest block asked for (an operator's
   packed weights). */
typedef struct largest_block {
  size_t largest;
} largest_block;

static void *largest_alloc(void *context, size_t size, size_t alignment) {
  largest_block *b = context;
  if (size > b->largest) b->largest = size;
  void *p = NULL;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  return posix_memalign(&p, alignment, size ? size : 1) == 0 ? p : NULL;
}

static void largest_free(void *context, void *p) {
  (void)context;
  free(p);
}

/*
 * options.expected_*: auto settled for a shape packs the weights of that
 * shape's algorithm alone (a smaller largest block where auto's setups hold
 * more: Winograd's two tile sizes, the direct algorithm's weights) and
 * computes that shape to the same bytes as auto for any shape; runs of
 * another shape stay correct. Layers where auto hands runs over (to direct,
 * to F(2x2, 3x3), to shift-reduce) and where it packs nothing to drop.
 */
static void test_expected_shape(void) {
  typedef struct {
    int64_t c_in, c_out, hw, batch, other_hw;
  } shape_case;
  static const shape_case cases[] = {
      {512, 512, 7, 1, 9},   /* Winograd hands it to direct (AVX-512) */
      {256, 256, 14, 1, 10}, /* to F(2x2, 3x3) */
      {256, 256, 28, 1, 7},  /* F(4x4, 3x3), F(2x2, 3x3) packed too */
      {64, 64, 6, 2, 20},    /* too few tiles: to shift-reduce */
      {128, 128, 28, 1, 12}, /* nothing to drop */
      {3, 16, 11, 2, 8},     /* not Winograd's */
  };
  tu_rng rng = {7};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const shape_case *c = &cases[i];
    convpool_layer l;
    convpool_layer_init(&l, CONVPOOL_FLOAT32, c->c_out, c->c_in, 3, 1);
    l.padding[0] = l.padding[1] = l.padding[2] = l.padding[3] = 1;
    l.activation = CONVPOOL_ACTIVATION_RELU;
    const int64_t big = c->hw > c->other_hw ? c->hw : c->other_hw;
    const size_t wn = (size_t)(c->c_out * c->c_in * 9),
                 xn = (size_t)(c->batch * c->c_in * big * big);
    const size_t yn = (size_t)(c->batch * c->c_out * big * big);
    float *w = malloc(wn * sizeof(float)), *bias = malloc((size_t)c->c_out * sizeof(float));
    float *x = malloc(xn * sizeof(float)), *y_any = malloc(yn * sizeof(float));
    float *y_set = malloc(yn * sizeof(float));
    if (w == NULL || bias == NULL || x == NULL || y_any == NULL || y_set == NULL) {
      REL_CHECK(0, "expected shape case %zu: out of memory", i);
      free(w), free(bias), free(x), free(y_any), free(y_set);
      return;
    }
    rel_fill(w, wn, CONVPOOL_FLOAT32, &rng, -0.1f, 0.1f);
    rel_fill(bias, (size_t)c->c_out, CONVPOOL_FLOAT32, &rng, -0.5f, 0.5f);
    rel_fill(x, xn, CONVPOOL_FLOAT32, &rng, -1.0f, 1.0f);
    largest_block any_b = {0}, set_b = {0};
    const convpool_allocator any_a = {largest_alloc, largest_free, &any_b};
    const convpool_allocator set_a = {largest_alloc, largest_free, &set_b};
    convpool_options o;
    convpool_options_init(&o);
    o.threads = 2, o.allocator = &any_a;
    convpool_op *any = NULL, *set = NULL;
    convpool_status st = convpool_op_create_layer(&l, w, bias, &o, &any);
    o.allocator = &set_a;
    o.expected_batch = c->batch, o.expected_height = c->hw, o.expected_width = c->hw;
    if (st == CONVPOOL_SUCCESS) st = convpool_op_create_layer(&l, w, bias, &o, &set);
    g_checked++;
    REL_CHECK(st == CONVPOOL_SUCCESS, "expected shape case %zu: %s", i, convpool_last_error());
    char text[4096] = "";
    if (st == CONVPOOL_SUCCESS)
      st = convpool_op_describe(set, c->batch, c->hw, c->hw, text, sizeof text);
    const int settled = strstr(text, "settled at create") != NULL;
    /* settled exactly where that packs less */
    REL_CHECK(settled == (set_b.largest < any_b.largest),
              "expected shape case %zu: settled %d, largest block %zu against %zu for any shape", i,
              settled, set_b.largest, any_b.largest);
    REL_CHECK(set_b.largest <= any_b.largest,
              "expected shape case %zu: largest block %zu, more than %zu for any shape", i,
              set_b.largest, any_b.largest);
    const int64_t sides[2] = {c->hw, c->other_hw};
    for (int j = 0; j < 2 && st == CONVPOOL_SUCCESS; j++) {
      const int64_t hw = sides[j];
      const size_t bytes = (size_t)(c->batch * c->c_out * hw * hw) * sizeof(float);
      memset(y_any, 0xA5, bytes), memset(y_set, 0x5A, bytes);
      st = convpool_op_run(any, x, c->batch, hw, hw, y_any, bytes);
      if (st == CONVPOOL_SUCCESS) st = convpool_op_run(set, x, c->batch, hw, hw, y_set, bytes);
      g_checked++;
      REL_CHECK(st == CONVPOOL_SUCCESS, "expected shape case %zu at %lldx%lld: %s", i,
                (long long)hw, (long long)hw, convpool_last_error());
      if (st != CONVPOOL_SUCCESS) break;
      if (j == 0)
        REL_CHECK(memcmp(y_any, y_set, bytes) == 0,
                  "expected shape case %zu: the settled operator's bytes differ from auto's", i);
      char why[400];
      REL_CHECK(
          rel_check_layer_output(&l, c->batch, hw, hw, x, w, bias, y_set, why, sizeof why) == 1,
          "expected shape case %zu at %lldx%lld: %s", i, (long long)hw, (long long)hw, why);
    }
    convpool_op_destroy(any);
    convpool_op_destroy(set);
    free(w), free(bias), free(x), free(y_any), free(y_set);
  }
}

int main(void) {
  make_fixtures();
  test_plain_functions();
  test_dtype_names();
  test_algo_list();
  test_convert();
  test_layer_output_shape();
  test_global_functions();
  test_create();

  convpool_op *ops[2];
  convpool_options o;
  convpool_options_init(&o);
  o.threads = 2;
  ops[0] = NULL;
  ops[1] = NULL;
  convpool_status st = convpool_op_create(CONVPOOL_FLOAT32, g_w, g_bias, 4, 3, 3, 2, &o, &ops[0]);
  REL_CHECK(st == CONVPOOL_SUCCESS, "fixture op: %s", convpool_last_error());
  ops[1] = make_op(CONVPOOL_FLOAT32, 16, 1, 1, 1, 1, 0, g_w);
  if (ops[0] != NULL && ops[1] != NULL) {
    check_op_still_works(ops[0], "before the refusals");
    test_bad_shapes(ops);
    test_run(ops[0]);
    check_op_still_works(ops[0], "after the refusals");
  }
  convpool_op_destroy(ops[0]);
  convpool_op_destroy(ops[1]);
  test_rows_per_item();
  test_stats();
  test_plan_reuse();
  test_not_live();
  test_one_shot();
  test_busy();
  test_layer_refusals();
  test_size_limits();
  test_residual();
  test_expected_shape();

  REL_CHECK(memcmp(g_x, g_x_copy, sizeof g_x) == 0 && memcmp(g_w, g_w_copy, sizeof g_w) == 0 &&
                memcmp(g_bias, g_bias_copy, sizeof g_bias) == 0,
            "an input tensor was modified");
  int failures = *rel_failure_count();
  printf("test_api: %d bad inputs refused as documented, %d calls checked, %d failures\n",
         g_refused, g_checked, failures);
  return failures ? 1 : 0;
}
