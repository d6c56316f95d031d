// Our side of the benchmark: convpool through its public API. The names of
// our algorithms (--algos) and the operator wrapper that the timing loop, the
// thread-scaling line and the RSS children run.
#ifndef CONVPOOL_BENCH_OURS_HPP
#define CONVPOOL_BENCH_OURS_HPP

#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"
#include "convpool.h"

namespace bench {

// Our algorithms by their --algos names (the CLI's --impl names): sr, im2col,
// winograd, depthwise and auto, as the library names them
// (convpool_algo_from_name).
const char *algo_name(convpool_algo a);
// False for an unknown name or one this convpool does not have.
bool parse_algo(const std::string &name, convpool_algo *out);
// A comma list of distinct algorithm names ("sr,im2col,auto"); on failure
// *why says what is wrong.
bool parse_algo_list(const std::string &list, std::vector<convpool_algo> *out, std::string *why);

// Our operator: created once (weights packed), then run on NCHW data.
class Ours {
 public:
  Ours() = default;
  Ours(const Ours &) = delete;  // owns the operator
  Ours &operator=(const Ours &) = delete;
  ~Ours() { convpool_op_destroy(op_); }

  // shared: run on the process-wide pool (sized by the caller with
  // convpool_shared_pool_set_threads; `threads` then unused) instead of a
  // pool of the operator's own.
  bool init(convpool_dtype dtype, const LayerShape &s, int threads, const CaseData &d,
            std::string *why, convpool_algo algo = CONVPOOL_ALGO_AUTO, bool shared = false);

  // One run; false (with *why) if the library reports a failure.
  bool run(const CaseData &d, std::string *why);

  // "shift-reduce, avx512f f32-... kernel, 2 threads, 112 items": the
  // algorithm the operator runs (what auto resolved to) from the first line
  // of convpool_op_describe, the rest from convpool_op_plan.
  std::string plan_text() const;

  const void *dst() const { return dst_.data(); }

 private:
  // "shift-reduce" or "im2col + GEMM" from the description's first line
  // ("algorithm      NAME (why), kernel ..."), or "" if it cannot be read.
  std::string described_algorithm() const;

  convpool_op *op_ = nullptr;
  LayerShape s_{};
  Buffer dst_;
};

}  // namespace bench

#endif
