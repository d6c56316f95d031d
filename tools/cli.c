/*
 * convpool: run the fused Conv2D + bias + MaxPool layer from the command line,
 * time it, dump its tensors, or run it on tensors read from a directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <float.h>
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
#include "half.h"
#include "meta.h"
#include "peak.h"

#define EXIT_USAGE 2

/* The largest conv padding the CLI takes (the library refuses more). */
#define PAD_MAX ((int64_t)1 << 24)
/* The largest count, size or pool stride the CLI takes. */
#define BIG ((int64_t)1 << 40)
/* Rounded to float32, numbers from here on overflow (2^128 - 2^103). */
#define FLOAT_OVERFLOW 340282356779733661637539395458142568448.0

static const char *const side_names[4] = {"top", "left", "bottom", "right"};

typedef struct cli {
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, filter, pool, seed;
  int bias, threads, rows_per_item, warmup, iters, show_tiling, profile;
  convpool_algo algo;
  const char *dump_dir, *load_dir;
  /* the layer beyond the shape (convpool_layer) */
  int64_t padding[4]; /* conv zero padding: top, left, bottom, right */
  convpool_activation activation;
  float clamp_min, clamp_max; /* CONVPOOL_ACTIVATION_CLAMP */
  int64_t pool_stride;        /* 0: the pool */
  int64_t pool_padding[4];    /* top, left, bottom, right */
  int ceil_mode;
} cli;

static void usage(FILE *f) {
  fprintf(f,
          "usage: convpool [options]\n"
          "Fused Conv2D (stride 1, zero padding) + bias + activation + MaxPool on NCHW\n"
          "tensors.\n"
          "  --dtype float32|float16|bfloat16  element type (default float32)\n"
          "  --batch N                 batch size (default 1)\n"
          "  --in-channels N           C_in (default 256)\n"
          "  --out-channels N          C_out (default 256)\n"
          "  --height N --width N      input size (default 224 x 224)\n"
          "  --filter K                filter size K x K (default 3)\n"
          "  --padding N | T,L,B,R     conv zero padding, all sides or top,left,bottom,right\n"
          "                            (each 0..16777216; default 0)\n"
          "  --activation none|relu|relu6|clamp:MIN,MAX\n"
          "                            applied to conv + bias before the pooling (default\n"
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
          "  --impl auto|sr|im2col|winograd  algorithm (default auto; winograd: k = 3)\n"
          "  --rows-per-item N         pooled rows per work item (default: planned)\n"
          "  --warmup N --iters N      timing runs (default 2 and 10)\n"
          "  --seed S                  data seed (default 0)\n"
          "  --dump-dir DIR            write x.bin w.bin [bias.bin] out.bin meta.json\n"
          "  --load-dir DIR            read meta.json x.bin w.bin [bias.bin], write out.bin\n"
          "                            (meta.json gives the layer: the shape and layer\n"
          "                            flags are not used)\n"
          "                            (each file written goes to a new temporary file that\n"
          "                            is renamed over it: a link there is replaced, not\n"
          "                            followed)\n"
          "  --show-tiling             print the plan\n"
          "  --profile                 print time per phase, GFLOP/s and bytes moved\n"
          "  --help, --version\n"
          "Exit status: 0 success, 2 invalid input, 1 other failure.\n");
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

static convpool_dtype parse_dtype(const char *text) {
  if (text == NULL) die(EXIT_USAGE, "--dtype needs a value");
  if (strcmp(text, "float32") == 0) return CONVPOOL_FLOAT32;
  if (strcmp(text, "float16") == 0) return CONVPOOL_FLOAT16;
  if (strcmp(text, "bfloat16") == 0) return CONVPOOL_BFLOAT16;
  die(EXIT_USAGE, "--dtype = '%s' is not one of float32, float16, bfloat16", text);
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

/* --padding / --pool-padding: N (every side) or T,L,B,R, each in lo..hi. */
static void parse_sides(const char *flag, const char *text, int64_t lo, int64_t hi,
                        int64_t out[4]) {
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
    int64_t v;
    if (parse_int_piece(piece[i], len[i], &v) != 0) {
      if (n == 1) die(EXIT_USAGE, "%s = '%s' is not an integer", flag, text);
      die(EXIT_USAGE, "%s = '%s': %s '%.*s' is not an integer", flag, text, side_names[i],
          (int)len[i], piece[i]);
    }
    if (v < lo || v > hi) {
      if (n == 1)
        die(EXIT_USAGE, "%s = %lld must be in %lld..%lld", flag, (long long)v, (long long)lo,
            (long long)hi);
      die(EXIT_USAGE, "%s = '%s': %s = %lld must be in %lld..%lld", flag, text, side_names[i],
          (long long)v, (long long)lo, (long long)hi);
    }
    out[i] = v;
  }
  if (n == 1) out[1] = out[2] = out[3] = out[0];
}

/* A clamp bound of --activation: a finite float (strtod, rounded to nearest). */
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
  if (isnan(d)) die(EXIT_USAGE, "--activation = '%s': %s is NaN", text, what);
  if (!(d > -FLOAT_OVERFLOW && d < FLOAT_OVERFLOW))
    die(EXIT_USAGE, "--activation = '%s': %s '%s' is not a finite float32", text, what, buf);
  return d > FLT_MAX ? FLT_MAX : d < -FLT_MAX ? -FLT_MAX : (float)d;
}

