"""convpool as a PyTorch module: ConvPool2d and fuse().

    import torch, torchvision, convpool.torch as cpt
    model = torchvision.models.resnet18(weights=None).eval()
    fused = cpt.fuse(model)                  # a GraphModule; the model is left as it is
    print(fused.convpool_report)             # what was fused, and why the rest was not
    with torch.no_grad():
        y = fused(torch.rand(1, 3, 224, 224))
    fused, report = cpt.fuse(model, torch.rand(1, 3, 224, 224), report=True)   # timed

ConvPool2d(conv, activation=None, pool=None, *, batchnorm=None) computes
pool(activation(batchnorm(conv(x)))) for an nn.Conv2d, an optional
nn.BatchNorm2d (folded into the weights), an optional nn.ReLU / nn.ReLU6 /
nn.Hardtanh (or a clamp) and an optional nn.MaxPool2d in one convpool layer.
It is for inference: a tensor that requires grad is refused while grad mode
is on (run under torch.no_grad() or torch.inference_mode()). forward takes
and returns CPU tensors of float32, float16 or bfloat16 ([N, C, H, W] or
[C, H, W]); a contiguous input is passed to the library without a copy
(numpy views of the tensors' storage, bfloat16 as its uint16 bit patterns),
other layouts are made contiguous first, and a channels_last input gives a
channels_last output (the same values). The output has the input's dtype.
By default a layer runs on the process-wide pool of convpool threads, sized
to torch.get_num_threads() at each call; threads=N gives it N of its own.

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
standard Conv, [Add,] Relu or Clip, and MaxPool nodes. A traced or scripted
module keeps working without the ConvPool2d it came from (it packs its
weights on its first call).

What no convpool layer does is refused with a reason (UnsupportedLayer, a
ValueError): non-square kernels, strides or dilations that differ between
the axes, padding_mode other than "zeros", max pooling with non-square
windows or strides, dilation, or return_indices, a Hardtanh whose bounds
float32 cannot hold, and modules with hooks (forward, forward pre-,
backward, state_dict hooks) or parametrizations, which a fused layer would
not run. A conv stride, dilation or groups other than 1, and a residual
input, are passed to the binding when it takes them (convpool.Operator's
keywords) and refused with that reason when it does not; the library then
accepts the layer or says why not. Padding "same" and "valid" are mapped to
pads (for an even span "same" pads one more at the bottom and right, as
torch does).

fuse(model) (_fuse.py) traces the model with torch.fx and replaces each
Conv2d -> [BatchNorm2d] -> [activation] -> [MaxPool2d] chain it finds by one
ConvPool2d; see its docstring.
"""

import collections
import copy
import functools
import inspect
import math
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from . import (Operator, LayerSpec, InvalidArgumentError, OutOfMemoryError,
               UnsupportedError, set_shared_threads, shared_threads, set_shared_openmp)
from . import _native
from .layer import normalize_activation

__all__ = ["ConvPool2d", "fuse", "FuseReport", "UnsupportedLayer", "fold_batchnorm"]

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


# The conv's parameters besides its padding, in the order of the op's arguments.
_CONV_KEYWORDS = ("stride", "dilation", "groups")


def binding_takes(keyword):
    """Whether this convpool binding's Operator takes the keyword (stride, residual, ...).

    What the binding cannot express is refused here with that reason; what it
    can, the library accepts or refuses when the operator is created.
    """
    try:
        return keyword in inspect.signature(Operator).parameters
    except (TypeError, ValueError):
        return False


def residual_supported():
    """Whether the binding can add a residual input: an Operator call with residual=."""
    return _takes_residual(Operator.__call__)


@functools.lru_cache(maxsize=8)
def _takes_residual(call):
    # inspect.signature costs more than a small layer's run: asked once per binding.
    try:
        return "residual" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False


RESIDUAL_REFUSAL = ("this convpool binding cannot add a residual input yet (an Operator call "
                    "takes no residual=)")


