// One case of the benchmark and the thread-scaling line: every system timed
// in one interleaved loop (ours in this process, oneDNN's variants in their
// own process), the correctness checks, the torch process and the RSS
// children, and the results the report prints.
#ifndef CONVPOOL_BENCH_RUN_CASE_HPP
#define CONVPOOL_BENCH_RUN_CASE_HPP

#include <cmath>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"
#include "convpool.h"
#include "measure.hpp"
#include "onednn_process.hpp"
#include "options.hpp"

namespace bench {

// One of our algorithms in one case: its times, plan and correctness check.
struct AlgoResult {
  convpool_algo algo = CONVPOOL_ALGO_AUTO;
  TimedResult time;
  std::string plan;
  bool checked = false, passed = true;
  bench::Diff diff;
};

// Index in --algos of the algorithm shown as "ours": auto, or the first listed.
size_t main_algo_index(const std::vector<convpool_algo> &algos);

// One oneDNN variant in one case: its times, the implementations oneDNN
// chose, its output against the fp32 reference, its peak RSS.
struct OnednnResult {
  int index = 0;  // into onednn_variants()
  TimedResult time;
  std::string impl, reorders;
  bool checked = false;
  Diff diff;
  long rss_kb = -1;
  std::string rss_why;
};

// Everything measured in one case.
struct CaseResult {
  Case c{};
  int iters = 0;
  std::vector<AlgoResult> algos;     // ours, one per --algos entry, in that order
  size_t main = 0;                   // the entry shown in the "ours" columns
  std::vector<OnednnResult> onednn;  // every variant, in onednn_variants() order
  TimedResult torch;
  double tolerance = 0.0;
  std::string check_note, onednn_check_note;
  long rss_ours_kb = -1;
  std::string rss_ours_why;
  double other_load = NAN;  // cores used by other processes while timing (max of
                            // the timing loop and the torch subprocess)
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
  // The fastest oneDNN variant (by median) with NCHW in and out, or of the
  // blocked ones; nullptr if none ran.
  const OnednnResult *best_onednn(bool nchw_in_out) const;
};

// Time every system on case c (each of our algorithms and every oneDNN
// variant interleaved, then torch), check ours against oneDNN's fp32 output
// and measure the peak RSS of each system.
CaseResult run_case(const Options &o, const Case &c, int threads, const OmpWaitSetting &omp,
                    std::string *torch_version);

// Thread scaling of the headline case: ours and oneDNN direct blocked on 1
// thread and on `threads` threads.
struct Scaling {
  bool done = false;
  std::string why;
  Case c{};
  int threads = 0, iters = 0;
  double ours_1 = NAN, ours_n = NAN, dnnl_1 = NAN, dnnl_n = NAN;
  double other_load = NAN;
  int attempts = 1;
};

Scaling measure_scaling(const Options &o, int threads, const OmpWaitSetting &omp);

}  // namespace bench

#endif
