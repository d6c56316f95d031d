// convpool-bench: convpool against oneDNN and torch on the same layers.
//
// For every case (dtype, batch, C_in, C_out, H, W, K, pool) it times
//   ours     convpool_op_run (operator created once, weights packed), NCHW in,
//            NCHW out; with --algos, once per algorithm, each its own operator;
//   oneDNN   convolution (bias included) + max pooling, with each algorithm
//            oneDNN offers (direct, Winograd) on its blocked layouts (reorders
//            excluded), NCHW in and out through reorders, and on NCHW memory
//            directly; in a process of its own with OMP_WAIT_POLICY=active,
//            stopped between its calls;
//   torch    F.conv2d -> F.max_pool2d in a python subprocess;
// with ours and the oneDNN variants interleaved (in a shuffled order) every
// iteration, and reports medians, ratios (ours against the fastest oneDNN
// variant with NCHW in and out first), GFLOP/s against an FMA peak it
// measures itself, GB/s and the peak RSS of child processes that run only one
// system. Results go to stdout, a Markdown file, a CSV file and (through
// bench/plot.py) a PNG chart.
//
// This file holds main(): the child modes, the loop over the cases with its
// reruns, and the output files. The parts: options, cases, ours,
// onednn_layer (the oneDNN layer and its variants), onednn_process (oneDNN's
// own process), torch_runner, measure, run_case, report.
#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"
#include "convpool.h"
#include "measure.hpp"
#include "onednn_layer.hpp"
#include "onednn_process.hpp"
#include "options.hpp"
#include "ours.hpp"
#include "peak.h"
#include "report.hpp"
#include "run_case.hpp"

using namespace bench;

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rss-child") == 0) return rss_child_main(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "--onednn-child") == 0) return onednn_child_main(argc, argv);

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
  // Our operators' pool (unless --own-pools): the process-wide one, at the
  // benchmark's thread count.
  if (!o.own_pools && convpool_shared_pool_set_threads(m.threads) != CONVPOOL_SUCCESS) {
    std::fprintf(stderr, "convpool-bench: convpool_shared_pool_set_threads(%d) failed: %s\n",
                 m.threads, convpool_last_error());
    return 3;
  }
  const OmpWaitSetting omp = omp_wait_setting(o.omp_default);
  m.omp_wait = omp.description;

  std::printf("convpool-bench: %s, %d usable CPUs, %d threads, convpool %s (%s), oneDNN %s\n",
              m.brand.c_str(), m.info.usable_cpus, m.threads, m.info.version, m.info.isa,
              onednn_version().c_str());
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
    const double t0 = now_ms();
    // Rerun a case that other processes disturbed, keeping the least
    // disturbed run.
    results.push_back(least_disturbed(
        o, [&] { return run_case(o, c, m.threads, omp, &m.torch_version); },
        [](double load) {
          std::printf("[other load %.2f, rerun] ", load);
          std::fflush(stdout);
        }));
    const CaseResult &r = results.back();
    std::printf("%s (%.1f s)\n", progress_line(o, r).c_str(), (now_ms() - t0) * 1e-3);
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
    sc = least_disturbed(
        o, [&] { return measure_scaling(o, m.threads, omp); }, [](double) {});
  } else {
    sc.why = "thread scaling skipped (--no-scaling)";
  }

  const std::string md = make_markdown(m, o, results, sc);
  std::printf("\n%s", md.c_str());
  {
    std::ofstream f(o.out);
    f << md;
    f.flush();
    if (!f) {
      std::fprintf(stderr, "convpool-bench: cannot write %s: %s\n", o.out.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }
  const std::string csv = with_extension(o.out, ".csv"), png = with_extension(o.out, ".png");
  if (!write_csv(csv, m, o, results)) {
    std::fprintf(stderr, "convpool-bench: cannot write %s: %s\n", csv.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::printf("\nwrote %s and %s\n", o.out.c_str(), csv.c_str());

  if (o.plot) run_plot(o, csv, png);
  if (!all_passed) {
    std::fprintf(stderr, "convpool-bench: correctness check FAILED (see max rel diff)\n");
    return 1;
  }
  return 0;
}
