// The report: Markdown, CSV and the chart; see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench_util.hpp"
#include "ours.hpp"

namespace bench {

std::string fmt_ms(double v) { return fmt(v < 10.0 ? "%.3f" : "%.1f", v); }

// Rates and ratios with about three significant digits, never "0" or "1e+03".
static std::string fmt_num(double v) {
  const double a = std::fabs(v);
  return fmt(a >= 100.0 ? "%.0f" : a >= 10.0 ? "%.1f" : a >= 0.1 ? "%.2f" : "%.2g", v);
}

static std::string fmt_pct(double v) { return std::isfinite(v) ? fmt_num(v) + "%" : "n/a"; }

double ms_or_nan(const TimedResult &t) { return t.ok && !t.ms.empty() ? t.median() : NAN; }

// The largest max rel diff over our checked algorithms (NaN if none).
static double worst_rel_diff(const CaseResult &r) {
  double worst = NAN;
  for (const AlgoResult &a : r.algos)
    if (a.checked) worst = std::isfinite(worst) ? std::max(worst, a.diff.rel) : a.diff.rel;
  return worst;
}

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
static double auto_vs_best(const CaseResult &r) {
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
static std::string algo_ms_cell(const AlgoResult &a) {
  return fmt_ms(ms_or_nan(a.time)) + (a.checked && !a.passed ? " **FAIL**" : "");
}

bool algo_columns(const Options &o) { return o.algos.size() > 1; }
bool auto_column(const Options &o) {
  return algo_columns(o) &&
         std::find(o.algos.begin(), o.algos.end(), CONVPOOL_ALGO_AUTO) != o.algos.end();
}

// "sr and im2col": the explicit algorithms auto is compared with.
static std::string explicit_algo_names(const Options &o) {
  std::vector<std::string> names;
  for (convpool_algo a : o.algos)
    if (a != CONVPOOL_ALGO_AUTO) names.push_back(algo_name(a));
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

static std::string rss_cell(long kb) { return kb < 0 ? "n/a" : fmt("%.0f", (double)kb / 1024.0); }

std::string make_markdown(const Machine &m, const Options &o, const std::vector<CaseResult> &rs,
                          const Scaling &sc) {
  std::ostringstream md;
  md << "# convpool benchmark\n\n";
  md << "Machine: " << m.brand << ", " << m.info.usable_cpus << " usable CPUs"
     << " (L1d " << m.info.l1d_bytes / 1024 << " KiB, L2 " << m.info.l2_bytes / 1024
     << " KiB, L3 " << m.info.l3_bytes / (1024 * 1024) << " MiB). Threads: " << m.threads
     << ".\n\n";
  md << "Measured FMA peak on " << m.threads << " threads (best of the samples taken at the "
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
     << m.omp_spin << ". Load average at the start / end: "
     << m.load_start << " / " << m.load_end << " (the machine is shared; above ~0.5 the "
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
    md << " | " << fmt_ms(tn) << " | "
       << fmt_ms(tb) << " | " << fmt_ms(tt) << " | " << fmt_num(t / tn) << " | "
       << fmt_num(t / tb) << " | " << fmt_num(t / tt) << " | " << fmt_num(gflops) << " | "
       << fmt_pct(100.0 * gflops / peak_for(m, r.c.dtype)) << " | "
       << fmt_num(case_bytes(r.c) / (t * 1e6)) << " | " << rss_cell(r.rss_ours_kb) << " | "
       << rss_cell(r.rss_dnnl_kb) << " | " << check_cell(r) << " | "
       << fmt("%.2f", r.other_load) << " |\n";
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
      if (case_flop(r.c) / (ms_or_nan(*t) * 1e6) > 1.02 * peak_for(m, r.c.dtype))
        above_peak = true;
  }
  if (above_peak)
    md << "**Warning:** a measured rate exceeds the measured peak by more than 2%: the peak "
          "samples were probably all lowered by other load, so % of peak reads high.\n\n";

  if (sc.done) {
    md << "Thread scaling, " << case_label(sc.c) << " (median of " << sc.iters
       << "): ours 1 thread " << fmt_ms(sc.ours_1) << " ms, " << sc.threads << " threads "
       << fmt_ms(sc.ours_n) << " ms, speed-up " << fmt("%.2f", sc.ours_1 / sc.ours_n)
       << "x; oneDNN blocked 1 thread " << fmt_ms(sc.dnnl_1) << " ms, " << sc.threads
       << " threads " << fmt_ms(sc.dnnl_n) << " ms, speed-up "
       << fmt("%.2f", sc.dnnl_1 / sc.dnnl_n) << "x; other load " << fmt("%.2f", sc.other_load)
       << (sc.attempts > 1 ? " (best of " + std::to_string(sc.attempts) + " runs)" : "")
       << ".\n\n";
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
       << algo_name(o.algos[main_algo_index(o.algos)]) << ". A time marked FAIL failed its "
          "correctness check.\n";
    if (auto_column(o))
      md << "- *auto vs best*: t_auto / min(t of " << explicit_algo_names(o)
         << "); above " << fmt("%.2f", kAutoSlack) << " (marked) auto is more than "
         << fmt("%.0f", 100.0 * (kAutoSlack - 1.0))
         << "% slower than the better choice. Where auto picks the same algorithm as "
            "another column, their ratio shows the run-to-run noise.\n";
  }
  md
     << "- *oneDNN blocked*: convolution (format_tag::any, bias included) + max pooling "
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

static std::string csv_num(double v) { return std::isfinite(v) ? fmt("%.6g", v) : ""; }

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
    f << case_label(r.c) << "," << convpool_dtype_name(r.c.dtype) << "," << s.batch << ","
      << s.c_in << "," << s.c_out << "," << s.height << "," << s.width << "," << s.k << ","
      << s.pool << "," << r.iters << "," << csv_num(flop * 1e-9);
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

std::string with_extension(const std::string &path, const std::string &ext) {
  const size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    return path.substr(0, dot) + ext;
  return path + ext;
}

void run_plot(const Options &o, const std::string &csv, const std::string &png) {
  if (!is_executable(o.python) || !is_file(o.plot_script)) {
    std::printf("plot skipped: need %s and %s\n", o.python.c_str(), o.plot_script.c_str());
    return;
  }
  std::string out;
  const int rc = bench::run_capture({o.python, o.plot_script, csv, png}, &out);
  std::printf("%s%s", out.c_str(), rc == 0 ? "" : "plot script failed\n");
}

}  // namespace bench
