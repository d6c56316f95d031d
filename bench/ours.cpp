// Our side of the benchmark: algorithm names and the convpool operator
// wrapper; see ours.hpp.
#include "ours.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace bench {

// Algorithm names are the library's (convpool_algo_name / convpool_algo_from_name,
// the CLI's --impl names), so a new algorithm needs nothing here.
const char *algo_name(convpool_algo a) {
  const char *name = convpool_algo_name(a);
  return name != nullptr ? name : "unknown";
}

bool parse_algo(const std::string &name, convpool_algo *out) {
  return convpool_algo_from_name(name.c_str(), out) == CONVPOOL_SUCCESS;
}

bool parse_algo_list(const std::string &list, std::vector<convpool_algo> *out, std::string *why) {
  std::vector<convpool_algo> algos;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    convpool_algo a;
    if (!parse_algo(name, &a)) {
      *why = std::string("unknown algorithm: ") + convpool_last_error();
      return false;
    }
    if (std::find(algos.begin(), algos.end(), a) != algos.end()) {
      *why = "algorithm '" + name + "' is listed twice";
      return false;
    }
    algos.push_back(a);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *out = algos;
  return true;
}

static std::string convpool_failure(const char *call, convpool_status st) {
  return std::string(call) + ": " + convpool_status_string(st) + ": " + convpool_last_error();
}

bool Ours::init(convpool_dtype dtype, const LayerShape &s, int threads, const CaseData &d,
                std::string *why, convpool_algo algo, bool shared) {
  s_ = s;
  convpool_options opt;
  convpool_options_init(&opt);
  opt.threads = shared ? 0 : threads;
  opt.shared_pool = shared ? 1 : 0;
  opt.algo = algo;
  // the case's shape: auto packs the weights of its algorithm alone
  opt.expected_batch = s.batch, opt.expected_height = s.height, opt.expected_width = s.width;
  convpool_layer layer;
  convpool_layer_init(&layer, dtype, s.c_out, s.c_in, s.k, s.pool);
  for (int side = 0; side < 4; ++side)
    layer.padding[side] = s.pad, layer.pool_padding[side] = s.pool_pad;
  layer.stride = s.stride, layer.dilation = s.dilation, layer.groups = s.groups;
  layer.pool_stride = s.pool_stride;
  layer.has_residual = s.residual ? 1 : 0;
  if (s.relu) layer.activation = CONVPOOL_ACTIVATION_RELU;
  convpool_status st =
      convpool_op_create_layer(&layer, d.weights.data(), d.bias.data(), &opt, &op_);
  if (st != CONVPOOL_SUCCESS) {
    *why = convpool_failure("convpool_op_create_layer", st);
    return false;
  }
  int64_t shape[4];
  size_t bytes = 0;
  st = convpool_op_output_shape(op_, s.batch, s.height, s.width, shape, &bytes);
  if (st != CONVPOOL_SUCCESS) {
    *why = convpool_failure("convpool_op_output_shape", st);
    return false;
  }
  if (shape[0] != s.batch || shape[1] != s.c_out || shape[2] != s.out_h() ||
      shape[3] != s.out_w() || bytes != dst_count(s) * convpool_dtype_size(dtype)) {
    *why = "convpool_op_output_shape returned an unexpected shape";
    return false;
  }
  dst_ = Buffer(bytes);
  return true;
}

bool Ours::run(const CaseData &d, std::string *why) {
  const convpool_status st = convpool_op_run_residual(
      op_, d.src.data(), s_.batch, s_.height, s_.width, s_.residual ? d.residual.data() : nullptr,
      dst_.data(), dst_.bytes());
  if (st != CONVPOOL_SUCCESS) {
    *why = convpool_failure("convpool_op_run_residual", st);
    return false;
  }
  return true;
}

std::string Ours::plan_text() const {
  convpool_plan_info p;
  std::memset(&p, 0, sizeof p);
  if (convpool_op_plan(op_, s_.batch, s_.height, s_.width, &p) != CONVPOOL_SUCCESS)
    return std::string("plan unavailable (") + convpool_last_error() + ")";
  char text[256];
  std::snprintf(text, sizeof text, "%s %s, MR=%d NR=%d, %d threads, %lld items",
                p.isa ? p.isa : "?", p.kernel ? p.kernel : "?", p.mr, p.nr, p.threads,
                (long long)p.items);
  const std::string algorithm = described_algorithm();
  return algorithm.empty() ? std::string(text) : algorithm + ", " + text;
}

std::string Ours::described_algorithm() const {
  char text[4096];
  if (convpool_op_describe(op_, s_.batch, s_.height, s_.width, text, sizeof text) !=
      CONVPOOL_SUCCESS)
    return "";
  std::string line(text, std::strcspn(text, "\n"));
  const std::string key = "algorithm";
  if (line.rfind(key, 0) != 0) return "";
  line.erase(0, line.find_first_not_of(' ', key.size()));
  return line.substr(0, std::min(line.find(", kernel"), line.find(" (")));
}

}  // namespace bench
