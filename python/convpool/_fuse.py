"""convpool.torch.fuse(): convpool layers in a traced copy of a model.

fuse(model) traces the model with torch.fx and looks, anywhere in the
graph, for chains

    Conv2d -> [BatchNorm2d] -> [ReLU | ReLU6 | Hardtanh | F.relu | torch.relu | clamp]
           -> [MaxPool2d | F.max_pool2d]

and for the residual tail of ResNet-like blocks

    Conv2d -> BatchNorm2d -> add(identity) -> [ReLU] -> [MaxPool2d]

stepping over nn.Identity and Dropout in eval mode. A chain continues only
through a node whose output has no other user. Each chain the binding and
the library accept becomes one ConvPool2d (BatchNorm folded into the
weights); the rest stays with torch, and the report says why. The residual
tail's add and what follows it stay with torch until the binding can add a
residual input (convpool.torch.residual_supported()); its Conv2d and
BatchNorm2d are fused on their own.

Where fx cannot trace the model (data-dependent control flow, ...), fuse()
falls back to the walk of plain nn.Sequential containers and says so in the
report.
"""

import collections
import copy
import math
import operator
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple, Union

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from . import InvalidArgumentError, UnsupportedError
from . import torch as _layers                # the binding's capabilities are asked there
from .torch import (ConvPool2d, UnsupportedLayer, activation_of, batchnorm_refusal, hooks_of,
                    pool_parameters, conv_parameters, RESIDUAL_REFUSAL, _DTYPE_NAMES)

__all__ = ["fuse", "FuseReport", "FusedLayer", "LeftModule"]


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------
#: A fused layer: the Conv2d's path, what it replaced, the times of the
#: layer on the example (milliseconds; None without an example) and the
#: algorithm the example chose when it is not the library's auto choice
#: (e.g. "direct"; None: auto's).
FusedLayer = collections.namedtuple("FusedLayer", "path source torch_ms convpool_ms impl",
                                    defaults=(None, None, None))

#: A module (or a node of the graph) left to torch: its path, its kind, why.
LeftModule = collections.namedtuple("LeftModule", "path kind reason")


@dataclass
class FuseReport:
    """What fuse() did.

    fused: FusedLayer(path, source, torch_ms, convpool_ms, impl) per
        ConvPool2d, the path being the Conv2d's, e.g. ("features.0",
        "Conv2d(3->64, k3, pad 1) + ReLU", 15.1, 13.4, None); impl names the
        algorithm the example chose over auto's (None: auto's).
    left: LeftModule(path, kind, reason) per Conv2d left to torch, and per
        module after a chain that it could not absorb (a pool after a conv
        left to torch, an activation with hooks, a residual add).
    traced: True when torch.fx traced the model; False when fuse() fell back
        to the walk of nn.Sequential containers, trace_error saying why.
    timed: whether each layer was timed against torch on an example.
    """

    fused: list = field(default_factory=list)
    left: list = field(default_factory=list)
    traced: bool = True
    trace_error: str = None
    timed: bool = False

    def left_reasons(self):
        """{path: reason} of the modules left to torch (the last reason per path)."""
        return {entry.path: entry.reason for entry in self.left}

    def __str__(self):
        how = ("traced with torch.fx" if self.traced else
               f"fx could not trace the model ({self.trace_error}); walked its nn.Sequential "
               "containers instead")
        timing = ", each layer timed against torch on the example" if self.timed else ""
        lines = [f"fused {len(self.fused)} layer(s), left {len(self.left)} module(s) to torch "
                 f"({how}{timing})"]
        for entry in self.fused:
            line = f"  fused {entry.path}: {entry.source}"
            if entry.torch_ms is not None:
                line += (f"  [torch {entry.torch_ms:.3f} ms, convpool {entry.convpool_ms:.3f} "
                         f"ms: {entry.torch_ms / entry.convpool_ms:.2f}x]")
            if entry.impl is not None:
                line += f" ({entry.impl}: faster than auto's choice on the example)"
            lines.append(line)
        lines += [f"  left  {path} ({kind}): {reason}" for path, kind, reason in self.left]
        return "\n".join(lines)


