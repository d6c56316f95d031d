/*
 * convpool: run the fused Conv2D + bias + activation + MaxPool layer from the
 * command line, time it, dump its tensors, or run it on tensors read from a
 * directory. A client of the public API (convpool.h) only: the library
 * validates the layer and the input shape, and its message names what it
 * refuses; the CLI checks its own syntax, its own bounds and its files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "convpool.h"
#include "meta.h"
#include "peak.h"

#define EXIT_USAGE 2

/* The largest count, size, pool stride or seed the CLI takes (its own bound,
   far above any layer; the library has its own limits and names them). */
#define BIG ((int64_t)1 << 40)
/* Rounded to float32, numbers from here on overflow (2^128 - 2^103). */
#define FLOAT_OVERFLOW 340282356779733661637539395458142568448.0

static const char *const side_names[4] = {"top", "left", "bottom", "right"};

/* What the command line (or meta.json) asks for. */
typedef struct cli {
  convpool_layer layer;     /* dtype, channels, filter, padding, activation, pool */
  convpool_options options; /* threads, algorithm, rows per item */
  int64_t batch, height, width, seed;
  int bias, warmup, iters, show_tiling, profile, any_shape;
  const char *dump_dir, *load_dir;
} cli;

/* The tensors of a run and their sizes (r: the residual, or NULL). */
typedef struct tensors {
  void *x, *w, *bias, *r, *y;
  size_t x_bytes, w_bytes, bias_bytes, r_bytes, y_bytes;
} tensors;

/* The timed runs, in microseconds. */
typedef struct timing {
  double pack; /* creating the operator, which packs the weights once */
  double min, median, avg;
} timing;

/* "auto|depthwise|winograd|direct|sr|im2col": the library's algorithms, in auto's order. */
static void algo_names(char *text, size_t capacity) {
  convpool_algo algos[32];
  size_t n = convpool_algo_list(algos, sizeof algos / sizeof algos[0]);
  if (n > sizeof algos / sizeof algos[0]) n = sizeof algos / sizeof algos[0];
  size_t used = 0;
  text[0] = '\0';
  for (size_t i = 0; i < n && used < capacity; i++) {
    snprintf(text + used, capacity - used, "%s%s", i > 0 ? "|" : "", convpool_algo_name(algos[i]));
    used += strlen(text + used);
  }
}

static void usage(FILE *f) {
  char algos[256];
  algo_names(algos, sizeof algos);
  fprintf(f,
          "usage: convpool [options]\n"
          "Fused Conv2D (stride, dilation, groups, zero padding) + bias [+ residual] +\n"
          "activation + MaxPool on NCHW tensors.\n"
          "  --dtype float32|float16|bfloat16  element type (default float32)\n"
          "  --batch N                 batch size (default 1)\n"
          "  --in-channels N           C_in (default 256)\n"
          "  --out-channels N          C_out (default 256)\n"
          "  --height N --width N      input size (default 224 x 224)\n"
          "  --filter K                filter size K x K (default 3)\n"
          "  --padding N | T,L,B,R     conv zero padding, all sides or top,left,bottom,right\n"
          "                            (default 0)\n"
          "  --stride S                conv stride, rows and columns (default 1)\n"
          "  --dilation D              conv dilation (default 1)\n"
          "  --groups G                conv groups, dividing C_in and C_out (default 1;\n"
          "                            C_in: depthwise); w is [C_out, C_in/G, K, K]\n"
          "  --residual                add a residual [B, C_out, OH, OW] (generated, or\n"
          "                            residual.bin) to conv + bias before the activation\n"
          "  --activation none|relu|relu6|clamp:MIN,MAX\n"
          "                            applied to conv + bias (+ residual) before the\n"
          "                            pooling (default\n"
          "                            none; relu6 = clamp:0,6; MIN <= MAX, finite floats)\n"
          "  --pool P                  max pool window P x P (default 2; 1 = none)\n"
          "  --pool-stride S           pool window stride (>= 1; default P)\n"
          "  --pool-padding N | T,L,B,R  -inf pool padding, each at most P - 1 (ONNX's\n"
          "                            MaxPool; torch takes P/2; default 0)\n"
          "  --ceil-mode               ceil sizing of the pooled output (torch's rule: a\n"
          "                            partial last window, none starting in the bottom or\n"
          "                            right padding; default floor)\n"
          "  --bias | --no-bias        add a bias after the max (default on)\n"
          "  --threads N               threads; 0 = the usable CPUs (affinity and cgroup\n"
          "                            CPU quota), the default\n"
          "  --impl %s\n"
          "                            algorithm (default auto: the first of the library's\n"
          "                            list, in this order, that takes the layer)\n"
          "  --rows-per-item N         pooled rows per work item (default 0: planned)\n"
          "  --any-shape               make the operator for any input shape: auto packs\n"
          "                            what any shape may be handed to (default: for this\n"
          "                            run's shape, that shape's algorithm alone)\n"
          "  --warmup N --iters N      timing runs (default 2 and 10)\n"
          "  --seed S                  data seed (default 0)\n"
          "  --dump-dir DIR            write x.bin w.bin [bias.bin] [residual.bin] out.bin\n"
          "                            meta.json\n"
          "  --load-dir DIR            read meta.json x.bin w.bin [bias.bin] [residual.bin],\n"
          "                            write out.bin\n"
          "                            (meta.json gives the layer: the shape and layer\n"
          "                            flags are not used)\n"
          "                            (each file written goes to a new temporary file that\n"
          "                            is renamed over it: a link there is replaced, not\n"
          "                            followed)\n"
          "  --show-tiling             print the plan\n"
          "  --profile                 print time per phase, GFLOP/s and bytes moved\n"
          "  --help, --version\n"
          "The library checks the layer (padding, stride, dilation, groups, pool padding\n"
          "and clamp limits, the filter and pool against the input) and names the value\n"
          "it refuses.\n"
          "Exit status: 0 success, 2 invalid input, 1 other failure.\n",
          algos);
}

