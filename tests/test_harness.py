#!/usr/bin/env python3
"""Correctness and performance harness for convpool, through the Python binding.

    python3 tests/test_harness.py --quick                 # small cases, both dtypes
    python3 tests/test_harness.py                         # + the 224x224 cases
    python3 tests/test_harness.py --test_maxpool          # + pool 2 / pool 3 cases
    python3 tests/test_harness.py --perf                  # the six performance cases
    python3 tests/test_harness.py --quick --show-tiling   # print each case's plan
    options: --threads N, --dtype float32|float16|all, --impl auto|sr, -k TEXT, --seed N

Every case is checked against two float64 references (NumPy and torch, see
python/convpool/reference.py). The references must agree with each other
before our result is judged; if they do not, the case fails. Besides the
values, each case checks that:
  * the output buffer's neighbours are untouched and every element was written;
  * the one-shot call gives the same bytes as the Operator;
  * small cases give the same bytes for every thread count 1..2*usable CPUs.

The 224x224 assignment cases run with batch 1: the float64 references run at
~2.5 GFLOP/s here (reference BLAS), so batch 4 would take minutes per case.

Prints "[ OK ]" or "[FAIL]" per case and ends with one line "N passed, M failed";
the exit status is nonzero if anything failed.
"""

import argparse
import statistics
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

import convpool  # noqa: E402
from convpool import reference as ref_mod  # noqa: E402

GUARD = 64                 # elements of sentinel on each side of the output
SWEEP_MAX_FLOPS = 3e8      # thread-count sweep only for cases below this size


@dataclass(frozen=True)
class Case:
    """One correctness case.

    data: "unit" [0,1); "signed" [-1,1); "nonfinite" (signed plus NaN, +inf
    and -inf in x); "tiny" (signed, w scaled by 2^-17: fp16 subnormal weights
    and outputs); "huge" (signed x scaled by 256 and w by 1..256 per output
    channel: some fp16 outputs overflow to +-inf).
    criterion: "allclose", "bound" or "relative" (see reference.judge).
    """
    label: str
    dtype: str
    batch: int
    c_in: int
    c_out: int
    height: int
    width: int
    k: int
    pool: int = 1
    bias: bool = False
    data: str = "unit"
    criterion: str = "bound"

    @property
    def name(self):
        return (f"{self.dtype} {self.label}: b{self.batch} {self.c_in}->{self.c_out} "
                f"{self.height}x{self.width} k{self.k} pool{self.pool} "
                f"{'bias' if self.bias else 'nobias'} {self.data}")

    @property
    def data_key(self):
        """Cases with the same key share x, w and bias (and so the references)."""
        return (self.dtype, self.batch, self.c_in, self.c_out, self.height, self.width,
                self.k, self.data)

    @property
    def flops(self):
        oh, ow = self.height - self.k + 1, self.width - self.k + 1
        return 2.0 * self.batch * self.c_out * oh * ow * self.c_in * self.k * self.k


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------
def correctness_cases(dtype, quick, maxpool):
    """The assignment's set, signed data and the edge shapes for one dtype."""
    pools = (1, 2) if maxpool else (1,)
    cases = []
    add = cases.append
    # The original assignment: batch 4, K=3, [0,1) data, np.allclose defaults.
    for c_in in (128, 256):
        for c_out in (128, 256):
            for pool in pools:
                add(Case("assignment", dtype, 4, c_in, c_out, 32, 16, 3, pool,
                         criterion="allclose"))
    for pool in pools:
        add(Case("assignment", dtype, 4, 256, 256, 32, 16, 3, pool, bias=True,
                 criterion="allclose"))
    if not quick:
        for pool in pools:
            for bias in (False, True):
                add(Case("assignment 224x224 at batch 1 (batch 4: references too slow)",
                         dtype, 1, 256, 256, 224, 224, 3, pool, bias=bias,
                         criterion="allclose"))
    # Signed data: cancellation, judged against sum|x*w|.
    for pool in pools:
        add(Case("signed", dtype, 2, 64, 48, 32, 16, 3, pool, bias=True, data="signed"))
    # Edge shapes.
    add(Case("K=1", dtype, 2, 17, 20, 9, 7, 1, bias=True, data="signed"))
    add(Case("K=H (OH=1)", dtype, 2, 16, 32, 5, 12, 5, bias=True, data="signed"))
    add(Case("OW=1", dtype, 2, 8, 16, 10, 3, 3, data="signed"))
    add(Case("C_in=3 C_out=17", dtype, 1, 3, 17, 12, 12, 3, bias=True, data="signed"))
    add(Case("C_in=17 C_out=3", dtype, 1, 17, 3, 12, 12, 3, bias=True, data="signed"))
    add(Case("batch 3", dtype, 3, 32, 32, 9, 9, 3, bias=True, data="signed"))
    add(Case("K=7", dtype, 1, 16, 24, 15, 13, 7, bias=True, data="signed"))
    add(Case("wide row", dtype, 1, 16, 16, 4, 131, 3, bias=True, data="signed"))
    for pool in pools:
        add(Case("NaN/Inf input", dtype, 2, 16, 16, 12, 12, 3, pool, bias=True,
                 data="nonfinite"))
    add(Case("tiny values", dtype, 2, 3, 8, 10, 9, 1, data="tiny", criterion="relative"))
    add(Case("huge values", dtype, 1, 16, 8, 10, 9, 3, bias=True, data="huge"))
    if maxpool:
        add(Case("pool 3 not dividing OH", dtype, 2, 16, 24, 13, 14, 3, 3, bias=True,
                 data="signed"))
        add(Case("pool 3 on [0,1)", dtype, 4, 128, 128, 32, 16, 3, 3, criterion="allclose"))
        add(Case("pool = OH (PH=1)", dtype, 1, 8, 16, 7, 9, 3, 5, bias=True, data="signed"))
    return cases


