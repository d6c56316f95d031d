// Measurement utilities shared by the benchmark's parts: per-system timing
// results, reruns of disturbed measurements, the machine facts and FMA peaks,
// the load average, and the peak-RSS children of ours (this program
// re-executed with --rss-child).
#ifndef CONVPOOL_BENCH_MEASURE_HPP
#define CONVPOOL_BENCH_MEASURE_HPP

#include <unistd.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"
#include "convpool.h"
#include "options.hpp"
#include "peak.h"

namespace bench {

// The times of one system in one case, or why it has none.
struct TimedResult {
  bool ok = false;
  std::string why;
  std::vector<double> ms;
  double median() const { return bench::median(ms); }
};

// The median of a result, NaN if it has none.
inline double ms_or_nan(const TimedResult &t) {
  return t.ok && !t.ms.empty() ? t.median() : NAN;
}

// Run measure() (a result with other_load and attempts), and rerun it up to
// o.retries times, a second apart, while the kept run's other_load is above
// o.max_other_load; the least disturbed run is kept. announce(load) is called
// before each rerun with the load of the run before.
template <typename Measure, typename Announce>
auto least_disturbed(const Options &o, Measure &&measure, Announce &&announce)
    -> decltype(measure()) {
  auto best = measure();
  double last_load = best.other_load;
  for (int retry = 0; retry < o.retries && best.other_load > o.max_other_load; ++retry) {
    announce(last_load);
    sleep(1);
    auto again = measure();
    again.attempts = best.attempts + 1;
    last_load = again.other_load;
    if (again.other_load < best.other_load) {
      best = std::move(again);
    } else {
      best.attempts = again.attempts;
    }
  }
  return best;
}

// Facts of the machine and the run that the report prints.
struct Machine {
  std::string brand;
  convpool_info info{};
  int threads = 1;
  double peak[PEAK_COUNT] = {0, 0, 0};
  std::string torch_version;
  long baseline_rss_kb = -1;
  std::string load_start, load_end;  // 1-minute load averages
  std::string omp_wait;              // how oneDNN's OpenMP threads wait
};

// The 1-minute load average from /proc/loadavg, or "?".
std::string load_average();

// The peak a case is measured against: bf16 dot products for bf16 where the
// CPU has them, else the best fp32 FMA peak (AVX-512 if present): fp16, and
// bf16 without AVX512_BF16, are computed with fp32 FMAs.
double peak_for(const Machine &m, convpool_dtype d);

// Measure every peak variant and keep the best value seen so far: the
// machine is shared, so one measurement may be depressed by other load.
// `when` names a full measurement ("start", "end") that is printed; nullptr
// takes one short, silent sample.
void measure_peaks(const Options &o, Machine *m, const char *when);

// Peak RSS (kB) of a child process that runs only `system` ("ours" with
// algorithm algo, or "none") on case c: the child is this program
// re-executed in --rss-child mode, so its VmHWM covers only its own fresh
// address space. oneDNN's children are its own processes (onednn_process).
long child_peak_rss_kb(const Case &c, const std::string &system, int threads, std::string *why,
                       convpool_algo algo = CONVPOOL_ALGO_AUTO);

// The --rss-child mode: build the inputs, run ours twice (or nothing for
// "none"), print VmHWM. Arguments: system, the case (case_args), threads,
// algo.
int rss_child_main(int argc, char **argv);

}  // namespace bench

#endif
