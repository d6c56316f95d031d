// convpool-bench: convpool against oneDNN and torch on the same layers.
//
// For every case (dtype, batch, C_in, C_out, H, W, K, pool) it times
//   ours            convpool_op_run (operator created once, weights packed),
//                   NCHW in, NCHW out; with --algos, once per algorithm
//                   (sr, im2col, auto), each its own operator;
//   oneDNN blocked  convolution (format_tag::any, bias) + max pooling on
//                   oneDNN's own blocked layouts, reorders excluded;
//   oneDNN NCHW     the same plus the src reorder NCHW -> blocked and the dst
//                   reorder blocked -> NCHW in every iteration;
//   torch           F.conv2d -> F.max_pool2d in a python subprocess;
// with the in-process systems interleaved (in a shuffled order) every
// iteration, and reports medians, ratios, GFLOP/s against an FMA peak it
// measures itself, GB/s and the peak RSS of child processes that run only one
// system. Results go to stdout, a Markdown file, a CSV file and (through
// bench/plot.py) a PNG chart.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "convpool.h"
#include "onednn_layer.hpp"
#include "peak.h"

#ifndef BENCH_SOURCE_DIR
#define BENCH_SOURCE_DIR "bench"
#endif

namespace {

using bench::Buffer;
using bench::LayerShape;

// ---------------------------------------------------------------------------
// Cases

struct Case {
  convpool_dtype dtype;
  LayerShape s;
};

const char *dtype_short(convpool_dtype d) {
  switch (d) {
    case CONVPOOL_FLOAT16:
      return "fp16";
    case CONVPOOL_BFLOAT16:
      return "bf16";
    case CONVPOOL_FLOAT32:
      break;
  }
  return "fp32";
}

bool parse_dtype(const std::string &name, convpool_dtype *out) {
  if (name == "float32" || name == "fp32" || name == "f32") {
    *out = CONVPOOL_FLOAT32;
  } else if (name == "float16" || name == "fp16" || name == "f16" || name == "half") {
    *out = CONVPOOL_FLOAT16;
  } else if (name == "bfloat16" || name == "bf16") {
    *out = CONVPOOL_BFLOAT16;
  } else {
    return false;
  }
  return true;
}

// Our algorithms by their --algos names (the CLI's --impl names).
const char *algo_name(convpool_algo a) {
  switch (a) {
    case CONVPOOL_ALGO_SHIFT_REDUCE:
      return "sr";
    case CONVPOOL_ALGO_IM2COL:
      return "im2col";
    case CONVPOOL_ALGO_WINOGRAD:
      return "winograd";
    case CONVPOOL_ALGO_AUTO:
      break;
  }
  return "auto";
}

bool parse_algo(const std::string &name, convpool_algo *out) {
  if (name == "sr") {
    *out = CONVPOOL_ALGO_SHIFT_REDUCE;
  } else if (name == "im2col") {
    *out = CONVPOOL_ALGO_IM2COL;
  } else if (name == "auto") {
    *out = CONVPOOL_ALGO_AUTO;
  } else {
    return false;
  }
  return true;
}

// A comma list of distinct algorithm names ("sr,im2col,auto"); on failure
// *why says what is wrong.
bool parse_algo_list(const std::string &list, std::vector<convpool_algo> *out, std::string *why) {
  std::vector<convpool_algo> algos;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    convpool_algo a;
    if (!parse_algo(name, &a)) {
      *why = "unknown algorithm '" + name + "' (sr, im2col, auto)";
      return false;
    }
    if (std::find(algos.begin(), algos.end(), a) != algos.end()) {
      *why = "algorithm '" + name + "' is listed twice";
      return false;
    }
    algos.push_back(a);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *out = algos;
  return true;
}

std::string case_label(const Case &c) {
  char text[160];
  std::snprintf(text, sizeof text, "%s B=%lld %lld->%lld %lldx%lld K=%lld P=%lld",
                dtype_short(c.dtype), (long long)c.s.batch, (long long)c.s.c_in,
                (long long)c.s.c_out, (long long)c.s.height, (long long)c.s.width, (long long)c.s.k,
                (long long)c.s.pool);
  return text;
}

// Why a shape is not a valid case, or "" if it is.
std::string case_problem(const LayerShape &s) {
  if (s.batch < 1 || s.c_in < 1 || s.c_out < 1 || s.height < 1 || s.width < 1 || s.k < 1 ||
      s.pool < 1)
    return "every size must be >= 1";
  if (s.conv_h() < 1 || s.conv_w() < 1) return "the filter is larger than the image";
  if (s.out_h() < 1 || s.out_w() < 1) return "the pool window is larger than the conv output";
  return "";
}

// Convolution flop (2 per multiply-add); pooling and bias are not counted.
double case_flop(const Case &c) {
  const LayerShape &s = c.s;
  return 2.0 * (double)s.batch * (double)s.c_out * (double)s.conv_h() * (double)s.conv_w() *
         (double)s.c_in * (double)(s.k * s.k);
}

size_t src_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_in * s.height * s.width);
}
size_t weight_count(const LayerShape &s) {
  return (size_t)(s.c_out * s.c_in * s.k * s.k);
}
size_t dst_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_out * s.out_h() * s.out_w());
}

// Compulsory traffic: input + weights + bias + output, once each.
double case_bytes(const Case &c) {
  const double e = (double)convpool_dtype_size(c.dtype);
  return e * (double)(src_count(c.s) + weight_count(c.s) + (size_t)c.s.c_out + dst_count(c.s));
}

Case make_case(convpool_dtype d, int64_t b, int64_t ci, int64_t co, int64_t h, int64_t w, int64_t k,
               int64_t p) {
  return Case{d, LayerShape{b, ci, co, h, w, k, p}};
}

// The headline case for the thread-scaling line.
Case headline_case(bool quick) {
  return quick ? make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 2)
               : make_case(CONVPOOL_FLOAT32, 1, 256, 256, 224, 224, 3, 2);
}

std::vector<Case> default_cases(bool quick) {
  if (quick) {
    return {make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 1),
            make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 2),
            make_case(CONVPOOL_FLOAT16, 1, 256, 256, 32, 16, 3, 1),
            make_case(CONVPOOL_FLOAT32, 4, 128, 128, 32, 16, 3, 1)};
  }
  std::vector<Case> cases;
  for (convpool_dtype d : {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16}) {
    cases.push_back(make_case(d, 1, 256, 256, 32, 16, 3, 1));
    cases.push_back(make_case(d, 1, 256, 256, 224, 224, 3, 1));
    cases.push_back(make_case(d, 1, 256, 256, 224, 224, 3, 2));
  }
  cases.push_back(make_case(CONVPOOL_FLOAT32, 4, 128, 128, 32, 16, 3, 1));
  return cases;
}

