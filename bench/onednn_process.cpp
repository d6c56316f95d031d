// oneDNN in a process of its own: the driver's client and the child's
// request loop; see onednn_process.hpp.
//
// Protocol: the child writes lines starting with '@' (anything else on its
// stdout, such as DNNL_VERBOSE output, is skipped). After building the
// variants it writes "@variant I ok IMPL" or "@variant I n/a WHY" for each
// requested variant (I: its position in the request), "@reorders I TEXT"
// where the timed call includes reorders, then "@ready". Requests:
//   run I GAP_MS  -> "@ms T" or "@error WHY"
//   check         -> "@diff I REL MAX_ABS MAX_REF NONFINITE" per built
//                    variant, then "@end"; or "@error WHY"
//   rss           -> "@vmhwm_kb N"
//   quit          -> the child exits
#include "onednn_process.hpp"

#include <sys/prctl.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#include "onednn_layer.hpp"

namespace bench {

OmpWaitSetting omp_wait_setting(bool omp_default) {
  OmpWaitSetting s;
  for (const char *name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char *value = std::getenv(name)) {
      s.description = std::string(name) + "=" + value + " (from the environment)";
      return s;
    }
  }
  if (omp_default) {
    s.description = "libgomp default (--omp-default)";
  } else {
    s.env = {"OMP_WAIT_POLICY=active"};
    s.description = "OMP_WAIT_POLICY=active (set by the benchmark)";
  }
  return s;
}

// ---- the driver's side ----

bool OnednnProcess::start(const Case &c, int threads, const std::vector<int> &variants,
                          const OmpWaitSetting &omp, std::string *why) {
  const std::string self = self_exe_path();
  if (self.empty()) {
    *why = "cannot find /proc/self/exe";
    return false;
  }
  std::string keys;
  variants_.clear();
  for (int index : variants) {
    keys += std::string(keys.empty() ? "" : ",") + onednn_variants()[(size_t)index].key;
    Variant v;
    v.index = index;
    variants_.push_back(v);
  }
  std::vector<std::string> argv = {self, "--onednn-child"};
  for (const std::string &a : case_args(c)) argv.push_back(a);
  argv.push_back(std::to_string(threads));
  argv.push_back(keys);
  if (!child_.start(argv, omp.env, why)) return false;

  std::string line;
  while (request("", &line, why) && line != "ready") {
    std::istringstream fields(line);
    std::string kind, state;
    size_t i = 0;
    fields >> kind >> i;
    if (i >= variants_.size()) continue;
    Variant &v = variants_[i];
    std::string rest;
    if (kind == "variant") {
      fields >> state >> std::ws;
      std::getline(fields, rest);
      v.ok = state == "ok";
      (v.ok ? v.impl : v.why) = rest;
    } else if (kind == "reorders") {
      fields >> std::ws;
      std::getline(fields, v.reorders);
    }
  }
  if (line != "ready") return false;
  child_.stop();
  return true;
}

// Send `line` (unless empty) and read the next '@' line into *reply.
// Once the child is gone, every request fails with the reason of the first.
bool OnednnProcess::request(const std::string &line, std::string *reply, std::string *why) {
  std::string text;
  if (gone_why_.empty() && (line.empty() || child_.send(line))) {
    while (child_.receive(&text)) {
      if (!text.empty() && text[0] == '@') {
        *reply = text.substr(1);
        return true;
      }
    }
  }
  if (gone_why_.empty())
    gone_why_ = "the oneDNN process ended (status " + std::to_string(child_.finish()) + ")";
  *why = gone_why_;
  return false;
}

double OnednnProcess::run(size_t i, double gap_ms, std::string *why) {
  std::string reply;
  const bool answered =
      request("run " + std::to_string(i) + " " + fmt("%.6g", gap_ms), &reply, why);
  child_.stop();
  if (!answered) return NAN;
  if (reply.rfind("ms ", 0) == 0) return std::strtod(reply.c_str() + 3, nullptr);
  *why = reply.rfind("error ", 0) == 0 ? reply.substr(6) : "unexpected reply '" + reply + "'";
  return NAN;
}

bool OnednnProcess::check(std::vector<Diff> *diffs, std::vector<bool> *checked, std::string *why) {
  diffs->assign(variants_.size(), Diff{});
  checked->assign(variants_.size(), false);
  std::string reply;
  bool ok = request("check", &reply, why);
  for (; ok && reply.rfind("diff ", 0) == 0; ok = request("", &reply, why)) {
    std::istringstream fields(reply.substr(5));
    size_t i = 0;
    Diff d;
    if (fields >> i >> d.rel >> d.max_abs >> d.max_ref >> d.nonfinite && i < diffs->size()) {
      (*diffs)[i] = d;
      (*checked)[i] = true;
    }
  }
  child_.stop();
  if (ok && reply != "end") {
    *why = reply.rfind("error ", 0) == 0 ? reply.substr(6) : "unexpected reply '" + reply + "'";
    ok = false;
  }
  return ok;
}

