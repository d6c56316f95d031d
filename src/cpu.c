/*
 * CPU facts, computed once: the best ISA (cpuid + xgetbv, capped by the
 * CONVPOOL_ISA environment variable), cache sizes (cpuid: AMD leaf 0x8000001D,
 * Intel leaf 4; sysfs is often empty in VMs) and the usable CPU count
 * (sched_getaffinity intersected with the CPU quota of the process's own
 * cgroup, v2 and v1; re-read on every cp_cpu_usable_now call).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CP_X86 1
#endif

/* Fallback cache sizes when cpuid does not describe the caches. */
enum { CP_FALLBACK_L1D = 32 << 10, CP_FALLBACK_L2 = 512 << 10, CP_FALLBACK_L3 = 8 << 20 };

static cp_cpu cp_cpu_facts;
static pthread_once_t cp_cpu_once = PTHREAD_ONCE_INIT;

const char *cp_isa_name(cp_isa isa) {
  switch (isa) {
    case CP_ISA_AVX512_BF16:
      return "avx512bf16";
    case CP_ISA_AVX512:
      return "avx512f";
    case CP_ISA_AVX2:
      return "avx2";
    case CP_ISA_SCALAR:
      return "scalar";
  }
  return "unknown";
}

#ifdef CP_X86
static void cp_cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static unsigned long long cp_xgetbv0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((unsigned long long)hi << 32) | lo;
}

static cp_isa cp_detect_isa(void) {
  unsigned r[4];
  cp_cpuid(0, 0, r);
  unsigned max_leaf = r[0];
  if (max_leaf < 7) return CP_ISA_SCALAR;
  cp_cpuid(1, 0, r);
  unsigned ecx1 = r[2];
  int fma = (ecx1 >> 12) & 1, osxsave = (ecx1 >> 27) & 1, avx = (ecx1 >> 28) & 1,
      f16c = (ecx1 >> 29) & 1;
  if (!osxsave || !avx) return CP_ISA_SCALAR;
  unsigned long long xcr0 = cp_xgetbv0();
  int ymm_state = (xcr0 & 0x6) == 0x6;
  int zmm_state = (xcr0 & 0xe6) == 0xe6;
  cp_cpuid(7, 0, r);
  unsigned ebx7 = r[1];
  int avx2 = (ebx7 >> 5) & 1, avx512f = (ebx7 >> 16) & 1;
  int avx512bw = (ebx7 >> 30) & 1, avx512vl = (ebx7 >> 31) & 1;
  if (!ymm_state || !avx2 || !fma || !f16c) return CP_ISA_SCALAR;
  /* The AVX-512 path uses F, plus BW and VL for masked half stores. */
  if (zmm_state && avx512f && avx512bw && avx512vl) {
    cp_cpuid(7, 1, r);
    return (r[0] >> 5) & 1 ? CP_ISA_AVX512_BF16 : CP_ISA_AVX512;
  }
  return CP_ISA_AVX2;
}

/* Walk a deterministic cache-parameters leaf (Intel 4, AMD 0x8000001D). */
static int cp_read_cache_leaf(unsigned leaf, size_t *l1d, size_t *l2, size_t *l3) {
  int found = 0;
  for (unsigned sub = 0; sub < 16; sub++) {
    unsigned r[4];
    cp_cpuid(leaf, sub, r);
    unsigned type = r[0] & 0x1f;
    if (type == 0) break;
    unsigned level = (r[0] >> 5) & 0x7;
    size_t ways = ((r[1] >> 22) & 0x3ff) + 1;
    size_t parts = ((r[1] >> 12) & 0x3ff) + 1;
    size_t line = (r[1] & 0xfff) + 1;
    size_t sets = (size_t)r[2] + 1;
    size_t size = ways * parts * line * sets;
    if (level == 1 && type == 1) *l1d = size, found = 1;               /* data cache */
    if (level == 2 && (type == 3 || type == 2)) *l2 = size, found = 1; /* unified */
    if (level == 3 && (type == 3 || type == 2)) *l3 = size, found = 1;
  }
  return found;
}

