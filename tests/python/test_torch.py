#!/usr/bin/env python3
"""Tests of convpool.torch: ConvPool2d against torch's modules, its refusals,
fuse() on small models and on torchvision's VGG-11, VGG-16 and AlexNet.

    python3 tests/python/test_torch.py [-v]

The torchvision models are built from their definitions with weights=None and
a fixed seed (nothing is downloaded); without torchvision those tests are
skipped and the reason is printed.
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
        self.assertEqual(list(half._operators), ["float16"])
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
        cases = [
            (nn.Conv2d(6, 8, 3, stride=2), None, None, "stride"),
            (nn.Conv2d(6, 8, 3, dilation=2), None, None, "dilation"),
            (nn.Conv2d(6, 8, 3, groups=2), None, None, "groups"),
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
            # Packed once: changing the conv's weights changes nothing until repack().
            conv.weight.mul_(0.5)
            self.assertTrue(torch.equal(a(self.x), ya))
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
            nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2, 1),   # 3-5
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
        fused, report = cpt.fuse(model)
        got = torch_run([fused], x)
        self.assertLessEqual(relative_error(got, want), 1e-5)
        self.assertEqual([p for p, _ in report.fused],
                         ["0", "6.0", "7", "9", "12"])
        left = {path: reason for path, _, reason in report.left}
        self.assertIn("stride", left["3"])
        self.assertIn("left to torch", left["5"])
        self.assertIn("dilation", left["10"])
        self.assertIn("Sequential", left["11.conv"])
        self.assertEqual(len(left), 4, str(report))
        # Absorbed modules become Identity; the others keep their places.
        self.assertIsInstance(fused[0], cpt.ConvPool2d)
        self.assertIsInstance(fused[1], nn.Identity)
        self.assertIsInstance(fused[2], nn.Identity)
        self.assertIsInstance(fused[3], nn.Conv2d)
        self.assertIsInstance(fused[6][1], nn.BatchNorm2d)
        self.assertIsInstance(fused[8], nn.Identity)
        self.assertIsInstance(fused[10], nn.MaxPool2d)
        self.assertIsInstance(fused[13], nn.Identity)
        # The model itself was left as it was.
        self.assertIsInstance(model[0], nn.Conv2d)
        self.assertTrue(torch.equal(torch_run([model], x), want))
        self.assertIn("fused 5 layer(s)", str(report))
        # A fused model has nothing more to fuse.
        again, report2 = cpt.fuse(fused)
        self.assertEqual(report2.fused, [])
        self.assertTrue(torch.equal(torch_run([again], x), got))

    def test_inplace(self):
        model = self.model()
        same, _ = cpt.fuse(model, inplace=True, impl="im2col", threads=1)
        self.assertIs(same, model)
        self.assertIsInstance(model[0], cpt.ConvPool2d)
        self.assertEqual(model[0].impl, "im2col")

    def test_not_a_module(self):
        with self.assertRaises(TypeError):
            cpt.fuse(lambda x: x)


def conv_act_pool(c_in=3, c_out=6):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2)).eval()


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
                fused, report = cpt.fuse(model)
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
        fused, _ = cpt.fuse(model)
        self.assertEqual(float(torch_run([fused], self.x).abs().max()), 0.0)

    def test_hooked_activation_or_pool_stays_with_torch(self):
        model = conv_act_pool()
        model[1].register_forward_hook(lambda mod, inp, out: out * 0)
        fused, report = cpt.fuse(model)
        self.assertEqual([p for p, _ in report.fused], ["0"])
        self.assertIsInstance(fused[1], nn.ReLU)
        self.assertIsInstance(fused[2], nn.MaxPool2d)
        left = {path: (kind, reason) for path, kind, reason in report.left}
        self.assertEqual(left["1"][0], "ReLU")
        self.assertIn("forward hook", left["1"][1])
        self.assertEqual(float(torch_run([fused], self.x).abs().max()), 0.0)

        model = conv_act_pool()
        model[2].register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
        want = torch_run([model], self.x)
        fused, report = cpt.fuse(model)
        self.assertIsInstance(fused[1], nn.Identity)
        self.assertIsInstance(fused[2], nn.MaxPool2d)
        self.assertIn("forward pre-hook", dict((p, r) for p, _, r in report.left)["2"])
        self.assertLessEqual(relative_error(torch_run([fused], self.x), want), 1e-5)

    def test_hardtanh_bounds_float32_cannot_hold(self):
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Hardtanh(-1e39, 1e39)).eval()
        fused, report = cpt.fuse(model)
        self.assertEqual([p for p, _ in report.fused], ["0"])
        self.assertIsInstance(fused[1], nn.Hardtanh)           # torch's (which refuses too)
        reason = dict((p, r) for p, _, r in report.left)["1"]
        self.assertIn("1e+39", reason)
        with self.assertRaises(cpt.UnsupportedLayer) as ctx:
            cpt.ConvPool2d(model[0], model[1])
        self.assertIn("float32", str(ctx.exception))


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
        fused, report = cpt.fuse(model, inplace=True)
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
        # The first conv has stride 4: it and its pool stay with torch.
        self.run_model("alexnet", 2, 4, ["features.0", "features.2"])


if __name__ == "__main__":
    if TORCHVISION:
        print(f"[skip] VGG/AlexNet tests: {TORCHVISION}", flush=True)
    unittest.main()