long OnednnProcess::peak_rss_kb(std::string *why) {
  std::string reply;
  const bool answered = request("rss", &reply, why);
  child_.stop();
  if (!answered) return -1;
  if (reply.rfind("vmhwm_kb ", 0) == 0) return std::strtol(reply.c_str() + 9, nullptr, 10);
  *why = "unexpected reply '" + reply + "'";
  return -1;
}

void OnednnProcess::quit() {
  child_.send("quit");
  child_.finish();
}

long onednn_peak_rss_kb(const Case &c, int index, int threads, const OmpWaitSetting &omp,
                        std::string *why) {
  OnednnProcess p;
  if (!p.start(c, threads, {index}, omp, why)) return -1;
  if (!p.variants()[0].ok) {
    *why = p.variants()[0].why;
    return -1;
  }
  for (int i = 0; i < 2; ++i)
    if (!std::isfinite(p.run(0, 0.0, why))) return -1;
  const long kb = p.peak_rss_kb(why);
  p.quit();
  return kb;
}

// ---- the child's side ----

// One reply line; newlines inside the text become spaces.
static void reply(std::string text) {
  for (char &ch : text)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::printf("@%s\n", text.c_str());
  std::fflush(stdout);
}

int onednn_child_main(int argc, char **argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the driver, stopped or not
  Case c{};
  if (argc != 4 + kCaseArgCount || !parse_case_args(argv + 2, &c)) {
    reply("error bad --onednn-child arguments");
    return 2;
  }
  const int threads = std::atoi(argv[2 + kCaseArgCount]);
  std::vector<const OnednnVariant *> variants;
  std::stringstream keys(argv[3 + kCaseArgCount]);
  for (std::string key; std::getline(keys, key, ',');) {
    const int index = onednn_variant_index(key);
    if (index < 0) {
      reply("error unknown oneDNN variant " + key);
      return 2;
    }
    variants.push_back(&onednn_variants()[(size_t)index]);
  }

  // One layer per algorithm and layout: the blocked variant and the one
  // through reorders share theirs.
  const CaseData data = make_data(c.dtype, c.s);
  std::vector<std::unique_ptr<OnednnLayer>> owned;
  std::vector<OnednnLayer *> layers(variants.size(), nullptr);
  std::vector<std::string> whys(variants.size());
  for (size_t i = 0; i < variants.size(); ++i) {
    const OnednnVariant &v = *variants[i];
    size_t same = 0;
    while (same < i &&
           (variants[same]->algorithm != v.algorithm || variants[same]->layout != v.layout))
      ++same;
    if (same < i) {
      layers[i] = layers[same];
      whys[i] = whys[same];
    } else {
      owned.push_back(std::make_unique<OnednnLayer>());
      if (owned.back()->init(c.dtype, c.s, v.algorithm, v.layout, threads, data.src.data(),
                             data.weights.data(), data.bias.data(), data.residual.data(), &whys[i]))
        layers[i] = owned.back().get();
    }
    const std::string n = std::to_string(i);
    if (!layers[i]) {
      reply("variant " + n + " n/a " + whys[i]);
      continue;
    }
    reply("variant " + n + " ok " + layers[i]->impl_info());
    if (v.nchw_in_out && !layers[i]->reorder_info().empty())
      reply("reorders " + n + " " + layers[i]->reorder_info());
  }
  reply("ready");

  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream fields(line);
    std::string command;
    fields >> command;
    if (command == "run") {
      size_t i = variants.size();
      double gap_ms = 0.0;
      fields >> i >> gap_ms;
      if (i >= variants.size() || !layers[i]) {
        reply("error no such variant");
        continue;
      }
      layers[i]->prepare();  // the residual into the sum post-op's dst, outside the timing
      const double ms = time_call(gap_ms, [&] { run_onednn_variant(*variants[i], layers[i]); });
      reply("ms " + fmt("%.9g", ms));
    } else if (command == "check") {
      std::vector<float> ref;
      std::string why;
      if (!onednn_reference(c, data, threads, &ref, &why)) {
        reply("error no fp32 reference: " + why);
        continue;
      }
      for (size_t i = 0; i < variants.size(); ++i) {
        if (!layers[i]) continue;
        layers[i]->prepare();
        layers[i]->run_nchw();
        const Diff d = compare(to_f32(layers[i]->nchw_dst(), c.dtype, dst_count(c.s)), ref);
        reply("diff " + std::to_string(i) + " " + fmt("%.9g", d.rel) + " " +
              fmt("%.9g", d.max_abs) + " " + fmt("%.9g", d.max_ref) + " " +
              std::to_string(d.nonfinite));
      }
      reply("end");
    } else if (command == "rss") {
      reply("vmhwm_kb " + std::to_string(self_peak_rss_kb()));
    } else if (command == "quit") {
      break;
    }
  }
  return 0;
}

}  // namespace bench
