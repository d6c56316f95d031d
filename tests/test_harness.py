#!/usr/bin/env python3
"""Correctness and performance harness for convpool, through the Python binding.

    python3 tests/test_harness.py --quick                 # small cases, every dtype
    python3 tests/test_harness.py                         # + the 224x224 cases
    python3 tests/test_harness.py --test_maxpool          # + pool 2 / pool 3 cases
    python3 tests/test_harness.py --perf                  # the performance cases
    python3 tests/test_harness.py --quick --show-tiling   # print each case's plan
    options: --threads N, --dtype float32|float16|bfloat16|all (one or more),
             --impl auto|ALGORITHM|all, -k TEXT, --seed N

Every case runs once per algorithm (--impl; default "all": every algorithm the
library offers besides auto, convpool.impls(), e.g. "sr", "im2col" and
"winograd"), and its name says which ("float32 im2col assignment: ...").

Besides the original layer (no padding, pool stride = window, floor sizing)
the set has layer cases (about a dozen per dtype, small shapes): conv padding
equal and unequal, each activation (relu, relu6, a clamp), pool stride below
and above the window, pool padding, ceil sizing with a last window dropped,
ONNX's pool padding up to P - 1, a window larger than the conv output with
ceil sizing (torch's one partial window), NaN/Inf through all of it; conv
stride, dilation and groups (the ResNet stem, a 1x1 of stride 2, depthwise of
stride 1 and 2) and a residual input (NaN/Inf in it too); their names carry
the parameters ("pad1 relu stride2 ppad1 ceil", "cstride2 g4 residual"). An
algorithm that does not compute a case must decline it, naming the value.
Every case is checked against two float64 references (NumPy and torch, see
tests/support/reference.py) computed on the exact input values (for
bfloat16: the decoded bit patterns). The references must agree with each
other before our result is judged; if they do not, the case fails. Besides
the values, each case checks that:
  * the output buffer's neighbours are untouched and every element was written;
  * the one-shot call gives the same bytes as the Operator;
  * small cases give the same bytes for every thread count 1..2*usable CPUs;
  * bfloat16 only: the result is close to torch's own bfloat16 layer (a loose
    sanity check, see reference.compare_loose).
bfloat16 data is drawn like the others (uniform, in float32) and rounded to
bfloat16; it never holds bfloat16 subnormals (the AVX512_BF16 instruction
flushes those to zero, the fallback does not), and a case whose data would
fails rather than running on them.

The 224x224 assignment cases run with batch 1: the float64 references run at
~2.5 GFLOP/s here (reference BLAS), so batch 4 would take minutes per case.

Prints "[ OK ]" or "[FAIL]" per case and ends with one line "N passed, M failed";
the exit status is nonzero if anything failed.
"""

import argparse
import dataclasses
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
sys.path.insert(0, str(REPO / "tests" / "support"))
import reference as ref_mod  # noqa: E402  (the test oracle, tests/support/reference.py)

GUARD = 64                 # elements of sentinel on each side of the output
SWEEP_MAX_FLOPS = 3e8      # thread-count sweep only for cases below this size

ALL_DTYPES = ("float32", "float16", "bfloat16")


def library_impls():
    """What --impl all runs: the library's algorithms but "auto" (which picks one of them)."""
    return tuple(name for name in convpool.impls() if name != "auto")


SENTINELS = {"float32": (np.uint32, 0x7FC5A5A5),   # quiet NaNs the library never produces
             "float16": (np.uint16, 0x7E5A),
             "bfloat16": (np.uint16, 0x7FE5)}


