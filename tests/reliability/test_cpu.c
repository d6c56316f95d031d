/*
 * The usable CPU count (src/cpu.c): the cgroup CPU quota read from the
 * process's own cgroup, on fake /proc/self/cgroup, mountinfo and cgroup trees
 * built in a temporary directory (cgroup v2, v1, hybrid, containers that see
 * only their own cgroup, quotas on parents, malformed files), and
 * cp_cpu_usable_now() following sched_setaffinity on every call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu.h"
#include "rel_util.h"

static char g_root[256]; /* the temporary directory */
static int g_checked;

/* The path of name under the temporary directory, in a rotating buffer. */
static const char *at(const char *name) {
  static char bufs[8][1024];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", g_root, name);
  return b;
}

/* mkdir -p of a path under the temporary directory. */
static void make_dirs(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s", at(name));
  for (char *p = path + strlen(g_root) + 1; *p != '\0'; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      rel_fail_at(__FILE__, __LINE__, "mkdir %s", path);
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) rel_fail_at(__FILE__, __LINE__, "mkdir %s", path);
}

/* Write text to a file under the temporary directory, making its parents. */
static void put(const char *name, const char *text) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", name);
  char *slash = strrchr(dir, '/');
  if (slash != NULL) {
    *slash = '\0';
    make_dirs(dir);
  }
  FILE *f = fopen(at(name), "w");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
    rel_fail_at(__FILE__, __LINE__, "cannot write %s", at(name));
}

