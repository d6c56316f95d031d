"""convpool as a PyTorch module: ConvPool2d and fuse().

    import torch, torchvision, convpool.torch as cpt
    model = torchvision.models.vgg16(weights=None).eval()
    fused, report = cpt.fuse(model)          # a copy; the model is left as it is
    print(report)
    with torch.no_grad():
        y = fused(torch.rand(1, 3, 224, 224))

ConvPool2d(conv, activation=None, pool=None) computes pool(activation(conv(x)))
for an nn.Conv2d, an optional nn.ReLU / nn.ReLU6 / nn.Hardtanh and an optional
nn.MaxPool2d in one convpool layer; the weights are packed once, when it is
built (call repack() after changing them). It is for inference: a tensor that
requires grad is refused while grad mode is on (run under torch.no_grad() or
torch.inference_mode()). forward takes and returns CPU tensors of float32,
float16 or bfloat16 ([N, C, H, W] or [C, H, W]); a contiguous input is passed
to the library without a copy (numpy views of the tensors' storage, bfloat16
as its uint16 bit patterns), other layouts are made contiguous first. The
output has the input's dtype; an operator for another dtype than the
weights' is packed on first use (the weights converted with torch's
rounding).

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

import copy
import threading
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from . import Operator, LayerSpec
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
# The module
# --------------------------------------------------------------------------
def _numpy_view(t):
    """A numpy array on the storage of a contiguous CPU tensor (bfloat16: uint16 bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


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
    here; repack() packs them again after they were changed.
    """

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
        self._lock = threading.Lock()
        self._operators = {}
        self.operator(_DTYPE_NAMES[self.weight.dtype])       # packed once, here

    @classmethod
    def from_modules(cls, conv, act=None, pool=None, **kwargs):
        """ConvPool2d(conv, act, pool, **kwargs)."""
        return cls(conv, act, pool, **kwargs)

    # -- operators -----------------------------------------------------------
    def operator(self, dtype_name):
        """The convpool.Operator for inputs of dtype_name, packed on first use."""
        with self._lock:
            op = self._operators.get(dtype_name)
            if op is None:
                dtype = {v: k for k, v in _DTYPE_NAMES.items()}[dtype_name]
                w = _numpy_view(self.weight.to(dtype).contiguous())
                b = None if self.bias is None else _numpy_view(self.bias.to(dtype).contiguous())
                op = Operator(w, b, dtype=dtype_name, impl=self.impl, threads=self.threads,
                              **self.spec.kwargs())
                self._operators[dtype_name] = op
            return op

    def repack(self):
        """Pack the weights again (after changing ``weight`` or ``bias``)."""
        with self._lock:
            operators, self._operators = self._operators, {}
        for op in operators.values():
            op.close()
        self.operator(_DTYPE_NAMES.get(self.weight.dtype, "float32"))

    # Operators hold native handles: a copy or a pickle packs its own on first use.
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_operators"] = {}
        state.pop("_lock", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lock = threading.Lock()
        self._operators = {}

    # -- run -----------------------------------------------------------------
    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"ConvPool2d expects a torch.Tensor, got {type(x).__name__}")
        if x.requires_grad:
            if torch.is_grad_enabled():
                raise RuntimeError("ConvPool2d is for inference only and the input requires "
                                   "grad; run the model under torch.no_grad() or "
                                   "torch.inference_mode()")
            x = x.detach()                   # no graph is recorded anyway
        if x.device.type != "cpu":
            raise ValueError(f"ConvPool2d runs on the CPU; the input is on {x.device}")
        dtype_name = _DTYPE_NAMES.get(x.dtype)
        if dtype_name is None:
            raise TypeError(f"ConvPool2d takes float32, float16 or bfloat16 tensors, got "
                            f"{x.dtype}")
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        if x.dim() != 4:
            raise ValueError(f"ConvPool2d expects [N, C, H, W] or [C, H, W], got shape "
                             f"{tuple(x.shape)}")
        if x.shape[1] != self.in_channels:
            raise ValueError(f"ConvPool2d expects {self.in_channels} input channels, got "
                             f"input of shape {tuple(x.shape)}")
        if x.shape[0] == 0:
            _, _, ph, pw = self.spec.output_size(x.shape[2], x.shape[3], self.kernel_size)
            out = x.new_empty((0, self.out_channels, max(ph, 0), max(pw, 0)))
        else:
            x = x.contiguous()
            op = self.operator(dtype_name)
            out = torch.empty(op.output_shape(tuple(x.shape)), dtype=x.dtype)
            op(_numpy_view(x), out=_numpy_view(out))
        return out.squeeze(0) if unbatched else out

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
