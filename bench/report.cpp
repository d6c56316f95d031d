// The report's cells, the progress line and the Markdown tables; see
// report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "bench_util.hpp"
#include "onednn_layer.hpp"
#include "ours.hpp"

namespace bench {

// ---- cells ----

std::string fmt_ms(double v) {
  return fmt(v < 10.0 ? "%.3f" : "%.1f", v);
}

std::string fmt_num(double v) {
  const double a = std::fabs(v);
  return fmt(a >= 100.0 ? "%.0f" : a >= 10.0 ? "%.1f" : a >= 0.1 ? "%.2f" : "%.2g", v);
}

static std::string fmt_pct(double v) {
  return std::isfinite(v) ? fmt_num(v) + "%" : "n/a";
}

double worst_rel_diff(const CaseResult &r) {
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
static std::string algo_ms_cell(const AlgoResult &a) {
  return fmt_ms(ms_or_nan(a.time)) + (a.checked && !a.passed ? " **FAIL**" : "");
}

bool algo_columns(const Options &o) {
  return o.algos.size() > 1;
}
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

static std::string rss_cell(long kb) {
  return kb < 0 ? "n/a" : fmt("%.0f", (double)kb / 1024.0);
}

std::string variant_key(const OnednnResult *v) {
  return v ? onednn_variants()[(size_t)v->index].key : "n/a";
}

static double variant_ms(const OnednnResult *v) {
  return v ? ms_or_nan(v->time) : NAN;
}

// ---- the progress line ----

std::string progress_line(const Options &o, const CaseResult &r) {
  std::string line;
  if (algo_columns(o)) {
    for (const AlgoResult &a : r.algos)
      line += std::string(algo_name(a.algo)) + " " + fmt_ms(ms_or_nan(a.time)) + " ms, ";
    if (auto_column(o)) line += "auto vs best " + auto_vs_best_cell(r) + ", ";
  }
  const OnednnResult *nchw = r.best_onednn(true), *blocked = r.best_onednn(false);
  return line + "ours " + fmt_ms(ms_or_nan(r.ours().time)) + " ms, oneDNN best NCHW " +
         fmt_ms(variant_ms(nchw)) + " (" + variant_key(nchw) + ") / blocked " +
         fmt_ms(variant_ms(blocked)) + " ms, torch " + fmt_ms(ms_or_nan(r.torch)) + " ms, diff " +
         check_cell(r) + ", other load " + fmt("%.2f", r.other_load);
}

// ---- Markdown ----

static void write_header(std::ostringstream &md, const Machine &m, const Options &o) {
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
     << onednn_version() << ", torch "
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
    md << ", one operator each, "
       << (o.own_pools ? "each on threads of its own" : "all on the process-wide thread pool")
       << ")";
  } else {
    md << "ours (" << (o.own_pools ? "on threads of its own" : "on the process-wide thread pool")
       << ")";
  }
  md << " and every oneDNN variant oneDNN can build run once per iteration, in a shuffled "
        "order that never repeats a system back to back. oneDNN runs in a process of its "
        "own, stopped while the other systems run; its OpenMP threads: "
     << m.omp_wait << ". Load average at the start / end: " << m.load_start << " / " << m.load_end
     << " (the machine is shared; above ~0.5 the numbers are disturbed).\n\n";
}

// The main table: one row per case, ours against the best oneDNN variants.
static void write_main_table(std::ostringstream &md, const Machine &m, const Options &o,
                             const std::vector<CaseResult> &rs) {
  // With several algorithms, their times (and auto vs best) follow "ours ms".
  md << "| case | ours ms";
  std::string align = "|---|--:";
  if (algo_columns(o)) {
    for (convpool_algo a : o.algos) md << " | " << algo_name(a) << " ms";
    if (auto_column(o)) md << " | auto vs best";
    for (size_t i = 0; i < o.algos.size() + (auto_column(o) ? 1 : 0); ++i) align += "|--:";
  }
  md << " | best oneDNN NCHW ms | oneDNN NCHW variant | **ours/best-oneDNN-NCHW** "
        "| best oneDNN blocked ms | ours/best-oneDNN-blocked | torch ms | ours/torch "
        "| ours GFLOP/s | % of peak | ours GB/s | RSS ours MB | RSS oneDNN MB | max rel diff "
        "| other load |\n";
  md << align << "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const CaseResult &r : rs) {
    const OnednnResult *nchw = r.best_onednn(true), *blocked = r.best_onednn(false);
    const double t = ms_or_nan(r.ours().time), tn = variant_ms(nchw), tb = variant_ms(blocked),
                 tt = ms_or_nan(r.torch);
    const double gflops = case_flop(r.c) / (t * 1e6);
    md << "| " << case_label(r.c) << " | " << fmt_ms(t);
    if (algo_columns(o)) {
      for (const AlgoResult &a : r.algos) md << " | " << algo_ms_cell(a);
      if (auto_column(o)) md << " | " << auto_vs_best_cell(r);
    }
    md << " | " << fmt_ms(tn) << " | " << variant_key(nchw) << " | **" << fmt_num(t / tn) << "** | "
       << fmt_ms(tb) << " | " << fmt_num(t / tb) << " | " << fmt_ms(tt) << " | " << fmt_num(t / tt)
       << " | " << fmt_num(gflops) << " | " << fmt_pct(100.0 * gflops / peak_for(m, r.c.dtype))
       << " | " << fmt_num(case_bytes(r.c) / (t * 1e6)) << " | " << rss_cell(r.rss_ours_kb) << " | "
       << rss_cell(nchw ? nchw->rss_kb : -1) << " | " << check_cell(r) << " | "
       << fmt("%.2f", r.other_load) << " |\n";
  }
  md << "\n";
}

