#!/usr/bin/env python3
"""Three questions that split a wrong convpool result into race, logic or tiling.

    python3 scripts/diag.py [--cli build/bin/convpool] [case flags]

Case flags (as the CLI's): --dtype (float32, float16, bfloat16) --impl
(an algorithm name of the library, as the binding's convpool.impls() gives
them; passed to every CLI run) --batch --in-channels --out-channels --height
--width --filter --pool --bias/--no-bias --seed, and --threads for the Q1/Q2
runs (default: the CLI's choice). The binding finds the library as usual
($CONVPOOL_LIB, else the installed one, else build/lib).

Q1 determinism: the CLI runs the case 3 times (--warmup 0 --iters 1
    --dump-dir); out.bin must have the same md5 every time. Different md5s
    mean a race, not a logic error.
Q2 damage map: scripts/check_conv.py on the first dump; where the bad elements
    sit (batch, channel block, pooled row; outputs equal to the bias) points
    at the part of the decomposition that is wrong.
Q3 variants: thread counts 1, 2, 3 and --rows-per-item values 1..PH (at most
    8 spread over the range) must give out.bin byte-identical to Q1's.
    A difference means the result depends on how the work was cut.

Exit status 0 when all three pass, 1 otherwise (2 for bad arguments).
"""

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK_CONV = Path(__file__).resolve().with_name("check_conv.py")
MAX_ROWS_VARIANTS = 8


def library_impls():
    """The library's algorithm names, from the binding; exits 2 if it cannot load."""
    sys.path.insert(0, str(REPO / "python"))
    try:
        import convpool
        return list(convpool.impls())
    except (ImportError, OSError) as exc:
        print(f"diag: error: the library's algorithm names are needed: {exc}", file=sys.stderr)
        sys.exit(2)


def md5(path):
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def rows_per_item_values(ph):
    """1..PH, or at most MAX_ROWS_VARIANTS distinct values spread over it (1 and PH included)."""
    if ph <= MAX_ROWS_VARIANTS:
        return list(range(1, ph + 1))
    step = (ph - 1) / (MAX_ROWS_VARIANTS - 1)
    return sorted({1 + round(i * step) for i in range(MAX_ROWS_VARIANTS)})


