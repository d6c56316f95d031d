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

// format with one integer conversion.
static std::string with(const char *format, int64_t v) {
  char text[64];
  std::snprintf(text, sizeof text, format, (long long)v);
  return text;
}

std::string case_label(const Case &c) {
  const LayerShape &s = c.s;
  char head[160];
  std::snprintf(head, sizeof head, "%s B=%lld %lld->%lld %lldx%lld K=%lld", dtype_short(c.dtype),
                (long long)s.batch, (long long)s.c_in, (long long)s.c_out, (long long)s.height,
                (long long)s.width, (long long)s.k);
  std::string text = head;
  if (s.stride != 1) text += with(" s%lld", s.stride);
  if (s.dilation != 1) text += with(" d%lld", s.dilation);
  if (s.pad) text += with(" p%lld", s.pad);
  if (s.groups != 1) text += with(" g%lld", s.groups);
  if (s.residual) text += " +res";
  if (s.relu) text += " relu";
  text += with(" P=%lld", s.pool);
  if (s.pool_stride) text += with("/%lld", s.pool_stride);
  if (s.pool_pad) text += with(" pp%lld", s.pool_pad);
  return text;
}

std::string layer_options(const LayerShape &s) {
  std::string text;
  const auto add = [&text](const std::string &word) { text += (text.empty() ? "" : " ") + word; };
  if (s.pad) add(with("pad=%lld", s.pad));
  if (s.stride != 1) add(with("stride=%lld", s.stride));
  if (s.dilation != 1) add(with("dilation=%lld", s.dilation));
  if (s.groups != 1) add(with("groups=%lld", s.groups));
  if (s.pool_stride) add(with("pstride=%lld", s.pool_stride));
  if (s.pool_pad) add(with("ppad=%lld", s.pool_pad));
  if (s.relu) add("relu");
  if (s.residual) add("residual");
  return text;
}

// Why a shape is not a valid case, or "" if it is.
std::string case_problem(const LayerShape &s) {
  if (s.batch < 1 || s.c_in < 1 || s.c_out < 1 || s.height < 1 || s.width < 1 || s.k < 1 ||
      s.pool < 1 || s.stride < 1 || s.dilation < 1 || s.groups < 1 || s.pad < 0 ||
      s.pool_stride < 0 || s.pool_pad < 0)
    return "every size must be >= 1 (pads >= 0)";
  if (s.c_in % s.groups || s.c_out % s.groups) return "groups must divide cin and cout";
  if (2 * s.pool_pad > s.pool) return "the pool padding is above half the window";
  if (s.height + 2 * s.pad < s.dilation * (s.k - 1) + 1 ||
      s.width + 2 * s.pad < s.dilation * (s.k - 1) + 1)
    return "the filter is larger than the image";
  if (s.out_h() < 1 || s.out_w() < 1) return "the pool window is larger than the conv output";
  return "";
}

// One option word of a case line or argument into s; false if unknown.
static bool parse_option(const std::string &word, LayerShape *s) {
  if (word == "relu") return s->relu = true;
  if (word == "residual") return s->residual = true;
  const size_t eq = word.find('=');
  if (eq == std::string::npos) return false;
  const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
  char *end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end) return false;
  int64_t *field = key == "pad"        ? &s->pad
                   : key == "stride"   ? &s->stride
                   : key == "dilation" ? &s->dilation
                   : key == "groups"   ? &s->groups
                   : key == "pstride"  ? &s->pool_stride
                   : key == "ppad"     ? &s->pool_pad
                                       : nullptr;
  if (field == nullptr) return false;
  *field = v;
  return true;
}

// Convolution flop (2 per multiply-add); pooling, bias and the residual are
// not counted.
double case_flop(const Case &c) {
  const LayerShape &s = c.s;
  return 2.0 * (double)s.batch * (double)s.c_out * (double)s.conv_h() * (double)s.conv_w() *
         (double)(s.c_in / s.groups) * (double)(s.k * s.k);
}

