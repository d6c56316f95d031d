"""The parameters of a layer besides its tensors, checked and normalised.

    spec = LayerSpec.make(pool=3, padding=1, activation="relu", pool_stride=2)
    spec.output_size(224, 224, k=3)        # (OH, OW, PH, PW)

A layer is max_pool2d(act(conv2d(x, w, bias, stride, padding, dilation,
groups) [+ residual]), pool, pool_stride, pool_padding, ceil_mode)
(include/convpool.h, convpool_layer):

padding       conv zero padding: an int, (h, w), or (top, left, bottom, right)
              (ONNX's order for 2-D pads: both begins, then both ends).
stride        conv stride (rows and columns), >= 1.
dilation      conv dilation, >= 1: the filter's taps are dilation apart.
groups        conv groups, >= 1, dividing C_in and C_out (the library checks
              that): w is [C_out, C_in / groups, K, K]; groups = C_in is a
              depthwise conv.
activation    None, "relu", "relu6" or a (min, max) clamp of conv + bias
              (+ the residual, which is a run's input, not part of the spec).
pool          max pooling window P x P (1 and stride 1: no pooling).
pool_stride   window stride S; None = the window.
pool_padding  -inf padding of the conv output, as padding; each side at most
              P - 1 (ONNX's rule; torch's max_pool2d takes P // 2; the library
              checks it and names the side).
ceil_mode     ceil sizing: PH = ceil((OH + top + bottom - P) / S) + 1, less
              one when that last window would start in the bottom padding
              (torch's and ONNX's rule; one partial window where P is larger
              than the padded OH by less than S); PW likewise.

Pure Python (numpy only for the float32 rounding of clamp bounds); used by
the binding, by convpool.torch and by the test oracle (tests/support/reference.py).
"""

import math
import operator as _operator
from dataclasses import dataclass
from typing import Sequence, Tuple, Union

import numpy as np

__all__ = ["LayerSpec", "normalize_pads", "normalize_activation", "pooled_size",
           "onnx_auto_pads"]

INT64_MAX = 2**63 - 1

#: Activation names accepted besides None and a (min, max) tuple.
ACTIVATION_NAMES = ("relu", "relu6")


def as_int(name, value, minimum, maximum=INT64_MAX):
    """value as a Python int in [minimum, maximum]; bool and non-integers are TypeErrors.

    The upper limit is the C type's, so that ctypes never wraps a value around.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        result = _operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if result < minimum:
        raise ValueError(f"{name} = {result} must be >= {minimum}")
    if result > maximum:
        raise ValueError(f"{name} = {result} is too large (the C API takes at most {maximum})")
    return result


def normalize_pads(name, value):
    """(top, left, bottom, right) from an int, (h, w) or (top, left, bottom, right).

    Each pad must be an integer >= 0. Strings (torch's "same"/"valid") are
    refused with a TypeError: the pads they stand for depend on the filter.
    """
    if isinstance(value, str):
        raise TypeError(f"{name} = {value!r}: give the pads as an int, (h, w) or "
                        "(top, left, bottom, right)")
    if isinstance(value, (tuple, list)):
        items = tuple(value)
        if len(items) == 2:
            items = items + items
        elif len(items) != 4:
            raise ValueError(f"{name} = {value!r} must have 2 values (h, w) or 4 "
                             f"(top, left, bottom, right), got {len(items)}")
        sides = ("top", "left", "bottom", "right")
        return tuple(as_int(f"{name} {side}", v, 0) for side, v in zip(sides, items))
    if isinstance(value, np.ndarray):
        return normalize_pads(name, value.tolist())
    v = as_int(name, value, 0)
    return (v, v, v, v)


#: ONNX's auto_pad values (Conv, MaxPool).
AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _pair(name, value, minimum):
    """(rows, columns) from an int or a pair of ints, each >= minimum."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} = {value!r} must be an int or 2 values (rows, columns), "
                             f"got {len(value)}")
        return tuple(as_int(f"{name} {axis}", v, minimum)
                     for axis, v in zip(("rows", "columns"), value))
    v = as_int(name, value, minimum)
    return (v, v)


IntOrPair = Union[int, Tuple[int, int]]


