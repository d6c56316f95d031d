// The torch baseline, driver side: runs bench/torch_baseline.py in a separate
// python process for one case and reads its median time.
#ifndef CONVPOOL_BENCH_TORCH_RUNNER_HPP
#define CONVPOOL_BENCH_TORCH_RUNNER_HPP

#include <string>

#include "cases.hpp"
#include "measure.hpp"
#include "options.hpp"

namespace bench {

// The torch time of case c on `threads` threads (one median from the helper),
// or why there is none; *torch_version receives the version it reports.
TimedResult run_torch(const Options &o, const Case &c, int threads, int iters,
                      std::string *torch_version);

}  // namespace bench

#endif