size_t src_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_in * s.height * s.width);
}
size_t weight_count(const LayerShape &s) {
  return (size_t)(s.c_out * (s.c_in / s.groups) * s.k * s.k);
}
size_t dst_count(const LayerShape &s) {
  return (size_t)(s.batch * s.c_out * s.out_h() * s.out_w());
}
size_t residual_count(const LayerShape &s) {
  return s.residual ? (size_t)(s.batch * s.c_out * s.conv_h() * s.conv_w()) : 0;
}

// Compulsory traffic: input + weights + bias + residual + output, once each.
double case_bytes(const Case &c) {
  const double e = (double)convpool_dtype_size(c.dtype);
  return e * (double)(src_count(c.s) + weight_count(c.s) + (size_t)c.s.c_out + residual_count(c.s) +
                      dst_count(c.s));
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
      std::fprintf(stderr, "%s:%d: expected 'dtype batch cin cout h w k pool [options]'\n",
                   path.c_str(), number);
      return false;
    }
    c.s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    while (fields >> extra)
      if (!parse_option(extra, &c.s)) {
        std::fprintf(stderr,
                     "%s:%d: unknown option '%s' (pad=N stride=S dilation=D groups=G pstride=S "
                     "ppad=N relu residual)\n",
                     path.c_str(), number, extra.c_str());
        return false;
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
  std::string options = layer_options(s);
  for (char &ch : options)
    if (ch == ' ') ch = ',';
  return {convpool_dtype_name(c.dtype), std::to_string(s.batch),  std::to_string(s.c_in),
          std::to_string(s.c_out),      std::to_string(s.height), std::to_string(s.width),
          std::to_string(s.k),          std::to_string(s.pool),   options.empty() ? "-" : options};
}

bool parse_case_args(char **argv, Case *c) {
  long long v[7];
  for (int i = 0; i < 7; ++i) {
    char *end = nullptr;
    v[i] = std::strtoll(argv[1 + i], &end, 10);
    if (end == argv[1 + i] || *end) return false;
  }
  c->s = LayerShape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  if (std::strcmp(argv[8], "-") != 0) {
    std::stringstream words(argv[8]);
    for (std::string word; std::getline(words, word, ',');)
      if (!parse_option(word, &c->s)) return false;
  }
  return parse_dtype(argv[0], &c->dtype) && case_problem(c->s).empty();
}

CaseData make_data(convpool_dtype dtype, const LayerShape &s) {
  const size_t e = convpool_dtype_size(dtype);
  CaseData d{Buffer(src_count(s) * e), Buffer(weight_count(s) * e), Buffer((size_t)s.c_out * e),
             Buffer(residual_count(s) * e)};
  bench::fill_uniform(d.src.data(), dtype, src_count(s), 1, 0.0f, 1.0f);
  bench::fill_uniform(d.weights.data(), dtype, weight_count(s), 2, -0.5f, 0.5f);
  bench::fill_uniform(d.bias.data(), dtype, (size_t)s.c_out, 3, -1.0f, 1.0f);
  if (s.residual) bench::fill_uniform(d.residual.data(), dtype, residual_count(s), 4, -1.0f, 1.0f);
  return d;
}

// The same values widened to fp32 (for the fp32 reference of fp16/bf16 cases).
CaseData widen_data(const CaseData &d, convpool_dtype dtype, const LayerShape &s) {
  CaseData w{Buffer(src_count(s) * 4), Buffer(weight_count(s) * 4), Buffer((size_t)s.c_out * 4),
             Buffer(residual_count(s) * 4)};
  const auto copy = [dtype](const Buffer &from, Buffer &to, size_t n) {
    const std::vector<float> v = bench::to_f32(from.data(), dtype, n);
    std::memcpy(to.data(), v.data(), n * sizeof(float));
  };
  copy(d.src, w.src, src_count(s));
  copy(d.weights, w.weights, weight_count(s));
  copy(d.bias, w.bias, (size_t)s.c_out);
  if (s.residual) copy(d.residual, w.residual, residual_count(s));
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
