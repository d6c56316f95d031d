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

const OnednnResult *CaseResult::best_onednn(bool nchw_in_out) const {
  const OnednnResult *best = nullptr;
  for (const OnednnResult &v : onednn) {
    const double t = ms_or_nan(v.time);
    if (onednn_variants()[(size_t)v.index].nchw_in_out == nchw_in_out && std::isfinite(t) &&
        (!best || t < ms_or_nan(best->time)))
      best = &v;
  }
  return best;
}

namespace {

// One system of the timing loop: a call that times itself, the result its
// times go to, and the error that ends its timing (empty while it runs).
struct System {
  TimedResult *result;
  std::function<double()> timed_call;
  const std::string *error;
};

// Warm every system up, then time it in interleaved iterations; returns the
// number of timed iterations. At least --iters, and more (up to --max-iters)
// until every system has run --min-time seconds in total. Every iteration
// runs each system once, in an order shuffled from a fixed seed that never
// starts with the system that ended the previous iteration: a system run
// twice in a row finds its own data in the caches (worth 5-8% on the small
// cases), and under any fixed order each system would always follow the same
// neighbour. This way every system follows each other one about equally
// often, and slow drifts of the machine hit all of them alike.
int time_interleaved(const Options &o, std::vector<System> &systems) {
  for (int w = 0; w < o.warmup; ++w)
    for (System &sys : systems) sys.timed_call();
  std::mt19937 rng(20240601u);
  std::vector<size_t> order(systems.size());
  std::iota(order.begin(), order.end(), size_t{0});
  size_t last = systems.empty() ? 0 : systems.size() - 1;  // the warmup ran them in order
  std::vector<double> total_ms(systems.size(), 0.0);
  const auto need_more = [&](int done) {
    if (done < o.iters) return true;
    if (done >= o.max_iters) return false;
    for (size_t k = 0; k < systems.size(); ++k)
      if (systems[k].error->empty() && total_ms[k] < o.min_time_s * 1e3) return true;
    return false;
  };
  int it = 0;
  for (; need_more(it); ++it) {
    do {
      std::shuffle(order.begin(), order.end(), rng);
    } while (order.size() > 1 && order.front() == last);
    for (size_t k : order) {
      const double ms = systems[k].timed_call();
      systems[k].result->ms.push_back(ms);
      total_ms[k] += ms;
    }
    if (!order.empty()) last = order.back();
  }
  return it;
}

// Our algorithms against the fp32 reference, computed here by oneDNN on one
// thread: no OpenMP worker of this process ever exists to spin beside ours.
void check_ours(const Case &c, const CaseData &data, const std::vector<std::unique_ptr<Ours>> &ours,
                CaseResult *r) {
  std::vector<float> ref;
  std::string why;
  if (!onednn_reference(c, data, 1, &ref, &why)) {
    r->check_note = "no fp32 reference: " + why;
    return;
  }
  r->tolerance = tolerance_for(c.dtype);
  for (size_t i = 0; i < ours.size(); ++i) {
    AlgoResult &a = r->algos[i];
    if (!a.time.ok) continue;
    a.checked = true;
    a.diff = compare(to_f32(ours[i]->dst(), c.dtype, dst_count(c.s)), ref);
    a.passed = a.diff.nonfinite == 0 && a.diff.rel <= r->tolerance;
  }
}

// The oneDNN variants' results after the process started (or failed to).
std::vector<OnednnResult> onednn_results(const OnednnProcess &dnnl, bool started,
                                         const std::string &why) {
  std::vector<OnednnResult> out(onednn_variants().size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].index = (int)i;
    out[i].time.why = "oneDNN process failed: " + why;
  }
  for (const OnednnProcess::Variant &v :
       started ? dnnl.variants() : std::vector<OnednnProcess::Variant>{}) {
    OnednnResult &res = out[(size_t)v.index];
    res.time.ok = v.ok;
    res.time.why = v.why;
    res.impl = v.impl;
    res.reorders = v.reorders;
  }
  return out;
}

}  // namespace