PERF_SHAPES = [(32, 16, 1), (224, 224, 1), (224, 224, 2)]   # (H, W, pool)


# --------------------------------------------------------------------------
# Inputs and references, cached per data key
# --------------------------------------------------------------------------
class InputCache:
    """Holds the inputs and Reference of the last data key used."""

    def __init__(self, seed):
        self.seed = seed
        self.key = None
        self.value = None

    def get(self, case):
        if case.data_key != self.key:
            self.key, self.value = None, None   # free the old arrays first
            x, w, b = make_inputs(case, self.seed)
            self.key, self.value = case.data_key, (x, w, b, ref_mod.Reference(x, w))
        return self.value


def make_inputs(case, seed):
    """x, w and bias for a case: uniform data drawn in float32, then cast."""
    rng = np.random.default_rng([seed, zlib.crc32(repr(case.data_key).encode())])
    xs = (case.batch, case.c_in, case.height, case.width)
    ws = (case.c_out, case.c_in, case.k, case.k)
    if case.data == "unit":
        x = rng.random(xs, dtype=np.float32)
        w = rng.random(ws, dtype=np.float32)
        b = rng.random(case.c_out, dtype=np.float32)
    else:
        x = rng.random(xs, dtype=np.float32) * 2 - 1
        w = rng.random(ws, dtype=np.float32) * 2 - 1
        b = rng.random(case.c_out, dtype=np.float32) * 2 - 1
    if case.data == "tiny":
        w = w * np.float32(2.0 ** -17)
    elif case.data == "huge":
        # x up to 256; weights scaled per output channel by 1 .. 256, so some
        # channels stay finite in fp16 and others overflow to +-inf.
        x = x * np.float32(256)
        w = w * np.logspace(0, 8, case.c_out, base=2, dtype=np.float32)[:, None, None, None]
    if case.data == "nonfinite":
        # A few special values at fixed, spread-out positions.
        specials = [np.nan, np.inf, -np.inf, np.nan, np.inf]
        positions = [(0, 0, 1, 1), (0, 3, 6, 8), (1, 5, 2, 9), (1, 9, 10, 3),
                     (case.batch - 1, case.c_in - 1, case.height - 1, case.width - 1)]
        for value, pos in zip(specials, positions):
            x[pos] = value
    with np.errstate(over="ignore"):
        return tuple(np.ascontiguousarray(a, dtype=case.dtype) for a in (x, w, b))


# --------------------------------------------------------------------------
# Running ours
# --------------------------------------------------------------------------
def sentinel_buffer(dtype, n):
    """A flat buffer of n + 2*GUARD elements filled with a quiet-NaN sentinel."""
    dtype = np.dtype(dtype)
    bits = {2: (np.uint16, 0x7E5A), 4: (np.uint32, 0x7FC5A5A5)}[dtype.itemsize]
    buf = np.empty(n + 2 * GUARD, dtype=dtype)
    buf.view(bits[0])[:] = bits[1]
    return buf, bits


def run_guarded(op, x):
    """Run op into a sentinel-filled buffer; returns (out, problems)."""
    shape = op.output_shape(x.shape)
    n = int(np.prod(shape))
    buf, (utype, pattern) = sentinel_buffer(op.dtype, n)
    out = buf[GUARD:GUARD + n].reshape(shape)
    op(x, out=out)
    problems = []
    words = buf.view(utype)
    if (words[:GUARD] != pattern).any() or (words[GUARD + n:] != pattern).any():
        problems.append("wrote outside the output buffer")
    unwritten = int((words[GUARD:GUARD + n] == pattern).sum())
    if unwritten:
        problems.append(f"{unwritten} output elements never written")
    return out.copy(), problems


