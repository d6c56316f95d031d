// The torch baseline, driver side; see torch_runner.hpp.
#include "torch_runner.hpp"

#include <cstdlib>
#include <vector>

#include "bench_util.hpp"

namespace bench {

TimedResult run_torch(const Options &o, const Case &c, int threads, int iters,
                      std::string *torch_version) {
  TimedResult r;
  if (!o.torch) {
    r.why = "torch skipped (--no-torch)";
    return r;
  }
  if (!is_executable(o.python)) {
    r.why = "torch n/a: no python interpreter at " + o.python;
    return r;
  }
  if (!is_file(o.torch_script)) {
    r.why = "torch n/a: helper script not found at " + o.torch_script;
    return r;
  }
  const LayerShape &s = c.s;
  const std::vector<std::string> argv = {o.python,        o.torch_script,
                                         "--dtype",       convpool_dtype_name(c.dtype),
                                         "--batch",       std::to_string(s.batch),
                                         "--cin",         std::to_string(s.c_in),
                                         "--cout",        std::to_string(s.c_out),
                                         "--height",      std::to_string(s.height),
                                         "--width",       std::to_string(s.width),
                                         "--k",           std::to_string(s.k),
                                         "--pool",        std::to_string(s.pool),
                                         "--threads",     std::to_string(threads),
                                         "--warmup",      std::to_string(o.warmup),
                                         "--iters",       std::to_string(iters),
                                         "--pad",         std::to_string(s.pad),
                                         "--stride",      std::to_string(s.stride),
                                         "--dilation",    std::to_string(s.dilation),
                                         "--groups",      std::to_string(s.groups),
                                         "--pool-stride", std::to_string(s.pool_stride),
                                         "--pool-pad",    std::to_string(s.pool_pad)};
  std::vector<std::string> args = argv;
  if (s.relu) args.push_back("--relu");
  if (s.residual) args.push_back("--residual");
  std::string out;
  const int rc = bench::run_capture(args, &out);
  const std::string version = find_value(out, "torch_version");
  if (!version.empty()) *torch_version = version;
  const std::string med = find_value(out, "median_ms");
  if (rc == 0 && !med.empty()) {
    r.ok = true;
    r.ms.push_back(std::strtod(med.c_str(), nullptr));
    return r;
  }
  const std::string na = find_value(out, "n/a");
  if (!na.empty()) {
    r.why = "torch n/a: " + na;
  } else {
    r.why = "torch n/a: helper exited with status " + std::to_string(rc) + ": " + last_line(out);
  }
  return r;
}

}  // namespace bench
