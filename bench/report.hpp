// The report: the Markdown table with its notes, the CSV file and the PNG
// chart (drawn by bench/plot.py), and the cell formats the progress lines share.
#ifndef CONVPOOL_BENCH_REPORT_HPP
#define CONVPOOL_BENCH_REPORT_HPP

#include <string>
#include <vector>

#include "measure.hpp"
#include "options.hpp"
#include "run_case.hpp"

namespace bench {

// Milliseconds with 4 significant digits or so ("1.642", "147.1"), "n/a".
std::string fmt_ms(double v);
// The median of a result, NaN if it has none.
double ms_or_nan(const TimedResult &t);
// The largest max rel diff, marked if any algorithm failed.
std::string check_cell(const CaseResult &r);

// The comparison columns appear when more than one algorithm is timed;
// "auto vs best" needs auto and at least one other.
bool algo_columns(const Options &o);
bool auto_column(const Options &o);
// t_auto / best explicit algorithm, marked when above the slack.
std::string auto_vs_best_cell(const CaseResult &r);

std::string make_markdown(const Machine &m, const Options &o, const std::vector<CaseResult> &rs,
                          const Scaling &sc);
void write_csv(const std::string &path, const Machine &m, const Options &o,
               const std::vector<CaseResult> &rs);
// Draw the chart of the CSV into png with bench/plot.py (skipped with a
// message if python or the script is missing).
void run_plot(const Options &o, const std::string &csv, const std::string &png);

// Replace the extension of path (or append one).
std::string with_extension(const std::string &path, const std::string &ext);

}  // namespace bench

#endif