/* --activation none|relu|relu6|clamp:MIN,MAX */
static void parse_activation(const char *text, cli *c) {
  if (text == NULL)
    die(EXIT_USAGE, "--activation needs a value (none, relu, relu6, clamp:MIN,MAX)");
  c->clamp_min = -INFINITY, c->clamp_max = INFINITY;
  if (strcmp(text, "none") == 0) {
    c->activation = CONVPOOL_ACTIVATION_NONE;
  } else if (strcmp(text, "relu") == 0) {
    c->activation = CONVPOOL_ACTIVATION_RELU;
  } else if (strcmp(text, "relu6") == 0) {
    c->activation = CONVPOOL_ACTIVATION_CLAMP;
    c->clamp_min = 0.0f, c->clamp_max = 6.0f;
  } else if (strncmp(text, "clamp:", 6) == 0) {
    const char *lo = text + 6, *comma = strchr(lo, ',');
    if (comma == NULL || strchr(comma + 1, ',') != NULL)
      die(EXIT_USAGE, "--activation = '%s' must be clamp:MIN,MAX (two numbers)", text);
    const float mn = parse_bound(text, "MIN", lo, (size_t)(comma - lo));
    const float mx = parse_bound(text, "MAX", comma + 1, strlen(comma + 1));
    if (mn > mx)
      die(EXIT_USAGE, "--activation = '%s': MIN %g is larger than MAX %g", text, (double)mn,
          (double)mx);
    c->activation = CONVPOOL_ACTIVATION_CLAMP;
    c->clamp_min = mn, c->clamp_max = mx;
  } else {
    die(EXIT_USAGE, "--activation = '%s' is not one of none, relu, relu6, clamp:MIN,MAX", text);
  }
}

/* A directory argument; an empty one (which would name the filesystem root
   once "/x.bin" is appended) is refused. */
static const char *parse_dir(const char *flag, const char *text) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a directory", flag);
  if (text[0] == '\0') die(EXIT_USAGE, "%s is empty: give a directory (e.g. %s .)", flag, flag);
  return text;
}

