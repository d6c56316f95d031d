// Command-line options of convpool-bench.
#ifndef CONVPOOL_BENCH_OPTIONS_HPP
#define CONVPOOL_BENCH_OPTIONS_HPP

#include <string>
#include <vector>

#include "convpool.h"

#ifndef BENCH_SOURCE_DIR
#define BENCH_SOURCE_DIR "bench"
#endif

namespace bench {

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
  bool omp_default = false;  // oneDNN's OpenMP threads wait as libgomp's default
  bool own_pools = false;    // each of our operators on a pool of its own (not the shared one)
  // Our algorithms to time, each as its own system. The "ours" columns are
  // auto's (the first listed if auto is not).
  std::vector<convpool_algo> algos{CONVPOOL_ALGO_AUTO};
  double peak_seconds = 0.3;
  int peak_trials = 3;
  std::string cases_file;
  // Outside the source tree: the committed results change only on purpose.
  std::string out = "convpool-bench-results.md";
  std::string python = "/usr/bin/python3";
  std::string torch_script = std::string(BENCH_SOURCE_DIR) + "/torch_baseline.py";
  std::string plot_script = std::string(BENCH_SOURCE_DIR) + "/plot.py";
};

// Returns 0 to run, 1 for --help, 2 for a usage error.
int parse_options(int argc, char **argv, Options *o);

}  // namespace bench

#endif
