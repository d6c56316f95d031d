// The oneDNN baseline layer, its variants and the fp32 reference; see
// onednn_layer.hpp.
#include "onednn_layer.hpp"

#include <cstring>
#include <string>

#include "dnnl.hpp"

#ifdef BENCH_HAVE_OPENMP
#include <omp.h>
#endif

namespace bench {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

void onednn_set_threads(int threads) {
#ifdef BENCH_HAVE_OPENMP
  // oneDNN (built with the OpenMP runtime) takes its thread count from the
  // OpenMP ICV of the calling thread, both when a primitive is created and
  // when it runs.
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

std::string onednn_version() {
  const dnnl_version_t *v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

struct OnednnLayer::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward conv;
  dnnl::pooling_forward pool;
  bool has_pool = false;
  bool reorders = false;  // the chosen layout: NCHW <-> blocked around the primitives
  dnnl::reorder src_reorder, dst_reorder;
  memory user_src, conv_src, conv_weights, conv_bias, conv_dst, pool_dst, user_dst;
  memory residual;  // in the conv's dst layout; empty without one
  std::string conv_impl, pool_impl, src_reorder_impl, dst_reorder_impl;
};

OnednnLayer::OnednnLayer() = default;
OnednnLayer::~OnednnLayer() = default;

static memory::data_type dnnl_type(convpool_dtype dtype) {
  switch (dtype) {
    case CONVPOOL_FLOAT16:
      return memory::data_type::f16;
    case CONVPOOL_BFLOAT16:
      return memory::data_type::bf16;
    case CONVPOOL_FLOAT32:
      break;
  }
  return memory::data_type::f32;
}

static const char *algorithm_name(OnednnAlgorithm a) {
  return a == OnednnAlgorithm::winograd ? "winograd" : "direct";
}

bool OnednnLayer::init(convpool_dtype dtype, const LayerShape &s, OnednnAlgorithm algorithm,
                       OnednnLayout layout, int threads, const void *src, const void *weights,
                       const void *bias, const void *residual, std::string *why) {
  threads_ = threads;
  onednn_set_threads(threads);
  try {
    auto st = std::make_unique<State>();
    const memory::data_type dt = dnnl_type(dtype);
    const memory::dims src_dims{s.batch, s.c_in, s.height, s.width};
    // grouped weights: [groups, c_out / groups, c_in / groups, k, k] (goihw)
    const memory::dims w_dims =
        s.groups == 1 ? memory::dims{s.c_out, s.c_in, s.k, s.k}
                      : memory::dims{s.groups, s.c_out / s.groups, s.c_in / s.groups, s.k, s.k};
    const memory::dims b_dims{s.c_out};
    const memory::dims conv_dims{s.batch, s.c_out, s.conv_h(), s.conv_w()};
    const memory::dims out_dims{s.batch, s.c_out, s.out_h(), s.out_w()};
    // src and dst: oneDNN's choice, or NCHW; weights always oneDNN's choice
    // (reordered once, outside the timing), the bias a plain vector.
    const tag act = layout == OnednnLayout::nchw ? tag::nchw : tag::any;
    st->reorders = layout == OnednnLayout::chosen;

    const memory::desc src_md(src_dims, dt, act), w_any(w_dims, dt, tag::any),
        dst_md(conv_dims, dt, act), bias_md(b_dims, dt, tag::x);
    // oneDNN counts dilation from 0 (no dilation), convpool from 1.
    const dnnl::convolution_forward::desc conv_desc(
        dnnl::prop_kind::forward_inference,
        algorithm == OnednnAlgorithm::winograd ? dnnl::algorithm::convolution_winograd
                                               : dnnl::algorithm::convolution_direct,
        src_md, w_any, bias_md, dst_md, {s.stride, s.stride}, {s.dilation - 1, s.dilation - 1},
        {s.pad, s.pad}, {s.pad, s.pad});
    // The residual is a sum post-op (dst = conv + bias + dst), then the ReLU.
    dnnl::post_ops ops;
    if (s.residual) ops.append_sum(1.0f);
    if (s.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const dnnl::convolution_forward::primitive_desc conv_pd(conv_desc, attr, st->engine);
    st->conv = dnnl::convolution_forward(conv_pd);
    st->conv_impl = conv_pd.impl_info_str();

    // Max pooling P x P, stride S, padding (not part of any window's max),
    // on the conv's own dst layout.
    st->has_pool = s.pooled();
    memory::desc out_md = conv_pd.dst_desc();
    if (st->has_pool) {
      const int64_t ps = s.window_stride();
      const dnnl::pooling_forward::desc pool_desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, conv_pd.dst_desc(),
          memory::desc(out_dims, dt, act), {ps, ps}, {s.pool, s.pool}, {s.pool_pad, s.pool_pad},
          {s.pool_pad, s.pool_pad});
      const dnnl::pooling_forward::primitive_desc pool_pd(pool_desc, st->engine);
      st->pool = dnnl::pooling_forward(pool_pd);
      st->pool_impl = pool_pd.impl_info_str();
      out_md = pool_pd.dst_desc();
    }

    // Memories. The user NCHW source wraps the caller's buffer; with the
    // NCHW layout the primitives read it and write the user dst directly.
    st->user_src = memory({src_dims, dt, tag::nchw}, st->engine, const_cast<void *>(src));
    st->user_dst = memory({out_dims, dt, tag::nchw}, st->engine);
    st->conv_src = st->reorders ? memory(conv_pd.src_desc(), st->engine) : st->user_src;
    st->conv_weights = memory(conv_pd.weights_desc(), st->engine);
    st->conv_bias = memory(conv_pd.bias_desc(), st->engine);
    const bool conv_writes_user = !st->reorders && !st->has_pool;
    st->conv_dst = conv_writes_user ? st->user_dst : memory(conv_pd.dst_desc(), st->engine);
    if (st->has_pool) st->pool_dst = st->reorders ? memory(out_md, st->engine) : st->user_dst;
    if (st->reorders) {
      const memory &out = st->has_pool ? st->pool_dst : st->conv_dst;
      const dnnl::reorder::primitive_desc src_pd(st->engine, st->user_src.get_desc(), st->engine,
                                                 st->conv_src.get_desc());
      const dnnl::reorder::primitive_desc dst_pd(st->engine, out.get_desc(), st->engine,
                                                 st->user_dst.get_desc());
      st->src_reorder = dnnl::reorder(src_pd);
      st->dst_reorder = dnnl::reorder(dst_pd);
      st->src_reorder_impl = src_pd.impl_info_str();
      st->dst_reorder_impl = dst_pd.impl_info_str();
    }

    // One-time work, outside any timing: weights and bias into oneDNN's
    // layouts, and the source into the blocked layout for run_primitives().
    memory user_w({w_dims, dt, s.groups == 1 ? tag::oihw : tag::goihw}, st->engine,
                  const_cast<void *>(weights));
    memory user_b(bias_md, st->engine, const_cast<void *>(bias));
    dnnl::reorder(user_w, st->conv_weights).execute(st->stream, user_w, st->conv_weights);
    dnnl::reorder(user_b, st->conv_bias).execute(st->stream, user_b, st->conv_bias);
    if (s.residual) {
      memory user_r({conv_dims, dt, tag::nchw}, st->engine, const_cast<void *>(residual));
      st->residual = memory(conv_pd.dst_desc(), st->engine);
      dnnl::reorder(user_r, st->residual).execute(st->stream, user_r, st->residual);
    }
    if (st->reorders) st->src_reorder.execute(st->stream, st->user_src, st->conv_src);
    st->stream.wait();
    state_ = std::move(st);
    return true;
  } catch (const dnnl::error &e) {
    if (e.status == dnnl_unimplemented) {
      *why = "oneDNN " + onednn_version() + " has no " + convpool_dtype_name(dtype) + " " +
             algorithm_name(algorithm) + " implementation of this layer " +
             (layout == OnednnLayout::nchw ? "on NCHW memory " : "") + "for this CPU (" + e.what() +
             ")";
    } else {
      *why = std::string("oneDNN failed: ") + e.what();
    }
    return false;
  }
}

void OnednnLayer::prepare() {
  State &st = *state_;
  if (!st.residual) return;
  std::memcpy(st.conv_dst.get_data_handle(), st.residual.get_data_handle(),
              st.residual.get_desc().get_size());
}

void OnednnLayer::run_primitives() {
  State &st = *state_;
  onednn_set_threads(threads_);
  st.conv.execute(st.stream, {{DNNL_ARG_SRC, st.conv_src},
                              {DNNL_ARG_WEIGHTS, st.conv_weights},
                              {DNNL_ARG_BIAS, st.conv_bias},
                              {DNNL_ARG_DST, st.conv_dst}});
  if (st.has_pool)
    st.pool.execute(st.stream, {{DNNL_ARG_SRC, st.conv_dst}, {DNNL_ARG_DST, st.pool_dst}});
  st.stream.wait();
}

void OnednnLayer::run_nchw() {
  State &st = *state_;
  if (!st.reorders) {
    run_primitives();
    return;
  }
  onednn_set_threads(threads_);
  st.src_reorder.execute(st.stream, st.user_src, st.conv_src);
  st.conv.execute(st.stream, {{DNNL_ARG_SRC, st.conv_src},
                              {DNNL_ARG_WEIGHTS, st.conv_weights},
                              {DNNL_ARG_BIAS, st.conv_bias},
                              {DNNL_ARG_DST, st.conv_dst}});
  if (st.has_pool)
    st.pool.execute(st.stream, {{DNNL_ARG_SRC, st.conv_dst}, {DNNL_ARG_DST, st.pool_dst}});
  st.dst_reorder.execute(st.stream, st.has_pool ? st.pool_dst : st.conv_dst, st.user_dst);
  st.stream.wait();
}

const void *OnednnLayer::nchw_dst() const {
  return state_->user_dst.get_data_handle();
}

std::string OnednnLayer::impl_info() const {
  if (!state_) return "";
  return state_->has_pool ? state_->conv_impl + " + " + state_->pool_impl : state_->conv_impl;
}

std::string OnednnLayer::reorder_info() const {
  if (!state_ || !state_->reorders) return "";
  return state_->src_reorder_impl + " / " + state_->dst_reorder_impl;
}

const std::vector<OnednnVariant> &onednn_variants() {
  using A = OnednnAlgorithm;
  using L = OnednnLayout;
  static const std::vector<OnednnVariant> variants = {
      {"direct-blocked", "direct, blocked", A::direct, L::chosen, false},
      {"direct-reorder", "direct, NCHW via reorders", A::direct, L::chosen, true},
      {"direct-nchw", "direct, NCHW tags", A::direct, L::nchw, true},
      {"winograd-blocked", "Winograd, blocked", A::winograd, L::chosen, false},
      {"winograd-reorder", "Winograd, NCHW via reorders", A::winograd, L::chosen, true},
      {"winograd-nchw", "Winograd, NCHW tags", A::winograd, L::nchw, true},
  };
  return variants;
}

int onednn_variant_index(const std::string &key) {
  const std::vector<OnednnVariant> &all = onednn_variants();
  for (size_t i = 0; i < all.size(); ++i)
    if (key == all[i].key) return (int)i;
  return -1;
}

void run_onednn_variant(const OnednnVariant &v, OnednnLayer *layer) {
  // With the NCHW layout both calls are the same; with the chosen layout
  // the blocked variant leaves the reorders out.
  if (v.nchw_in_out) {
    layer->run_nchw();
  } else {
    layer->run_primitives();
  }
}

bool onednn_reference(const Case &c, const CaseData &data, int threads, std::vector<float> *ref,
                      std::string *why) {
  const CaseData wide = widen_data(data, c.dtype, c.s);
  OnednnLayer layer;
  if (!layer.init(CONVPOOL_FLOAT32, c.s, OnednnAlgorithm::direct, OnednnLayout::chosen, threads,
                  wide.src.data(), wide.weights.data(), wide.bias.data(), wide.residual.data(),
                  why))
    return false;
  layer.prepare();
  layer.run_nchw();
  *ref = to_f32(layer.nchw_dst(), CONVPOOL_FLOAT32, dst_count(c.s));
  return true;
}

}  // namespace bench