// Read "dtype batch cin cout h w k pool" lines; '#' starts a comment.
bool read_cases(const std::string &path, std::vector<Case> *cases) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "convpool-bench: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string dtype_name;
    if (!(fields >> dtype_name)) continue;  // blank or comment-only line
    Case c{};
    long long v[7];
    std::string extra;
    if (!parse_dtype(dtype_name, &c.dtype)) {
      std::fprintf(stderr, "%s:%d: unknown dtype '%s' (float32, float16, bfloat16)\n", path.c_str(),
                   number, dtype_name.c_str());
      return false;
    }
    if (!(fields >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6]) || (fields >> extra)) {
      std::fprintf(stderr, "%s:%d: expected 'dtype batch cin cout h w k pool'\n", path.c_str(),
                   number);
      return false;
    }
    c.s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    const std::string problem = case_problem(c.s);
    if (!problem.empty()) {
      std::fprintf(stderr, "%s:%d: %s\n", path.c_str(), number, problem.c_str());
      return false;
    }
    cases->push_back(c);
  }
  if (cases->empty()) {
    std::fprintf(stderr, "convpool-bench: %s holds no cases\n", path.c_str());
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Data and systems

// Inputs of one case in the case's dtype. Values: src in [0, 1), weights in
// [-0.5, 0.5), bias in [-1, 1), from fixed seeds.
struct CaseData {
  Buffer src, weights, bias;
};

CaseData make_data(convpool_dtype dtype, const LayerShape &s) {
  const size_t e = convpool_dtype_size(dtype);
  CaseData d{Buffer(src_count(s) * e), Buffer(weight_count(s) * e), Buffer((size_t)s.c_out * e)};
  bench::fill_uniform(d.src.data(), dtype, src_count(s), 1, 0.0f, 1.0f);
  bench::fill_uniform(d.weights.data(), dtype, weight_count(s), 2, -0.5f, 0.5f);
  bench::fill_uniform(d.bias.data(), dtype, (size_t)s.c_out, 3, -1.0f, 1.0f);
  return d;
}

// The same values widened to fp32 (for the fp32 reference of fp16/bf16 cases).
CaseData widen_data(const CaseData &d, convpool_dtype dtype, const LayerShape &s) {
  CaseData w{Buffer(src_count(s) * 4), Buffer(weight_count(s) * 4), Buffer((size_t)s.c_out * 4)};
  const auto copy = [dtype](const Buffer &from, Buffer &to, size_t n) {
    const std::vector<float> v = bench::to_f32(from.data(), dtype, n);
    std::memcpy(to.data(), v.data(), n * sizeof(float));
  };
  copy(d.src, w.src, src_count(s));
  copy(d.weights, w.weights, weight_count(s));
  copy(d.bias, w.bias, (size_t)s.c_out);
  return w;
}

std::string convpool_failure(const char *call, convpool_status st) {
  return std::string(call) + ": " + convpool_status_string(st) + ": " + convpool_last_error();
}

// Our operator: created once (weights packed), then run on NCHW data.
class Ours {
 public:
  Ours() = default;
  Ours(const Ours &) = delete;  // owns the operator
  Ours &operator=(const Ours &) = delete;
  ~Ours() { convpool_op_destroy(op_); }

  bool init(convpool_dtype dtype, const LayerShape &s, int threads, const CaseData &d,
            std::string *why, convpool_algo algo = CONVPOOL_ALGO_AUTO) {
    s_ = s;
    convpool_options opt;
    convpool_options_init(&opt);
    opt.threads = threads;
    opt.algo = algo;
    convpool_status st = convpool_op_create(dtype, d.weights.data(), d.bias.data(), s.c_out, s.c_in,
                                            s.k, s.pool, &opt, &op_);
    if (st != CONVPOOL_SUCCESS) {
      *why = convpool_failure("convpool_op_create", st);
      return false;
    }
    int64_t shape[4];
    size_t bytes = 0;
    st = convpool_op_output_shape(op_, s.batch, s.height, s.width, shape, &bytes);
    if (st != CONVPOOL_SUCCESS) {
      *why = convpool_failure("convpool_op_output_shape", st);
      return false;
    }
    if (shape[0] != s.batch || shape[1] != s.c_out || shape[2] != s.out_h() ||
        shape[3] != s.out_w() || bytes != dst_count(s) * convpool_dtype_size(dtype)) {
      *why = "convpool_op_output_shape returned an unexpected shape";
      return false;
    }
    dst_ = Buffer(bytes);
    return true;
  }

  // One run; false (with *why) if the library reports a failure.
  bool run(const CaseData &d, std::string *why) {
    const convpool_status st = convpool_op_run(op_, d.src.data(), s_.batch, s_.height, s_.width,
                                               dst_.data(), dst_.bytes());
    if (st != CONVPOOL_SUCCESS) {
      *why = convpool_failure("convpool_op_run", st);
      return false;
    }
    return true;
  }

  // "shift-reduce, avx512f f32-... kernel, 2 threads, 112 items": the
  // algorithm the operator runs (what auto resolved to) from the first line
  // of convpool_op_describe, the rest from convpool_op_plan.
  std::string plan_text() const {
    convpool_plan_info p;
    std::memset(&p, 0, sizeof p);
    if (convpool_op_plan(op_, s_.batch, s_.height, s_.width, &p) != CONVPOOL_SUCCESS)
      return std::string("plan unavailable (") + convpool_last_error() + ")";
    char text[256];
    std::snprintf(text, sizeof text, "%s %s, MR=%d NR=%d, %d threads, %lld items",
                  p.isa ? p.isa : "?", p.kernel ? p.kernel : "?", p.mr, p.nr, p.threads,
                  (long long)p.items);
    const std::string algorithm = described_algorithm();
    return algorithm.empty() ? std::string(text) : algorithm + ", " + text;
  }

  const void *dst() const { return dst_.data(); }

 private:
  // "shift-reduce" or "im2col + GEMM" from the description's first line
  // ("algorithm      NAME (why), kernel ..."), or "" if it cannot be read.
  std::string described_algorithm() const {
    char text[4096];
    if (convpool_op_describe(op_, s_.batch, s_.height, s_.width, text, sizeof text) !=
        CONVPOOL_SUCCESS)
      return "";
    std::string line(text, std::strcspn(text, "\n"));
    const std::string key = "algorithm";
    if (line.rfind(key, 0) != 0) return "";
    line.erase(0, line.find_first_not_of(' ', key.size()));
    return line.substr(0, std::min(line.find(", kernel"), line.find(" (")));
  }

  convpool_op *op_ = nullptr;
  LayerShape s_{};
  Buffer dst_;
};

// ---------------------------------------------------------------------------
// Options

struct Options {
  int threads = 0;          // 0: usable CPUs from convpool_get_info
  int iters = 5;            // timed iterations (minimum)
  int warmup = 1;           // untimed iterations per system
  double min_time_s = 0.2;  // short cases repeat until each system ran this long
  int max_iters = 200;
  double gap_ms = 0.0;          // idle pause before each timed call
  double max_other_load = 0.1;  // rerun a case disturbed by more than this
  int retries = 2;              // reruns per case at most
  bool quick = false;
  bool torch = true, rss = true, plot = true, scaling = true;
  // Our algorithms to time, each as its own system. The "ours" columns are
  // auto's (the first listed if auto is not).
  std::vector<convpool_algo> algos{CONVPOOL_ALGO_AUTO};
  double peak_seconds = 0.3;
  int peak_trials = 3;
  std::string cases_file;
  std::string out = std::string(BENCH_SOURCE_DIR) + "/results.md";
  std::string python = "/usr/bin/python3";
  std::string torch_script = std::string(BENCH_SOURCE_DIR) + "/torch_baseline.py";
  std::string plot_script = std::string(BENCH_SOURCE_DIR) + "/plot.py";
};

void usage(FILE *to) {
  std::fprintf(to,
               "usage: convpool-bench [options]\n"
               "  --cases FILE      cases, one per line: dtype batch cin cout h w k pool\n"
               "                    (default: the seven built-in cases, see bench/README.md)\n"
               "  --threads N       threads for every system (default: usable CPUs)\n"
               "  --algos LIST      our algorithms to time, a comma list of sr, im2col, auto\n"
               "                    (default auto); more than one adds a column per algorithm\n"
               "                    and auto / best of the others\n"
               "  --iters N         timed iterations per system, at least (default 5)\n"
               "  --warmup N        untimed iterations per system, >= 1 (default 1)\n"
               "  --min-time S      repeat short cases until each system ran S seconds\n"
               "                    (default 0.2; 0 = exactly --iters)\n"
               "  --max-iters N     cap for --min-time (default 200)\n"
               "  --gap-ms MS       idle pause before each timed call (default 0)\n"
               "  --retries N       rerun a case up to N times while other processes used more\n"
               "                    than --max-other-load cores during it (default 2 and 0.1)\n"
               "  --max-other-load X\n"
               "  --quick           smoke run: small cases, 2 iterations, short peak\n"
               "  --out FILE        Markdown table (default bench/results.md); the CSV and\n"
               "                    PNG are written next to it (.csv, .png)\n"
               "  --python PATH     interpreter for torch and the plot (default /usr/bin/python3)\n"
               "  --no-torch --no-rss --no-plot --no-scaling   skip those parts\n"
               "  --omp-default     keep libgomp's default spin time for oneDNN's threads\n"
               "                    (otherwise GOMP_SPINCOUNT=10000, see bench/README.md)\n"
               "  --help\n");
}

bool parse_int(const char *text, int lo, int *out) {
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > 1000000) return false;
  *out = (int)v;
  return true;
}