/* Remove everything under the temporary directory (it stays). */
static void clear(void) {
  char cmd[sizeof g_root * 2 + 64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'/* '%s'/.[!.]*", g_root, g_root);
  if (system(cmd) != 0) rel_fail_at(__FILE__, __LINE__, "cannot clear %s", g_root);
}

/* A mountinfo line for a cgroup2 mount of root at mount point `point` (under
   the temporary directory). */
static void mountinfo_v2(char *out, size_t cap, const char *root, const char *point) {
  size_t n = strlen(out);
  snprintf(out + n, cap - n,
           "35 24 0:30 %s %s rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
           "rw,nsdelegate\n",
           root, at(point));
}

/* The same for a cgroup v1 hierarchy with the given controllers. */
static void mountinfo_v1(char *out, size_t cap, const char *root, const char *point,
                         const char *controllers) {
  size_t n = strlen(out);
  snprintf(out + n, cap - n,
           "40 26 0:35 %s %s rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,%s\n",
           root, at(point), controllers);
}

#define EXPECT_QUOTA(what, want, mountinfo, mount)                                                 \
  do {                                                                                             \
    g_checked++;                                                                                   \
    int got_ = cp_cgroup_quota_cpus(at("proc_self_cgroup"), (mountinfo), (mount));                 \
    REL_CHECK(got_ == (want), "%s: cp_cgroup_quota_cpus gives %d, want %d", (what), got_, (want)); \
  } while (0)

/* cgroup v2 through mountinfo: rounding, parents, "max", malformed cpu.max. */
static void test_v2(void) {
  static const struct {
    const char *cpu_max;
    int cpus;
  } cases[] = {
      {"150000 100000\n", 2},
      {"100000 100000\n", 1},
      {"200000 100000\n", 2},
      {"250000 100000\n", 3},
      {"1000 100000\n", 1},
      {"50000 100000", 1}, /* no newline */
      {"400000 50000\n", 8},
      {"max 100000\n", 0},
      {"max\n", 0},
      {"\n", 0},
      {"", 0},
      {"abc 100000\n", 0},
      {"150000\n", 0},
      {"150000 0\n", 0},
      {"-5 100000\n", 0},
      {"150000 -1\n", 0},
      {"150000 100000 7\n", 0},
      {" 150000 100000\n", 0},
      {"150000  100000\n", 0},
      {"1.5 1\n", 0},
      {"150000 100000x\n", 0},
      {"99999999999999999999 100000\n", 0},
      {"0 100000\n", 0},
  };
  char mi[4096] = "";
  mountinfo_v1(mi, sizeof mi, "/", "fs/memory", "memory");
  mountinfo_v2(mi, sizeof mi, "/", "fs/cgroup");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clear();
    put("proc_self_cgroup", "0::/user.slice/app.scope\n");
    put("mountinfo", mi);
    put("fs/cgroup/cgroup.controllers", "cpu memory\n");
    put("fs/cgroup/user.slice/app.scope/cpu.max", cases[i].cpu_max);
    char what[128];
    snprintf(what, sizeof what, "v2 cpu.max \"%.40s\"", cases[i].cpu_max);
    EXPECT_QUOTA(what, cases[i].cpus, at("mountinfo"), NULL);
  }

  /* The quota of the process's cgroup, not the root's. */
  clear();
  put("proc_self_cgroup", "0::/a/b\n");
  put("mountinfo", mi);
  put("fs/cgroup/a/cpu.max", "max 100000\n");
  put("fs/cgroup/a/b/cpu.max", "300000 100000\n");
  put("fs/cgroup/x/cpu.max", "100000 100000\n"); /* a sibling: must not count */
  EXPECT_QUOTA("v2 own cgroup (3 CPUs), none at the top, a sibling 1 CPU", 3, at("mountinfo"),
               NULL);
  put("fs/cgroup/cpu.max", "100000 100000\n"); /* the top of the mount limits everything */
  EXPECT_QUOTA("v2 own cgroup 3 CPUs, the mount's top 1", 1, at("mountinfo"), NULL);
  put("fs/cgroup/cpu.max", "max 100000\n");

  /* A parent's smaller quota limits the child. */
  put("fs/cgroup/a/cpu.max", "150000 100000\n");
  EXPECT_QUOTA("v2 parent quota smaller than the child's", 2, at("mountinfo"), NULL);
  put("fs/cgroup/a/b/cpu.max", "max 100000\n");
  EXPECT_QUOTA("v2 parent quota, none on the child", 2, at("mountinfo"), NULL);
  put("fs/cgroup/a/cpu.max", "garbage\n");
  EXPECT_QUOTA("v2 malformed parent, no quota anywhere", 0, at("mountinfo"), NULL);

  /* The process's directory is gone (or not visible): the top of the mount. */
  clear();
  put("proc_self_cgroup", "0::/gone/away\n");
  put("mountinfo", mi);
  put("fs/cgroup/cpu.max", "200000 100000\n");
  EXPECT_QUOTA("v2 missing leaf directory: the mount's top", 2, at("mountinfo"), NULL);

  /* A container: the mount shows /docker/abc as its top directory. */
  clear();
  mi[0] = '\0';
  mountinfo_v2(mi, sizeof mi, "/docker/abc", "c/cgroup");
  put("mountinfo", mi);
  put("proc_self_cgroup", "0::/docker/abc/worker\n");
  put("c/cgroup/cpu.max", "400000 100000\n");
  put("c/cgroup/worker/cpu.max", "120000 100000\n");
  EXPECT_QUOTA("v2 bind mount of /docker/abc, process in worker", 2, at("mountinfo"), NULL);
  put("proc_self_cgroup", "0::/docker/abc\n");
  EXPECT_QUOTA("v2 bind mount of /docker/abc, process at its top", 4, at("mountinfo"), NULL);
  put("proc_self_cgroup", "0::/elsewhere\n");
  EXPECT_QUOTA("v2 path outside the mount's root: the mount's top", 4, at("mountinfo"), NULL);
  /* Of two mounts, the one whose root holds the path. */
  mi[0] = '\0';
  mountinfo_v2(mi, sizeof mi, "/other", "o/cgroup");
  mountinfo_v2(mi, sizeof mi, "/docker/abc", "c/cgroup");
  put("mountinfo", mi);
  put("o/cgroup/cpu.max", "100000 100000\n");
  put("proc_self_cgroup", "0::/docker/abc/worker\n");
  EXPECT_QUOTA("v2 two mounts, the second holds the path", 2, at("mountinfo"), NULL);

  /* Octal escapes in the mount point (a space is \040). */
  clear();
  char point[600];
  snprintf(point, sizeof point, "%s/with\\040space", g_root);
  snprintf(mi, sizeof mi, "35 24 0:30 / %s rw shared:9 - cgroup2 cgroup2 rw\n", point);
  put("mountinfo", mi);
  put("proc_self_cgroup", "0::/g\n");
  put("with space/g/cpu.max", "300000 100000\n");
  EXPECT_QUOTA("v2 mount point with an escaped space", 3, at("mountinfo"), NULL);

  /* Lines longer than the reader's buffer are skipped, the rest is read. */
  clear();
  {
    static char big[20000];
    memset(big, 'x', sizeof big - 2);
    big[sizeof big - 2] = '\n';
    big[sizeof big - 1] = '\0';
    static char mi2[24000];
    snprintf(mi2, sizeof mi2, "%s", big);
    mountinfo_v2(mi2, sizeof mi2, "/", "fs/cgroup");
    put("mountinfo", mi2);
    char cg[24000];
    snprintf(cg, sizeof cg, "%s0::/q\n", big);
    put("proc_self_cgroup", cg);
    put("fs/cgroup/q/cpu.max", "500000 100000\n");
    EXPECT_QUOTA("v2 after a 20000-byte line", 5, at("mountinfo"), NULL);
  }
}

