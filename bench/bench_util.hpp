// Small helpers for the benchmark driver: deterministic random data (dtype
// conversions are the library's convpool_convert), aligned buffers, timing, statistics,
// subprocesses and number formatting.
#ifndef CONVPOOL_BENCH_UTIL_HPP
#define CONVPOOL_BENCH_UTIL_HPP

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "convpool.h"

namespace bench {

// ---- aligned storage ----

// A 64-byte aligned, zero-initialised byte buffer (move-only).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(Buffer &&other) noexcept;
  Buffer &operator=(Buffer &&other) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  void *data() { return data_; }
  const void *data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void *data_ = nullptr;
  size_t bytes_ = 0;
};

// Fill `count` elements of `dtype` with uniform values in [lo, hi) from a
// deterministic generator seeded with `seed` (values are generated in fp32
// and rounded once to the storage type).
void fill_uniform(void *dst, convpool_dtype dtype, size_t count, uint64_t seed, float lo, float hi);

// The fp32 values of `count` elements stored as `dtype`.
std::vector<float> to_f32(const void *src, convpool_dtype dtype, size_t count);

// Comparison of a result against an fp32 reference.
struct Diff {
  double max_abs = 0.0;  // max |got - ref|
  double max_ref = 0.0;  // max |ref|
  double rel = 0.0;      // max_abs / max_ref (0 if max_ref is 0)
  size_t nonfinite = 0;  // elements where got is NaN/Inf but ref is not
};
Diff compare(const std::vector<float> &got, const std::vector<float> &ref);

// ---- timing and statistics ----

double now_ms();  // monotonic clock in milliseconds
double median(std::vector<double> values);
double minimum(const std::vector<double> &values);

void pause_ms(double ms);

// Time one call of fn after an idle pause of gap_ms; returns milliseconds.
template <typename F>
double time_call(double gap_ms, F &&fn) {
  pause_ms(gap_ms);
  const double t0 = now_ms();
  fn();
  return now_ms() - t0;
}

// ---- interference ----

// CPU time counters for measuring what else ran on the machine.
struct CpuSample {
  double wall_s = 0.0;  // monotonic clock
  double busy_s = 0.0;  // busy time of all CPUs, including steal (/proc/stat)
  double self_s = 0.0;  // CPU time of this process, all threads, plus that of
                        // its waited-for children (getrusage) and of the
                        // running children named in sample_cpu's argument
  bool valid = false;
};
CpuSample sample_cpu(const std::vector<pid_t> &running_children = {});

// Cores' worth of CPU time used by other processes (or stolen by the
// hypervisor) between two samples: (busy - own) / wall, >= 0; NaN if unknown
// or if the samples are less than 0.15 s apart.
double other_load(const CpuSample &before, const CpuSample &after);

// ---- processes ----

// Run argv[0] (a path, no shell) with argv; capture stdout and stderr merged.
// `env` ("NAME=value") is added to (or replaces in) this process's
// environment for the child. Returns the exit status (128 + signal if
// killed, -1 if it could not start).
int run_capture(const std::vector<std::string> &argv, std::string *output,
                const std::vector<std::string> &env = {});

// A child process spoken to in lines over pipes (its stdin and stdout; its
// stderr is ours). It can be stopped (SIGSTOP) between requests, so that its
// threads use no CPU while other work is timed, and continued for the next.
class Coprocess {
 public:
  Coprocess() = default;
  ~Coprocess();  // finish()
  Coprocess(const Coprocess &) = delete;
  Coprocess &operator=(const Coprocess &) = delete;

  // Start argv[0] with argv and `env` as for run_capture; false with *why.
  bool start(const std::vector<std::string> &argv, const std::vector<std::string> &env,
             std::string *why);
  // Write one line (a newline is added), continuing the child if stopped.
  bool send(const std::string &line);
  // Read one line (without its newline); false at end of output.
  bool receive(std::string *line);
  // Stop the child and wait until it is stopped.
  void stop();
  // Close its stdin, continue it, wait for it; the exit status as run_capture.
  int finish();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  bool stopped_ = false;
  std::string buffered_;  // read but not yet returned
};

// CPU time (user + system, all threads) of a running process, in seconds;
// NaN if unknown.
double process_cpu_seconds(pid_t pid);

// Peak resident set size of this process (VmHWM from /proc/self/status) in
// kB, or -1 if unavailable.
long self_peak_rss_kb();

// The path of the running executable (/proc/self/exe), or "" if unknown.
std::string self_exe_path();

bool is_executable(const std::string &path);
bool is_file(const std::string &path);

// The last line of a program's output, for messages.
std::string last_line(const std::string &text);

// Value of the line "key value" in text, or "" if absent.
std::string find_value(const std::string &text, const std::string &key);

// ---- text ----

// printf of one number, or "n/a" if it is not finite.
std::string fmt(const char *format, double v);

}  // namespace bench

#endif