def conv_parameters(conv):
    """The layer keywords of an nn.Conv2d: padding, stride, dilation and groups.

    padding is (top, left, bottom, right). UnsupportedLayer for what no
    convpool layer can be: not a Conv2d, its own forward, hooks, a lazy or
    non-square kernel, stride or dilation that differ between the axes,
    padding_mode other than "zeros", weights that are not float32, float16 or
    bfloat16 on the CPU. Whether this binding and library compute the
    stride, dilation and groups is asked when the operator is made.
    """
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
    stride, dilation = _pair(conv.stride), _pair(conv.dilation)
    if stride[0] != stride[1]:
        raise UnsupportedLayer(conv, f"stride {stride} differs between the axes")
    if dilation[0] != dilation[1]:
        raise UnsupportedLayer(conv, f"dilation {dilation} differs between the axes")
    if conv.padding_mode != "zeros":
        raise UnsupportedLayer(conv, f"padding_mode = {conv.padding_mode!r} (only 'zeros')")
    if conv.weight.dtype not in _DTYPE_NAMES:
        raise UnsupportedLayer(conv, f"weight dtype {conv.weight.dtype} (float32, float16 "
                                     "or bfloat16)")
    if conv.weight.device.type != "cpu":
        raise UnsupportedLayer(conv, f"weights on {conv.weight.device} (CPU only)")
    padding = conv.padding
    if padding == "valid":
        pads = (0, 0, 0, 0)
    elif padding == "same":
        # torch: total dilation * (k - 1) per axis, the odd one at the bottom/right.
        total = dilation[0] * (kh - 1)
        lo, hi = total // 2, total - total // 2
        pads = (lo, lo, hi, hi)
    elif isinstance(padding, str):
        raise UnsupportedLayer(conv, f"padding = {padding!r}")
    else:
        ph, pw = _pair(padding)
        pads = (ph, pw, ph, pw)
    return {"padding": pads, "stride": stride[0], "dilation": dilation[0], "groups": conv.groups}


def conv_padding(conv):
    """(top, left, bottom, right) of a Conv2d; UnsupportedLayer as conv_parameters."""
    return conv_parameters(conv)["padding"]


def _check_binding_conv(conv, parameters):
    """Refuse a stride, dilation or groups other than 1 that this binding cannot pass on."""
    for name in _CONV_KEYWORDS:
        value = parameters[name]
        if value != 1 and not binding_takes(name):
            raise UnsupportedLayer(conv, f"{name} {value}: this convpool binding computes "
                                         f"{name} 1 only (convpool.Operator takes no {name}=)")


_ACTIVATION_MODULES = {nn.ReLU: "relu", nn.ReLU6: "relu6"}


def activation_of(module):
    """The convpool activation of an nn.ReLU / nn.ReLU6 / nn.Hardtanh (None: nn.Identity).

    An activation already in convpool's form ("relu", "relu6", a (min, max)
    clamp) is checked and returned.
    """
    if module is None or type(module) is nn.Identity:
        return None
    if isinstance(module, (str, tuple, list)):
        try:
            return normalize_activation(module)
        except (TypeError, ValueError) as exc:
            raise UnsupportedLayer(module, str(exc)) from None
    if type(module) not in (nn.ReLU, nn.ReLU6, nn.Hardtanh):
        raise UnsupportedLayer(module, "not one of ReLU, ReLU6, Hardtanh")
    _refuse_hooks(module)
    if type(module) in _ACTIVATION_MODULES:
        return _ACTIVATION_MODULES[type(module)]
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


def batchnorm_refusal(bn, conv=None):
    """Why a BatchNorm2d cannot be folded into conv ("" when it can)."""
    if type(bn) not in (nn.BatchNorm2d, nn.SyncBatchNorm):
        return f"{type(bn).__name__} is not an nn.BatchNorm2d"
    found = hooks_of(bn)
    if found:
        return f"has {found}, which a fused layer would not run"
    if bn.training:
        return "in training mode (it normalises with the batch's statistics): call eval()"
    if bn.running_mean is None or bn.running_var is None:
        return "keeps no running statistics (track_running_stats=False)"
    if conv is not None and bn.num_features != conv.out_channels:
        return f"{bn.num_features} features for the conv's {conv.out_channels} channels"
    return ""