/* The live operator, destroyed by die() so that no worker thread is left
   running when the CLI exits on an error. */
static convpool_op *g_op;

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("convpool: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  convpool_op_destroy(g_op); /* after the message: destroy clears the library's error */
  exit(code);
}

/* A failed library call: its message and status; bad input exits 2. */
static void check(convpool_status st) {
  if (st == CONVPOOL_SUCCESS) return;
  die(st == CONVPOOL_INVALID_ARGUMENT || st == CONVPOOL_UNSUPPORTED ? EXIT_USAGE : 1, "%s (%s)",
      convpool_last_error(), convpool_status_string(st));
}

/* ---- arguments ---- */

static int64_t parse_int(const char *flag, const char *text, int64_t lo, int64_t hi) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a value", flag);
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE)
    die(EXIT_USAGE, "%s = '%s' is not an integer", flag, text);
  if (v < lo || v > hi)
    die(EXIT_USAGE, "%s = %lld must be in %lld..%lld", flag, v, (long long)lo, (long long)hi);
  return v;
}

/* An int field of convpool_options: any int, the library checks its meaning. */
static int parse_int_option(const char *flag, const char *text) {
  return (int)parse_int(flag, text, INT_MIN, INT_MAX);
}

/* A dtype by the library's name; `what` names the flag or key. */
static convpool_dtype parse_dtype(const char *what, const char *text) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a value", what);
  convpool_dtype dtype;
  if (convpool_dtype_from_name(text, &dtype) != CONVPOOL_SUCCESS)
    die(EXIT_USAGE, "%s = %s", what, convpool_last_error());
  return dtype;
}

/* One integer of a list flag: 0 and the value, or -1 (not an integer). */
static int parse_int_piece(const char *text, size_t len, int64_t *out) {
  char buf[32];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, text, len);
  buf[len] = '\0';
  errno = 0;
  char *end = NULL;
  long long v = strtoll(buf, &end, 10);
  if (end == buf || *end != '\0' || errno == ERANGE) return -1;
  *out = v;
  return 0;
}

/* --padding / --pool-padding: N (every side) or T,L,B,R, integers; their
   range is the library's check. */
static void parse_sides(const char *flag, const char *text, int64_t out[4]) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a value (N or T,L,B,R)", flag);
  const char *piece[4];
  size_t len[4];
  int n = 0;
  for (const char *p = text;; n++) {
    const char *comma = strchr(p, ',');
    if (n == 4)
      die(EXIT_USAGE, "%s = '%s' must be N or T,L,B,R (one or four integers)", flag, text);
    piece[n] = p;
    len[n] = comma ? (size_t)(comma - p) : strlen(p);
    if (comma == NULL) {
      n++;
      break;
    }
    p = comma + 1;
  }
  if (n != 1 && n != 4)
    die(EXIT_USAGE, "%s = '%s' must be N or T,L,B,R (one or four integers, not %d)", flag, text, n);
  for (int i = 0; i < n; i++) {
    if (parse_int_piece(piece[i], len[i], &out[i]) == 0) continue;
    if (n == 1) die(EXIT_USAGE, "%s = '%s' is not an integer", flag, text);
    die(EXIT_USAGE, "%s = '%s': %s '%.*s' is not an integer", flag, text, side_names[i],
        (int)len[i], piece[i]);
  }
  if (n == 1) out[1] = out[2] = out[3] = out[0];
}

