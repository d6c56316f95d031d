// Benchmark cases: shapes, labels, flop and byte counts, the built-in lists,
// the case-file reader and the input data; see cases.hpp.
#include "cases.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bench {

const char *dtype_short(convpool_dtype d) {
  switch (d) {
    case CONVPOOL_FLOAT16:
      return "fp16";
    case CONVPOOL_BFLOAT16:
      return "bf16";
    case CONVPOOL_FLOAT32:
      break;
  }
  return "fp32";
}

bool parse_dtype(const std::string &name, convpool_dtype *out) {
  if (name == "float32" || name == "fp32" || name == "f32") {
    *out = CONVPOOL_FLOAT32;
  } else if (name == "float16" || name == "fp16" || name == "f16" || name == "half") {
    *out = CONVPOOL_FLOAT16;
  } else if (name == "bfloat16" || name == "bf16") {
    *out = CONVPOOL_BFLOAT16;
  } else {
    return false;
  }
  return true;
}

std::string case_label(const Case &c) {
  char text[192];
  std::snprintf(text, sizeof text, "%s B=%lld %lld->%lld %lldx%lld K=%lld P=%lld%s%s",
                dtype_short(c.dtype), (long long)c.s.batch, (long long)c.s.c_in,
                (long long)c.s.c_out, (long long)c.s.height, (long long)c.s.width, (long long)c.s.k,
                (long long)c.s.pool, c.s.pad ? (" pad=" + std::to_string(c.s.pad)).c_str() : "",
                c.s.relu ? " relu" : "");
  return text;
}

// Why a shape is not a valid case, or "" if it is.
std::string case_problem(const LayerShape &s) {
  if (s.batch < 1 || s.c_in < 1 || s.c_out < 1 || s.height < 1 || s.width < 1 || s.k < 1 ||
      s.pool < 1)
    return "every size must be >= 1";
  if (s.pad < 0 || s.pad > 64) return "pad must be in 0..64";
  if (s.conv_h() < 1 || s.conv_w() < 1) return "the filter is larger than the image";
  if (s.out_h() < 1 || s.out_w() < 1) return "the pool window is larger than the conv output";
  return "";
}

// Convolution flop (2 per multiply-add); pooling and bias are not counted.
double case_flop(const Case &c) {
  const LayerShape &s = c.s;
  return 2.0 * (double)s.batch * (double)s.c_out * (double)s.conv_h() * (double)s.conv_w() *
         (double)s.c_in * (double)(s.k * s.k);
}

size_t src_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_in * s.height * s.width);
}
size_t weight_count(const LayerShape &s) {
  return (size_t)(s.c_out * s.c_in * s.k * s.k);
}
size_t dst_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_out * s.out_h() * s.out_w());
}

// Compulsory traffic: input + weights + bias + output, once each.
double case_bytes(const Case &c) {
  const double e = (double)convpool_dtype_size(c.dtype);
  return e * (double)(src_count(c.s) + weight_count(c.s) + (size_t)c.s.c_out + dst_count(c.s));
}

Case make_case(convpool_dtype d, int64_t b, int64_t ci, int64_t co, int64_t h, int64_t w, int64_t k,
               int64_t p) {
  return Case{d, LayerShape{b, ci, co, h, w, k, p}};
}

// The headline case for the thread-scaling line.
Case headline_case(bool quick) {
  return quick ? make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 2)
               : make_case(CONVPOOL_FLOAT32, 1, 256, 256, 224, 224, 3, 2);
}

std::vector<Case> default_cases(bool quick) {
  if (quick) {
    return {make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 1),
            make_case(CONVPOOL_FLOAT32, 1, 256, 256, 32, 16, 3, 2),
            make_case(CONVPOOL_FLOAT16, 1, 256, 256, 32, 16, 3, 1),
            make_case(CONVPOOL_FLOAT32, 4, 128, 128, 32, 16, 3, 1)};
  }
  std::vector<Case> cases;
  for (convpool_dtype d : {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16}) {
    cases.push_back(make_case(d, 1, 256, 256, 32, 16, 3, 1));
    cases.push_back(make_case(d, 1, 256, 256, 224, 224, 3, 1));
    cases.push_back(make_case(d, 1, 256, 256, 224, 224, 3, 2));
  }
  cases.push_back(make_case(CONVPOOL_FLOAT32, 4, 128, 128, 32, 16, 3, 1));
  return cases;
}

