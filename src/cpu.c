/*
 * CPU facts, computed once: the best ISA (cpuid + xgetbv, capped by the
 * CONVPOOL_ISA environment variable), cache sizes (cpuid: AMD leaf 0x8000001D,
 * Intel leaf 4; sysfs is often empty in VMs) and the usable CPU count
 * (sched_getaffinity intersected with the cgroup v2 / v1 CPU quota).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (level == 1 && type == 1) *l1d = size, found = 1;        /* data cache */
    if (level == 2 && (type == 3 || type == 2)) *l2 = size, found = 1; /* unified */
    if (level == 3 && (type == 3 || type == 2)) *l3 = size, found = 1;
  }
  return found;
}

static int cp_detect_caches(size_t *l1d, size_t *l2, size_t *l3) {
  unsigned r[4];
  cp_cpuid(0, 0, r);
  unsigned max_leaf = r[0];
  char vendor[13];
  memcpy(vendor, &r[1], 4);
  memcpy(vendor + 4, &r[3], 4);
  memcpy(vendor + 8, &r[2], 4);
  vendor[12] = '\0';
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

/* CPUs allowed by the cgroup quota, or 0 when there is no quota. */
static int cp_cgroup_cpus(void) {
  FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
  if (f != NULL) {
    char quota[32] = {0};
    long long period = 0;
    int n = fscanf(f, "%31s %lld", quota, &period);
    fclose(f);
    if (n == 2 && strcmp(quota, "max") != 0 && period > 0) {
      long long q = atoll(quota);
      if (q > 0) return (int)((q + period - 1) / period);
    }
    return 0;
  }
  long long q = -1, p = 0;
  f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
  if (f == NULL) f = fopen("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "r");
  if (f != NULL) {
    if (fscanf(f, "%lld", &q) != 1) q = -1;
    fclose(f);
  }
  f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
  if (f == NULL) f = fopen("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "r");
  if (f != NULL) {
    if (fscanf(f, "%lld", &p) != 1) p = 0;
    fclose(f);
  }
  if (q > 0 && p > 0) return (int)((q + p - 1) / p);
  return 0;
}

static int cp_usable_cpus(void) {
  int n = 1;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = 1;
  int quota = cp_cgroup_cpus();
  if (quota > 0 && quota < n) n = quota;
  return n;
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
#endif
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
  c->usable_cpus = cp_usable_cpus();
}

const cp_cpu *cp_cpu_get(void) {
  pthread_once(&cp_cpu_once, cp_cpu_init);
  return &cp_cpu_facts;
}

convpool_status convpool_get_info(convpool_info *info) {
  cp_clear_error();
  if (info == NULL) return cp_fail(CONVPOOL_INVALID_ARGUMENT, "info is NULL");
  const cp_cpu *c = cp_cpu_get();
  memset(info, 0, sizeof *info);
  info->version = CONVPOOL_VERSION_STRING;
  info->isa = cp_isa_name(c->isa);
  info->usable_cpus = c->usable_cpus;
  info->l1d_bytes = c->l1d;
  info->l2_bytes = c->l2;
  info->l3_bytes = c->l3;
  info->caches_from_cpuid = c->caches_from_cpuid;
  return CONVPOOL_SUCCESS;
}