/* The vendor string of cpuid leaf 0 into vendor[13]; returns the highest leaf. */
static unsigned cp_vendor(char vendor[13]) {
  unsigned r[4];
  cp_cpuid(0, 0, r);
  memcpy(vendor, &r[1], 4);
  memcpy(vendor + 4, &r[3], 4);
  memcpy(vendor + 8, &r[2], 4);
  vendor[12] = '\0';
  return r[0];
}

static int cp_detect_caches(size_t *l1d, size_t *l2, size_t *l3) {
  unsigned r[4];
  char vendor[13];
  const unsigned max_leaf = cp_vendor(vendor);
  if (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0) {
    cp_cpuid(0x80000000u, 0, r);
    unsigned max_ext = r[0];
    if (max_ext >= 0x8000001Du) {
      cp_cpuid(0x80000001u, 0, r);
      if (((r[2] >> 22) & 1) /* TopologyExtensions */ &&
          cp_read_cache_leaf(0x8000001Du, l1d, l2, l3))
        return 1;
    }
    /* Legacy leaves (some hypervisors leave 0x8000001D empty): L1d KiB in
       0x80000005 ECX[31:24], L2 KiB in 0x80000006 ECX[31:16], L3 in 512 KiB
       units in 0x80000006 EDX[31:18]. */
    if (max_ext < 0x80000006u) return 0;
    cp_cpuid(0x80000005u, 0, r);
    *l1d = (size_t)(r[2] >> 24) << 10;
    cp_cpuid(0x80000006u, 0, r);
    *l2 = (size_t)(r[2] >> 16) << 10;
    *l3 = (size_t)(r[3] >> 18) << 19;
    return *l1d != 0 || *l2 != 0;
  }
  if (max_leaf >= 4) return cp_read_cache_leaf(4, l1d, l2, l3);
  return 0;
}
#endif

/* ---- usable CPUs: affinity and the cgroup CPU quota ---- */

/* Longest path handled (longer cgroup or mount paths are ignored: no quota). */
enum { CP_PATH_CAP = 4096 };

/* Reads a file line by line with no allocation; lines longer than the
   buffer are skipped. */
typedef struct cp_lines {
  int fd, eof, skipping;
  size_t pos, len; /* unread bytes: buf[pos, len) */
  char buf[8192];
} cp_lines;

static int cp_lines_open(cp_lines *r, const char *path) {
  r->fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  r->eof = r->skipping = 0;
  r->pos = r->len = 0;
  return r->fd >= 0;
}

static void cp_lines_close(cp_lines *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
}

