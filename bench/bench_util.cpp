// Helpers for the benchmark driver; see bench_util.hpp.
#include "bench_util.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace bench {

// ---- conversions ----

// ---- buffers ----

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data_) {
    std::fprintf(stderr, "convpool-bench: out of memory allocating %zu bytes\n", bytes);
    std::exit(3);
  }
  std::memset(data_, 0, rounded ? rounded : 64);
}

Buffer::~Buffer() {
  std::free(data_);
}

Buffer::Buffer(Buffer &&other) noexcept : data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer &Buffer::operator=(Buffer &&other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

// ---- random data ----

// splitmix64: a tiny, well-mixed 64-bit generator.
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The library's own conversion (one round to nearest even), so the data a
// case feeds each system is what convpool would make of it.
static void convert(const void *src, convpool_dtype from, void *dst, convpool_dtype to,
                    size_t count) {
  if (convpool_convert(src, from, dst, to, count) != CONVPOOL_SUCCESS) {
    std::fprintf(stderr, "convpool-bench: %s\n", convpool_last_error());
    std::exit(3);
  }
}

void fill_uniform(void *dst, convpool_dtype dtype, size_t count, uint64_t seed, float lo,
                  float hi) {
  uint64_t state = seed;
  const float scale = (hi - lo) / 16777216.0f;
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = lo + (float)(splitmix64(&state) >> 40) * scale;  // 24 random bits
  convert(values.data(), CONVPOOL_FLOAT32, dst, dtype, count);
}

std::vector<float> to_f32(const void *src, convpool_dtype dtype, size_t count) {
  std::vector<float> out(count);
  convert(src, dtype, out.data(), CONVPOOL_FLOAT32, count);
  return out;
}

Diff compare(const std::vector<float> &got, const std::vector<float> &ref) {
  Diff d;
  const size_t n = std::min(got.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    if (!std::isfinite(r)) continue;
    if (!std::isfinite(g)) {
      ++d.nonfinite;
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::fabs(g - r));
    d.max_ref = std::max(d.max_ref, std::fabs(r));
  }
  if (got.size() != ref.size()) d.nonfinite += std::max(got.size(), ref.size()) - n;
  d.rel = d.max_ref > 0.0 ? d.max_abs / d.max_ref : d.max_abs;
  return d;
}

// ---- timing ----

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void pause_ms(double ms) {
  if (ms > 0.0) usleep((useconds_t)(ms * 1000.0));
}

double minimum(const std::vector<double> &v) {
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}

// ---- interference ----

CpuSample sample_cpu(const std::vector<pid_t> &running_children) {
  CpuSample s;
  s.wall_s = now_ms() * 1e-3;
  std::ifstream in("/proc/stat");
  std::string cpu;
  // cpu  user nice system idle iowait irq softirq steal ...
  unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu")
    return s;
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return s;
  s.busy_s = (double)(user + nice + system + irq + softirq + steal) / (double)hz;
  struct rusage self, children;
  if (getrusage(RUSAGE_SELF, &self) != 0 || getrusage(RUSAGE_CHILDREN, &children) != 0) return s;
  const auto seconds = [](const struct rusage &ru) {
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
  };
  s.self_s = seconds(self) + seconds(children);
  for (pid_t pid : running_children) {
    const double child = process_cpu_seconds(pid);
    if (!std::isfinite(child)) return s;
    s.self_s += child;
  }
  s.valid = true;
  return s;
}

double other_load(const CpuSample &a, const CpuSample &b) {
  // /proc/stat counts in clock ticks (10 ms): below 0.15 s the estimate
  // would be mostly rounding.
  const double wall = b.wall_s - a.wall_s;
  if (!a.valid || !b.valid || wall < 0.15) return NAN;
  return std::max(0.0, ((b.busy_s - a.busy_s) - (b.self_s - a.self_s)) / wall);
}

// ---- processes ----

// This process's environment with `env` ("NAME=value") added or replaced.
static std::vector<std::string> child_environment(const std::vector<std::string> &env) {
  std::vector<std::string> out;
  for (char **e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string &v : env) replaced = replaced || v.rfind(name + "=", 0) == 0;
    if (!replaced) out.push_back(entry);
  }
  out.insert(out.end(), env.begin(), env.end());
  return out;
}

