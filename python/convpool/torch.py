"""convpool as a PyTorch module: ConvPool2d and fuse().

    import torch, torchvision, convpool.torch as cpt
    model = torchvision.models.vgg16(weights=None).eval()
    fused, report = cpt.fuse(model)          # a copy; the model is left as it is
    print(report)
    with torch.no_grad():
        y = fused(torch.rand(1, 3, 224, 224))

ConvPool2d(conv, activation=None, pool=None) computes pool(activation(conv(x)))
for an nn.Conv2d, an optional nn.ReLU / nn.ReLU6 / nn.Hardtanh and an optional
nn.MaxPool2d in one convpool layer. It is for inference: a tensor that
requires grad is refused while grad mode is on (run under torch.no_grad() or
torch.inference_mode()). forward takes and returns CPU tensors of float32,
float16 or bfloat16 ([N, C, H, W] or [C, H, W]); a contiguous input is passed
to the library without a copy (numpy views of the tensors' storage, bfloat16
as its uint16 bit patterns), other layouts are made contiguous first. The
output has the input's dtype.

The weights are packed when the module is built, for their dtype, and for
another input dtype on first use (the weights converted with torch's
rounding). Each call checks that ``weight`` and ``bias`` are still the
tensors that were packed, unchanged (their storage, shape and version
counter): load_state_dict, an in-place edit under torch.no_grad(), a new
tensor assigned, .to() or .half() are all seen, and the weights are packed
again before the call. An edit through ``.data`` bypasses the version
counter, as do edits of inference tensors (weights made under
torch.inference_mode()): call repack() after those.

A shape the library refuses at run time (say a pooling window larger than
the conv output, which torch pools over what there is in ceil mode) is
computed with torch's own conv2d, activation and max_pool2d, in float32 from
the input's dtype (the library's numerics: one rounding at the end), so a
fused module computes wherever the modules it replaced do. Where torch
refuses the shape as well, the library's error is raised.

forward is one call of the registered operator
torch.ops.convpool.conv2d_maxpool (x, weight, bias and the layer's
parameters), so torch.jit.trace, torch.jit.script and
torch.fx.symbolic_trace record one node, and torch.onnx.export writes the
standard Conv, Relu or Clip, and MaxPool nodes. A traced or scripted module
keeps working without the ConvPool2d it came from (it packs its weights on
its first call).

What the library does not do is refused with a reason (UnsupportedLayer, a
ValueError): conv stride, dilation or groups other than 1, non-square
kernels, padding_mode other than "zeros", max pooling with non-square
windows or strides, dilation, or return_indices, a Hardtanh whose bounds
float32 cannot hold, and modules with hooks (forward, forward pre-,
backward, state_dict hooks) or parametrizations, which a fused layer would
not run. Padding "same" and "valid" are mapped to pads (for an even kernel
"same" pads one more at the bottom and right, as torch does).

fuse(model) walks every nn.Sequential in a model and replaces each run
Conv2d -> [ReLU | ReLU6 | Hardtanh] -> [MaxPool2d] (a lone Conv2d too) by one
ConvPool2d; the modules it absorbed become nn.Identity, so the indices and
names of the other modules stay as they were. It returns the model and a
FuseReport listing what was fused and why the rest was left to torch.
"""

import collections
import copy
import functools
import math
import os
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from . import (Operator, LayerSpec, InvalidArgumentError, OutOfMemoryError,
               UnsupportedError)
from .layer import normalize_activation

__all__ = ["ConvPool2d", "fuse", "FuseReport", "UnsupportedLayer"]

_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16",
                torch.bfloat16: "bfloat16"}


class UnsupportedLayer(ValueError):
    """A module ConvPool2d cannot take; ``reason`` says why."""

    def __init__(self, module, reason):
        self.module = module
        self.reason = reason
        super().__init__(f"{type(module).__name__}: {reason}")


# --------------------------------------------------------------------------
# What the library can take from torch's modules
# --------------------------------------------------------------------------
def _pair(value):
    if isinstance(value, int):
        return (value, value)
    return tuple(value)


# Per-module hook tables (newer torch versions have more; absent ones are skipped).
_HOOK_TABLES = (
    ("_forward_hooks", "forward hook"),
    ("_forward_pre_hooks", "forward pre-hook"),
    ("_backward_hooks", "backward hook"),
    ("_backward_pre_hooks", "backward pre-hook"),
    ("_state_dict_hooks", "state_dict hook"),
    ("_state_dict_pre_hooks", "state_dict pre-hook"),
    ("_load_state_dict_pre_hooks", "load_state_dict pre-hook"),
    ("_load_state_dict_post_hooks", "load_state_dict post-hook"),
)