def fold_batchnorm(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A copy of conv with bn (eval mode) folded into its weight and bias.

    w' = w * gamma / sqrt(var + eps) per output channel and
    b' = (b - mean) * gamma / sqrt(var + eps) + beta, computed in float64 and
    rounded once to the conv's dtype. UnsupportedLayer if bn cannot be folded.
    """
    reason = batchnorm_refusal(bn, conv)
    if reason:
        raise UnsupportedLayer(bn, reason)
    dtype = conv.weight.dtype
    with torch.no_grad():
        weight = conv.weight.detach().double()
        bias = (conv.bias.detach().double() if conv.bias is not None
                else torch.zeros(conv.out_channels, dtype=torch.float64))
        gamma = (bn.weight.detach().double() if bn.weight is not None
                 else torch.ones(conv.out_channels, dtype=torch.float64))
        scale = gamma / torch.sqrt(bn.running_var.detach().double() + bn.eps)
        shift = bn.running_mean.detach().double()
        folded_bias = (bias - shift) * scale
        if bn.bias is not None:
            folded_bias = folded_bias + bn.bias.detach().double()
        folded = copy.copy(conv)             # same hyperparameters, own parameters
        folded._parameters = collections.OrderedDict(conv._parameters)
        folded.weight = nn.Parameter((weight * scale.reshape(-1, 1, 1, 1)).to(dtype),
                                     requires_grad=False)
        folded.bias = nn.Parameter(folded_bias.to(dtype), requires_grad=False)
    return folded


def _activation_text(activation, spec):
    if activation is None or isinstance(activation, nn.Module):
        return type(activation).__name__
    if spec == "relu":
        return "relu"
    if spec == "relu6":
        return "relu6"
    return f"clamp({spec[0]:g}, {spec[1]:g})"


def _describe_modules(conv, activation=None, pool=None, batchnorm=None, residual=False):
    parameters = conv_parameters(conv)
    k = _pair(conv.kernel_size)[0]
    text = f"Conv2d({conv.in_channels}->{conv.out_channels}, k{k}"
    for name in _CONV_KEYWORDS:
        if parameters[name] != 1:
            text += f", {name} {parameters[name]}"
    pads = parameters["padding"]
    if any(pads):
        text += f", pad {pads[0]}" if len(set(pads)) == 1 else f", pad {pads}"
    text += ")"
    if batchnorm is not None:
        text += f" + {type(batchnorm).__name__}"
    if residual:
        text += " + residual"
    act = activation_of(activation)
    if act is not None:
        text += f" + {_activation_text(activation, act)}"
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


@dataclass(frozen=True)
class _Layer:
    """The op's layer: a LayerSpec and the conv's stride, dilation and groups."""

    spec: LayerSpec
    stride: int = 1
    dilation: int = 1
    groups: int = 1

    def kwargs(self):
        """The Operator keywords (stride, dilation, groups only where not 1: the
        binding may not know them)."""
        kwargs = self.spec.kwargs()
        for name in _CONV_KEYWORDS:
            if getattr(self, name) != 1:
                kwargs[name] = getattr(self, name)
        return kwargs


def _pack(weight, bias, layer, dtype_name, impl, threads, residual=False, expected=None):
    """A convpool.Operator for the layer, its weights converted to dtype_name (torch's rounding).

    threads None: the operator runs on the process-wide pool, which follows
    torch.get_num_threads() at each call; a number: threads of its own.
    """
    dtype = _TORCH_DTYPES[dtype_name]
    w = _numpy_view(weight.detach().to(dtype).contiguous())
    b = None if bias is None else _numpy_view(bias.detach().to(dtype).contiguous())
    kwargs = layer.kwargs()
    if threads is None:
        kwargs["shared_pool"] = True
        _follow_torch_threads()              # the pool starts at torch's size
    if residual:
        kwargs["residual"] = True
    if expected is not None:
        kwargs["expected_input"] = expected
    return Operator(w, b, dtype=dtype_name, impl=impl, threads=threads, **kwargs)


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

    def __init__(self, impl="auto", threads=None, expected=None):
        self.impl = impl
        self.threads = threads
        self.expected = expected             # (batch, height, width) the operators are made for
        self.lock = threading.Lock()
        self.by_dtype = {}
        self.fallback_calls = 0              # calls computed with torch's ops
        self.fallback_reason = None          # the library's last refusal

    def operator(self, dtype_name, weight, bias, spec, residual=False):
        """The Operator for dtype_name (with a residual input or not), packed anew
        when the weights, the layer or the residual changed."""
        key = (dtype_name, bool(residual))
        with self.lock:
            packed = self.by_dtype.get(key)
            if packed is None or not packed.matches(weight, bias, spec):
                # A replaced Operator is not closed here (another thread may be
                # running it); it closes itself when its last reference goes.
                self.by_dtype.pop(key, None)
                packed = _Packed(_pack(weight, bias, spec, dtype_name, self.impl, self.threads,
                                       residual, self.expected), spec, weight, bias)
                self.by_dtype[key] = packed
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


def _torch_conv_shape(x_shape, weight_shape, layer):
    """[N, C_out, OH, OW] of the conv by torch's rule; RuntimeError where torch refuses it."""
    batch, _, height, width = x_shape
    c_out, _, k, _ = weight_shape
    top, left, bottom, right = layer.spec.padding
    span = layer.dilation * (k - 1) + 1
    if height + top + bottom < span or width + left + right < span:
        raise RuntimeError(f"the padded input {height + top + bottom}x{width + left + right} is "
                           f"smaller than the {k}x{k} kernel (dilation {layer.dilation})")
    oh = (height + top + bottom - span) // layer.stride + 1
    ow = (width + left + right - span) // layer.stride + 1
    return (batch, c_out, oh, ow)


def _torch_output_shape(x_shape, weight_shape, layer):
    """[N, C_out, PH, PW] by torch's rules; RuntimeError where torch refuses the shape.

    layer: a _Layer, or a LayerSpec (stride, dilation and groups 1).
    """
    if isinstance(layer, LayerSpec):
        layer = _Layer(layer)
    batch, c_out, oh, ow = _torch_conv_shape(x_shape, weight_shape, layer)
    spec = layer.spec
    pt, pl, pb, pr = spec.pool_padding
    ph = _torch_pooled_size(oh, spec.pool, spec.pool_stride, pt, pb, spec.ceil_mode)
    pw = _torch_pooled_size(ow, spec.pool, spec.pool_stride, pl, pr, spec.ceil_mode)
    if ph < 1 or pw < 1:
        raise RuntimeError(f"pooling the conv output {oh}x{ow} gives {ph}x{pw}: too small")
    return (batch, c_out, ph, pw)


def _torch_layer(x, weight, bias, layer, residual=None):
    """The layer with torch's ops, in float32 from x's dtype, rounded once to it at the end."""
    spec = layer.spec
    dtype = x.dtype
    w = weight.detach().to(dtype).float()
    b = None if bias is None else bias.detach().to(dtype).float()
    y = x.float()
    top, left, bottom, right = spec.padding
    conv = {"stride": layer.stride, "dilation": layer.dilation, "groups": layer.groups}
    if (top, left) == (bottom, right):
        y = F.conv2d(y, w, b, padding=(top, left), **conv)
    else:
        y = F.conv2d(F.pad(y, (left, right, top, bottom)), w, b, **conv)
    if residual is not None:
        y = y + residual.to(dtype).float()
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
# stride, dilation, groups and residual come last, with defaults, so that calls
# written before them still bind.
_OP_SCHEMA = ("conv2d_maxpool(Tensor x, Tensor weight, Tensor? bias, int[4] padding, "
              "float clamp_min, float clamp_max, int pool, int pool_stride, "
              "int[4] pool_padding, bool ceil_mode, int cache_key, int stride=1, "
              "int dilation=1, int groups=1, Tensor? residual=None) -> Tensor")

_GRAD_REFUSAL = ("ConvPool2d (convpool::conv2d_maxpool) is for inference only and an input "
                 "requires grad; run the model under torch.no_grad() or torch.inference_mode()")


@functools.lru_cache(maxsize=1024)
def _layer_of(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode,
              stride, dilation, groups):
    """The _Layer of the op's arguments (checked: ValueError/TypeError naming the bad one)."""
    if clamp_min == -math.inf and clamp_max == math.inf:
        activation = None
    elif clamp_min == 0.0 and clamp_max == math.inf:
        activation = "relu"
    else:
        activation = (clamp_min, clamp_max)
    spec = LayerSpec.make(pool=pool, padding=padding, activation=activation,
                          pool_stride=pool_stride, pool_padding=pool_padding,
                          ceil_mode=ceil_mode)
    for name, value in zip(_CONV_KEYWORDS, (stride, dilation, groups)):
        if value < 1:
            raise ValueError(f"the conv's {name} = {value} must be >= 1")
    return _Layer(spec, stride, dilation, groups)


def _op_layer(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding, ceil_mode,
              stride=1, dilation=1, groups=1):
    return _layer_of(tuple(padding), float(clamp_min), float(clamp_max), int(pool),
                     int(pool_stride), tuple(pool_padding), bool(ceil_mode), int(stride),
                     int(dilation), int(groups))


def _check_op_tensors(x, weight, bias, groups=1, residual=None):
    """(dtype name, unbatched) of the op's tensors; TypeError/ValueError naming what is wrong."""
    dtype_name = _DTYPE_NAMES.get(x.dtype)
    if dtype_name is None:
        raise TypeError(f"ConvPool2d takes float32, float16 or bfloat16 tensors, got {x.dtype}")
    x_shape, w_shape = tuple(x.shape), tuple(weight.shape)
    if len(x_shape) not in (3, 4):
        raise ValueError(f"ConvPool2d expects [N, C, H, W] or [C, H, W], got shape {x_shape}")
    if len(w_shape) != 4 or w_shape[2] != w_shape[3]:
        raise ValueError(f"the weight must be [C_out, C_in / groups, K, K], got shape {w_shape}")
    if weight.dtype not in _DTYPE_NAMES:
        raise TypeError(f"the weight has dtype {weight.dtype} (float32, float16 or bfloat16)")
    if w_shape[0] % groups:
        raise ValueError(f"the weight's {w_shape[0]} output channels are not a multiple of "
                         f"groups = {groups}")
    if bias is not None:
        if bias.dtype not in _DTYPE_NAMES:
            raise TypeError(f"the bias has dtype {bias.dtype} (float32, float16 or bfloat16)")
        if tuple(bias.shape) != w_shape[:1]:
            raise ValueError(f"the bias has shape {tuple(bias.shape)}, the weight {w_shape}")
    if x_shape[-3] != w_shape[1] * groups:
        raise ValueError(f"ConvPool2d expects {w_shape[1] * groups} input channels, got input "
                         f"of shape {x_shape}")
    if residual is not None:
        if residual.dtype not in _DTYPE_NAMES:
            raise TypeError(f"the residual has dtype {residual.dtype} (float32, float16 or "
                            "bfloat16)")
        if residual.dim() != len(x_shape):
            raise ValueError(f"the residual has shape {tuple(residual.shape)}, the input "
                             f"{x_shape}: both batched or both not")
    return dtype_name, len(x_shape) == 3


def _refuse_grad(*tensors):
    # The op has no backward: a call that would record a graph is refused
    # rather than returning an output that silently does not require grad.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(_GRAD_REFUSAL)


def _channels_last(x):
    """Whether x is a channels_last [N, C, H, W] tensor (the output is made one too)."""
    return (x.dim() == 4 and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last))


def _openmp_runtimes():
    """The OpenMP runtimes mapped into this process (file paths), or None if unknown."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps
                     if len(line.split(None, 5)) == 6}
    except OSError:
        return None
    names = ("libgomp", "libiomp", "libomp")
    return {p for p in paths if os.path.basename(p).startswith(names)}


_openmp_decided = False


def _share_torch_openmp():
    """Once per process: run the shared pool on OpenMP's threads when torch and
    the library use one and the same OpenMP runtime (Debian's torch and a
    library built with gcc both use libgomp), unless the user chose a mode.
    torch's threads spin for a while after each op; a pool of our own would
    compete with them for the cores, a parallel region reuses them."""
    global _openmp_decided
    if _openmp_decided:
        return
    _openmp_decided = True
    import convpool
    if convpool._shared_openmp_chosen or not _native.has_symbol(
            "convpool_shared_pool_use_openmp"):
        return
    runtimes = _openmp_runtimes()
    if runtimes is None or len(runtimes) != 1 or not torch.__config__.parallel_info().count(
            "OpenMP"):
        return
    try:
        set_shared_openmp(True)
    except UnsupportedError:             # a library built without OpenMP
        return
    convpool._shared_openmp_chosen = False   # chosen here, not by the user


def _follow_torch_threads():
    """Size the process-wide pool to torch.get_num_threads(), as torch's ops run."""
    _share_torch_openmp()
    want = max(1, min(torch.get_num_threads(), 1024))
    if shared_threads() != want:
        set_shared_threads(want)


def _run_operator(op, x, out, residual):
    """op's run on contiguous CPU tensors of its dtype: x [B, C_in, H, W], out fresh from
    op.output_shape, residual None or of the conv output's shape (_op_cpu checked them).
    Their addresses go to the library as they are: the numpy views and checks of
    Operator.__call__ cost more than a small layer's run, every layer of a model."""
    if op.shared_pool:
        _follow_torch_threads()
    run = getattr(op, "_run_pointers", None)
    if run is None:                          # a binding without it: the checked call
        if residual is None:
            op(_numpy_view(x), out=_numpy_view(out))
        else:
            op(_numpy_view(x), out=_numpy_view(out), residual=_numpy_view(residual))
        return
    batch, c_in, height, width = x.shape
    if c_in != op.c_in or not x.is_contiguous() or not out.is_contiguous():
        raise ValueError(f"the layer's input must be a contiguous [N, {op.c_in}, H, W] "
                         f"tensor, got shape {tuple(x.shape)}")
    run(x.data_ptr(), batch, height, width, None if residual is None else residual.data_ptr(),
        out.data_ptr(), out.numel() * out.element_size())


def _op_arguments(x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride,
                  pool_padding, ceil_mode, stride, dilation, groups, residual):
    """The op's checks, shared by its CPU and Meta implementations: (layer, dtype name,
    whether x is unbatched)."""
    _refuse_grad(x, weight, bias, residual)
    layer = _op_layer(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
                      ceil_mode, stride, dilation, groups)
    dtype_name, unbatched = _check_op_tensors(x, weight, bias, layer.groups, residual)
    return layer, dtype_name, unbatched


def _op_cpu(x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
            ceil_mode, cache_key, stride=1, dilation=1, groups=1, residual=None, packs=None):
    layer, dtype_name, unbatched = _op_arguments(x, weight, bias, padding, clamp_min, clamp_max,
                                                 pool, pool_stride, pool_padding, ceil_mode,
                                                 stride, dilation, groups, residual)
    channels_last = _channels_last(x)
    x = x.detach()                           # under no_grad: no graph is recorded anyway
    if residual is not None:
        residual = residual.detach()
    if unbatched:
        x = x.unsqueeze(0)
        residual = None if residual is None else residual.unsqueeze(0)
    if residual is not None:
        conv_shape = _torch_conv_shape(tuple(x.shape), tuple(weight.shape), layer)
        if tuple(residual.shape) != conv_shape:
            raise ValueError(f"the residual has shape {tuple(residual.shape)}, the conv "
                             f"output {conv_shape}")
    if packs is None:                        # the module's own, from its eager call
        packs = _packs_for(cache_key)
    if x.shape[0] == 0:
        out = x.new_empty(_torch_output_shape(x.shape, weight.shape, layer))
    else:
        x = x.contiguous()
        if residual is not None:
            residual = residual.to(x.dtype).contiguous()
        try:
            if residual is not None and not residual_supported():
                raise UnsupportedError("convpool.Operator", 2, "unsupported", RESIDUAL_REFUSAL)
            op = packs.operator(dtype_name, weight, bias, layer, residual is not None)
            out = _fresh_output(op.output_shape(tuple(x.shape)), x.dtype)
            _run_operator(op, x, out, residual)
            refusal = None
        except (InvalidArgumentError, UnsupportedError, OutOfMemoryError) as exc:
            refusal = exc
        if refusal is not None:
            # The library refuses this shape (or dtype): torch's ops compute it
            # where torch's modules would; where they cannot either, the
            # library's error (which names the value) is raised.
            try:
                out = _torch_layer(x, weight, bias, layer, residual)
            except Exception as exc:
                raise refusal from exc
            packs.count_fallback(refusal)
    if channels_last:
        out = out.contiguous(memory_format=torch.channels_last)
    return out.squeeze(0) if unbatched else out


#: Outputs of at least this many bytes get transparent huge pages (_fresh_output).
_HUGE_OUTPUT_BYTES = 4 << 20
_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14                          # Linux <sys/mman.h>
_madvise = None                              # libc's madvise, found at first use (False: none)


def _fresh_output(shape, dtype):
    """torch.empty(shape), asking Linux for transparent huge pages where the tensor holds
    whole 2 MiB pages (at least _HUGE_OUTPUT_BYTES).

    A large output is fresh memory (glibc maps allocations above its threshold anew), and
    the run writing it takes a page fault per 4 KiB page: on a 2-core VM a 38.5 MB output
    (MobileNetV2's 16 -> 96 1x1 at 112x112, batch 8) took 20.8 ms in the model against 4.0
    in the CLI, whose output is reused; filling such a tensor took 22 ms, 7.5 ms with the
    advice. Where the kernel's mode is "madvise" (Debian's default) the advice is what makes
    huge pages; elsewhere, or without libc's madvise, it changes nothing. The values and
    the tensor are torch's as ever.
    """
    global _madvise
    out = torch.empty(shape, dtype=dtype)
    nbytes = out.numel() * out.element_size()
    if nbytes < _HUGE_OUTPUT_BYTES or _madvise is False:
        return out
    if _madvise is None:
        try:
            import ctypes
            import ctypes.util
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = libc.madvise
            fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            fn.restype = ctypes.c_int
            _madvise = fn
        except (OSError, AttributeError):
            _madvise = False
            return out
    begin = (out.data_ptr() + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1)
    end = (out.data_ptr() + nbytes) & ~(_HUGE_PAGE - 1)
    if end > begin:
        _madvise(begin, end - begin, _MADV_HUGEPAGE)   # a hint: a failure changes nothing
    return out


def _op_meta(x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
             ceil_mode, cache_key, stride=1, dilation=1, groups=1, residual=None):
    layer, _, unbatched = _op_arguments(x, weight, bias, padding, clamp_min, clamp_max, pool,
                                        pool_stride, pool_padding, ceil_mode, stride, dilation,
                                        groups, residual)
    x_shape = (1,) + tuple(x.shape) if unbatched else tuple(x.shape)
    shape = _torch_output_shape(x_shape, tuple(weight.shape), layer)
    memory_format = torch.channels_last if _channels_last(x) else torch.contiguous_format
    return torch.empty(shape[1:] if unbatched else shape, dtype=x.dtype, device=x.device,
                       memory_format=memory_format)


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


def _onnx_unsqueeze(g, value, opset):
    return (g.op("Unsqueeze", value, g.op("Constant", value_t=torch.tensor([0])))
            if opset >= 13 else g.op("Unsqueeze", value, axes_i=[0]))


def _onnx_symbolic(g, x, weight, bias, padding, clamp_min, clamp_max, pool, pool_stride,
                   pool_padding, ceil_mode, cache_key, stride, dilation, groups, residual):
    """convpool::conv2d_maxpool as ONNX's Conv -> [Add] -> [Relu | Clip] -> [MaxPool]."""
    layer = _op_layer(padding, clamp_min, clamp_max, pool, pool_stride, pool_padding,
                      ceil_mode, stride, dilation, groups)
    spec = layer.spec
    opset = _onnx_opset(g)
    scalar = x.type().scalarType() if x.type() is not None else None
    if scalar not in _ONNX_SCALARS:
        _onnx_refuse(f"convpool::conv2d_maxpool: ONNX's Conv takes float32 or float16 "
                     f"inputs, this one is {scalar}", x)
    dtype, onnx_type = _ONNX_SCALARS[scalar]
    rank = x.type().dim()
    has_residual = residual is not None and not residual.node().mustBeNone()
    if rank == 3:                            # [C, H, W]: Conv wants a batch dimension
        x = _onnx_unsqueeze(g, x, opset)
        if has_residual:
            residual = _onnx_unsqueeze(g, residual, opset)
    parameters = [weight] if bias.node().mustBeNone() else [weight, bias]
    # Conv wants one element type; the op converts the weights to x's.
    parameters = [p if p.type().scalarType() == scalar else g.op("Cast", p, to_i=onnx_type)
                  for p in parameters]
    y = g.op("Conv", x, *parameters, pads_i=list(spec.padding),
             strides_i=[layer.stride, layer.stride],
             dilations_i=[layer.dilation, layer.dilation], group_i=layer.groups)
    if has_residual:
        if residual.type().scalarType() != scalar:
            residual = g.op("Cast", residual, to_i=onnx_type)
        y = g.op("Add", y, residual)
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
                                          "i", "i", "i", "i", "v")(_onnx_symbolic)
    register_custom_op_symbolic("convpool::conv2d_maxpool", symbolic, 9)
    return library


