// The report's CSV file and the chart drawn from it; see report.hpp.
//
// Columns: the case, then ours, the best oneDNN NCHW and blocked variants and
// torch (medians, GFLOP/s, RSS, check), then per oneDNN variant
// onednn_<key>_{ms,min_ms,rss_mb,max_rel_diff,impl} (key with '_' for '-'),
// and with several algorithms of ours <name>_{ms,min_ms,max_rel_diff} and
// auto_vs_best when auto is one of them; max_rel_diff is the largest over
// our algorithms.
#include <cmath>
#include <cstdio>
#include <fstream>

#include "bench_util.hpp"
#include "onednn_layer.hpp"
#include "ours.hpp"
#include "report.hpp"

namespace bench {

static std::string csv_num(double v) {
  return std::isfinite(v) ? fmt("%.6g", v) : "";
}
static std::string csv_mb(long kb) {
  return csv_num(kb < 0 ? NAN : (double)kb / 1024.0);
}
static double min_or_nan(const TimedResult &t) {
  return t.ok ? minimum(t.ms) : NAN;
}

// Text in a CSV field: quoted if it holds a comma or a quote.
static std::string csv_text(const std::string &text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

static std::string column_key(const OnednnVariant &v) {
  std::string key = v.key;
  for (char &ch : key)
    if (ch == '-') ch = '_';
  return key;
}

bool write_csv(const std::string &path, const Machine &m, const Options &o,
               const std::vector<CaseResult> &rs) {
  std::ofstream f(path);
  if (!f) return false;
  f << "# machine: " << m.brand << "\n# threads: " << m.threads
    << "\n# peak_fp32: " << peak_for(m, CONVPOOL_FLOAT32)
    << "\n# peak_bf16: " << m.peak[PEAK_BF16_AVX512] << "\n";
  f << "case,dtype,batch,cin,cout,height,width,k,pool,layer,iters,gflop,"
       "ours_ms,onednn_best_nchw_ms,onednn_best_blocked_ms,torch_ms,ours_min_ms,"
       "onednn_best_nchw_variant,onednn_best_blocked_variant,"
       "ours_gflops,onednn_best_nchw_gflops,onednn_best_blocked_gflops,torch_gflops,"
       "peak_gflops,ours_gbps,rss_ours_mb,rss_onednn_best_nchw_mb,max_rel_diff,other_load";
  for (const OnednnVariant &v : onednn_variants()) {
    const std::string n = "onednn_" + column_key(v);
    f << "," << n << "_ms," << n << "_min_ms," << n << "_rss_mb," << n << "_max_rel_diff," << n
      << "_impl";
  }
  if (algo_columns(o)) {
    for (convpool_algo a : o.algos) {
      const std::string n = algo_name(a);
      f << "," << n << "_ms," << n << "_min_ms," << n << "_max_rel_diff";
    }
    if (auto_column(o)) f << ",auto_vs_best";
  }
  f << "\n";
  for (const CaseResult &r : rs) {
    const double flop = case_flop(r.c);
    const OnednnResult *nchw = r.best_onednn(true), *blocked = r.best_onednn(false);
    const double t[4] = {ms_or_nan(r.ours().time), nchw ? ms_or_nan(nchw->time) : NAN,
                         blocked ? ms_or_nan(blocked->time) : NAN, ms_or_nan(r.torch)};
    const LayerShape &s = r.c.s;
    f << case_label(r.c) << "," << convpool_dtype_name(r.c.dtype) << "," << s.batch << "," << s.c_in
      << "," << s.c_out << "," << s.height << "," << s.width << "," << s.k << "," << s.pool << ","
      << csv_text(layer_options(s)) << "," << r.iters << "," << csv_num(flop * 1e-9);
    for (double x : t) f << "," << csv_num(x);
    f << "," << csv_num(min_or_nan(r.ours().time)) << "," << (nchw ? variant_key(nchw) : "") << ","
      << (blocked ? variant_key(blocked) : "");
    for (double x : t) f << "," << csv_num(flop / (x * 1e6));
    f << "," << csv_num(peak_for(m, r.c.dtype)) << "," << csv_num(case_bytes(r.c) / (t[0] * 1e6))
      << "," << csv_mb(r.rss_ours_kb) << "," << csv_mb(nchw ? nchw->rss_kb : -1) << ","
      << csv_num(worst_rel_diff(r)) << "," << csv_num(r.other_load);
    for (const OnednnResult &v : r.onednn)
      f << "," << csv_num(ms_or_nan(v.time)) << "," << csv_num(min_or_nan(v.time)) << ","
        << csv_mb(v.rss_kb) << "," << csv_num(v.checked ? v.diff.rel : NAN) << ","
        << csv_text(v.time.ok ? v.impl : "");
    if (algo_columns(o)) {
      for (const AlgoResult &a : r.algos)
        f << "," << csv_num(ms_or_nan(a.time)) << "," << csv_num(min_or_nan(a.time)) << ","
          << csv_num(a.checked ? a.diff.rel : NAN);
      if (auto_column(o)) f << "," << csv_num(auto_vs_best(r));
    }
    f << "\n";
  }
  f.flush();
  return static_cast<bool>(f);
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
  const int rc = run_capture({o.python, o.plot_script, csv, png}, &out);
  std::printf("%s%s", out.c_str(), rc == 0 ? "" : "plot script failed\n");
}

}  // namespace bench