def _hook_name(hook):
    hook = getattr(hook, "hook", hook)       # load_state_dict pre-hooks come wrapped
    return getattr(hook, "__name__", None) or type(hook).__name__


def hooks_of(module):
    """What a fused layer would not run of module: its hooks and parametrizations ("" if none).

    spectral_norm and weight_norm show as their forward pre-hooks
    (SpectralNorm, WeightNorm); torch.nn.utils.parametrize as the
    parametrized tensors.
    """
    found = []
    for table, kind in _HOOK_TABLES:
        hooks = getattr(module, table, None)
        if hooks:
            names = ", ".join(sorted({_hook_name(h) for h in hooks.values()}))
            found.append(f"{kind}{'s' if len(hooks) > 1 else ''} ({names})")
    if parametrize.is_parametrized(module):
        found.append("parametrized " + ", ".join(sorted(module.parametrizations.keys())))
    return "; ".join(found)


def _refuse_hooks(module):
    found = hooks_of(module)
    if found:
        raise UnsupportedLayer(module, f"has {found}, which a fused layer would not run")


def conv_padding(conv):
    """(top, left, bottom, right) of a Conv2d; UnsupportedLayer if convpool cannot run it."""
    if not isinstance(conv, nn.Conv2d):
        raise UnsupportedLayer(conv, "not an nn.Conv2d")
    _refuse_hooks(conv)
    if type(conv).forward is not nn.Conv2d.forward:
        raise UnsupportedLayer(conv, f"{type(conv).__name__} has its own forward")
    if isinstance(conv.weight, nn.parameter.UninitializedParameter):
        raise UnsupportedLayer(conv, "its weights are not initialised yet (lazy module)")
    kh, kw = _pair(conv.kernel_size)
    if kh != kw:
        raise UnsupportedLayer(conv, f"kernel {kh}x{kw} is not square")
    if _pair(conv.stride) != (1, 1):
        raise UnsupportedLayer(conv, f"stride {_pair(conv.stride)} (only 1)")
    if _pair(conv.dilation) != (1, 1):
        raise UnsupportedLayer(conv, f"dilation {_pair(conv.dilation)} (only 1)")
    if conv.groups != 1:
        raise UnsupportedLayer(conv, f"groups = {conv.groups} (only 1)")
    if conv.padding_mode != "zeros":
        raise UnsupportedLayer(conv, f"padding_mode = {conv.padding_mode!r} (only 'zeros')")
    if conv.weight.dtype not in _DTYPE_NAMES:
        raise UnsupportedLayer(conv, f"weight dtype {conv.weight.dtype} (float32, float16 "
                                     "or bfloat16)")
    if conv.weight.device.type != "cpu":
        raise UnsupportedLayer(conv, f"weights on {conv.weight.device} (CPU only)")
    padding = conv.padding
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        # torch: total k - 1 per axis, the odd one at the bottom/right.
        lo, hi = (kh - 1) // 2, (kh - 1) - (kh - 1) // 2
        return (lo, lo, hi, hi)
    if isinstance(padding, str):
        raise UnsupportedLayer(conv, f"padding = {padding!r}")
    ph, pw = _pair(padding)
    return (ph, pw, ph, pw)


def activation_of(module):
    """The convpool activation of an nn.ReLU / nn.ReLU6 / nn.Hardtanh (None: nn.Identity)."""
    if module is None or type(module) is nn.Identity:
        return None
    if type(module) not in (nn.ReLU, nn.ReLU6, nn.Hardtanh):
        raise UnsupportedLayer(module, "not one of ReLU, ReLU6, Hardtanh")
    _refuse_hooks(module)
    if type(module) is nn.ReLU:
        return "relu"
    if type(module) is nn.ReLU6:
        return "relu6"
    try:
        return normalize_activation((module.min_val, module.max_val))
    except (TypeError, ValueError) as exc:      # bounds float32 cannot hold, NaN
        raise UnsupportedLayer(module, str(exc)) from None


def pool_parameters(pool):
    """The layer keywords of an nn.MaxPool2d (None: no pooling); UnsupportedLayer if not."""
    if pool is None or type(pool) is nn.Identity:
        return {}
    if type(pool) is not nn.MaxPool2d:
        raise UnsupportedLayer(pool, "not an nn.MaxPool2d")
    _refuse_hooks(pool)
    kh, kw = _pair(pool.kernel_size)
    if kh != kw:
        raise UnsupportedLayer(pool, f"window {kh}x{kw} is not square")
    stride = pool.stride if pool.stride not in (None, (), []) else pool.kernel_size
    sh, sw = _pair(stride)
    if sh != sw:
        raise UnsupportedLayer(pool, f"stride {(sh, sw)} differs between the axes")
    if _pair(pool.dilation) != (1, 1):
        raise UnsupportedLayer(pool, f"dilation {_pair(pool.dilation)} (only 1)")
    if pool.return_indices:
        raise UnsupportedLayer(pool, "return_indices=True")
    ph, pw = _pair(pool.padding)
    if max(ph, pw) > kh // 2:
        raise UnsupportedLayer(pool, f"padding {(ph, pw)} is more than half the window {kh}")
    return {"pool": kh, "pool_stride": sh, "pool_padding": (ph, pw, ph, pw),
            "ceil_mode": bool(pool.ceil_mode)}