# --------------------------------------------------------------------------
# Tracing
# --------------------------------------------------------------------------
class _Tracer(torch.fx.Tracer):
    """fx's tracer, with ConvPool2d and modules with hooks kept whole.

    A module with hooks or parametrizations is called as one module, so that
    the traced copy still runs them (fx would trace through it and lose them).
    """

    def is_leaf_module(self, module, qualified_name):
        if isinstance(module, ConvPool2d) or hooks_of(module):
            return True
        return super().is_leaf_module(module, qualified_name)


def _trace(model):
    """A GraphModule of model, or the exception fx raised."""
    tracer = _Tracer()
    try:
        graph = tracer.trace(model)
    except Exception as exc:                 # fx raises many kinds (TraceError, TypeError, ...)
        return None, exc
    name = model.__class__.__name__
    return torch.fx.GraphModule(tracer.root, graph, name), None


# --------------------------------------------------------------------------
# What a node of the graph is
# --------------------------------------------------------------------------
def _module_of(node, modules):
    return modules.get(node.target) if node.op == "call_module" else None


def _args(node, names, defaults):
    """The node's arguments by name (positional first, then keywords, then defaults)."""
    values = dict(zip(names, node.args))
    for name, value in node.kwargs.items():
        values[name] = value
    for name, value in zip(names, defaults):
        values.setdefault(name, value)
    return values


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Functional activations: target -> (argument names, defaults, bounds from the arguments).
_RELU_BOUNDS = (0.0, math.inf)
_FUNCTION_ACTIVATIONS = {
    F.relu: (("input", "inplace"), (None, False), lambda a: "relu"),
    torch.relu: (("input",), (None,), lambda a: "relu"),
    torch.relu_: (("input",), (None,), lambda a: "relu"),
    F.relu6: (("input", "inplace"), (None, False), lambda a: "relu6"),
    F.hardtanh: (("input", "min_val", "max_val", "inplace"), (None, -1.0, 1.0, False),
                 lambda a: (a["min_val"], a["max_val"])),
    torch.clamp: (("input", "min", "max"), (None, None, None),
                  lambda a: (a["min"], a["max"])),
    torch.clip: (("input", "min", "max"), (None, None, None),
                 lambda a: (a["min"], a["max"])),
}
for _name, _like in (("relu_", F.relu), ("hardtanh_", F.hardtanh)):   # in-place forms
    if hasattr(F, _name):
        _FUNCTION_ACTIVATIONS[getattr(F, _name)] = _FUNCTION_ACTIVATIONS[_like]
_METHOD_ACTIVATIONS = {
    "relu": (("self",), (None,), lambda a: "relu"),
    "relu_": (("self",), (None,), lambda a: "relu"),
    "clamp": (("self", "min", "max"), (None, None, None), lambda a: (a["min"], a["max"])),
    "clamp_": (("self", "min", "max"), (None, None, None), lambda a: (a["min"], a["max"])),
    "clip": (("self", "min", "max"), (None, None, None), lambda a: (a["min"], a["max"])),
    "clip_": (("self", "min", "max"), (None, None, None), lambda a: (a["min"], a["max"])),
    "clamp_min": (("self", "min"), (None, None), lambda a: (a["min"], None)),
    "clamp_min_": (("self", "min"), (None, None), lambda a: (a["min"], None)),
}
_MAX_POOL_FUNCTIONS = {F.max_pool2d, torch.max_pool2d}
_MAX_POOL_ARGS = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                  "return_indices")
_MAX_POOL_DEFAULTS = (None, None, None, 0, 1, False, False)
_DROPOUT_MODULES = (nn.Dropout, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
                    nn.FeatureAlphaDropout) + ((nn.Dropout1d,) if hasattr(nn, "Dropout1d") else ())
_DROPOUT_FUNCTIONS = {F.dropout, F.dropout2d, F.dropout3d, F.alpha_dropout,
                      F.feature_alpha_dropout}
_ADD_FUNCTIONS = {operator.add, operator.iadd, torch.add}