/* A clamp bound of --activation: a finite float (strtod, rounded to nearest);
   finite so that meta.json, which has no Inf or NaN, can hold it. */
static float parse_bound(const char *text, const char *what, const char *piece, size_t len) {
  char buf[64];
  if (len == 0 || len >= sizeof buf)
    die(EXIT_USAGE, "--activation = '%s': %s '%.*s' is not a number", text, what, (int)len, piece);
  memcpy(buf, piece, len);
  buf[len] = '\0';
  char *end = NULL;
  const double d = strtod(buf, &end);
  if (end == buf || *end != '\0')
    die(EXIT_USAGE, "--activation = '%s': %s '%s' is not a number", text, what, buf);
  if (!(d > -FLOAT_OVERFLOW && d < FLOAT_OVERFLOW)) /* NaN too */
    die(EXIT_USAGE, "--activation = '%s': %s '%s' is not a finite float32", text, what, buf);
  return d > FLT_MAX ? FLT_MAX : d < -FLT_MAX ? -FLT_MAX : (float)d;
}

/* --activation none|relu|relu6|clamp:MIN,MAX (MIN <= MAX is the library's check) */
static void parse_activation(const char *text, convpool_layer *layer) {
  if (text == NULL)
    die(EXIT_USAGE, "--activation needs a value (none, relu, relu6, clamp:MIN,MAX)");
  layer->clamp_min = -INFINITY, layer->clamp_max = INFINITY;
  if (strcmp(text, "none") == 0) {
    layer->activation = CONVPOOL_ACTIVATION_NONE;
  } else if (strcmp(text, "relu") == 0) {
    layer->activation = CONVPOOL_ACTIVATION_RELU;
  } else if (strcmp(text, "relu6") == 0) {
    layer->activation = CONVPOOL_ACTIVATION_CLAMP;
    layer->clamp_min = 0.0f, layer->clamp_max = 6.0f;
  } else if (strncmp(text, "clamp:", 6) == 0) {
    const char *lo = text + 6, *comma = strchr(lo, ',');
    if (comma == NULL || strchr(comma + 1, ',') != NULL)
      die(EXIT_USAGE, "--activation = '%s' must be clamp:MIN,MAX (two numbers)", text);
    layer->activation = CONVPOOL_ACTIVATION_CLAMP;
    layer->clamp_min = parse_bound(text, "MIN", lo, (size_t)(comma - lo));
    layer->clamp_max = parse_bound(text, "MAX", comma + 1, strlen(comma + 1));
  } else {
    die(EXIT_USAGE, "--activation = '%s' is not one of none, relu, relu6, clamp:MIN,MAX", text);
  }
}

/* An algorithm by the library's name. */
static convpool_algo parse_algo(const char *text) {
  if (text == NULL) die(EXIT_USAGE, "--impl needs a value");
  convpool_algo algo;
  if (convpool_algo_from_name(text, &algo) != CONVPOOL_SUCCESS)
    die(EXIT_USAGE, "--impl = %s", convpool_last_error());
  return algo;
}

/* A directory argument; an empty one (which would name the filesystem root
   once "/x.bin" is appended) is refused. */
static const char *parse_dir(const char *flag, const char *text) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a directory", flag);
  if (text[0] == '\0') die(EXIT_USAGE, "%s is empty: give a directory (e.g. %s .)", flag, flag);
  return text;
}

/* The defaults: the headline layer, timed. */
static void cli_init(cli *c) {
  memset(c, 0, sizeof *c);
  convpool_layer_init(&c->layer, CONVPOOL_FLOAT32, 256, 256, 3, 2);
  convpool_options_init(&c->options);
  c->batch = 1, c->height = 224, c->width = 224, c->seed = 0;
  c->bias = 1, c->warmup = 2, c->iters = 10;
}