// Read "dtype batch cin cout h w k pool" lines; '#' starts a comment.
bool read_cases(const std::string &path, std::vector<Case> *cases) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "convpool-bench: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string dtype_name;
    if (!(fields >> dtype_name)) continue;  // blank or comment-only line
    Case c{};
    long long v[7];
    std::string extra;
    if (!parse_dtype(dtype_name, &c.dtype)) {
      std::fprintf(stderr, "%s:%d: unknown dtype '%s' (float32, float16, bfloat16)\n", path.c_str(),
                   number, dtype_name.c_str());
      return false;
    }
    if (!(fields >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6])) {
      std::fprintf(stderr, "%s:%d: expected 'dtype batch cin cout h w k pool [pad=N] [relu]'\n",
                   path.c_str(), number);
      return false;
    }
    c.s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    while (fields >> extra) {
      char *end = nullptr;
      if (extra == "relu") {
        c.s.relu = true;
      } else if (extra.rfind("pad=", 0) == 0 &&
                 (c.s.pad = std::strtoll(extra.c_str() + 4, &end, 10), end != extra.c_str() + 4) &&
                 *end == '\0') {
      } else {
        std::fprintf(stderr, "%s:%d: unknown option '%s' (pad=N, relu)\n", path.c_str(), number,
                     extra.c_str());
        return false;
      }
    }
    const std::string problem = case_problem(c.s);
    if (!problem.empty()) {
      std::fprintf(stderr, "%s:%d: %s\n", path.c_str(), number, problem.c_str());
      return false;
    }
    cases->push_back(c);
  }
  if (cases->empty()) {
    std::fprintf(stderr, "convpool-bench: %s holds no cases\n", path.c_str());
    return false;
  }
  return true;
}

std::vector<std::string> case_args(const Case &c) {
  const LayerShape &s = c.s;
  return {convpool_dtype_name(c.dtype), std::to_string(s.batch),  std::to_string(s.c_in),
          std::to_string(s.c_out),      std::to_string(s.height), std::to_string(s.width),
          std::to_string(s.k),          std::to_string(s.pool),   std::to_string(s.pad),
          s.relu ? "relu" : "none"};
}

bool parse_case_args(char **argv, Case *c) {
  long long v[8];
  for (int i = 0; i < 8; ++i) {
    char *end = nullptr;
    v[i] = std::strtoll(argv[1 + i], &end, 10);
    if (end == argv[1 + i] || *end) return false;
  }
  c->s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  c->s.pad = v[7];
  if (std::strcmp(argv[9], "relu") != 0 && std::strcmp(argv[9], "none") != 0) return false;
  c->s.relu = std::strcmp(argv[9], "relu") == 0;
  return parse_dtype(argv[0], &c->dtype) && case_problem(c->s).empty();
}

CaseData make_data(convpool_dtype dtype, const LayerShape &s) {
  const size_t e = convpool_dtype_size(dtype);
  CaseData d{Buffer(src_count(s) * e), Buffer(weight_count(s) * e), Buffer((size_t)s.c_out * e)};
  bench::fill_uniform(d.src.data(), dtype, src_count(s), 1, 0.0f, 1.0f);
  bench::fill_uniform(d.weights.data(), dtype, weight_count(s), 2, -0.5f, 0.5f);
  bench::fill_uniform(d.bias.data(), dtype, (size_t)s.c_out, 3, -1.0f, 1.0f);
  return d;
}

// The same values widened to fp32 (for the fp32 reference of fp16/bf16 cases).
CaseData widen_data(const CaseData &d, convpool_dtype dtype, const LayerShape &s) {
  CaseData w{Buffer(src_count(s) * 4), Buffer(weight_count(s) * 4), Buffer((size_t)s.c_out * 4)};
  const auto copy = [dtype](const Buffer &from, Buffer &to, size_t n) {
    const std::vector<float> v = bench::to_f32(from.data(), dtype, n);
    std::memcpy(to.data(), v.data(), n * sizeof(float));
  };
  copy(d.src, w.src, src_count(s));
  copy(d.weights, w.weights, weight_count(s));
  copy(d.bias, w.bias, (size_t)s.c_out);
  return w;
}

// Largest acceptable max|ours - ref| / max|ref| against the fp32 reference:
// fp32 differs only by summation order; fp16 and bf16 add one rounding of the
// output (2^-11 and 2^-8 relative) on top.
double tolerance_for(convpool_dtype d) {
  switch (d) {
    case CONVPOOL_FLOAT16:
      return 2e-3;
    case CONVPOOL_BFLOAT16:
      return 1.6e-2;
    case CONVPOOL_FLOAT32:
      break;
  }
  return 1e-4;
}

}  // namespace bench