@dataclass
class _Step:
    """What a node is to a chain: kind "skip", "bn", "add", "act", "pool", or "stop" (refused)."""

    kind: str
    module: object = None            # the module, or convpool's activation, or a MaxPool2d
    text: str = ""                   # for the report
    reason: str = ""                 # for "stop"
    other: object = None             # for "add": the other operand
    of: str = "skip"                 # for "stop": the kind it would have been


def _activation_step(node, modules):
    """The _Step of an activation node, or None if the node is none."""
    module = _module_of(node, modules)
    if module is not None:
        if type(module) not in (nn.ReLU, nn.ReLU6, nn.Hardtanh):
            return None
        try:
            activation_of(module)
        except UnsupportedLayer as exc:
            return _Step("stop", module, type(module).__name__, exc.reason, of="act")
        return _Step("act", module, type(module).__name__)
    if node.op == "call_function" and node.target in _FUNCTION_ACTIVATIONS:
        names, defaults, bounds = _FUNCTION_ACTIVATIONS[node.target]
        name = getattr(node.target, "__name__", str(node.target))
    elif node.op == "call_method" and node.target in _METHOD_ACTIVATIONS:
        names, defaults, bounds = _METHOD_ACTIVATIONS[node.target]
        name = node.target
    else:
        return None
    values = _args(node, names, defaults)
    if set(values) - set(names):
        return None                          # an argument we do not know
    value = bounds(values)
    if isinstance(value, tuple):
        lo, hi = value
        if (lo is not None and not _is_number(lo)) or (hi is not None and not _is_number(hi)):
            return _Step("stop", None, name, "its bounds are not constants", of="act")
        if lo is None and hi is None:
            return None
        value = (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))
    try:
        activation_of(value)
    except UnsupportedLayer as exc:
        return _Step("stop", None, name, exc.reason, of="act")
    return _Step("act", value, name)


def _pool_step(node, modules):
    module = _module_of(node, modules)
    if module is not None:
        if type(module) is not nn.MaxPool2d:
            return None
        pool = module
        text = "MaxPool2d"
    elif node.op == "call_function" and node.target in _MAX_POOL_FUNCTIONS:
        values = _args(node, _MAX_POOL_ARGS, _MAX_POOL_DEFAULTS)
        text = "max_pool2d"
        constants = [values[name] for name in _MAX_POOL_ARGS[1:]]
        if any(isinstance(v, torch.fx.Node) for v in constants) or set(values) - set(
                _MAX_POOL_ARGS):
            return _Step("stop", None, text, "its parameters are not constants", of="pool")
        try:
            pool = nn.MaxPool2d(*constants[:4], return_indices=bool(values["return_indices"]),
                                ceil_mode=bool(values["ceil_mode"]))
        except (TypeError, ValueError) as exc:
            return _Step("stop", None, text, str(exc), of="pool")
    else:
        return None
    try:
        pool_parameters(pool)
    except UnsupportedLayer as exc:
        return _Step("stop", pool, text, exc.reason, of="pool")
    return _Step("pool", pool, text)


def _step(node, value, modules):
    """What node is to a chain whose output so far is value (its argument 0)."""
    module = _module_of(node, modules)
    if node.op == "call_function" and node.target in _ADD_FUNCTIONS or (
            node.op == "call_method" and node.target in ("add", "add_")):
        operands = list(node.args[:2])
        if len(node.args) != 2 or set(node.kwargs) - {"alpha"} or node.kwargs.get("alpha", 1) != 1:
            return None
        if operands.count(value) != 1:
            return None
        in_place = node.target in (operator.iadd, "add_")
        if in_place and operands[0] is not value:
            return None                      # it writes the other operand, which others may read
        other = operands[1] if operands[0] is value else operands[0]
        if not isinstance(other, torch.fx.Node):
            return None                      # x + 1: not a residual
        return _Step("add", None, "add", other=other)
    if not node.args or node.args[0] is not value:
        return None
    if value in node.args[1:] or value in node.kwargs.values():
        return None
    if module is not None:
        if type(module) is nn.Identity and not hooks_of(module):
            return _Step("skip", module, "Identity")
        if type(module) in _DROPOUT_MODULES:
            if module.training or hooks_of(module):
                return _Step("stop", module, type(module).__name__,
                             "in training mode" if module.training else "has hooks")
            return _Step("skip", module, type(module).__name__)
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            reason = batchnorm_refusal(module)
            if reason:
                return _Step("stop", module, type(module).__name__, reason, of="bn")
            return _Step("bn", module, type(module).__name__)
    if node.op == "call_function" and node.target in _DROPOUT_FUNCTIONS:
        training = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)
        if training is False:
            return _Step("skip", None, node.target.__name__)
        return None
    return _activation_step(node, modules) or _pool_step(node, modules)


