"""Float64 references for conv2d + bias + activation + max pool, and the tolerance rules.

Used by tests/test_harness.py and scripts/check_conv.py. Needs numpy; the torch
reference needs torch. Does not need libconvpool.

The layer is given by a pool window (an int: the original contract, no
padding, no activation, stride = window, floor sizing) or a
convpool.layer.LayerSpec (conv zero padding, stride, dilation and groups,
activation, pool stride, -inf pool padding, ceil sizing); every function
below that takes ``pool`` takes either. A residual [B, C_out, OH, OW] (the
conv output's shape), when given, is added to conv + bias before the
activation.

Two independent references are computed in float64 on the exact input values:

* NumPy: x padded with zeros (top, left, bottom, right), the convolution as
  K*K shifted matrix products
  (``out[:, :, oh, ow] += W[:, :, i, j] @ X[:, :, oh*s+i*d, ow*s+j*d]`` for
  stride s and dilation d, per group of channels); for the
  original contract max pooling by a reshape with the bias added after the
  max, otherwise the bias, the residual and the activation
  (``np.maximum``/``np.minimum``
  with the float32 clamp bounds the library applies; NaN stays NaN) and then
  windows of stride S over the conv output laid into a -inf frame (the pool
  padding, plus what ceil sizing reaches past the end); the number of
  windows by torch's rule (``layer.pooled_size``).
* torch: ``F.max_pool2d(act(F.conv2d(X, W, bias, stride, padding, dilation,
  groups) + residual), P, S, pool_padding, ceil_mode)`` in float64, act being
  F.relu, F.relu6 or F.hardtanh. Unequal pads, and pool pads above P // 2
  (ONNX's MaxPool takes up to P - 1, torch's max_pool2d refuses them), are laid
  explicitly: ``F.pad`` with zeros before the conv, with -inf before the
  pool, then (ceil mode) the windows kept are the first ones by ONNX's rule:
  a last window that would start in the bottom/right padding is dropped,
  which torch cannot see once the padding is part of its input.

They must agree (``Reference.compare_references``) before a result is judged against them.

Tolerance rules (``judge``), with ``S`` = the bound on the rounding error
scale of an output: the conv of |x| and |w| (the sum of |x*w| over the window),
max-pooled over the same window, plus |bias|:

* float32, criterion "allclose": ``np.isclose(ours, ref)`` with numpy's
  defaults (rtol 1e-5, atol 1e-8); used for the assignment's [0, 1) data.
* float32, criterion "bound": ``|ours - ref| <= 1e-5 * S + 1e-6``.
* criterion "relative": as "bound" without the absolute 1e-6 (for data whose
  outputs are far below 1e-6, where the floor would accept anything).
* float16: ours within 1 fp16 ulp of fp16(ref) (the exact result rounded to
  half), or ``|ours - ref| <= 1e-5 * S + 1e-6 + ulp/2`` where cancellation
  makes the result tiny (fp32 accumulation error dominates the fp16 ulp).
* Non-finite references: NaN where ref is NaN, exactly ±inf where ref is ±inf.

* bfloat16: the float16 rule with bfloat16 ulps: ours within 1 bf16 ulp of
  bf16(ref) (the exact result rounded to bfloat16, nearest even, directly from
  float64), or ``|ours - ref| <= 1e-5 * S + 1e-6 + ulp/2`` where cancellation
  makes the result tiny. bfloat16 arrays are uint16 bit patterns
  (convpool.bfloat16); the references run on their decoded values.

float16/bfloat16 rounding check: an output is "determined" when the exact
value lies farther than the fp32 bound (1e-5 * S + 1e-6) from both rounding
midpoints of the 16-bit format; then fp32 accumulation plus one
round-to-nearest-even store must give exactly the rounded reference. More
than 1% of the determined outputs (among those within tolerance) rounding
otherwise fails the result, even though each is within the 1-ulp tolerance
(truncation, for example, misrounds about half).

bfloat16 has a third, loose reference: torch's own bfloat16 layer
(``Reference.torch_bfloat16_result``: F.conv2d on bfloat16 tensors, then
max_pool2d). It accumulates and rounds in its own way (bias included), so it
is only a sanity check: ``|ours - torch_bf16| <= 2**-5 * S`` (a few bf16
ulps of the scale; ``compare_loose``), NaN and infinities where it has them.
Where torch's bfloat16 conv accumulates in bfloat16 (``torch_bfloat16_probe``:
Debian's torch 1.13 on CPUs without AVX-512 BF16) the check is skipped.
"""

import numpy as np

from convpool.bfloat16 import bfloat16_round_float64, bfloat16_to_float32, float32_to_bfloat16
from convpool.layer import LayerSpec, pooled_size