static void parse_args(int argc, char **argv, cli *c) {
  const int64_t big = BIG;
  *c = (cli){.dtype = CONVPOOL_FLOAT32,
             .batch = 1,
             .c_in = 256,
             .c_out = 256,
             .height = 224,
             .width = 224,
             .filter = 3,
             .pool = 2,
             .seed = 0,
             .bias = 1,
             .threads = 0,
             .rows_per_item = 0,
             .warmup = 2,
             .iters = 10,
             .algo = CONVPOOL_ALGO_AUTO,
             .activation = CONVPOOL_ACTIVATION_NONE,
             .clamp_min = -INFINITY,
             .clamp_max = INFINITY};
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
      c->dtype = parse_dtype(v);
    } else if (TAKE("--batch")) {
      c->batch = parse_int(a, v, 1, big);
    } else if (TAKE("--in-channels")) {
      c->c_in = parse_int(a, v, 1, big);
    } else if (TAKE("--out-channels")) {
      c->c_out = parse_int(a, v, 1, big);
    } else if (TAKE("--height")) {
      c->height = parse_int(a, v, 1, big);
    } else if (TAKE("--width")) {
      c->width = parse_int(a, v, 1, big);
    } else if (TAKE("--filter")) {
      c->filter = parse_int(a, v, 1, big);
    } else if (TAKE("--pool")) {
      c->pool = parse_int(a, v, 1, big);
    } else if (TAKE("--padding")) {
      parse_sides(a, v, 0, PAD_MAX, c->padding);
    } else if (TAKE("--activation")) {
      parse_activation(v, c);
    } else if (TAKE("--pool-stride")) {
      c->pool_stride = parse_int(a, v, 1, big);
    } else if (TAKE("--pool-padding")) {
      parse_sides(a, v, 0, big, c->pool_padding); /* < pool: the library checks */
    } else if (strcmp(a, "--ceil-mode") == 0) {
      c->ceil_mode = 1;
    } else if (strcmp(a, "--bias") == 0) {
      c->bias = 1;
    } else if (strcmp(a, "--no-bias") == 0) {
      c->bias = 0;
    } else if (TAKE("--threads")) {
      c->threads = (int)parse_int(a, v, 0, 1024); /* 0: the library's usable CPUs */
    } else if (TAKE("--rows-per-item")) {
      c->rows_per_item = (int)parse_int(a, v, 1, 1 << 30);
    } else if (TAKE("--warmup")) {
      c->warmup = (int)parse_int(a, v, 0, 1000000);
    } else if (TAKE("--iters")) {
      c->iters = (int)parse_int(a, v, 1, 1000000);
    } else if (TAKE("--seed")) {
      c->seed = parse_int(a, v, 0, big);
    } else if (TAKE("--impl")) {
      if (v == NULL) die(EXIT_USAGE, "--impl needs a value");
      if (convpool_algo_from_name(v, &c->algo) != CONVPOOL_SUCCESS)
        die(EXIT_USAGE, "--impl = %s", convpool_last_error());
    } else if (TAKE("--dump-dir")) {
      c->dump_dir = parse_dir(a, v);
    } else if (TAKE("--load-dir")) {
      c->load_dir = parse_dir(a, v);
    } else if (strcmp(a, "--show-tiling") == 0) {
      c->show_tiling = 1;
    } else if (strcmp(a, "--profile") == 0) {
      c->profile = 1;
    } else {
      die(EXIT_USAGE, "unknown option '%s' (see --help)", a);
    }
#undef TAKE
  }
  if (c->dump_dir != NULL && c->load_dir != NULL)
    die(EXIT_USAGE, "--dump-dir and --load-dir cannot be used together");
}

/* ---- data ---- */

/* The documented generator: uniform [0, 1) with 24 random bits per value. */
static float gen_value(uint64_t stream, uint64_t i) {
  uint64_t z = stream * 0xD1B54A32D192ED03ull + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

static void fill(void *data, size_t n, convpool_dtype dtype, uint64_t stream) {
  for (size_t i = 0; i < n; i++) {
    float v = gen_value(stream, i);
    if (dtype == CONVPOOL_FLOAT32)
      ((float *)data)[i] = v;
    else if (dtype == CONVPOOL_BFLOAT16)
      ((uint16_t *)data)[i] = cp_float_to_bf16(v);
    else
      ((uint16_t *)data)[i] = cp_float_to_half(v);
  }
}

static void *xmalloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) die(1, "cannot allocate %zu bytes for %s", bytes, what);
  return p;
}