_LIBRARY = _register_op()


# --------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------
class ConvPool2d(nn.Module):
    """pool(activation(conv(x) [+ residual])) as one convpool layer (inference only).

    ConvPool2d(conv, activation=None, pool=None, *, batchnorm=None, residual=False,
               impl="auto", threads=None)

    conv        an nn.Conv2d: square kernel, padding_mode "zeros", padding an
                int, a pair, "same" or "valid"; stride, dilation and groups
                as far as this binding and library compute them (today 1;
                UnsupportedLayer says which one is not).
    activation  None, nn.ReLU, nn.ReLU6 or nn.Hardtanh (inplace or not), or
                convpool's form of one: "relu", "relu6", a (min, max) clamp.
    pool        None or an nn.MaxPool2d: square window and stride, any padding
                up to half the window, ceil_mode, dilation 1, no indices.
    batchnorm   None or an nn.BatchNorm2d in eval mode, folded into the
                weights and bias (in float64, rounded once to their dtype).
    residual    True: forward(x, residual) adds residual (the conv output's
                shape) before the activation, when the binding can.
    impl        as for convpool.Operator.
    threads     None (default): the process-wide pool of every convpool
                operator, sized to torch.get_num_threads() at each call; a
                number: threads of this layer's own.
    None of them may have hooks or parametrizations.

    The weights and bias are kept as buffers (``weight``, ``bias``, sharing
    the conv's storage unless a batchnorm was folded into them) and packed
    into a convpool.Operator for their dtype here. A call whose ``weight`` or
    ``bias`` changed since they were packed (another tensor, or an in-place
    write that moved the version counter: load_state_dict, edits under
    torch.no_grad()) packs them again first; repack() does it now (after
    edits through ``.data``).

    A call the library refuses (a shape, a dtype) is computed with torch's
    ops; ``fallback_calls`` counts them and ``fallback_reason`` holds the
    library's last refusal.
    """

    # Python-side state, not compiled by torch.jit.script.
    __jit_unused_properties__ = ["fallback_calls", "fallback_reason"]

    def __init__(self, conv: nn.Conv2d,
                 activation: Union[None, nn.Module, str, Tuple[float, float]] = None,
                 pool: Optional[nn.MaxPool2d] = None, *,
                 batchnorm: Optional[nn.BatchNorm2d] = None, residual: bool = False,
                 impl: str = "auto", threads: Optional[int] = None) -> None:
        super().__init__()
        parameters = conv_parameters(conv)
        act = activation_of(activation)
        pooling = pool_parameters(pool)
        _check_binding_conv(conv, parameters)
        if residual and not residual_supported():
            raise UnsupportedLayer(conv, f"a residual input: {RESIDUAL_REFUSAL}")
        source = _describe_modules(conv, activation, pool, batchnorm, residual)
        if batchnorm is not None:
            conv = fold_batchnorm(conv, batchnorm)
        self.in_channels = conv.in_channels
        self.out_channels = conv.out_channels
        self.kernel_size = _pair(conv.kernel_size)[0]
        self.stride = parameters["stride"]
        self.dilation = parameters["dilation"]
        self.groups = parameters["groups"]
        self.residual = bool(residual)
        self.spec = LayerSpec.make(padding=parameters["padding"], activation=act, **pooling)
        self.impl = impl
        self.threads = threads
        self.expected_input = None
        self.source = source
        self.register_buffer("weight", conv.weight.detach())
        self.register_buffer("bias", None if conv.bias is None else conv.bias.detach())
        self._set_op_arguments()
        self._attach_packs()
        try:
            self.operator(_DTYPE_NAMES[self.weight.dtype])      # packed once, here
        except (UnsupportedError, InvalidArgumentError) as exc:
            raise UnsupportedLayer(conv, f"the library refuses the layer: {exc.message or exc}") \
                from exc

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
        # Modules pickled before these existed computed stride 1 without a residual.
        self.__dict__.setdefault("stride", 1)
        self.__dict__.setdefault("dilation", 1)
        self.__dict__.setdefault("groups", 1)
        self.__dict__.setdefault("residual", False)
        self.__dict__.setdefault("expected_input", None)

    def _attach_packs(self):
        self._packs = _Packs(self.impl, self.threads, self.expected_input)
        self._cache_key = _new_cache_key()
        with _REGISTRY_LOCK:
            _LIVE_PACKS[self._cache_key] = self._packs

    # -- operators -----------------------------------------------------------
    def operator(self, dtype_name: str) -> Any:
        """The convpool.Operator for inputs of dtype_name, packed on first use.

        Packed again when ``weight`` or ``bias`` changed since.
        """
        layer = _op_layer(self._padding, self._clamp_min, self._clamp_max, self._pool,
                          self._pool_stride, self._pool_padding, self._ceil_mode, self.stride,
                          self.dilation, self.groups)
        return self._packs.operator(dtype_name, self.weight, self.bias, layer)

    def expect_input(self, shape: Optional[Sequence[int]]) -> None:
        """Pack for inputs of this shape ([B, C_in, H, W], or [C_in, H, W] for one
        image; None: any shape), now.

        With impl "auto" the library settles its choice for that shape and packs
        that algorithm's weights alone (convpool.Operator's expected_input: for a
        512-channel 3x3 layer at 7x7, 9.4 MB where any shape needs 73). Inputs of
        other shapes are still computed correctly, by that algorithm.
        ``expected_input`` holds (batch, height, width) or None; a copy or a
        pickle keeps it. fuse() with an example input sets it for every layer.
        """
        if shape is None:
            expected = None
        else:
            shape = tuple(int(v) for v in shape)
            if len(shape) == 3:
                shape = (1,) + shape
            if len(shape) != 4 or shape[1] != self.in_channels or min(shape) < 1:
                raise ValueError(f"expect_input: {shape} is not an input shape [B, "
                                 f"{self.in_channels}, H, W] of this layer")
            expected = (shape[0], shape[2], shape[3])
        self.expected_input = expected
        self._packs.expected = expected
        self.repack()

    def repack(self) -> None:
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
    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.residual != (residual is not None):
            raise ValueError("ConvPool2d: a residual input is required by a layer made with "
                             "residual=True, and refused by the others")
        if not torch.jit.is_scripting():
            if not isinstance(x, (torch.Tensor, torch.fx.Proxy)):
                raise TypeError(f"ConvPool2d expects a torch.Tensor, got {type(x).__name__}")
            if isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta"):
                raise ValueError(f"ConvPool2d runs on the CPU; the input is on {x.device}")
            if (type(x) is torch.Tensor and x.device.type == "cpu" and
                    (residual is None or type(residual) is torch.Tensor) and
                    not torch.jit.is_tracing()):
                # Eager: the op's CPU implementation without the dispatcher's boxing
                # of fifteen arguments (a trace, fx and subclasses still see the op).
                return _op_cpu(
                    x, self.weight, self.bias, self._padding, self._clamp_min,
                    self._clamp_max, self._pool, self._pool_stride, self._pool_padding,
                    self._ceil_mode, self._cache_key, self.stride, self.dilation, self.groups,
                    residual, self._packs)
        return torch.ops.convpool.conv2d_maxpool(
            x, self.weight, self.bias, self._padding, self._clamp_min, self._clamp_max,
            self._pool, self._pool_stride, self._pool_padding, self._ceil_mode, self._cache_key,
            self.stride, self.dilation, self.groups, residual)

    def extra_repr(self):
        parts = [f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"]
        for name in _CONV_KEYWORDS:
            if getattr(self, name) != 1:
                parts.append(f"{name}={getattr(self, name)}")
        spec = self.spec
        if any(spec.padding):
            parts.append(f"padding={spec.padding}")
        if self.residual:
            parts.append("residual=True")
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


# fuse() and its report (the fx matcher) live in _fuse.py.
from ._fuse import FuseReport, fuse  # noqa: E402