/* cgroup v1 through mountinfo, and hybrid (v1 cpu plus a v2 mount). */
static void test_v1(void) {
  static const struct {
    const char *quota, *period;
    int cpus;
  } cases[] = {
      {"150000\n", "100000\n", 2}, {"100000\n", "100000\n", 1}, {"-1\n", "100000\n", 0},
      {"350000\n", "100000\n", 4}, {"abc\n", "100000\n", 0},    {"150000\n", "0\n", 0},
      {"150000\n", "", 0},         {"", "100000\n", 0},         {"150000 1\n", "100000\n", 0},
      {"150000\n", NULL, 0},       {NULL, "100000\n", 0},
  };
  char mi[4096] = "";
  mountinfo_v1(mi, sizeof mi, "/", "fs/cpuset", "cpuset"); /* "cpuset" is not "cpu" */
  mountinfo_v1(mi, sizeof mi, "/", "fs/cpuacct", "cpuacct");
  mountinfo_v1(mi, sizeof mi, "/", "fs/cpu,cpuacct", "cpu,cpuacct");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clear();
    put("mountinfo", mi);
    put("proc_self_cgroup",
        "12:cpuset:/decoy\n11:cpuacct:/decoy\n4:cpu,cpuacct:/kube/pod1\n1:name=systemd:/x\n");
    make_dirs("fs/cpu,cpuacct/kube/pod1");
    if (cases[i].quota != NULL) put("fs/cpu,cpuacct/kube/pod1/cpu.cfs_quota_us", cases[i].quota);
    if (cases[i].period != NULL) put("fs/cpu,cpuacct/kube/pod1/cpu.cfs_period_us", cases[i].period);
    put("fs/cpuset/decoy/cpu.cfs_quota_us", "100000\n");
    put("fs/cpuset/decoy/cpu.cfs_period_us", "100000\n");
    put("fs/cpuacct/decoy/cpu.cfs_quota_us", "100000\n");
    put("fs/cpuacct/decoy/cpu.cfs_period_us", "100000\n");
    char what[128];
    snprintf(what, sizeof what, "v1 quota \"%.20s\" period \"%.20s\"",
             cases[i].quota ? cases[i].quota : "(none)",
             cases[i].period ? cases[i].period : "(none)");
    EXPECT_QUOTA(what, cases[i].cpus, at("mountinfo"), NULL);
  }
  /* A parent's quota. */
  put("fs/cpu,cpuacct/kube/pod1/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu,cpuacct/kube/cpu.cfs_quota_us", "250000\n");
  put("fs/cpu,cpuacct/kube/cpu.cfs_period_us", "100000\n");
  EXPECT_QUOTA("v1 quota on the parent", 3, at("mountinfo"), NULL);

  /* Hybrid: cgroup2 mounted (without the cpu controller) next to v1 cpu. */
  mountinfo_v2(mi, sizeof mi, "/", "fs/unified");
  put("mountinfo", mi);
  put("proc_self_cgroup", "4:cpu,cpuacct:/kube/pod1\n0::/kube/pod1\n");
  make_dirs("fs/unified/kube/pod1");
  EXPECT_QUOTA("hybrid, quota in v1 only", 3, at("mountinfo"), NULL);
  put("fs/unified/kube/pod1/cpu.max", "200000 100000\n");
  EXPECT_QUOTA("hybrid, v2 quota smaller", 2, at("mountinfo"), NULL);
  put("fs/unified/kube/pod1/cpu.max", "800000 100000\n");
  EXPECT_QUOTA("hybrid, v1 quota smaller", 3, at("mountinfo"), NULL);
}

