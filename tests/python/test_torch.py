#!/usr/bin/env python3
"""Tests of convpool.torch: ConvPool2d against torch's modules, its refusals,
weights reloaded or edited after packing, modules with hooks, shapes the
library refuses (computed with torch's ops), jit.trace / jit.script / fx and
ONNX export of the registered op, fuse() on small models and on
torchvision's VGG-11, VGG-16 and AlexNet.

    python3 tests/python/test_torch.py [-v]

The torchvision models are built from their definitions with weights=None and
a fixed seed (nothing is downloaded); without torchvision those tests are
skipped and the reason is printed, as are the ONNX checks without onnx
(python3-onnx).
"""

import copy
import io
import pickle
import sys
import time
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

try:
    import torchvision
    TORCHVISION = None
except ImportError as exc:          # Debian: python3-torchvision
    torchvision = None
    TORCHVISION = f"torchvision is not installed ({exc}); install python3-torchvision"

#: max|fused - torch| / max|torch| allowed on the whole models (float32).
MODEL_RTOL = 1e-4


def relative_error(got, want):
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max())


def torch_run(modules, x):
    with torch.no_grad():
        for m in modules:
            if m is not None:
                x = m(x)
    return x


class TestConvPool2d(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(3)
        self.x = torch.rand(2, 6, 15, 13) * 2 - 1

    def check(self, conv, act=None, pool=None, x=None, rtol=1e-5):
        x = self.x if x is None else x
        want = torch_run([conv, act, pool], x.clone())
        fused = cpt.ConvPool2d(conv, act, pool)
        with torch.no_grad():
            got = fused(x)
        self.assertEqual(got.shape, want.shape)
        self.assertEqual(got.dtype, x.dtype)
        self.assertLessEqual(relative_error(got, want), rtol, (conv, act, pool))
        return fused, got

    def test_large_output(self):
        # 64 x 130 x 131 floats = 4.2 MiB: the binding asks for huge pages on the output
        # (_fresh_output); the values are torch's, with and without the advice
        x = torch.rand(1, 3, 130, 131)
        for advice in (None, False):        # None: found at first use; False: none
            with self.subTest(advice=advice):
                cpt._madvise = advice
                _, got = self.check(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), x=x)
                self.assertGreaterEqual(got.numel() * got.element_size(), cpt._HUGE_OUTPUT_BYTES)
                self.assertTrue(got.is_contiguous())
        cpt._madvise = None
        cpt._fresh_output((2, 3), torch.float32)  # below the threshold: no advice looked up
        self.assertIsNone(cpt._madvise)
        out = cpt._fresh_output((1, 64, 130, 131), torch.float32)
        self.assertEqual((tuple(out.shape), out.dtype), ((1, 64, 130, 131), torch.float32))
        self.assertIsNot(cpt._madvise, None)  # looked up: libc's madvise, or False without one

    def test_eager_runs_as_the_dispatched_op(self):
        # An eager call runs the op's CPU implementation directly; torch.ops (what a
        # trace records) gives the same bytes, for every dtype, a residual, a
        # channels_last or an unbatched input, and refuses the same bad input.
        conv = nn.Conv2d(6, 8, 3, padding=1)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for residual in (False, True):
                layer = cpt.ConvPool2d(conv, nn.ReLU(), None if residual else nn.MaxPool2d(2),
                                       residual=residual)
                x = self.x.to(dtype)
                r = torch.rand(2, 8, 15, 13).to(dtype) if residual else None
                inputs = [(x, r), (x.contiguous(memory_format=torch.channels_last), r)]
                if not residual:
                    inputs.append((x[0], None))
                for xi, ri in inputs:
                    with self.subTest(dtype=dtype, residual=residual, shape=tuple(xi.shape),
                                      channels_last=xi.is_contiguous(
                                          memory_format=torch.channels_last)):
                        with torch.no_grad():
                            eager = layer(xi, ri)
                            dispatched = torch.ops.convpool.conv2d_maxpool(
                                xi, layer.weight, layer.bias, layer._padding, layer._clamp_min,
                                layer._clamp_max, layer._pool, layer._pool_stride,
                                layer._pool_padding, layer._ceil_mode, layer._cache_key,
                                layer.stride, layer.dilation, layer.groups, ri)
                        self.assertTrue(torch.equal(eager, dispatched))
                        self.assertEqual(eager.is_contiguous(memory_format=torch.channels_last),
                                         xi.dim() == 4 and not xi.is_contiguous())
        layer = cpt.ConvPool2d(conv, None, None)
        with torch.no_grad(), self.assertRaisesRegex(ValueError, "8 input channels|6 input"):
            layer(torch.rand(1, 8, 9, 9))
        traced = torch.jit.trace(layer, torch.rand(1, 6, 9, 9), check_trace=False)
        self.assertIn("convpool::conv2d_maxpool", str(traced.graph))

    def test_padding_forms(self):
        for padding in (0, 1, 2, (1, 0), (0, 2), "valid", "same"):
            with self.subTest(padding=padding):
                self.check(nn.Conv2d(6, 8, 3, padding=padding))
        # "same" with an even kernel pads one more at the bottom and right.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # torch: "may require a copy"
            fused, _ = self.check(nn.Conv2d(6, 8, 4, padding="same"))
        self.assertEqual(fused.spec.padding, (1, 1, 2, 2))

    def test_activations(self):
        for act in (nn.ReLU(), nn.ReLU(inplace=True), nn.ReLU6(), nn.Hardtanh(-0.25, 0.5),
                    nn.Hardtanh()):
            with self.subTest(act=act):
                self.check(nn.Conv2d(6, 8, 3, padding=1), act)

    def test_pools(self):
        for pool in (nn.MaxPool2d(2), nn.MaxPool2d(3, 2), nn.MaxPool2d(3, 2, padding=1),
                     nn.MaxPool2d(2, 1), nn.MaxPool2d(2, 3), nn.MaxPool2d(3, 2, ceil_mode=True),
                     nn.MaxPool2d(2, 2, padding=1, ceil_mode=True),
                     nn.MaxPool2d((3, 3), (2, 2), (1, 0))):
            with self.subTest(pool=pool):
                self.check(nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), pool)

    def test_no_bias_and_kernel_sizes(self):
        self.check(nn.Conv2d(6, 5, 1, bias=False))
        self.check(nn.Conv2d(6, 5, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2))

    def test_float16_and_bfloat16(self):
        conv, act, pool = nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        fused = cpt.ConvPool2d(conv, act, pool)
        for dtype, rtol in ((torch.float16, 2e-3), (torch.bfloat16, 2e-2)):
            with self.subTest(dtype=dtype):
                x = self.x.to(dtype)
                # torch's float32 layer on the same (rounded) inputs and weights.
                conv16 = copy.deepcopy(conv)
                with torch.no_grad():
                    conv16.weight.copy_(conv.weight.to(dtype).float())
                    conv16.bias.copy_(conv.bias.to(dtype).float())
                want = torch_run([conv16, act, pool], x.float())
                with torch.no_grad():
                    got = fused(x)
                self.assertEqual(got.dtype, dtype)
                self.assertLessEqual(relative_error(got, want), rtol)
        # A half-precision module packs half weights at construction.
        half = cpt.ConvPool2d(copy.deepcopy(conv).half(), act, pool)
        self.assertEqual(list(half._packs.by_dtype), [("float16", False)])  # (dtype, residual)
        with torch.no_grad():
            self.assertEqual(half(self.x.half()).dtype, torch.float16)

    def test_layouts(self):
        conv, pool = nn.Conv2d(6, 8, 3, padding=1), nn.MaxPool2d(2)
        fused, want = self.check(conv, None, pool)
        big = torch.zeros(2, 6, 30, 13)
        big[:, :, ::2] = self.x
        for name, x in (("channels_last", self.x.to(memory_format=torch.channels_last)),
                        ("strided rows", big[:, :, ::2]),
                        ("transposed twice", self.x.transpose(2, 3).contiguous()
                         .transpose(2, 3))):
            with self.subTest(layout=name):
                self.assertFalse(x.is_contiguous())
                with torch.no_grad():
                    self.assertTrue(torch.equal(fused(x), want))
        with torch.no_grad():
            self.assertTrue(torch.equal(fused(self.x[0]), want[0]))      # [C, H, W]
            empty = fused(self.x[:0])
        self.assertEqual(tuple(empty.shape), (0,) + tuple(want.shape[1:]))

    def test_zero_copy_views(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            t = self.x.to(dtype)
            view = cpt._numpy_view(t)
            self.assertEqual(view.ctypes.data, t.data_ptr())
            self.assertEqual(view.nbytes, t.numel() * t.element_size())
        bits = cpt._numpy_view(torch.tensor([1.0, -2.0], dtype=torch.bfloat16))
        self.assertEqual(bits.dtype, np.uint16)
        self.assertEqual(bits.tolist(), [0x3F80, 0xC000])

    def test_inference_only(self):
        fused = cpt.ConvPool2d(nn.Conv2d(6, 8, 3))
        x = self.x.clone().requires_grad_()
        with self.assertRaises(RuntimeError) as ctx:
            fused(x)
        self.assertIn("no_grad", str(ctx.exception))
        with torch.no_grad():
            y = fused(x)                               # no graph is recorded under no_grad
        self.assertFalse(y.requires_grad)
        with torch.inference_mode():
            y = fused(self.x)
        self.assertFalse(y.requires_grad)
        with self.assertRaises(RuntimeError):           # weights that require grad upstream
            fused(nn.Conv2d(6, 6, 1)(self.x))

    def test_bad_inputs(self):
        fused = cpt.ConvPool2d(nn.Conv2d(6, 8, 3), nn.ReLU(), nn.MaxPool2d(2))
        with torch.no_grad():
            for exc, x in ((TypeError, self.x.double()), (TypeError, self.x.int()),
                           (TypeError, self.x.numpy()), (ValueError, self.x[:, :5]),
                           (ValueError, self.x[0, 0]), (ValueError, self.x[None])):
                with self.subTest(exc=exc, x=getattr(x, "shape", None)):
                    with self.assertRaises(exc):
                        fused(x)
            with self.assertRaises(convpool.InvalidArgumentError) as ctx:
                fused(self.x[:, :, :3, :3])                # conv output 1x1 < pool 2
            self.assertIn("pool", ctx.exception.message)

    def test_refusals_name_the_reason(self):
        conv = nn.Conv2d(6, 8, 3)
        # conv stride, dilation and groups are the library's now
        for conv_ in (nn.Conv2d(6, 8, 3, stride=2), nn.Conv2d(6, 8, 3, dilation=2),
                      nn.Conv2d(6, 8, 3, groups=2)):
            with self.subTest(conv=str(conv_)):
                fused = cpt.ConvPool2d(conv_, nn.ReLU(), nn.MaxPool2d(2))
                with torch.no_grad():
                    want = F.max_pool2d(F.relu(conv_(self.x)), 2)
                    self.assertLessEqual(relative_error(fused(self.x), want), 1e-5)
        cases = [
            (nn.Conv2d(6, 8, (3, 1)), None, None, "square"),
            (nn.Conv2d(6, 8, 3, padding=1, padding_mode="reflect"), None, None, "padding_mode"),
            (nn.Conv2d(6, 8, 3).double(), None, None, "float64"),
            (nn.Linear(3, 3), None, None, "Conv2d"),
            (conv, nn.GELU(), None, "ReLU"),
            (conv, None, nn.AvgPool2d(2), "MaxPool2d"),
            (conv, None, nn.MaxPool2d((2, 3)), "square"),
            (conv, None, nn.MaxPool2d(2, (1, 2)), "stride"),
            (conv, None, nn.MaxPool2d(2, dilation=2), "dilation"),
            (conv, None, nn.MaxPool2d(2, return_indices=True), "return_indices"),
            (conv, None, nn.MaxPool2d(2, padding=2), "half the window"),
        ]
        for conv_, act, pool, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(cpt.UnsupportedLayer) as ctx:
                    cpt.ConvPool2d(conv_, act, pool)
                self.assertIsInstance(ctx.exception, ValueError)
                self.assertIn(text, str(ctx.exception))

    def test_from_modules_repack_copy_pickle(self):
        conv, act, pool = nn.Conv2d(6, 8, 3, padding=1), nn.ReLU6(), nn.MaxPool2d(2)
        a = cpt.ConvPool2d.from_modules(conv, act, pool)
        b = cpt.ConvPool2d(conv, act, pool)
        with torch.no_grad():
            ya = a(self.x)
            self.assertTrue(torch.equal(ya, b(self.x)))
            # The buffers share the conv's storage: an in-place change is seen.
            conv.weight.mul_(0.5)
            want = torch_run([conv, act, pool], self.x)
            self.assertLessEqual(relative_error(a(self.x), want), 1e-5)
            self.assertFalse(torch.equal(a(self.x), ya))
            # An edit through .data leaves the version counter alone: repack() sees it.
            conv.weight.data.mul_(2.0)
            a.repack()
            want = torch_run([conv, act, pool], self.x)
            self.assertLessEqual(relative_error(a(self.x), want), 1e-5)
            # Copies and pickles pack their own operators (no shared native handle).
            for clone in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
                self.assertTrue(torch.equal(clone(self.x), a(self.x)))
            buffer = io.BytesIO()
            torch.save(a, buffer)
            buffer.seek(0)
            self.assertTrue(torch.equal(torch.load(buffer)(self.x), a(self.x)))
        self.assertIn("activation='relu6'", repr(a))


class Block(nn.Module):
    """A module whose conv is an attribute called by its own forward."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + x


class TestFuse(unittest.TestCase):
    def model(self):
        torch.manual_seed(5)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),   # 0-2
            nn.Conv2d(8, 8, (3, 1), padding=(1, 0)), nn.ReLU(), nn.MaxPool2d(2, 1),   # 3-5
            nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()),  # 6
            nn.Conv2d(8, 8, 3, padding=1), nn.Hardtanh(-1, 1),                         # 7-8
            nn.Conv2d(8, 8, 1), nn.MaxPool2d(2, dilation=2),                           # 9-10
            Block(),                                                                   # 11
            nn.Conv2d(8, 8, 3, padding=1), nn.MaxPool2d(3, 2, 1, ceil_mode=True),      # 12-13
        ).eval()

    def test_fuse_small_model(self):
        model = self.model()
        x = torch.rand(2, 3, 32, 32)
        want = torch_run([model], x)
        fused, report = cpt.fuse(model, report=True)
        got = torch_run([fused], x)
        self.assertLessEqual(relative_error(got, want), 1e-5)
        self.assertEqual([f.path for f in report.fused],
                         ["0", "6.0", "7", "9", "11.conv", "12"])
        left = {path: reason for path, _, reason in report.left}
        self.assertIn("square", left["3"])
        self.assertIn("left to torch", left["5"])
        self.assertIn("dilation", left["10"])
        self.assertEqual(len(left), 3, str(report))
        # A GraphModule: each ConvPool2d at its Conv2d's path, the absorbed
        # modules gone, the others kept.
        self.assertIsInstance(fused, torch.fx.GraphModule)
        modules = dict(fused.named_modules())
        for path in ("0", "6.0", "7", "9", "11.conv", "12"):
            self.assertIsInstance(modules[path], cpt.ConvPool2d, path)
        for path in ("1", "2", "6.1", "6.2", "8", "13"):
            self.assertNotIn(path, modules)
        self.assertIsInstance(modules["3"], nn.Conv2d)
        self.assertIsInstance(modules["10"], nn.MaxPool2d)
        self.assertIn("BatchNorm2d", {f.path: f.source for f in report.fused}["6.0"])
        self.assertIs(fused.convpool_report, report)
        # The model itself was left as it was.
        self.assertIsInstance(model[0], nn.Conv2d)
        self.assertTrue(torch.equal(torch_run([model], x), want))
        self.assertIn("fused 6 layer(s)", str(report))
        # A fused model has nothing more to fuse.
        again, report2 = cpt.fuse(fused, report=True)
        self.assertEqual(report2.fused, [])
        self.assertTrue(torch.equal(torch_run([again], x), got))

    def test_inplace(self):
        model = self.model()
        same = cpt.fuse(model, inplace=True, impl="im2col", threads=1)
        # No copy: the fused module shares the model's modules and tensors; fx
        # builds a new module, so the model itself is not rewritten.
        self.assertIsInstance(model[0], nn.Conv2d)
        self.assertIs(same.get_submodule("3"), model[3])
        self.assertEqual(same.get_submodule("0").weight.data_ptr(), model[0].weight.data_ptr())
        self.assertEqual(same.get_submodule("0").impl, "im2col")
        self.assertEqual(same.get_submodule("0").threads, 1)
        copied = cpt.fuse(model)
        self.assertIsNot(copied.get_submodule("3"), model[3])
        self.assertNotEqual(copied.get_submodule("0").weight.data_ptr(),
                            model[0].weight.data_ptr())

    def test_not_a_module(self):
        with self.assertRaises(TypeError):
            cpt.fuse(lambda x: x)

    def test_expect_input(self):
        # 256 -> 256 3x3 at 14x14: auto's Winograd hands that shape to F(2x2, 3x3);
        # settled for it, the layer packs that algorithm alone: the same bytes for
        # that shape, correct ones for another, kept by a pickle.
        torch.manual_seed(6)
        conv = nn.Conv2d(256, 256, 3, padding=1).eval()
        x = torch.randn(1, 256, 14, 14)
        any_shape, settled = cpt.ConvPool2d(conv, "relu"), cpt.ConvPool2d(conv, "relu")
        self.assertIsNone(settled.expected_input)
        settled.expect_input(x.shape)
        self.assertEqual(settled.expected_input, (1, 14, 14))
        text = settled.operator("float32").describe(tuple(x.shape))
        self.assertIn("settled at create for the expected shape [1, 256, 14, 14]", text)
        self.assertNotIn("settled", any_shape.operator("float32").describe(tuple(x.shape)))
        with torch.no_grad():
            self.assertTrue(torch.equal(settled(x), any_shape(x)))
            y = torch.randn(2, 256, 9, 9)
            self.assertLessEqual(relative_error(settled(y), F.relu(conv(y))), 1e-5)
        copied = pickle.loads(pickle.dumps(settled))
        self.assertEqual(copied.expected_input, (1, 14, 14))
        self.assertIn("settled", copied.operator("float32").describe(tuple(x.shape)))
        settled.expect_input(None)
        self.assertNotIn("settled", settled.operator("float32").describe(tuple(x.shape)))
        with self.assertRaises(ValueError):
            settled.expect_input((1, 3, 14, 14))             # not C_in

    def test_fuse_with_example_settles(self):
        model = self.model()
        x = torch.rand(2, 3, 32, 32)
        fused, report = cpt.fuse(model, x, report=True, trials=1)
        self.assertLessEqual(relative_error(torch_run([fused], x), torch_run([model], x)), 1e-5)
        # each of auto's modules packed for the shape it gets from x
        modules = dict(fused.named_modules())
        seen, handles = {}, []

        def record(path):
            def hook(module, args):
                seen.setdefault(path, tuple(args[0].shape))   # returns None: args unchanged
            return hook

        for f in report.fused:
            if f.impl is None:
                handles.append(modules[f.path].register_forward_pre_hook(record(f.path)))
        torch_run([fused], x)
        for h in handles:
            h.remove()
        self.assertTrue(seen)
        for path, shape in seen.items():
            self.assertEqual(modules[path].expected_input, (shape[0], shape[2], shape[3]), path)


def conv_act_pool(c_in=3, c_out=6):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2)).eval()


class TestWeightChanges(unittest.TestCase):
    """Weights loaded or edited after packing are packed again before the next call."""

    def setUp(self):
        torch.manual_seed(11)
        self.x = torch.rand(2, 3, 12, 12) * 2 - 1
        self.a, self.b = conv_act_pool(), conv_act_pool()

    def test_load_state_dict(self):
        fused = cpt.fuse(self.a)
        torch_run([fused], self.x.half())                  # a float16 operator packed too
        result = fused.load_state_dict(self.b.state_dict())
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        got = torch_run([fused], self.x)
        self.assertLessEqual(relative_error(got, torch_run([self.b], self.x)), 1e-5)
        self.assertGreater(relative_error(got, torch_run([self.a], self.x)), 0.1)
        got16 = torch_run([fused], self.x.half()).float()
        self.assertLessEqual(relative_error(got16, torch_run([self.b], self.x.half().float())),
                             1e-2)
        # A fused model's state dict loads into a fused model as well.
        other = cpt.fuse(self.a)
        other.load_state_dict(fused.state_dict())
        self.assertTrue(torch.equal(torch_run([other], self.x), got))

    def test_in_place_edits_and_new_tensors(self):
        fused = cpt.fuse(self.a)
        want = copy.deepcopy(self.a)
        with torch.no_grad():
            for m in (fused.get_submodule("0"), want[0]):
                m.weight.mul_(-2.0)
                m.bias.add_(0.25)
        self.assertLessEqual(relative_error(torch_run([fused], self.x),
                                            torch_run([want], self.x)), 1e-5)
        # A buffer replaced by another tensor.
        fused.get_submodule("0").weight = self.b[0].weight.detach().clone()
        fused.get_submodule("0").bias = self.b[0].bias.detach().clone()
        self.assertLessEqual(relative_error(torch_run([fused], self.x),
                                            torch_run([self.b], self.x)), 1e-5)
        # Unchanged weights are not packed again.
        op = fused.get_submodule("0").operator("float32")
        torch_run([fused], self.x)
        self.assertIs(fused.get_submodule("0").operator("float32"), op)

    def test_grad_still_refused(self):
        fused = cpt.fuse(self.a)
        fused.load_state_dict(self.b.state_dict())
        with self.assertRaises(RuntimeError) as ctx:
            fused(self.x.clone().requires_grad_())
        self.assertIn("no_grad", str(ctx.exception))
        with self.assertRaises(RuntimeError):
            torch.jit.script(fused)(self.x.clone().requires_grad_())


class Double(nn.Module):
    """A parametrization (torch.nn.utils.parametrize)."""

    def forward(self, w):
        return 2 * w


class TestHooks(unittest.TestCase):
    """A module with hooks or parametrizations is left to torch, and the report says why."""

    def setUp(self):
        torch.manual_seed(13)
        self.x = torch.rand(1, 3, 10, 10) * 2 - 1

    def test_hooked_conv_is_not_fused(self):
        from torch.nn.utils import parametrize
        cases = [
            (lambda m: m.register_forward_hook(lambda mod, inp, out: out * 0), "forward hook"),
            (lambda m: m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,)),
             "forward pre-hook"),
            (lambda m: m.register_full_backward_hook(lambda mod, gi, go: None), "backward hook"),
            (lambda m: m._register_state_dict_hook(lambda *args: None), "state_dict hook"),
            (lambda m: m._register_load_state_dict_pre_hook(lambda *args: None),
             "load_state_dict pre-hook"),
            (nn.utils.spectral_norm, "forward pre-hook (SpectralNorm)"),
            (nn.utils.weight_norm, "forward pre-hook (WeightNorm)"),
            (lambda m: parametrize.register_parametrization(m, "weight", Double()),
             "parametrized weight"),
        ]
        for add, text in cases:
            with self.subTest(text=text):
                model = conv_act_pool()
                add(model[0])
                want = torch_run([model], self.x)
                fused, report = cpt.fuse(model, report=True)
                self.assertEqual(report.fused, [], str(report))
                left = {path: reason for path, _, reason in report.left}
                self.assertIn(text, left["0"])
                self.assertIn("left to torch", left["2"])
                self.assertTrue(torch.equal(torch_run([fused], self.x), want))
                with self.assertRaises(cpt.UnsupportedLayer) as ctx:
                    cpt.ConvPool2d(model[0])
                self.assertIn(text, str(ctx.exception))
        # The forward hook that zeroes the conv's output still does.
        model = conv_act_pool()
        model[0].register_forward_hook(lambda mod, inp, out: out * 0)
        fused = cpt.fuse(model)
        self.assertEqual(float(torch_run([fused], self.x).abs().max()), 0.0)

    def test_hooked_activation_or_pool_stays_with_torch(self):
        model = conv_act_pool()
        model[1].register_forward_hook(lambda mod, inp, out: out * 0)
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual([f.path for f in report.fused], ["0"])
        self.assertIsInstance(fused.get_submodule("1"), nn.ReLU)
        self.assertIsInstance(fused.get_submodule("2"), nn.MaxPool2d)
        left = {path: (kind, reason) for path, kind, reason in report.left}
        self.assertEqual(left["1"][0], "ReLU")
        self.assertIn("forward hook", left["1"][1])
        self.assertEqual(float(torch_run([fused], self.x).abs().max()), 0.0)

        model = conv_act_pool()
        model[2].register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
        want = torch_run([model], self.x)
        fused, report = cpt.fuse(model, report=True)
        self.assertNotIn("1", dict(fused.named_modules()))      # the ReLU was absorbed
        self.assertIsInstance(fused.get_submodule("2"), nn.MaxPool2d)
        self.assertIn("forward pre-hook", dict((p, r) for p, _, r in report.left)["2"])
        self.assertLessEqual(relative_error(torch_run([fused], self.x), want), 1e-5)

    def test_hardtanh_bounds_float32_cannot_hold(self):
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Hardtanh(-1e39, 1e39)).eval()
        fused, report = cpt.fuse(model, report=True)
        self.assertEqual([f.path for f in report.fused], ["0"])
        self.assertIsInstance(fused.get_submodule("1"), nn.Hardtanh)  # torch's (which refuses too)
        reason = dict((p, r) for p, _, r in report.left)["1"]
        self.assertIn("1e+39", reason)
        with self.assertRaises(cpt.UnsupportedLayer) as ctx:
            cpt.ConvPool2d(model[0], model[1])
        self.assertIn("float32", str(ctx.exception))


def run_onnx(model, x):
    """Evaluate an exported graph with torch's functional ops, reading ONNX's attributes.

    Knows the nodes the export may write (Conv, Relu, Clip, MaxPool and Constant,
    Cast, Unsqueeze, Squeeze); anything else fails the test.
    """
    from onnx import helper, numpy_helper
    values = {init.name: torch.from_numpy(numpy_helper.to_array(init).copy())
              for init in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in values]
    values[inputs[0]] = x
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ins = [values[name] if name else None for name in node.input]
        op = node.op_type
        if op == "Constant":
            out = torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy())
        elif op == "Conv":
            top, left, bottom, right = attrs.get("pads", [0, 0, 0, 0])
            out = F.conv2d(F.pad(ins[0], (left, right, top, bottom)), ins[1],
                           ins[2] if len(ins) > 2 else None, stride=attrs.get("strides", 1),
                           dilation=attrs.get("dilations", 1), groups=attrs.get("group", 1))
        elif op == "Relu":
            out = torch.relu(ins[0])
        elif op == "Clip":
            if len(ins) > 1:
                lo, hi = float(ins[1]), float(ins[2])
            else:
                lo, hi = attrs.get("min", -np.inf), attrs.get("max", np.inf)
            out = torch.clamp(ins[0], lo, hi)
        elif op == "MaxPool":
            top, left, bottom, right = attrs.get("pads", [0, 0, 0, 0])
            assert (top, left) == (bottom, right), attrs
            out = F.max_pool2d(ins[0], attrs["kernel_shape"], attrs["strides"], (top, left),
                               ceil_mode=bool(attrs.get("ceil_mode", 0)))
        elif op in ("Unsqueeze", "Squeeze"):
            axes = attrs["axes"] if "axes" in attrs else ins[1].tolist()
            out = ins[0].unsqueeze(axes[0]) if op == "Unsqueeze" else ins[0].squeeze(axes[0])
        else:
            raise AssertionError(f"unexpected ONNX node {op}")
        values[node.output[0]] = out
    return values[model.graph.output[0].name]


class TestTraceScriptExport(unittest.TestCase):
    """jit.trace, jit.script, fx and ONNX export see one op per fused layer."""

    def setUp(self):
        torch.manual_seed(17)
        self.model = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, 1, ceil_mode=True),
            nn.Conv2d(6, 5, 2, padding="same"), nn.Hardtanh(-0.2, 0.3),
            nn.Conv2d(5, 4, 1, bias=False), nn.ReLU6(), nn.MaxPool2d(2)).eval()
        self.x = torch.rand(2, 3, 13, 12) * 2 - 1
        self.x2 = torch.rand(1, 3, 20, 17) * 2 - 1        # not the traced shape
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)    # "same" with an even kernel
            self.want = torch_run([self.model], self.x)
            self.want2 = torch_run([self.model], self.x2)
        self.fused, report = cpt.fuse(self.model, report=True)
        self.assertEqual(len(report.fused), 3, str(report))

    def check(self, module):
        self.assertLessEqual(relative_error(torch_run([module], self.x), self.want), 1e-5)
        self.assertLessEqual(relative_error(torch_run([module], self.x2), self.want2), 1e-5)

    def test_trace(self):
        with torch.no_grad():
            traced = torch.jit.trace(self.fused, self.x)
        kinds = [node.kind() for node in traced.inlined_graph.nodes()]
        self.assertEqual(kinds.count("convpool::conv2d_maxpool"), 3, kinds)
        self.assertNotIn("aten::empty", kinds)
        self.check(traced)

    def test_script(self):
        scripted = torch.jit.script(self.fused)
        kinds = [node.kind() for node in scripted.inlined_graph.nodes()]
        self.assertEqual(kinds.count("convpool::conv2d_maxpool"), 3, kinds)
        self.check(scripted)

    def test_fx(self):
        graph_module = torch.fx.symbolic_trace(self.fused)
        calls = [n for n in graph_module.graph.nodes if n.op == "call_function"]
        self.assertEqual(len(calls), 3, graph_module.code)
        self.assertTrue(all("conv2d_maxpool" in str(n.target) for n in calls))
        self.check(graph_module)

    def test_saved_copies_outlive_the_module(self):
        with torch.no_grad():
            traced = torch.jit.trace(self.fused, self.x)
        saved = []
        for module in (traced, torch.jit.script(self.fused)):
            buffer = io.BytesIO()
            torch.jit.save(module, buffer)
            saved.append(buffer.getvalue())
        del self.fused, traced
        packs = []
        real_pack = cpt._pack
        cpt._pack = lambda *args: packs.append(args) or real_pack(*args)
        try:
            for data in saved:
                loaded = torch.jit.load(io.BytesIO(data))
                self.check(loaded)
                self.check(loaded)
        finally:
            cpt._pack = real_pack
        self.assertEqual(len(packs), 2 * 3)                 # each layer on its first call only

    def test_meta(self):
        layer = self.fused.get_submodule("0")
        for shape in ((2, 3, 13, 12), (3, 4, 4), (0, 3, 5, 5)):
            with self.subTest(shape=shape):
                x = torch.empty(shape, device="meta")
                y = torch.ops.convpool.conv2d_maxpool(
                    x, layer.weight.to("meta"), layer.bias.to("meta"), layer._padding,
                    layer._clamp_min, layer._clamp_max, layer._pool, layer._pool_stride,
                    layer._pool_padding, layer._ceil_mode, 0)
                self.assertEqual(y.device.type, "meta")
                want = torch_run(self.model[:3], torch.zeros(shape))
                self.assertEqual(tuple(y.shape), tuple(want.shape))

    def test_onnx_export(self):
        try:
            import onnx
        except ImportError as exc:                          # Debian: python3-onnx
            self.skipTest(f"onnx is not installed ({exc}); install python3-onnx")
        expected = ["Conv", "Relu", "MaxPool", "Conv", "Clip", "Conv", "Clip", "MaxPool"]
        for opset in (11, 14):
            for x, want in ((self.x, self.want), (self.x2[0], self.want2[0])):
                with self.subTest(opset=opset, shape=tuple(x.shape)):
                    buffer = io.BytesIO()
                    with torch.no_grad():
                        torch.onnx.export(self.fused, x, buffer, opset_version=opset)
                    model = onnx.load_from_string(buffer.getvalue())
                    onnx.checker.check_model(model)
                    kinds = [n.op_type for n in model.graph.node
                             if n.op_type not in ("Constant", "Unsqueeze", "Squeeze")]
                    self.assertEqual(kinds, expected)
                    self.assertLessEqual(relative_error(run_onnx(model, x), want), 1e-5)

    def test_onnx_export_refusals(self):
        # MaxPool's ceil_mode is opset 10's; ONNX's Conv has no bfloat16.
        cases = ((self.fused, self.x, 9, "ceil_mode"),
                 (cpt.ConvPool2d(nn.Conv2d(3, 4, 3)), self.x.bfloat16(), 14, "BFloat16"))
        for module, x, opset, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(RuntimeError) as ctx:
                    with torch.no_grad():
                        torch.onnx.export(module, x, io.BytesIO(), opset_version=opset)
                self.assertIn(text, str(ctx.exception))


class TestRefusedShapes(unittest.TestCase):
    """A shape the library refuses is computed with torch's ops where torch computes it."""

    def setUp(self):
        torch.manual_seed(19)

    def check(self, conv, act, pool, x, dtype=torch.float32, rtol=1e-5):
        model = nn.Sequential(*(m for m in (conv, act, pool) if m is not None)).eval()
        want = torch_run([model], x.to(dtype).float())
        fused = cpt.ConvPool2d(conv, act, pool)
        with torch.no_grad():
            got = fused(x.to(dtype))
        self.assertEqual(got.dtype, dtype)
        self.assertEqual(got.shape, want.shape)
        self.assertLessEqual(relative_error(got.float(), want), rtol)
        return fused

    def test_windows_larger_than_the_conv_output(self):
        # The reproducer: a 2x2 conv output, MaxPool2d(3, 2, ceil_mode=True) gives 1x1.
        self.check(nn.Conv2d(3, 4, 3), None, nn.MaxPool2d(3, 2, ceil_mode=True),
                   torch.rand(1, 3, 4, 4))
        cases = [
            (nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True), (2, 3, 3, 3)),
            (nn.Conv2d(3, 4, 3), None, nn.MaxPool2d(4, 4, ceil_mode=True), (1, 3, 5, 5)),
            (nn.Conv2d(3, 4, 3), nn.ReLU6(), nn.MaxPool2d(2, ceil_mode=True), (2, 3, 3, 9)),
            (nn.Conv2d(3, 4, 3, padding=1), nn.Hardtanh(-0.1, 0.2),
             nn.MaxPool2d(3, 3, ceil_mode=True), (1, 3, 2, 7)),
        ]
        for conv, act, pool, shape in cases:
            for dtype, rtol in ((torch.float32, 1e-5), (torch.float16, 2e-3),
                                (torch.bfloat16, 2e-2)):
                with self.subTest(pool=pool, shape=shape, dtype=dtype):
                    x = torch.rand(shape) * 2 - 1
                    self.check(conv, act, pool, x, dtype, rtol)
                    self.check(conv, act, pool, x[0], dtype, rtol)           # [C, H, W]

    def test_any_refusal_falls_back(self):
        """Whatever the library refuses at run time (here: a made-up refusal)."""
        conv, act, pool = nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        x = torch.rand(2, 3, 9, 11) * 2 - 1
        fused = self.check(conv, act, pool, x)
        self.assertEqual(fused.fallback_calls, 0)
        real = convpool.Operator.output_shape

        def refuse(op, x_shape):
            raise convpool.InvalidArgumentError("convpool_op_output_shape", 1,
                                                "invalid argument", "made up for the test")
        convpool.Operator.output_shape = refuse
        try:
            with torch.no_grad():
                got = fused(x)
        finally:
            convpool.Operator.output_shape = real
        self.assertLessEqual(relative_error(got, torch_run([conv, act, pool], x)), 1e-5)
        self.assertEqual(fused.fallback_calls, 1)
        self.assertIn("made up for the test", fused.fallback_reason)

    def test_torch_refuses_too(self):
        fused = cpt.ConvPool2d(nn.Conv2d(3, 4, 3), None, nn.MaxPool2d(2))
        with self.assertRaises(convpool.InvalidArgumentError) as ctx:
            with torch.no_grad():
                fused(torch.rand(1, 3, 3, 3))           # conv output 1x1, torch's pool: 0x0
        self.assertIsInstance(ctx.exception.__cause__, RuntimeError)
        self.assertEqual(fused.fallback_calls, 0)

    def test_output_shape_rule_is_torchs(self):
        """The shape rule of the Meta kernel and of empty batches, against torch's pooling."""
        for size in range(1, 9):
            for window in range(1, 6):
                for stride in range(1, 4):
                    for pad in range(window // 2 + 1):
                        for ceil_mode in (False, True):
                            spec = convpool.LayerSpec.make(pool=window, pool_stride=stride,
                                                           pool_padding=pad,
                                                           ceil_mode=ceil_mode)
                            try:
                                want = tuple(F.max_pool2d(torch.zeros(1, 1, size, size + 1),
                                                          window, stride, pad,
                                                          ceil_mode=ceil_mode).shape)
                            except RuntimeError:
                                want = None
                            try:
                                got = cpt._torch_output_shape((1, 1, size, size + 1),
                                                              (1, 1, 1, 1), spec)
                            except RuntimeError:
                                got = None
                            self.assertEqual(got, want, (size, window, stride, pad, ceil_mode))


@unittest.skipIf(torchvision is None, TORCHVISION or "")
class TestTorchvisionModels(unittest.TestCase):
    """VGG-11, VGG-16, AlexNet (weights=None, seed 0) fused vs torch on a 224x224 batch."""

    def run_model(self, name, batch, fused_count, left):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.rand(batch, 3, 224, 224)
        t0 = time.perf_counter()
        want = torch_run([model], x)
        t_torch = time.perf_counter() - t0
        fused, report = cpt.fuse(model, inplace=True, report=True)
        t0 = time.perf_counter()
        got = torch_run([fused], x)
        t_fused = time.perf_counter() - t0
        error = relative_error(got, want)
        print(f"\n[{name}] batch {batch}: max|d|/max|ref| = {error:.3g} "
              f"(max|ref| = {float(want.abs().max()):.3g}); one run: torch "
              f"{t_torch:.2f} s, fused {t_fused:.2f} s\n{report}", flush=True)
        self.assertEqual(got.shape, want.shape)
        self.assertLessEqual(error, MODEL_RTOL)
        self.assertEqual(len(report.fused), fused_count, str(report))
        self.assertEqual(sorted(p for p, _, _ in report.left), left, str(report))

    def test_vgg11(self):
        self.run_model("vgg11", 2, 8, [])

    def test_vgg16(self):
        self.run_model("vgg16", 1, 13, [])

    def test_alexnet(self):
        # The first conv has stride 4, the library's too since conv strides are.
        self.run_model("alexnet", 2, 5, [])


if __name__ == "__main__":
    if TORCHVISION:
        print(f"[skip] VGG/AlexNet tests: {TORCHVISION}", flush=True)
    unittest.main()
