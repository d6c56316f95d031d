// Measurement utilities; see measure.hpp.
#include "measure.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "ours.hpp"

namespace bench {

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return (in >> first) ? first : std::string("?");
}

double peak_for(const Machine &m, convpool_dtype d) {
  if (d == CONVPOOL_BFLOAT16 && m.peak[PEAK_BF16_AVX512] > 0) return m.peak[PEAK_BF16_AVX512];
  return m.peak[PEAK_FP32_AVX512] > 0 ? m.peak[PEAK_FP32_AVX512] : m.peak[PEAK_FP32_AVX2];
}

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

long child_peak_rss_kb(const Case &c, const std::string &system, int threads, std::string *why,
                       convpool_algo algo) {
  const std::string self = bench::self_exe_path();
  if (self.empty()) {
    *why = "cannot find /proc/self/exe";
    return -1;
  }
  std::vector<std::string> argv = {self, "--rss-child", system};
  for (const std::string &a : case_args(c)) argv.push_back(a);
  argv.push_back(std::to_string(threads));
  argv.push_back(algo_name(algo));
  std::string out;
  const int rc = bench::run_capture(argv, &out);
  const std::string kb = find_value(out, "vmhwm_kb");
  if (rc == 0 && !kb.empty()) return std::strtol(kb.c_str(), nullptr, 10);
  *why = last_line(out);
  if (why->empty()) *why = "child exited with status " + std::to_string(rc);
  return -1;
}

int rss_child_main(int argc, char **argv) {
  Case c{};
  convpool_algo algo;
  if (argc != 5 + kCaseArgCount || !parse_case_args(argv + 3, &c) ||
      !parse_algo(argv[4 + kCaseArgCount], &algo)) {
    std::printf("n/a bad --rss-child arguments\n");
    return 2;
  }
  const std::string system = argv[2];
  const int threads = std::atoi(argv[3 + kCaseArgCount]);
  if (system == "ours") {
    const CaseData d = make_data(c.dtype, c.s);
    std::string why;
    Ours ours;
    if (!ours.init(c.dtype, c.s, threads, d, &why, algo) || !ours.run(d, &why) ||
        !ours.run(d, &why)) {
      std::printf("n/a %s\n", why.c_str());
      return 1;
    }
  }
  std::printf("vmhwm_kb %ld\n", bench::self_peak_rss_kb());
  return 0;
}

}  // namespace bench
