// The oneDNN baseline: convolution (with bias) followed by max pooling, with
// layouts chosen by oneDNN (format_tag::any, i.e. blocked layouts for brgconv)
// and explicit reorders to and from NCHW.
#ifndef CONVPOOL_BENCH_ONEDNN_LAYER_HPP
#define CONVPOOL_BENCH_ONEDNN_LAYER_HPP

#include <cstdint>
#include <memory>
#include <string>

#include "convpool.h"

namespace bench {

// Shapes of one layer (same contract as convpool: stride 1, no padding,
// pool P x P stride P floor sizing, P = 1 means no pooling).
struct LayerShape {
  int64_t batch, c_in, c_out, height, width, k, pool;
  int64_t conv_h() const { return height - k + 1; }
  int64_t conv_w() const { return width - k + 1; }
  int64_t out_h() const { return conv_h() / pool; }
  int64_t out_w() const { return conv_w() / pool; }
};

class OnednnLayer {
 public:
  OnednnLayer();
  ~OnednnLayer();
  OnednnLayer(const OnednnLayer &) = delete;
  OnednnLayer &operator=(const OnednnLayer &) = delete;

  // Build the primitives for `dtype` on `threads` OpenMP threads and reorder
  // the OIHW weights once. `src` is the NCHW input (kept by pointer, not
  // copied; it must outlive the layer); it is also reordered once into the
  // blocked source so run_blocked() has valid data. The bias is fp32 for
  // float32 and the layer's dtype otherwise. Returns false and sets *why if
  // oneDNN cannot build the layer (e.g. no f16 convolution on this CPU).
  bool init(convpool_dtype dtype, const LayerShape &shape, int threads, const void *src,
            const void *weights, const void *bias, std::string *why);

  // Convolution + pooling on blocked memory only (src already reordered).
  void run_blocked();
  // Reorder src NCHW -> blocked, convolution, pooling, reorder dst -> NCHW.
  void run_nchw();

  // The NCHW output written by the last run_nchw().
  const void *nchw_dst() const;
  // Implementation names chosen by oneDNN ("brg:avx512_core", ...).
  std::string impl_info() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  int threads_ = 1;
};

// Set the number of OpenMP threads oneDNN uses (no-op without OpenMP).
void onednn_set_threads(int threads);

// "major.minor.patch" of the oneDNN library at run time.
std::string onednn_version();

}  // namespace bench

#endif