def onnx_auto_pads(auto_pad: Union[str, bytes], size: IntOrPair, kernel: IntOrPair,
                   stride: IntOrPair = 1, dilation: IntOrPair = 1,
                   pads: Union[int, Sequence[int]] = 0) -> Tuple[int, int, int, int]:
    """The explicit (top, left, bottom, right) pads of an ONNX Conv or MaxPool auto_pad.

    auto_pad  "NOTSET", "VALID", "SAME_UPPER" or "SAME_LOWER" (str or bytes, as
              the node's attribute holds it)
    size      what the node reads: its input's (height, width), or an int for both
              (a MaxPool that follows the conv in one layer reads the conv output,
              LayerSpec.output_size's OH, OW)
    kernel    the filter size K, or the pool window P; an int or (rows, columns)
    stride    the node's strides; dilation its dilations (1 for MaxPool)
    pads      the node's own pads, returned (normalised) for NOTSET

    VALID is no padding. SAME_UPPER and SAME_LOWER make the output ceil(size /
    stride) along each axis: the total padding max(0, (out - 1) * stride +
    dilation * (kernel - 1) + 1 - size) is split in two halves, the odd one at
    the end for SAME_UPPER and at the beginning for SAME_LOWER (ONNX's rule).
    Give the result as ``padding=`` (Conv) or ``pool_padding=`` (MaxPool): a
    MaxPool's SAME pads are at most P - 1 on each side, as the library requires.
    """
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode("ascii", "replace")
    if not isinstance(auto_pad, str):
        raise TypeError(f"auto_pad must be a str, got {type(auto_pad).__name__}")
    if auto_pad not in AUTO_PADS:
        raise ValueError(f"auto_pad = {auto_pad!r}; expected one of {', '.join(AUTO_PADS)}")
    sizes = _pair("size", size, 1)
    kernels = _pair("kernel", kernel, 1)
    strides = _pair("stride", stride, 1)
    dilations = _pair("dilation", dilation, 1)
    if auto_pad == "NOTSET":
        return normalize_pads("pads", pads)
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernels, strides, dilations):
        out = -(-n // s)
        total = max(0, (out - 1) * s + d * (k - 1) + 1 - n)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return (begins[0], begins[1], ends[0], ends[1])


def _real(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


#: The smallest magnitude that rounds to infinity in float32 (FLT_MAX + half an ulp):
#: finite bounds at or beyond it would become +-inf in the library, and are refused.
FLOAT32_OVERFLOW = float(np.finfo(np.float32).max) + 2.0 ** (127 - 24)


def _clamp_bound(name, value, activation):
    """A clamp bound as a float that float32 holds (infinities pass; NaN and overflow refused)."""
    bound = _real(f"activation {name}", value)
    if math.isnan(bound):
        raise ValueError(f"activation = {activation!r}: the clamp {name} is NaN")
    if math.isfinite(bound) and abs(bound) >= FLOAT32_OVERFLOW:
        raise ValueError(f"activation = {activation!r}: the clamp {name} {bound:g} is outside "
                         f"the float32 range (largest finite float32: "
                         f"{float(np.finfo(np.float32).max):.8g})"
                         "; the library applies float32 bounds (use -inf or inf for no bound)")
    return bound


def normalize_activation(value):
    """None, "relu", "relu6" or a (min, max) tuple of floats (min <= max).

    Clamp bounds must be real numbers that float32 holds: NaN and finite
    values that would round to +-inf in float32 are refused (ValueError
    naming the value); -inf and inf are accepted and mean no bound.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value in ACTIVATION_NAMES:
            return value
        raise ValueError(f"activation = {value!r}; expected None, 'relu', 'relu6' or a "
                         "(min, max) tuple")
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"activation = {value!r}: a clamp is (min, max), got "
                             f"{len(value)} values")
        lo = _clamp_bound("min", value[0], value)
        hi = _clamp_bound("max", value[1], value)
        if lo > hi:
            raise ValueError(f"activation = {value!r}: min {lo:g} is larger than max {hi:g}")
        return (lo, hi)
    raise TypeError(f"activation must be None, 'relu', 'relu6' or a (min, max) tuple, "
                    f"got {type(value).__name__}")


def _as_bool(name, value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def pooled_size(conv, pool, stride, pad_lo, pad_hi, ceil_mode):
    """Pooled size along one axis, torch's rule (ONNX's for unequal pads).

    torch's pooling_output_shape: (conv + pad_lo + pad_hi - pool, plus
    stride - 1 in ceil mode) // stride + 1, rounded toward -inf; in ceil mode
    a last window that would start in the end padding (at or past conv +
    pad_lo) is dropped. 0 when not even one window fits.
    """
    n = (conv + pad_lo + pad_hi - pool + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= conv + pad_lo:
        n -= 1
    return max(n, 0)


@dataclass(frozen=True)
class LayerSpec:
    """Normalised layer parameters; build with LayerSpec.make(...)."""

    pool: int = 1
    padding: tuple = (0, 0, 0, 0)
    activation: object = None          # None, "relu", "relu6" or (min, max)
    pool_stride: int = 1               # never None here: make() fills in the window
    pool_padding: tuple = (0, 0, 0, 0)
    ceil_mode: bool = False
    stride: int = 1                    # the conv's
    dilation: int = 1
    groups: int = 1

    @classmethod
    def make(cls, pool=1, padding=0, activation=None, pool_stride=None, pool_padding=0,
             ceil_mode=False, stride=1, dilation=1, groups=1):
        """Check and normalise the arguments (TypeError/ValueError naming the bad one)."""
        pool = as_int("pool", pool, 1)
        window_stride = pool if pool_stride is None else as_int("pool_stride", pool_stride, 1)
        return cls(pool=pool, padding=normalize_pads("padding", padding),
                   activation=normalize_activation(activation), pool_stride=window_stride,
                   pool_padding=normalize_pads("pool_padding", pool_padding),
                   ceil_mode=_as_bool("ceil_mode", ceil_mode), stride=as_int("stride", stride, 1),
                   dilation=as_int("dilation", dilation, 1), groups=as_int("groups", groups, 1))

    @classmethod
    def of(cls, value):
        """A LayerSpec as it is, or an int pool window (the original contract)."""
        return value if isinstance(value, cls) else cls.make(pool=value)

    @property
    def is_default(self):
        """True for the original contract: no padding, no activation, stride = window, floor,
        conv stride, dilation and groups 1."""
        return (self.padding == (0, 0, 0, 0) and self.activation is None
                and self.pool_stride == self.pool and self.pool_padding == (0, 0, 0, 0)
                and not self.ceil_mode and self.stride == 1 and self.dilation == 1
                and self.groups == 1)

    @property
    def clamp(self):
        """(min, max) of the activation as the library applies it (float32 bounds), or None."""
        if self.activation is None:
            return None
        if self.activation == "relu":
            return (0.0, math.inf)
        if self.activation == "relu6":
            return (0.0, 6.0)
        lo, hi = self.activation
        return (float(np.float32(lo)), float(np.float32(hi)))

    def output_size(self, height, width, k):
        """(OH, OW, PH, PW) for an input height x width and a k x k filter.

        OH = (height + top + bottom - dilation * (k - 1) - 1) // stride + 1,
        OW likewise. OH or OW below 1 (the padded input smaller than the
        dilated filter) and PH or PW of 0 (the window does not fit) are
        returned as below 1 and 0; the library refuses those layers with a
        message.
        """
        t, l, b, r = self.padding
        extent = self.dilation * (k - 1) + 1

        def conv(size):
            return (size - extent) // self.stride + 1 if size >= extent else size - extent + 1

        oh, ow = conv(height + t + b), conv(width + l + r)
        pt, pl, pb, pr = self.pool_padding
        ph = pooled_size(oh, self.pool, self.pool_stride, pt, pb, self.ceil_mode) if oh > 0 else 0
        pw = pooled_size(ow, self.pool, self.pool_stride, pl, pr, self.ceil_mode) if ow > 0 else 0
        return oh, ow, ph, pw

    def describe(self):
        """Short text of what differs from the original contract ("" if nothing)."""
        parts = []
        if self.stride != 1:
            parts.append(f"cstride{self.stride}")
        if self.dilation != 1:
            parts.append(f"dil{self.dilation}")
        if self.groups != 1:
            parts.append(f"g{self.groups}")
        if self.padding != (0, 0, 0, 0):
            parts.append("pad" + _pads_text(self.padding))
        if self.activation is not None:
            parts.append(self.activation if isinstance(self.activation, str)
                         else f"clamp[{self.activation[0]:g},{self.activation[1]:g}]")
        if self.pool_stride != self.pool:
            parts.append(f"stride{self.pool_stride}")
        if self.pool_padding != (0, 0, 0, 0):
            parts.append("ppad" + _pads_text(self.pool_padding))
        if self.ceil_mode:
            parts.append("ceil")
        return " ".join(parts)

    def kwargs(self):
        """The keyword arguments of convpool.conv2d_maxpool/Operator for this spec."""
        return {"pool": self.pool, "padding": self.padding, "activation": self.activation,
                "pool_stride": self.pool_stride, "pool_padding": self.pool_padding,
                "ceil_mode": self.ceil_mode, "stride": self.stride, "dilation": self.dilation,
                "groups": self.groups}


def _pads_text(pads):
    if len(set(pads)) == 1:
        return str(pads[0])
    if pads[:2] == pads[2:]:
        return f"({pads[0]},{pads[1]})"
    return "(" + ",".join(str(p) for p in pads) + ")"