static std::vector<char *> c_strings(const std::vector<std::string> &strings) {
  std::vector<char *> out;
  for (const std::string &s : strings) out.push_back(const_cast<char *>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Fork and exec argv with `env` added to the environment; the child's stdin
// (if in_fd >= 0), stdout and stderr (if out_fd / err_fd >= 0) become those
// descriptors. The vectors are built before fork(): between fork and exec
// the child only makes async-signal-safe calls. Returns the pid, or -1.
static pid_t spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
                   int in_fd, int out_fd, int err_fd) {
  if (argv.empty()) return -1;
  const std::vector<std::string> environment = child_environment(env);
  std::vector<char *> args = c_strings(argv), envp = c_strings(environment);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  signal(SIGPIPE, SIG_DFL);  // the driver ignores it (see Coprocess)
  if (in_fd >= 0) dup2(in_fd, STDIN_FILENO);
  if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
  execve(args[0], args.data(), envp.data());
  static const char msg[] = "exec failed\n";
  if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(127);
  _exit(127);
}

// Wait for a child; its exit status, 128 + signal if killed, -1 on error.
static int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int run_capture(const std::vector<std::string> &argv, std::string *output,
                const std::vector<std::string> &env) {
  output->clear();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = spawn(argv, env, -1, fds[1], fds[1]);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return -1;
  }
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n > 0) {
      output->append(chunk, (size_t)n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  return wait_exit(pid);
}

Coprocess::~Coprocess() {
  finish();
}

bool Coprocess::start(const std::vector<std::string> &argv, const std::vector<std::string> &env,
                      std::string *why) {
  // A child that dies makes our next write fail with EPIPE instead of
  // killing this process with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    close(in[0]);
    close(in[1]);
    return false;
  }
  pid_ = spawn(argv, env, in[0], out[1], -1);
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (pid_ < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    finish();
    return false;
  }
  return true;
}

bool Coprocess::send(const std::string &line) {
  if (to_child_ < 0) return false;
  if (stopped_) {
    kill(pid_, SIGCONT);
    stopped_ = false;
  }
  const std::string text = line + "\n";
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(to_child_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

bool Coprocess::receive(std::string *line) {
  for (;;) {
    const size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      *line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return true;
    }
    if (from_child_ < 0) return false;
    char chunk[4096];
    const ssize_t n = read(from_child_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffered_.append(chunk, (size_t)n);
  }
}

void Coprocess::stop() {
  if (pid_ < 0 || stopped_) return;
  if (kill(pid_, SIGSTOP) != 0) return;
  int status = 0;
  while (waitpid(pid_, &status, WUNTRACED) < 0 && errno == EINTR) {
  }
  stopped_ = true;
}

int Coprocess::finish() {
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ < 0) return -1;
  if (stopped_) kill(pid_, SIGCONT);
  stopped_ = false;
  const int rc = wait_exit(pid_);
  pid_ = -1;
  return rc;
}

double process_cpu_seconds(pid_t pid) {
  // /proc/PID/stat: "pid (comm) state ..." with utime and stime as fields 14
  // and 15, in clock ticks; comm may hold spaces, so count after its ')'.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  const long hz = sysconf(_SC_CLK_TCK);
  if (close_paren == std::string::npos || hz <= 0) return NAN;
  std::istringstream fields(text.substr(close_paren + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return (double)(utime + stime) / (double)hz;
}

long self_peak_rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

std::string self_exe_path() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  return path;
}

bool is_executable(const std::string &path) {
  return access(path.c_str(), X_OK) == 0;
}
bool is_file(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string last_line(const std::string &text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string find_value(const std::string &text, const std::string &key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// ---- text ----

std::string fmt(const char *format, double v) {
  if (!std::isfinite(v)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

}  // namespace bench