def _describe_modules(conv, activation, pool):
    k = _pair(conv.kernel_size)[0]
    text = f"Conv2d({conv.in_channels}->{conv.out_channels}, k{k}"
    pads = conv_padding(conv)
    if any(pads):
        text += f", pad {pads[0]}" if len(set(pads)) == 1 else f", pad {pads}"
    text += ")"
    if activation is not None:
        text += f" + {type(activation).__name__}"
    if pool is not None:
        p = pool_parameters(pool)
        text += f" + MaxPool2d({p['pool']}, stride {p['pool_stride']}"
        if any(p["pool_padding"]):
            text += f", pad {p['pool_padding'][0]}" if len(set(p["pool_padding"])) == 1 \
                else f", pad {p['pool_padding'][:2]}"
        text += ", ceil)" if p["ceil_mode"] else ")"
    return text


# --------------------------------------------------------------------------
# Packed operators, checked against the tensors they were packed from
# --------------------------------------------------------------------------
_TORCH_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}


def _numpy_view(t):
    """A numpy array on the storage of a contiguous CPU tensor (bfloat16: uint16 bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _tensor_state(t):
    """What tells a tensor's contents apart: storage, shape, layout, dtype, version counter."""
    if t is None:
        return None
    try:
        version = t._version
    except RuntimeError:                     # inference tensors keep no version counter
        version = None
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, version)


def _pack(weight, bias, spec, dtype_name, impl, threads):
    """A convpool.Operator for the layer, its weights converted to dtype_name (torch's rounding)."""
    dtype = _TORCH_DTYPES[dtype_name]
    w = _numpy_view(weight.detach().to(dtype).contiguous())
    b = None if bias is None else _numpy_view(bias.detach().to(dtype).contiguous())
    return Operator(w, b, dtype=dtype_name, impl=impl, threads=threads, **spec.kwargs())


class _Packed:
    """One packed Operator and what it was packed from."""

    __slots__ = ("operator", "spec", "weight_ref", "bias_ref", "state")

    def __init__(self, operator, spec, weight, bias):
        self.operator = operator
        self.spec = spec
        # Weak references: while the tensors live no other tensor has their
        # storage, so an unchanged state means unchanged values (the version
        # counter counts in-place writes, views and .detach() share it).
        self.weight_ref = weakref.ref(weight)
        self.bias_ref = None if bias is None else weakref.ref(bias)
        self.state = (_tensor_state(weight), _tensor_state(bias))

    def matches(self, weight, bias, spec):
        if (spec is not self.spec and spec != self.spec) or self.weight_ref() is None:
            return False
        if (bias is None) != (self.bias_ref is None):
            return False
        if bias is not None and self.bias_ref() is None:
            return False
        return self.state == (_tensor_state(weight), _tensor_state(bias))


class _Packs:
    """The packed operators of one layer by input dtype, repacked when the weights change."""

    def __init__(self, impl="auto", threads=None):
        self.impl = impl
        self.threads = threads
        self.lock = threading.Lock()
        self.by_dtype = {}
        self.fallback_calls = 0              # calls computed with torch's ops
        self.fallback_reason = None          # the library's last refusal

    def operator(self, dtype_name, weight, bias, spec):
        with self.lock:
            packed = self.by_dtype.get(dtype_name)
            if packed is None or not packed.matches(weight, bias, spec):
                # A replaced Operator is not closed here (another thread may be
                # running it); it closes itself when its last reference goes.
                self.by_dtype.pop(dtype_name, None)
                packed = _Packed(_pack(weight, bias, spec, dtype_name, self.impl, self.threads),
                                 spec, weight, bias)
                self.by_dtype[dtype_name] = packed
            return packed.operator

    def clear(self):
        with self.lock:
            self.by_dtype.clear()

    def count_fallback(self, refusal):
        with self.lock:
            self.fallback_calls += 1
            self.fallback_reason = str(refusal)


# The op's cache_key argument names the _Packs of the ConvPool2d that calls it.
# A key whose module is gone (a traced, scripted or loaded copy calls the op)
# gets packs of its own, the most recently used kept.
_LIVE_PACKS = weakref.WeakValueDictionary()
_ORPHAN_PACKS = collections.OrderedDict()
_ORPHAN_LIMIT = 64
_REGISTRY_LOCK = threading.Lock()