// One row per case and oneDNN variant.
static void write_variant_table(std::ostringstream &md, const Machine &m,
                                const std::vector<CaseResult> &rs) {
  md << "oneDNN variants:\n\n"
     << "| case | oneDNN variant | implementation | ms | ours/X | GFLOP/s | % of peak "
        "| RSS MB | max rel diff |\n"
     << "|---|---|---|--:|--:|--:|--:|--:|--:|\n";
  for (const CaseResult &r : rs) {
    const double t = ms_or_nan(r.ours().time);
    const bool none_built = std::none_of(r.onednn.begin(), r.onednn.end(),
                                         [](const OnednnResult &v) { return v.time.ok; });
    if (none_built) {
      md << "| " << case_label(r.c) << " | every variant | n/a | n/a | n/a | n/a | n/a | n/a "
         << "| n/a |\n";
      continue;
    }
    for (const OnednnResult &v : r.onednn) {
      const double tv = ms_or_nan(v.time), gflops = case_flop(r.c) / (tv * 1e6);
      std::string impl = v.time.ok ? v.impl : "n/a";
      if (v.time.ok && !v.reorders.empty()) impl += "; reorders " + v.reorders;
      md << "| " << case_label(r.c) << " | " << onednn_variants()[(size_t)v.index].key << " | "
         << impl << " | " << fmt_ms(tv) << " | " << fmt_num(t / tv) << " | " << fmt_num(gflops)
         << " | " << fmt_pct(100.0 * gflops / peak_for(m, r.c.dtype)) << " | " << rss_cell(v.rss_kb)
         << " | " << (v.checked ? fmt("%.1e", v.diff.rel) : "n/a") << " |\n";
    }
  }
  md << "\n";
}

