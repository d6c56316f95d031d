// Measurement utilities; see measure.hpp.
#include "measure.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "onednn_layer.hpp"
#include "ours.hpp"

namespace bench {

void pause_ms(double ms) {
  if (ms > 0.0) usleep((useconds_t)(ms * 1000.0));
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return (in >> first) ? first : std::string("?");
}

double peak_for(const Machine &m, convpool_dtype d) {
  if (d == CONVPOOL_BFLOAT16) return m.peak[PEAK_BF16_AVX512];
  return m.peak[PEAK_FP32_AVX512] > 0 ? m.peak[PEAK_FP32_AVX512]
                                            : m.peak[PEAK_FP32_AVX2];
}

void measure_peaks(const Options &o, Machine *m, const char *when) {
  const double seconds = when ? o.peak_seconds : std::min(o.peak_seconds, 0.1);
  const int trials = when ? o.peak_trials : 1;
  if (when) std::printf("  FMA peak at the %s on %d threads:", when, m->threads);
  for (int k = 0; k < PEAK_COUNT; ++k) {
    const double p = peak_fma((peak_kind)k, m->threads, seconds, trials);
    m->peak[k] = std::max(m->peak[k], p);
    if (when)
      std::printf(" %s %s%s", peak_name((peak_kind)k),
                  p > 0 ? fmt("%.0f", p).c_str() : "n/a", k + 1 < PEAK_COUNT ? "," : "");
  }
  if (when) std::printf(" GFLOP/s\n");
}

long child_peak_rss_kb(const Case &c, const std::string &system, int threads,
                       std::string *why, convpool_algo algo) {
  const std::string self = bench::self_exe_path();
  if (self.empty()) {
    *why = "cannot find /proc/self/exe";
    return -1;
  }
  const LayerShape &s = c.s;
  const std::vector<std::string> argv = {
      self, "--rss-child", system, convpool_dtype_name(c.dtype), std::to_string(s.batch),
      std::to_string(s.c_in), std::to_string(s.c_out), std::to_string(s.height),
      std::to_string(s.width), std::to_string(s.k), std::to_string(s.pool),
      std::to_string(threads), algo_name(algo)};
  std::string out;
  const int rc = bench::run_capture(argv, &out);
  const std::string kb = find_value(out, "vmhwm_kb");
  if (rc == 0 && !kb.empty()) return std::strtol(kb.c_str(), nullptr, 10);
  *why = last_line(out);
  if (why->empty()) *why = "child exited with status " + std::to_string(rc);
  return -1;
}

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
      if (!layer.init(c.dtype, c.s, threads, d.src.data(), d.weights.data(), d.bias.data(),
                      &why)) {
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

}  // namespace bench