CaseResult run_case(const Options &o, const Case &c, int threads, const OmpWaitSetting &omp,
                    std::string *torch_version) {
  CaseResult r;
  r.c = c;
  r.main = main_algo_index(o.algos);
  const CaseData data = make_data(c.dtype, c.s);
  {
    // Every oneDNN variant in its own process (stopped between calls), and
    // one operator per algorithm here, all created (weights packed, threads
    // started) before any timing.
    std::vector<int> all(onednn_variants().size());
    std::iota(all.begin(), all.end(), 0);
    OnednnProcess dnnl;
    std::string dnnl_why;
    const bool dnnl_started = dnnl.start(c, threads, all, omp, &dnnl_why);
    r.onednn = onednn_results(dnnl, dnnl_started, dnnl_why);

    std::vector<std::unique_ptr<Ours>> ours;
    r.algos.resize(o.algos.size());
    for (size_t i = 0; i < o.algos.size(); ++i) {
      AlgoResult &a = r.algos[i];
      a.algo = o.algos[i];
      ours.push_back(std::unique_ptr<Ours>(new Ours));
      a.time.ok = ours[i]->init(c.dtype, c.s, threads, data, &a.time.why, a.algo, !o.own_pools);
      if (a.time.ok) a.plan = ours[i]->plan_text();
    }

    // The systems: each of our algorithms, then each oneDNN variant oneDNN
    // could build; a failed call is reported after the loop.
    std::vector<std::string> run_errors(ours.size()), dnnl_errors(r.onednn.size());
    std::vector<System> systems;
    for (size_t i = 0; i < ours.size(); ++i)
      if (r.algos[i].time.ok)
        systems.push_back({&r.algos[i].time,
                           [&, i] {
                             return time_call(o.gap_ms, [&] {
                               if (run_errors[i].empty()) ours[i]->run(data, &run_errors[i]);
                             });
                           },
                           &run_errors[i]});
    for (size_t i = 0; i < r.onednn.size(); ++i)
      if (r.onednn[i].time.ok)
        systems.push_back({&r.onednn[i].time,
                           [&, i] {
                             if (!dnnl_errors[i].empty()) return 0.0;
                             const double ms = dnnl.run(i, o.gap_ms, &dnnl_errors[i]);
                             return std::isfinite(ms) ? ms : 0.0;
                           },
                           &dnnl_errors[i]});

    const std::vector<pid_t> children =
        dnnl_started ? std::vector<pid_t>{dnnl.pid()} : std::vector<pid_t>{};
    const CpuSample before = sample_cpu(children);
    r.iters = time_interleaved(o, systems);
    r.other_load = other_load(before, sample_cpu(children));
    bool any_ok = false;
    for (size_t i = 0; i < ours.size(); ++i) {
      if (!run_errors[i].empty()) {
        r.algos[i].time.ok = false;
        r.algos[i].time.why = run_errors[i];
      }
      any_ok = any_ok || r.algos[i].time.ok;
    }
    for (size_t i = 0; i < r.onednn.size(); ++i) {
      if (dnnl_errors[i].empty()) continue;
      r.onednn[i].time.ok = false;
      r.onednn[i].time.why = dnnl_errors[i];
    }

    // Correctness: oneDNN's variants against its fp32 reference (for
    // information: Winograd trades accuracy for speed), in its process; then
    // every algorithm of ours against the same reference, computed here.
    if (dnnl_started) {
      std::vector<Diff> diffs;
      std::vector<bool> checked;
      std::string why;
      if (!dnnl.check(&diffs, &checked, &why)) r.onednn_check_note = why;
      for (size_t i = 0; i < checked.size(); ++i) {
        r.onednn[i].checked = checked[i];
        r.onednn[i].diff = diffs[i];
      }
      dnnl.quit();
    }
    if (any_ok) check_ours(c, data, ours, &r);
  }  // operators and the oneDNN process released before the subprocesses run

  const CpuSample torch_before = sample_cpu();
  r.torch = run_torch(o, c, threads, r.iters, torch_version);
  if (r.torch.ok) {
    const double load = other_load(torch_before, sample_cpu());
    if (std::isfinite(load))
      r.other_load = std::isfinite(r.other_load) ? std::max(r.other_load, load) : load;
  }
  if (o.rss) {
    if (r.ours().time.ok)
      r.rss_ours_kb = child_peak_rss_kb(c, "ours", threads, &r.rss_ours_why, r.ours().algo);
    for (OnednnResult &v : r.onednn)
      if (v.time.ok) v.rss_kb = onednn_peak_rss_kb(c, v.index, threads, omp, &v.rss_why);
  }
  return r;
}

Scaling measure_scaling(const Options &o, int threads, const OmpWaitSetting &omp) {
  Scaling sc;
  sc.c = headline_case(o.quick);
  sc.threads = threads;
  if (threads < 2) {
    sc.why = "thread scaling skipped: only 1 thread";
    return sc;
  }
  const CaseData data = make_data(sc.c.dtype, sc.c.s);
  Ours ours1, oursn;
  std::string why;
  if (!ours1.init(sc.c.dtype, sc.c.s, 1, data, &why) ||
      !oursn.init(sc.c.dtype, sc.c.s, threads, data, &why)) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  // oneDNN direct on its blocked layouts, one process per thread count.
  const int blocked = onednn_variant_index("direct-blocked");
  OnednnProcess dnnl1, dnnln;
  const bool dnnl_ok = dnnl1.start(sc.c, 1, {blocked}, omp, &why) && dnnl1.variants()[0].ok &&
                       dnnln.start(sc.c, threads, {blocked}, omp, &why) && dnnln.variants()[0].ok;
  std::vector<double> o1, on, d1, dn;
  bool ok = true;
  const auto round = [&](bool record) {
    const double a = time_call(o.gap_ms, [&] { ok = ours1.run(data, &why) && ok; });
    const double b = time_call(o.gap_ms, [&] { ok = oursn.run(data, &why) && ok; });
    if (record) {
      o1.push_back(a);
      on.push_back(b);
    }
    if (dnnl_ok) {
      const double c1 = dnnl1.run(0, o.gap_ms, &why);
      const double cn = dnnln.run(0, o.gap_ms, &why);
      if (record) {
        d1.push_back(c1);
        dn.push_back(cn);
      }
    }
  };
  round(false);
  sc.iters = std::max(3, o.quick ? 20 : std::min(o.iters, 5));
  const std::vector<pid_t> children = {dnnl1.pid(), dnnln.pid()};
  const CpuSample before = sample_cpu(dnnl_ok ? children : std::vector<pid_t>{});
  for (int i = 0; i < sc.iters; ++i) round(true);
  sc.other_load = other_load(before, sample_cpu(dnnl_ok ? children : std::vector<pid_t>{}));
  if (!ok) {
    sc.why = "thread scaling: " + why;
    return sc;
  }
  sc.done = true;
  sc.ours_1 = median(o1);
  sc.ours_n = median(on);
  if (dnnl_ok) {
    sc.dnnl_1 = median(d1);
    sc.dnnl_n = median(dn);
  }
  return sc;
}

}  // namespace bench