/* The next line, NUL-terminated without its newline, or NULL at the end. */
static char *cp_lines_next(cp_lines *r) {
  for (;;) {
    char *start = r->buf + r->pos;
    char *nl = memchr(start, '\n', r->len - r->pos);
    if (nl != NULL) {
      *nl = '\0';
      r->pos = (size_t)(nl - r->buf) + 1;
      if (r->skipping) { /* the end of a line that did not fit */
        r->skipping = 0;
        continue;
      }
      return start;
    }
    if (r->eof) {
      if (r->pos == r->len || r->skipping) return NULL;
      r->buf[r->len] = '\0'; /* a last line without a newline */
      r->pos = r->len;
      return start;
    }
    memmove(r->buf, start, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
    if (r->len == sizeof r->buf - 1) { /* no newline in a full buffer */
      r->skipping = 1;
      r->len = 0;
    }
    ssize_t n = read(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      r->eof = 1;
    else
      r->len += (size_t)n;
  }
}

/* The first line of a small file, or 0 when it cannot be read. */
static int cp_read_line(const char *path, char *out, size_t cap) {
  cp_lines r;
  if (!cp_lines_open(&r, path)) return 0;
  const char *line = cp_lines_next(&r);
  int ok = line != NULL && strlen(line) < cap;
  if (ok) memcpy(out, line, strlen(line) + 1);
  cp_lines_close(&r);
  return ok;
}

/* A decimal integer (optionally negative) that is all of text up to *end;
   returns 0 when malformed or beyond 10^15. */
static int cp_parse_ll(const char *text, const char **end, long long *out) {
  const char *p = text;
  int neg = *p == '-';
  if (neg) p++;
  if (*p < '0' || *p > '9') return 0;
  long long v = 0;
  while (*p >= '0' && *p <= '9') {
    if (v > 100000000000000LL) return 0;
    v = v * 10 + (*p++ - '0');
  }
  *out = neg ? -v : v;
  *end = p;
  return 1;
}

/* CPUs for a quota per period, rounded up; 0 when either is not positive. */
static int cp_quota_to_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  long long cpus = quota / period + (quota % period != 0);
  return cpus > (1 << 20) ? 1 << 20 : (int)cpus;
}

/* The quota of one cgroup directory, or 0 for none (or unreadable). */
static int cp_dir_quota(const char *dir, int v2) {
  char path[CP_PATH_CAP + 32], line[128];
  const char *end;
  long long quota, period;
  if (strlen(dir) >= CP_PATH_CAP) return 0;
  if (v2) { /* cpu.max: "max PERIOD" or "QUOTA PERIOD" */
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    if (!cp_read_line(path, line, sizeof line)) return 0;
    if (strncmp(line, "max ", 4) == 0) return 0;
    if (!cp_parse_ll(line, &end, &quota) || *end != ' ') return 0;
    if (!cp_parse_ll(end + 1, &end, &period) || *end != '\0') return 0;
    return cp_quota_to_cpus(quota, period);
  }
  /* cgroup v1: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us */
  snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
  if (!cp_read_line(path, line, sizeof line)) return 0;
  if (!cp_parse_ll(line, &end, &quota) || *end != '\0') return 0;
  snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
  if (!cp_read_line(path, line, sizeof line)) return 0;
  if (!cp_parse_ll(line, &end, &period) || *end != '\0') return 0;
  return cp_quota_to_cpus(quota, period);
}

static int cp_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Does the comma-separated list contain item? */
static int cp_list_has(const char *list, const char *item) {
  size_t n = strlen(item);
  for (const char *p = list; p != NULL; p = strchr(p, ',')) {
    if (*p == ',') p++;
    if (strncmp(p, item, n) == 0 && (p[n] == ',' || p[n] == '\0')) return 1;
  }
  return 0;
}

/* The cgroup path of the v2 hierarchy (v2) or of the v1 hierarchy with the
   cpu controller, from a file in the format of /proc/self/cgroup. */
static int cp_cgroup_path(const char *proc_self_cgroup, int v2, char *out, size_t cap) {
  cp_lines r;
  if (!cp_lines_open(&r, proc_self_cgroup)) return 0;
  int found = 0;
  char *line;
  while (!found && (line = cp_lines_next(&r)) != NULL) {
    char *c1 = strchr(line, ':'); /* ID:CONTROLLERS:PATH; PATH may hold ':' */
    char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL || c2[1] != '/') continue;
    *c1 = *c2 = '\0';
    const char *id = line, *controllers = c1 + 1, *path = c2 + 1;
    int match =
        v2 ? strcmp(id, "0") == 0 && controllers[0] == '\0' : cp_list_has(controllers, "cpu");
    if (match && strlen(path) < cap) {
      memcpy(out, path, strlen(path) + 1);
      found = 1;
    }
  }
  cp_lines_close(&r);
  return found;
}

