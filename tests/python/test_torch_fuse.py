#!/usr/bin/env python3
"""Tests of convpool.torch.fuse() on the graph (torch.fx) and what goes with it:

- matching anywhere in a model: modules and functional forms of the
  activations and pools, nn.Identity and Dropout stepped over, a node with
  other users ending the chain, convs called twice, the residual tail left
  to torch (its add and ReLU), the walk of nn.Sequential where fx cannot trace;
- a binding that takes stride=, dilation=, groups= and residual= (a stand-in
  that computes with torch) gets those layers, ResNet-18's residual tails
  included, and its refusals are reported;
- BatchNorm folding: float64 arithmetic rounded once to the model's dtype,
  BatchNorms that cannot be folded, models in training mode refused;
- threads: the process-wide pool follows torch.get_num_threads(), a given
  threads= wins, the same bytes for every count;
- timing on an example: times in the report, torch kept where it is faster
  or where the library refuses the example's shape; the direct algorithm
  tried against auto's choice and kept where it is faster;
- tensor conventions: channels_last in and out, strided inputs, float16 and
  bfloat16 models, inputs that require grad refused;
- CONVPOOL_VERBOSE=1 from Python: the library's create, run and failed-create lines
  on stderr, none without it.

    python3 tests/python/test_torch_fuse.py [-v]

Small models and inputs only (a few seconds); torchvision's ResNet-18 runs
on a 64x64 input and is skipped, saying why, without torchvision.
"""

import contextlib
import copy
import operator
import os
import subprocess
import sys
import unittest
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.fx  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import convpool  # noqa: E402
import convpool.torch as cpt  # noqa: E402
from convpool import _fuse  # noqa: E402

try:
    import torchvision
    TORCHVISION = None
except ImportError as exc:          # Debian: python3-torchvision
    torchvision = None
    TORCHVISION = f"torchvision is not installed ({exc}); install python3-torchvision"


def relative_error(got, want):
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max())


def run(model, *args):
    with torch.no_grad():
        return model(*args)


def paths(report):
    return [f.path for f in report.fused]