bool parse_double(const char *text, double *out) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= 0.0)) return false;
  *out = v;
  return true;
}

// Returns 0 to run, 1 for --help, 2 for a usage error.
int parse_options(int argc, char **argv, Options *o) {
  bool iters_given = false, warmup_given = false, min_time_given = false, retries_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    const auto bad = [&](const char *what) {
      std::fprintf(stderr, "convpool-bench: %s needs %s\n", a.c_str(), what);
      return 2;
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 1;
    } else if (a == "--quick") {
      o->quick = true;
    } else if (a == "--no-torch") {
      o->torch = false;
    } else if (a == "--no-rss") {
      o->rss = false;
    } else if (a == "--no-plot") {
      o->plot = false;
    } else if (a == "--no-scaling") {
      o->scaling = false;
    } else if (a == "--omp-default") {
      // handled before parsing (see limit_openmp_spinning)
    } else if (a == "--cases") {
      if (!has_value) return bad("a file");
      o->cases_file = argv[++i];
    } else if (a == "--out") {
      if (!has_value) return bad("a file");
      o->out = argv[++i];
    } else if (a == "--algos") {
      if (!has_value) return bad("a comma list of sr, im2col, auto");
      std::string why;
      if (!parse_algo_list(argv[++i], &o->algos, &why)) {
        std::fprintf(stderr, "convpool-bench: --algos: %s\n", why.c_str());
        return 2;
      }
    } else if (a == "--python") {
      if (!has_value) return bad("a path");
      o->python = argv[++i];
    } else if (a == "--threads") {
      if (!has_value || !parse_int(argv[++i], 1, &o->threads)) return bad("an integer >= 1");
    } else if (a == "--iters") {
      if (!has_value || !parse_int(argv[++i], 1, &o->iters)) return bad("an integer >= 1");
      iters_given = true;
    } else if (a == "--warmup") {
      if (!has_value || !parse_int(argv[++i], 1, &o->warmup)) return bad("an integer >= 1");
      warmup_given = true;
    } else if (a == "--max-iters") {
      if (!has_value || !parse_int(argv[++i], 1, &o->max_iters)) return bad("an integer >= 1");
    } else if (a == "--min-time") {
      if (!has_value || !parse_double(argv[++i], &o->min_time_s)) return bad("seconds >= 0");
      min_time_given = true;
    } else if (a == "--retries") {
      if (!has_value || !parse_int(argv[++i], 0, &o->retries)) return bad("an integer >= 0");
      retries_given = true;
    } else if (a == "--max-other-load") {
      if (!has_value || !parse_double(argv[++i], &o->max_other_load)) return bad("cores >= 0");
    } else if (a == "--gap-ms") {
      if (!has_value || !parse_double(argv[++i], &o->gap_ms)) return bad("milliseconds >= 0");
    } else {
      std::fprintf(stderr, "convpool-bench: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (o->quick) {
    if (!iters_given) o->iters = 2;
    if (!warmup_given) o->warmup = 1;
    if (!min_time_given) o->min_time_s = 0.0;
    o->peak_seconds = 0.05;
    o->peak_trials = 1;
    if (!retries_given) o->retries = 0;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Subprocess helpers: torch and the RSS children

struct TimedResult {
  bool ok = false;
  std::string why;
  std::vector<double> ms;
  double median() const { return bench::median(ms); }
};

bool is_executable(const std::string &path) {
  return access(path.c_str(), X_OK) == 0;
}
bool is_file(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The last line of a program's output, for messages.
std::string last_line(const std::string &text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Value of the line "key value" in text, or "" if absent.
std::string find_value(const std::string &text, const std::string &key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

TimedResult run_torch(const Options &o, const Case &c, int threads, int iters,
                      std::string *torch_version) {
  TimedResult r;
  if (!o.torch) {
    r.why = "torch skipped (--no-torch)";
    return r;
  }
  if (!is_executable(o.python)) {
    r.why = "torch n/a: no python interpreter at " + o.python;
    return r;
  }
  if (!is_file(o.torch_script)) {
    r.why = "torch n/a: helper script not found at " + o.torch_script;
    return r;
  }
  const LayerShape &s = c.s;
  const std::vector<std::string> argv = {
      o.python,   o.torch_script,           "--dtype",   convpool_dtype_name(c.dtype),
      "--batch",  std::to_string(s.batch),  "--cin",     std::to_string(s.c_in),
      "--cout",   std::to_string(s.c_out),  "--height",  std::to_string(s.height),
      "--width",  std::to_string(s.width),  "--k",       std::to_string(s.k),
      "--pool",   std::to_string(s.pool),   "--threads", std::to_string(threads),
      "--warmup", std::to_string(o.warmup), "--iters",   std::to_string(iters)};
  std::string out;
  const int rc = bench::run_capture(argv, &out);
  const std::string version = find_value(out, "torch_version");
  if (!version.empty()) *torch_version = version;
  const std::string med = find_value(out, "median_ms");
  if (rc == 0 && !med.empty()) {
    r.ok = true;
    r.ms.push_back(std::strtod(med.c_str(), nullptr));
    return r;
  }
  const std::string na = find_value(out, "n/a");
  if (!na.empty()) {
    r.why = "torch n/a: " + na;
  } else {
    r.why = "torch n/a: helper exited with status " + std::to_string(rc) + ": " + last_line(out);
  }
  return r;
}

// Peak RSS (kB) of a child process that runs only `system` ("ours" with
// algorithm algo, "onednn" or "none") on case c: the child is this program
// re-executed in --rss-child mode, so its VmHWM covers only its own fresh
// address space.
long child_peak_rss_kb(const Case &c, const std::string &system, int threads, std::string *why,
                       convpool_algo algo = CONVPOOL_ALGO_AUTO) {
  const std::string self = bench::self_exe_path();
  if (self.empty()) {
    *why = "cannot find /proc/self/exe";
    return -1;
  }
  const LayerShape &s = c.s;
  const std::vector<std::string> argv = {self,
                                         "--rss-child",
                                         system,
                                         convpool_dtype_name(c.dtype),
                                         std::to_string(s.batch),
                                         std::to_string(s.c_in),
                                         std::to_string(s.c_out),
                                         std::to_string(s.height),
                                         std::to_string(s.width),
                                         std::to_string(s.k),
                                         std::to_string(s.pool),
                                         std::to_string(threads),
                                         algo_name(algo)};
  std::string out;
  const int rc = bench::run_capture(argv, &out);
  const std::string kb = find_value(out, "vmhwm_kb");
  if (rc == 0 && !kb.empty()) return std::strtol(kb.c_str(), nullptr, 10);
  *why = last_line(out);
  if (why->empty()) *why = "child exited with status " + std::to_string(rc);
  return -1;
}

// The --rss-child mode: build the inputs, run one system twice, print VmHWM.
// Arguments: system dtype batch cin cout h w k pool threads algo.
int rss_child_main(int argc, char **argv) {
  if (argc != 13) {
    std::printf("n/a bad --rss-child arguments\n");
    return 2;
  }
  const std::string system = argv[2];
  Case c{};
  long long v[8];
  for (int i = 0; i < 8; ++i) v[i] = std::strtoll(argv[4 + i], nullptr, 10);
  convpool_algo algo;
  if (!parse_dtype(argv[3], &c.dtype) || !parse_algo(argv[12], &algo)) {
    std::printf("n/a bad dtype or algorithm\n");
    return 2;
  }
  c.s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  const int threads = (int)v[7];
  if (system != "none") {
    const CaseData d = make_data(c.dtype, c.s);
    std::string why;
    if (system == "ours") {
      Ours ours;
      if (!ours.init(c.dtype, c.s, threads, d, &why, algo) || !ours.run(d, &why) ||
          !ours.run(d, &why)) {
        std::printf("n/a %s\n", why.c_str());
        return 1;
      }
    } else {
      bench::OnednnLayer layer;
      if (!layer.init(c.dtype, c.s, threads, d.src.data(), d.weights.data(), d.bias.data(), &why)) {
        std::printf("n/a %s\n", why.c_str());
        return 1;
      }
      layer.run_nchw();
      layer.run_nchw();
    }
  }
  std::printf("vmhwm_kb %ld\n", bench::self_peak_rss_kb());
  return 0;
}

// ---------------------------------------------------------------------------
// One case

// One of our algorithms in one case: its times, plan and correctness check.
struct AlgoResult {
  convpool_algo algo = CONVPOOL_ALGO_AUTO;
  TimedResult time;
  std::string plan;
  bool checked = false, passed = true;
  bench::Diff diff;
};

// Index in --algos of the algorithm shown as "ours": auto, or the first listed.
size_t main_algo_index(const std::vector<convpool_algo> &algos) {
  const auto it = std::find(algos.begin(), algos.end(), CONVPOOL_ALGO_AUTO);
  return it == algos.end() ? 0 : (size_t)(it - algos.begin());
}

struct CaseResult {
  Case c{};
  int iters = 0;
  std::vector<AlgoResult> algos;  // ours, one per --algos entry, in that order
  size_t main = 0;                // the entry shown in the "ours" columns
  TimedResult dnnl_nchw, dnnl_blocked, torch;
  std::string dnnl_impl;
  double tolerance = 0.0;
  std::string check_note;
  long rss_ours_kb = -1, rss_dnnl_kb = -1;
  std::string rss_ours_why, rss_dnnl_why;
  double other_load = NAN;  // cores used by other processes while timing (max of
                            // the in-process loop and the torch subprocess)
  int attempts = 1;         // runs of this case (reruns when disturbed)

  const AlgoResult &ours() const { return algos[main]; }
  bool checked() const {
    for (const AlgoResult &a : algos)
      if (a.checked) return true;
    return false;
  }
  // False if any algorithm failed its check.
  bool passed() const {
    for (const AlgoResult &a : algos)
      if (a.checked && !a.passed) return false;
    return true;
  }
};

// Largest acceptable max|ours - ref| / max|ref| against the fp32 reference:
// fp32 differs only by summation order; fp16 and bf16 add one rounding of the
// output (2^-11 and 2^-8 relative) on top.
double tolerance_for(convpool_dtype d) {
  switch (d) {
    case CONVPOOL_FLOAT16:
      return 2e-3;
    case CONVPOOL_BFLOAT16:
      return 1.6e-2;
    case CONVPOOL_FLOAT32:
      break;
  }
  return 1e-4;
}

void pause_ms(double ms) {
  if (ms > 0.0) usleep((useconds_t)(ms * 1000.0));
}

// Time one call of fn; returns milliseconds.
template <typename F>
double time_call(const Options &o, F &&fn) {
  pause_ms(o.gap_ms);
  const double t0 = bench::now_ms();
  fn();
  return bench::now_ms() - t0;
}

CaseResult run_case(const Options &o, const Case &c, int threads, std::string *torch_version) {
  CaseResult r;
  r.c = c;
  r.main = main_algo_index(o.algos);
  const CaseData data = make_data(c.dtype, c.s);
  {
    // One operator per algorithm, all created (weights packed, threads
    // started) before any timing.
    std::vector<std::unique_ptr<Ours>> ours;
    r.algos.resize(o.algos.size());
    for (size_t i = 0; i < o.algos.size(); ++i) {
      AlgoResult &a = r.algos[i];
      a.algo = o.algos[i];
      ours.push_back(std::unique_ptr<Ours>(new Ours));
      a.time.ok = ours[i]->init(c.dtype, c.s, threads, data, &a.time.why, a.algo);
      if (a.time.ok) a.plan = ours[i]->plan_text();
    }
    bench::OnednnLayer layer;
    const bool dnnl_ok = layer.init(c.dtype, c.s, threads, data.src.data(), data.weights.data(),
                                    data.bias.data(), &r.dnnl_nchw.why);
    r.dnnl_nchw.ok = r.dnnl_blocked.ok = dnnl_ok;
    r.dnnl_blocked.why = r.dnnl_nchw.why;
    if (dnnl_ok) r.dnnl_impl = layer.impl_info();

    // The in-process systems (each of our algorithms, then the two oneDNN
    // variants), each timed by one call.
    struct Sys {
      TimedResult *result;
      std::function<void()> call;
    };
    std::vector<std::string> run_errors(ours.size());
    std::vector<Sys> systems;
    for (size_t i = 0; i < ours.size(); ++i)
      if (r.algos[i].time.ok)
        systems.push_back({&r.algos[i].time, [&, i] {
                             if (run_errors[i].empty()) ours[i]->run(data, &run_errors[i]);
                           }});
    if (dnnl_ok) {
      systems.push_back({&r.dnnl_blocked, [&] { layer.run_blocked(); }});
      systems.push_back({&r.dnnl_nchw, [&] { layer.run_nchw(); }});
    }

    for (int w = 0; w < o.warmup; ++w)
      for (Sys &sys : systems) time_call(o, sys.call);

    // Timed iterations: at least --iters, and more (up to --max-iters) until
    // every system has run --min-time seconds in total. Every iteration runs
    // each system once, in an order shuffled from a fixed seed that never
    // starts with the system that ended the previous iteration: a system run
    // twice in a row finds its own data in the caches (worth 5-8% on the
    // small cases), and under any fixed order each system would always follow
    // the same neighbour. This way every system follows each other one about
    // equally often, and slow drifts of the machine hit all of them alike.
    std::mt19937 rng(20240601u);
    std::vector<size_t> order(systems.size());
    std::iota(order.begin(), order.end(), size_t{0});
    size_t last = systems.empty() ? 0 : systems.size() - 1;  // the warmup ran them in order
    const bench::CpuSample before = bench::sample_cpu();
    std::vector<double> total_ms(systems.size(), 0.0);
    const auto need_more = [&](int done) {
      if (done < o.iters) return true;
      if (done >= o.max_iters || systems.empty()) return false;
      return *std::min_element(total_ms.begin(), total_ms.end()) < o.min_time_s * 1e3;
    };
    int it = 0;
    for (; need_more(it); ++it) {
      do {
        std::shuffle(order.begin(), order.end(), rng);
      } while (order.size() > 1 && order.front() == last);
      for (size_t k : order) {
        const double ms = time_call(o, systems[k].call);
        systems[k].result->ms.push_back(ms);
        total_ms[k] += ms;
      }
      if (!order.empty()) last = order.back();
    }
    r.iters = it;
    r.other_load = bench::other_load(before, bench::sample_cpu());
    bool any_ok = false;
    for (size_t i = 0; i < ours.size(); ++i) {
      if (!run_errors[i].empty()) {
        r.algos[i].time.ok = false;
        r.algos[i].time.why = run_errors[i];
      }
      any_ok = any_ok || r.algos[i].time.ok;
    }

    // Correctness: every algorithm against the oneDNN fp32 output on the same
    // values.
    if (any_ok) {
      std::vector<float> ref;
      if (c.dtype == CONVPOOL_FLOAT32 && dnnl_ok) {
        ref = bench::to_f32(layer.nchw_dst(), CONVPOOL_FLOAT32, dst_count(c.s));
      } else {
        const CaseData wide = widen_data(data, c.dtype, c.s);
        bench::OnednnLayer ref_layer;
        std::string why;
        if (ref_layer.init(CONVPOOL_FLOAT32, c.s, threads, wide.src.data(), wide.weights.data(),
                           wide.bias.data(), &why)) {
          ref_layer.run_nchw();
          ref = bench::to_f32(ref_layer.nchw_dst(), CONVPOOL_FLOAT32, dst_count(c.s));
        } else {
          r.check_note = "no fp32 reference: " + why;
        }
      }
      r.tolerance = tolerance_for(c.dtype);
      for (size_t i = 0; i < ours.size() && !ref.empty(); ++i) {
        AlgoResult &a = r.algos[i];
        if (!a.time.ok) continue;
        a.checked = true;
        a.diff = bench::compare(bench::to_f32(ours[i]->dst(), c.dtype, dst_count(c.s)), ref);
        a.passed = a.diff.nonfinite == 0 && a.diff.rel <= r.tolerance;
      }
    }
  }  // operators and oneDNN layer released before the subprocesses run

  const bench::CpuSample torch_before = bench::sample_cpu();
  r.torch = run_torch(o, c, threads, r.iters, torch_version);
  if (r.torch.ok) {
    const double load = bench::other_load(torch_before, bench::sample_cpu());
    if (std::isfinite(load))
      r.other_load = std::isfinite(r.other_load) ? std::max(r.other_load, load) : load;
  }
  if (o.rss) {
    if (r.ours().time.ok)
      r.rss_ours_kb = child_peak_rss_kb(c, "ours", threads, &r.rss_ours_why, r.ours().algo);
    if (r.dnnl_nchw.ok) r.rss_dnnl_kb = child_peak_rss_kb(c, "onednn", threads, &r.rss_dnnl_why);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Thread scaling of the headline case

struct Scaling {
  bool done = false;
  std::string why;
  Case c{};
  int threads = 0, iters = 0;
  double ours_1 = NAN, ours_n = NAN, dnnl_1 = NAN, dnnl_n = NAN;
  double other_load = NAN;
  int attempts = 1;
};

Scaling measure_scaling(const Options &o, int threads) {
  Scaling sc;
  sc.c = headline_case(o.quick);
  sc.threads = threads;
  if (threads < 2) {
    sc.why = "thread scaling skipped: only 1 thread";
    return sc;
  }
  const CaseData data = make_data(sc.c.dtype, sc.c.s);
  Ours ours1, oursn;
  bench::OnednnLayer dnnl1, dnnln;
  std::string why;
  if (!ours1.init(sc.c.dtype, sc.c.s, 1, data, &why) ||
      !oursn.init(sc.c.dtype, sc.c.s, threads, data, &why)) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  const bool dnnl_ok = dnnl1.init(sc.c.dtype, sc.c.s, 1, data.src.data(), data.weights.data(),
                                  data.bias.data(), &why) &&
                       dnnln.init(sc.c.dtype, sc.c.s, threads, data.src.data(), data.weights.data(),
                                  data.bias.data(), &why);
  std::vector<double> o1, on, d1, dn;
  bool ok = true;
  const auto round = [&](bool record) {
    const double a = time_call(o, [&] { ok = ours1.run(data, &why) && ok; });
    const double b = time_call(o, [&] { ok = oursn.run(data, &why) && ok; });
    if (record) {
      o1.push_back(a);
      on.push_back(b);
    }
    if (dnnl_ok) {
      const double c1 = time_call(o, [&] { dnnl1.run_blocked(); });
      const double cn = time_call(o, [&] { dnnln.run_blocked(); });
      if (record) {
        d1.push_back(c1);
        dn.push_back(cn);
      }
    }
  };
  round(false);
  sc.iters = std::max(3, o.quick ? 20 : std::min(o.iters, 5));
  const bench::CpuSample before = bench::sample_cpu();
  for (int i = 0; i < sc.iters; ++i) round(true);
  sc.other_load = bench::other_load(before, bench::sample_cpu());
  if (!ok) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  sc.done = true;
  sc.ours_1 = bench::median(o1);
  sc.ours_n = bench::median(on);
  if (dnnl_ok) {
    sc.dnnl_1 = bench::median(d1);
    sc.dnnl_n = bench::median(dn);
  }
  return sc;
}

// ---------------------------------------------------------------------------
// Report

struct Machine {
  std::string brand;
  convpool_info info{};
  int threads = 1;
  double peak[PEAK_COUNT] = {0, 0, 0};
  std::string torch_version;
  long baseline_rss_kb = -1;
  std::string load_start, load_end;  // 1-minute load averages
  std::string omp_spin;              // how oneDNN's OpenMP threads wait
};

// The 1-minute load average from /proc/loadavg, or "?".
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return (in >> first) ? first : std::string("?");
}

// The peak a case is measured against: bf16 dot products for bf16, the
// best fp32 FMA peak (AVX-512 if present) for fp32 and fp16 (fp16 is
// computed with fp32 FMAs).
double peak_for(const Machine &m, convpool_dtype d) {
  if (d == CONVPOOL_BFLOAT16) return m.peak[PEAK_BF16_AVX512];
  return m.peak[PEAK_FP32_AVX512] > 0 ? m.peak[PEAK_FP32_AVX512] : m.peak[PEAK_FP32_AVX2];
}

std::string fmt(const char *format, double v) {
  if (!std::isfinite(v)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// Measure every peak variant and keep the best value seen so far: the
// machine is shared, so one measurement may be depressed by other load.
// `when` names a full measurement ("start", "end") that is printed; nullptr
// takes one short, silent sample.
void measure_peaks(const Options &o, Machine *m, const char *when) {
  const double seconds = when ? o.peak_seconds : std::min(o.peak_seconds, 0.1);
  const int trials = when ? o.peak_trials : 1;
  if (when) std::printf("  FMA peak at the %s on %d threads:", when, m->threads);
  for (int k = 0; k < PEAK_COUNT; ++k) {
    const double p = peak_fma((peak_kind)k, m->threads, seconds, trials);
    m->peak[k] = std::max(m->peak[k], p);
    if (when)
      std::printf(" %s %s%s", peak_name((peak_kind)k), p > 0 ? fmt("%.0f", p).c_str() : "n/a",
                  k + 1 < PEAK_COUNT ? "," : "");
  }
  if (when) std::printf(" GFLOP/s\n");
}

std::string fmt_ms(double v) {
  return fmt(v < 10.0 ? "%.3f" : "%.1f", v);
}

// Rates and ratios with about three significant digits, never "0" or "1e+03".
std::string fmt_num(double v) {
  const double a = std::fabs(v);
  return fmt(a >= 100.0 ? "%.0f" : a >= 10.0 ? "%.1f" : a >= 0.1 ? "%.2f" : "%.2g", v);
}

std::string fmt_pct(double v) {
  return std::isfinite(v) ? fmt_num(v) + "%" : "n/a";
}

double ms_or_nan(const TimedResult &t) {
  return t.ok && !t.ms.empty() ? t.median() : NAN;
}

// The largest max rel diff over our checked algorithms (NaN if none).
double worst_rel_diff(const CaseResult &r) {
  double worst = NAN;
  for (const AlgoResult &a : r.algos)
    if (a.checked) worst = std::isfinite(worst) ? std::max(worst, a.diff.rel) : a.diff.rel;
  return worst;
}

// The largest max rel diff, marked if any algorithm failed.
std::string check_cell(const CaseResult &r) {
  if (!r.checked()) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, "%.1e%s", worst_rel_diff(r), r.passed() ? "" : " **FAIL**");
  return text;
}

// auto is "within" when t_auto is at most this factor times the best time of
// the explicitly chosen algorithms.
constexpr double kAutoSlack = 1.05;

// t_auto / min(t_sr, t_im2col) over the explicit algorithms timed in the
// case; NaN if auto or all of them are missing.
double auto_vs_best(const CaseResult &r) {
  double t_auto = NAN, best = INFINITY;
  for (const AlgoResult &a : r.algos) {
    const double t = ms_or_nan(a.time);
    if (a.algo == CONVPOOL_ALGO_AUTO) {
      t_auto = t;
    } else if (std::isfinite(t)) {
      best = std::min(best, t);
    }
  }
  return std::isfinite(best) ? t_auto / best : NAN;
}

std::string auto_vs_best_cell(const CaseResult &r) {
  const double v = auto_vs_best(r);
  if (!std::isfinite(v)) return "n/a";
  return fmt("%.3f", v) + (v > kAutoSlack ? " **>" + fmt("%.2f", kAutoSlack) + "**" : "");
}

// One algorithm's median, marked if its check failed.
std::string algo_ms_cell(const AlgoResult &a) {
  return fmt_ms(ms_or_nan(a.time)) + (a.checked && !a.passed ? " **FAIL**" : "");
}

// The comparison columns appear when more than one algorithm is timed;
// "auto vs best" needs auto and at least one other.
bool algo_columns(const Options &o) {
  return o.algos.size() > 1;
}
bool auto_column(const Options &o) {
  return algo_columns(o) &&
         std::find(o.algos.begin(), o.algos.end(), CONVPOOL_ALGO_AUTO) != o.algos.end();
}

// "sr and im2col": the explicit algorithms auto is compared with.
std::string explicit_algo_names(const Options &o) {
  std::vector<std::string> names;
  for (convpool_algo a : o.algos)
    if (a != CONVPOOL_ALGO_AUTO) names.push_back(algo_name(a));
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

std::string rss_cell(long kb) {
  return kb < 0 ? "n/a" : fmt("%.0f", (double)kb / 1024.0);
}

std::string make_markdown(const Machine &m, const Options &o, const std::vector<CaseResult> &rs,
                          const Scaling &sc) {
  std::ostringstream md;
  md << "# convpool benchmark\n\n";
  md << "Machine: " << m.brand << ", " << m.info.usable_cpus << " usable CPUs"
     << " (L1d " << m.info.l1d_bytes / 1024 << " KiB, L2 " << m.info.l2_bytes / 1024 << " KiB, L3 "
     << m.info.l3_bytes / (1024 * 1024) << " MiB). Threads: " << m.threads << ".\n\n";
  md << "Measured FMA peak on " << m.threads
     << " threads (best of the samples taken at the "
        "start, between cases and at the end): "
     << fmt("%.0f", m.peak[PEAK_FP32_AVX512]) << " GFLOP/s fp32 AVX-512, "
     << fmt("%.0f", m.peak[PEAK_FP32_AVX2]) << " fp32 AVX2, "
     << fmt("%.0f", m.peak[PEAK_BF16_AVX512]) << " bf16 (vdpbf16ps).\n\n";
  md << "Versions: convpool " << m.info.version << " (ISA " << m.info.isa << "), oneDNN "
     << bench::onednn_version() << ", torch "
     << (m.torch_version.empty() ? std::string("n/a") : m.torch_version) << ".\n\n";
  md << "Timing: median over the timed iterations (" << o.warmup << " warmup per system, ";
  if (o.min_time_s > 0.0) {
    md << "at least " << o.iters << " timed; short cases repeat until each system ran "
       << o.min_time_s << " s, at most " << o.max_iters << " times";
  } else {
    md << o.iters << " timed";
  }
  md << "); ";
  if (algo_columns(o)) {
    md << "our algorithms (";
    for (size_t i = 0; i < o.algos.size(); ++i) md << (i ? ", " : "") << algo_name(o.algos[i]);
    md << ", one operator each)";
  } else {
    md << "ours";
  }
  md << " and both oneDNN variants run once per iteration, in a shuffled order that never "
        "repeats a system back to back. oneDNN's OpenMP "
        "threads: "
     << m.omp_spin << ". Load average at the start / end: " << m.load_start << " / " << m.load_end
     << " (the machine is shared; above ~0.5 the "
        "numbers are disturbed).\n\n";

  // With several algorithms, their times (and auto vs best) follow "ours ms".
  md << "| case | ours ms";
  std::string align = "|---|--:";
  if (algo_columns(o)) {
    for (convpool_algo a : o.algos) md << " | " << algo_name(a) << " ms";
    if (auto_column(o)) md << " | auto vs best";
    for (size_t i = 0; i < o.algos.size() + (auto_column(o) ? 1 : 0); ++i) align += "|--:";
  }
  md << " | oneDNN NCHW ms | oneDNN blocked ms | torch ms | ours/oneDNN-NCHW "
        "| ours/oneDNN-blocked | ours/torch | ours GFLOP/s | % of peak | ours GB/s "
        "| RSS ours MB | RSS oneDNN MB | max rel diff | other load |\n";
  md << align << "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const CaseResult &r : rs) {
    const double t = ms_or_nan(r.ours().time), tn = ms_or_nan(r.dnnl_nchw),
                 tb = ms_or_nan(r.dnnl_blocked), tt = ms_or_nan(r.torch);
    const double gflops = case_flop(r.c) / (t * 1e6);
    md << "| " << case_label(r.c) << " | " << fmt_ms(t);
    if (algo_columns(o)) {
      for (const AlgoResult &a : r.algos) md << " | " << algo_ms_cell(a);
      if (auto_column(o)) md << " | " << auto_vs_best_cell(r);
    }
    md << " | " << fmt_ms(tn) << " | " << fmt_ms(tb) << " | " << fmt_ms(tt) << " | "
       << fmt_num(t / tn) << " | " << fmt_num(t / tb) << " | " << fmt_num(t / tt) << " | "
       << fmt_num(gflops) << " | " << fmt_pct(100.0 * gflops / peak_for(m, r.c.dtype)) << " | "
       << fmt_num(case_bytes(r.c) / (t * 1e6)) << " | " << rss_cell(r.rss_ours_kb) << " | "
       << rss_cell(r.rss_dnnl_kb) << " | " << check_cell(r) << " | " << fmt("%.2f", r.other_load)
       << " |\n";
  }
  md << "\n";

  // Whether auto stays within kAutoSlack of the best explicit algorithm.
  if (auto_column(o)) {
    int within = 0, compared = 0;
    std::string above;
    for (const CaseResult &r : rs) {
      const double v = auto_vs_best(r);
      if (!std::isfinite(v)) continue;
      ++compared;
      if (v <= kAutoSlack) {
        ++within;
      } else {
        above += (above.empty() ? "" : "; ") + case_label(r.c) + " (" + fmt("%.3f", v) + ")";
      }
    }
    md << "auto within " << fmt("%.0f", 100.0 * (kAutoSlack - 1.0)) << "% of the better of "
       << explicit_algo_names(o) << ": " << within << " of " << compared << " cases";
    if (!above.empty()) md << "; above: " << above;
    md << ".\n\n";
  }

  // The peak is a maximum over samples, so it can only be too low; a rate
  // above it means every sample was disturbed by other load.
  bool above_peak = false;
  for (const CaseResult &r : rs) {
    std::vector<const TimedResult *> times = {&r.dnnl_nchw, &r.dnnl_blocked, &r.torch};
    for (const AlgoResult &a : r.algos) times.push_back(&a.time);
    for (const TimedResult *t : times)
      if (case_flop(r.c) / (ms_or_nan(*t) * 1e6) > 1.02 * peak_for(m, r.c.dtype)) above_peak = true;
  }
  if (above_peak)
    md << "**Warning:** a measured rate exceeds the measured peak by more than 2%: the peak "
          "samples were probably all lowered by other load, so % of peak reads high.\n\n";

  if (sc.done) {
    md << "Thread scaling, " << case_label(sc.c) << " (median of " << sc.iters
       << "): ours 1 thread " << fmt_ms(sc.ours_1) << " ms, " << sc.threads << " threads "
       << fmt_ms(sc.ours_n) << " ms, speed-up " << fmt("%.2f", sc.ours_1 / sc.ours_n)
       << "x; oneDNN blocked 1 thread " << fmt_ms(sc.dnnl_1) << " ms, " << sc.threads << " threads "
       << fmt_ms(sc.dnnl_n) << " ms, speed-up " << fmt("%.2f", sc.dnnl_1 / sc.dnnl_n)
       << "x; other load " << fmt("%.2f", sc.other_load)
       << (sc.attempts > 1 ? " (best of " + std::to_string(sc.attempts) + " runs)" : "") << ".\n\n";
  } else if (!sc.why.empty()) {
    md << sc.why << "\n\n";
  }

  md << "Columns:\n\n"
     << "- *ours*: `convpool_op_run` on NCHW input to NCHW output; the operator (packed "
        "weights, thread pool) is created once, outside the timing. Algorithm: "
     << algo_name(o.algos[main_algo_index(o.algos)]) << ".\n";
  if (algo_columns(o)) {
    md << "- *sr / im2col / auto ms*: the same for each algorithm "
          "(`convpool_options.algo`: shift-reduce, im2col + GEMM, the library's choice), "
          "each with its own operator, all interleaved with oneDNN in the same loop; the "
          "*ours* columns repeat "
       << algo_name(o.algos[main_algo_index(o.algos)])
       << ". A time marked FAIL failed its "
          "correctness check.\n";
    if (auto_column(o))
      md << "- *auto vs best*: t_auto / min(t of " << explicit_algo_names(o) << "); above "
         << fmt("%.2f", kAutoSlack) << " (marked) auto is more than "
         << fmt("%.0f", 100.0 * (kAutoSlack - 1.0))
         << "% slower than the better choice. Where auto picks the same algorithm as "
            "another column, their ratio shows the run-to-run noise.\n";
  }
  md << "- *oneDNN blocked*: convolution (format_tag::any, bias included) + max pooling "
        "primitives on memory already in oneDNN's blocked layouts; reorders excluded. "
        "*oneDNN NCHW*: the same plus the NCHW->blocked src reorder and the blocked->NCHW "
        "dst reorder in every iteration. Weights are reordered once, outside the timing.\n"
     << "- *torch*: `F.conv2d` -> `F.max_pool2d` (pooling skipped for P=1) in a separate "
        "python process (`bench/torch_baseline.py`), same threads and shapes, its own "
        "median.\n"
     << "- *ours/X*: time ratio t_ours / t_X; below 1 means ours is faster.\n"
     << "- *GFLOP/s*: 2*B*C_out*OH*OW*C_in*K*K / t (conv flop; pooling not counted). "
        "*% of peak*: against the measured fp32 FMA peak (fp32 and fp16 cases) or the "
        "bf16 dot-product peak (bf16 cases). *GB/s*: (input + weights + bias + output "
        "bytes) / t.\n"
     << "- *RSS*: peak resident set (VmHWM) of a child process (this program re-executed) "
        "that builds the case's inputs in the case's dtype and runs only that system twice; "
        "it includes the inputs, output and the process baseline ("
     << rss_cell(m.baseline_rss_kb) << " MB for a child that does no work).\n"
     << "- *max rel diff*: max |ours - ref| / max |ref| over the output, where ref is "
        "oneDNN's fp32 result on the same (for fp16/bf16: widened) input values; limits "
        "1e-4 fp32, 2e-3 fp16, 1.6e-2 bf16"
     << (algo_columns(o) ? "; the largest over the algorithms (each is in the details)" : "")
     << ".\n"
     << "- *other load*: CPU cores' worth of time used by other processes (or stolen by the "
        "hypervisor) while the case was timed (the in-process loop and the torch process, "
        "the larger): busy time in /proc/stat minus this process's and its children's CPU "
        "time, per second. Above ~0.1 the row was disturbed; such cases are rerun up to "
     << o.retries << " times and the least disturbed run is kept.\n\n";

  // Details and every reason for an n/a.
  md << "Details:\n\n";
  for (const CaseResult &r : rs) {
    md << "- " << case_label(r.c) << ": " << r.iters << " timed iterations";
    if (r.attempts > 1) md << " (best of " << r.attempts << " runs by other load)";
    // Each algorithm's plan (or why it has none) and its check; one
    // algorithm keeps the single-system wording.
    for (const AlgoResult &a : r.algos) {
      const std::string who = algo_columns(o) ? std::string(algo_name(a.algo)) : "ours";
      if (a.time.ok) md << "; " << who << ": " << a.plan;
      if (!a.time.why.empty()) md << "; " << (algo_columns(o) ? who + ": " : "") << a.time.why;
      if (a.checked)
        md << (algo_columns(o) ? ", max rel diff " + fmt("%.2e", a.diff.rel) + ", " : "; ")
           << "max |diff| " << fmt("%.3g", a.diff.max_abs) << " of max |ref| "
           << fmt("%.3g", a.diff.max_ref)
           << (a.diff.nonfinite ? ", non-finite values where ref is finite" : "")
           << (a.passed ? "" : " (FAIL)");
    }
    if (!r.dnnl_impl.empty()) md << "; oneDNN: " << r.dnnl_impl;
    for (const std::string *why : {&r.dnnl_nchw.why, &r.torch.why, &r.check_note})
      if (!why->empty()) md << "; " << *why;
    if (!r.rss_ours_why.empty()) md << "; RSS ours n/a: " << r.rss_ours_why;
    if (!r.rss_dnnl_why.empty()) md << "; RSS oneDNN n/a: " << r.rss_dnnl_why;
    md << "\n";
  }
  return md.str();
}

std::string csv_num(double v) {
  return std::isfinite(v) ? fmt("%.6g", v) : "";
}

// With several algorithms, each adds <name>_ms, <name>_min_ms and
// <name>_max_rel_diff after the fixed columns, and auto_vs_best follows when
// auto is one of them; max_rel_diff is the largest over the algorithms.
void write_csv(const std::string &path, const Machine &m, const Options &o,
               const std::vector<CaseResult> &rs) {
  std::ofstream f(path);
  f << "# machine: " << m.brand << "\n# threads: " << m.threads
    << "\n# peak_fp32: " << peak_for(m, CONVPOOL_FLOAT32)
    << "\n# peak_bf16: " << m.peak[PEAK_BF16_AVX512] << "\n";
  f << "case,dtype,batch,cin,cout,height,width,k,pool,iters,gflop,"
       "ours_ms,onednn_nchw_ms,onednn_blocked_ms,torch_ms,"
       "ours_min_ms,onednn_nchw_min_ms,onednn_blocked_min_ms,"
       "ours_gflops,onednn_nchw_gflops,onednn_blocked_gflops,torch_gflops,peak_gflops,"
       "ours_gbps,rss_ours_mb,rss_onednn_mb,max_rel_diff,other_load";
  if (algo_columns(o)) {
    for (convpool_algo a : o.algos) {
      const std::string n = algo_name(a);
      f << "," << n << "_ms," << n << "_min_ms," << n << "_max_rel_diff";
    }
    if (auto_column(o)) f << ",auto_vs_best";
  }
  f << "\n";
  const auto mn = [](const TimedResult &x) { return x.ok ? bench::minimum(x.ms) : NAN; };
  for (const CaseResult &r : rs) {
    const double flop = case_flop(r.c);
    const double t[4] = {ms_or_nan(r.ours().time), ms_or_nan(r.dnnl_nchw),
                         ms_or_nan(r.dnnl_blocked), ms_or_nan(r.torch)};
    const LayerShape &s = r.c.s;
    f << case_label(r.c) << "," << convpool_dtype_name(r.c.dtype) << "," << s.batch << "," << s.c_in
      << "," << s.c_out << "," << s.height << "," << s.width << "," << s.k << "," << s.pool << ","
      << r.iters << "," << csv_num(flop * 1e-9);
    for (double x : t) f << "," << csv_num(x);
    f << "," << csv_num(mn(r.ours().time)) << "," << csv_num(mn(r.dnnl_nchw)) << ","
      << csv_num(mn(r.dnnl_blocked));
    for (double x : t) f << "," << csv_num(flop / (x * 1e6));
    f << "," << csv_num(peak_for(m, r.c.dtype)) << "," << csv_num(case_bytes(r.c) / (t[0] * 1e6))
      << "," << csv_num(r.rss_ours_kb < 0 ? NAN : (double)r.rss_ours_kb / 1024.0) << ","
      << csv_num(r.rss_dnnl_kb < 0 ? NAN : (double)r.rss_dnnl_kb / 1024.0) << ","
      << csv_num(worst_rel_diff(r)) << "," << csv_num(r.other_load);
    if (algo_columns(o)) {
      for (const AlgoResult &a : r.algos)
        f << "," << csv_num(ms_or_nan(a.time)) << "," << csv_num(mn(a.time)) << ","
          << csv_num(a.checked ? a.diff.rel : NAN);
      if (auto_column(o)) f << "," << csv_num(auto_vs_best(r));
    }
    f << "\n";
  }
}

// Replace the extension of path (or append one).
std::string with_extension(const std::string &path, const std::string &ext) {
  const size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    return path.substr(0, dot) + ext;
  return path + ext;
}

}  // namespace

// How long oneDNN's OpenMP workers spin before they sleep. libgomp's default
// (300000 spins, over a millisecond here) keeps a core busy after every
// oneDNN call and slows whichever system runs next by up to ~2x on the small
// cases; 10000 spins still covers the barriers inside one oneDNN call (its
// own times do not change). libgomp reads the variable when it is loaded,
// so main() sets it and re-executes the program once.
constexpr const char *kOmpSpinCount = "10000";
constexpr const char *kSpinMarker = "CONVPOOL_BENCH_SET_GOMP_SPINCOUNT";

// Returns only if no re-exec was needed (or it failed).
void limit_openmp_spinning(char **argv) {
  if (std::getenv(kSpinMarker)) {
    // Second start: libgomp has read the value; children (torch) get the
    // default environment back.
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(kSpinMarker);
    return;
  }
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;  // user's choice
  for (char **a = argv + 1; *a; ++a)
    if (std::strcmp(*a, "--omp-default") == 0 || std::strcmp(*a, "--help") == 0 ||
        std::strcmp(*a, "-h") == 0)
      return;
  const std::string self = bench::self_exe_path();
  if (self.empty()) return;
  setenv("GOMP_SPINCOUNT", kOmpSpinCount, 1);
  setenv(kSpinMarker, "1", 1);
  execv(self.c_str(), argv);
  unsetenv("GOMP_SPINCOUNT");  // exec failed: run with the defaults
  unsetenv(kSpinMarker);
}

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rss-child") == 0) return rss_child_main(argc, argv);
  const bool spin_limited = std::getenv(kSpinMarker) != nullptr;
  limit_openmp_spinning(argv);

  Options o;
  const int parsed = parse_options(argc, argv, &o);
  if (parsed == 1) return 0;
  if (parsed != 0) return 2;

  std::vector<Case> cases;
  if (o.cases_file.empty()) {
    cases = default_cases(o.quick);
  } else if (!read_cases(o.cases_file, &cases)) {
    return 2;
  }

  Machine m;
  char brand[64];
  peak_cpu_brand(brand, sizeof brand);
  m.brand = brand;
  if (convpool_get_info(&m.info) != CONVPOOL_SUCCESS) {
    std::fprintf(stderr, "convpool-bench: convpool_get_info failed: %s\n", convpool_last_error());
    return 3;
  }
  m.threads = o.threads > 0 ? o.threads : std::max(1, m.info.usable_cpus);
  if (spin_limited) {
    m.omp_spin = std::string("GOMP_SPINCOUNT=") + kOmpSpinCount + " (set by the benchmark)";
  } else if (std::getenv("GOMP_SPINCOUNT")) {
    m.omp_spin = std::string("GOMP_SPINCOUNT=") + std::getenv("GOMP_SPINCOUNT");
  } else if (std::getenv("OMP_WAIT_POLICY")) {
    m.omp_spin = std::string("OMP_WAIT_POLICY=") + std::getenv("OMP_WAIT_POLICY");
  } else {
    m.omp_spin = "libgomp default";
  }

  std::printf("convpool-bench: %s, %d usable CPUs, %d threads, convpool %s (%s), oneDNN %s\n",
              m.brand.c_str(), m.info.usable_cpus, m.threads, m.info.version, m.info.isa,
              bench::onednn_version().c_str());
  m.load_start = load_average();
  measure_peaks(o, &m, "start");
  if (o.rss) {
    std::string why;
    m.baseline_rss_kb = child_peak_rss_kb(cases[0], "none", m.threads, &why);
  }

  std::vector<CaseResult> results;
  bool all_passed = true;
  for (const Case &c : cases) {
    std::printf("  %-36s ", case_label(c).c_str());
    std::fflush(stdout);
    const double t0 = bench::now_ms();
    // Rerun a case that other processes disturbed, keeping the least
    // disturbed run.
    CaseResult best = run_case(o, c, m.threads, &m.torch_version);
    double last_load = best.other_load;
    for (int retry = 0; retry < o.retries && best.other_load > o.max_other_load; ++retry) {
      std::printf("[other load %.2f, rerun] ", last_load);
      std::fflush(stdout);
      sleep(1);
      CaseResult again = run_case(o, c, m.threads, &m.torch_version);
      again.attempts = best.attempts + 1;
      last_load = again.other_load;
      if (again.other_load < best.other_load) {
        best = std::move(again);
      } else {
        best.attempts = again.attempts;
      }
    }
    results.push_back(std::move(best));
    const CaseResult &r = results.back();
    if (algo_columns(o)) {
      for (const AlgoResult &a : r.algos)
        std::printf("%s %s ms, ", algo_name(a.algo), fmt_ms(ms_or_nan(a.time)).c_str());
      if (auto_column(o)) std::printf("auto vs best %s, ", auto_vs_best_cell(r).c_str());
    }
    std::printf(
        "ours %s ms, oneDNN NCHW %s / blocked %s ms, torch %s ms, diff %s, other load %s "
        "(%.1f s)\n",
        fmt_ms(ms_or_nan(r.ours().time)).c_str(), fmt_ms(ms_or_nan(r.dnnl_nchw)).c_str(),
        fmt_ms(ms_or_nan(r.dnnl_blocked)).c_str(), fmt_ms(ms_or_nan(r.torch)).c_str(),
        check_cell(r).c_str(), fmt("%.2f", r.other_load).c_str(), (bench::now_ms() - t0) * 1e-3);
    // A short peak sample between cases: the peak is a maximum, and the
    // machine is shared, so more samples make a disturbed value less likely.
    measure_peaks(o, &m, nullptr);
    for (const AlgoResult &a : r.algos) {
      if (!a.checked || a.passed) continue;
      all_passed = false;
      std::fprintf(stderr,
                   "convpool-bench: FAIL %s (%s): max |ours - oneDNN| / max |ref| = %.3g > %.1g "
                   "(%zu non-finite)\n",
                   case_label(c).c_str(), algo_name(a.algo), a.diff.rel, r.tolerance,
                   a.diff.nonfinite);
    }
  }

  measure_peaks(o, &m, "end");
  m.load_end = load_average();

  Scaling sc;
  if (o.scaling) {
    sc = measure_scaling(o, m.threads);
    for (int retry = 0; retry < o.retries && sc.other_load > o.max_other_load; ++retry) {
      sleep(1);
      Scaling again = measure_scaling(o, m.threads);
      again.attempts = sc.attempts + 1;
      if (again.other_load < sc.other_load) {
        sc = again;
      } else {
        sc.attempts = again.attempts;
      }
    }
  } else {
    sc.why = "thread scaling skipped (--no-scaling)";
  }

  const std::string md = make_markdown(m, o, results, sc);
  std::printf("\n%s", md.c_str());
  {
    std::ofstream f(o.out);
    f << md;
    if (!f) std::fprintf(stderr, "convpool-bench: cannot write %s\n", o.out.c_str());
  }
  const std::string csv = with_extension(o.out, ".csv"), png = with_extension(o.out, ".png");
  write_csv(csv, m, o, results);
  std::printf("\nwrote %s and %s\n", o.out.c_str(), csv.c_str());

  if (o.plot) {
    if (!is_executable(o.python) || !is_file(o.plot_script)) {
      std::printf("plot skipped: need %s and %s\n", o.python.c_str(), o.plot_script.c_str());
    } else {
      std::string out;
      const int rc = bench::run_capture({o.python, o.plot_script, csv, png}, &out);
      std::printf("%s%s", out.c_str(), rc == 0 ? "" : "plot script failed\n");
    }
  }
  if (!all_passed) {
    std::fprintf(stderr, "convpool-bench: correctness check FAILED (see max rel diff)\n");
    return 1;
  }
  return 0;
}