FLOAT32_RTOL = 1e-5          # per sum|x*w|, for the "bound" criterion
FLOAT32_ATOL = 1e-6
REFERENCE_RTOL = 1e-10       # numpy vs torch, both float64, per sum|x*w|
ROUNDING_MISMATCH_FRACTION = 0.01   # float16/bfloat16: allowed share of misrounded outputs
TORCH_BF16_RTOL = 2.0 ** -5  # ours vs torch's bfloat16 layer, per S (sanity check only)

DTYPE_NAMES = ("float32", "float16", "bfloat16")
#: Short names used in reports.
SHORT_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}

TOLERANCE_TAG = {
    ("float32", "allclose"): "allclose",
    ("float32", "bound"): "f32-bound",
    ("float32", "relative"): "f32-relative",
    ("float16", "allclose"): "f16-ulp",
    ("float16", "bound"): "f16-ulp",
    ("float16", "relative"): "f16-ulp-relative",
    ("bfloat16", "allclose"): "bf16-ulp",
    ("bfloat16", "bound"): "bf16-ulp",
    ("bfloat16", "relative"): "bf16-ulp-relative",
}

TOLERANCE_TEXT = {
    ("float32", "allclose"): "np.isclose defaults: |d| <= 1e-8 + 1e-5*|ref|",
    ("float32", "bound"): "|d| <= 1e-5 * sum|x*w| + 1e-6 (sum|x*w| pooled, + |bias|)",
    ("float16", "allclose"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                             "+ 1e-6 + ulp/2",
    ("float16", "bound"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                          "+ 1e-6 + ulp/2",
    ("float32", "relative"): "|d| <= 1e-5 * sum|x*w| (no absolute floor; tiny data)",
    ("float16", "relative"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                             "+ ulp/2 (no absolute floor; tiny data)",
    ("bfloat16", "allclose"): "|ours - bf16(ref)| <= 1 bf16 ulp, or |d| <= 1e-5 * sum|x*w| "
                              "+ 1e-6 + ulp/2",
    ("bfloat16", "bound"): "|ours - bf16(ref)| <= 1 bf16 ulp, or |d| <= 1e-5 * sum|x*w| "
                           "+ 1e-6 + ulp/2",
    ("bfloat16", "relative"): "|ours - bf16(ref)| <= 1 bf16 ulp, or |d| <= 1e-5 * sum|x*w| "
                              "+ ulp/2 (no absolute floor; tiny data)",
}


# --------------------------------------------------------------------------
# dtypes: names, decoding, rounding
# --------------------------------------------------------------------------
def dtype_name(dtype):
    """'float32', 'float16' or 'bfloat16' for a dtype argument (name, numpy dtype or type).

    'bfloat16' must be named: its numpy storage, uint16, is not a float type.
    """
    if isinstance(dtype, str) and dtype in DTYPE_NAMES:
        return dtype
    name = np.dtype(dtype).name
    if name not in DTYPE_NAMES:
        raise ValueError(f"no tolerance rule for dtype {name}")
    return name


def storage_dtype(dtype):
    """The numpy dtype that holds an array of dtype (uint16 bit patterns for bfloat16)."""
    name = dtype_name(dtype)
    return np.dtype(np.uint16 if name == "bfloat16" else name)


def to_float64(a, dtype):
    """The values of an array of dtype as float64 (bfloat16 bit patterns decoded); None stays."""
    if a is None:
        return None
    with np.errstate(invalid="ignore"):       # signalling NaN patterns are NaN, quietly
        if dtype_name(dtype) == "bfloat16":
            return bfloat16_to_float32(a).astype(np.float64)
        return np.asarray(a, dtype=np.float64)


def from_float32(a, dtype):
    """float32 values stored as dtype (float16: numpy's RNE cast; bfloat16: RNE bit patterns)."""
    if dtype_name(dtype) == "bfloat16":
        return float32_to_bfloat16(a)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(a, dtype=dtype_name(dtype))


def round_to(values, dtype):
    """float64 values rounded once to dtype (nearest even), returned as float64."""
    name = dtype_name(dtype)
    with np.errstate(over="ignore"):
        if name == "bfloat16":
            return bfloat16_round_float64(values)
        return np.asarray(values, np.float64).astype(name).astype(np.float64)


def smallest_normal(dtype):
    """Smallest positive normal number of dtype."""
    return 2.0 ** -126 if dtype_name(dtype) == "bfloat16" else float(np.finfo(dtype).tiny)


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------
def output_size(height, width, k, pool):
    """(OH, OW, PH, PW) of a layer: pool an int window (original contract) or a LayerSpec."""
    return LayerSpec.of(pool).output_size(height, width, k)


def pad_zeros(x, pads):
    """x [B, C, H, W] with (top, left, bottom, right) rows and columns of zeros around it."""
    t, l, b, r = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))


def conv2d_numpy(x, w, stride=1, dilation=1, groups=1):
    """Valid convolution (cross-correlation) in float64, no bias.

    x [B, C, H, W], w [Co, C / groups, K, K] -> [B, Co, OH, OW] with OH =
    (H - dilation*(K-1) - 1) // stride + 1, OW likewise. Each filter tap (i, j)
    is one matrix product over a group's channels, W[g, :, i, j] @ X[b, g];
    the spatial shift is applied to the product (a contiguous [Co/groups,
    H*W] block) by slicing rows i*d, i*d + s, ... and columns j*d, j*d + s,
    .... Each column of the product depends only on X[b, :, h, w], so
    shifting the product equals shifting X.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    batch, channels, height, width = x.shape
    c_out, c_in, k, k2 = w.shape
    assert c_in * groups == channels and c_out % groups == 0 and k == k2
    extent = dilation * (k - 1) + 1
    oh, ow = (height - extent) // stride + 1, (width - extent) // stride + 1
    out = np.zeros((batch, c_out, oh, ow), dtype=np.float64)
    flat = x.reshape(batch, channels, height * width)
    per_group = c_out // groups
    with np.errstate(invalid="ignore", over="ignore"):   # inf - inf -> NaN is intended
        for g in range(groups):
            outs, ins = slice(g * per_group, (g + 1) * per_group), slice(g * c_in, (g + 1) * c_in)
            for i in range(k):
                for j in range(k):
                    tap = np.ascontiguousarray(w[outs, :, i, j])
                    r0, c0 = i * dilation, j * dilation
                    for b in range(batch):
                        product = (tap @ flat[b, ins]).reshape(per_group, height, width)
                        out[b, outs] += product[:, r0:r0 + (oh - 1) * stride + 1:stride,
                                                c0:c0 + (ow - 1) * stride + 1:stride]
    return out


def max_pool_numpy(y, pool, stride=None, padding=(0, 0, 0, 0), ceil_mode=False):
    """P x P max pooling with stride S (None: P); NaN propagates (np.maximum).

    padding: (top, left, bottom, right) of -inf around y. The number of
    windows per axis is layer.pooled_size (floor, or torch's ceil rule);
    windows reaching past the padded y (ceil mode) see -inf there.
    """
    stride = pool if stride is None else stride
    if pool == 1 and stride == 1 and not any(padding):
        return y
    batch, channels, oh, ow = y.shape
    if stride == pool and not any(padding) and not ceil_mode:
        ph, pw = oh // pool, ow // pool
        cropped = y[:, :, :ph * pool, :pw * pool]
        return cropped.reshape(batch, channels, ph, pool, pw, pool).max(axis=(3, 5))
    t, l, b, r = padding
    ph = pooled_size(oh, pool, stride, t, b, ceil_mode)
    pw = pooled_size(ow, pool, stride, l, r, ceil_mode)
    # -inf frame: the padding, and whatever the last windows reach beyond it
    rows = max(t + oh + b, (ph - 1) * stride + pool)
    cols = max(l + ow + r, (pw - 1) * stride + pool)
    frame = np.full((batch, channels, rows, cols), -np.inf, dtype=y.dtype)
    frame[:, :, t:t + oh, l:l + ow] = y
    out = None
    for dy in range(pool):
        for dx in range(pool):
            tap = frame[:, :, dy:dy + (ph - 1) * stride + 1:stride,
                        dx:dx + (pw - 1) * stride + 1:stride]
            out = tap.copy() if out is None else np.maximum(out, tap)
    return out


def add_bias(y, bias):
    if bias is None:
        return y
    return y + np.asarray(bias, dtype=np.float64)[None, :, None, None]


def add_residual(y, residual):
    """y + residual (float64), or y when there is none."""
    if residual is None:
        return y
    with np.errstate(invalid="ignore"):               # inf - inf -> NaN is intended
        return y + np.asarray(residual, dtype=np.float64)


def activation_numpy(y, spec):
    """The spec's activation on y (float64): a clamp to its float32 bounds; NaN stays NaN."""
    bounds = spec.clamp
    if bounds is None:
        return y
    lo, hi = bounds
    with np.errstate(invalid="ignore"):
        return np.minimum(np.maximum(y, lo), hi)


def pool_numpy(y, spec):
    """The spec's max pooling of y."""
    return max_pool_numpy(y, spec.pool, spec.pool_stride, spec.pool_padding, spec.ceil_mode)


def torch_conv(x, w, bias, padding, stride=1, dilation=1, groups=1):
    """F.conv2d with zero padding (top, left, bottom, right; unequal pads by
    F.pad), stride, dilation and groups."""
    import torch.nn.functional as F
    t, l, b, r = padding
    if t == b and l == r:
        return F.conv2d(x, w, bias, stride=stride, padding=(t, l), dilation=dilation,
                        groups=groups)
    return F.conv2d(F.pad(x, (l, r, t, b)), w, bias, stride=stride, dilation=dilation,
                    groups=groups)


def _conv_key(spec):
    """What a conv result depends on besides x and w."""
    return (tuple(spec.padding), spec.stride, spec.dilation, spec.groups)


def torch_act_pool(y, spec):
    """The spec's activation (F.relu, F.relu6, F.hardtanh) and max pooling of y.

    Equal pool pads of at most P // 2 go to F.max_pool2d; other ones
    (unequal, or up to P - 1 as ONNX allows) are laid with F.pad (-inf) and,
    in ceil mode, the windows are cut to the count of ONNX's rule
    (layer.pooled_size): torch takes the explicitly padded rows for input and
    would keep a last window that starts in them.
    """
    import torch.nn.functional as F
    if spec.activation == "relu":
        y = F.relu(y)
    elif spec.activation == "relu6":
        y = F.relu6(y)
    elif spec.activation is not None:
        y = F.hardtanh(y, *spec.clamp)
    if spec.pool == 1 and spec.pool_stride == 1 and not any(spec.pool_padding):
        return y
    t, l, b, r = spec.pool_padding
    if t == b and l == r and max(t, l) <= spec.pool // 2:
        return F.max_pool2d(y, spec.pool, spec.pool_stride, (t, l), ceil_mode=spec.ceil_mode)
    oh, ow = y.shape[2], y.shape[3]
    ph = pooled_size(oh, spec.pool, spec.pool_stride, t, b, spec.ceil_mode)
    pw = pooled_size(ow, spec.pool, spec.pool_stride, l, r, spec.ceil_mode)
    y = F.pad(y, (l, r, t, b), value=float("-inf"))
    y = F.max_pool2d(y, spec.pool, spec.pool_stride, 0, ceil_mode=spec.ceil_mode)
    return y[:, :, :ph, :pw]


class TorchBfloat16Unusable(RuntimeError):
    """torch's bfloat16 conv2d cannot serve as a sanity reference on this machine."""


_torch_bf16_probe = None


def torch_bfloat16_probe():
    """None if torch's bfloat16 conv2d accumulates in float32 here, else why it is unusable.

    Some torch builds (Debian's 1.13 on CPUs without AVX-512 BF16, among
    them) run bfloat16 convolutions through a GEMM that accumulates in
    bfloat16: a sum of 576 ones then stops at 256. Such a layer is no sanity
    reference; the float64 references still judge the result.
    """
    global _torch_bf16_probe
    if _torch_bf16_probe is None:
        import torch
        import torch.nn.functional as F
        with torch.no_grad():
            got = F.conv2d(torch.ones(1, 64, 5, 5, dtype=torch.bfloat16),
                           torch.ones(1, 64, 3, 3, dtype=torch.bfloat16)).float()
        exact = bool((got == 576.0).all())
        _torch_bf16_probe = "" if exact else (
            f"torch {torch.__version__}'s bfloat16 conv2d accumulates in bfloat16 on this "
            f"machine (a sum of 576 ones gives {float(got.flatten()[0]):g}), so it is no "
            "sanity reference here")
    return _torch_bf16_probe or None


def torch_layer(x, w, bias, spec, residual=None):
    """The whole layer through torch.nn.functional on tensors of one dtype."""
    spec = LayerSpec.of(spec)
    y = torch_conv(x, w, bias, spec.padding, spec.stride, spec.dilation, spec.groups)
    return torch_act_pool(y if residual is None else y + residual, spec)


# --------------------------------------------------------------------------
# A reference for one (x, w): conv results cached across bias and pool
# --------------------------------------------------------------------------
class Reference:
    """Both references and the error scale for one input x and weights w.

    The unpooled float64 conv (NumPy) and conv(|x|, |w|) are computed once per
    conv padding, stride, dilation and groups and reused for every bias,
    residual, activation and pooling; the torch conv is cached per bias and
    conv. ``pool`` arguments are an int window (the original contract) or a
    LayerSpec; ``residual`` arguments a float64 array of the conv output's
    shape, or None.
    """

    def __init__(self, x, w):
        self.x = np.asarray(x, dtype=np.float64)
        self.w = np.asarray(w, dtype=np.float64)
        self.k = self.w.shape[2]
        self._conv = {}
        self._abs_conv = {}
        self._torch = {}
        self._torch_bf16 = {}

    def conv_padded(self, padding=(0, 0, 0, 0), spec=None):
        """NumPy float64 conv of x padded with zeros, no bias, unpooled; with the
        stride, dilation and groups of spec (a LayerSpec) when given."""
        key = _conv_key(spec) if spec is not None else (tuple(padding), 1, 1, 1)
        if key not in self._conv:
            self._conv[key] = conv2d_numpy(pad_zeros(self.x, key[0]), self.w, *key[1:])
        return self._conv[key]

    def abs_conv_padded(self, padding=(0, 0, 0, 0), spec=None):
        """conv(|x|, |w|) (x padded with zeros): sum of |x*w| over each window, unpooled."""
        key = _conv_key(spec) if spec is not None else (tuple(padding), 1, 1, 1)
        if key not in self._abs_conv:
            if (self.x >= 0).all() and (self.w >= 0).all():
                value = self.conv_padded(padding, spec)   # identical for non-negative data
            else:
                value = conv2d_numpy(pad_zeros(np.abs(self.x), key[0]), np.abs(self.w),
                                     *key[1:])
            self._abs_conv[key] = value
        return self._abs_conv[key]

    @property
    def conv(self):
        """NumPy float64 conv, no padding, no bias, unpooled."""
        return self.conv_padded()

    @property
    def abs_conv(self):
        """conv(|x|, |w|), no padding: sum of |x*w| over each window, unpooled."""
        return self.abs_conv_padded()

    def numpy_result(self, bias, pool, residual=None):
        """NumPy reference.

        Original contract: max pool of the conv, then + bias. Otherwise the
        activation of conv + bias + residual, then the pooling of the spec.
        """
        spec = LayerSpec.of(pool)
        if spec.is_default and residual is None:
            return add_bias(max_pool_numpy(self.conv, spec.pool), bias)
        with np.errstate(invalid="ignore"):             # inf - inf -> NaN is intended
            y = add_residual(add_bias(self.conv_padded(spec=spec), bias), residual)
        return pool_numpy(activation_numpy(y, spec), spec)

    @staticmethod
    def _bias_key(bias):
        return None if bias is None else np.asarray(bias, dtype=np.float64).tobytes()

    def torch_result(self, bias, pool, residual=None):
        """torch reference: F.max_pool2d(act(F.conv2d(x, w, bias, stride, padding, dilation,
        groups) + residual), P, S, pads, ceil)."""
        import torch
        spec = LayerSpec.of(pool)
        key = (self._bias_key(bias), _conv_key(spec))
        if key not in self._torch:
            xt = torch.from_numpy(self.x)
            wt = torch.from_numpy(self.w)
            bt = None if bias is None else torch.from_numpy(np.asarray(bias, np.float64))
            with torch.no_grad():
                self._torch[key] = torch_conv(xt, wt, bt, spec.padding, spec.stride,
                                              spec.dilation, spec.groups)
        with torch.no_grad():
            y = self._torch[key]
            if residual is not None:
                y = y + torch.from_numpy(np.asarray(residual, np.float64))
            return torch_act_pool(y, spec).numpy()

    def torch_bfloat16_result(self, bias, pool, residual=None):
        """torch's own bfloat16 layer on these inputs, as float64 (a loose reference).

        x, w and bias must hold bfloat16 values (decoded bit patterns), so the
        conversion to torch.bfloat16 is exact. F.conv2d runs on bfloat16
        tensors (torch's CPU kernels accumulate, add the bias and round in
        their own way), then the activation and max_pool2d; the conv is
        cached per bias and conv; the residual is added in bfloat16. Raises
        TorchBfloat16Unusable (a
        RuntimeError) where torch's bfloat16 conv accumulates in bfloat16
        (torch_bfloat16_probe).
        """
        import torch
        unusable = torch_bfloat16_probe()
        if unusable:
            raise TorchBfloat16Unusable(unusable)
        spec = LayerSpec.of(pool)
        key = (self._bias_key(bias), _conv_key(spec))
        if key not in self._torch_bf16:
            xt = torch.from_numpy(self.x).to(torch.bfloat16)
            wt = torch.from_numpy(self.w).to(torch.bfloat16)
            bt = (None if bias is None
                  else torch.from_numpy(np.asarray(bias, np.float64)).to(torch.bfloat16))
            for name, t, src in (("x", xt, self.x), ("w", wt, self.w)):
                if not np.array_equal(t.double().numpy(), src, equal_nan=True):
                    raise ValueError(f"{name} does not hold bfloat16 values: the torch "
                                     "bfloat16 reference would see other inputs")
            with torch.no_grad():
                self._torch_bf16[key] = torch_conv(xt, wt, bt, spec.padding, spec.stride,
                                                   spec.dilation, spec.groups)
        with torch.no_grad():
            y = self._torch_bf16[key]
            if residual is not None:
                y = y + torch.from_numpy(np.asarray(residual, np.float64)).to(torch.bfloat16)
            return torch_act_pool(y, spec).double().numpy()

    def error_scale(self, bias, pool, residual=None):
        """S: sum|x*w| (+ |bias| + |residual|) max-pooled over each window (finite conv
        values only).

        Where the conv value itself is ±inf or NaN the scale is irrelevant (the
        pooled result is then judged exactly) or the element cannot be the max
        (-inf), so those positions contribute 0. The activation is a clamp,
        which never widens a difference, so it leaves S as it is; the pool
        padding never wins a window (each holds a conv value).
        """
        spec = LayerSpec.of(pool)
        conv = self.conv_padded(spec=spec)
        scale = self.abs_conv_padded(spec=spec)
        finite = np.isfinite(conv)
        if not finite.all():
            scale = np.where(finite & np.isfinite(scale), scale, 0.0)
        if residual is not None:
            magnitude = np.abs(np.asarray(residual, np.float64))
            scale = scale + np.where(np.isfinite(magnitude), magnitude, 0.0)
        if spec.is_default and residual is None:
            scale = max_pool_numpy(scale, spec.pool)
            if bias is not None:
                scale = scale + np.abs(np.asarray(bias, np.float64))[None, :, None, None]
            return scale
        if bias is not None:
            scale = scale + np.abs(np.asarray(bias, np.float64))[None, :, None, None]
        return pool_numpy(scale, spec)

    def compare_references(self, bias, pool, residual=None):
        """Check that the two references agree; returns (ok, message, numpy_result).

        NaN positions must match, infinities must be equal, finite values must
        satisfy |numpy - torch| <= 1e-10 * S.
        """
        a = self.numpy_result(bias, pool, residual)
        b = self.torch_result(bias, pool, residual)
        if a.shape != b.shape:
            return False, f"reference shapes differ: numpy {a.shape}, torch {b.shape}", a
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            where = np.argwhere(nan_a != nan_b)[0]
            return False, (f"NaN positions differ ({int((nan_a != nan_b).sum())} elements), "
                           f"first at {tuple(int(v) for v in where)}: numpy "
                           f"{a[tuple(where)]!r}, torch {b[tuple(where)]!r}"), a
        inf = np.isinf(a) | np.isinf(b)
        if not np.array_equal(a[inf], b[inf]):
            return False, "infinities differ between numpy and torch", a
        finite = np.isfinite(a) & np.isfinite(b)
        scale = self.error_scale(bias, pool, residual)
        with np.errstate(invalid="ignore"):
            delta = np.where(finite, np.abs(a - b), 0.0)
        bad = finite & ~(delta <= REFERENCE_RTOL * scale + 1e-300)
        if bad.any():
            where = tuple(int(v) for v in np.argwhere(bad)[0])
            return False, (f"numpy and torch disagree at {int(bad.sum())} elements, max "
                           f"|d| = {delta[finite].max():.3g}; first at {where}: numpy "
                           f"{a[where]!r}, torch {b[where]!r}"), a
        max_delta = float(delta[finite].max()) if finite.any() else 0.0
        return True, f"references agree (max |numpy - torch| = {max_delta:.2g})", a


# --------------------------------------------------------------------------
# Judging a result
# --------------------------------------------------------------------------
class Verdict:
    """Outcome of judge(): ok, bad mask and the facts a report prints."""

    def __init__(self, bad, max_delta, first_bad, ours, ref, tol, key, rounding):
        self.dtype = key[0]
        self.bad = bad                    # bool array, shape of the output
        self.n_bad = int(bad.sum())
        self.max_delta = max_delta        # max |ours - ref| where both are finite
        self.first_bad = first_bad        # index tuple or None
        self.ours_at_first = ours
        self.ref_at_first = ref
        self.tol_at_first = tol
        self.tolerance_text = TOLERANCE_TEXT[key]   # the rule in words
        self.tolerance_tag = TOLERANCE_TAG[key]     # its short name
        self.rounding = rounding          # 16-bit: (misrounded, determined), else None
        self.rounding_ok = (rounding is None
                            or rounding[0] <= ROUNDING_MISMATCH_FRACTION * rounding[1])
        self.ok = self.n_bad == 0 and self.rounding_ok

    def describe_rounding(self):
        """'fp16 RNE: m of n determined elements differ' (16-bit dtypes only), else ''."""
        if self.rounding is None:
            return ""
        text = (f"{SHORT_NAMES[self.dtype]} RNE: {self.rounding[0]} of {self.rounding[1]} "
                "determined elements differ")
        return text if self.rounding_ok else text + " (TOO MANY: rounding is not RNE)"

    def describe_first(self):
        if self.first_bad is None:
            return ""
        return (f"first mismatch at {self.first_bad}: ours {self.ours_at_first!r}, "
                f"ref {self.ref_at_first!r}, tol {self.tol_at_first:.3g}")


def half_ulp_units(values16):
    """The fp16 ulp at each value (spacing to the next larger magnitude), float64."""
    return np.spacing(np.abs(values16.astype(np.float16))).astype(np.float64)


def bfloat16_ulp(values):
    """The bf16 ulp at each bfloat16 value (spacing to the next larger magnitude), float64.

    2**(e-8) for |v| = m * 2**e with 0.5 <= m < 1, never below the subnormal
    spacing 2**-133 (zero included); finite at the largest bfloat16 (2**120).
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        _, exponent = np.frexp(v)
        exponent = np.where(v == 0, -125, np.maximum(exponent, -125))
    return np.ldexp(1.0, exponent - 8)


def bfloat16_neighbours(values):
    """(below, above): the bfloat16 numbers next to each finite bfloat16 value, float64.

    Stepping the bit pattern by one moves one bf16 ulp in magnitude (across
    binades too); zero of either sign has the smallest subnormals on both
    sides, and stepping up from the largest finite value gives inf.
    """
    v = np.asarray(values, dtype=np.float64)
    bits = float32_to_bfloat16(v).astype(np.int32)
    magnitude = bits & 0x7FFF
    negative = (bits & 0x8000) != 0
    # Within one sign the magnitude grows with the pattern.
    away = bits + 1
    toward = np.where(magnitude == 0, (bits ^ 0x8000) + 1, bits - 1)   # across zero
    up = np.where(negative, toward, away)
    down = np.where(negative, away, toward)
    with np.errstate(invalid="ignore"):
        below = bfloat16_to_float32(down.astype(np.uint16)).astype(np.float64)
        above = bfloat16_to_float32(up.astype(np.uint16)).astype(np.float64)
    return below, above


def judge(ours, ref, scale, dtype, criterion="bound"):
    """Compare ours (a float32/float16 array, or bfloat16 bit patterns) with the float64 ref.

    scale: the error scale S of each element (Reference.error_scale).
    dtype: "float32", "float16" or "bfloat16" (ours as uint16 bit patterns or
    as decoded values). criterion: "allclose" (float32; the 16-bit dtypes use
    "bound"), "bound" or "relative" (no absolute floor).
    Returns a Verdict.
    """
    dtype = dtype_name(dtype)
    ours = np.asarray(ours)
    if dtype == "bfloat16" and ours.dtype == np.uint16:
        ours = bfloat16_to_float32(ours)
    with np.errstate(invalid="ignore"):       # signalling NaN patterns are NaN, quietly
        o = ours.astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if o.shape != ref.shape:
        raise ValueError(f"shape of ours {o.shape} != reference {ref.shape}")
    ok = np.zeros(ref.shape, dtype=bool)
    tol = np.zeros(ref.shape, dtype=np.float64)
    rounding = None

    nan_ref = np.isnan(ref)
    ok[nan_ref] = np.isnan(o[nan_ref])
    inf_ref = np.isinf(ref)
    ok[inf_ref] = o[inf_ref] == ref[inf_ref]

    fin = np.isfinite(ref)
    e, of, s = ref[fin], o[fin], scale[fin]
    atol = 0.0 if criterion == "relative" else FLOAT32_ATOL
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(of - e)
        if dtype == "float32":
            if criterion == "allclose":
                t = 1e-8 + 1e-5 * np.abs(e)
                good = np.isclose(of, e)
            else:
                t = FLOAT32_RTOL * s + atol
                good = d <= t
        elif dtype == "float16":
            r16 = e.astype(np.float16)
            ulp = half_ulp_units(r16)
            r = r16.astype(np.float64)
            near_half = np.abs(of - r) <= ulp
            t32 = FLOAT32_RTOL * s + atol
            t = t32 + 0.5 * ulp
            good = (of == r) | near_half | (d <= t)      # of == r covers overflow to inf
            t = np.maximum(t, ulp)
            # Rounding check: where the exact value is farther than the fp32 error
            # bound from both rounding midpoints, fp32 accumulation + one RNE store
            # must give exactly fp16(ref). Counted among the elements within
            # tolerance; the others are reported as bad already.
            lower = np.nextafter(r16, np.float16(-np.inf)).astype(np.float64)
            upper = np.nextafter(r16, np.float16(np.inf)).astype(np.float64)
            margin = np.minimum(e - (r + lower) / 2, (r + upper) / 2 - e)
            determined = np.isfinite(r) & (margin > t32) & good
            rounding = (int((determined & (of != r)).sum()), int(determined.sum()))
        elif dtype == "bfloat16":
            r = bfloat16_round_float64(e)        # the exact value rounded once to bf16
            ulp = bfloat16_ulp(r)
            near_half = np.abs(of - r) <= ulp
            t32 = FLOAT32_RTOL * s + atol
            t = t32 + 0.5 * ulp
            good = (of == r) | near_half | (d <= t)      # of == r covers overflow to inf
            t = np.maximum(t, ulp)
            # Rounding check, as for float16.
            lower, upper = bfloat16_neighbours(np.where(np.isfinite(r), r, 0.0))
            margin = np.minimum(e - (r + lower) / 2, (r + upper) / 2 - e)
            determined = np.isfinite(r) & (margin > t32) & good
            rounding = (int((determined & (of != r)).sum()), int(determined.sum()))
        else:
            raise ValueError(f"no tolerance rule for dtype {dtype}")
    ok[fin] = good
    tol[fin] = t

    bad = ~ok
    pairs = np.isfinite(o) & fin
    max_delta = float(np.abs(o[pairs] - ref[pairs]).max()) if pairs.any() else 0.0
    if (fin & ~np.isfinite(o) & bad).any():
        max_delta = float("inf")   # ours is wrongly NaN/inf where the reference is finite
    if not bad.any():
        return Verdict(bad, max_delta, None, None, None, 0.0, (dtype, criterion), rounding)
    idx = tuple(int(v) for v in np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape))
    return Verdict(bad, max_delta, idx, o[idx], ref[idx], tol[idx], (dtype, criterion), rounding)


# --------------------------------------------------------------------------
# Spot check (cheap, for large runs whose full reference would be too slow)
# --------------------------------------------------------------------------
def spot_check(x, w, bias, pool, ours, samples=256, seed=0, dtype=None):
    """Judge `samples` random output elements against an exact float64 recompute.

    For each sampled (b, co, ph, pw) the conv values of its window (P x P
    positions at stride S, less those in the pool padding) are computed as
    direct dot products in float64 on x padded with zeros, plus the bias,
    through the activation. pool: an int window or a LayerSpec. dtype: None
    for the dtype of ours (float32/float16); "bfloat16" when x, w, bias and
    ours are bit patterns. Returns a Verdict over the samples (first_bad
    holds the output index).
    """
    spec = LayerSpec.of(pool)
    dtype = dtype_name(ours.dtype if dtype is None else dtype)
    x, w, bias = (to_float64(a, dtype) for a in (x, w, bias))
    xp = pad_zeros(x, spec.padding)
    rng = np.random.default_rng(seed)
    k = w.shape[2]
    oh, ow = xp.shape[2] - k + 1, xp.shape[3] - k + 1
    n = min(samples, ours.size)
    flat = rng.choice(ours.size, size=n, replace=False)
    idx = np.unravel_index(flat, ours.shape)
    ref = np.empty(n)
    scale = np.empty(n)
    w64 = w.astype(np.float64)
    stride, (pt, pl, _, _) = spec.pool_stride, spec.pool_padding
    for s in range(n):
        b, co, r, c = (int(v[s]) for v in idx)
        values, mags = [], []
        for dy in range(spec.pool):
            for dx in range(spec.pool):
                row, col = r * stride - pt + dy, c * stride - pl + dx
                if not (0 <= row < oh and 0 <= col < ow):
                    continue                      # pool padding (-inf) or past the end
                window = xp[b, :, row:row + k, col:col + k].astype(np.float64)
                value = float((window * w64[co]).sum())
                mag = float(np.abs(window * w64[co]).sum())
                if bias is not None:
                    value += float(bias[co])
                    mag += abs(float(bias[co]))
                values.append(value)
                mags.append(mag)
        best = float(np.max(activation_numpy(np.array(values), spec)))  # NaN propagates
        ref[s] = best
        scale[s] = max((m for v, m in zip(values, mags) if np.isfinite(v)), default=0.0)
    verdict = judge(ours[idx], ref, scale, dtype, "bound")
    if verdict.first_bad is not None:
        verdict.first_bad = tuple(int(v[verdict.first_bad[0]]) for v in idx)
    return verdict


# --------------------------------------------------------------------------
# Loose comparison (ours against torch's bfloat16 layer)
# --------------------------------------------------------------------------
def compare_loose(ours, other, scale, rtol=TORCH_BF16_RTOL, atol=0.0):
    """Sanity comparison of two float64 results: returns (ok, message).

    NaN positions must match, infinities must be equal, finite values must
    satisfy |ours - other| <= rtol * S + atol (S: Reference.error_scale).
    """
    ours = np.asarray(ours, np.float64)
    other = np.asarray(other, np.float64)
    if ours.shape != other.shape:
        return False, f"shapes differ: ours {ours.shape}, other {other.shape}"
    nan_o, nan_t = np.isnan(ours), np.isnan(other)
    if not np.array_equal(nan_o, nan_t):
        where = tuple(int(v) for v in np.argwhere(nan_o != nan_t)[0])
        return False, (f"NaN positions differ ({int((nan_o != nan_t).sum())} elements), "
                       f"first at {where}: ours {ours[where]!r}, other {other[where]!r}")
    inf = np.isinf(ours) | np.isinf(other)
    if not np.array_equal(ours[inf], other[inf]):
        where = tuple(int(v) for v in np.argwhere(inf & (ours != other))[0])
        return False, (f"infinities differ, first at {where}: ours {ours[where]!r}, "
                       f"other {other[where]!r}")
    finite = np.isfinite(ours) & np.isfinite(other)
    with np.errstate(invalid="ignore"):
        delta = np.where(finite, np.abs(ours - other), 0.0)
    tol = rtol * np.asarray(scale, np.float64) + atol
    bad = finite & ~(delta <= tol)
    max_delta = float(delta.max()) if delta.size else 0.0
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        return False, (f"{int(bad.sum())} elements differ by more than {rtol:.3g} * S, max "
                       f"|d| = {max_delta:.3g}; first at {where}: ours {ours[where]!r}, "
                       f"other {other[where]!r}, tol {tol[where]:.3g}")
    return True, f"max|d| = {max_delta:.3g}"