def randomize_batchnorms(model, seed=0):
    """Running statistics and affine parameters that are not the identity."""
    generator = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.rand(n, generator=generator) - 0.5)
                m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                    m.bias.copy_(torch.rand(n, generator=generator) - 0.5)
    return model


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------
class Functional(nn.Module):
    """Convs followed by the functional forms of the activations and pools."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 3, padding=1)
        self.c4 = nn.Conv2d(8, 8, 1)
        self.c5 = nn.Conv2d(8, 8, 3, padding=1)
        self.c6 = nn.Conv2d(8, 8, 3, padding=1)
        self.drop = nn.Dropout(0.5)
        self.ident = nn.Identity()

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x), inplace=True), 2)
        x = torch.max_pool2d(torch.clamp(self.ident(self.c2(x)), 0, 6), 3, 1, 1)
        x = self.drop(F.hardtanh(self.c3(x), -0.5, 0.5))
        x = F.dropout(self.c4(x), 0.3, training=False).clamp(min=-0.1)
        x = torch.relu(self.c5(x))
        return F.max_pool2d(self.c6(x).relu(), kernel_size=2, stride=2, ceil_mode=True)


class Branches(nn.Module):
    """Outputs used twice end a chain where they are used."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, padding=1)
        self.b = nn.Conv2d(6, 6, 3, padding=1)
        self.c = nn.Conv2d(6, 6, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        y = self.a(x)                 # y is used twice: the conv alone
        z = self.act(self.b(F.relu(y)))  # the ReLU's output is used twice: no pool
        return self.pool(z) + F.max_pool2d(z, 2), torch.sigmoid(self.c(y + 0))


class Shared(nn.Module):
    """One Conv2d called twice: two layers with one set of weights."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(F.relu(self.conv(x))))


class Block(nn.Module):
    """ResNet's BasicBlock: conv-bn-relu, conv-bn, add the identity, relu."""

    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                      nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.down is not None:
            identity = self.down(x)
        out += identity
        return self.relu(out)


class DataDependent(nn.Module):
    """Control flow on a tensor's value: fx cannot trace it."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.other = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        x = self.features(x)
        if x.sum() > 0:
            x = self.other(x)
        return x


def small_resnet():
    torch.manual_seed(7)
    return randomize_batchnorms(nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), Block(8, 8), Block(8, 16, stride=2), Block(16, 16)).eval())


# --------------------------------------------------------------------------
# A binding of the future: stride=, dilation=, groups= and residual=
# --------------------------------------------------------------------------
class FutureOperator:
    """Stands for a binding whose Operator takes stride=, dilation=, groups= and
    whose calls take residual=; it computes with torch from the weights it
    keeps. ``refuse`` names a keyword whose values other than 1 the "library"
    refuses, as the real one would (UnsupportedError)."""

    refuse = None
    created = []

    def __init__(self, w, bias=None, pool=1, dtype=None, threads=None, impl="auto",
                 rows_per_item=0, *, padding=0, activation=None, pool_stride=None,
                 pool_padding=0, ceil_mode=False, shared_pool=False, stride=1, dilation=1,
                 groups=1, residual=False):
        values = {"stride": stride, "dilation": dilation, "groups": groups}
        if self.refuse and values[self.refuse] != 1:
            raise convpool.UnsupportedError(
                "convpool_op_create_layer", 2, "unsupported",
                f"conv {self.refuse} = {values[self.refuse]} is not supported (only 1)")
        spec = convpool.LayerSpec.make(pool=pool, padding=padding, activation=activation,
                                       pool_stride=pool_stride, pool_padding=pool_padding,
                                       ceil_mode=ceil_mode)
        self.layer = cpt._Layer(spec, stride, dilation, groups)
        self.w = torch.from_numpy(np.array(w, dtype=np.float32))
        self.b = None if bias is None else torch.from_numpy(np.array(bias, dtype=np.float32))
        self.shared_pool = shared_pool
        self.residual_calls = 0
        FutureOperator.created.append(self)

    def output_shape(self, x_shape):
        return cpt._torch_output_shape(tuple(x_shape), tuple(self.w.shape), self.layer)

    def __call__(self, x, out=None, residual=None):
        r = None if residual is None else torch.from_numpy(residual)
        self.residual_calls += residual is not None
        y = cpt._torch_layer(torch.from_numpy(x), self.w, self.b, self.layer, r)
        out[...] = y.numpy()
        return out


@contextlib.contextmanager
def future_binding(refuse=None):
    real = cpt.Operator
    FutureOperator.refuse = refuse
    FutureOperator.created = []
    cpt.Operator = FutureOperator
    try:
        yield
    finally:
        cpt.Operator = real


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------
class TestMatching(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(1)

    def test_functional_forms(self):
        model = Functional().eval()
        x = torch.rand(2, 3, 20, 20) * 2 - 1
        want = run(model, x)
        fused, report = cpt.fuse(model, report=True)
        self.assertLessEqual(relative_error(run(fused, x), want), 1e-5)
        self.assertEqual(paths(report), ["c1", "c2", "c3", "c4", "c5", "c6"], str(report))
        sources = {f.path: f.source for f in report.fused}
        self.assertIn("+ relu + MaxPool2d(2, stride 2)", sources["c1"])
        self.assertIn("+ clamp(0, 6) + MaxPool2d(3, stride 1, pad 1)", sources["c2"])
        self.assertIn("clamp(-0.5, 0.5)", sources["c3"])
        self.assertIn("clamp(-0.1, inf)", sources["c4"])
        self.assertIn("+ relu", sources["c5"])
        self.assertIn("MaxPool2d(2, stride 2, ceil)", sources["c6"])
        self.assertEqual(report.left, [])
        # One op per chain, nothing else of it left in the graph.
        kinds = [n.op for n in fused.graph.nodes]
        self.assertEqual(kinds, ["placeholder"] + ["call_module"] * 6 + ["output"], fused.code)

    def test_other_users_end_the_chain(self):
        model = Branches().eval()
        x = torch.rand(1, 3, 12, 12)
        want = run(model, x)
        fused, report = cpt.fuse(model, report=True)
        got = run(fused, x)
        for g, w in zip(got, want):
            self.assertLessEqual(relative_error(g, w), 1e-5)
        sources = {f.path: f.source for f in report.fused}
        self.assertEqual(sources["a"], "Conv2d(3->6, k3, pad 1)")
        self.assertEqual(sources["b"], "Conv2d(6->6, k3, pad 1) + ReLU")
        self.assertEqual(sources["c"], "Conv2d(6->6, k3, pad 1)")
        self.assertIsInstance(fused.get_submodule("pool"), nn.MaxPool2d)

    def test_a_conv_called_twice_stays(self):
        model = Shared().eval()
        x = torch.rand(1, 4, 9, 9)
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual(report.fused, [])
        self.assertIn("called 2 times", report.left_reasons()["conv"])
        self.assertTrue(torch.equal(run(fused, x), run(model, x)))

    def test_residual_tail(self):
        # Conv2d -> BatchNorm2d -> add(identity) -> ReLU: the add and the ReLU go
        # into the fused layer (the binding's residual=); strided convs and the
        # downsample path are the library's too.
        model = small_resnet()
        x = torch.rand(2, 3, 16, 16)
        want = run(model, x)
        fused, report = cpt.fuse(model, report=True)
        self.assertTrue(cpt.residual_supported())
        self.assertLessEqual(relative_error(run(fused, x), want), 1e-5)
        self.assertEqual(paths(report), ["0", "4.conv1", "4.conv2", "5.conv1", "5.conv2",
                                         "5.down.0", "6.conv1", "6.conv2"], str(report))
        self.assertEqual(report.left, [], str(report))
        adds = [n for n in fused.graph.nodes if n.target in (operator.add, operator.iadd)]
        self.assertEqual(adds, [], fused.code)

    def test_dropout_and_batchnorm_in_training_mode_stay(self):
        torch.manual_seed(2)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.Conv2d(4, 4, 3), nn.Dropout(0.5), nn.ReLU()).eval()
        model[1].train()
        model[4].train()
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual({f.path: f.source for f in report.fused},
                         {"0": "Conv2d(3->4, k3)", "3": "Conv2d(4->4, k3)"})
        reasons = report.left_reasons()
        self.assertIn("training mode", reasons["1"])
        self.assertIn("training mode", reasons["4"])

    def test_model_in_training_mode_is_refused(self):
        model = small_resnet().train()
        with self.assertRaises(ValueError) as ctx:
            cpt.fuse(model)
        self.assertIn("eval()", str(ctx.exception))
        self.assertIn("training mode", str(ctx.exception))

    def test_fx_failure_falls_back_to_the_walk(self):
        model = DataDependent().eval()
        x = torch.rand(1, 3, 8, 8)
        want = run(model, x)
        fused, report = cpt.fuse(model, report=True)
        self.assertFalse(report.traced)
        self.assertTrue(report.trace_error)
        self.assertIn("fx could not trace", str(report))
        self.assertEqual(paths(report), ["features.0"])
        self.assertIn("Sequential", report.left_reasons()["other"])
        self.assertIs(fused.convpool_report, report)
        self.assertLessEqual(relative_error(run(fused, x), want), 1e-5)

    def test_root_hooks_fall_back_to_the_walk(self):
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
        model.register_forward_hook(lambda mod, inp, out: out * 2)
        x = torch.rand(1, 3, 8, 8)
        want = run(model, x)
        fused, report = cpt.fuse(model, report=True)
        self.assertFalse(report.traced)
        self.assertIn("forward hook", report.trace_error)
        self.assertTrue(torch.allclose(run(fused, x), want, rtol=1e-5, atol=1e-6))

    def test_modules_with_hooks_stay_whole(self):
        inner = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        inner.register_forward_hook(lambda mod, inp, out: out + 1)
        model = nn.Sequential(inner, nn.Conv2d(4, 4, 1)).eval()
        x = torch.rand(1, 3, 8, 8)
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual(paths(report), ["1"])
        self.assertIn("module with hooks", report.left_reasons()["0.0"])
        self.assertLessEqual(relative_error(run(fused, x), run(model, x)), 1e-5)

    def test_report_and_return_forms(self):
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
        fused = cpt.fuse(model)
        self.assertIsInstance(fused, torch.fx.GraphModule)
        self.assertIsInstance(fused.convpool_report, cpt.FuseReport)
        module, report = cpt.fuse(model, report=True)
        self.assertIs(module.convpool_report, report)
        self.assertIn("traced with torch.fx", str(report))


class TestFutureBinding(unittest.TestCase):
    """Layers with stride=, dilation=, groups= and residual=, through the real binding
    and through a stand-in one (which can refuse a keyword, as another build might)."""

    def test_strided_dilated_grouped_convs(self):
        torch.manual_seed(4)
        model = nn.Sequential(
            nn.Conv2d(3, 8, 7, stride=2, padding=3), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
            nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8), nn.ReLU6(),
            nn.Conv2d(8, 4, 3, stride=2, padding="valid")).eval()
        x = torch.rand(2, 3, 33, 31)
        want = run(model, x)
        today, today_report = cpt.fuse(model, report=True)  # the binding takes them now
        self.assertEqual(paths(today_report), ["0", "3", "5"], str(today_report))
        self.assertLessEqual(relative_error(run(today, x), want), 1e-5)
        with future_binding():
            fused, report = cpt.fuse(model, report=True)
            got = run(fused, x)
        self.assertEqual(paths(report), ["0", "3", "5"], str(report))
        self.assertEqual(report.left, [])
        self.assertIn("Conv2d(3->8, k7, stride 2, pad 3) + ReLU + MaxPool2d(3, stride 2, pad 1)",
                      str(report))
        self.assertIn("dilation 2, groups 8", str(report))
        self.assertLessEqual(relative_error(got, want), 1e-5)

    def test_library_refusal_is_reported(self):
        model = nn.Sequential(nn.Conv2d(4, 4, 3, groups=2), nn.ReLU(),
                              nn.Conv2d(4, 4, 3, stride=2)).eval()
        with future_binding(refuse="groups"):
            fused, report = cpt.fuse(model, report=True)
        self.assertEqual(paths(report), ["2"])
        self.assertIn("the library refuses the layer: conv groups = 2 is not supported",
                      report.left_reasons()["0"])

    def test_residual_tails(self):
        model = small_resnet()
        x = torch.rand(2, 3, 16, 16)
        want = run(model, x)
        with future_binding():
            self.assertTrue(cpt.residual_supported())
            fused, report = cpt.fuse(model, report=True)
            got = run(fused, x)
            residual_calls = sum(op.residual_calls for op in FutureOperator.created)
            traced = torch.jit.trace(fused, x)
            self.assertLessEqual(relative_error(run(traced, x), want), 1e-5)
            scripted = torch.jit.script(fused)
            self.assertLessEqual(relative_error(run(scripted, x), want), 1e-5)
        self.assertLessEqual(relative_error(got, want), 1e-5)
        self.assertEqual(len(report.fused), 8, str(report))
        self.assertEqual(report.left, [])
        self.assertEqual(residual_calls, 3)
        sources = {f.path: f.source for f in report.fused}
        self.assertEqual(sources["5.conv2"],
                         "Conv2d(16->16, k3, pad 1) + BatchNorm2d + residual + ReLU")
        # The downsampling branch (the add's other input) is a layer of its own.
        self.assertEqual(sources["5.down.0"], "Conv2d(8->16, k1, stride 2) + BatchNorm2d")
        self.assertFalse([n for n in fused.graph.nodes if n.op == "call_function"], fused.code)

    @unittest.skipIf(torchvision is None, TORCHVISION or "")
    def test_resnet18_every_conv(self):
        torch.manual_seed(0)
        model = randomize_batchnorms(torchvision.models.resnet18(weights=None).eval())
        x = torch.rand(1, 3, 64, 64)
        want = run(model, x)
        with future_binding():
            fused, report = cpt.fuse(model, report=True)
            got = run(fused, x)
        self.assertEqual(len(report.fused), 20, str(report))
        self.assertEqual(report.left, [], str(report))
        self.assertLessEqual(relative_error(got, want), 1e-5)

    def test_onnx_export_with_a_residual(self):
        try:
            import onnx
        except ImportError as exc:          # Debian: python3-onnx
            self.skipTest(f"onnx is not installed ({exc}); install python3-onnx")
        import io
        model = nn.Sequential(Block(4, 4)).eval()
        with future_binding():
            fused = cpt.fuse(model)
            buffer = io.BytesIO()
            with torch.no_grad():
                torch.onnx.export(fused, torch.rand(1, 4, 8, 8), buffer, opset_version=14)
        graph = onnx.load_from_string(buffer.getvalue()).graph
        kinds = [n.op_type for n in graph.node if n.op_type not in ("Constant", "Identity")]
        self.assertEqual(kinds, ["Conv", "Relu", "Conv", "Add", "Relu"])


class TestBatchNormFolding(unittest.TestCase):
    def test_float64_rounded_once(self):
        torch.manual_seed(6)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for bias, affine in ((True, True), (False, True), (False, False)):
                with self.subTest(dtype=dtype, bias=bias, affine=affine):
                    conv = nn.Conv2d(5, 6, 3, bias=bias).to(dtype)
                    bn = randomize_batchnorms(nn.BatchNorm2d(6, affine=affine).eval())
                    folded = cpt.fold_batchnorm(conv, bn)
                    w = conv.weight.detach().double().numpy()
                    b = (conv.bias.detach().double().numpy() if bias else np.zeros(6))
                    gamma = bn.weight.detach().double().numpy() if affine else np.ones(6)
                    beta = bn.bias.detach().double().numpy() if affine else np.zeros(6)
                    scale = gamma / np.sqrt(bn.running_var.double().numpy() + bn.eps)
                    want_w = torch.from_numpy(w * scale[:, None, None, None]).to(dtype)
                    want_b = torch.from_numpy((b - bn.running_mean.double().numpy()) * scale
                                              + beta).to(dtype)
                    self.assertEqual(folded.weight.dtype, dtype)
                    self.assertTrue(torch.equal(folded.weight, want_w))
                    self.assertTrue(torch.equal(folded.bias, want_b))
                    self.assertIsNot(folded.weight, conv.weight)   # the conv is left alone
                    self.assertEqual(conv.bias is None, not bias)

    def test_refusals(self):
        conv = nn.Conv2d(3, 4, 3)
        cases = ((nn.BatchNorm2d(4).train(), "training mode"),
                 (nn.BatchNorm2d(4, track_running_stats=False).eval(), "running statistics"),
                 (nn.BatchNorm2d(5).eval(), "5 features"))
        for bn, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(cpt.UnsupportedLayer) as ctx:
                    cpt.fold_batchnorm(conv, bn)
                self.assertIn(text, str(ctx.exception))
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False),
                              nn.ReLU()).eval()
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual(paths(report), ["0"])
        self.assertIn("running statistics", report.left_reasons()["1"])

    def test_vgg_bn_like_model(self):
        torch.manual_seed(8)
        model = randomize_batchnorms(nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.Conv2d(16, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
            nn.ReLU6()).eval())
        x = torch.rand(2, 3, 24, 24) * 2 - 1
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual(len(report.fused), 3)
        self.assertLessEqual(relative_error(run(fused, x), run(model, x)), 1e-5)
        bns = [m for m in fused.modules() if isinstance(m, nn.BatchNorm2d)]
        self.assertEqual(bns, [])


class TestThreads(unittest.TestCase):
    def setUp(self):
        self.torch_threads = torch.get_num_threads()
        torch.manual_seed(9)
        self.model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                   nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1)).eval()
        self.x = torch.rand(2, 3, 40, 40)

    def tearDown(self):
        torch.set_num_threads(self.torch_threads)

    def test_shared_pool_follows_torch(self):
        fused = cpt.fuse(self.model)
        layer = fused.get_submodule("0")
        self.assertIsNone(layer.threads)
        self.assertTrue(layer.operator("float32").shared_pool)
        outputs = []
        for n in (1, 3, 2):
            torch.set_num_threads(n)
            outputs.append(run(fused, self.x))
            self.assertEqual(convpool.shared_threads(), n)
            stats = layer.operator("float32").last_run_stats()
            self.assertGreaterEqual(stats["threads"], 1)
            self.assertLessEqual(stats["threads"], n)
        for y in outputs[1:]:
            self.assertTrue(torch.equal(y, outputs[0]))      # the same bytes for every count

    def test_shared_pool_takes_torchs_openmp_threads(self):
        # Debian's torch and a library built with gcc share libgomp: a fused
        # layer's runs are then OpenMP regions on torch's threads.
        runtimes = cpt._openmp_runtimes()
        fused = cpt.fuse(self.model)
        y = run(fused, self.x)
        if runtimes is None or len(runtimes) != 1:
            self.skipTest(f"torch and the library do not share one OpenMP runtime here: "
                          f"{runtimes}")
        try:
            convpool.set_shared_openmp(True)   # supported? (a build without OpenMP is not)
        except convpool.UnsupportedError:
            self.skipTest("this libconvpool was built without OpenMP")
        convpool._shared_openmp_chosen = False
        self.assertTrue(convpool.shared_openmp())
        convpool.set_shared_openmp(False)
        self.assertTrue(torch.equal(run(fused, self.x), y))   # the same bytes on its own threads
        convpool._shared_openmp_chosen = False
        cpt._openmp_decided = False                # decided again at the next run
        self.assertTrue(torch.equal(run(fused, self.x), y))
        self.assertTrue(convpool.shared_openmp())
        # a mode the user chose stays
        convpool.set_shared_openmp(False)
        cpt._openmp_decided = False
        run(fused, self.x)
        self.assertFalse(convpool.shared_openmp())
        convpool.set_shared_openmp(True)
        convpool._shared_openmp_chosen = False

    def test_given_threads_win(self):
        torch.set_num_threads(2)
        fused = cpt.fuse(self.model, threads=1)
        op = fused.get_submodule("0").operator("float32")
        self.assertFalse(op.shared_pool)
        y = run(fused, self.x)
        self.assertEqual(op.last_run_stats()["threads"], 1)
        self.assertTrue(torch.equal(y, run(cpt.fuse(self.model), self.x)))


class TestTiming(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(10)
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(8, 8, 3, padding=1)).eval()
        self.x = torch.rand(1, 3, 24, 24)

    def test_times_in_the_report(self):
        fused, report = cpt.fuse(self.model, self.x, report=True, trials=2)
        self.assertTrue(report.timed)
        kept = {f.path for f in report.fused}
        faster = {e.path for e in report.left if "torch is faster" in e.reason}
        self.assertEqual(kept | faster, {"0", "3", "5"})
        for f in report.fused:
            self.assertGreater(f.torch_ms, 0)
            self.assertGreater(f.convpool_ms, 0)
            self.assertLessEqual(f.convpool_ms, f.torch_ms)
        self.assertIn("each layer timed against torch", str(report))
        self.assertLessEqual(relative_error(run(fused, self.x), run(self.model, self.x)), 1e-5)

    def test_torch_kept_where_faster(self):
        calls = []
        real, real_try = _fuse._best_times, _fuse._try_impl

        def rigged(first, second, trials):
            first(), second()
            calls.append(trials)
            # the second layer timed: torch 1 ms, convpool 3 ms; the others the other way
            return (0.001, 0.003) if len(calls) == 2 else (0.004, 0.002)
        _fuse._best_times = rigged
        _fuse._try_impl = lambda m, args, trials, kwargs: None  # tried below, on its own
        try:
            fused, report = cpt.fuse(self.model, (self.x,), report=True, trials=4)
        finally:
            _fuse._best_times, _fuse._try_impl = real, real_try
        self.assertEqual(calls, [4, 4, 4])
        self.assertEqual(paths(report), ["0", "5"])
        self.assertEqual([(f.torch_ms, f.convpool_ms) for f in report.fused],
                         [(4.0, 2.0), (4.0, 2.0)])
        reason = report.left_reasons()["3"]
        self.assertIn("torch is faster on the example: 1.000 ms against convpool's 3.000 ms "
                      "(3.00x)", reason)
        self.assertIsInstance(fused.get_submodule("3"), nn.Conv2d)
        self.assertIsInstance(fused.get_submodule("4"), nn.ReLU)
        self.assertLessEqual(relative_error(run(fused, self.x), run(self.model, self.x)), 1e-5)

    def rigged_fuse(self, trial_times, **kwargs):
        """fuse() on the example with every trial of direct against auto's choice
        timed trial_times (auto, direct) and every layer against torch (4 ms,
        2 ms); returns the fused model, its report and the pairs timed."""
        timed = []
        real = _fuse._best_times

        def rigged(first, second, trials):
            first(), second()
            # a trial of direct comes before its layer's time against torch
            trial = len(timed) % 2 == 0 and kwargs.get("impl", "auto") == "auto"
            timed.append("trial" if trial else "torch")
            return trial_times if trial else (0.004, 0.002)
        _fuse._best_times = rigged
        try:
            fused, report = cpt.fuse(self.model, self.x, report=True, trials=1, **kwargs)
        finally:
            _fuse._best_times = real
        return fused, report, timed

    def test_direct_kept_where_faster_on_the_example(self):
        # Auto chooses Winograd or shift-reduce for these stride-1 layers; the
        # example times direct against it and keeps direct where it is faster.
        for path in ("0", "3", "5"):
            self.assertNotEqual(_fuse._auto_algorithm(cpt.fuse(self.model).get_submodule(path),
                                                      self.x if path == "0" else
                                                      torch.rand(1, 8, 12, 12)), "direct")
        fused, report, timed = self.rigged_fuse((0.003, 0.001))
        self.assertEqual(timed, ["trial", "torch"] * 3)
        self.assertEqual([f.impl for f in report.fused], ["direct"] * 3)
        self.assertEqual([f.convpool_ms for f in report.fused], [2.0] * 3)
        for path in ("0", "3", "5"):
            self.assertEqual(fused.get_submodule(path).impl, "direct")
        self.assertIn("(direct: faster than auto's choice on the example)", str(report))
        self.assertLessEqual(relative_error(run(fused, self.x), run(self.model, self.x)), 1e-5)

    def test_auto_kept_unless_direct_is_clearly_faster(self):
        # 4% faster is within the margin: auto's choice stays
        fused, report, timed = self.rigged_fuse((0.00100, 0.00096))
        self.assertEqual([f.impl for f in report.fused], [None] * 3)
        for path in ("0", "3", "5"):
            self.assertEqual(fused.get_submodule(path).impl, "auto")
        self.assertNotIn("faster than auto's choice", str(report))

    def test_unbatched_example(self):
        # the example's conv inputs are [C, H, W]: auto's choice is asked for one image
        x = self.x[0]
        self.assertEqual(x.dim(), 3)
        self.assertIsNotNone(_fuse._auto_algorithm(cpt.fuse(self.model).get_submodule("0"), x))
        fused, report = cpt.fuse(self.model, x, report=True, trials=1)
        self.assertTrue(report.timed)
        self.assertEqual(len(report.fused) + len(report.left), 3)
        self.assertLessEqual(relative_error(run(fused, x), run(self.model, x)), 1e-5)

    def test_no_trial_for_an_algorithm_asked_for(self):
        fused, report, timed = self.rigged_fuse((0.003, 0.001), impl="sr")
        self.assertEqual(timed, ["torch"] * 3)
        self.assertEqual([f.impl for f in report.fused], [None] * 3)
        self.assertEqual(fused.get_submodule("3").impl, "sr")

    def test_shapes_the_library_refuses_stay_with_torch(self):
        # A shape the library refuses at run time (made up here: every shape of
        # torch's MaxPool2d is computed since partial ceil windows are) stays
        # with torch, saying why.
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(3, 2, ceil_mode=True),
                              nn.Conv2d(4, 4, 1)).eval()
        x = torch.rand(1, 3, 4, 4)
        real = convpool.Operator.output_shape

        def refuse(op, x_shape):
            raise convpool.InvalidArgumentError("convpool_op_output_shape", 1,
                                                "invalid argument", "made up for the test")
        convpool.Operator.output_shape = refuse
        try:
            fused, report = cpt.fuse(model, x, report=True, trials=1)
        finally:
            convpool.Operator.output_shape = real
        self.assertIn("refuses the example's shape", report.left_reasons()["0"])
        self.assertIsInstance(fused.get_submodule("0"), nn.Conv2d)
        self.assertLessEqual(relative_error(run(fused, x), run(model, x)), 1e-5)


class TestTensorConventions(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(12)
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.MaxPool2d(2), nn.Conv2d(8, 6, 3)).eval()
        randomize_batchnorms(self.model)
        self.x = torch.rand(2, 3, 18, 14) * 2 - 1

    def test_channels_last_and_strided_inputs(self):
        fused = cpt.fuse(self.model)
        want = run(fused, self.x)
        self.assertTrue(want.is_contiguous())
        cl = self.x.to(memory_format=torch.channels_last)
        got = run(fused, cl)
        self.assertTrue(got.is_contiguous(memory_format=torch.channels_last))
        self.assertFalse(got.is_contiguous())
        self.assertTrue(torch.equal(got, want))
        torch_out = run(self.model, cl)
        self.assertTrue(torch_out.is_contiguous(memory_format=torch.channels_last))
        big = torch.zeros(2, 3, 36, 28)
        big[:, :, ::2, ::2] = self.x
        self.assertTrue(torch.equal(run(fused, big[:, :, ::2, ::2]), want))
        layer = fused.get_submodule("0")
        self.assertTrue(run(layer, cl[0]).is_contiguous())       # [C, H, W]

    def test_half_precision_models(self):
        for dtype, rtol in ((torch.float16, 3e-3), (torch.bfloat16, 3e-2)):
            with self.subTest(dtype=dtype):
                model = copy.deepcopy(self.model).to(dtype)
                fused, report = cpt.fuse(model, report=True)
                self.assertEqual(len(report.fused), 2)
                self.assertEqual(fused.get_submodule("0").weight.dtype, dtype)
                x = self.x.to(dtype)
                got = run(fused, x)
                self.assertEqual(got.dtype, dtype)
                # torch's float32 model on the same rounded weights and input
                want = run(copy.deepcopy(model).float(), x.float())
                self.assertLessEqual(relative_error(got.float(), want), rtol)
                got_cl = run(fused, x.to(memory_format=torch.channels_last))
                self.assertTrue(torch.equal(got_cl, got))

    def test_inputs_that_require_grad_are_refused(self):
        fused = cpt.fuse(self.model)
        with self.assertRaises(RuntimeError) as ctx:
            fused(self.x.clone().requires_grad_())
        self.assertIn("no_grad", str(ctx.exception))
        with torch.inference_mode():
            self.assertFalse(fused(self.x).requires_grad)


class TestVerbose(unittest.TestCase):
    """CONVPOOL_VERBOSE=1: the library prints its create and run lines on stderr."""

    SCRIPT = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import convpool.torch as cpt\n"
        "torch.set_num_threads(2)\n"
        "m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),\n"
        "                        torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 4, 1)).eval()\n"
        "f = cpt.fuse(m)\n"
        "with torch.no_grad():\n"
        "    f(torch.rand(1, 3, 8, 8)); f(torch.rand(2, 3, 10, 6))\n"
        "import numpy as np, convpool\n"
        "try:\n"
        "    convpool.Operator(np.ones((2, 3, 5, 5), np.float32), impl='winograd')\n"
        "except convpool.UnsupportedError:\n"
        "    pass\n"
        "print('done')\n")

    def run_script(self, verbose):
        env = dict(os.environ)
        env.pop("CONVPOOL_VERBOSE", None)
        if verbose is not None:
            env["CONVPOOL_VERBOSE"] = verbose
        result = subprocess.run([sys.executable, "-c", self.SCRIPT, str(REPO / "python")],
                                env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "done\n")
        return [line for line in result.stderr.splitlines() if line.startswith("convpool:")]

    def test_lines_with_and_without(self):
        lines = self.run_script("1")
        creates = [line for line in lines if line.startswith("convpool: create op")]
        runs = [line for line in lines if line.startswith("convpool: run op")]
        self.assertEqual(len(creates), 2, lines)
        self.assertEqual(len(runs), 4, lines)
        self.assertIn("float32 w [4, 3, 3, 3] bias pad 1,1,1,1 relu pool 2/2", creates[0])
        self.assertRegex(creates[0], r"shared pool of 2 (OpenMP )?threads")
        self.assertIn("[2, 3, 10, 6] -> [2, 4, 5, 3]", runs[2])
        self.assertRegex(runs[0], r": [0-9.]+ ms$")
        failed = [line for line in lines if line.startswith("convpool: create failed")]
        self.assertEqual(len(failed), 1, lines)
        self.assertIn("create failed: unsupported: ", failed[0])
        self.assertIn("winograd", failed[0])
        self.assertEqual(len(lines), 7, lines)
        self.assertEqual(self.run_script(None), [])
        self.assertEqual(self.run_script("0"), [])


if __name__ == "__main__":
    if TORCHVISION:
        print(f"[skip] ResNet-18 test: {TORCHVISION}", flush=True)
    warnings.simplefilter("ignore", UserWarning)
    unittest.main()