@dataclass(frozen=True)
class Case:
    """One correctness case.

    data: "unit" [0,1); "signed" [-1,1); "nonfinite" (signed plus NaN, +inf
    and -inf in x); "tiny" (signed, w scaled by 2^-17: fp16 subnormal weights
    and outputs; normal numbers in bfloat16); "huge" (signed x scaled by 256
    and w by 1..256 per output channel: some fp16 outputs overflow to +-inf;
    bfloat16 has float32's range and stays finite); "ties" and
    "overflow ties" (16-bit dtypes, K=1, C_in=1: every output w*x + b is
    exact in float32 and lies exactly halfway between two neighbours of the
    dtype, so only round-half-to-even gives the expected result; see
    tie_inputs).
    criterion: "allclose", "bound" or "relative" (see reference.judge).
    impl: the algorithm (one of convpool.impls()); not part of the data key.
    padding, activation, pool_stride, pool_padding, ceil_mode, stride,
    dilation: the layer keywords of convpool.conv2d_maxpool (their defaults:
    the original layer); not part of the data key either (the references are
    cached per spec). groups: the conv groups (w is [c_out, c_in / groups, k,
    k]: part of the data key). residual: the case adds a residual (drawn per
    case with the conv output's shape; with "nonfinite" data it holds NaN and
    infinities too).
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
    impl: str = "sr"
    padding: object = 0
    activation: object = None
    pool_stride: object = None
    pool_padding: object = 0
    ceil_mode: bool = False
    stride: int = 1
    dilation: int = 1
    groups: int = 1
    residual: bool = False

    @property
    def spec(self):
        """The layer parameters as a convpool.LayerSpec."""
        return convpool.LayerSpec.make(pool=self.pool, padding=self.padding,
                                       activation=self.activation,
                                       pool_stride=self.pool_stride,
                                       pool_padding=self.pool_padding, ceil_mode=self.ceil_mode,
                                       stride=self.stride, dilation=self.dilation,
                                       groups=self.groups)

    @property
    def name(self):
        extra = self.spec.describe()
        return (f"{self.dtype} {self.impl} {self.label}: b{self.batch} {self.c_in}->{self.c_out} "
                f"{self.height}x{self.width} k{self.k} pool{self.pool} "
                f"{extra + ' ' if extra else ''}{'residual ' if self.residual else ''}"
                f"{'bias' if self.bias else 'nobias'} {self.data}")

    @property
    def data_key(self):
        """Cases with the same key share x, w and bias (and so the references)."""
        return (self.dtype, self.batch, self.c_in, self.c_out, self.height, self.width,
                self.k, self.data, self.groups)

    @property
    def flops(self):
        oh, ow, _, _ = self.spec.output_size(self.height, self.width, self.k)
        return (2.0 * self.batch * self.c_out * oh * ow * (self.c_in // self.groups)
                * self.k * self.k)

    def declined_for(self):
        """The value the case's algorithm must decline, naming it, or None: Winograd
        (either tile size) computes k = 3 with conv stride, dilation and groups 1; shift-reduce declines
        dilation; depthwise computes groups = c_in only."""
        dilation = self.dilation if self.k > 1 else 1
        if self.impl == "depthwise" and self.groups != self.c_in:
            return f"groups = {self.groups}, C_in = {self.c_in}"
        if self.impl in ("winograd", "winograd2x3"):
            for value, name in ((self.k, "k"), (self.stride, "stride"), (dilation, "dilation"),
                                (self.groups, "groups")):
                if value != (3 if name == "k" else 1):
                    return f"{name} = {value}"
        if self.impl == "sr" and dilation != 1:
            return f"dilation = {dilation}"
        return None


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
    add(Case("C_in=1", dtype, 2, 1, 16, 10, 11, 3, bias=True, data="signed"))
    add(Case("batch 3", dtype, 3, 32, 32, 9, 9, 3, bias=True, data="signed"))
    add(Case("K=7", dtype, 1, 16, 24, 15, 13, 7, bias=True, data="signed"))
    add(Case("wide row", dtype, 1, 16, 16, 4, 131, 3, bias=True, data="signed"))
    for pool in pools:
        add(Case("NaN/Inf input", dtype, 2, 16, 16, 12, 12, 3, pool, bias=True,
                 data="nonfinite"))
    add(Case("tiny values", dtype, 2, 3, 8, 10, 9, 1, data="tiny", criterion="relative"))
    add(Case("huge values", dtype, 1, 16, 8, 10, 9, 3, bias=True, data="huge"))
    if dtype != "float32":          # float32 stores the accumulator as it is: no ties
        add(Case("RNE ties", dtype, 2, 1, 8, 9, 10, 1, bias=True, data="ties"))
        add(Case("RNE ties at overflow", dtype, 1, 1, 4, 3, 5, 1, bias=True,
                 data="overflow ties"))
    if maxpool:
        add(Case("pool 3 not dividing OH", dtype, 2, 16, 24, 13, 14, 3, 3, bias=True,
                 data="signed"))
        add(Case("pool 3 on [0,1)", dtype, 4, 128, 128, 32, 16, 3, 3, criterion="allclose"))
        add(Case("pool = OH (PH=1)", dtype, 1, 8, 16, 7, 9, 3, 5, bias=True, data="signed"))
    return cases + layer_cases(dtype)


def layer_cases(dtype):
    """Padding, activations, pool stride, pool padding and ceil sizing: small shapes."""
    def layer(label, batch, c_in, c_out, height, width, k, pool=1, data="signed", **kwargs):
        return Case(label, dtype, batch, c_in, c_out, height, width, k, pool, bias=True,
                    data=data, **kwargs)
    return [
        layer("VGG block", 2, 16, 24, 14, 13, 3, 2, padding=1, activation="relu"),
        layer("AlexNet block", 1, 12, 16, 15, 15, 5, 3, padding=2, activation="relu",
              pool_stride=2),
        layer("unequal conv pads", 2, 8, 16, 9, 10, 3, padding=(0, 1, 2, 1)),
        layer("relu6", 2, 16, 16, 10, 11, 3, 2, padding=(1, 0), activation="relu6"),
        layer("clamp, overlapping windows", 1, 16, 8, 9, 9, 3, 2, activation=(-0.5, 0.75),
              pool_stride=1),
        layer("pool stride > window", 1, 8, 16, 13, 14, 3, 2, pool_stride=3),
        layer("pool 1 stride 2 (subsampling)", 1, 8, 8, 9, 10, 3, 1, pool_stride=2),
        layer("pool padding, ceil", 1, 12, 16, 12, 11, 3, 3, padding=1, activation="relu",
              pool_stride=2, pool_padding=1, ceil_mode=True),
        # conv output 5x7, window 2, pad 1: ceil gives 4 rows and 5 columns whose last
        # windows start in the bottom/right padding; both are dropped (3x4).
        layer("ceil, last window dropped", 1, 8, 8, 7, 9, 3, 2, pool_padding=1,
              ceil_mode=True),
        # conv output 4x4, pads top 0, left 1, bottom 1, right 0: the last row window
        # starts in the bottom padding (dropped), the last column one does not.
        layer("unequal pool pads, ceil", 2, 8, 8, 6, 6, 3, 2, pool_padding=(0, 1, 1, 0),
              ceil_mode=True),
        layer("filter larger than the input", 1, 8, 8, 2, 3, 3, 2, padding=1,
              activation="relu"),
        # ONNX's pads up to P - 1 (torch takes P // 2): window 3 with pads 2 on a 5x6
        # conv output gives 7x8 windows, the first and last holding one conv row.
        layer("pool pads P - 1 (ONNX)", 1, 8, 8, 7, 8, 3, 3, pool_stride=1, pool_padding=2),
        layer("pool pads P - 1, unequal, ceil", 2, 8, 8, 9, 10, 3, 4, pool_stride=3,
              pool_padding=(3, 0, 1, 3), ceil_mode=True),
        # torch's ceil sizing of a window larger than the conv output: MaxPool2d(3, 2,
        # ceil_mode=True) on a 2x2 conv output gives 1x1 from a partial window.
        layer("window larger than the conv output, ceil", 2, 8, 8, 4, 4, 3, 3, pool_stride=2,
              ceil_mode=True),
        layer("window wider than the padded conv output, ceil", 1, 8, 8, 8, 5, 3, 5,
              pool_stride=3, pool_padding=(1, 0, 0, 1), ceil_mode=True),
        layer("NaN/Inf through pads, relu, pool pads", 2, 16, 16, 12, 12, 3, 3,
              data="nonfinite", padding=1, activation="relu", pool_stride=2, pool_padding=1,
              ceil_mode=True),
        # conv stride, dilation, groups and a residual
        layer("ResNet stem", 1, 3, 16, 30, 29, 7, 3, stride=2, padding=3, activation="relu",
              pool_stride=2, pool_padding=1),
        layer("stride 2, residual", 2, 16, 24, 14, 13, 3, stride=2, padding=1,
              activation="relu", residual=True),
        layer("1x1 stride 2", 1, 16, 32, 14, 15, 1, stride=2),
        layer("dilation 2", 1, 8, 16, 15, 14, 3, 2, dilation=2, padding=2, activation="relu"),
        layer("4 groups", 2, 16, 16, 12, 11, 3, 2, groups=4, padding=1),
        layer("depthwise stride 2", 1, 24, 24, 17, 16, 3, groups=24, stride=2, padding=1,
              activation="relu6"),
        layer("depthwise x2, residual", 2, 8, 16, 12, 12, 3, groups=8, padding=1, residual=True),
        layer("depthwise 5x5 dilation 2, odd width", 2, 17, 17, 19, 23, 5, 2, groups=17,
              dilation=2, padding=(4, 3, 2, 5), activation="relu"),
        layer("depthwise x2, stride 3, pool 3/2", 1, 5, 10, 25, 31, 3, 3, groups=5, stride=3,
              padding=(1, 0, 2, 1), pool_stride=2, ceil_mode=True),
        layer("depthwise NaN/Inf, stride 2, residual", 2, 16, 16, 15, 15, 3, data="nonfinite",
              groups=16, stride=2, padding=1, activation="relu6", residual=True),
        layer("depthwise 7x7, 1 channel", 3, 1, 1, 30, 29, 7, 2, groups=1, padding=3),
        layer("NaN/Inf, stride 2, residual", 2, 16, 16, 12, 12, 3, 2, data="nonfinite",
              stride=2, padding=1, activation="relu", residual=True),
    ]


# (H, W, pool) of the performance cases per dtype.
PERF_SHAPES = {"float32": [(32, 16, 1), (224, 224, 1), (224, 224, 2)],
               "float16": [(32, 16, 1), (224, 224, 1), (224, 224, 2)],
               "bfloat16": [(224, 224, 1), (224, 224, 2)]}


def with_impls(cases, impls):
    """Each case once per algorithm, the algorithms of one case next to each other."""
    return [dataclasses.replace(case, impl=impl) for case in cases for impl in impls]


# --------------------------------------------------------------------------
# Inputs and references, cached per data key
# --------------------------------------------------------------------------
@dataclass
class Inputs:
    """A case's inputs in its dtype (bfloat16: uint16 bit patterns), the bias as
    float64 values, and the Reference built on the exact input values."""
    x: np.ndarray
    w: np.ndarray
    b: np.ndarray
    b64: np.ndarray
    reference: ref_mod.Reference


@dataclass
class ReferenceCheck:
    """The references of one (inputs, bias, pool, residual), shared by the algorithms."""
    agree: bool
    message: str
    expected: np.ndarray          # float64 NumPy result
    scale: np.ndarray             # error scale S per output
    seconds: float
    residual: object = None       # the case's residual in its dtype, or None
    torch_bf16: object = None     # bfloat16: torch's bfloat16 result (float64), or the
    #                               text of the exception that prevented it
    uses: int = 0                 # cases judged against it so far


class InputCache:
    """Holds the inputs, Reference and reference checks of the last data key used."""

    def __init__(self, seed):
        self.seed = seed
        self.key = None
        self.value = None
        self.checks = {}

    def get(self, case):
        if case.data_key != self.key:
            self.key, self.value, self.checks = None, None, {}   # free the old arrays first
            x, w, b = make_inputs(case, self.seed)
            reference = ref_mod.Reference(ref_mod.to_float64(x, case.dtype),
                                          ref_mod.to_float64(w, case.dtype))
            self.key = case.data_key
            self.value = Inputs(x, w, b, ref_mod.to_float64(b, case.dtype), reference)
        return self.value

    def check(self, case):
        """The ReferenceCheck of a case (computed once per bias, layer spec and residual)."""
        inputs = self.get(case)
        spec = case.spec
        key = (case.bias, spec, case.residual)
        if key not in self.checks:
            bias64 = inputs.b64 if case.bias else None
            residual = make_residual(case, self.seed) if case.residual else None
            r64 = ref_mod.to_float64(residual, case.dtype)
            t0 = time.perf_counter()
            agree, message, expected = inputs.reference.compare_references(bias64, spec, r64)
            scale = inputs.reference.error_scale(bias64, spec, r64)
            torch_bf16 = None
            if case.dtype == "bfloat16":
                try:
                    torch_bf16 = inputs.reference.torch_bfloat16_result(bias64, spec, r64)
                except (RuntimeError, ValueError) as exc:   # e.g. no bf16 conv in this torch
                    torch_bf16 = f"{type(exc).__name__}: {exc}"
            self.checks[key] = ReferenceCheck(agree, message, expected, scale,
                                              time.perf_counter() - t0, residual, torch_bf16)
        self.checks[key].uses += 1
        return self.checks[key]


def bf16_subnormal_count(bits):
    """Number of bfloat16 subnormals among bit patterns (nonzero, exponent field 0)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return int((((bits & 0x7F80) == 0) & ((bits & 0x007F) != 0)).sum())


