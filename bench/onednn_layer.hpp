// The oneDNN baseline: convolution (with bias, stride, dilation, groups and
// the post-ops of the layer: a sum for the residual, then ReLU) followed by
// max pooling (stride, padding), with
// either convolution algorithm oneDNN offers (direct, Winograd), on layouts
// chosen by oneDNN (format_tag::any, i.e. blocked layouts for brgconv) with
// explicit reorders to and from NCHW, or on NCHW memory directly. Also the
// list of variants the benchmark times and the fp32 reference output.
#ifndef CONVPOOL_BENCH_ONEDNN_LAYER_HPP
#define CONVPOOL_BENCH_ONEDNN_LAYER_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "convpool.h"

namespace bench {

// The convolution algorithm asked of oneDNN.
enum class OnednnAlgorithm { direct, winograd };

// The memory the primitives work on: oneDNN's choice (format_tag::any: its
// blocked layouts, with reorders from and to NCHW around them), or NCHW
// (format_tag::nchw for src and dst: no reorders; weights still any).
enum class OnednnLayout { chosen, nchw };

class OnednnLayer {
 public:
  OnednnLayer();
  ~OnednnLayer();
  OnednnLayer(const OnednnLayer &) = delete;
  OnednnLayer &operator=(const OnednnLayer &) = delete;

  // Build the primitives for `dtype` on `threads` OpenMP threads and reorder
  // the OIHW weights once. `src` is the NCHW input (kept by pointer, not
  // copied; it must outlive the layer); with the chosen layout it is also
  // reordered once into the blocked source so run_primitives() has valid
  // data. The bias is fp32 for float32 and the layer's dtype otherwise.
  // Returns false and sets *why if oneDNN cannot build the layer (no f16
  // convolution on this CPU, no Winograd for this shape, ...).
  bool init(convpool_dtype dtype, const LayerShape &shape, OnednnAlgorithm algorithm,
            OnednnLayout layout, int threads, const void *src, const void *weights,
            const void *bias, const void *residual, std::string *why);

  // With a residual: put it (kept in the conv's dst layout since init) in
  // the conv's dst, which the sum post-op adds to and overwrites; the
  // benchmark calls it before every run, outside the timing. No-op without.
  void prepare();

  // Convolution + pooling on the layer's own memory only (with the chosen
  // layout: blocked, src already reordered).
  void run_primitives();
  // NCHW in, NCHW out: with the chosen layout the src reorder NCHW ->
  // blocked, the primitives and the dst reorder back; with the NCHW layout
  // the primitives alone.
  void run_nchw();

  // The NCHW output written by the last run_nchw().
  const void *nchw_dst() const;
  // Implementation names chosen by oneDNN ("brg:avx512_core", with the
  // pooling's after " + " when there is pooling).
  std::string impl_info() const;
  // Those of the src and dst reorders ("jit:uni / simple:any"); "" for the
  // NCHW layout.
  std::string reorder_info() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  int threads_ = 1;
};

// One oneDNN variant the benchmark times: an algorithm, a layout, and
// whether the timed call includes the reorders from and to NCHW.
struct OnednnVariant {
  const char *key;    // "direct-blocked", ...: CSV column names, child arguments
  const char *label;  // "direct, blocked", ...: the report
  OnednnAlgorithm algorithm;
  OnednnLayout layout;
  bool nchw_in_out;  // NCHW in and out (reorders timed, or NCHW layout)
};

// Every variant, in report order: for each algorithm, blocked (reorders
// excluded), NCHW through reorders, NCHW tags.
const std::vector<OnednnVariant> &onednn_variants();
// The index of the variant with this key, or -1.
int onednn_variant_index(const std::string &key);
// Run one timed call of variant v on its layer.
void run_onednn_variant(const OnednnVariant &v, OnednnLayer *layer);

// The fp32 reference output (NCHW) of the case on the given input values
// (fp16/bf16 widened to fp32): oneDNN's direct convolution on its chosen
// layout, run on `threads` OpenMP threads. False with *why if it fails.
bool onednn_reference(const Case &c, const CaseData &data, int threads, std::vector<float> *ref,
                      std::string *why);

// Set the number of OpenMP threads oneDNN uses (no-op without OpenMP).
void onednn_set_threads(int threads);

// "major.minor.patch" of the oneDNN library at run time.
std::string onednn_version();

}  // namespace bench

#endif