static size_t count(const char *what, int n, const int64_t *dims, size_t elem) {
  size_t c = elem;
  for (int i = 0; i < n; i++)
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

static void load_meta(cli *c) {
  size_t len;
  char *text = read_file(c->load_dir, "meta.json", 1 << 16, 0, &len);
  cp_meta m;
  char err[256];
  if (cp_meta_parse(text, len, &m, err, sizeof err) != 0) die(EXIT_USAGE, "%s", err);
  free(text);
  if (strcmp(m.dtype, "float32") == 0)
    c->dtype = CONVPOOL_FLOAT32;
  else if (strcmp(m.dtype, "float16") == 0)
    c->dtype = CONVPOOL_FLOAT16;
  else if (strcmp(m.dtype, "bfloat16") == 0)
    c->dtype = CONVPOOL_BFLOAT16;
  else
    die(EXIT_USAGE, "meta.json: dtype = '%s' is not one of float32, float16, bfloat16", m.dtype);
  c->batch = m.batch, c->c_in = m.in_channels, c->c_out = m.out_channels;
  c->height = m.height, c->width = m.width, c->filter = m.filter, c->pool = m.pool;
  c->bias = m.bias, c->seed = m.seed;
  const char *names[] = {"batch", "in_channels", "out_channels", "height",
                         "width", "filter",      "pool"};
  int64_t vals[] = {m.batch, m.in_channels, m.out_channels, m.height, m.width, m.filter, m.pool};
  for (int i = 0; i < 7; i++)
    if (vals[i] < 1)
      die(EXIT_USAGE, "meta.json: %s = %lld must be >= 1", names[i], (long long)vals[i]);
  /* The layer keys (absent: the defaults, as meta.h says). Limits as for the flags; the
     library checks the rest (pool_padding < pool, clamp min <= max). */
  for (int s = 0; s < 4; s++) {
    if (m.padding[s] > PAD_MAX)
      die(EXIT_USAGE, "meta.json: padding %s = %lld must be in 0..%lld", side_names[s],
          (long long)m.padding[s], (long long)PAD_MAX);
    if (m.pool_padding[s] > BIG)
      die(EXIT_USAGE, "meta.json: pool_padding %s = %lld must be in 0..%lld", side_names[s],
          (long long)m.pool_padding[s], (long long)BIG);
    c->padding[s] = m.padding[s];
    c->pool_padding[s] = m.pool_padding[s];
  }
  if (m.pool_stride > BIG)
    die(EXIT_USAGE, "meta.json: pool_stride = %lld must be in 1..%lld", (long long)m.pool_stride,
        (long long)BIG);
  c->pool_stride = m.pool_stride; /* 0 when absent: the pool */
  c->ceil_mode = m.ceil_mode;
  c->activation = m.activation == CP_META_ACT_RELU    ? CONVPOOL_ACTIVATION_RELU
                  : m.activation == CP_META_ACT_CLAMP ? CONVPOOL_ACTIVATION_CLAMP
                                                      : CONVPOOL_ACTIVATION_NONE;
  c->clamp_min = -INFINITY, c->clamp_max = INFINITY;
  if (c->activation == CONVPOOL_ACTIVATION_CLAMP)
    c->clamp_min = m.clamp_min, c->clamp_max = m.clamp_max;
}

/* ---- timing ---- */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The peak of the instructions the plan's kernel uses, measured on `threads` threads. */
static double cli_fma_peak(const char *isa, int threads) {
  if (strcmp(isa, "avx512bf16") == 0) return peak_fma(PEAK_BF16_AVX512, threads, 0.2, 3);
  if (strcmp(isa, "avx512f") == 0) return peak_fma(PEAK_FP32_AVX512, threads, 0.2, 3);
  if (strcmp(isa, "avx2") == 0) return peak_fma(PEAK_FP32_AVX2, threads, 0.2, 3);
  return 0;
}

static void check(convpool_status st) {
  if (st == CONVPOOL_SUCCESS) return;
  die(st == CONVPOOL_INVALID_ARGUMENT || st == CONVPOOL_UNSUPPORTED ? EXIT_USAGE : 1, "%s (%s)",
      convpool_last_error(), convpool_status_string(st));
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f) then fails the write with EFBIG, reported
     like any other write failure, instead of killing the process. */
  signal(SIGXFSZ, SIG_IGN);
  cli c;
  parse_args(argc, argv, &c);
  if (c.load_dir != NULL) load_meta(&c);
  const size_t es = convpool_dtype_size(c.dtype);

  convpool_options opt;
  convpool_options_init(&opt);
  opt.threads = c.threads;
  opt.algo = c.algo;
  opt.rows_per_item = c.rows_per_item;

  convpool_layer layer;
  convpool_layer_init(&layer, c.dtype, c.c_out, c.c_in, c.filter, c.pool);
  memcpy(layer.padding, c.padding, sizeof layer.padding);
  layer.activation = c.activation;
  layer.clamp_min = c.clamp_min, layer.clamp_max = c.clamp_max;
  layer.pool_stride = c.pool_stride;
  memcpy(layer.pool_padding, c.pool_padding, sizeof layer.pool_padding);
  layer.ceil_mode = c.ceil_mode;

  /* Validate the whole shape before any large allocation: byte counts, and a
     filter that fits the padded input (so that w is not absurdly large). The
     library validates the layer at create and gives the output shape. */
  const int64_t xd[4] = {c.batch, c.c_in, c.height, c.width};
  const int64_t wd[4] = {c.c_out, c.c_in, c.filter, c.filter};
  const size_t x_bytes = count("x", 4, xd, es), w_bytes = count("w", 4, wd, es);
  const size_t b_bytes = (size_t)c.c_out * es;
  /* no overflow: sizes <= 2^62, pads <= 2^24 */
  const int64_t padded_h = c.height + c.padding[0] + c.padding[2];
  const int64_t padded_w = c.width + c.padding[1] + c.padding[3];
  if (padded_h < c.filter || padded_w < c.filter) {
    if (padded_h == c.height && padded_w == c.width)
      die(EXIT_USAGE, "input %lldx%lld is smaller than the filter %lld", (long long)c.height,
          (long long)c.width, (long long)c.filter);
    die(EXIT_USAGE, "padded input %lldx%lld is smaller than the filter %lld", (long long)padded_h,
        (long long)padded_w, (long long)c.filter);
  }
  const int64_t oh = padded_h - c.filter + 1, ow = padded_w - c.filter + 1; /* conv output */

  void *x = NULL, *w, *bias = NULL;
  if (c.load_dir != NULL) {
    x = read_file(c.load_dir, "x.bin", x_bytes, 1, NULL);
    w = read_file(c.load_dir, "w.bin", w_bytes, 1, NULL);
    if (c.bias) bias = read_file(c.load_dir, "bias.bin", b_bytes, 1, NULL);
  } else {
    w = xmalloc(w_bytes, "w");
    fill(w, w_bytes / es, c.dtype, (uint64_t)c.seed * 4 + 2);
    if (c.bias) {
      bias = xmalloc(b_bytes, "bias");
      fill(bias, (size_t)c.c_out, c.dtype, (uint64_t)c.seed * 4 + 3);
    }
  }

  double t0 = now_us();
  convpool_op *op = NULL;
  check(convpool_op_create_layer(&layer, w, bias, &opt, &op));
  g_op = op;
  const double pack_us = now_us() - t0;
  int64_t yd[4];
  size_t y_bytes = 0;
  check(convpool_op_output_shape(op, c.batch, c.height, c.width, yd, &y_bytes));
  if (c.load_dir == NULL) {
    x = xmalloc(x_bytes, "x");
    fill(x, x_bytes / es, c.dtype, (uint64_t)c.seed * 4 + 1);
  }
  if (c.dump_dir == NULL) { /* the operator holds its packed copy */
    free(w);
    free(bias);
    w = bias = NULL;
  }
  convpool_plan_info plan;
  check(convpool_op_plan(op, c.batch, c.height, c.width, &plan));
  if (c.show_tiling) {
    char text[4096];
    check(convpool_op_describe(op, c.batch, c.height, c.width, text, sizeof text));
    fputs(text, stdout);
  }
  void *y = xmalloc(y_bytes, "out");

  const int runs = c.load_dir != NULL ? 1 : c.iters;
  const int warm = c.load_dir != NULL ? 0 : c.warmup;
  for (int i = 0; i < warm; i++)
    check(convpool_op_run(op, x, c.batch, c.height, c.width, y, y_bytes));
  double *t = xmalloc((size_t)runs * sizeof(double), "timings");
  for (int i = 0; i < runs; i++) {
    double s = now_us();
    check(convpool_op_run(op, x, c.batch, c.height, c.width, y, y_bytes));
    t[i] = now_us() - s;
  }
  double sum = 0;
  for (int i = 0; i < runs; i++) sum += t[i];
  qsort(t, (size_t)runs, sizeof(double), cmp_double);
  const double median = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
  const double flops = 2.0 * (double)c.batch * (double)c.c_out * (double)oh * (double)ow *
                       (double)c.c_in * (double)c.filter * (double)c.filter;
  const double bytes =
      (double)x_bytes + (double)w_bytes + (c.bias ? (double)b_bytes : 0) + (double)y_bytes;
  printf("[INFO] min=%.1f us median=%.1f us avg=%.1f us (threads=%d, items=%lld)\n", t[0], median,
         sum / runs, plan.threads, (long long)plan.items);
  printf(
      "[INFO] %.1f GFLOP/s, %.2f GB/s (%s, %s, %lldx%lldx%lldx%lld -> %lld, k=%lld, pool=%lld)\n",
      flops / median * 1e-3, bytes / median * 1e-3, convpool_dtype_name(c.dtype), plan.kernel,
      (long long)c.batch, (long long)c.c_in, (long long)c.height, (long long)c.width,
      (long long)c.c_out, (long long)c.filter, (long long)c.pool);
  if (c.profile) {
    convpool_run_stats rs;
    check(convpool_op_last_run_stats(op, &rs));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double busy = rs.pack_seconds + rs.compute_seconds + rs.epilogue_seconds;
    const double peak = cli_fma_peak(plan.isa, plan.threads);
    printf("[PROFILE] weight pack   %10.1f us once per operator (%zu packed bytes)\n", pack_us,
           plan.packed_weight_bytes);
    printf("[PROFILE] last run      %10.1f us wall, %d threads, %lld items\n",
           rs.wall_seconds * 1e6, rs.threads, (long long)rs.items);
    printf("[PROFILE]   input pack  %10.1f us thread time (%4.1f%%)\n", rs.pack_seconds * 1e6,
           100.0 * rs.pack_seconds / busy);
    printf("[PROFILE]   compute     %10.1f us thread time (%4.1f%%)\n", rs.compute_seconds * 1e6,
           100.0 * rs.compute_seconds / busy);
    printf("[PROFILE]   epilogue    %10.1f us thread time (%4.1f%%)\n", rs.epilogue_seconds * 1e6,
           100.0 * rs.epilogue_seconds / busy);
    printf(
        "[PROFILE] median run    %.1f GFLOP/s = %.1f%% of the measured %s peak %.1f GFLOP/s "
        "(%d threads; no peak loop for the portable kernel)\n",
        flops / median * 1e-3, peak > 0 ? 100.0 * flops / median * 1e-3 / peak : 0.0, plan.isa,
        peak, plan.threads);
    printf("[PROFILE] bytes moved   %.0f (x %zu, w %zu, bias %zu, out %zu) = %.2f GB/s\n", bytes,
           x_bytes, w_bytes, c.bias ? b_bytes : (size_t)0, y_bytes, bytes / median * 1e-3);
    printf("[PROFILE] scratch       %zu bytes per thread; peak RSS %ld KiB\n",
           plan.scratch_bytes_per_thread, ru.ru_maxrss);
  }

  /* The workers end before any file is written, so a failed write exits
     with no thread running. */
  convpool_op_destroy(op);
  g_op = NULL;
  if (c.dump_dir != NULL) {
    if (mkdir(c.dump_dir, 0777) != 0 && errno != EEXIST)
      die(1, "cannot create %s: %s", c.dump_dir, strerror(errno));
    write_file(c.dump_dir, "x.bin", x, x_bytes);
    write_file(c.dump_dir, "w.bin", w, w_bytes);
    if (c.bias) write_file(c.dump_dir, "bias.bin", bias, b_bytes);
    write_file(c.dump_dir, "out.bin", y, y_bytes);
    cp_meta m = {.batch = c.batch,
                 .in_channels = c.c_in,
                 .out_channels = c.c_out,
                 .height = c.height,
                 .width = c.width,
                 .filter = c.filter,
                 .pool = c.pool,
                 .seed = c.seed,
                 .bias = c.bias,
                 .ceil_mode = c.ceil_mode,
                 .pool_stride = c.pool_stride > 0 ? c.pool_stride : c.pool};
    memcpy(m.padding, c.padding, sizeof m.padding);
    memcpy(m.pool_padding, c.pool_padding, sizeof m.pool_padding);
    m.activation = c.activation == CONVPOOL_ACTIVATION_RELU    ? CP_META_ACT_RELU
                   : c.activation == CONVPOOL_ACTIVATION_CLAMP ? CP_META_ACT_CLAMP
                                                               : CP_META_ACT_NONE;
    if (m.activation == CP_META_ACT_CLAMP) m.clamp_min = c.clamp_min, m.clamp_max = c.clamp_max;
    snprintf(m.dtype, sizeof m.dtype, "%s", convpool_dtype_name(c.dtype));
    char text[1024];
    int n = cp_meta_format(&m, text, sizeof text);
    if (n < 0) die(1, "cannot format meta.json");
    write_file(c.dump_dir, "meta.json", text, (size_t)n);
  }
  if (c.load_dir != NULL) write_file(c.load_dir, "out.bin", y, y_bytes);

  free(t);
  free(y);
  free(bias);
  free(w);
  free(x);
  return 0;
}