SIGNIFICANT_BITS = {"float16": 11, "bfloat16": 8}   # including the implicit bit
MAX_EXPONENT = {"float16": 15, "bfloat16": 127}      # of the largest finite value


def tie_inputs(case, rng):
    """float32 x, w and bias whose outputs w*x + b all lie exactly between two dtype values.

    With p significant bits, x = (2**(p-1) + k) * 2**(1-p) for random k in
    [0, 2**(p-1)) covers the dtype's grid in [1, 2); channel c has weight
    w_c in (1, -1, 2, -2, ...) and bias w_c * 2**-p, half the spacing of the
    dtype at w_c * x. "overflow ties": x is the largest finite value M,
    w = (1, 1, -1, -1) and b = (h, h/2, -h, -h/2) with h = half the spacing
    at M: the ties M + h go to +-inf (M's last bit is odd), M + h/2 back to
    +-M. All these values and sums are exact in float32.
    """
    p = SIGNIFICANT_BITS[case.dtype]
    xs = (case.batch, case.c_in, case.height, case.width)
    assert case.k == 1 and case.c_in == 1, "tie data needs K=1 and C_in=1"
    if case.data == "ties":
        scale = np.resize(np.array([1.0, -1.0, 2.0, -2.0]), case.c_out)
        x = (2.0 ** (p - 1) + rng.integers(0, 2 ** (p - 1), xs)) * 2.0 ** (1 - p)
        b = scale * 2.0 ** -p
    else:
        top = (2.0 - 2.0 ** (1 - p)) * 2.0 ** MAX_EXPONENT[case.dtype]
        half = 2.0 ** (MAX_EXPONENT[case.dtype] - p)
        scale = np.resize(np.array([1.0, 1.0, -1.0, -1.0]), case.c_out)
        x = np.full(xs, top)
        b = np.resize(np.array([half, half / 2, -half, -half / 2]), case.c_out)
    w = scale.reshape(case.c_out, 1, 1, 1)
    return tuple(np.ascontiguousarray(a, dtype=np.float32) for a in (x, w, b))