# --------------------------------------------------------------------------
# Chains
# --------------------------------------------------------------------------
_ORDER = {"bn": 1, "add": 2, "act": 3, "pool": 4}


@dataclass
class _Match:
    """A Conv2d's chain in the graph."""

    conv_node: torch.fx.Node
    path: str
    conv: nn.Module
    nodes: list                              # the conv's node first, then the absorbed ones
    batchnorm: nn.Module = None
    activation: object = None
    pool: nn.Module = None
    residual: torch.fx.Node = None           # the add's other operand
    add: torch.fx.Node = None                # the add node
    fused: ConvPool2d = None
    torch_ms: float = None
    convpool_ms: float = None
    impl: str = None                         # the algorithm the example chose over auto's


def _sole_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _node_path(node, modules, fallback):
    return node.target if node.op == "call_module" else f"{fallback} ({node.name})"


def _chain(conv_node, conv, modules, left, can_add, claimed):
    """The _Match of conv_node; what ends it for a reason goes to left.

    claimed: the add nodes already taken by a chain (an add has two inputs).
    """
    match = _Match(conv_node, conv_node.target, conv, [conv_node])
    stage, value = 0, conv_node
    while True:
        user = _sole_user(value)
        if user is None:
            break
        step = _step(user, value, modules)
        if step is None:
            break
        if step.kind == "skip":
            match.nodes.append(user)
            value = user
            continue
        if step.kind == "stop":
            if step.of == "skip" or (_ORDER[step.of] > stage and (step.of != "bn" or not stage)):
                left.append(LeftModule(_node_path(user, modules, match.path), step.text,
                                       f"after {match.path}: {step.reason}"))
            break
        if _ORDER[step.kind] <= stage or (step.kind == "bn" and stage != 0):
            break
        if step.kind == "add":
            # An add of two chains' outputs (ResNet's downsampling blocks) is
            # the first one's residual tail, the other's input.
            if user in claimed:
                break
            claimed.add(user)
            if not can_add:
                tail = _sole_user(user)
                tail_step = _step(tail, user, modules) if tail is not None else None
                act = tail_step.text if tail_step and tail_step.kind == "act" else None
                what = f"add + {act}" if act else "add"
                pattern = " -> ".join(["Conv2d"] + (["BatchNorm2d"] if stage else []) + ["add"]
                                      + ([act] if act else []))
                left.append(LeftModule(match.path, what,
                                       f"residual tail ({pattern}): the {what.replace('+', 'and')}"
                                       f" stay with torch; {RESIDUAL_REFUSAL}"))
                break
            match.residual, match.add = step.other, user
        elif step.kind == "bn":
            match.batchnorm = step.module
        elif step.kind == "act":
            match.activation = step.module
        elif step.kind == "pool":
            match.pool = step.module
        match.nodes.append(user)
        stage, value = _ORDER[step.kind], user
        if step.kind == "pool":
            break
    # Trailing skipped nodes stay absorbed; they compute nothing in eval mode.
    return match


def _follower_pool(conv_node, modules):
    """The pool node after a conv (and its activation, BatchNorm) left to torch, or None."""
    value, stage = conv_node, 0
    while True:
        user = _sole_user(value)
        step = _step(user, value, modules) if user is not None else None
        if step is None or step.kind in ("stop", "add"):
            return None
        if step.kind == "pool":
            return user
        if step.kind != "skip":
            if _ORDER[step.kind] <= stage:
                return None
            stage = _ORDER[step.kind]
        value = user