static void parse_args(int argc, char **argv, cli *c) {
  const int64_t big = BIG;
  convpool_layer *layer = &c->layer;
  cli_init(c);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(name) (strcmp(a, name) == 0 && (++i, 1))
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--version") == 0) {
      printf("convpool %s\n", CONVPOOL_VERSION_STRING);
      exit(0);
    } else if (TAKE("--dtype")) {
      layer->dtype = parse_dtype(a, v);
    } else if (TAKE("--batch")) {
      c->batch = parse_int(a, v, 1, big);
    } else if (TAKE("--in-channels")) {
      layer->c_in = parse_int(a, v, 1, big);
    } else if (TAKE("--out-channels")) {
      layer->c_out = parse_int(a, v, 1, big);
    } else if (TAKE("--height")) {
      c->height = parse_int(a, v, 1, big);
    } else if (TAKE("--width")) {
      c->width = parse_int(a, v, 1, big);
    } else if (TAKE("--filter")) {
      layer->k = parse_int(a, v, 1, big);
    } else if (TAKE("--pool")) {
      layer->pool = parse_int(a, v, 1, big);
    } else if (TAKE("--padding")) {
      parse_sides(a, v, layer->padding);
    } else if (TAKE("--stride")) {
      layer->stride = parse_int(a, v, 1, big);
    } else if (TAKE("--dilation")) {
      layer->dilation = parse_int(a, v, 1, big);
    } else if (TAKE("--groups")) {
      layer->groups = parse_int(a, v, 1, big);
    } else if (strcmp(a, "--residual") == 0) {
      layer->has_residual = 1;
    } else if (TAKE("--activation")) {
      parse_activation(v, layer);
    } else if (TAKE("--pool-stride")) {
      layer->pool_stride = parse_int(a, v, 1, big);
    } else if (TAKE("--pool-padding")) {
      parse_sides(a, v, layer->pool_padding);
    } else if (strcmp(a, "--ceil-mode") == 0) {
      layer->ceil_mode = 1;
    } else if (strcmp(a, "--bias") == 0) {
      c->bias = 1;
    } else if (strcmp(a, "--no-bias") == 0) {
      c->bias = 0;
    } else if (TAKE("--threads")) {
      c->options.threads = parse_int_option(a, v);
    } else if (TAKE("--rows-per-item")) {
      c->options.rows_per_item = parse_int_option(a, v);
    } else if (TAKE("--warmup")) {
      c->warmup = (int)parse_int(a, v, 0, 1000000);
    } else if (TAKE("--iters")) {
      c->iters = (int)parse_int(a, v, 1, 1000000);
    } else if (TAKE("--seed")) {
      c->seed = parse_int(a, v, 0, big);
    } else if (TAKE("--impl")) {
      c->options.algo = parse_algo(v);
    } else if (TAKE("--dump-dir")) {
      c->dump_dir = parse_dir(a, v);
    } else if (TAKE("--load-dir")) {
      c->load_dir = parse_dir(a, v);
    } else if (strcmp(a, "--show-tiling") == 0) {
      c->show_tiling = 1;
    } else if (strcmp(a, "--profile") == 0) {
      c->profile = 1;
    } else if (strcmp(a, "--any-shape") == 0) {
      c->any_shape = 1;
    } else {
      die(EXIT_USAGE, "unknown option '%s' (see --help)", a);
    }
#undef TAKE
  }
  if (c->dump_dir != NULL && c->load_dir != NULL)
    die(EXIT_USAGE, "--dump-dir and --load-dir cannot be used together");
}

/* ---- data ---- */

static void *xmalloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) die(1, "cannot allocate %zu bytes for %s", bytes, what);
  return p;
}