class Diag:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = Path(workdir)
        self.env = dict(os.environ)
        # Let the CLI find the library the rest of the tests use.
        lib = os.environ.get("CONVPOOL_LIB")
        lib_dirs = [str(Path(lib).resolve().parent)] if lib else []
        lib_dirs.append(str(Path(args.cli).resolve().parent.parent / "lib"))
        if self.env.get("LD_LIBRARY_PATH"):
            lib_dirs.append(self.env["LD_LIBRARY_PATH"])
        self.env["LD_LIBRARY_PATH"] = os.pathsep.join(lib_dirs)

    def case_flags(self):
        a = self.args
        return ["--dtype", a.dtype, "--impl", a.impl, "--batch", str(a.batch),
                "--in-channels", str(a.in_channels),
                "--out-channels", str(a.out_channels), "--height", str(a.height),
                "--width", str(a.width), "--filter", str(a.filter), "--pool", str(a.pool),
                "--bias" if a.bias else "--no-bias", "--seed", str(a.seed)]

    def run_cli(self, name, extra):
        """Run the CLI into workdir/name; returns (out.bin md5 or None, note)."""
        dump = self.workdir / name
        shutil.rmtree(dump, ignore_errors=True)
        dump.mkdir(parents=True)
        cmd = [self.args.cli] + self.case_flags() + ["--warmup", "0", "--iters", "1",
                                                      "--dump-dir", str(dump)] + extra
        try:
            proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                                  timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {self.args.timeout} s: {' '.join(cmd)}"
        except OSError as exc:
            return None, f"cannot run {cmd[0]}: {exc}"
        if proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name
            return None, f"CRASHED with {sig}: {' '.join(cmd)}"
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
            return None, f"exit status {proc.returncode}: {' '.join(last)}"
        if not (dump / "out.bin").exists():
            return None, "the CLI wrote no out.bin"
        return md5(dump / "out.bin"), ""

    # -- Q1 ----------------------------------------------------------------
    def q1(self):
        print("=== Q1: determinism: the same run 3 times, is out.bin identical? ===")
        extra = ["--threads", str(self.args.threads)] if self.args.threads else []
        sums, inputs = [], []
        for i in range(3):
            digest, note = self.run_cli(f"run{i}", extra)
            if digest is None:
                print(f"  run{i}: {note}")
                return False, None
            sums.append(digest)
            dump = self.workdir / f"run{i}"
            inputs.append(md5(dump / "x.bin") + md5(dump / "w.bin"))
            print(f"  run{i}: md5(out.bin) = {digest}")
        if len(set(inputs)) != 1:
            print("  the runs got different inputs (x.bin/w.bin differ): the seed does not "
                  "fix the data, so the outputs cannot be compared")
            return False, sums[0]
        if len(set(sums)) == 1:
            print("  verdict: deterministic (a wrong result would be a logic or layout "
                  "error, not a race)")
            return True, sums[0]
        print("  verdict: NOT deterministic: the output is not a function of the input; "
              "look for a race (a buffer written while another thread still reads it)")
        return False, sums[0]

    # -- Q2 ----------------------------------------------------------------
    def q2(self):
        print("=== Q2: damage map of run0 (scripts/check_conv.py) ===")
        dump = self.workdir / "run0"
        if not (dump / "out.bin").exists():
            print("  not answered: Q1 produced no dump to check")
            return None
        proc = subprocess.run([sys.executable, str(CHECK_CONV), "--dump-dir", str(dump)],
                              capture_output=True, text=True)
        for line in (proc.stdout + proc.stderr).rstrip().splitlines():
            print("  " + line)
        return proc.returncode == 0

    # -- Q3 ----------------------------------------------------------------
    def q3(self, reference_md5, deterministic):
        a = self.args
        ph = (a.height - a.filter + 1) // a.pool
        print("=== Q3: variants: thread counts and rows per work item, byte-identical? ===")
        if reference_md5 is None:
            print("  not answered: Q1 produced no reference output")
            return None
        variants = [(f"--threads {t}", ["--threads", str(t)]) for t in (1, 2, 3)]
        variants += [(f"--rows-per-item {r}", ["--rows-per-item", str(r)])
                     for r in rows_per_item_values(ph)]
        ok = True
        for label, extra in variants:
            name = "variant_" + label.strip("-").replace(" ", "_").replace("-", "_")
            digest, note = self.run_cli(name, extra)
            if digest is None:
                print(f"  [FAIL] {label}: {note}")
                ok = False
            elif digest != reference_md5:
                print(f"  [FAIL] {label}: md5 {digest} differs from run0 {reference_md5}")
                ok = False
            else:
                print(f"  [ OK ] {label}: identical")
            if not self.args.keep:
                shutil.rmtree(self.workdir / name, ignore_errors=True)
        if not ok and deterministic:
            print("  verdict: the result depends on how the work is cut: look at the work item "
                  "boundaries and edge tiles of the variants that differ")
        elif not ok:
            print("  verdict: not conclusive: Q1 already differs from run to run, so these "
                  "differences may be the same race")
        return ok


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", default=str(REPO / "build" / "bin" / "convpool"),
                   help="path of the convpool CLI (default: build/bin/convpool)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--impl", default="auto",
                   help="algorithm, passed to the CLI: one of the library's names "
                        "(default auto: the library's choice)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--in-channels", type=int, default=128)
    p.add_argument("--out-channels", type=int, default=128)
    p.add_argument("--height", type=int, default=32)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--filter", type=int, default=3)
    p.add_argument("--pool", type=int, default=1)
    p.add_argument("--bias", dest="bias", action="store_true", default=True,
                   help="bias on (default)")
    p.add_argument("--no-bias", dest="bias", action="store_false")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0,
                   help="threads for the Q1/Q2 runs (default: the CLI's choice)")
    p.add_argument("--workdir", default=None,
                   help="where the dumps go (default: a temporary directory, removed at the "
                        "end); the Q1 dumps in a given workdir are kept")
    p.add_argument("--keep", action="store_true", help="keep every dump, variants included")
    p.add_argument("--timeout", type=float, default=600, help="seconds per CLI run")
    args = p.parse_args(argv)
    impls = library_impls()
    if args.impl not in impls:
        p.error(f"--impl {args.impl!r} is not one of the library's algorithms: "
                f"{', '.join(impls)}")
    oh, ow = args.height - args.filter + 1, args.width - args.filter + 1
    if min(args.batch, args.in_channels, args.out_channels, args.filter, args.pool) < 1 \
            or oh < args.pool or ow < args.pool:
        p.error("the case is not a valid layer (sizes must be >= 1 and the pool must fit "
                f"the conv output {oh}x{ow})")
    if not Path(args.cli).is_file():
        p.error(f"no CLI at {args.cli} (build it, or pass --cli)")
    return args


def main(argv=None):
    args = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="convpool_diag_")
    print(f"case: {args.dtype} impl {args.impl} b{args.batch} "
          f"{args.in_channels}->{args.out_channels} "
          f"{args.height}x{args.width} k{args.filter} pool{args.pool} "
          f"{'bias' if args.bias else 'nobias'} seed {args.seed}; CLI {args.cli}; "
          f"dumps in {workdir}")
    try:
        diag = Diag(args, workdir)
        ok1, reference_md5 = diag.q1()
        ok2 = diag.q2()
        ok3 = diag.q3(reference_md5, ok1)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    def word(ok):
        return {True: "PASS", False: "FAIL", None: "NOT ANSWERED (no output from Q1)"}[ok]

    print("=== summary ===")
    print(f"  Q1 determinism: {word(ok1)}")
    print(f"  Q2 damage map:  {word(ok2)}")
    print(f"  Q3 variants:    {word(ok3)}")
    all_ok = ok1 is True and ok2 is True and ok3 is True
    print("diag: all three questions pass" if all_ok else "diag: FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