def _find_matches(gm, left):
    """Every Conv2d chain of the graph; the convs it cannot take go to left."""
    modules = dict(gm.named_modules())
    calls = collections.Counter(n.target for n in gm.graph.nodes if n.op == "call_module")
    can_add = _layers.residual_supported()
    claimed = set()
    matches = []
    for node in list(gm.graph.nodes):
        conv = _module_of(node, modules)
        if not isinstance(conv, nn.Conv2d):
            continue
        path = node.target
        try:
            if calls[path] > 1:
                raise UnsupportedLayer(conv, f"called {calls[path]} times in the graph (one "
                                             "module, several layers)")
            if len(node.args) != 1 or node.kwargs:
                raise UnsupportedLayer(conv, "called with more than its input")
            conv_parameters(conv)
        except UnsupportedLayer as exc:
            left.append(LeftModule(path, type(conv).__name__, exc.reason))
            pool = _follower_pool(node, modules)
            if pool is not None:
                left.append(LeftModule(_node_path(pool, modules, path), "MaxPool2d",
                                       f"follows {path}, which is left to torch"))
            continue
        matches.append(_chain(node, conv, modules, left, can_add, claimed))
    return matches


# --------------------------------------------------------------------------
# Timing against torch on an example
# --------------------------------------------------------------------------
class _Capture(torch.fx.Interpreter):
    """Runs the graph and keeps a copy of the outputs of the wanted nodes."""

    def __init__(self, gm, wanted):
        super().__init__(gm)
        self.wanted = wanted
        self.values = {}

    def run_node(self, node):
        result = super().run_node(node)
        if node in self.wanted and isinstance(result, torch.Tensor):
            self.values[node] = result.detach().clone()
        return result


def _run_chain(gm, match, x, residual):
    """The chain's nodes as torch runs them, from the conv's input x."""
    env = {match.conv_node.args[0]: x}
    if match.residual is not None:
        env[match.residual] = residual

    def load(arg):
        return env[arg]

    for node in match.nodes:
        args = torch.fx.node.map_arg(node.args, load)
        kwargs = torch.fx.node.map_arg(node.kwargs, load)
        if node.op == "call_module":
            env[node] = gm.get_submodule(node.target)(*args, **kwargs)
        elif node.op == "call_function":
            env[node] = node.target(*args, **kwargs)
        else:
            env[node] = getattr(args[0], node.target)(*args[1:], **kwargs)
    return env[match.nodes[-1]]


# A pause before each timed call. torch's OpenMP threads spin for a while
# after each op (libgomp's default wait policy); a convpool layer started then
# shares the cores with them, and a torch op started right after a convpool
# run waits for its sleeping threads. The pause lets the other side's threads
# settle, so that each time is the layer's own.
_SETTLE_SECONDS = 0.005


def _best_times(first, second, trials):
    """Best wall times of first() and second() in seconds, alternating, after a warm-up each."""
    first()
    second()
    best = [math.inf, math.inf]
    for _ in range(trials):
        for i, fn in enumerate((first, second)):
            time.sleep(_SETTLE_SECONDS)
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


# An algorithm tried against auto's choice on the example, and by how much
# it must be faster to be kept (the VM's best-of times move by a few percent).
# Auto chooses at create from the layer alone; the channels-in-lanes direct
# algorithm wastes fewer lanes where the image is small (a 7x7 conv output:
# 9 tiles of 6 positions against 4 of 16), which only the example shows:
# ResNet's 512 -> 512 3x3 at 7x7 ran 10-14% faster with it (Zen 3).
_TRIED_IMPL = "direct"
_TRIED_MARGIN = 0.05


def _auto_algorithm(module, x):
    """The algorithm's short name auto runs the module's layer with on x's shape.

    None where the library refuses the shape or the dtype (the module's
    calls fall back to torch then).
    """
    shape = tuple(x.shape) if x.dim() != 3 else (1,) + tuple(x.shape)   # unbatched: one image
    try:
        op = module.operator(_DTYPE_NAMES.get(x.dtype, "float32"))
        text = op.describe(shape)
    except (UnsupportedError, InvalidArgumentError, ValueError):
        return None
    for line in text.splitlines():
        if line.startswith("algorithm"):
            return line.split("(")[1].split(")")[0] if "(" in line else None
    return None


