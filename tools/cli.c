/*
 * convpool: run the fused Conv2D + bias + MaxPool layer from the command line,
 * time it, dump its tensors, or run it on tensors read from a directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

typedef struct cli {
  convpool_dtype dtype;
  int64_t batch, c_in, c_out, height, width, filter, pool, seed;
  int bias, threads, rows_per_item, warmup, iters, show_tiling, profile;
  convpool_algo algo;
  const char *dump_dir, *load_dir;
} cli;

static void usage(FILE *f) {
  fprintf(f,
          "usage: convpool [options]\n"
          "Fused Conv2D (stride 1, no padding) + bias + MaxPool on NCHW tensors.\n"
          "  --dtype float32|float16|bfloat16  element type (default float32)\n"
          "  --batch N                 batch size (default 1)\n"
          "  --in-channels N           C_in (default 256)\n"
          "  --out-channels N          C_out (default 256)\n"
          "  --height N --width N      input size (default 224 x 224)\n"
          "  --filter K                filter size K x K (default 3)\n"
          "  --pool P                  max pool P x P, stride P (default 2; 1 = none)\n"
          "  --bias | --no-bias        add a bias after the max (default on)\n"
          "  --threads N               threads; 0 = the usable CPUs (affinity and cgroup\n"
          "                            CPU quota), the default\n"
          "  --impl auto|sr|im2col|winograd  algorithm (default auto; winograd: k = 3)\n"
          "  --rows-per-item N         pooled rows per work item (default: planned)\n"
          "  --warmup N --iters N      timing runs (default 2 and 10)\n"
          "  --seed S                  data seed (default 0)\n"
          "  --dump-dir DIR            write x.bin w.bin [bias.bin] out.bin meta.json\n"
          "  --load-dir DIR            read meta.json x.bin w.bin [bias.bin], write out.bin\n"
          "                            (each file written goes to a new temporary file that\n"
          "                            is renamed over it: a link there is replaced, not\n"
          "                            followed)\n"
          "  --show-tiling             print the plan\n"
          "  --profile                 print time per phase, GFLOP/s and bytes moved\n"
          "  --help, --version\n"
          "Exit status: 0 success, 2 invalid input, 1 other failure.\n");
}

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("convpool: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

static int64_t parse_int(const char *flag, const char *text, int64_t lo, int64_t hi) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a value", flag);
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE)
    die(EXIT_USAGE, "%s = '%s' is not an integer", flag, text);
  if (v < lo || v > hi) die(EXIT_USAGE, "%s = %lld must be in %lld..%lld", flag, v, (long long)lo, (long long)hi);
  return v;
}

static convpool_dtype parse_dtype(const char *text) {
  if (text == NULL) die(EXIT_USAGE, "--dtype needs a value");
  if (strcmp(text, "float32") == 0) return CONVPOOL_FLOAT32;
  if (strcmp(text, "float16") == 0) return CONVPOOL_FLOAT16;
  if (strcmp(text, "bfloat16") == 0) return CONVPOOL_BFLOAT16;
  die(EXIT_USAGE, "--dtype = '%s' is not one of float32, float16, bfloat16", text);
}

/* A directory argument; an empty one (which would name the filesystem root
   once "/x.bin" is appended) is refused. */
static const char *parse_dir(const char *flag, const char *text) {
  if (text == NULL) die(EXIT_USAGE, "%s needs a directory", flag);
  if (text[0] == '\0') die(EXIT_USAGE, "%s is empty: give a directory (e.g. %s .)", flag, flag);
  return text;
}

