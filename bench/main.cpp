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
//
// This file holds main(): the OpenMP setting, the loop over the cases with
// its reruns, and the output files. The parts: options, cases, ours,
// onednn_layer, torch_runner, measure, run_case, report.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"
#include "convpool.h"
#include "measure.hpp"
#include "onednn_layer.hpp"
#include "options.hpp"
#include "ours.hpp"
#include "peak.h"
#include "report.hpp"
#include "run_case.hpp"

using namespace bench;

// How long oneDNN's OpenMP workers spin before they sleep. libgomp's default
// (300000 spins, over a millisecond here) keeps a core busy after every
// oneDNN call and slows whichever system runs next by up to ~2x on the small
// cases; 10000 spins still covers the barriers inside one oneDNN call (its
// own times do not change). libgomp reads the variable when it is loaded,
// so main() sets it and re-executes the program once.
constexpr const char *kOmpSpinCount = "10000";
constexpr const char *kSpinMarker = "CONVPOOL_BENCH_SET_GOMP_SPINCOUNT";

// Returns only if no re-exec was needed (or it failed).
static void limit_openmp_spinning(char **argv) {
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

  if (o.plot) run_plot(o, csv, png);
  if (!all_passed) {
    std::fprintf(stderr, "convpool-bench: correctness check FAILED (see max rel diff)\n");
    return 1;
  }
  return 0;
}