def _try_impl(m, args, trials, kwargs):
    """Time _TRIED_IMPL against auto's module on the example; keep it if faster.

    Returns the best time of the module kept, in seconds.
    """
    if _auto_algorithm(m.fused, args[0]) in (None, _TRIED_IMPL):
        return None
    try:
        other = ConvPool2d(m.conv, m.activation, m.pool, batchnorm=m.batchnorm,
                           residual=m.residual is not None, **{**kwargs, "impl": _TRIED_IMPL})
    except UnsupportedLayer:
        return None
    t_auto, t_other = _best_times(lambda: m.fused(*args), lambda: other(*args), trials)
    if other.fallback_calls or t_other >= t_auto * (1.0 - _TRIED_MARGIN):
        return t_auto
    m.fused, m.impl = other, _TRIED_IMPL
    return t_other


def _time_matches(gm, matches, example, trials, left, kwargs):
    """Time each fused chain against torch's on the example; keep torch where it is faster.

    With impl "auto", a layer whose auto choice is not _TRIED_IMPL is first
    timed with it too, and keeps the faster one. Returns the matches that
    stay fused.
    """
    wanted = {m.conv_node.args[0] for m in matches} | {m.residual for m in matches
                                                         if m.residual is not None}
    capture = _Capture(gm, wanted)
    with torch.no_grad():
        capture.run(*example)
    kept = []
    for m in matches:
        x = capture.values.get(m.conv_node.args[0])
        residual = capture.values.get(m.residual) if m.residual is not None else None
        if x is None or (m.residual is not None and residual is None):
            kept.append(m)                   # not reached by the example: not timed
            continue
        with torch.no_grad():
            args = (x,) if residual is None else (x, residual)
            if kwargs.get("impl", "auto") == "auto":
                try:                         # packed for the example's shape
                    m.fused.expect_input(tuple(x.shape))
                except (UnsupportedError, InvalidArgumentError, ValueError, TypeError):
                    # a shape the library refuses (torch computes it), or a binding
                    # without the keyword: packed for any shape
                    m.fused.expect_input(None)
            if kwargs.get("impl", "auto") == "auto" and not m.fused.fallback_calls:
                _try_impl(m, args, trials, kwargs)
            t_torch, t_fused = _best_times(lambda: _run_chain(gm, m, x, residual),
                                           lambda: m.fused(*args), trials)
        m.torch_ms, m.convpool_ms = t_torch * 1e3, t_fused * 1e3
        if m.fused.fallback_calls:
            left.append(LeftModule(m.path, type(m.conv).__name__,
                                   f"the library refuses the example's shape "
                                   f"({m.fused.fallback_reason}); torch computes it"))
        elif t_torch < t_fused:
            left.append(LeftModule(m.path, type(m.conv).__name__,
                                   f"torch is faster on the example: {m.torch_ms:.3f} ms "
                                   f"against convpool's {m.convpool_ms:.3f} ms "
                                   f"({t_fused / t_torch:.2f}x) for {m.fused.source}"))
        else:
            kept.append(m)
    return kept


# --------------------------------------------------------------------------
# Rewriting the graph
# --------------------------------------------------------------------------
def _set_submodule(root, path, module):
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def _rewrite(gm, matches):
    graph = gm.graph
    for m in matches:
        _set_submodule(gm, m.path, m.fused)
        last = m.nodes[-1]
        args = (m.conv_node.args[0],)
        if m.add is not None:
            # The add's operands as they are now: an earlier rewrite may have
            # replaced the residual's node (the previous block's output).
            chain_value = m.nodes[m.nodes.index(m.add) - 1]
            a, b = m.add.args[:2]
            args += (b if a is chain_value else a,)
        # Before the chain's last node: every input (the residual too) is defined there.
        with graph.inserting_before(last):
            fused = graph.call_module(m.path, args)
        last.replace_all_uses_with(fused)
        for node in reversed(m.nodes):
            graph.erase_node(node)
    graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()


# --------------------------------------------------------------------------
# The walk of nn.Sequential containers (when fx cannot trace the model)
# --------------------------------------------------------------------------
def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