/* The documented generator: uniform [0, 1) with 24 random bits per value. */
static float gen_value(uint64_t stream, uint64_t i) {
  uint64_t z = stream * 0xD1B54A32D192ED03ull + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* A new tensor of n generated values in dtype (rounded by the library's
   conversion, to nearest even). */
static void *generate(size_t n, convpool_dtype dtype, uint64_t stream, const char *what) {
  const size_t es = convpool_dtype_size(dtype);
  char *data = xmalloc(n * es, what);
  float row[1024];
  for (size_t i = 0; i < n; i += sizeof row / sizeof row[0]) {
    const size_t m = n - i < sizeof row / sizeof row[0] ? n - i : sizeof row / sizeof row[0];
    for (size_t j = 0; j < m; j++) row[j] = gen_value(stream, i + j);
    check(convpool_convert(row, CONVPOOL_FLOAT32, data + i * es, dtype, m));
  }
  return data;
}

/* Bytes of a [d0, d1, d2, d3] tensor of the CLI's own (the library checks
   src and dst); refused when they overflow. */
static size_t tensor_bytes(const char *what, const int64_t dims[4], size_t elem) {
  size_t c = elem;
  for (int i = 0; i < 4; i++)
    if (__builtin_mul_overflow(c, (size_t)dims[i], &c))
      die(EXIT_USAGE, "%s [%lld, %lld, %lld, %lld] has a byte count that overflows", what,
          (long long)dims[0], (long long)dims[1], (long long)dims[2], (long long)dims[3]);
  return c;
}

/* ---- files ---- */

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n, "a path");
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static void *read_file(const char *dir, const char *name, size_t expect, int exact, size_t *got) {
  char *path = join(dir, name);
  /* O_NONBLOCK: opening a FIFO without a writer must not hang; it is refused below. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die(EXIT_USAGE, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    die(EXIT_USAGE, "%s is not a regular file", path);
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) die(1, "cannot read %s: %s", path, strerror(errno));
  size_t size = (size_t)st.st_size;
  if (exact && size != expect)
    die(EXIT_USAGE, "%s has %zu bytes, meta.json implies %zu", path, size, expect);
  if (!exact && size > expect) die(EXIT_USAGE, "%s is larger than %zu bytes", path, expect);
  void *data = xmalloc(size, path);
  if (fread(data, 1, size, f) != size) die(EXIT_USAGE, "cannot read %s", path);
  fclose(f);
  free(path);
  if (got) *got = size;
  return data;
}

/* 64 random bits for a temporary name (a guessed name is harmless, see
   write_file; randomness only keeps a planted name from blocking us). */
static uint64_t random_bits(void) {
  uint64_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12) ^
               (++counter * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/*
 * Replace dir/name with the bytes, atomically: they go to a new file with a
 * random name in the same directory, created with O_CREAT | O_EXCL |
 * O_NOFOLLOW (so an existing file or a planted symbolic link is never opened,
 * followed or reused: the name is tried again), which is written, fsynced and
 * renamed over dir/name (a link at dir/name is replaced, not followed). On
 * any failure the temporary file is removed and the message gives the reason
 * (strerror). Termination signals are held back meanwhile, so an interrupt
 * cannot leave the temporary file behind either.
 */
static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
  char *path = join(dir, name);
  sigset_t hold, saved;
  sigemptyset(&hold);
  sigaddset(&hold, SIGHUP);
  sigaddset(&hold, SIGINT);
  sigaddset(&hold, SIGQUIT);
  sigaddset(&hold, SIGTERM);
  sigprocmask(SIG_BLOCK, &hold, &saved);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) die(1, "cannot write %s: %s", path, strerror(errno));
  char tmp[64 + 32];
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(tmp, sizeof tmp, "%.64s.tmp.%012llx", name,
             (unsigned long long)(random_bits() & 0xffffffffffffull));
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) die(1, "cannot write %s: %s", path, strerror(errno));
  int err = 0;
  const char *p = data;
  for (size_t left = bytes; left > 0 && err == 0;) {
    ssize_t n = write(fd, p, left < ((size_t)1 << 30) ? left : (size_t)1 << 30);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      err = n < 0 ? errno : EIO;
    else
      p += n, left -= (size_t)n;
  }
  if (err == 0 && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && renameat(dfd, tmp, dfd, name) != 0) err = errno;
  if (err != 0) {
    unlinkat(dfd, tmp, 0);
    die(1, "cannot write %s: %s", path, strerror(err));
  }
  /* The rename itself reaches the disk with the directory. */
  if (fsync(dfd) != 0 && errno != EINVAL)
    die(1, "cannot write %s: %s (syncing %s)", path, strerror(errno), dir);
  close(dfd);
  sigprocmask(SIG_SETMASK, &saved, NULL);
  free(path);
}

/* ---- meta.json ---- */

/* The layer and shape of meta.json in c (--load-dir). The parser checks
   types and counts; the library checks the layer as for the flags. */
static void load_meta(cli *c) {
  size_t len;
  char *text = read_file(c->load_dir, "meta.json", 1 << 16, 0, &len);
  cp_meta m;
  char err[256];
  if (cp_meta_parse(text, len, &m, err, sizeof err) != 0) die(EXIT_USAGE, "%s", err);
  free(text);
  const char *names[] = {"batch", "in_channels", "out_channels", "height",
                         "width", "filter",      "pool"};
  const int64_t vals[] = {m.batch, m.in_channels, m.out_channels, m.height,
                          m.width, m.filter,      m.pool};
  for (int i = 0; i < 7; i++)
    if (vals[i] < 1)
      die(EXIT_USAGE, "meta.json: %s = %lld must be >= 1", names[i], (long long)vals[i]);
  if (m.pool_stride > BIG)
    die(EXIT_USAGE, "meta.json: pool_stride = %lld must be in 1..%lld", (long long)m.pool_stride,
        (long long)BIG);
  /* stride, dilation and groups: 0 when absent; their range is the library's check */
  convpool_layer *layer = &c->layer;
  convpool_layer_init(layer, parse_dtype("meta.json: dtype", m.dtype), m.out_channels,
                      m.in_channels, m.filter, m.pool);
  memcpy(layer->padding, m.padding, sizeof layer->padding);
  memcpy(layer->pool_padding, m.pool_padding, sizeof layer->pool_padding);
  layer->pool_stride = m.pool_stride; /* 0 when absent: the pool */
  layer->ceil_mode = m.ceil_mode;
  if (m.stride > 0) layer->stride = m.stride;
  if (m.dilation > 0) layer->dilation = m.dilation;
  if (m.groups > 0) layer->groups = m.groups;
  layer->has_residual = m.residual;
  if (m.activation == CP_META_ACT_RELU) {
    layer->activation = CONVPOOL_ACTIVATION_RELU;
  } else if (m.activation == CP_META_ACT_CLAMP) {
    layer->activation = CONVPOOL_ACTIVATION_CLAMP;
    layer->clamp_min = m.clamp_min, layer->clamp_max = m.clamp_max;
  }
  c->batch = m.batch, c->height = m.height, c->width = m.width;
  c->bias = m.bias, c->seed = m.seed;
}