/* Without a usable mountinfo: the usual layouts under a cgroup mount directory. */
static void test_guess(void) {
  /* Pure v2 at the mount directory. */
  clear();
  put("sys/cgroup.controllers", "cpu\n");
  put("sys/a/b/cpu.max", "250000 100000\n");
  put("proc_self_cgroup", "0::/a/b\n");
  EXPECT_QUOTA("no mountinfo, v2 layout", 3, NULL, at("sys"));
  EXPECT_QUOTA("unreadable mountinfo, v2 layout", 3, at("no-such-file"), at("sys"));
  put("mountinfo", "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
  EXPECT_QUOTA("mountinfo without cgroup mounts, v2 layout", 3, at("mountinfo"), at("sys"));
  put("mountinfo", "garbage\n\n - \n1 2 3\n");
  EXPECT_QUOTA("malformed mountinfo, v2 layout", 3, at("mountinfo"), at("sys"));

  /* A container that sees its own cgroup as the top of the mount. */
  clear();
  put("sys/cgroup.controllers", "cpu\n");
  put("sys/cpu.max", "50000 100000\n");
  put("proc_self_cgroup", "0::/docker/0123abcd\n");
  EXPECT_QUOTA("no mountinfo, container's own cgroup at the top", 1, NULL, at("sys"));
  put("sys/worker/cpu.max", "max 100000\n");
  put("sys/cpu.max", "300000 100000\n");
  put("proc_self_cgroup", "0::/docker/0123abcd/worker\n");
  EXPECT_QUOTA("no mountinfo, container, process in a child cgroup", 3, NULL, at("sys"));

  /* Hybrid layout: v2 at unified/, v1 cpu at cpu,cpuacct/. */
  clear();
  put("sys/unified/cgroup.controllers", "\n");
  put("sys/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put("sys/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("sys/cpu,cpuacct/svc/cpu.cfs_period_us", "100000\n");
  put("sys/cpu,cpuacct/svc/cpu.cfs_quota_us", "150000\n");
  put("proc_self_cgroup", "0::/svc\n3:cpu,cpuacct:/svc\n");
  EXPECT_QUOTA("no mountinfo, hybrid layout", 2, NULL, at("sys"));
  /* v1 only, under cpu/ */
  clear();
  put("sys/cpu/cpu.cfs_period_us", "100000\n");
  put("sys/cpu/cpu.cfs_quota_us", "-1\n");
  put("sys/cpu/svc/cpu.cfs_period_us", "100000\n");
  put("sys/cpu/svc/cpu.cfs_quota_us", "450000\n");
  put("proc_self_cgroup", "3:cpu:/svc\n");
  EXPECT_QUOTA("no mountinfo, v1 at cpu/", 5, NULL, at("sys"));

  /* Nothing to read. */
  clear();
  put("proc_self_cgroup", "0::/\n");
  EXPECT_QUOTA("no cgroup filesystem", 0, NULL, at("sys"));
  EXPECT_QUOTA("no mountinfo and no mount directory", 0, NULL, NULL);
  put("sys/cgroup.controllers", "cpu\n");
  put("sys/cpu.max", "200000 100000\n");
  put("proc_self_cgroup", "");
  EXPECT_QUOTA("empty /proc/self/cgroup", 0, NULL, at("sys"));
  put("proc_self_cgroup", "0::relative\nnonsense\n0:/\n");
  EXPECT_QUOTA("malformed /proc/self/cgroup", 0, NULL, at("sys"));
  g_checked++;
  REL_CHECK(cp_cgroup_quota_cpus(at("none"), NULL, at("sys")) == 0,
            "a missing /proc/self/cgroup gives a quota");
}

static int count_of(const cpu_set_t *set) {
  return CPU_COUNT(set);
}

/* cp_cpu_usable_now() and convpool_get_info() follow sched_setaffinity. */
/* The cache probe (cp_cpu_cores_share_cache): consistent from call to
   call, its verdict the threshold's on its round trip, none (-1, 0 ns) where
   the process has one CPU (a child pinned to one, since the probe runs once
   per process). */
static void test_probe(void) {
  cpu_set_t orig;
  if (sched_getaffinity(0, sizeof orig, &orig) == 0) { /* before this process probes */
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &orig)) first++;
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) { /* one CPU: no partner to bounce the line with */
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(first, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(3);
      double t = -1.0;
      _exit(cp_cpu_cores_share_cache(&t) == -1 && t == 0.0 ? 0 : 1);
    }
    int status = 0;
    g_checked++;
    REL_CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                  (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3),
              "one CPU: the probe gave a verdict (child status %d)", status);
  }
  double ns = -1.0, again = -1.0;
  const int shared = cp_cpu_cores_share_cache(&ns);
  printf("cache probe: %d (round trip %.0f ns)\n", shared, ns);
  g_checked += 2;
  REL_CHECK(cp_cpu_cores_share_cache(&again) == shared && again == ns,
            "second call: %d (%.0f ns) after %d (%.0f ns)", cp_cpu_cores_share_cache(NULL), again,
            shared, ns);
  if (shared < 0)
    REL_CHECK(ns == 0.0, "no verdict but a round trip of %.0f ns", ns);
  else
    REL_CHECK(ns > 0.0 && (ns < CP_SHARED_CACHE_NS) == shared,
              "verdict %d for a round trip of %.0f ns (threshold %.0f)", shared, ns,
              CP_SHARED_CACHE_NS);
}