// Whether auto stays within kAutoSlack of the best explicit algorithm.
static void write_auto_summary(std::ostringstream &md, const Options &o,
                               const std::vector<CaseResult> &rs) {
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
static bool rate_above_peak(const Machine &m, const std::vector<CaseResult> &rs) {
  for (const CaseResult &r : rs) {
    std::vector<const TimedResult *> times = {&r.torch};
    for (const AlgoResult &a : r.algos) times.push_back(&a.time);
    for (const OnednnResult &v : r.onednn) times.push_back(&v.time);
    for (const TimedResult *t : times)
      if (case_flop(r.c) / (ms_or_nan(*t) * 1e6) > 1.02 * peak_for(m, r.c.dtype)) return true;
  }
  return false;
}

static void write_column_notes(std::ostringstream &md, const Machine &m, const Options &o) {
  const char *shown = algo_name(o.algos[main_algo_index(o.algos)]);
  md << "Columns:\n\n"
     << "- *case*: dtype, batch, C_in->C_out, H x W, K, then what the layer sets beyond the "
        "original one (`s` conv stride, `d` dilation, `p` conv padding, `g` groups, `+res` a "
        "residual added before the activation, `relu`), and the pool window P (`/S` its "
        "stride, `pp` its padding).\n"
     << "- *ours*: `convpool_op_run` on NCHW input to NCHW output; the operator (packed "
        "weights, thread pool) is created once, outside the timing. Algorithm: "
     << shown << ".\n";
  if (algo_columns(o)) {
    md << "- *<algorithm> ms*: the same for each algorithm listed with `--algos` "
          "(`convpool_options.algo`), each with its own operator, all interleaved with oneDNN "
          "in the same loop; the *ours* columns repeat "
       << shown
       << ". A time marked FAIL failed its correctness check; n/a: the library "
          "refused the algorithm for the case (see the details).\n";
    if (auto_column(o))
      md << "- *auto vs best*: t_auto / min(t of " << explicit_algo_names(o) << "); above "
         << fmt("%.2f", kAutoSlack) << " (marked) auto is more than "
         << fmt("%.0f", 100.0 * (kAutoSlack - 1.0))
         << "% slower than the better choice. Where auto picks the same algorithm as "
            "another column, their ratio shows the run-to-run noise.\n";
  }
  md << "- *oneDNN variants*: convolution (bias, stride, dilation, groups and padding "
        "included; a residual as a sum post-op, ReLU as an eltwise post-op after it) + max "
        "pooling primitives with "
        "`algorithm::convolution_direct` (`direct-*`) or `convolution_winograd` "
        "(`winograd-*`). `*-blocked`: src and dst `format_tag::any` (oneDNN's blocked "
        "layouts), on memory already in that layout, reorders excluded. `*-reorder`: the same "
        "primitives plus the NCHW->blocked src reorder and the blocked->NCHW dst reorder in "
        "every call. `*-nchw`: primitives created with `format_tag::nchw` for src and dst, no "
        "reorders. Weights are reordered once, outside the timing. *implementation*: "
        "`impl_info_str()` of the convolution (+ pooling, + reorders); n/a: oneDNN has no "
        "implementation for that variant (the details say why). With a residual, oneDNN's sum "
        "post-op adds to its dst: the residual (kept in the conv's dst layout) is copied there "
        "before each call, outside the timing.\n"
     << "- *best oneDNN NCHW*: the fastest variant with NCHW in and out (`*-reorder`, "
        "`*-nchw`), named in *oneDNN NCHW variant*; *best oneDNN blocked*: the faster "
        "`*-blocked`. **ours/best-oneDNN-NCHW** is the headline: the same NCHW-in, NCHW-out "
        "contract as ours.\n"
     << "- *torch*: `F.conv2d` [+ residual] [-> `F.relu`] -> `F.max_pool2d` (pooling "
        "skipped for P=1) in a separate "
        "python process (`bench/torch_baseline.py`), same threads and shapes, its own "
        "median.\n"
     << "- *ours/X*: time ratio t_ours / t_X; below 1 means ours is faster.\n"
     << "- *GFLOP/s*: 2*B*C_out*OH*OW*(C_in/groups)*K*K / t (direct-convolution flop, also for "
        "Winograd; pooling not counted). *% of peak*: against the measured fp32 FMA peak "
        "(fp32 and fp16 cases) or the bf16 dot-product peak (bf16 cases; the fp32 peak on CPUs "
        "without AVX512_BF16). *GB/s*: (input + "
        "weights + bias + residual + output bytes) / t.\n"
     << "- *RSS*: peak resident set (VmHWM) of a child process (this program re-executed) "
        "that builds the case's inputs in the case's dtype and runs only that system (one "
        "oneDNN variant) twice; it includes the inputs, output and the process baseline ("
     << rss_cell(m.baseline_rss_kb)
     << " MB for a child that does no work). *RSS oneDNN*: that of the best NCHW variant.\n"
     << "- *max rel diff*: max |ours - ref| / max |ref| over the output, where ref is "
        "oneDNN's fp32 direct result on the same (for fp16/bf16: widened) input values; "
        "limits 1e-4 fp32, 2e-3 fp16, 1.6e-2 bf16"
     << (algo_columns(o) ? "; the largest over the algorithms (each is in the details)" : "")
     << ". In the variant table: the same for oneDNN's own output (not checked against a "
        "limit).\n"
     << "- *other load*: CPU cores' worth of time used by other processes (or stolen by the "
        "hypervisor) while the case was timed (the timing loop and the torch process, "
        "the larger): busy time in /proc/stat minus the CPU time of this process, its "
        "oneDNN process and its other children, per second. Above ~0.1 the row was "
        "disturbed; such cases are rerun up to "
     << o.retries << " times and the least disturbed run is kept.\n\n";
}

// Details of one case: plans, implementations and every reason for an n/a.
static void write_details(std::ostringstream &md, const Options &o, const CaseResult &r) {
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
  // oneDNN variants without a time, grouped by reason.
  std::map<std::string, std::string> why_keys;
  for (const OnednnResult &v : r.onednn) {
    if (v.time.ok) continue;
    std::string &keys = why_keys[v.time.why];
    keys += (keys.empty() ? "" : ", ") + std::string(onednn_variants()[(size_t)v.index].key);
  }
  for (const auto &wk : why_keys) md << "; oneDNN " << wk.second << " n/a: " << wk.first;
  for (const std::string *why : {&r.onednn_check_note, &r.torch.why, &r.check_note})
    if (!why->empty()) md << "; " << *why;
  if (!r.rss_ours_why.empty()) md << "; RSS ours n/a: " << r.rss_ours_why;
  for (const OnednnResult &v : r.onednn)
    if (!v.rss_why.empty())
      md << "; RSS " << onednn_variants()[(size_t)v.index].key << " n/a: " << v.rss_why;
  md << "\n";
}

std::string make_markdown(const Machine &m, const Options &o, const std::vector<CaseResult> &rs,
                          const Scaling &sc) {
  std::ostringstream md;
  write_header(md, m, o);
  write_main_table(md, m, o, rs);
  if (auto_column(o)) write_auto_summary(md, o, rs);
  if (rate_above_peak(m, rs))
    md << "**Warning:** a measured rate exceeds the measured peak by more than 2%: the peak "
          "samples were probably all lowered by other load, so % of peak reads high.\n\n";
  if (sc.done) {
    md << "Thread scaling, " << case_label(sc.c) << " (median of " << sc.iters
       << "): ours 1 thread " << fmt_ms(sc.ours_1) << " ms, " << sc.threads << " threads "
       << fmt_ms(sc.ours_n) << " ms, speed-up " << fmt("%.2f", sc.ours_1 / sc.ours_n)
       << "x; oneDNN direct-blocked 1 thread " << fmt_ms(sc.dnnl_1) << " ms, " << sc.threads
       << " threads " << fmt_ms(sc.dnnl_n) << " ms, speed-up " << fmt("%.2f", sc.dnnl_1 / sc.dnnl_n)
       << "x; other load " << fmt("%.2f", sc.other_load)
       << (sc.attempts > 1 ? " (best of " + std::to_string(sc.attempts) + " runs)" : "") << ".\n\n";
  } else if (!sc.why.empty()) {
    md << sc.why << "\n\n";
  }
  write_variant_table(md, m, rs);
  write_column_notes(md, m, o);
  md << "Details:\n\n";
  for (const CaseResult &r : rs) write_details(md, o, r);
  return md.str();
}

}  // namespace bench