/* meta.json of a dump: every key, the pool stride as used. */
static void write_meta(const cli *c) {
  const convpool_layer *layer = &c->layer;
  cp_meta m = {.batch = c->batch,
               .in_channels = layer->c_in,
               .out_channels = layer->c_out,
               .height = c->height,
               .width = c->width,
               .filter = layer->k,
               .pool = layer->pool,
               .seed = c->seed,
               .bias = c->bias,
               .ceil_mode = layer->ceil_mode,
               .pool_stride = layer->pool_stride > 0 ? layer->pool_stride : layer->pool,
               .stride = layer->stride,
               .dilation = layer->dilation,
               .groups = layer->groups,
               .residual = layer->has_residual != 0};
  memcpy(m.padding, layer->padding, sizeof m.padding);
  memcpy(m.pool_padding, layer->pool_padding, sizeof m.pool_padding);
  m.activation = layer->activation == CONVPOOL_ACTIVATION_RELU    ? CP_META_ACT_RELU
                 : layer->activation == CONVPOOL_ACTIVATION_CLAMP ? CP_META_ACT_CLAMP
                                                                  : CP_META_ACT_NONE;
  if (m.activation == CP_META_ACT_CLAMP)
    m.clamp_min = layer->clamp_min, m.clamp_max = layer->clamp_max;
  snprintf(m.dtype, sizeof m.dtype, "%s", convpool_dtype_name(layer->dtype));
  char text[1024];
  int n = cp_meta_format(&m, text, sizeof text);
  if (n < 0) die(1, "cannot format meta.json");
  write_file(c->dump_dir, "meta.json", text, (size_t)n);
}

/* ---- the run ---- */

/*
 * Sizes of the tensors. The library validates the layer and the input shape
 * and gives dst's (and the residual's, the conv output) before anything
 * large is allocated (a filter larger than the input would otherwise make an
 * absurd w). The groups divide c_in once the library has checked them.
 */
static void size_tensors(const cli *c, tensors *t) {
  const convpool_layer *layer = &c->layer;
  int64_t y_shape[4], r_shape[4];
  check(convpool_layer_output_shape(layer, c->batch, c->height, c->width, y_shape, &t->y_bytes));
  if (layer->has_residual)
    check(convpool_layer_conv_shape(layer, c->batch, c->height, c->width, r_shape, &t->r_bytes));
  const size_t es = convpool_dtype_size(layer->dtype);
  const int64_t x_shape[4] = {c->batch, layer->c_in, c->height, c->width};
  const int64_t w_shape[4] = {layer->c_out, layer->c_in / layer->groups, layer->k, layer->k};
  t->x_bytes = tensor_bytes("x", x_shape, es);
  t->w_bytes = tensor_bytes("w", w_shape, es);
  t->bias_bytes = c->bias ? (size_t)layer->c_out * es : 0; /* <= w_bytes */
}

/* The weights and bias: read (--load-dir) or generated. */
static void make_weights(const cli *c, tensors *t) {
  const convpool_dtype dtype = c->layer.dtype;
  const size_t es = convpool_dtype_size(dtype);
  const uint64_t stream = (uint64_t)c->seed * 4;
  if (c->load_dir != NULL) {
    t->w = read_file(c->load_dir, "w.bin", t->w_bytes, 1, NULL);
    if (c->bias) t->bias = read_file(c->load_dir, "bias.bin", t->bias_bytes, 1, NULL);
  } else {
    t->w = generate(t->w_bytes / es, dtype, stream + 2, "w");
    if (c->bias) t->bias = generate(t->bias_bytes / es, dtype, stream + 3, "bias");
  }
}

/* The input, and the residual of a layer with one: read (--load-dir) or
   generated (tensor 1 and 4 of the seed). */