/* Undo the octal escapes of a mountinfo field (\040 for a space, ...). */
static void cp_unescape(char *s) {
  char *o = s;
  for (const char *p = s; *p != '\0'; p++) {
    if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
        p[3] <= '7') {
      *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
      p += 3;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
}

/* The part of path under root ("/a/b" under "/a" is "/b"), or NULL when path
   is not at or below root. */
static const char *cp_below(const char *path, const char *root) {
  size_t n = strlen(root);
  while (n > 0 && root[n - 1] == '/') n--;
  if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0')) return NULL;
  return path[n] == '\0' ? "/" : path + n;
}

/* From mountinfo: the mount point of the hierarchy (cgroup2, or cgroup v1
   with the cpu controller) and the part of path under the mount's root (a
   tail of path, or "/"). A mount whose root holds path is preferred; else
   the first one, at its top directory. Returns 1 when such a mount was
   found. */
static int cp_find_mount(const char *mountinfo, int v2, const char *path, char *mnt,
                         const char **rel) {
  cp_lines r;
  if (!cp_lines_open(&r, mountinfo)) return 0;
  int found = 0; /* 1: a mount, 2: a mount whose root holds path */
  char *line;
  while (found < 2 && (line = cp_lines_next(&r)) != NULL) {
    /* ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS */
    char *field[5], *save = NULL, *tok = strtok_r(line, " ", &save);
    int n = 0;
    while (tok != NULL && n < 5) field[n++] = tok, tok = strtok_r(NULL, " ", &save);
    while (tok != NULL && strcmp(tok, "-") != 0) tok = strtok_r(NULL, " ", &save);
    char *fstype = tok != NULL ? strtok_r(NULL, " ", &save) : NULL;
    char *source = fstype != NULL ? strtok_r(NULL, " ", &save) : NULL;
    char *super = source != NULL ? strtok_r(NULL, " ", &save) : NULL;
    if (n < 5 || super == NULL) continue;
    if (v2 ? strcmp(fstype, "cgroup2") != 0
           : strcmp(fstype, "cgroup") != 0 || !cp_list_has(super, "cpu"))
      continue;
    char *root = field[3], *point = field[4];
    cp_unescape(root);
    cp_unescape(point);
    if (strlen(point) >= CP_PATH_CAP) continue;
    const char *below = cp_below(path, root);
    if (below == NULL && found) continue;
    memcpy(mnt, point, strlen(point) + 1);
    *rel = below != NULL ? below : "/";
    found = below != NULL ? 2 : 1;
  }
  cp_lines_close(&r);
  return found != 0;
}

/* Without mountinfo: the usual mount points under cgroup_mount, and the
   longest tail of path that exists under the mount. */
static int cp_guess_mount(const char *cgroup_mount, int v2, const char *path, char *mnt,
                          const char **rel) {
  static const char *const v2_dirs[] = {"", "/unified"};
  static const char *const v1_dirs[] = {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"};
  const char *const *dirs = v2 ? v2_dirs : v1_dirs;
  const int ndirs = v2 ? 2 : 3;
  char probe[CP_PATH_CAP + 64];
  if (cgroup_mount == NULL) return 0;
  for (int i = 0; i < ndirs; i++) {
    snprintf(probe, sizeof probe, "%s%s/%s", cgroup_mount, dirs[i],
             v2 ? "cgroup.controllers" : "cpu.cfs_period_us");
    if (access(probe, F_OK) != 0) continue;
    int m = snprintf(mnt, CP_PATH_CAP, "%s%s", cgroup_mount, dirs[i]);
    if (m < 0 || m >= CP_PATH_CAP) return 0;
    /* A container may see its own cgroup as the top: drop leading
       components of path until the directory exists. */
    for (const char *tail = path; tail != NULL; tail = strchr(tail + 1, '/')) {
      if (snprintf(probe, sizeof probe, "%s%s", mnt, tail) < (int)sizeof probe &&
          cp_is_dir(probe)) {
        *rel = tail;
        return 1;
      }
    }
    *rel = "/";
    return 1;
  }
  return 0;
}

/* The smallest quota from the process's directory up to the top of the mount. */
static int cp_hierarchy_quota(const char *proc_self_cgroup, const char *mountinfo,
                              const char *cgroup_mount, int v2) {
  char path[CP_PATH_CAP], mnt[CP_PATH_CAP], dir[CP_PATH_CAP];
  const char *rel;
  if (!cp_cgroup_path(proc_self_cgroup, v2, path, sizeof path)) return 0;
  if (!cp_find_mount(mountinfo, v2, path, mnt, &rel) &&
      !cp_guess_mount(cgroup_mount, v2, path, mnt, &rel))
    return 0;
  size_t top = strlen(mnt);
  while (top > 0 && mnt[top - 1] == '/') top--; /* so that "/" + rel is rel */
  mnt[top] = '\0';
  int n = snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
  if (n < 0 || n >= (int)sizeof dir) return 0;
  if (!cp_is_dir(dir)) dir[top] = '\0'; /* moved, or not visible here: the top */
  int best = 0;
  for (;;) {
    int q = cp_dir_quota(dir, v2);
    if (q > 0 && (best == 0 || q < best)) best = q;
    char *slash = strrchr(dir + top, '/');
    if (slash == NULL) break;
    *slash = '\0';
  }
  return best;
}

int cp_cgroup_quota_cpus(const char *proc_self_cgroup, const char *mountinfo,
                         const char *cgroup_mount) {
  int v2 = cp_hierarchy_quota(proc_self_cgroup, mountinfo, cgroup_mount, 1);
  int v1 = cp_hierarchy_quota(proc_self_cgroup, mountinfo, cgroup_mount, 0);
  if (v2 > 0 && v1 > 0) return v2 < v1 ? v2 : v1;
  return v2 > 0 ? v2 : v1;
}

int cp_cpu_usable_now(void) {
  /* Room for 8192 CPUs (the largest x86-64 kernel configuration) without an
     allocation: one cpu_set_t has 1024, and sched_getaffinity refuses a set
     smaller than the kernel's. */
  cpu_set_t sets[8];
  int n = 0;
  if (sched_getaffinity(0, sizeof sets, sets) == 0) n = CPU_COUNT_S(sizeof sets, sets);
  if (n < 1) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 && online < (1 << 20) ? (int)online : 1;
  }
  int quota = cp_cgroup_quota_cpus("/proc/self/cgroup", "/proc/self/mountinfo", "/sys/fs/cgroup");
  return quota > 0 && quota < n ? quota : n;
}

static void cp_cpu_init(void) {
  cp_cpu *c = &cp_cpu_facts;
  c->detected = CP_ISA_SCALAR;
  c->l1d = CP_FALLBACK_L1D;
  c->l2 = CP_FALLBACK_L2;
  c->l3 = CP_FALLBACK_L3;
#ifdef CP_X86
  c->detected = cp_detect_isa();
  size_t l1d = 0, l2 = 0, l3 = 0;
  if (cp_detect_caches(&l1d, &l2, &l3)) {
    c->caches_from_cpuid = 1;
    if (l1d) c->l1d = l1d;
    if (l2) c->l2 = l2;
    if (l3) c->l3 = l3;
  }
  char vendor[13];
  (void)cp_vendor(vendor);
  const int intel = strcmp(vendor, "GenuineIntel") == 0; /* the facts measured per vendor */
  c->stride_reach = intel ? 2048 : 0;
  c->direct_mr = intel ? 64 : 32;
  c->direct_images_one_pass = intel;
#else
  c->direct_mr = 32;
#endif
  const char *mr_env = getenv("CONVPOOL_DIRECT_MR");
  if (mr_env != NULL && mr_env[0] != '\0') {
    if (strcmp(mr_env, "32") == 0 || strcmp(mr_env, "64") == 0)
      c->direct_mr = atoi(mr_env), c->direct_mr_from_env = 1;
    else
      c->direct_mr_from_env = -1;
  }
  const char *l3_env = getenv("CONVPOOL_L3_KIB");
  if (l3_env != NULL && l3_env[0] != '\0') { /* a decimal count of KiB, 64 KiB to 1 TiB */
    char *end = NULL;
    errno = 0;
    const unsigned long long kib = strtoull(l3_env, &end, 10);
    if (errno == 0 && *end == '\0' && l3_env[0] >= '0' && l3_env[0] <= '9' && kib >= 64 &&
        kib <= (1ull << 30))
      c->l3 = (size_t)kib << 10, c->l3_from_env = 1;
    else
      c->l3_from_env = -1;
  }
  c->isa = c->detected;
  const char *cap = getenv("CONVPOOL_ISA");
  if (cap != NULL && cap[0] != '\0') {
    cp_isa limit;
    if (strcmp(cap, "avx512bf16") == 0)
      limit = CP_ISA_AVX512_BF16;
    else if (strcmp(cap, "avx512") == 0 || strcmp(cap, "avx512f") == 0)
      limit = CP_ISA_AVX512;
    else if (strcmp(cap, "avx2") == 0)
      limit = CP_ISA_AVX2;
    else if (strcmp(cap, "scalar") == 0)
      limit = CP_ISA_SCALAR;
    else
      limit = c->detected, c->isa_cap_ignored = 1;
    if (limit < c->isa) c->isa = limit;
  }
}

const cp_cpu *cp_cpu_get(void) {
  pthread_once(&cp_cpu_once, cp_cpu_init);
  return &cp_cpu_facts;
}

/* ---- whether two CPUs share a cache: a cache line bounced between them ---- */

enum { CP_PROBE_BATCHES = 6, CP_PROBE_TRIPS = 256 };

typedef struct cp_probe {
  _Alignas(64) atomic_int ball; /* 1: the partner's turn, 0: ours; -1: stop */
  char pad[64 - sizeof(atomic_int)];
} cp_probe;

static cp_probe cp_probe_line;
static pthread_once_t cp_probe_once = PTHREAD_ONCE_INIT;
static int cp_probe_result = -1;
static double cp_probe_ns = 0.0;

static double cp_probe_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6; /* ms */
}