static void parse_args(int argc, char **argv, cli *c) {
  const int64_t big = (int64_t)1 << 40;
  *c = (cli){CONVPOOL_FLOAT32, 1, 256, 256, 224, 224, 3, 2, 0, 1, 0, 0, 2, 10, 0, 0,
             CONVPOOL_ALGO_AUTO, NULL, NULL};
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
    if (dtype == CONVPOOL_FLOAT32) ((float *)data)[i] = v;
    else if (dtype == CONVPOOL_BFLOAT16) ((uint16_t *)data)[i] = cp_float_to_bf16(v);
    else ((uint16_t *)data)[i] = cp_float_to_half(v);
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
    if (n <= 0) err = n < 0 ? errno : EIO;
    else p += n, left -= (size_t)n;
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
  if (strcmp(m.dtype, "float32") == 0) c->dtype = CONVPOOL_FLOAT32;
  else if (strcmp(m.dtype, "float16") == 0) c->dtype = CONVPOOL_FLOAT16;
  else if (strcmp(m.dtype, "bfloat16") == 0) c->dtype = CONVPOOL_BFLOAT16;
  else die(EXIT_USAGE, "meta.json: dtype = '%s' is not one of float32, float16, bfloat16", m.dtype);
  c->batch = m.batch, c->c_in = m.in_channels, c->c_out = m.out_channels;
  c->height = m.height, c->width = m.width, c->filter = m.filter, c->pool = m.pool;
  c->bias = m.bias, c->seed = m.seed;
  const char *names[] = {"batch", "in_channels", "out_channels", "height", "width", "filter", "pool"};
  int64_t vals[] = {m.batch, m.in_channels, m.out_channels, m.height, m.width, m.filter, m.pool};
  for (int i = 0; i < 7; i++)
    if (vals[i] < 1) die(EXIT_USAGE, "meta.json: %s = %lld must be >= 1", names[i], (long long)vals[i]);
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

  /* Validate the whole shape before any large allocation. */
  const int64_t xd[4] = {c.batch, c.c_in, c.height, c.width};
  const int64_t wd[4] = {c.c_out, c.c_in, c.filter, c.filter};
  const size_t x_bytes = count("x", 4, xd, es), w_bytes = count("w", 4, wd, es);
  const size_t b_bytes = (size_t)c.c_out * es;
  if (c.height < c.filter || c.width < c.filter)
    die(EXIT_USAGE, "input %lldx%lld is smaller than the filter %lld", (long long)c.height,
        (long long)c.width, (long long)c.filter);
  const int64_t oh = c.height - c.filter + 1, ow = c.width - c.filter + 1;
  if (c.pool > oh || c.pool > ow)
    die(EXIT_USAGE, "pool = %lld is larger than the conv output %lldx%lld", (long long)c.pool,
        (long long)oh, (long long)ow);
  const int64_t yd[4] = {c.batch, c.c_out, oh / c.pool, ow / c.pool};
  const size_t y_bytes = count("out", 4, yd, es);

  void *x, *w, *bias = NULL;
  if (c.load_dir != NULL) {
    x = read_file(c.load_dir, "x.bin", x_bytes, 1, NULL);
    w = read_file(c.load_dir, "w.bin", w_bytes, 1, NULL);
    if (c.bias) bias = read_file(c.load_dir, "bias.bin", b_bytes, 1, NULL);
  } else {
    x = xmalloc(x_bytes, "x");
    w = xmalloc(w_bytes, "w");
    fill(x, x_bytes / es, c.dtype, (uint64_t)c.seed * 4 + 1);
    fill(w, w_bytes / es, c.dtype, (uint64_t)c.seed * 4 + 2);
    if (c.bias) {
      bias = xmalloc(b_bytes, "bias");
      fill(bias, (size_t)c.c_out, c.dtype, (uint64_t)c.seed * 4 + 3);
    }
  }

  double t0 = now_us();
  convpool_op *op = NULL;
  check(convpool_op_create(c.dtype, w, bias, c.c_out, c.c_in, c.filter, c.pool, &opt, &op));
  const double pack_us = now_us() - t0;
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
  for (int i = 0; i < warm; i++) check(convpool_op_run(op, x, c.batch, c.height, c.width, y, y_bytes));
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
  const double bytes = (double)x_bytes + (double)w_bytes + (c.bias ? (double)b_bytes : 0) +
                       (double)y_bytes;
  printf("[INFO] min=%.1f us median=%.1f us avg=%.1f us (threads=%d, items=%lld)\n", t[0], median,
         sum / runs, plan.threads, (long long)plan.items);
  printf("[INFO] %.1f GFLOP/s, %.2f GB/s (%s, %s, %lldx%lldx%lldx%lld -> %lld, k=%lld, pool=%lld)\n",
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
    printf("[PROFILE] median run    %.1f GFLOP/s = %.1f%% of the measured %s peak %.1f GFLOP/s "
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
  if (c.dump_dir != NULL) {
    if (mkdir(c.dump_dir, 0777) != 0 && errno != EEXIST)
      die(1, "cannot create %s: %s", c.dump_dir, strerror(errno));
    write_file(c.dump_dir, "x.bin", x, x_bytes);
    write_file(c.dump_dir, "w.bin", w, w_bytes);
    if (c.bias) write_file(c.dump_dir, "bias.bin", bias, b_bytes);
    write_file(c.dump_dir, "out.bin", y, y_bytes);
    cp_meta m = {{0}, c.batch, c.c_in, c.c_out, c.height, c.width, c.filter, c.pool, c.seed, c.bias};
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
