/* CPU facts (cpu.c): ISA, caches and the CPUs this process may use. */
#ifndef CONVPOOL_CPU_H
#define CONVPOOL_CPU_H

#include <stddef.h>

typedef enum cp_isa {
  CP_ISA_SCALAR = 0,
  CP_ISA_AVX2 = 1,       /* AVX2 + FMA + F16C */
  CP_ISA_AVX512 = 2,     /* AVX-512 F, BW, VL */
  CP_ISA_AVX512_BF16 = 3 /* the above + AVX512_BF16 */
} cp_isa;

typedef struct cp_cpu {
  cp_isa isa;          /* best ISA detected, capped by CONVPOOL_ISA */
  cp_isa detected;     /* best ISA the CPU and OS support */
  int isa_cap_ignored; /* CONVPOOL_ISA was set to a value not recognised */
  size_t l1d, l2, l3;
  int caches_from_cpuid;
  /* CONVPOOL_L3_KIB: 1 it set l3 (the L3 to plan for, where cpuid
     misreports it, and for tests of the plans of a small L3), -1 it was set
     to a value not recognised (ignored), else 0 */
  int l3_from_env;
  /* the largest constant stride, in bytes, that the L1 stride prefetcher
     follows (Intel's optimization manual: 2 KiB), or 0 where a stride of
     any size is followed (AMD's manuals give no limit) */
  size_t stride_reach;
  /* output channels per register tile of the direct algorithm's fp32 AVX-512
     kernels (cl-ukernels.inc): 64 on Intel, whose two 512-bit loads a cycle
     the 32-channel tiles' broadcasts crowd (direct.c: cp_direct_kernel), 32
     elsewhere; CONVPOOL_DIRECT_MR (32 or 64) sets it: direct_mr_from_env 1,
     or -1 where the value was not recognised (ignored), else 0 */
  int direct_mr;
  int direct_mr_from_env;
  /* 1: the direct algorithm's items take several small images even where a
     block's weights go in one pass (direct.c: cp_direct_images_per_item),
     measured faster on Intel and slower on Zen 5; 0 elsewhere */
  int direct_images_one_pass;
} cp_cpu;

const cp_cpu *cp_cpu_get(void); /* computed once, thread-safe */

/*
 * Whether threads of this process on two CPUs share a cache: a cache line
 * bounced between the calling thread and one it starts, the best round trip
 * of a few batches (*round_trip_ns, where not NULL). Under
 * CP_SHARED_CACHE_NS: 1 (cores of one L3, or of one core: ~100 ns measured
 * on a Zen 5 VM whose two vCPUs share an L3); above: 0 (~500 ns where they
 * share none); -1 where it cannot tell (one usable CPU, no thread, or no
 * answer within CP_PROBE_MAX_MS). Measured once per process, at the first
 * call (about a millisecond); thread-safe. cpuid cannot tell in a VM, where
 * the vCPUs' caches are the host's placement.
 */
#define CP_SHARED_CACHE_NS 250.0
#define CP_PROBE_MAX_MS 50.0
int cp_cpu_cores_share_cache(double *round_trip_ns);
const char *cp_isa_name(cp_isa isa);

/*
 * The CPUs this process may use now, at least 1: the CPUs of its affinity mask
 * (sched_getaffinity, re-read on every call, so a later sched_setaffinity or
 * cpuset change counts) limited by its cgroup CPU quota (re-read too, see
 * cp_cgroup_quota_cpus). Thread-safe; reads a few small files.
 */
int cp_cpu_usable_now(void);

/*
 * The CPUs allowed by the CPU bandwidth quota of this process's cgroup,
 * rounded up (quota 150000 per period 100000 gives 2), or 0 when there is no
 * quota or it cannot be determined. The paths make it testable; the library
 * passes "/proc/self/cgroup", "/proc/self/mountinfo" and "/sys/fs/cgroup".
 *
 *   proc_self_cgroup  a file in the format of /proc/self/cgroup: the cgroup v2
 *                     path (line "0::PATH") and the v1 path of the hierarchy
 *                     that has the cpu controller ("N:cpu,cpuacct:PATH").
 *   mountinfo         a file in the format of /proc/self/mountinfo: where the
 *                     cgroup2 and the cgroup v1 cpu hierarchies are mounted,
 *                     and which of their directories each mount shows (its
 *                     root: a container often sees only its own cgroup).
 *                     NULL, unreadable, or naming no cgroup mount: the usual
 *                     layouts under cgroup_mount are tried instead (cgroup2 at
 *                     cgroup_mount or cgroup_mount/unified, v1 at
 *                     cgroup_mount/cpu, cpu,cpuacct or cpuacct,cpu), the mount
 *                     root being found by dropping leading components of
 *                     PATH until the directory exists.
 *   cgroup_mount      see above; may be NULL when mountinfo is given.
 *
 * The quota is read from the process's cgroup directory (cpu.max for v2;
 * cpu.cfs_quota_us and cpu.cfs_period_us for v1) and from each parent up to
 * the top of the mount, since a parent's quota limits its children too; the
 * smallest applies. When the process's directory is not under the mount (a
 * cgroup namespace or bind mount the path does not match), the mount's top
 * directory is used. "max", -1, malformed or missing files mean no quota at
 * that level. Both v2 and v1 are read (a hybrid system has both); the smaller
 * quota applies.
 */
int cp_cgroup_quota_cpus(const char *proc_self_cgroup, const char *mountinfo,
                         const char *cgroup_mount);

#endif