static void make_input(const cli *c, tensors *t) {
  const convpool_dtype dtype = c->layer.dtype;
  const size_t es = convpool_dtype_size(dtype);
  if (c->load_dir != NULL)
    t->x = read_file(c->load_dir, "x.bin", t->x_bytes, 1, NULL);
  else
    t->x = generate(t->x_bytes / es, dtype, (uint64_t)c->seed * 4 + 1, "x");
  if (!c->layer.has_residual) return;
  if (c->load_dir != NULL)
    t->r = read_file(c->load_dir, "residual.bin", t->r_bytes, 1, NULL);
  else
    t->r = generate(t->r_bytes / es, dtype, (uint64_t)c->seed * 4 + 4, "residual");
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Warm-up runs, then the timed ones (--load-dir: one run, no warm-up). */
static void run_timed(const cli *c, convpool_op *op, tensors *t, timing *tm) {
  const int runs = c->load_dir != NULL ? 1 : c->iters;
  const int warm = c->load_dir != NULL ? 0 : c->warmup;
  for (int i = 0; i < warm; i++)
    check(
        convpool_op_run_residual(op, t->x, c->batch, c->height, c->width, t->r, t->y, t->y_bytes));
  double *us = xmalloc((size_t)runs * sizeof(double), "timings");
  double sum = 0;
  for (int i = 0; i < runs; i++) {
    const double s = now_us();
    check(
        convpool_op_run_residual(op, t->x, c->batch, c->height, c->width, t->r, t->y, t->y_bytes));
    us[i] = now_us() - s;
    sum += us[i];
  }
  qsort(us, (size_t)runs, sizeof(double), cmp_double);
  tm->min = us[0];
  tm->median = runs % 2 ? us[runs / 2] : 0.5 * (us[runs / 2 - 1] + us[runs / 2]);
  tm->avg = sum / runs;
  free(us);
}

/* Multiply-adds of the layer, counted as 2 flops, over the conv output
   (the library's shape; the sizes were validated), each over C_in / G
   channels. */
static double layer_flops(const cli *c) {
  const convpool_layer *l = &c->layer;
  int64_t conv[4];
  check(convpool_layer_conv_shape(l, c->batch, c->height, c->width, conv, NULL));
  return 2.0 * (double)c->batch * (double)l->c_out * (double)conv[2] * (double)conv[3] *
         (double)(l->c_in / l->groups) * (double)l->k * (double)l->k;
}

/* The bytes a run moves at least: x, w, bias, the residual and out once. */
static double moved_bytes(const tensors *t) {
  return (double)t->x_bytes + (double)t->w_bytes + (double)t->bias_bytes + (double)t->r_bytes +
         (double)t->y_bytes;
}

/* The [INFO] lines. */
static void report(const cli *c, const convpool_plan_info *plan, const tensors *t,
                   const timing *tm) {
  const convpool_layer *l = &c->layer;
  printf("[INFO] min=%.1f us median=%.1f us avg=%.1f us (threads=%d, items=%lld)\n", tm->min,
         tm->median, tm->avg, plan->threads, (long long)plan->items);
  printf(
      "[INFO] %.1f GFLOP/s, %.2f GB/s (%s, %s, %lldx%lldx%lldx%lld -> %lld, k=%lld, pool=%lld)\n",
      layer_flops(c) / tm->median * 1e-3, moved_bytes(t) / tm->median * 1e-3,
      convpool_dtype_name(l->dtype), plan->kernel, (long long)c->batch, (long long)l->c_in,
      (long long)c->height, (long long)c->width, (long long)l->c_out, (long long)l->k,
      (long long)l->pool);
}

/* The peak of the instructions the plan's kernel uses, measured on `threads` threads. */
static double fma_peak(const char *isa, int threads) {
  if (strcmp(isa, "avx512bf16") == 0) return peak_fma(PEAK_BF16_AVX512, threads, 0.2, 3);
  if (strcmp(isa, "avx512f") == 0) return peak_fma(PEAK_FP32_AVX512, threads, 0.2, 3);
  if (strcmp(isa, "avx2") == 0) return peak_fma(PEAK_FP32_AVX2, threads, 0.2, 3);
  return 0;
}

/* The [PROFILE] lines (--profile): phases of the last run, the measured peak. */
static void report_profile(const convpool_op *op, const cli *c, const convpool_plan_info *plan,
                           const tensors *t, const timing *tm) {
  convpool_run_stats rs;
  check(convpool_op_last_run_stats(op, &rs));
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double busy = rs.pack_seconds + rs.compute_seconds + rs.epilogue_seconds;
  const double peak = fma_peak(plan->isa, plan->threads);
  const double gflops = layer_flops(c) / tm->median * 1e-3;
  printf("[PROFILE] weight pack   %10.1f us once per operator (%zu packed bytes)\n", tm->pack,
         plan->packed_weight_bytes);
  printf("[PROFILE] last run      %10.1f us wall, %d threads, %lld items\n", rs.wall_seconds * 1e6,
         rs.threads, (long long)rs.items);
  printf("[PROFILE]   input pack  %10.1f us thread time (%4.1f%%)\n", rs.pack_seconds * 1e6,
         100.0 * rs.pack_seconds / busy);
  printf("[PROFILE]   compute     %10.1f us thread time (%4.1f%%)\n", rs.compute_seconds * 1e6,
         100.0 * rs.compute_seconds / busy);
  printf("[PROFILE]   epilogue    %10.1f us thread time (%4.1f%%)\n", rs.epilogue_seconds * 1e6,
         100.0 * rs.epilogue_seconds / busy);
  printf(
      "[PROFILE] median run    %.1f GFLOP/s = %.1f%% of the measured %s peak %.1f GFLOP/s "
      "(%d threads; no peak loop for the portable kernel)\n",
      gflops, peak > 0 ? 100.0 * gflops / peak : 0.0, plan->isa, peak, plan->threads);
  printf(
      "[PROFILE] bytes moved   %.0f (x %zu, w %zu, bias %zu, residual %zu, out %zu) = %.2f "
      "GB/s\n",
      moved_bytes(t), t->x_bytes, t->w_bytes, t->bias_bytes, t->r_bytes, t->y_bytes,
      moved_bytes(t) / tm->median * 1e-3);
  printf("[PROFILE] scratch       %zu bytes per thread; peak RSS %ld KiB\n",
         plan->scratch_bytes_per_thread, ru.ru_maxrss);
}

/* The files of --dump-dir, or out.bin of --load-dir. */
static void write_outputs(const cli *c, const tensors *t) {
  if (c->dump_dir != NULL) {
    if (mkdir(c->dump_dir, 0777) != 0 && errno != EEXIST)
      die(1, "cannot create %s: %s", c->dump_dir, strerror(errno));
    write_file(c->dump_dir, "x.bin", t->x, t->x_bytes);
    write_file(c->dump_dir, "w.bin", t->w, t->w_bytes);
    if (c->bias) write_file(c->dump_dir, "bias.bin", t->bias, t->bias_bytes);
    if (c->layer.has_residual) write_file(c->dump_dir, "residual.bin", t->r, t->r_bytes);
    write_file(c->dump_dir, "out.bin", t->y, t->y_bytes);
    write_meta(c);
  }
  if (c->load_dir != NULL) write_file(c->load_dir, "out.bin", t->y, t->y_bytes);
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f) then fails the write with EFBIG, reported
     like any other write failure, instead of killing the process. */
  signal(SIGXFSZ, SIG_IGN);
  cli c;
  parse_args(argc, argv, &c);
  if (c.load_dir != NULL) load_meta(&c);

  tensors t = {0};
  timing tm = {0};
  size_tensors(&c, &t);
  make_input(&c, &t); /* --load-dir: x.bin, residual.bin, w.bin, bias.bin are checked in order */
  make_weights(&c, &t);
  if (!c.any_shape) { /* its one shape: auto packs the weights of that shape's algorithm alone */
    c.options.expected_batch = c.batch, c.options.expected_height = c.height;
    c.options.expected_width = c.width;
  }
  const double t0 = now_us();
  check(convpool_op_create_layer(&c.layer, t.w, t.bias, &c.options, &g_op));
  tm.pack = now_us() - t0;
  if (c.dump_dir == NULL) { /* the operator holds its packed copy */
    free(t.w);
    free(t.bias);
    t.w = t.bias = NULL;
  }
  convpool_plan_info plan;
  check(convpool_op_plan(g_op, c.batch, c.height, c.width, &plan));
  if (c.show_tiling) {
    char text[4096];
    check(convpool_op_describe(g_op, c.batch, c.height, c.width, text, sizeof text));
    fputs(text, stdout);
  }
  t.y = xmalloc(t.y_bytes, "out");
  run_timed(&c, g_op, &t, &tm);
  report(&c, &plan, &t, &tm);
  if (c.profile) report_profile(g_op, &c, &plan, &t, &tm);

  /* The workers end before any file is written, so a failed write exits
     with no thread running. */
  convpool_op_destroy(g_op);
  g_op = NULL;
  write_outputs(&c, &t);
  free(t.y);
  free(t.r);
  free(t.bias);
  free(t.w);
  free(t.x);
  return 0;
}
