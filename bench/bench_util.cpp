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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bench {

// ---- conversions ----

static uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t f32_to_f16(float value) {
  uint32_t x = float_bits(value);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds past 65504
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): the value in units of 2^-24,
    // rounded to nearest even by the default FP rounding mode. 1024 units is
    // the smallest normal, which has the same encoding.
    const float units = std::fabs(value) * 16777216.0f;
    return (uint16_t)(sign | (uint16_t)std::nearbyint(units));
  }
  // Normal: round the 23-bit mantissa to 10 bits (ties to even), rebias.
  x += 0x0fffu + ((x >> 13) & 1u);
  x -= (uint32_t)(127 - 15) << 23;
  return (uint16_t)(sign | (x >> 13));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32
    const float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t f32_to_bf16(float value) {
  const uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

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

Buffer::~Buffer() { std::free(data_); }

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

void fill_uniform(void *dst, convpool_dtype dtype, size_t count, uint64_t seed, float lo,
                  float hi) {
  uint64_t state = seed;
  const float scale = (hi - lo) / 16777216.0f;
  for (size_t i = 0; i < count; ++i) {
    const float v = lo + (float)(splitmix64(&state) >> 40) * scale;  // 24 random bits
    switch (dtype) {
      case CONVPOOL_FLOAT32: static_cast<float *>(dst)[i] = v; break;
      case CONVPOOL_FLOAT16: static_cast<uint16_t *>(dst)[i] = f32_to_f16(v); break;
      case CONVPOOL_BFLOAT16: static_cast<uint16_t *>(dst)[i] = f32_to_bf16(v); break;
    }
  }
}

std::vector<float> to_f32(const void *src, convpool_dtype dtype, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case CONVPOOL_FLOAT32: out[i] = static_cast<const float *>(src)[i]; break;
      case CONVPOOL_FLOAT16: out[i] = f16_to_f32(static_cast<const uint16_t *>(src)[i]); break;
      case CONVPOOL_BFLOAT16:
        out[i] = bf16_to_f32(static_cast<const uint16_t *>(src)[i]);
        break;
    }
  }
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

double minimum(const std::vector<double> &v) {
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}

// ---- interference ----

CpuSample sample_cpu() {
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

int run_capture(const std::vector<std::string> &argv, std::string *output) {
  output->clear();
  if (argv.empty()) return -1;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::vector<char *> args;
  for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {  // child: stdout and stderr into the pipe, then exec
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv(args[0], args.data());
    static const char msg[] = "exec failed\n";  // only async-signal-safe calls here
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(127);
    _exit(127);
  }
  close(fds[1]);
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
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
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

bool is_executable(const std::string &path) { return access(path.c_str(), X_OK) == 0; }
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
