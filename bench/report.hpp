// The report: the Markdown tables with their notes (report.cpp), the CSV file
// and the PNG chart drawn by bench/plot.py (report_csv.cpp), the progress
// line of a case, and the cell formats they share.
#ifndef CONVPOOL_BENCH_REPORT_HPP
#define CONVPOOL_BENCH_REPORT_HPP

#include <string>
#include <vector>

#include "measure.hpp"
#include "options.hpp"
#include "run_case.hpp"

namespace bench {

// ---- cells ----

// Milliseconds with 4 significant digits or so ("1.642", "147.1"), "n/a".
std::string fmt_ms(double v);
// Rates and ratios with about three significant digits, never "0" or "1e+03".
std::string fmt_num(double v);
// The largest max rel diff over our checked algorithms (NaN if none).
double worst_rel_diff(const CaseResult &r);
// The largest max rel diff, marked if any algorithm failed.
std::string check_cell(const CaseResult &r);

// The comparison columns appear when more than one algorithm is timed;
// "auto vs best" needs auto and at least one other.
bool algo_columns(const Options &o);
bool auto_column(const Options &o);
// t_auto / min(t of the explicit algorithms) in the case; NaN if auto or all
// of them are missing.
double auto_vs_best(const CaseResult &r);
// The same, marked when above the slack.
std::string auto_vs_best_cell(const CaseResult &r);

// The key of a oneDNN result's variant ("direct-reorder"), or "n/a" for none.
std::string variant_key(const OnednnResult *v);

// ---- output ----

// "ours 1.642 ms, oneDNN best NCHW ... , other load 0.01": a case's line on
// stdout (with every algorithm's time when there are several).
std::string progress_line(const Options &o, const CaseResult &r);

std::string make_markdown(const Machine &m, const Options &o, const std::vector<CaseResult> &rs,
                          const Scaling &sc);
// false if the file cannot be written.
bool write_csv(const std::string &path, const Machine &m, const Options &o,
               const std::vector<CaseResult> &rs);
// Draw the chart of the CSV into png with bench/plot.py (skipped with a
// message if python or the script is missing).
void run_plot(const Options &o, const std::string &csv, const std::string &png);

// Replace the extension of path (or append one).
std::string with_extension(const std::string &path, const std::string &ext);

}  // namespace bench

#endif
