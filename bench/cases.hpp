// Benchmark cases: the layer shapes and dtypes to time, the built-in lists,
// the case-file reader, and the deterministic input data of a case.
#ifndef CONVPOOL_BENCH_CASES_HPP
#define CONVPOOL_BENCH_CASES_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "convpool.h"

namespace bench {

// Shapes of one layer: the conv (symmetric zero padding, stride, dilation,
// groups), a residual added before an optional ReLU, and max pooling P x P
// with stride S (0: P) and symmetric -inf padding, floor sizing; P = 1 with
// S = 1 is no pooling. The defaults are the original layer.
struct LayerShape {
  int64_t batch, c_in, c_out, height, width, k, pool;
  int64_t pad = 0, stride = 1, dilation = 1, groups = 1, pool_stride = 0, pool_pad = 0;
  bool relu = false, residual = false;
  int64_t window_stride() const { return pool_stride > 0 ? pool_stride : pool; }
  int64_t conv_h() const { return (height + 2 * pad - dilation * (k - 1) - 1) / stride + 1; }
  int64_t conv_w() const { return (width + 2 * pad - dilation * (k - 1) - 1) / stride + 1; }
  int64_t out_h() const { return (conv_h() + 2 * pool_pad - pool) / window_stride() + 1; }
  int64_t out_w() const { return (conv_w() + 2 * pool_pad - pool) / window_stride() + 1; }
  bool pooled() const { return pool > 1 || window_stride() > 1 || pool_pad > 0; }
  // Whether anything but the original layer's shape is set.
  bool has_layer_options() const {
    return pad || stride != 1 || dilation != 1 || groups != 1 || pool_stride || pool_pad || relu ||
           residual;
  }
};

struct Case {
  convpool_dtype dtype;
  LayerShape s;
};

// "fp32", "fp16", "bf16".
const char *dtype_short(convpool_dtype d);
// float32/fp32/f32, float16/fp16/f16/half, bfloat16/bf16.
bool parse_dtype(const std::string &name, convpool_dtype *out);

// "fp32 B=1 256->256 224x224 K=3 P=2", then what the layer sets beyond the
// original one: " s2 p3 relu P=3/2 pp1", " d2", " g144", " +res".
std::string case_label(const Case &c);
// The layer options as "key=value" words (pad=3 stride=2 ... relu residual),
// as case files write them; "" for the original layer.
std::string layer_options(const LayerShape &s);
// Why a shape is not a valid case, or "" if it is.
std::string case_problem(const LayerShape &s);

// Convolution flop (2 per multiply-add); pooling and bias are not counted.
double case_flop(const Case &c);
size_t src_count(const LayerShape &s);
size_t weight_count(const LayerShape &s);
size_t dst_count(const LayerShape &s);
// Compulsory traffic: input + weights + bias + output, once each.
double case_bytes(const Case &c);

Case make_case(convpool_dtype d, int64_t b, int64_t ci, int64_t co, int64_t h, int64_t w, int64_t k,
               int64_t p);
// The headline case for the thread-scaling line.
Case headline_case(bool quick);
std::vector<Case> default_cases(bool quick);
// Read "dtype batch cin cout h w k pool [options]" lines; '#' starts a
// comment. Options: pad=N stride=S dilation=D groups=G pstride=S ppad=N
// relu residual.
bool read_cases(const std::string &path, std::vector<Case> *cases);

// A case as the 9 command-line arguments of a child process (dtype batch cin
// cout h w k pool, then the options joined by commas, or "-"), and back from
// argv[0..8]; false if they do not parse.
constexpr int kCaseArgCount = 9;
std::vector<std::string> case_args(const Case &c);
bool parse_case_args(char **argv, Case *c);

// Inputs of one case in the case's dtype. Values: src in [0, 1), weights in
// [-0.5, 0.5), bias in [-1, 1), the residual (empty without one; the conv
// output's shape) in [-1, 1), from fixed seeds.
struct CaseData {
  Buffer src, weights, bias, residual;
};
size_t residual_count(const LayerShape &s);

CaseData make_data(convpool_dtype dtype, const LayerShape &s);
// The same values widened to fp32 (for the fp32 reference of fp16/bf16 cases).
CaseData widen_data(const CaseData &d, convpool_dtype dtype, const LayerShape &s);

// Largest acceptable max|ours - ref| / max|ref| against the fp32 reference.
double tolerance_for(convpool_dtype d);

}  // namespace bench

#endif