def make_inputs(case, seed):
    """x, w and bias for a case: uniform data drawn in float32, then rounded to the dtype.

    bfloat16 inputs are bit patterns (round to nearest even); a bfloat16
    subnormal in them raises ValueError (the case fails and says so).
    """
    rng = np.random.default_rng([seed, zlib.crc32(repr(case.data_key).encode())])
    if case.data in ("ties", "overflow ties"):
        return check_bf16_normal(case, tuple(ref_mod.from_float32(a, case.dtype)
                                             for a in tie_inputs(case, rng)))
    xs = (case.batch, case.c_in, case.height, case.width)
    ws = (case.c_out, case.c_in // case.groups, case.k, case.k)
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
    return check_bf16_normal(case, tuple(ref_mod.from_float32(a, case.dtype)
                                         for a in (x, w, b)))


def make_residual(case, seed):
    """A case's residual [batch, c_out, OH, OW] in its dtype: signed uniform, drawn like the
    inputs; "nonfinite" data puts NaN, +inf and -inf in it too."""
    oh, ow, _, _ = case.spec.output_size(case.height, case.width, case.k)
    key = repr((case.data_key, case.spec, "residual")).encode()
    rng = np.random.default_rng([seed, zlib.crc32(key)])
    r = rng.random((case.batch, case.c_out, oh, ow), dtype=np.float32) * 2 - 1
    if case.data == "nonfinite":
        flat = r.reshape(-1)
        for i, value in enumerate((np.nan, np.inf, -np.inf, np.inf)):
            flat[(i * 7919 + 13) % flat.size] = value
    return check_bf16_normal(case, (ref_mod.from_float32(r, case.dtype),))[0]


def check_bf16_normal(case, arrays):
    """arrays (x, w, bias) unchanged; ValueError if bfloat16 data holds a subnormal."""
    if case.dtype == "bfloat16":
        for name, bits in zip(("x", "w", "bias") if len(arrays) == 3 else ("residual",), arrays):
            count = bf16_subnormal_count(bits)
            if count:
                raise ValueError(f"the generated {name} has {count} bfloat16 subnormals; "
                                 "the data must avoid them")
    return arrays


# --------------------------------------------------------------------------
# Running ours
# --------------------------------------------------------------------------
def sentinel_buffer(dtype, n):
    """A flat buffer of n + 2*GUARD elements of dtype filled with a quiet-NaN sentinel."""
    bits = SENTINELS[dtype]
    buf = np.empty(n + 2 * GUARD, dtype=ref_mod.storage_dtype(dtype))
    buf.view(bits[0])[:] = bits[1]
    return buf, bits


def run_guarded(op, x, residual=None):
    """Run op into a sentinel-filled buffer; returns (out, problems)."""
    shape = op.output_shape(x.shape)
    n = int(np.prod(shape))
    buf, (utype, pattern) = sentinel_buffer(op.dtype_name, n)
    out = buf[GUARD:GUARD + n].reshape(shape)
    op(x, out=out, residual=residual)
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


def first_difference(a, b, dtype):
    """Where two results of dtype differ bitwise, with the first pair as values."""
    ua = a.view(np.uint16 if a.itemsize == 2 else np.uint32)
    ub = b.view(ua.dtype)
    idx = tuple(int(v) for v in np.argwhere(ua != ub)[0])
    va, vb = (float(ref_mod.to_float64(v, dtype)[idx]) for v in (a, b))
    return (f"{int((ua != ub).sum())} elements differ, first at {idx}: {va!r} vs {vb!r} "
            f"(bits {int(ua[idx]):#x} vs {int(ub[idx]):#x})")


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


def plan_algorithm(op, shape):
    """(the plan's "algorithm" line without its label, or None, the whole plan text)."""
    text = op.describe(shape)
    for line in text.splitlines():
        if line.startswith("algorithm"):
            return line[len("algorithm"):].strip(), text
    return None, text


def algorithm_check(impl, algorithm):
    """Does the plan's algorithm line fit the impl asked for? Returns (ok, text).

    ok is False only for a contradiction; a plan text without an algorithm
    line (or impl "auto", which may choose any) gives ok True and says that
    nothing was verified.
    """
    if algorithm is None:
        return True, "algorithm not verified: the plan text names none"
    if impl == "auto":
        return True, f"auto chose {algorithm}"
    # the line names the algorithm and its short name: "shift-reduce (sr), kernel ..."
    if f"({impl})," not in algorithm:
        return False, f"asked for impl {impl}, the plan says '{algorithm}'"
    return True, algorithm


def run_case(case, args, inputs, tally, usable_cpus):
    """Run one case (one algorithm), judge it and report one line."""
    data = inputs.get(case)
    check = inputs.check(case)
    x, w = data.x, data.w
    bias = data.b if case.bias else None
    if not check.agree:
        tally.report(False, case.name,
                     f"THE REFERENCES DISAGREE, nothing judged: {check.message}")
        return

    problems = []
    layer = case.spec.kwargs()
    residual = check.residual
    declined = case.declined_for()
    if declined is not None:   # Winograd: 3x3, stride, dilation, groups 1; sr: no dilation
        try:
            with convpool.Operator(w, bias, dtype=case.dtype, impl=case.impl, **layer):
                pass
        except convpool.UnsupportedError as exc:
            tally.report(declined in str(exc), case.name,
                         f"declined as documented ({declined}): {exc}")
            return
        tally.report(False, case.name, f"{case.impl} accepted a layer with {declined}")
        return
    layer["residual"] = case.residual
    with convpool.Operator(w, bias, dtype=case.dtype, threads=args.threads,
                           impl=case.impl, **layer) as op:
        algorithm, plan_text = plan_algorithm(op, x.shape)
        if args.show_tiling:
            print("       " + plan_text.replace("\n", "\n       ").rstrip())
        algorithm_ok, algorithm_text = algorithm_check(case.impl, algorithm)
        if not algorithm_ok:
            problems.append(algorithm_text)
        t0 = time.perf_counter()
        ours, guard_problems = run_guarded(op, x, residual)
        t_ours = time.perf_counter() - t0
        problems += guard_problems

    layer["residual"] = residual
    one_shot = convpool.conv2d_maxpool(x, w, bias, threads=args.threads,
                                       impl=case.impl, dtype=case.dtype, **layer)
    layer["residual"] = case.residual
    if not same_bytes(one_shot, ours):
        problems.append("one-shot call differs from the Operator: "
                        + first_difference(one_shot, ours, case.dtype))

    swept = []
    if args.threads is None and case.flops <= SWEEP_MAX_FLOPS:
        for threads in range(1, 2 * usable_cpus + 1):
            with convpool.Operator(w, bias, dtype=case.dtype, threads=threads,
                                   impl=case.impl, **layer) as op:
                result = op(x, residual=residual)
            swept.append(threads)
            if not same_bytes(result, ours):
                problems.append(f"threads={threads} differs from the default: "
                                + first_difference(result, ours, case.dtype))
                break

    verdict = ref_mod.judge(ours, check.expected, check.scale, case.dtype, case.criterion)
    parts = [f"{ours.size} elements", f"max|d| = {verdict.max_delta:.3g}",
             f"tol {verdict.tolerance_tag}", algorithm_text if algorithm_ok else ""]
    if case.data in ("ties", "overflow ties"):
        # Every output is exact in float32 and (but for the h/2 channels of
        # "overflow ties") a tie: it must be the exact value rounded half to
        # even, bit for bit.
        ours64 = ref_mod.to_float64(ours, case.dtype)
        rne = ref_mod.round_to(check.expected, case.dtype)
        wrong = ~((ours64 == rne) | (np.isnan(ours64) & np.isnan(rne)))
        if wrong.any():
            idx = tuple(int(v) for v in np.argwhere(wrong)[0])
            problems.append(f"{int(wrong.sum())} of {wrong.size} outputs are not the exact "
                            f"value rounded half to even; first at {idx}: exact "
                            f"{check.expected[idx]!r}, ours {ours64[idx]!r}, RNE {rne[idx]!r}")
        else:
            up = int((np.abs(rne) > np.abs(check.expected)).sum())
            parts.append(f"all {wrong.size} outputs rounded half to even ({up} away from "
                         f"zero, {wrong.size - up} toward)")
    if case.data in ("nonfinite", "huge", "tiny"):
        rounded = ref_mod.round_to(check.expected, case.dtype)
        subnormal = (rounded != 0) & (np.abs(rounded) < ref_mod.smallest_normal(case.dtype))
        parts.append(f"{case.dtype}(ref) has {int(np.isnan(rounded).sum())} NaN, "
                     f"{int(np.isinf(rounded).sum())} inf, {int(subnormal.sum())} subnormal")
    parts.append(verdict.describe_rounding())
    if verdict.n_bad:
        parts.append(f"{verdict.n_bad} bad")
        parts.append(verdict.describe_first())
    if case.dtype == "bfloat16":
        if isinstance(check.torch_bf16, str):
            # torch could not run its bfloat16 layer: the sanity check is skipped,
            # and says why; the float64 references still judge the result.
            parts.append(f"torch-bf16 sanity check skipped: {check.torch_bf16}")
        else:
            sane, text = ref_mod.compare_loose(ref_mod.to_float64(ours, case.dtype),
                                               check.torch_bf16, check.scale)
            if sane:
                parts.append(f"torch-bf16 {text}")
            else:
                problems.append(f"far from torch's bfloat16 layer: {text}")
    ok = verdict.ok and not problems
    parts += problems
    if swept and not problems:
        parts.append(f"threads 1..{swept[-1]} identical")
    ref_time = f"ref {check.seconds:.1f}s" if check.uses == 1 else "ref reused"
    parts.append(f"[{ref_time}, ours {t_ours * 1e3:.1f}ms]")
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


def bfloat16_support():
    """(True, "") if the library runs bfloat16, else (False, the library's message).

    Asked by creating a 1x1 operator: the library reports an unsupported
    dtype there.
    """
    try:
        with convpool.Operator(np.zeros((1, 1, 1, 1), np.uint16), dtype="bfloat16"):
            return True, ""
    except convpool.UnsupportedError as exc:
        return False, exc.message or str(exc)


def run_perf(args, dtypes, impls, tally):
    print("=== performance: B=1, 256->256, K=3, bias, [0,1) data; median of the runs ===")
    for dtype in dtypes:
        if dtype == "bfloat16":
            supported, why = bfloat16_support()
            if not supported:
                print(f"[skip] bfloat16 performance cases: the library reports bfloat16 "
                      f"unsupported ({why})")
                continue
        for height, width, pool in PERF_SHAPES[dtype]:
            for impl in impls:
                run_perf_case(args, Case("perf", dtype, 1, 256, 256, height, width, 3, pool,
                                         bias=True, impl=impl), tally)


def run_perf_case(args, case, tally):
    """Time one performance case and spot-check its output."""
    x, w, b = make_inputs(case, args.seed)
    try:
        with convpool.Operator(w, b, case.pool, dtype=case.dtype, threads=args.threads,
                               impl=case.impl) as op:
            algorithm, plan_text = plan_algorithm(op, x.shape)
            if args.show_tiling:
                print("       " + plan_text.replace("\n", "\n       ").rstrip())
            algorithm_ok, algorithm_text = algorithm_check(case.impl, algorithm)
            plan = op.plan(x.shape)
            out = op(x)                                   # warm-up
            runs = args.iters or (5 if case.height * case.width > 10000 else 30)
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                op(x, out=out)
                times.append(time.perf_counter() - t0)
            phases = phases_summary(op)
    except convpool.Error as exc:
        tally.report(False, case.name, f"library error: {exc}")
        return
    t = statistics.median(times)
    nbytes = x.nbytes + w.nbytes + b.nbytes + out.nbytes
    spot = ref_mod.spot_check(x, w, b, case.pool, out, samples=256, seed=args.seed,
                              dtype=case.dtype)
    detail = (f"{algorithm_text}; "
              f"median {t * 1e3:.2f} ms (min {min(times) * 1e3:.2f}, {runs} runs), "
              f"{case.flops / t / 1e9:.1f} GFLOP/s, {nbytes / t / 1e9:.2f} GB/s; "
              f"{plan_summary(plan)}; {phases + '; ' if phases else ''}"
              "spot check of 256 outputs: "
              + ("ok" if spot.ok else f"{spot.n_bad} bad, {spot.describe_first()} "
                 f"{spot.describe_rounding()}"))
    tally.report(spot.ok and algorithm_ok, case.name, detail)


# --------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small cases only (no 224x224)")
    p.add_argument("--test_maxpool", "--test-maxpool", action="store_true",
                   help="add the pool 2 and pool 3 cases")
    p.add_argument("--perf", action="store_true",
                   help="run the performance cases instead of the correctness set")
    p.add_argument("--show-tiling", action="store_true", help="print each case's plan")
    p.add_argument("--threads", type=int, default=None,
                   help="worker threads (default: the library's choice, plus a sweep "
                        "1..2*CPUs on small cases)")
    p.add_argument("--dtype", nargs="+", choices=ALL_DTYPES + ("all",), default=["all"],
                   help="one or more dtypes, or all (default)")
    p.add_argument("--impl", choices=sorted(convpool.impls()) + ["all"], default="all",
                   help="algorithm: auto (the library's choice), one of the library's "
                        "algorithms, or all (default: every case with each of "
                        f"{', '.join(library_impls())})")
    p.add_argument("-k", dest="filter", default=None,
                   help="only the cases whose name contains this text")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--iters", type=int, default=0, help="timed runs per perf case")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    dtypes = []
    for name in args.dtype:
        for dtype in (ALL_DTYPES if name == "all" else (name,)):
            if dtype not in dtypes:
                dtypes.append(dtype)
    impls = library_impls() if args.impl == "all" else (args.impl,)
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
    print(f"[info] dtypes {', '.join(dtypes)}; algorithms {', '.join(impls)}")
    print("[info] references: NumPy and torch in float64; they must agree before a "
          "result is judged")
    if not args.perf:
        print("[info] tolerances: " + "; ".join(
            f"{ref_mod.TOLERANCE_TAG[key]}: {text}" for key, text in ref_mod.TOLERANCE_TEXT.items()
            if key[0] in dtypes and key[1] != "relative"
            and not (key[0] != "float32" and key[1] == "allclose")))
        if "bfloat16" in dtypes:
            print("[info] bfloat16 sanity reference: torch's bfloat16 layer, "
                  f"|ours - torch_bf16| <= {ref_mod.TORCH_BF16_RTOL:g} * sum|x*w|")

    if args.perf:
        run_perf(args, dtypes, impls, tally)
    else:
        inputs = InputCache(args.seed)
        for dtype in dtypes:
            if dtype == "bfloat16":
                supported, why = bfloat16_support()
                if not supported:
                    tally.report(False, "bfloat16 cases",
                                 f"the library reports bfloat16 unsupported: {why}")
                    continue
            cases = with_impls(correctness_cases(dtype, args.quick, args.test_maxpool), impls)
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
