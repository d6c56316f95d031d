"""convpool: fused Conv2D + bias + activation + MaxPool on the CPU (ctypes binding).

    import numpy as np, convpool
    y = convpool.conv2d_maxpool(x, w, bias, pool=2)          # one call
    with convpool.Operator(w, bias, pool=2) as op:            # weights packed once
        y = op(x)
        print(op.describe(x.shape))
    # A VGG layer: 3x3 conv with padding 1, ReLU, 2x2 max pool
    y = convpool.conv2d_maxpool(x, w, bias, pool=2, padding=1, activation="relu")
    # An AlexNet layer: 3x3 windows with stride 2
    y = convpool.conv2d_maxpool(x, w, bias, pool=3, pool_stride=2, padding=2,
                                activation="relu")

Contract (see include/convpool.h): x [B, C_in, H, W] and w [C_out, C_in / groups,
K, K] C-contiguous numpy arrays of float32 or float16, optional bias [C_out] of
the same dtype. The result equals

    torch.nn.functional.max_pool2d(
        act(torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)
            + residual),
        pool, pool_stride, pool_padding, ceil_mode)

with the keywords (all optional; their defaults are the original layer,
max_pool2d(conv2d(x, w, bias), pool, pool)):

    padding       conv zero padding: int, (h, w) or (top, left, bottom, right)
                  (ONNX's pads order; unequal pads are ONNX's Conv)
    stride        conv stride (rows and columns)
    dilation      conv dilation
    groups        conv groups (C_in: depthwise, any channel multiplier)
    residual      [B, C_out, OH, OW] of x's dtype, added to conv + bias before
                  the activation (conv2d_maxpool: the array; Operator:
                  residual=True at construction, then op(x, residual=r))
    activation    None, "relu", "relu6" or a (min, max) clamp of conv + bias
                  (+ residual)
    pool_stride   window stride (None: the window, pool)
    pool_padding  -inf padding before pooling, as padding; each side < pool
                  (ONNX's MaxPool; torch's max_pool2d takes at most pool // 2)
    ceil_mode     ceil sizing; a last window that would start in the bottom or
                  right padding is dropped (torch and ONNX)

An ONNX node's auto_pad becomes explicit pads with onnx_auto_pads (SAME_UPPER,
SAME_LOWER, VALID, or the node's pads for NOTSET):

    pads = convpool.onnx_auto_pads("SAME_UPPER", x.shape[2:], k, stride=2)
    y = convpool.conv2d_maxpool(x, w, bias, padding=pads, stride=2)

convpool.LayerSpec holds these parameters normalised; convpool.torch wraps
the layer as a torch module and fuses torchvision-style models.

bfloat16: numpy has no bfloat16 dtype, so bfloat16 tensors are uint16 arrays
of bit patterns and the dtype is named explicitly (dtype="bfloat16");
float32_to_bfloat16() and bfloat16_to_float32() convert values and patterns:

    xb, wb = convpool.float32_to_bfloat16(x), convpool.float32_to_bfloat16(w)
    yb = convpool.conv2d_maxpool(xb, wb, pool=2, dtype="bfloat16")     # uint16
    y = convpool.bfloat16_to_float32(yb)

Errors: malformed arguments (wrong type, dtype, rank, layout, inconsistent
shapes, malformed layer keywords) raise TypeError or ValueError before the
library is called. Failures
reported by the library raise a ``convpool.Error`` (a RuntimeError) carrying
``convpool_last_error()``; an invalid argument detected by the library raises
``convpool.InvalidArgumentError``, which is both a ``convpool.Error`` and a
``ValueError``. Spatial checks (K <= padded H, pool <= conv output,
pool_padding < pool) are left to the library, whose message names the
offending value.

The library is located on first use (``$CONVPOOL_LIB``, then the library an
installed package was installed with, then ``build/lib/libconvpool.so`` in
this repository, then the system path); see ``convpool._native``. The float64
references the tests judge results with live with the tests
(tests/support/reference.py), not in this package.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from . import layer as _layer
from ._native import LibraryNotFoundError
from .layer import LayerSpec, onnx_auto_pads
from .bfloat16 import bfloat16_to_float32, float32_to_bfloat16

__version__ = "0.1.0"

__all__ = [
    "conv2d_maxpool", "Operator", "info", "library_path", "status_string",
    "Error", "InvalidArgumentError", "UnsupportedError", "OutOfMemoryError",
    "InvalidStateError", "InternalError", "LibraryNotFoundError", "IMPLS", "impls",
    "float32_to_bfloat16", "bfloat16_to_float32", "LayerSpec", "ACTIVATIONS", "onnx_auto_pads",
    "set_shared_threads", "shared_threads", "set_shared_openmp", "shared_openmp",
]

def __dir__():
    # The API (and the public submodules), not the names the module imports
    # for itself (ctypes, numpy, threading, typing).
    return sorted(__all__ + ["layer", "bfloat16", "torch"])


#: Names accepted by the ``activation`` argument (besides None and a (min, max) tuple).
ACTIVATIONS = _layer.ACTIVATION_NAMES

#: Values accepted by the ``impl`` argument (the library's algorithm names),
#: filled from the library when it is loaded.
IMPLS = {}

# dtype name -> (convpool_dtype, numpy storage dtype). numpy has no bfloat16,
# so bfloat16 arrays are passed as uint16 bit patterns.
_DTYPES = {
    "float32": (_native.FLOAT32, np.dtype(np.float32)),
    "float16": (_native.FLOAT16, np.dtype(np.float16)),
    "bfloat16": (_native.BFLOAT16, np.dtype(np.uint16)),
}


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
class Error(RuntimeError):
    """A libconvpool call failed.

    Attributes: ``status`` (int convpool_status), ``status_name`` (the
    library's name for it), ``function`` (the C function), ``message`` (the
    library's convpool_last_error() text).
    """

    def __init__(self, function, status, status_name, message):
        self.function = function
        self.status = status
        self.status_name = status_name
        self.message = message
        super().__init__(f"{function}: {status_name}: {message}" if message
                         else f"{function}: {status_name}")


class InvalidArgumentError(Error, ValueError):
    """CONVPOOL_INVALID_ARGUMENT: a size or option the library rejects."""


class UnsupportedError(Error):
    """CONVPOOL_UNSUPPORTED: valid, but not implemented on this build or CPU."""


class OutOfMemoryError(Error):
    """CONVPOOL_OUT_OF_MEMORY."""


class InvalidStateError(Error):
    """CONVPOOL_INVALID_STATE: the operator is busy or destroyed."""


class InternalError(Error):
    """CONVPOOL_INTERNAL_ERROR, or a status this binding does not know."""


_ERROR_CLASSES = {
    _native.INVALID_ARGUMENT: InvalidArgumentError,
    _native.UNSUPPORTED: UnsupportedError,
    _native.OUT_OF_MEMORY: OutOfMemoryError,
    _native.INVALID_STATE: InvalidStateError,
    _native.INTERNAL_ERROR: InternalError,
}


def _lib():
    return _native.load()


def _decode(raw):
    return raw.decode("utf-8", "replace") if raw is not None else ""


def status_string(status: int) -> str:
    """The library's name of a convpool_status value."""
    return _decode(_lib().convpool_status_string(int(status)))


def _check(function, status):
    """Raise the matching Error when a C call did not succeed."""
    if status == _native.SUCCESS:
        return
    lib = _lib()
    message = _decode(lib.convpool_last_error())
    cls = _ERROR_CLASSES.get(status, InternalError)
    raise cls(function, status, status_name=status_string(status), message=message)


def library_path() -> str:
    """Path of the libconvpool that was loaded (loading it if needed)."""
    return _native.library_path()


def info() -> Dict[str, Any]:
    """Library and machine facts as a dict.

    Keys: version, isa, usable_cpus, l1d_bytes, l2_bytes, l3_bytes,
    caches_from_cpuid (bool), library (the loaded path).
    """
    lib = _lib()
    raw = _native.ConvpoolInfo()
    _check("convpool_get_info", lib.convpool_get_info(ctypes.byref(raw)))
    return {
        "version": _decode(raw.version),
        "isa": _decode(raw.isa),
        "usable_cpus": int(raw.usable_cpus),
        "l1d_bytes": int(raw.l1d_bytes),
        "l2_bytes": int(raw.l2_bytes),
        "l3_bytes": int(raw.l3_bytes),
        "caches_from_cpuid": bool(raw.caches_from_cpuid),
        "library": _native.library_path(),
    }


# --------------------------------------------------------------------------
# Argument checking (everything that can be judged without the library)
# --------------------------------------------------------------------------
_INT_MAX = 2**31 - 1      # C int fields of convpool_options
_INT64_MAX = 2**63 - 1    # int64_t sizes
_SHAPES_KEPT = 64         # output shapes an Operator remembers (Operator.output_shape)


_as_int = _layer.as_int


def _dtype_name_of(dtype):
    """Normalise a dtype argument (numpy dtype, type or name) to a key of _DTYPES."""
    if isinstance(dtype, str) and dtype in _DTYPES:
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16") from None
    if name in ("float32", "float16"):
        return name
    if name == "uint16":
        raise TypeError("uint16 arrays are taken as bfloat16 bit patterns only when the dtype "
                        "is named: pass dtype='bfloat16'")
    raise TypeError(f"dtype {name} is not supported; use float32 or float16 "
                    "(or 'bfloat16' with uint16 bit patterns)")


def _check_array(name, array, dtype_name, ndim):
    """Type, dtype, rank and layout of an input array."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.byteorder == ">":
        raise ValueError(f"{name} must be in native (little-endian) byte order")
    expected = _DTYPES[dtype_name][1]
    if array.dtype != expected:
        raise TypeError(f"{name} has dtype {array.dtype}, expected {expected}"
                        + (" (bfloat16 bit patterns)" if dtype_name == "bfloat16" else ""))
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (use numpy.ascontiguousarray)")


def _impl_code(impl):
    lib = _lib()
    if not isinstance(impl, str):
        raise ValueError(f"impl = {impl!r}; expected one of {sorted(impls())}")
    code = ctypes.c_int()
    if lib.convpool_algo_from_name(impl.encode(), ctypes.byref(code)) != 0:
        raise ValueError(f"impl = {impl!r}; expected one of {sorted(impls())}")
    return code.value


def impls() -> Dict[str, int]:
    """The library's algorithm names and their convpool_algo values."""
    if not IMPLS:
        lib = _lib()
        for code in range(64):
            name = lib.convpool_algo_name(code)
            if name is not None:
                IMPLS[name.decode()] = code
    return IMPLS


def _options(threads, impl, rows_per_item, shared_pool=False, expected_input=None):
    lib = _lib()
    opts = _native.init_struct(_native.ConvpoolOptions, lib.convpool_options_init)
    if expected_input is not None:
        if isinstance(expected_input, (str, bytes)) or not hasattr(expected_input, "__len__") \
                or len(expected_input) != 3:
            raise TypeError(f"expected_input must be (batch, height, width), got "
                            f"{expected_input!r}")
        opts.expected_batch, opts.expected_height, opts.expected_width = (
            _as_int(name, v, 1, _INT64_MAX)
            for name, v in zip(("expected_input batch", "expected_input height",
                                "expected_input width"), expected_input))
    opts.threads = 0 if threads is None else _as_int("threads", threads, 0, _INT_MAX)
    if not isinstance(shared_pool, (bool, np.bool_)):
        raise TypeError(f"shared_pool must be True or False, got {shared_pool!r}")
    opts.shared_pool = int(shared_pool)
    opts.algo = _impl_code(impl)
    opts.rows_per_item = _as_int("rows_per_item", rows_per_item, 0, _INT_MAX)
    return opts


def _layer_struct(dtype_name, c_out, c_in, k, spec, residual=False):
    """A convpool_layer filled by the library's convpool_layer_init, then the spec's values."""
    lib = _lib()
    layer = _native.init_struct(_native.ConvpoolLayer, lib.convpool_layer_init,
                                _DTYPES[dtype_name][0], c_out, c_in, k, spec.pool)
    layer.padding[:] = spec.padding
    layer.stride = spec.stride
    layer.dilation = spec.dilation
    layer.groups = spec.groups
    layer.has_residual = int(bool(residual))
    layer.pool_stride = spec.pool_stride
    layer.pool_padding[:] = spec.pool_padding
    layer.ceil_mode = int(spec.ceil_mode)
    if spec.activation == "relu":
        layer.activation = _native.ACTIVATION_RELU
    elif spec.activation is not None:
        layer.activation = _native.ACTIVATION_CLAMP
        layer.clamp_min, layer.clamp_max = spec.clamp
    return layer


def _check_weights(w, bias, dtype_name):
    """(c_out, c_in / groups, k) of w [C_out, C_in / groups, K, K] and its bias."""
    _check_array("w", w, dtype_name, 4)
    c_out, c_in, kh, kw = w.shape
    if kh != kw:
        raise ValueError(f"the filter must be square, got w of shape {w.shape}")
    if min(w.shape) < 1:
        raise ValueError(f"w has an empty dimension: shape {w.shape}")
    if bias is not None:
        _check_array("bias", bias, dtype_name, 1)
        if bias.shape != (c_out,):
            raise ValueError(f"bias has shape {bias.shape}, expected ({c_out},) to match w")
    return c_out, c_in, kh


def _check_input(x, dtype_name, c_in, groups=1):
    _check_array("x", x, dtype_name, 4)
    if x.shape[1] != c_in:
        per_group = f" ({c_in // groups} per group, groups = {groups})" if groups > 1 else ""
        raise ValueError(f"x has {x.shape[1]} input channels (shape {x.shape}), "
                         f"the weights expect {c_in}{per_group}")


def _check_residual(residual, dtype_name, shape):
    """The residual [B, C_out, OH, OW] of a run (shape: the conv output's)."""
    _check_array("residual", residual, dtype_name, 4)
    if residual.shape != tuple(shape):
        raise ValueError(f"residual has shape {residual.shape}, expected {tuple(shape)} "
                         "(the conv output [batch, c_out, OH, OW])")


def _check_out(out, x, dtype_name, shape, residual=None):
    _check_array("out", out, dtype_name, 4)
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    if np.shares_memory(out, x):
        raise ValueError("out overlaps x")
    if residual is not None and np.shares_memory(out, residual):
        raise ValueError("out overlaps residual")


def _ptr(array):
    return None if array is None else array.ctypes.data


def _bytes_text(nbytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} EiB"


def _new_output(shape, dtype_name):
    """An empty output array; MemoryError naming its shape and size when it cannot be had."""
    storage = _DTYPES[dtype_name][1]
    try:
        return np.empty(shape, dtype=storage)
    except (ValueError, MemoryError) as exc:   # ValueError: beyond numpy's maximum size
        nbytes = storage.itemsize
        for n in shape:
            nbytes *= n
        raise MemoryError(f"the output [batch, c_out, PH, PW] = {list(shape)} of {dtype_name} "
                          f"needs {_bytes_text(nbytes)}, which cannot be allocated") from exc


def _convert_parameter(array, dtype_name):
    """Weights or bias converted to the storage of dtype_name (Operator(dtype=...)).

    float32/float16: any numpy array is cast. bfloat16: uint16 arrays are bit
    patterns and are kept; floating-point arrays are rounded to bfloat16
    (nearest even). Anything else is returned unchanged, for _check_array to
    reject with its message.
    """
    if not isinstance(array, np.ndarray):
        return array
    storage = _DTYPES[dtype_name][1]
    if array.dtype == storage:
        return array
    if dtype_name == "bfloat16":
        if array.dtype.kind == "f":
            return float32_to_bfloat16(array)
        return array
    return np.ascontiguousarray(array, dtype=storage)


# --------------------------------------------------------------------------
# Operator
# --------------------------------------------------------------------------
class Operator:
    """A conv + bias + activation + maxpool layer with packed weights and its own threads.

    Operator(w, bias=None, pool=1, dtype=None, threads=None, impl="auto",
             rows_per_item=0, *, padding=0, activation=None, pool_stride=None,
             pool_padding=0, ceil_mode=False, stride=1, dilation=1, groups=1,
             residual=False)

    w        [C_out, C_in / groups, K, K] C-contiguous array. Not referenced
             after construction (the library packs a copy).
    bias     [C_out] or None.
    pool     max pooling window (1 = no pooling); its stride is pool_stride.
    dtype    None: the dtype of w (float32 or float16). Otherwise "float32"
             or "float16" (w and bias are converted to it once, here), or
             "bfloat16": uint16 w and bias are taken as bfloat16 bit
             patterns, floating-point ones are rounded to bfloat16 once, here
             (float32_to_bfloat16); x and out must then be uint16 bit
             patterns. A library without bfloat16 raises UnsupportedError.
    threads  worker threads; None or 0 = the library's choice (usable CPUs).
    shared_pool  True: run on the process-wide thread pool (set_shared_threads)
             instead of threads of its own; threads must then be None or 0.
             Runs of different operators on it take turns.
    impl     a name of impls(): "auto", "sr" (shift-reduce; no dilation),
             "im2col", "direct" (output channels in the lanes), "winograd"
             (F(4x4,3x3): k = 3, stride, dilation and groups 1),
             "winograd2x3" (F(2x2,3x3), the same layers) or "depthwise"
             (groups = C_in only).
    rows_per_item  pooled rows per work item; 0 = the plan decides.
    padding  conv zero padding: int, (h, w) or (top, left, bottom, right).
    activation  None, "relu", "relu6" or a (min, max) clamp, applied to
             conv + bias before the pooling.
    pool_stride  window stride; None = pool.
    pool_padding  -inf padding of the conv output before pooling, as
             padding; each side at most pool - 1 (ONNX's MaxPool).
    ceil_mode  ceil sizing of the pooled output (torch's rule).
    stride, dilation, groups  of the conv (groups divide C_in and C_out;
             groups = C_in is depthwise).
    residual  True: every call takes op(x, residual=r), r [B, C_out, OH, OW]
             (conv_shape) of the dtype, added to conv + bias before the
             activation.
    expected_input  (batch, height, width) of the calls to come, or None
             (any): with impl "auto" the algorithm is settled for that shape
             here and only its weights are packed (auto otherwise packs what
             any shape may need: up to 8x the bytes). Calls of other shapes
             still compute correctly, with that algorithm.

    The layer is max_pool2d(act(conv2d(x, w, bias, stride, padding, dilation,
    groups) [+ r]), pool, pool_stride, pool_padding, ceil_mode); ``spec``
    holds its normalised parameters (a LayerSpec).

    Calls are serialised per Operator: concurrent op(x) from several Python
    threads wait for each other; separate Operators run in parallel.
    """

    def __init__(self, w: np.ndarray, bias: Optional[np.ndarray] = None, pool: int = 1,
                 dtype: Any = None, threads: Optional[int] = None, impl: str = "auto",
                 rows_per_item: int = 0, *, padding: Union[int, Sequence[int]] = 0,
                 activation: Union[None, str, Tuple[float, float]] = None,
                 pool_stride: Optional[int] = None, pool_padding: Union[int, Sequence[int]] = 0,
                 ceil_mode: bool = False, stride: int = 1, dilation: int = 1, groups: int = 1,
                 residual: bool = False, shared_pool: bool = False,
                 expected_input: Optional[Sequence[int]] = None) -> None:
        self._handle = None
        self._lock = threading.Lock()
        if dtype is None:
            if not isinstance(w, np.ndarray):
                raise TypeError(f"w must be a numpy.ndarray, got {type(w).__name__}")
            dtype_name = _dtype_name_of(w.dtype)
        else:
            dtype_name = _dtype_name_of(dtype)
            w = _convert_parameter(w, dtype_name)
            bias = _convert_parameter(bias, dtype_name)
        self.c_out, group_c_in, self.k = _check_weights(w, bias, dtype_name)
        self.spec = LayerSpec.make(pool=pool, padding=padding, activation=activation,
                                   pool_stride=pool_stride, pool_padding=pool_padding,
                                   ceil_mode=ceil_mode, stride=stride, dilation=dilation,
                                   groups=groups)
        self.c_in = _as_int("c_in", group_c_in * self.spec.groups, 1, _INT64_MAX)
        if not isinstance(residual, (bool, np.bool_)):
            raise TypeError(f"residual must be True or False for an Operator (its calls take "
                            f"the array: op(x, residual=r)), got {type(residual).__name__}")
        self.residual = bool(residual)
        self.pool = self.spec.pool
        self.dtype_name = dtype_name
        self.dtype = _DTYPES[dtype_name][1]
        self.has_bias = bias is not None
        self.threads = threads
        self.impl = impl
        self.rows_per_item = rows_per_item
        self.shared_pool = bool(shared_pool)
        opts = _options(threads, impl, rows_per_item, shared_pool, expected_input)
        layer = _layer_struct(dtype_name, self.c_out, self.c_in, self.k, self.spec, self.residual)
        self._layer = layer   # for conv_shape
        self._shapes = {}     # output_shape's answers by input shape (they never change)
        handle = ctypes.c_void_p()
        status = _lib().convpool_op_create_layer(
            ctypes.byref(layer), _ptr(w), _ptr(bias), ctypes.byref(opts),
            ctypes.byref(handle))
        _check("convpool_op_create_layer", status)
        if not handle.value:
            raise InternalError("convpool_op_create_layer", _native.SUCCESS, "success",
                                "returned success but no operator")
        self._handle = handle

    # -- lifecycle ---------------------------------------------------------
    def close(self) -> None:
        """Destroy the operator (idempotent)."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is not None:
                _check("convpool_op_destroy", _lib().convpool_op_destroy(handle))

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Operator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self):
        raise TypeError("a convpool.Operator owns native resources and cannot be copied or "
                        "pickled; create another from the weights")

    def __del__(self):
        # Interpreter shutdown may already have torn down the modules used here.
        try:
            if getattr(self, "_handle", None) is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self.closed else "open"
        extra = self.spec.describe()
        return (f"<convpool.Operator {self.dtype_name} w=[{self.c_out}, "
                f"{self.c_in // self.spec.groups}, {self.k}, {self.k}] bias={self.has_bias} "
                f"pool={self.pool}{' ' + extra if extra else ''}"
                f"{' residual' if self.residual else ''} impl={self.impl} {state}>")

    # -- queries -------------------------------------------------------------
    def _live_handle(self):
        if self._handle is None:
            raise InvalidStateError("convpool.Operator", _native.INVALID_STATE,
                                    "invalid state", "the operator is closed")
        return self._handle

    def _shape_args(self, x_shape):
        if len(x_shape) != 4:
            raise ValueError(f"x_shape must be (batch, c_in, height, width), got {x_shape}")
        batch, c_in, height, width = (_as_int(n, v, 0) for n, v in
                                      zip(("batch", "c_in", "height", "width"), x_shape))
        if c_in != self.c_in:
            raise ValueError(f"x_shape has {c_in} input channels, the weights expect {self.c_in}")
        return batch, height, width

    def output_shape(self, x_shape: Sequence[int]) -> Tuple[int, ...]:
        """(batch, c_out, PH, PW) for an input of shape x_shape, from the library."""
        key = tuple(x_shape)
        if not all(type(v) is int for v in key):   # checked and converted each time
            return self._library_output_shape(key)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._library_output_shape(key)
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
            self._shapes[key] = shape
        return shape

    def _library_output_shape(self, x_shape):
        batch, height, width = self._shape_args(x_shape)
        shape = (ctypes.c_int64 * 4)()
        nbytes = ctypes.c_size_t()
        with self._lock:
            status = _lib().convpool_op_output_shape(
                self._live_handle(), batch, height, width, shape, ctypes.byref(nbytes))
        _check("convpool_op_output_shape", status)
        return tuple(int(v) for v in shape)

    def conv_shape(self, x_shape: Sequence[int]) -> Tuple[int, ...]:
        """(batch, c_out, OH, OW) of the conv output for an input of shape x_shape (the
        residual's shape), from the library."""
        batch, height, width = self._shape_args(x_shape)
        return _conv_shape(self._layer, batch, height, width)

    def plan(self, x_shape: Sequence[int]) -> Dict[str, Any]:
        """convpool_op_plan for an input of shape x_shape, as a dict."""
        batch, height, width = self._shape_args(x_shape)
        raw = _native.ConvpoolPlanInfo()
        with self._lock:
            status = _lib().convpool_op_plan(self._live_handle(), batch, height, width,
                                             ctypes.byref(raw))
        _check("convpool_op_plan", status)
        return {
            "threads": int(raw.threads),
            "items": int(raw.items),
            "rows_per_item": int(raw.rows_per_item),
            "mr": int(raw.mr),
            "nr": int(raw.nr),
            "col_block": int(raw.col_block),
            "packed_weight_bytes": int(raw.packed_weight_bytes),
            "scratch_bytes_per_thread": int(raw.scratch_bytes_per_thread),
            "isa": _decode(raw.isa),
            "kernel": _decode(raw.kernel),
        }

    def last_run_stats(self) -> Dict[str, Any]:
        """Where the time of the last successful run went, as a dict.

        Keys: wall_seconds, pack_seconds, compute_seconds, epilogue_seconds
        (phase times summed over the threads), items, threads. All zero before
        the first run. Raises UnsupportedError if the library lacks
        convpool_op_last_run_stats.
        """
        if not _native.has_symbol("convpool_op_last_run_stats"):
            raise UnsupportedError("convpool_op_last_run_stats", _native.UNSUPPORTED,
                                   "unsupported", "this libconvpool has no run statistics")
        raw = _native.ConvpoolRunStats()
        with self._lock:
            status = _lib().convpool_op_last_run_stats(self._live_handle(), ctypes.byref(raw))
        _check("convpool_op_last_run_stats", status)
        return {name: getattr(raw, name) for name, _ in raw._fields_}

    def describe(self, x_shape: Sequence[int]) -> str:
        """convpool_op_describe text for an input of shape x_shape."""
        batch, height, width = self._shape_args(x_shape)
        capacity = 8192
        while True:
            text = ctypes.create_string_buffer(capacity)
            with self._lock:
                status = _lib().convpool_op_describe(self._live_handle(), batch, height,
                                                     width, text, capacity)
            _check("convpool_op_describe", status)
            # A text that fills the buffer may have been truncated: grow and retry.
            if len(text.value) < capacity - 1 or capacity >= 1 << 20:
                return _decode(text.value)
            capacity *= 4

    # -- run -----------------------------------------------------------------
    def __call__(self, x: np.ndarray, out: Optional[np.ndarray] = None, *,
                 residual: Optional[np.ndarray] = None) -> np.ndarray:
        """Run the layer on x [B, C_in, H, W]; returns out (a new array if None).

        out, when given, must be a C-contiguous, writeable array of the
        operator's dtype and the output shape, not overlapping x or the
        residual. residual: [B, C_out, OH, OW] of the operator's dtype,
        required when the operator was made with residual=True, refused
        otherwise.
        """
        _check_input(x, self.dtype_name, self.c_in, self.spec.groups)
        if self.residual and residual is None:
            raise ValueError("this Operator was made with residual=True: call op(x, residual=r)")
        if not self.residual and residual is not None:
            raise ValueError("this Operator was made without a residual: make it with "
                             "residual=True to pass one")
        batch, _, height, width = x.shape
        shape = self.output_shape(x.shape)
        if residual is not None:
            _check_residual(residual, self.dtype_name, self.conv_shape(x.shape))
        if out is None:
            out = _new_output(shape, self.dtype_name)
        else:
            _check_out(out, x, self.dtype_name, shape, residual)
        self._run_pointers(_ptr(x), batch, height, width, _ptr(residual), _ptr(out), out.nbytes)
        return out

    def _run_pointers(self, x, batch, height, width, residual, out, out_nbytes):
        """The run on raw addresses (ints; residual None or an address), for callers that
        checked what __call__ checks: x [batch, c_in, height, width] and the residual
        contiguous, of the operator's dtype, out of out_nbytes not overlapping them (the
        library checks the sizes, the overlaps and the alignment again)."""
        with self._lock:
            status = _lib().convpool_op_run_residual(self._live_handle(), x, batch, height,
                                                     width, residual, out, out_nbytes)
        _check("convpool_op_run_residual", status)


# --------------------------------------------------------------------------
# The process-wide thread pool
# --------------------------------------------------------------------------
_shared_pool_functions: Dict[str, Any] = {}   # found once (asked at every torch call)


def _shared_pool_function(name):
    fn = _shared_pool_functions.get(name)
    if fn is not None:
        return fn
    lib = _lib()
    if not _native.has_symbol(name):
        raise UnsupportedError(name, _native.UNSUPPORTED, "unsupported",
                               "this libconvpool has no shared thread pool")
    fn = _shared_pool_functions[name] = getattr(lib, name)
    return fn


def set_shared_threads(threads: int) -> None:
    """Size the process-wide pool of Operator(shared_pool=True) (0: the usable CPUs).

    Waits for a run in flight on the pool; the next runs plan for the new
    size. Raises ValueError for a count outside 0..1024.
    """
    threads = _as_int("threads", threads, 0, _INT_MAX)
    _check("convpool_shared_pool_set_threads",
           _shared_pool_function("convpool_shared_pool_set_threads")(threads))


def shared_threads() -> int:
    """The size of the process-wide pool (what it has, or will start with)."""
    count = ctypes.c_int()
    _check("convpool_shared_pool_get_threads",
           _shared_pool_function("convpool_shared_pool_get_threads")(ctypes.byref(count)))
    return count.value


#: Whether set_shared_openmp was called: convpool.torch then leaves the mode alone.
_shared_openmp_chosen = False


def set_shared_openmp(enable: bool) -> None:
    """Run the process-wide pool on the OpenMP runtime's threads (True) or its own (False).

    In a process whose other libraries run on the same OpenMP runtime (torch,
    oneDNN) the runs then reuse their threads instead of competing with them
    for the cores; the results are the same bytes. convpool.torch turns it on
    by itself when torch and the library share one OpenMP runtime, unless this
    was called first. Raises UnsupportedError when the library was built
    without OpenMP.
    """
    global _shared_openmp_chosen
    if not isinstance(enable, (bool, np.bool_)):
        raise TypeError(f"enable must be True or False, got {enable!r}")
    _check("convpool_shared_pool_use_openmp",
           _shared_pool_function("convpool_shared_pool_use_openmp")(int(enable)))
    _shared_openmp_chosen = True


def shared_openmp() -> bool:
    """Whether the process-wide pool runs on the OpenMP runtime's threads."""
    flag = ctypes.c_int()
    _check("convpool_shared_pool_get_openmp",
           _shared_pool_function("convpool_shared_pool_get_openmp")(ctypes.byref(flag)))
    return bool(flag.value)


# --------------------------------------------------------------------------
# One-shot call
# --------------------------------------------------------------------------
def _conv_shape(layer, batch, height, width):
    """convpool_layer_conv_shape: (batch, c_out, OH, OW), or the library's error."""
    shape = (ctypes.c_int64 * 4)()
    status = _lib().convpool_layer_conv_shape(ctypes.byref(layer), batch, height, width, shape,
                                              None)
    _check("convpool_layer_conv_shape", status)
    return tuple(int(v) for v in shape)


def conv2d_maxpool(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray] = None,
                   pool: int = 1, threads: Optional[int] = None, impl: str = "auto",
                   dtype: Any = None, *, padding: Union[int, Sequence[int]] = 0,
                   activation: Union[None, str, Tuple[float, float]] = None,
                   pool_stride: Optional[int] = None,
                   pool_padding: Union[int, Sequence[int]] = 0, ceil_mode: bool = False,
                   stride: int = 1, dilation: int = 1, groups: int = 1,
                   residual: Optional[np.ndarray] = None) -> np.ndarray:
    """max_pool2d(act(conv2d(x, w, bias, stride, padding, dilation, groups) [+ residual]),
    pool, pool_stride, pool_padding, ceil_mode).

    The library's one-shot call (convpool_layer_run_residual). x [B, C_in, H, W],
    w [C_out, C_in / groups, K, K], bias [C_out] or None, residual
    [B, C_out, OH, OW] (the conv output's shape) or None: C-contiguous numpy
    arrays, all of one dtype. dtype None: that of x (float32 or float16);
    "float32"/"float16": the arrays must have it; "bfloat16": all must be
    uint16 bit patterns (nothing is converted here, unlike Operator). The
    layer keywords are those of Operator; their defaults give the original
    contract, max_pool2d(conv2d(x, w, bias), pool, pool). Returns a new array
    [B, C_out, PH, PW] of the same storage dtype.
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a numpy.ndarray, got {type(x).__name__}")
    dtype_name = _dtype_name_of(x.dtype if dtype is None else dtype)
    c_out, group_c_in, k = _check_weights(w, bias, dtype_name)
    spec = LayerSpec.make(pool=pool, padding=padding, activation=activation,
                          pool_stride=pool_stride, pool_padding=pool_padding,
                          ceil_mode=ceil_mode, stride=stride, dilation=dilation, groups=groups)
    c_in = _as_int("c_in", group_c_in * spec.groups, 1, _INT64_MAX)
    _check_input(x, dtype_name, c_in, spec.groups)
    opts = _options(threads, impl, 0)
    layer = _layer_struct(dtype_name, c_out, c_in, k, spec, residual is not None)
    batch, _, height, width = x.shape
    if residual is not None:
        _check_residual(residual, dtype_name, _conv_shape(layer, batch, height, width))
    # The output size by the contract's rule; sizes that make no sense are left
    # to the library, whose message names them.
    _, _, ph, pw = spec.output_size(height, width, k)
    try:
        out = _new_output((batch, c_out, max(ph, 0), max(pw, 0)), dtype_name)
    except MemoryError:
        out = None
    if out is None:
        # Too large to allocate. The library may refuse the layer first, with a
        # better reason (a pad beyond its limit): an operator for the layer
        # asks it, and the MemoryError then names the library's output size.
        with Operator(w, bias, dtype=dtype_name, threads=threads, impl=impl,
                      **spec.kwargs()) as op:
            out = _new_output(op.output_shape(x.shape), dtype_name)
    status = _lib().convpool_layer_run_residual(
        ctypes.byref(layer), _ptr(x), batch, height, width, _ptr(w), _ptr(bias),
        _ptr(residual), _ptr(out), out.nbytes, ctypes.byref(opts))
    _check("convpool_layer_run_residual", status)
    return out
