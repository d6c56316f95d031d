// One case and the thread-scaling line; see run_case.hpp.
#include "run_case.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <random>

#include "onednn_layer.hpp"
#include "ours.hpp"
#include "torch_runner.hpp"

namespace bench {

size_t main_algo_index(const std::vector<convpool_algo> &algos) {
  const auto it = std::find(algos.begin(), algos.end(), CONVPOOL_ALGO_AUTO);
  return it == algos.end() ? 0 : (size_t)(it - algos.begin());
}

CaseResult run_case(const Options &o, const Case &c, int threads, std::string *torch_version) {
  CaseResult r;
  r.c = c;
  r.main = main_algo_index(o.algos);
  const CaseData data = make_data(c.dtype, c.s);
  {
    // One operator per algorithm, all created (weights packed, threads
    // started) before any timing.
    std::vector<std::unique_ptr<Ours>> ours;
    r.algos.resize(o.algos.size());
    for (size_t i = 0; i < o.algos.size(); ++i) {
      AlgoResult &a = r.algos[i];
      a.algo = o.algos[i];
      ours.push_back(std::unique_ptr<Ours>(new Ours));
      a.time.ok = ours[i]->init(c.dtype, c.s, threads, data, &a.time.why, a.algo);
      if (a.time.ok) a.plan = ours[i]->plan_text();
    }
    bench::OnednnLayer layer;
    const bool dnnl_ok = layer.init(c.dtype, c.s, threads, data.src.data(), data.weights.data(),
                                    data.bias.data(), &r.dnnl_nchw.why);
    r.dnnl_nchw.ok = r.dnnl_blocked.ok = dnnl_ok;
    r.dnnl_blocked.why = r.dnnl_nchw.why;
    if (dnnl_ok) r.dnnl_impl = layer.impl_info();

    // The in-process systems (each of our algorithms, then the two oneDNN
    // variants), each timed by one call.
    struct Sys {
      TimedResult *result;
      std::function<void()> call;
    };
    std::vector<std::string> run_errors(ours.size());
    std::vector<Sys> systems;
    for (size_t i = 0; i < ours.size(); ++i)
      if (r.algos[i].time.ok)
        systems.push_back({&r.algos[i].time, [&, i] {
                             if (run_errors[i].empty()) ours[i]->run(data, &run_errors[i]);
                           }});
    if (dnnl_ok) {
      systems.push_back({&r.dnnl_blocked, [&] { layer.run_blocked(); }});
      systems.push_back({&r.dnnl_nchw, [&] { layer.run_nchw(); }});
    }

    for (int w = 0; w < o.warmup; ++w)
      for (Sys &sys : systems) time_call(o, sys.call);

    // Timed iterations: at least --iters, and more (up to --max-iters) until
    // every system has run --min-time seconds in total. Every iteration runs
    // each system once, in an order shuffled from a fixed seed that never
    // starts with the system that ended the previous iteration: a system run
    // twice in a row finds its own data in the caches (worth 5-8% on the
    // small cases), and under any fixed order each system would always follow
    // the same neighbour. This way every system follows each other one about
    // equally often, and slow drifts of the machine hit all of them alike.
    std::mt19937 rng(20240601u);
    std::vector<size_t> order(systems.size());
    std::iota(order.begin(), order.end(), size_t{0});
    size_t last = systems.empty() ? 0 : systems.size() - 1;  // the warmup ran them in order
    const bench::CpuSample before = bench::sample_cpu();
    std::vector<double> total_ms(systems.size(), 0.0);
    const auto need_more = [&](int done) {
      if (done < o.iters) return true;
      if (done >= o.max_iters || systems.empty()) return false;
      return *std::min_element(total_ms.begin(), total_ms.end()) < o.min_time_s * 1e3;
    };
    int it = 0;
    for (; need_more(it); ++it) {
      do {
        std::shuffle(order.begin(), order.end(), rng);
      } while (order.size() > 1 && order.front() == last);
      for (size_t k : order) {
        const double ms = time_call(o, systems[k].call);
        systems[k].result->ms.push_back(ms);
        total_ms[k] += ms;
      }
      if (!order.empty()) last = order.back();
    }
    r.iters = it;
    r.other_load = bench::other_load(before, bench::sample_cpu());
    bool any_ok = false;
    for (size_t i = 0; i < ours.size(); ++i) {
      if (!run_errors[i].empty()) {
        r.algos[i].time.ok = false;
        r.algos[i].time.why = run_errors[i];
      }
      any_ok = any_ok || r.algos[i].time.ok;
    }

    // Correctness: every algorithm against the oneDNN fp32 output on the same
    // values.
    if (any_ok) {
      std::vector<float> ref;
      if (c.dtype == CONVPOOL_FLOAT32 && dnnl_ok) {
        ref = bench::to_f32(layer.nchw_dst(), CONVPOOL_FLOAT32, dst_count(c.s));
      } else {
        const CaseData wide = widen_data(data, c.dtype, c.s);
        bench::OnednnLayer ref_layer;
        std::string why;
        if (ref_layer.init(CONVPOOL_FLOAT32, c.s, threads, wide.src.data(), wide.weights.data(),
                           wide.bias.data(), &why)) {
          ref_layer.run_nchw();
          ref = bench::to_f32(ref_layer.nchw_dst(), CONVPOOL_FLOAT32, dst_count(c.s));
        } else {
          r.check_note = "no fp32 reference: " + why;
        }
      }
      r.tolerance = tolerance_for(c.dtype);
      for (size_t i = 0; i < ours.size() && !ref.empty(); ++i) {
        AlgoResult &a = r.algos[i];
        if (!a.time.ok) continue;
        a.checked = true;
        a.diff = bench::compare(bench::to_f32(ours[i]->dst(), c.dtype, dst_count(c.s)), ref);
        a.passed = a.diff.nonfinite == 0 && a.diff.rel <= r.tolerance;
      }
    }
  }  // operators and oneDNN layer released before the subprocesses run

  const bench::CpuSample torch_before = bench::sample_cpu();
  r.torch = run_torch(o, c, threads, r.iters, torch_version);
  if (r.torch.ok) {
    const double load = bench::other_load(torch_before, bench::sample_cpu());
    if (std::isfinite(load)) r.other_load = std::isfinite(r.other_load) ? std::max(r.other_load, load) : load;
  }
  if (o.rss) {
    if (r.ours().time.ok)
      r.rss_ours_kb = child_peak_rss_kb(c, "ours", threads, &r.rss_ours_why, r.ours().algo);
    if (r.dnnl_nchw.ok) r.rss_dnnl_kb = child_peak_rss_kb(c, "onednn", threads, &r.rss_dnnl_why);
  }
  return r;
}

Scaling measure_scaling(const Options &o, int threads) {
  Scaling sc;
  sc.c = headline_case(o.quick);
  sc.threads = threads;
  if (threads < 2) {
    sc.why = "thread scaling skipped: only 1 thread";
    return sc;
  }
  const CaseData data = make_data(sc.c.dtype, sc.c.s);
  Ours ours1, oursn;
  bench::OnednnLayer dnnl1, dnnln;
  std::string why;
  if (!ours1.init(sc.c.dtype, sc.c.s, 1, data, &why) ||
      !oursn.init(sc.c.dtype, sc.c.s, threads, data, &why)) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  const bool dnnl_ok = dnnl1.init(sc.c.dtype, sc.c.s, 1, data.src.data(), data.weights.data(),
                                  data.bias.data(), &why) &&
                       dnnln.init(sc.c.dtype, sc.c.s, threads, data.src.data(),
                                  data.weights.data(), data.bias.data(), &why);
  std::vector<double> o1, on, d1, dn;
  bool ok = true;
  const auto round = [&](bool record) {
    const double a = time_call(o, [&] { ok = ours1.run(data, &why) && ok; });
    const double b = time_call(o, [&] { ok = oursn.run(data, &why) && ok; });
    if (record) {
      o1.push_back(a);
      on.push_back(b);
    }
    if (dnnl_ok) {
      const double c1 = time_call(o, [&] { dnnl1.run_blocked(); });
      const double cn = time_call(o, [&] { dnnln.run_blocked(); });
      if (record) {
        d1.push_back(c1);
        dn.push_back(cn);
      }
    }
  };
  round(false);
  sc.iters = std::max(3, o.quick ? 20 : std::min(o.iters, 5));
  const bench::CpuSample before = bench::sample_cpu();
  for (int i = 0; i < sc.iters; ++i) round(true);
  sc.other_load = bench::other_load(before, bench::sample_cpu());
  if (!ok) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  sc.done = true;
  sc.ours_1 = bench::median(o1);
  sc.ours_n = bench::median(on);
  if (dnnl_ok) {
    sc.dnnl_1 = bench::median(d1);
    sc.dnnl_n = bench::median(dn);
  }
  return sc;
}

}  // namespace bench