def same_bytes(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def first_difference(a, b):
    ua = a.view(np.uint16 if a.itemsize == 2 else np.uint32)
    ub = b.view(ua.dtype)
    idx = tuple(int(v) for v in np.argwhere(ua != ub)[0])
    return f"{int((ua != ub).sum())} elements differ, first at {idx}: {a[idx]!r} vs {b[idx]!r}"


# --------------------------------------------------------------------------
# Correctness
# --------------------------------------------------------------------------
class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def report(self, ok, name, detail):
        print(f"[ OK ] {name}: {detail}" if ok else f"[FAIL] {name}: {detail}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def run_case(case, args, inputs, tally, usable_cpus):
    x, w, b, reference = inputs.get(case)
    bias = b if case.bias else None
    t0 = time.perf_counter()
    agree, ref_msg, expected = reference.compare_references(bias, case.pool)
    scale = reference.error_scale(bias, case.pool)
    t_ref = time.perf_counter() - t0
    if not agree:
        tally.report(False, case.name, f"THE REFERENCES DISAGREE, nothing judged: {ref_msg}")
        return

    problems = []
    with convpool.Operator(w, bias, case.pool, threads=args.threads, impl=args.impl) as op:
        if args.show_tiling:
            print("       " + op.describe(x.shape).replace("\n", "\n       ").rstrip())
        t0 = time.perf_counter()
        ours, guard_problems = run_guarded(op, x)
        t_ours = time.perf_counter() - t0
        problems += guard_problems

    one_shot = convpool.conv2d_maxpool(x, w, bias, case.pool, threads=args.threads,
                                       impl=args.impl)
    if not same_bytes(one_shot, ours):
        problems.append("one-shot call differs from the Operator: "
                        + first_difference(one_shot, ours))

    swept = []
    if args.threads is None and case.flops <= SWEEP_MAX_FLOPS:
        for threads in range(1, 2 * usable_cpus + 1):
            with convpool.Operator(w, bias, case.pool, threads=threads, impl=args.impl) as op:
                result = op(x)
            swept.append(threads)
            if not same_bytes(result, ours):
                problems.append(f"threads={threads} differs from the default: "
                                + first_difference(result, ours))
                break

    verdict = ref_mod.judge(ours, expected, scale, case.dtype, case.criterion)
    ok = verdict.ok and not problems
    parts = [f"{ours.size} elements", f"max|d| = {verdict.max_delta:.3g}",
             f"tol {verdict.tolerance_tag}"]
    if case.data in ("nonfinite", "huge", "tiny"):
        with np.errstate(over="ignore"):
            rounded = expected.astype(case.dtype)
        subnormal = (rounded != 0) & (np.abs(rounded) < np.finfo(case.dtype).tiny)
        parts.append(f"{case.dtype}(ref) has {int(np.isnan(rounded).sum())} NaN, "
                     f"{int(np.isinf(rounded).sum())} inf, {int(subnormal.sum())} subnormal")
    parts.append(verdict.describe_rounding())
    if verdict.n_bad:
        parts.append(f"{verdict.n_bad} bad")
        parts.append(verdict.describe_first())
    parts += problems
    if swept and not problems:
        parts.append(f"threads 1..{swept[-1]} identical")
    parts.append(f"[ref {t_ref:.1f}s, ours {t_ours * 1e3:.1f}ms]")
    tally.report(ok, case.name, "; ".join(p for p in parts if p))


# --------------------------------------------------------------------------
# Performance
# --------------------------------------------------------------------------
def plan_summary(plan):
    return (f"threads={plan['threads']} items={plan['items']} "
            f"rows/item={plan['rows_per_item']} tile={plan['mr']}x{plan['nr']} "
            f"col_block={plan['col_block']} kernel={plan['kernel']} isa={plan['isa']}")


def phases_summary(op):
    """Phase split of the operator's last run, or '' if the library has none."""
    try:
        s = op.last_run_stats()
    except convpool.UnsupportedError:
        return ""
    busy = s["pack_seconds"] + s["compute_seconds"] + s["epilogue_seconds"]
    if busy <= 0:
        return ""
    return ("last run: " + ", ".join(
        f"{name} {100 * s[name + '_seconds'] / busy:.0f}%"
        for name in ("pack", "compute", "epilogue")) + " of thread time")


def run_perf(args, dtypes, tally):
    print("=== performance: B=1, 256->256, K=3, bias, [0,1) data; median of the runs ===")
    for dtype in dtypes:
        for height, width, pool in PERF_SHAPES:
            case = Case("perf", dtype, 1, 256, 256, height, width, 3, pool, bias=True)
            x, w, b = make_inputs(case, args.seed)
            try:
                with convpool.Operator(w, b, pool, threads=args.threads, impl=args.impl) as op:
                    if args.show_tiling:
                        print("       " + op.describe(x.shape).replace("\n", "\n       ").rstrip())
                    plan = op.plan(x.shape)
                    out = op(x)                                   # warm-up
                    runs = args.iters or (5 if height * width > 10000 else 30)
                    times = []
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        op(x, out=out)
                        times.append(time.perf_counter() - t0)
                    phases = phases_summary(op)
            except convpool.Error as exc:
                tally.report(False, case.name, f"library error: {exc}")
                continue
            t = statistics.median(times)
            nbytes = x.nbytes + w.nbytes + b.nbytes + out.nbytes
            spot = ref_mod.spot_check(x, w, b, pool, out, samples=256, seed=args.seed)
            detail = (f"median {t * 1e3:.2f} ms (min {min(times) * 1e3:.2f}, {runs} runs), "
                      f"{case.flops / t / 1e9:.1f} GFLOP/s, {nbytes / t / 1e9:.2f} GB/s; "
                      f"{plan_summary(plan)}; {phases + '; ' if phases else ''}"
                      "spot check of 256 outputs: "
                      + ("ok" if spot.ok else f"{spot.n_bad} bad, {spot.describe_first()}"))
            tally.report(spot.ok, case.name, detail)


# --------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small cases only (no 224x224)")
    p.add_argument("--test_maxpool", "--test-maxpool", action="store_true",
                   help="add the pool 2 and pool 3 cases")
    p.add_argument("--perf", action="store_true",
                   help="run the six performance cases instead of the correctness set")
    p.add_argument("--show-tiling", action="store_true", help="print each case's plan")
    p.add_argument("--threads", type=int, default=None,
                   help="worker threads (default: the library's choice, plus a sweep "
                        "1..2*CPUs on small cases)")
    p.add_argument("--dtype", choices=("float32", "float16", "all"), default="all")
    p.add_argument("--impl", choices=sorted(convpool.IMPLS), default="auto")
    p.add_argument("-k", dest="filter", default=None,
                   help="only the cases whose name contains this text")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--iters", type=int, default=0, help="timed runs per perf case")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    dtypes = ("float32", "float16") if args.dtype == "all" else (args.dtype,)
    tally = Tally()
    try:
        facts = convpool.info()
    except (OSError, convpool.Error) as exc:
        tally.report(False, "load libconvpool", str(exc))
        print(f"{tally.passed} passed, {tally.failed} failed")
        return 1
    print(f"[info] {facts['library']}: version {facts['version']}, isa {facts['isa']}, "
          f"usable CPUs {facts['usable_cpus']}, L1d/L2/L3 {facts['l1d_bytes'] >> 10}/"
          f"{facts['l2_bytes'] >> 10}/{facts['l3_bytes'] >> 10} KiB"
          f"{'' if facts['caches_from_cpuid'] else ' (fallback sizes)'}")
    print("[info] references: NumPy and torch in float64; they must agree before a "
          "result is judged")
    if not args.perf:
        print("[info] tolerances: " + "; ".join(
            f"{ref_mod.TOLERANCE_TAG[key]}: {text}" for key, text in ref_mod.TOLERANCE_TEXT.items()
            if key[1] != "relative" and key != ("float16", "allclose")))

    if args.perf:
        run_perf(args, dtypes, tally)
    else:
        inputs = InputCache(args.seed)
        for dtype in dtypes:
            cases = correctness_cases(dtype, args.quick, args.test_maxpool)
            # Group cases that share inputs (stable) so each reference is computed once.
            first_seen = {}
            for case in cases:
                first_seen.setdefault(case.data_key, len(first_seen))
            cases.sort(key=lambda c: first_seen[c.data_key])
            for case in cases:
                if args.filter and args.filter not in case.name:
                    continue
                try:
                    run_case(case, args, inputs, tally, facts["usable_cpus"])
                except (convpool.Error, ValueError, TypeError, MemoryError) as exc:
                    tally.report(False, case.name, f"{type(exc).__name__}: {exc}")
    if tally.passed + tally.failed == 0:
        tally.report(False, "case selection", f"no case matches -k {args.filter!r}")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
