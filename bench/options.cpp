// Command-line options: usage text and parser; see options.hpp.
#include "options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "ours.hpp"

namespace bench {

static void usage(FILE *to) {
  std::fprintf(to,
               "usage: convpool-bench [options]\n"
               "  --cases FILE      cases, one per line: dtype batch cin cout h w k pool\n"
               "                    [pad=N stride=S dilation=D groups=G pstride=S ppad=N\n"
               "                    relu residual]\n"
               "                    (default: the seven built-in cases, see bench/README.md)\n"
               "  --threads N       threads for every system (default: usable CPUs)\n"
               "  --algos LIST      our algorithms to time, a comma list of depthwise, winograd,\n"
               "                    winograd2x3, direct, sr, im2col, auto; default auto; more\n"
               "                    than one adds a column per algorithm and auto / best of\n"
               "                    the others\n"
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
               "  --out FILE        Markdown table (default convpool-bench-results.md in the\n"
               "                    current directory; bench/results.md is the committed\n"
               "                    one, written only when named); the CSV and\n"
               "                    PNG are written next to it (.csv, .png)\n"
               "  --python PATH     interpreter for torch and the plot (default /usr/bin/python3)\n"
               "  --no-torch --no-rss --no-plot --no-scaling   skip those parts\n"
               "  --omp-default     run oneDNN with libgomp's default waiting (otherwise\n"
               "                    OMP_WAIT_POLICY=active, see bench/README.md)\n"
               "  --own-pools       each of our operators starts a thread pool of its own\n"
               "                    (default: all run on the process-wide pool, as the\n"
               "                    layers of a network do)\n"
               "  --help\n");
}

static bool parse_int(const char *text, int lo, int *out) {
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > 1000000) return false;
  *out = (int)v;
  return true;
}

static bool parse_double(const char *text, double *out) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= 0.0)) return false;
  *out = v;
  return true;
}

int parse_options(int argc, char **argv, Options *o) {
  bool iters_given = false, warmup_given = false, min_time_given = false, retries_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    const auto bad = [&](const char *what) {
      std::fprintf(stderr, "convpool-bench: %s needs %s\n", a.c_str(), what);
      return 2;
    };
    // Options without a value: each sets one flag.
    struct Switch {
      const char *name;
      bool Options::*flag;
      bool value;
    };
    static const Switch switches[] = {
        {"--quick", &Options::quick, true},         {"--no-torch", &Options::torch, false},
        {"--no-rss", &Options::rss, false},         {"--no-plot", &Options::plot, false},
        {"--no-scaling", &Options::scaling, false}, {"--omp-default", &Options::omp_default, true},
        {"--own-pools", &Options::own_pools, true},
    };
    const Switch *sw = nullptr;
    for (const Switch &candidate : switches)
      if (a == candidate.name) sw = &candidate;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 1;
    } else if (sw) {
      o->*(sw->flag) = sw->value;
    } else if (a == "--cases") {
      if (!has_value) return bad("a file");
      o->cases_file = argv[++i];
    } else if (a == "--out") {
      if (!has_value) return bad("a file");
      o->out = argv[++i];
    } else if (a == "--algos") {
      if (!has_value)
        return bad(
            "a comma list of algorithm names (sr, im2col, winograd, winograd2x3, depthwise, "
            "direct, auto)");
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

}  // namespace bench