/* The partner: hands the ball back each time (1 -> 0), until told to stop
   (-1, which a hand-back never overwrites). */
static void *cp_probe_partner(void *arg) {
  (void)arg;
  for (;;) {
    int v;
    while ((v = atomic_load_explicit(&cp_probe_line.ball, memory_order_acquire)) == 0) {
    }
    if (v < 0 || !atomic_compare_exchange_strong_explicit(
                     &cp_probe_line.ball, &v, 0, memory_order_acq_rel, memory_order_acquire))
      return NULL; /* -1 now, or before the hand-back */
  }
}

static void cp_probe_run(void) {
  if (cp_cpu_usable_now() < 2) return; /* spinning on one CPU would wait for the scheduler */
  atomic_store(&cp_probe_line.ball, 0);
  pthread_t partner;
  if (pthread_create(&partner, NULL, cp_probe_partner, NULL) != 0) return;
  const double start = cp_probe_now();
  double best = -1.0;
  int late = 0;
  for (int b = 0; b < CP_PROBE_BATCHES + 1 && !late; b++) { /* batch 0 warms up */
    const double t0 = cp_probe_now();
    for (int i = 0; i < CP_PROBE_TRIPS && !late; i++) {
      atomic_store_explicit(&cp_probe_line.ball, 1, memory_order_release);
      for (unsigned spins = 1; atomic_load_explicit(&cp_probe_line.ball, memory_order_acquire) != 0;
           spins++)
        if ((spins & 0xfffu) == 0 && cp_probe_now() - start > CP_PROBE_MAX_MS) {
          late = 1;
          break;
        }
    }
    const double ns = (cp_probe_now() - t0) * 1e6 / CP_PROBE_TRIPS;
    if (b > 0 && !late && (best < 0.0 || ns < best)) best = ns;
  }
  atomic_store_explicit(&cp_probe_line.ball, -1, memory_order_release);
  pthread_join(partner, NULL);
  if (late || best < 0.0) return;
  cp_probe_ns = best;
  cp_probe_result = best < CP_SHARED_CACHE_NS;
}

int cp_cpu_cores_share_cache(double *round_trip_ns) {
  pthread_once(&cp_probe_once, cp_probe_run);
  if (round_trip_ns != NULL) *round_trip_ns = cp_probe_ns;
  return cp_probe_result;
}

convpool_status convpool_get_info(convpool_info *info) {
  cp_clear_error();
  if (info == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "info is NULL");
  const cp_cpu *c = cp_cpu_get();
  memset(info, 0, sizeof *info);
  info->version = CONVPOOL_VERSION_STRING;
  info->isa = cp_isa_name(c->isa);
  info->usable_cpus = cp_cpu_usable_now();
  info->l1d_bytes = c->l1d;
  info->l2_bytes = c->l2;
  info->l3_bytes = c->l3;
  info->caches_from_cpuid = c->caches_from_cpuid;
  return CONVPOOL_SUCCESS;
}