def _new_cache_key():
    # Random, so that the keys a saved trace holds do not name another
    # process's modules (a key that did would only cost repacking).
    return int.from_bytes(os.urandom(8), "little") >> 2


def _packs_for(key):
    with _REGISTRY_LOCK:
        packs = _LIVE_PACKS.get(key)
        if packs is None:
            packs = _ORPHAN_PACKS.pop(key, None)
            if packs is None:
                packs = _Packs()
            _ORPHAN_PACKS[key] = packs
            while len(_ORPHAN_PACKS) > _ORPHAN_LIMIT:
                _ORPHAN_PACKS.popitem(last=False)
        return packs


# --------------------------------------------------------------------------
# torch's rule and ops, for the shapes the library refuses
# --------------------------------------------------------------------------
def _torch_pooled_size(size, window, stride, pad_lo, pad_hi, ceil_mode):
    """torch's pooled size: floor division, and in ceil mode no last window in the end padding."""
    pooled = (size + pad_lo + pad_hi - window + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (pooled - 1) * stride >= size + pad_lo:
        pooled -= 1
    return pooled


def _torch_output_shape(x_shape, weight_shape, spec):
    """[N, C_out, PH, PW] by torch's rules; RuntimeError where torch refuses the shape."""
    batch, _, height, width = x_shape
    c_out, _, k, _ = weight_shape
    top, left, bottom, right = spec.padding
    oh, ow = height + top + bottom - k + 1, width + left + right - k + 1
    if oh < 1 or ow < 1:
        raise RuntimeError(f"the padded input {height + top + bottom}x{width + left + right} is "
                           f"smaller than the {k}x{k} kernel")
    pt, pl, pb, pr = spec.pool_padding
    ph = _torch_pooled_size(oh, spec.pool, spec.pool_stride, pt, pb, spec.ceil_mode)
    pw = _torch_pooled_size(ow, spec.pool, spec.pool_stride, pl, pr, spec.ceil_mode)
    if ph < 1 or pw < 1:
        raise RuntimeError(f"pooling the conv output {oh}x{ow} gives {ph}x{pw}: too small")
    return (batch, c_out, ph, pw)


def _torch_layer(x, weight, bias, spec):
    """The layer with torch's ops, in float32 from x's dtype, rounded once to it at the end."""
    dtype = x.dtype
    w = weight.detach().to(dtype).float()
    b = None if bias is None else bias.detach().to(dtype).float()
    y = x.float()
    top, left, bottom, right = spec.padding
    if (top, left) == (bottom, right):
        y = F.conv2d(y, w, b, padding=(top, left))
    else:
        y = F.conv2d(F.pad(y, (left, right, top, bottom)), w, b)
    if spec.activation is not None:
        y = torch.clamp(y, *spec.clamp)
    pt, pl, pb, pr = spec.pool_padding
    if (pt, pl) != (pb, pr):
        raise ValueError(f"pool_padding {spec.pool_padding}: torch's max_pool2d pads both "
                         "sides alike")
    if spec.pool > 1 or spec.pool_stride > 1:
        y = F.max_pool2d(y, spec.pool, spec.pool_stride, (pt, pl), ceil_mode=spec.ceil_mode)
    return y.to(dtype)


# --------------------------------------------------------------------------
# The registered op: convpool::conv2d_maxpool
# --------------------------------------------------------------------------
_OP_SCHEMA = ("conv2d_maxpool(Tensor x, Tensor weight, Tensor? bias, int[4] padding, "
              "float clamp_min, float clamp_max, int pool, int pool_stride, "
              "int[4] pool_padding, bool ceil_mode, int cache_key) -> Tensor")

_GRAD_REFUSAL = ("ConvPool2d (convpool::conv2d_maxpool) is for inference only and an input "
                 "requires grad; run the model under torch.no_grad() or torch.inference_mode()")


@functools.lru_cache(maxsize=1024)
def _spec_of(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode):
    """The LayerSpec of the op's arguments (checked: ValueError/TypeError naming the bad one)."""
    if clamp_min == -math.inf and clamp_max == math.inf:
        activation = None
    elif clamp_min == 0.0 and clamp_max == math.inf:
        activation = "relu"
    else:
        activation = (clamp_min, clamp_max)
    return LayerSpec.make(pool=pool, padding=padding, activation=activation,
                          pool_stride=pool_stride, pool_padding=pool_padding,
                          ceil_mode=ceil_mode)


def _op_spec(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode):
    return _spec_of(tuple(padding), float(clamp_min), float(clamp_max), int(pool),
                    int(pool_stride), tuple(pool_padding), bool(ceil_mode))


def _check_op_tensors(x, weight, bias):
    """(dtype name, unbatched) of the op's tensors; TypeError/ValueError naming what is wrong."""
    dtype_name = _DTYPE_NAMES.get(x.dtype)
    if dtype_name is None:
        raise TypeError(f"ConvPool2d takes float32, float16 or bfloat16 tensors, got {x.dtype}")
    x_shape, w_shape = tuple(x.shape), tuple(weight.shape)
    if len(x_shape) not in (3, 4):
        raise ValueError(f"ConvPool2d expects [N, C, H, W] or [C, H, W], got shape {x_shape}")
    if len(w_shape) != 4 or w_shape[2] != w_shape[3]:
        raise ValueError(f"the weight must be [C_out, C_in, K, K], got shape {w_shape}")
    if weight.dtype not in _DTYPE_NAMES:
        raise TypeError(f"the weight has dtype {weight.dtype} (float32, float16 or bfloat16)")
    if bias is not None:
        if bias.dtype not in _DTYPE_NAMES:
            raise TypeError(f"the bias has dtype {bias.dtype} (float32, float16 or bfloat16)")
        if tuple(bias.shape) != w_shape[:1]:
            raise ValueError(f"the bias has shape {tuple(bias.shape)}, the weight {w_shape}")
    if x_shape[-3] != w_shape[1]:
        raise ValueError(f"ConvPool2d expects {w_shape[1]} input channels, got input of shape "
                         f"{x_shape}")
    return dtype_name, len(x_shape) == 3


def _refuse_grad(x, weight, bias):
    # The op has no backward: a call that would record a graph is refused
    # rather than returning an output that silently does not require grad.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (x, weight, bias)):
        raise RuntimeError(_GRAD_REFUSAL)


def _op_cpu(x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
            ceil_mode, cache_key):
    _refuse_grad(x, weight, bias)
    spec = _op_spec(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode)
    dtype_name, unbatched = _check_op_tensors(x, weight, bias)
    x = x.detach()                           # under no_grad: no graph is recorded anyway
    if unbatched:
        x = x.unsqueeze(0)
    packs = _packs_for(cache_key)
    if x.shape[0] == 0:
        out = x.new_empty(_torch_output_shape(x.shape, weight.shape, spec))
    else:
        x = x.contiguous()
        try:
            op = packs.operator(dtype_name, weight, bias, spec)
            out = torch.empty(op.output_shape(tuple(x.shape)), dtype=x.dtype)
            op(_numpy_view(x), out=_numpy_view(out))
            refusal = None
        except (InvalidArgumentError, UnsupportedError, OutOfMemoryError) as exc:
            refusal = exc
        if refusal is not None:
            # The library refuses this shape (or dtype): torch's ops compute it
            # where torch's modules would; where they cannot either, the
            # library's error (which names the value) is raised.
            try:
                out = _torch_layer(x, weight, bias, spec)
            except Exception as exc:
                raise refusal from exc
            packs.count_fallback(refusal)
    return out.squeeze(0) if unbatched else out


def _op_meta(x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
             ceil_mode, cache_key):
    _refuse_grad(x, weight, bias)
    spec = _op_spec(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode)
    _, unbatched = _check_op_tensors(x, weight, bias)
    x_shape = (1,) + tuple(x.shape) if unbatched else tuple(x.shape)
    shape = _torch_output_shape(x_shape, tuple(weight.shape), spec)
    return x.new_empty(shape[1:] if unbatched else shape)


# ONNX tensor element types of the dtypes the op takes.
_ONNX_FLOAT, _ONNX_FLOAT16 = 1, 10
_ONNX_SCALARS = {"Float": (torch.float32, _ONNX_FLOAT), "Half": (torch.float16, _ONNX_FLOAT16)}


def _onnx_refuse(message, value):
    errors = getattr(torch.onnx, "errors", None)
    if errors is not None and hasattr(errors, "SymbolicValueError"):
        raise errors.SymbolicValueError(message, value)
    raise RuntimeError(message)


def _onnx_opset(g):
    opset = getattr(g, "opset", None)        # torch >= 1.13's GraphContext
    if opset is None:
        from torch.onnx import symbolic_helper
        opset = symbolic_helper._export_onnx_opset_version
    return opset


def _onnx_symbolic(g, x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride,
                   pool_padding, ceil_mode, cache_key):
    """convpool::conv2d_maxpool as ONNX's Conv -> [Relu | Clip] -> [MaxPool]."""
    spec = _op_spec(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode)
    opset = _onnx_opset(g)
    scalar = x.type().scalarType() if x.type() is not None else None
    if scalar not in _ONNX_SCALARS:
        _onnx_refuse(f"convpool::conv2d_maxpool: ONNX's Conv takes float32 or float16 "
                     f"inputs, this one is {scalar}", x)
    dtype, onnx_type = _ONNX_SCALARS[scalar]
    rank = x.type().dim()
    if rank == 3:                            # [C, H, W]: Conv wants a batch dimension
        x = (g.op("Unsqueeze", x, g.op("Constant", value_t=torch.tensor([0])))
             if opset >= 13 else g.op("Unsqueeze", x, axes_i=[0]))
    parameters = [weight] if bias.node().mustBeNone() else [weight, bias]
    # Conv wants one element type; the op converts the weights to x's.
    parameters = [p if p.type().scalarType() == scalar else g.op("Cast", p, to_i=onnx_type)
                  for p in parameters]
    y = g.op("Conv", x, *parameters, pads_i=list(spec.padding), strides_i=[1, 1],
             dilations_i=[1, 1], group_i=1)
    if spec.activation is not None:
        lo, hi = spec.clamp
        if (lo, hi) == (0.0, math.inf):
            y = g.op("Relu", y)
        elif opset >= 11:
            y = g.op("Clip", y, g.op("Constant", value_t=torch.tensor(lo, dtype=dtype)),
                     g.op("Constant", value_t=torch.tensor(hi, dtype=dtype)))
        else:
            y = g.op("Clip", y, min_f=lo, max_f=hi)
    if spec.pool > 1 or spec.pool_stride > 1:
        attributes = {"kernel_shape_i": [spec.pool, spec.pool],
                      "strides_i": [spec.pool_stride, spec.pool_stride],
                      "pads_i": list(spec.pool_padding)}
        if spec.ceil_mode:
            if opset < 10:
                _onnx_refuse(f"convpool::conv2d_maxpool: ceil_mode needs ONNX opset 10 or "
                             f"later (MaxPool's ceil_mode); exporting to opset {opset}", x)
            attributes["ceil_mode_i"] = 1
        y = g.op("MaxPool", y, **attributes)
    if rank == 3:
        y = (g.op("Squeeze", y, g.op("Constant", value_t=torch.tensor([0])))
             if opset >= 13 else g.op("Squeeze", y, axes_i=[0]))
    return y


def _register_op():
    """Define convpool::conv2d_maxpool with its CPU and Meta kernels and its ONNX form.

    Returns the torch.library.Library that holds the registrations (None if
    another copy of this package registered the op first).
    """
    try:
        torch.ops.convpool.conv2d_maxpool
        return None
    except (AttributeError, RuntimeError):   # not defined yet (RuntimeError: torch 1.13)
        pass
    library = torch.library.Library("convpool", "DEF")
    library.define(_OP_SCHEMA)
    # No Autograd kernel: autograd falls through to these, which see grad
    # mode and refuse inputs that require grad. torch 1.13 has no such
    # fallthrough for meta tensors, hence AutogradMeta.
    library.impl("conv2d_maxpool", _op_cpu, "CPU")
    library.impl("conv2d_maxpool", _op_meta, "Meta")
    library.impl("conv2d_maxpool", _op_meta, "AutogradMeta")
    try:
        from torch.onnx import register_custom_op_symbolic, symbolic_helper
    except ImportError:                      # a torch without ONNX export: it refuses the op
        return library
    symbolic = symbolic_helper.parse_args("v", "v", "v", "is", "f", "f", "i", "i", "is", "b",
                                          "i")(_onnx_symbolic)
    register_custom_op_symbolic("convpool::conv2d_maxpool", symbolic, 9)
    return library


_LIBRARY = _register_op()


# --------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------
class ConvPool2d(nn.Module):
    """pool(activation(conv(x))) as one convpool layer (inference only).

    ConvPool2d(conv, activation=None, pool=None, *, impl="auto", threads=None)

    conv        an nn.Conv2d: square kernel, stride 1, dilation 1, groups 1,
                padding_mode "zeros", padding an int, a pair, "same" or "valid".
    activation  None, nn.ReLU, nn.ReLU6 or nn.Hardtanh (inplace or not).
    pool        None or an nn.MaxPool2d: square window and stride, any padding
                up to half the window, ceil_mode, dilation 1, no indices.
    impl, threads  as for convpool.Operator.
    None of them may have hooks or parametrizations.

    The weights and bias are kept as buffers (``weight``, ``bias``, sharing
    the conv's storage) and packed into a convpool.Operator for their dtype
    here. A call whose ``weight`` or ``bias`` changed since they were packed
    (another tensor, or an in-place write that moved the version counter:
    load_state_dict, edits under torch.no_grad()) packs them again first;
    repack() does it now (after edits through ``.data``).

    A call the library refuses (a shape, a dtype) is computed with torch's
    ops; ``fallback_calls`` counts them and ``fallback_reason`` holds the
    library's last refusal.
    """

    # Python-side state, not compiled by torch.jit.script.
    __jit_unused_properties__ = ["fallback_calls", "fallback_reason"]

    def __init__(self, conv, activation=None, pool=None, *, impl="auto", threads=None):
        super().__init__()
        padding = conv_padding(conv)
        act = activation_of(activation)
        pooling = pool_parameters(pool)
        self.in_channels = conv.in_channels
        self.out_channels = conv.out_channels
        self.kernel_size = _pair(conv.kernel_size)[0]
        self.spec = LayerSpec.make(padding=padding, activation=act, **pooling)
        self.impl = impl
        self.threads = threads
        self.source = _describe_modules(conv, activation, pool)
        self.register_buffer("weight", conv.weight.detach())
        self.register_buffer("bias", None if conv.bias is None else conv.bias.detach())
        self._set_op_arguments()
        self._attach_packs()
        self.operator(_DTYPE_NAMES[self.weight.dtype])       # packed once, here

    @classmethod
    def from_modules(cls, conv, act=None, pool=None, **kwargs):
        """ConvPool2d(conv, act, pool, **kwargs)."""
        return cls(conv, act, pool, **kwargs)

    def _set_op_arguments(self):
        # The layer as the op's arguments: plain attributes, so that
        # torch.jit.script compiles forward.
        spec = self.spec
        self._padding = list(spec.padding)
        self._clamp_min, self._clamp_max = spec.clamp or (-math.inf, math.inf)
        self._pool = spec.pool
        self._pool_stride = spec.pool_stride
        self._pool_padding = list(spec.pool_padding)
        self._ceil_mode = spec.ceil_mode

    def _attach_packs(self):
        self._packs = _Packs(self.impl, self.threads)
        self._cache_key = _new_cache_key()
        with _REGISTRY_LOCK:
            _LIVE_PACKS[self._cache_key] = self._packs

    # -- operators -----------------------------------------------------------
    def operator(self, dtype_name):
        """The convpool.Operator for inputs of dtype_name, packed on first use.

        Packed again when ``weight`` or ``bias`` changed since.
        """
        spec = _op_spec(self._padding, self._clamp_min, self._clamp_max, self._pool,
                        self._pool_stride, self._pool_padding, self._ceil_mode)
        return self._packs.operator(dtype_name, self.weight, self.bias, spec)

    def repack(self):
        """Pack the weights again now (after an edit the version counter does not see)."""
        self._packs.clear()
        self.operator(_DTYPE_NAMES.get(self.weight.dtype, "float32"))

    @property
    def fallback_calls(self):
        """How many calls were computed with torch's ops because the library refused them."""
        return self._packs.fallback_calls

    @property
    def fallback_reason(self):
        """The library's last refusal that sent a call to torch's ops (None: none yet)."""
        return self._packs.fallback_reason

    # Operators hold native handles: a copy or a pickle packs its own on first use.
    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_packs", None)
        state.pop("_cache_key", None)
        return state

    def __setstate__(self, state):
        state.pop("_operators", None)        # from older versions of this class
        state.pop("_lock", None)
        super().__setstate__(state)
        self._set_op_arguments()
        self._attach_packs()

    # -- run -----------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting():
            if not isinstance(x, (torch.Tensor, torch.fx.Proxy)):
                raise TypeError(f"ConvPool2d expects a torch.Tensor, got {type(x).__name__}")
            if isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta"):
                raise ValueError(f"ConvPool2d runs on the CPU; the input is on {x.device}")
        return torch.ops.convpool.conv2d_maxpool(
            x, self.weight, self.bias, self._padding, self._clamp_min, self._clamp_max,
            self._pool, self._pool_stride, self._pool_padding, self._ceil_mode, self._cache_key)

    def extra_repr(self):
        parts = [f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"]
        spec = self.spec
        if any(spec.padding):
            parts.append(f"padding={spec.padding}")
        if spec.activation is not None:
            parts.append(f"activation={spec.activation!r}")
        if spec.pool != 1 or spec.pool_stride != 1:
            parts.append(f"pool={spec.pool}, pool_stride={spec.pool_stride}")
        if any(spec.pool_padding):
            parts.append(f"pool_padding={spec.pool_padding}")
        if spec.ceil_mode:
            parts.append("ceil_mode=True")
        parts.append(f"bias={self.bias is not None}, impl={self.impl!r}")
        return ", ".join(parts)


# --------------------------------------------------------------------------
# fuse()
# --------------------------------------------------------------------------
@dataclass
class FuseReport:
    """What fuse() did.

    fused: (path, what it replaced) per ConvPool2d, the path being the
        Conv2d's, e.g. ("features.0", "Conv2d(3->64, k3, pad 1) + ReLU").
    left: (path, module type, reason) per Conv2d or MaxPool2d left to torch,
        and per activation after a fused Conv2d that it could not absorb.
    """

    fused: list = field(default_factory=list)
    left: list = field(default_factory=list)

    def __str__(self):
        lines = [f"fused {len(self.fused)} layer(s), left {len(self.left)} module(s) to torch"]
        lines += [f"  fused {path}: {text}" for path, text in self.fused]
        lines += [f"  left  {path} ({kind}): {reason}" for path, kind, reason in self.left]
        return "\n".join(lines)


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _fuse_sequential(prefix, seq, report, kwargs):
    names = list(seq._modules.keys())
    modules = list(seq._modules.values())
    i = 0
    while i < len(modules):
        module = modules[i]
        path = _join(prefix, names[i])
        if isinstance(module, nn.MaxPool2d):
            before = type(modules[i - 1]).__name__ if i else "nothing"
            report.left.append((path, "MaxPool2d", f"follows {before}, not a fused Conv2d"))
            i += 1
            continue
        if not isinstance(module, nn.Conv2d):
            i += 1
            continue
        try:
            conv_padding(module)
        except UnsupportedLayer as exc:
            report.left.append((path, type(module).__name__, exc.reason))
            # A pool right after it (with or without an activation) stays with it.
            j = i + 1
            if j < len(modules) and _is_activation(modules[j]):
                j += 1
            if j < len(modules) and isinstance(modules[j], nn.MaxPool2d):
                report.left.append((_join(prefix, names[j]), "MaxPool2d",
                                    f"follows {path}, which is left to torch"))
                j += 1
            i = j
            continue
        j = i + 1
        activation = pool = None
        held = False                         # an activation that stays with torch ends the run
        if j < len(modules) and type(modules[j]) in _ACTIVATION_TYPES:
            try:
                activation_of(modules[j])
                activation = modules[j]
                j += 1
            except UnsupportedLayer as exc:  # hooks, bounds float32 cannot hold
                report.left.append((_join(prefix, names[j]), type(modules[j]).__name__,
                                    exc.reason))
                held = True
        end = j                              # one past the last module absorbed
        if not held and j < len(modules) and isinstance(modules[j], nn.MaxPool2d):
            try:
                pool_parameters(modules[j])
                pool = modules[j]
                end = j + 1
            except UnsupportedLayer as exc:  # the pool stays with torch
                report.left.append((_join(prefix, names[j]), "MaxPool2d", exc.reason))
            j += 1
        fused = ConvPool2d(module, activation, pool, **kwargs)
        seq._modules[names[i]] = fused
        for n in range(i + 1, end):
            seq._modules[names[n]] = nn.Identity()
        report.fused.append((path, fused.source))
        i = j


_ACTIVATION_TYPES = (nn.ReLU, nn.ReLU6, nn.Hardtanh)


def _is_activation(module):
    try:
        return module is not None and type(module) is not nn.Identity \
            and activation_of(module) is not None
    except UnsupportedLayer:
        return False


def fuse(model, *, inplace=False, impl="auto", threads=None):
    """Replace Conv2d -> [activation] -> [MaxPool2d] runs in nn.Sequential containers.

    model    any nn.Module; its nn.Sequential containers (those that keep
             Sequential's forward) are searched at every depth.
    inplace  False (default): work on a deep copy and leave model as it is.
    impl, threads  passed to every ConvPool2d.

    Returns (model, FuseReport). Conv2d modules outside a Sequential are left
    to torch (their owner's forward may use them in other ways) and listed in
    the report, as are those convpool cannot run (stride, groups, dilation,
    non-square kernels, padding_mode), pools and activations it cannot take,
    and modules with hooks or parametrizations (a fused layer would not run
    them).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"fuse expects an nn.Module, got {type(model).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    report = FuseReport()
    kwargs = {"impl": impl, "threads": threads}
    sequentials = [(name, m) for name, m in model.named_modules()
                   if isinstance(m, nn.Sequential) and type(m).forward is nn.Sequential.forward]
    inside = set()
    for name, seq in sequentials:
        inside.update(id(m) for m in seq._modules.values())
        _fuse_sequential(name, seq, report, kwargs)
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d) and id(m) not in inside:
            report.left.append((name, type(m).__name__,
                                "not in a plain nn.Sequential (its owner's forward may use "
                                "it in other ways)"))
    order = {name: i for i, (name, _) in enumerate(model.named_modules(remove_duplicate=False))}
    report.fused.sort(key=lambda entry: order.get(entry[0], len(order)))
    report.left.sort(key=lambda entry: order.get(entry[0], len(order)))
    return model, report