_ACTIVATION_TYPES = (nn.ReLU, nn.ReLU6, nn.Hardtanh)


def _fuse_sequential(prefix, seq, report, kwargs):
    names = list(seq._modules.keys())
    modules = list(seq._modules.values())
    i = 0
    while i < len(modules):
        module = modules[i]
        path = _join(prefix, names[i])
        if isinstance(module, nn.MaxPool2d):
            before = type(modules[i - 1]).__name__ if i else "nothing"
            report.left.append(LeftModule(path, "MaxPool2d",
                                          f"follows {before}, not a fused Conv2d"))
            i += 1
            continue
        if not isinstance(module, nn.Conv2d):
            i += 1
            continue
        j = i + 1
        batchnorm = activation = pool = None
        if j < len(modules) and isinstance(modules[j], nn.modules.batchnorm._BatchNorm) \
                and not batchnorm_refusal(modules[j], module):
            batchnorm = modules[j]
            j += 1
        held = False                         # an activation that stays with torch ends the run
        if j < len(modules) and type(modules[j]) in _ACTIVATION_TYPES:
            try:
                activation_of(modules[j])
                activation = modules[j]
                j += 1
            except UnsupportedLayer as exc:  # hooks, bounds float32 cannot hold
                report.left.append(LeftModule(_join(prefix, names[j]),
                                              type(modules[j]).__name__, exc.reason))
                held = True
        end = j                              # one past the last module absorbed
        if not held and j < len(modules) and isinstance(modules[j], nn.MaxPool2d):
            try:
                pool_parameters(modules[j])
                pool = modules[j]
                end = j + 1
            except UnsupportedLayer as exc:  # the pool stays with torch
                report.left.append(LeftModule(_join(prefix, names[j]), "MaxPool2d",
                                              exc.reason))
            j += 1
        try:
            fused = ConvPool2d(module, activation, pool, batchnorm=batchnorm, **kwargs)
        except UnsupportedLayer as exc:
            report.left.append(LeftModule(path, type(module).__name__, exc.reason))
            if pool is not None:
                report.left.append(LeftModule(_join(prefix, names[end - 1]), "MaxPool2d",
                                              f"follows {path}, which is left to torch"))
            i = end
            continue
        seq._modules[names[i]] = fused
        for n in range(i + 1, end):
            seq._modules[names[n]] = nn.Identity()
        report.fused.append(FusedLayer(path, fused.source))
        i = j


def _walk(model, report, kwargs):
    sequentials = [(name, m) for name, m in model.named_modules()
                   if isinstance(m, nn.Sequential) and type(m).forward is nn.Sequential.forward]
    inside = set()
    for name, seq in sequentials:
        inside.update(id(m) for m in seq._modules.values())
        _fuse_sequential(name, seq, report, kwargs)
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d) and id(m) not in inside:
            report.left.append(LeftModule(name, type(m).__name__,
                                          "not in a plain nn.Sequential (its owner's forward "
                                          "may use it in other ways)"))


# --------------------------------------------------------------------------
# fuse()
# --------------------------------------------------------------------------
def _unreached(model, report, leaf_paths):
    """A reason for every Conv2d of the model that is neither fused nor left yet."""
    seen = {entry.path for entry in report.fused} | {entry.path for entry in report.left}
    for name, m in model.named_modules():
        if not isinstance(m, nn.Conv2d) or name in seen:
            continue
        owner = next((p for p in leaf_paths if name.startswith(p + ".")), None)
        reason = (f"inside {owner}, a module with hooks, which is called whole" if owner else
                  "not called as a module in the traced graph (unused in eval mode, or inside "
                  "a module fx traced through)")
        report.left.append(LeftModule(name, type(m).__name__, reason))


def _sort(model, report):
    order = {name: i for i, (name, _) in enumerate(model.named_modules(remove_duplicate=False))}

    def key(entry):
        return order.get(entry.path.split(" ")[0], len(order))
    report.fused.sort(key=key)
    report.left.sort(key=key)