static void test_affinity(void) {
  cpu_set_t orig;
  if (sched_getaffinity(0, sizeof orig, &orig) != 0) {
    printf("skipped: sched_getaffinity failed (%s)\n", strerror(errno));
    return;
  }
  const int quota =
      cp_cgroup_quota_cpus("/proc/self/cgroup", "/proc/self/mountinfo", "/sys/fs/cgroup");
  const int n = count_of(&orig);
  const int want_all = quota > 0 && quota < n ? quota : n;
  printf("this process: %d CPUs in its affinity mask, cgroup quota %d (0: none), usable %d\n", n,
         quota, cp_cpu_usable_now());
  g_checked++;
  REL_CHECK(cp_cpu_usable_now() == want_all, "usable now %d, want %d", cp_cpu_usable_now(),
            want_all);
  (void)cp_cpu_get(); /* the cached facts exist before the mask changes */

  int first = -1, second = -1;
  for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
    if (CPU_ISSET(c, &orig)) {
      if (first < 0)
        first = c;
      else
        second = c;
    }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    printf("skipped: sched_setaffinity to CPU %d failed (%s)\n", first, strerror(errno));
    return;
  }
  convpool_info info;
  g_checked += 2;
  REL_CHECK(cp_cpu_usable_now() == 1, "after sched_setaffinity to CPU %d: %d usable, want 1", first,
            cp_cpu_usable_now());
  REL_CHECK(convpool_get_info(&info) == CONVPOOL_SUCCESS && info.usable_cpus == 1,
            "convpool_get_info: usable_cpus %d after sched_setaffinity to one CPU",
            info.usable_cpus);
  if (second >= 0) {
    cpu_set_t two = one;
    CPU_SET(second, &two);
    if (sched_setaffinity(0, sizeof two, &two) == 0) {
      const int want2 = quota == 1 ? 1 : 2;
      g_checked++;
      REL_CHECK(cp_cpu_usable_now() == want2, "after sched_setaffinity to CPUs %d, %d: %d, want %d",
                first, second, cp_cpu_usable_now(), want2);
    }
  }
  if (sched_setaffinity(0, sizeof orig, &orig) != 0) {
    rel_fail_at(__FILE__, __LINE__, "cannot restore the affinity mask: %s", strerror(errno));
    return;
  }
  g_checked++;
  REL_CHECK(cp_cpu_usable_now() == want_all, "after restoring the mask: %d, want %d",
            cp_cpu_usable_now(), want_all);
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(g_root, sizeof g_root, "%s/convpool-cpu-XXXXXX", base && base[0] ? base : "/tmp");
  if (mkdtemp(g_root) == NULL) {
    printf("FAIL: mkdtemp %s: %s\n", g_root, strerror(errno));
    return 1;
  }
  test_v2();
  test_v1();
  test_guess();
  test_probe();
  test_affinity();
  clear();
  rmdir(g_root);
  int failures = *rel_failure_count();
  printf("test_cpu: %d checks, %d failures\n", g_checked, failures);
  return failures == 0 ? 0 : 1;
}
