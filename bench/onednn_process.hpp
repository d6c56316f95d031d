// oneDNN in a process of its own: this program re-executed in a hidden
// --onednn-child mode that builds one case's inputs and oneDNN variants and
// then runs them one call at a time on request, over pipes.
//
// oneDNN runs with OMP_WAIT_POLICY=active by default: its OpenMP workers spin
// between parallel regions instead of sleeping, which is oneDNN's fastest
// setting. With libgomp they then spin for minutes after every call, so they
// cannot share a process, or the cores, with the systems timed between oneDNN
// calls: the driver stops the child (SIGSTOP) as soon as a call returns and
// continues it for the next request. The workers resume spinning where they
// stopped, so every oneDNN call still starts on spinning workers.
#ifndef CONVPOOL_BENCH_ONEDNN_PROCESS_HPP
#define CONVPOOL_BENCH_ONEDNN_PROCESS_HPP

#include <sys/types.h>

#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cases.hpp"

namespace bench {

// How oneDNN's OpenMP threads wait: the environment entries its processes
// get and the description the report prints.
struct OmpWaitSetting {
  std::vector<std::string> env;  // "OMP_WAIT_POLICY=active", or none
  std::string description;
};

// OMP_WAIT_POLICY=active, unless omp_default is set (libgomp's default) or
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is already set (the user's choice).
OmpWaitSetting omp_wait_setting(bool omp_default);

// The driver's side of one oneDNN process.
class OnednnProcess {
 public:
  // What the child reports for each requested variant after building it.
  struct Variant {
    int index = -1;  // into onednn_variants()
    bool ok = false;
    std::string impl;      // conv (+ pool) implementation names
    std::string reorders;  // src / dst reorder implementation names, if timed
    std::string why;       // why not ok
  };

  // Start the child for case c on `threads` threads with the given variants
  // (indices into onednn_variants()) and read which ones oneDNN can build.
  // False with *why if the process itself failed; the child is stopped on
  // return.
  bool start(const Case &c, int threads, const std::vector<int> &variants,
             const OmpWaitSetting &omp, std::string *why);
  const std::vector<Variant> &variants() const { return variants_; }

  // One timed call of variants()[i] after an idle pause of gap_ms, measured
  // in the child; milliseconds, or NaN with *why.
  double run(size_t i, double gap_ms, std::string *why);
  // Each built variant's NCHW output against the fp32 reference computed in
  // the child; diffs[i] for variants()[i], checked[i] false where there is
  // none. False with *why if there is no reference.
  bool check(std::vector<Diff> *diffs, std::vector<bool> *checked, std::string *why);
  // The child's peak resident set so far in kB, or -1 with *why.
  long peak_rss_kb(std::string *why);
  pid_t pid() const { return child_.pid(); }
  // End the child (also done by the destructor).
  void quit();

 private:
  bool request(const std::string &line, std::string *reply, std::string *why);

  Coprocess child_;
  std::vector<Variant> variants_;
  std::string gone_why_;  // why the child ended unasked, once it has
};

// Peak RSS (kB) of a oneDNN process that builds only variant `index` and
// runs it twice, or -1 with *why.
long onednn_peak_rss_kb(const Case &c, int index, int threads, const OmpWaitSetting &omp,
                        std::string *why);

// The --onednn-child mode. Arguments: the case (case_args), threads, a comma
// list of variant keys.
int onednn_child_main(int argc, char **argv);

}  // namespace bench

#endif