def fuse(model: nn.Module, example_input: Any = None, *, inplace: bool = False,
         impl: str = "auto", threads: Optional[int] = None, report: bool = False,
         trials: int = 5) -> Union[nn.Module, Tuple[nn.Module, "FuseReport"]]:
    """Replace the model's Conv2d -> [BatchNorm2d] -> [activation] -> [MaxPool2d] chains.

    model          an nn.Module in eval mode (a model in training mode is refused:
                   BatchNorm folding and dropping Dropout are eval-mode rewrites).
    example_input  None, or an input of the model (a tensor, or a tuple of the
                   forward's arguments): each fused layer is timed against torch
                   on it once (alternating, best of `trials`, after a warm-up),
                   and torch keeps the layers where it is faster; with impl
                   "auto", a layer is first timed with the channels-in-lanes
                   direct algorithm too, where auto would choose another for
                   the example's shape, and keeps direct where it is 5%
                   faster (FusedLayer.impl; small images: a 7x7 conv output
                   fills its register tiles better). The choice holds for
                   every later input, and auto's layers are packed for the
                   example's shape (ConvPool2d.expect_input: that shape's
                   algorithm's weights alone; other shapes stay correct).
                   Without an example, every chain the binding and the
                   library accept is fused, with auto, packed for any shape.
    inplace        False (default): work on a deep copy, sharing nothing with
                   the model. True: no copy; the result shares the model's
                   modules and tensors (fx builds a new module and the model
                   is left as it is; the nn.Sequential walk rewrites it).
    impl, threads  for every ConvPool2d (threads None: the process-wide
                   pool, sized to torch.get_num_threads() at each call).
    report         True: return (module, FuseReport).

    Returns the fused module: a torch.fx.GraphModule with the model's
    outputs, or the model itself where fx could not trace it and fuse() fell
    back to the walk of nn.Sequential containers. Its FuseReport is also its
    attribute convpool_report: what was fused (and the times with an
    example), what stayed with torch and why.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"fuse expects an nn.Module, got {type(model).__name__}")
    if model.training:
        raise ValueError(f"fuse() rewrites a model for inference (BatchNorm folded with its "
                         f"running statistics, Dropout dropped) and {type(model).__name__} is "
                         f"in training mode: call model.eval() first")
    if example_input is not None and not isinstance(example_input, (tuple, list)):
        example_input = (example_input,)
    if not inplace:
        model = copy.deepcopy(model)
    kwargs = {"impl": impl, "threads": threads}
    result = FuseReport()
    gm, error = (None, None)
    root_hooks = hooks_of(model)
    if root_hooks:
        error = f"the model itself has {root_hooks}, which a traced copy would not run"
    else:
        gm, error = _trace(model)
    if gm is None:
        result.traced, result.trace_error = False, str(error).splitlines()[0] if str(error) \
            else type(error).__name__
        _walk(model, result, kwargs)
        fused_module = model
    else:
        matches = _find_matches(gm, result.left)
        built = []
        for m in matches:
            try:
                m.fused = ConvPool2d(m.conv, m.activation, m.pool, batchnorm=m.batchnorm,
                                     residual=m.residual is not None, **kwargs)
            except UnsupportedLayer as exc:
                result.left.append(LeftModule(m.path, type(m.conv).__name__, exc.reason))
                if m.pool is not None:
                    pool_node = m.nodes[-1]
                    result.left.append(LeftModule(
                        pool_node.target if pool_node.op == "call_module"
                        else f"{m.path} ({pool_node.name})", "MaxPool2d",
                        f"follows {m.path}, which is left to torch"))
                continue
            built.append(m)
        if example_input is not None:
            result.timed = True
            built = _time_matches(gm, built, example_input, trials, result.left, kwargs)
        _rewrite(gm, built)
        result.fused = [FusedLayer(m.path, m.fused.source, m.torch_ms, m.convpool_ms, m.impl)
                        for m in built]
        leaf_paths = [name for name, m in model.named_modules()
                      if name and hooks_of(m) and not isinstance(m, nn.Conv2d)]
        _unreached(model, result, leaf_paths)
        fused_module = gm
    _sort(model, result)
    fused_module.convpool_report = result
    return (fused_module, result) if report else fused_module
