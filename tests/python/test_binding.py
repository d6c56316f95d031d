#!/usr/bin/env python3
"""Tests of the Python binding (python/convpool): API, lifecycle, errors.

    python3 tests/python/test_binding.py [-v]

Numerical accuracy is the harness's job (tests/test_harness.py); here small
results are compared with a float64 NumPy reference only to show that the
arguments reach the library in the right order.
"""

import gc
import os
import subprocess
import sys
import threading
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

import convpool  # noqa: E402
sys.path.insert(0, str(REPO / "tests" / "support"))
import reference  # noqa: E402  (the test oracle, tests/support/reference.py)


def expected(x, w, bias=None, pool=1):
    y = reference.max_pool_numpy(reference.conv2d_numpy(x, w), pool)
    return reference.add_bias(y, bias)


def data(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(shape, dtype=np.float32).astype(dtype)


class TestModule(unittest.TestCase):
    def test_dir_is_the_api(self):
        names = dir(convpool)
        for name in ("Operator", "conv2d_maxpool", "set_shared_openmp", "shared_threads"):
            self.assertIn(name, names)
        for name in ("ctypes", "np", "threading", "Optional", "annotations"):
            self.assertNotIn(name, names)
        for name in convpool.__all__:
            self.assertTrue(hasattr(convpool, name), name)

    def test_type_hints(self):
        import typing
        hints = typing.get_type_hints(convpool.conv2d_maxpool)
        self.assertIs(hints["return"], np.ndarray)
        self.assertIs(typing.get_type_hints(convpool.shared_openmp)["return"], bool)
        self.assertIn("x_shape", typing.get_type_hints(convpool.Operator.plan))


class TestInfo(unittest.TestCase):
    def test_info(self):
        facts = convpool.info()
        self.assertEqual(facts["version"], convpool.__version__)
        self.assertIn(facts["isa"], ("avx512bf16", "avx512f", "avx2", "scalar"))
        self.assertGreaterEqual(facts["usable_cpus"], 1)
        for key in ("l1d_bytes", "l2_bytes", "l3_bytes"):
            self.assertGreater(facts[key], 0, key)
        self.assertIsInstance(facts["caches_from_cpuid"], bool)
        self.assertTrue(os.path.exists(facts["library"]), facts["library"])

    def test_status_string(self):
        self.assertEqual(convpool.status_string(0), "success")
        self.assertEqual(convpool.status_string(1), "invalid argument")


class TestOperator(unittest.TestCase):
    def setUp(self):
        self.w = data((5, 3, 3, 3), seed=1)
        self.b = data((5,), seed=2)
        self.x = data((2, 3, 11, 9), seed=3)

    def test_run_matches_reference(self):
        for dtype, rtol in ((np.float32, 1e-5), (np.float16, 2e-3)):
            x, w, b = (a.astype(dtype) for a in (self.x, self.w, self.b))
            with convpool.Operator(w, b, pool=2) as op:
                y = op(x)
            self.assertEqual(y.dtype, dtype)
            self.assertEqual(y.shape, (2, 5, 4, 3))
            np.testing.assert_allclose(y.astype(np.float64), expected(x, w, b, 2), rtol=rtol)

    def test_batch_and_size_change_between_runs(self):
        with convpool.Operator(self.w, self.b, pool=1) as op:
            for shape in ((1, 3, 5, 5), (3, 3, 11, 9), (2, 3, 3, 20)):
                x = data(shape, seed=sum(shape))
                np.testing.assert_allclose(op(x), expected(x, self.w, self.b), rtol=1e-5)

    def test_one_shot_equals_operator(self):
        with convpool.Operator(self.w, self.b, pool=2) as op:
            a = op(self.x)
        b = convpool.conv2d_maxpool(self.x, self.w, self.b, pool=2)
        self.assertEqual(a.tobytes(), b.tobytes())

    def test_out_argument(self):
        with convpool.Operator(self.w, pool=2) as op:
            out = np.full(op.output_shape(self.x.shape), np.nan, dtype=np.float32)
            result = op(self.x, out=out)
            self.assertIs(result, out)
            np.testing.assert_allclose(out, expected(self.x, self.w, None, 2), rtol=1e-5)
            with self.assertRaises(ValueError):
                op(self.x, out=np.empty((2, 5, 4, 4), np.float32))      # wrong shape
            with self.assertRaises(TypeError):
                op(self.x, out=np.empty((2, 5, 4, 3), np.float64))      # wrong dtype
            with self.assertRaises(ValueError):
                op(self.x, out=np.empty((2, 5, 3, 4), np.float32).transpose(0, 1, 3, 2))

    def test_plan_and_describe(self):
        with convpool.Operator(self.w, pool=1, threads=1, rows_per_item=2) as op:
            plan = op.plan(self.x.shape)
            self.assertEqual(set(plan), {"threads", "items", "rows_per_item", "mr", "nr",
                                         "col_block", "packed_weight_bytes",
                                         "scratch_bytes_per_thread", "isa", "kernel"})
            self.assertEqual(plan["threads"], 1)
            self.assertEqual(plan["rows_per_item"], 2)
            self.assertGreater(plan["items"], 0)
            self.assertGreater(plan["packed_weight_bytes"], 0)
            self.assertTrue(plan["kernel"])
            text = op.describe(self.x.shape)
            self.assertIsInstance(text, str)
            self.assertIn(plan["kernel"], text)
            with self.assertRaises(ValueError):
                op.plan((2, 4, 11, 9))                                  # wrong C_in

    def test_expected_input(self):
        # 256 -> 256 3x3 at 14x14: auto's Winograd hands that shape to F(2x2, 3x3) on
        # AVX-512 and AVX2 alike; settled there, the operator packs less and computes
        # the same bytes, and another shape stays correct.
        rng = np.random.default_rng(5)
        w = (rng.standard_normal((256, 256, 3, 3)) * 0.05).astype(np.float32)
        x = rng.standard_normal((1, 256, 14, 14)).astype(np.float32)
        x2 = rng.standard_normal((1, 256, 9, 9)).astype(np.float32)
        with convpool.Operator(w, pool=1, padding=1, threads=2) as any_shape, \
                convpool.Operator(w, pool=1, padding=1, threads=2,
                                  expected_input=(1, 14, 14)) as settled:
            text = settled.describe(x.shape)
            self.assertIn("settled at create for the expected shape [1, 256, 14, 14]", text)
            self.assertLess(settled.plan(x.shape)["packed_weight_bytes"],
                            any_shape.plan(x.shape)["packed_weight_bytes"])
            self.assertEqual(settled(x).tobytes(), any_shape(x).tobytes())
            padded = np.pad(x2, ((0, 0), (0, 0), (1, 1), (1, 1)))
            np.testing.assert_allclose(settled(x2), expected(padded, w, None, 1),
                                       rtol=1e-4, atol=1e-4)
        for bad in [(1, 14), "1,14,14", 3]:
            with self.assertRaises(TypeError):
                convpool.Operator(w, pool=1, expected_input=bad)
        with self.assertRaises(ValueError):
            convpool.Operator(w, pool=1, expected_input=(1, 0, 14))
        with self.assertRaises(ValueError):     # no conv output: refused at create
            convpool.Operator(w, pool=1, expected_input=(1, 2, 2))

    def test_last_run_stats(self):
        with convpool.Operator(self.w, self.b, pool=2, threads=2) as op:
            try:
                before = op.last_run_stats()
            except convpool.UnsupportedError:
                self.skipTest("this library has no convpool_op_last_run_stats")
            self.assertEqual(before["items"], 0)
            op(self.x)
            stats = op.last_run_stats()
            self.assertGreater(stats["wall_seconds"], 0)
            self.assertGreater(stats["items"], 0)
            self.assertEqual(stats["items"], op.plan(self.x.shape)["items"])
            self.assertEqual(stats["threads"], op.plan(self.x.shape)["threads"])

    def test_dtype_argument_converts_weights(self):
        with convpool.Operator(self.w.astype(np.float64), dtype="float16") as op:
            self.assertEqual(op.dtype, np.float16)
            y = op(self.x.astype(np.float16))
            self.assertEqual(y.dtype, np.float16)
            with self.assertRaises(TypeError):
                op(self.x)                                              # float32 input

    def test_close_and_context_manager(self):
        op = convpool.Operator(self.w)
        op.close()
        op.close()                                                      # idempotent
        self.assertTrue(op.closed)
        with self.assertRaises(convpool.InvalidStateError):
            op(self.x)
        with self.assertRaises(convpool.Error):
            op.plan(self.x.shape)
        with convpool.Operator(self.w) as op2:
            pass
        self.assertTrue(op2.closed)

    def test_cannot_be_copied(self):
        import copy
        import pickle
        with convpool.Operator(self.w) as op:
            for action in (copy.copy, copy.deepcopy, pickle.dumps):
                with self.subTest(action=action.__name__):
                    with self.assertRaises(TypeError):
                        action(op)
            self.assertEqual(op(self.x).shape, (2, 5, 9, 7))

    def test_garbage_collected_without_close(self):
        for _ in range(20):
            op = convpool.Operator(self.w, self.b)
            op(self.x)
            del op
        gc.collect()

    def test_concurrent_calls(self):
        """Calls on one Operator from several threads are serialised, not rejected."""
        with convpool.Operator(self.w, self.b, pool=2) as op:
            want = op(self.x)
            results, errors = [], []

            def worker():
                try:
                    for _ in range(10):
                        results.append(op(self.x))
                except Exception as exc:     # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=worker) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 40)
        for r in results:
            self.assertEqual(r.tobytes(), want.tobytes())

    def test_shared_pool(self):
        """Operators on the process-wide pool: its size, the same bytes, concurrent runs."""
        before = convpool.shared_threads()
        try:
            with convpool.Operator(self.w, self.b, pool=2, threads=1) as own:
                want = own(self.x)
                self.assertFalse(own.shared_pool)
            with convpool.Operator(self.w, self.b, pool=2, shared_pool=True) as a, \
                    convpool.Operator(self.w, self.b, pool=2, shared_pool=True,
                                      impl="im2col") as b:
                self.assertTrue(a.shared_pool)
                for n in (1, 3, 2):
                    convpool.set_shared_threads(n)
                    self.assertEqual(convpool.shared_threads(), n)
                    self.assertEqual(a.plan(self.x.shape)["threads"], n)
                    self.assertEqual(a(self.x).tobytes(), want.tobytes())
                    self.assertLessEqual(a.last_run_stats()["threads"], n)
                # Two operators on the pool from two Python threads take turns.
                results, errors = [], []

                def worker(op):
                    try:
                        for _ in range(10):
                            results.append(op(self.x))
                    except Exception as exc:     # reported below
                        errors.append(exc)
                threads = [threading.Thread(target=worker, args=(op,)) for op in (a, b, a, b)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(errors, [])
                self.assertEqual(len(results), 40)
                for r in results:
                    np.testing.assert_allclose(r, want, rtol=1e-5)
            with self.assertRaises(convpool.InvalidArgumentError) as ctx:
                convpool.Operator(self.w, shared_pool=True, threads=2)
            self.assertIn("threads = 2 with shared_pool", ctx.exception.message)
            with self.assertRaises(TypeError):
                convpool.Operator(self.w, shared_pool=1)
            for bad in (-1, 1025):
                with self.assertRaises(ValueError):
                    convpool.set_shared_threads(bad)
            convpool.set_shared_threads(0)
            self.assertEqual(convpool.shared_threads(), convpool.info()["usable_cpus"])
        finally:
            convpool.set_shared_threads(before)

    def test_shared_pool_openmp(self):
        """The shared pool on the OpenMP runtime's threads: the same bytes, back and forth."""
        was = convpool.shared_openmp()
        with convpool.Operator(self.w, self.b, pool=2, threads=1) as own:
            want = own(self.x)
        try:
            with self.assertRaises(TypeError):
                convpool.set_shared_openmp(1)
            try:
                convpool.set_shared_openmp(True)
            except convpool.UnsupportedError as exc:
                self.assertIn("no OpenMP", exc.message)
                self.assertFalse(convpool.shared_openmp())
                self.skipTest("this libconvpool was built without OpenMP")
            self.assertTrue(convpool.shared_openmp())
            with convpool.Operator(self.w, self.b, pool=2, shared_pool=True) as op:
                for n in (2, 1, 3):
                    convpool.set_shared_threads(n)
                    self.assertEqual(op(self.x).tobytes(), want.tobytes())
                    self.assertLessEqual(op.last_run_stats()["threads"], n)
                convpool.set_shared_openmp(False)
                self.assertFalse(convpool.shared_openmp())
                self.assertEqual(op(self.x).tobytes(), want.tobytes())
        finally:
            try:
                convpool.set_shared_openmp(was)
            except convpool.UnsupportedError:
                pass

    def test_impl_values(self):
        with convpool.Operator(self.w, impl="sr") as op:
            want = op(self.x)
            self.assertIn("shift-reduce", op.describe(self.x.shape).splitlines()[0])
        with convpool.Operator(self.w, impl="im2col") as op:
            got = op(self.x)
            self.assertIn("im2col", op.describe(self.x.shape).splitlines()[0])
        np.testing.assert_allclose(got, want, rtol=1e-5)
        np.testing.assert_allclose(got, expected(self.x, self.w), rtol=1e-5)
        with convpool.Operator(self.w, impl="winograd") as op:
            got = op(self.x)
            self.assertIn("winograd", op.describe(self.x.shape).splitlines()[0])
        np.testing.assert_allclose(got, expected(self.x, self.w), rtol=1e-5, atol=1e-6)
        with self.assertRaises(convpool.UnsupportedError):  # 3x3 filters only
            convpool.Operator(data((5, 3, 5, 5), seed=2), impl="winograd")
        with self.assertRaises(ValueError):
            convpool.Operator(self.w, impl="fft")


class TestErrors(unittest.TestCase):
    def setUp(self):
        self.w = data((4, 3, 3, 3))
        self.x = data((1, 3, 8, 8))

    def test_output_shape_remembered(self):
        """output_shape keeps its answers by input shape; other sizes are asked anew, a
        bad one refused every time, after a good one of equal value too."""
        with convpool.Operator(self.w, threads=1, pool=2) as op:
            self.assertEqual(op.output_shape((1, 3, 9, 9)), (1, 4, 3, 3))
            self.assertEqual(op.output_shape([1, 3, 9, 9]), (1, 4, 3, 3))
            self.assertEqual(op.output_shape((2, 3, 11, 9)), (2, 4, 4, 3))
            self.assertEqual(op.output_shape((np.int64(2), 3, 11, 9)), (2, 4, 4, 3))
            for bad, error in (((1, 3, 9.0, 9), TypeError), ((1, 3, True, 9), TypeError),
                               ((1, 5, 9, 9), ValueError), ((1, 3, 2, 9), convpool.Error)):
                for _ in range(2):
                    with self.assertRaises(error, msg=str(bad)):
                        op.output_shape(bad)
            for h in range(5, 5 + 2 * convpool._SHAPES_KEPT):   # more shapes than it keeps
                self.assertEqual(op.output_shape((1, 3, h, 9))[2], (h - 2) // 2)
            self.assertLessEqual(len(op._shapes), convpool._SHAPES_KEPT)

    def test_python_side_checks(self):
        x, w = self.x, self.w
        cases = [
            (TypeError, lambda: convpool.conv2d_maxpool(x.tolist(), w)),
            (TypeError, lambda: convpool.conv2d_maxpool(x.astype(np.float64), w)),
            (TypeError, lambda: convpool.conv2d_maxpool(x, w.astype(np.float16))),
            (TypeError, lambda: convpool.conv2d_maxpool(x, w, np.zeros(4, np.float64))),
            (ValueError, lambda: convpool.conv2d_maxpool(x[0], w)),
            (ValueError, lambda: convpool.conv2d_maxpool(x[:, :, ::2], w)),
            (ValueError, lambda: convpool.conv2d_maxpool(data((1, 2, 8, 8)), w)),
            (ValueError, lambda: convpool.conv2d_maxpool(x, data((4, 3, 3, 2)))),
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, data((5,)))),
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, pool=0)),
            (TypeError, lambda: convpool.conv2d_maxpool(x, w, pool=2.0)),
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, threads=-1)),
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, threads=2**31)),   # C int
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, pool=2**63)),      # int64
            (ValueError, lambda: convpool.Operator(w, rows_per_item=2**32)),
            (ValueError, lambda: convpool.conv2d_maxpool(x, w, impl="fast")),
            (TypeError, lambda: convpool.Operator(w, dtype=np.int32)),
        ]
        for i, (exc, call) in enumerate(cases):
            with self.subTest(i=i):
                with self.assertRaises(exc):
                    call()

    def test_library_invalid_argument(self):
        """Sizes only the library judges: ValueError that is a convpool.Error with its text."""
        for kwargs, x in (({"pool": 7}, self.x),                     # conv output 6x6
                          ({}, data((1, 3, 2, 8)))):                 # K=3 > H=2
            with self.subTest(kwargs=kwargs, shape=x.shape):
                with self.assertRaises(convpool.InvalidArgumentError) as ctx:
                    convpool.conv2d_maxpool(x, self.w, **kwargs)
                err = ctx.exception
                self.assertIsInstance(err, ValueError)
                self.assertIsInstance(err, convpool.Error)
                self.assertIsInstance(err, RuntimeError)
                self.assertEqual(err.status, 1)
                self.assertTrue(err.message, "the library must say what is wrong")
                self.assertIn(err.message, str(err))

    def test_output_too_large_to_allocate(self):
        """An output no allocator can give: MemoryError naming its size, not a NULL dst."""
        x, w = data((1, 1, 10, 10)), data((1, 1, 1, 1))
        for call in (lambda: convpool.conv2d_maxpool(x, w, padding=2**24),
                     lambda: convpool.Operator(w, padding=2**24)(x)):
            with self.assertRaises(MemoryError) as ctx:
                call()
            text = str(ctx.exception)
            self.assertIn("33554442", text)              # 10 + 2 * 2**24 rows and columns
            self.assertIn("PiB", text)
            self.assertNotIn("NULL", text)
        # Beyond the library's limit on pads, its refusal comes first and names the pad.
        with self.assertRaises(convpool.InvalidArgumentError) as ctx:
            convpool.conv2d_maxpool(x, w, padding=2**24 + 1)
        self.assertIn("padding top = 16777217", ctx.exception.message)

    def test_operator_rejects_input_too_small(self):
        with convpool.Operator(self.w, pool=2) as op:
            with self.assertRaises(convpool.InvalidArgumentError):
                op(data((1, 3, 3, 8)))                               # conv output 1 row < pool
            np.testing.assert_allclose(op(self.x), expected(self.x, self.w, None, 2), rtol=1e-5)

    def test_bfloat16_argument_checks(self):
        xb = convpool.float32_to_bfloat16(self.x)
        wb = convpool.float32_to_bfloat16(self.w)
        cases = [
            # uint16 without dtype="bfloat16" is not guessed to be bfloat16.
            (TypeError, lambda: convpool.conv2d_maxpool(xb, wb)),
            (TypeError, lambda: convpool.Operator(wb)),
            # dtype="bfloat16" needs bit patterns for x; the one-shot call converts nothing.
            (TypeError, lambda: convpool.conv2d_maxpool(self.x, wb, dtype="bfloat16")),
            (TypeError, lambda: convpool.conv2d_maxpool(xb, self.w, dtype="bfloat16")),
            (TypeError, lambda: convpool.conv2d_maxpool(xb, wb, np.zeros(4, np.float32),
                                                        dtype="bfloat16")),
            # Integer weights are neither values nor bit patterns.
            (TypeError, lambda: convpool.Operator(wb.astype(np.int32), dtype="bfloat16")),
            (TypeError, lambda: convpool.conv2d_maxpool(xb, wb, dtype="bfloat15")),
        ]
        for i, (exc, call) in enumerate(cases):
            with self.subTest(i=i):
                with self.assertRaises(exc):
                    call()
        with convpool.Operator(wb, dtype="bfloat16") as op:
            with self.assertRaises(TypeError):
                op(self.x)                                              # float32 input
            with self.assertRaises(TypeError):
                op(xb, out=np.empty(op.output_shape(xb.shape), np.float16))


def torch_layer(x, w, bias=None, pool=1, padding=0, activation=None, pool_stride=None,
                pool_padding=0, ceil_mode=False, stride=1, dilation=1, groups=1, residual=None):
    """The layer in float64 through torch, written out here (not the oracle reference.py):
    F.max_pool2d(act(F.conv2d(x, w, bias, stride, padding, dilation, groups) + residual))."""
    import torch
    import torch.nn.functional as F
    t = torch.from_numpy
    pads = convpool.layer.normalize_pads("padding", padding)
    xt = F.pad(t(x.astype(np.float64)), (pads[1], pads[3], pads[0], pads[2]))
    y = F.conv2d(xt, t(w.astype(np.float64)),
                 None if bias is None else t(bias.astype(np.float64)), stride=stride,
                 dilation=dilation, groups=groups)
    if residual is not None:
        y = y + t(residual.astype(np.float64))
    if activation == "relu":
        y = F.relu(y)
    elif activation == "relu6":
        y = F.relu6(y)
    elif activation is not None:
        y = F.hardtanh(y, *activation)
    ppads = convpool.layer.normalize_pads("pool_padding", pool_padding)
    assert ppads[:2] == ppads[2:], "symmetric pool padding only here"
    return F.max_pool2d(y, pool, pool if pool_stride is None else pool_stride,
                        ppads[:2], ceil_mode=ceil_mode).numpy()


class TestLayerKeywords(unittest.TestCase):
    """padding, activation, pool_stride, pool_padding and ceil_mode."""

    def setUp(self):
        rng = np.random.default_rng(21)
        self.x = (rng.random((2, 6, 13, 11), dtype=np.float32) * 2 - 1)
        self.w = (rng.random((5, 6, 3, 3), dtype=np.float32) * 2 - 1)
        self.b = (rng.random(5, dtype=np.float32) * 2 - 1)

    def check(self, **kwargs):
        want = torch_layer(self.x, self.w, self.b, **kwargs)
        got = convpool.conv2d_maxpool(self.x, self.w, self.b, **kwargs)
        self.assertEqual(got.shape, want.shape, kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))
        with convpool.Operator(self.w, self.b, **kwargs) as op:
            self.assertEqual(op.output_shape(self.x.shape), want.shape)
            self.assertEqual(op(self.x).tobytes(), got.tobytes(), kwargs)
        return got

    def test_each_keyword_against_torch(self):
        for kwargs in ({"padding": 1}, {"padding": (2, 0)}, {"padding": (0, 1, 2, 3)},
                       {"activation": "relu"}, {"activation": "relu6"},
                       {"activation": (-0.5, 0.75)}, {"activation": (-np.inf, 0.0)},
                       {"pool": 3, "pool_stride": 2}, {"pool": 2, "pool_stride": 1},
                       {"pool": 2, "pool_stride": 3}, {"pool": 3, "pool_padding": 1},
                       {"pool": 2, "pool_padding": (1, 0)},
                       {"pool": 3, "pool_stride": 2, "ceil_mode": True},
                       {"pool": 2, "pool_padding": 1, "ceil_mode": True},
                       {"pool": 3, "pool_stride": 2, "padding": 2, "activation": "relu",
                        "pool_padding": 1, "ceil_mode": True}):
            with self.subTest(**{k: str(v) for k, v in kwargs.items()}):
                self.check(**kwargs)

    def test_partial_window_in_ceil_mode_against_torch(self):
        """A window larger than the conv output: torch's ceil sizing keeps one partial window."""
        x = self.x[:, :, :4, :6].copy()            # conv output 2x4
        for kwargs in ({"pool": 3, "pool_stride": 2, "ceil_mode": True},
                       {"pool": 5, "pool_stride": 4, "ceil_mode": True},
                       {"pool": 4, "pool_stride": 3, "pool_padding": 1, "ceil_mode": True}):
            want = torch_layer(x, self.w, self.b, **kwargs)
            got = convpool.conv2d_maxpool(x, self.w, self.b, **kwargs)
            self.assertEqual(got.shape, want.shape, kwargs)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))

    def test_padding_forms_are_equivalent(self):
        a = self.check(padding=1)
        self.assertEqual(self.check(padding=(1, 1)).tobytes(), a.tobytes())
        self.assertEqual(self.check(padding=[1, 1, 1, 1]).tobytes(), a.tobytes())
        self.assertEqual(self.check(padding=np.int64(1)).tobytes(), a.tobytes())

    def test_defaults_are_the_original_layer(self):
        explicit = convpool.conv2d_maxpool(self.x, self.w, self.b, pool=2, padding=0,
                                           activation=None, pool_stride=2, pool_padding=0,
                                           ceil_mode=False)
        plain = convpool.conv2d_maxpool(self.x, self.w, self.b, 2)
        self.assertEqual(explicit.tobytes(), plain.tobytes())
        np.testing.assert_allclose(plain, expected(self.x, self.w, self.b, 2), rtol=1e-5,
                                   atol=1e-6)

    def test_padding_lets_the_filter_exceed_the_input(self):
        x = self.x[:, :, :2, :2].copy()
        got = convpool.conv2d_maxpool(x, self.w, self.b, padding=1)
        self.assertEqual(got.shape, (2, 5, 2, 2))
        np.testing.assert_allclose(got, torch_layer(x, self.w, self.b, padding=1), rtol=1e-5,
                                   atol=1e-6)

    def test_relu_keeps_nan(self):
        x = self.x.copy()
        x[0, 0, 5, 5] = np.nan
        got = convpool.conv2d_maxpool(x, self.w, self.b, pool=2, activation="relu", padding=1)
        want = torch_layer(x, self.w, self.b, pool=2, activation="relu", padding=1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        self.assertTrue(np.isnan(got).any())

    def test_output_shape_matches_the_python_rule(self):
        """The library's sizes against LayerSpec.output_size (torch's rule) over a grid."""
        for pool in (1, 2, 3, 4):
            for stride in (1, 2, 3, 5):
                half, most = pool // 2, pool - 1      # torch's bound, ONNX's
                for pads in ((0, 0, 0, 0), (half, 0, 0, half), (half,) * 4, (0, half) * 2,
                             (most,) * 4, (0, most, most, 0)):
                    for ceil in (False, True):
                        spec = convpool.LayerSpec.make(pool=pool, pool_stride=stride,
                                                       pool_padding=pads, ceil_mode=ceil)
                        with convpool.Operator(self.w, threads=1, **spec.kwargs()) as op:
                            for h, w in ((7, 7), (8, 12), (9, 4), (3, 4), (4, 5)):
                                _, _, ph, pw = spec.output_size(h, w, 3)
                                if ph < 1 or pw < 1:
                                    continue
                                self.assertEqual(op.output_shape((1, 6, h, w)),
                                                 (1, 5, ph, pw), (spec, h, w))

    def test_python_side_checks(self):
        x, w = self.x, self.w
        cases = [
            (ValueError, {"padding": -1}),
            (ValueError, {"padding": (1, 2, 3)}),
            (TypeError, {"padding": "same"}),
            (TypeError, {"padding": 1.5}),
            (TypeError, {"padding": (1, None)}),
            (ValueError, {"pool_padding": (0, -1)}),
            (ValueError, {"activation": "gelu"}),
            (TypeError, {"activation": 6}),
            (TypeError, {"activation": ("0", 6)}),
            (ValueError, {"activation": (1.0, 0.0)}),
            (ValueError, {"activation": (np.nan, 1.0)}),
            (ValueError, {"activation": (0, 1, 2)}),
            (ValueError, {"pool": 2, "pool_stride": 0}),
            (TypeError, {"pool": 2, "pool_stride": 1.0}),
            (TypeError, {"ceil_mode": "yes"}),
            (TypeError, {"ceil_mode": 2}),
        ]
        for i, (exc, kwargs) in enumerate(cases):
            for call in (lambda: convpool.conv2d_maxpool(x, w, **kwargs),
                         lambda: convpool.Operator(w, **kwargs)):
                with self.subTest(i=i, kwargs=str(kwargs)):
                    with self.assertRaises(exc) as ctx:
                        call()
                    self.assertNotIsInstance(ctx.exception, convpool.Error)
                    name = next(iter(kwargs)) if len(kwargs) == 1 else list(kwargs)[-1]
                    self.assertIn(name.split("_")[0], str(ctx.exception))

    def test_clamp_bounds_float32_cannot_hold(self):
        """Finite bounds that round to +-inf in float32, and NaN, are refused naming the value."""
        x, w = self.x, self.w
        big = float(np.finfo(np.float32).max)
        for bounds, text in (((1e39, 2e39), "1e+39"), ((-1e39, 0.0), "-1e+39"),
                             ((0.0, 3.5e38), "3.5e+38"), ((0.0, -np.nan), "NaN"),
                             ((np.nan, np.nan), "NaN"), ((np.float64(1e300), np.inf), "1e+300")):
            for call in (lambda: convpool.conv2d_maxpool(x, w, activation=bounds),
                         lambda: convpool.Operator(w, activation=bounds),
                         lambda: convpool.LayerSpec.make(activation=bounds)):
                with self.subTest(bounds=bounds):
                    with self.assertRaises(ValueError) as ctx:
                        call()
                    self.assertNotIsInstance(ctx.exception, convpool.Error)
                    self.assertIn(text, str(ctx.exception))
                    self.assertIn("activation", str(ctx.exception))
        # What float32 holds passes: its largest value, values that round to it, and
        # the infinities (no bound).
        for bounds, clamp in (((-big, big), (-big, big)),
                              ((-3.4028235e38, 3.40282356e38), (-big, big)),
                              ((-np.inf, np.inf), (-np.inf, np.inf)),
                              ((0.0, np.inf), (0.0, np.inf))):
            with self.subTest(bounds=bounds):
                self.assertEqual(convpool.LayerSpec.make(activation=bounds).clamp, clamp)
                got = convpool.conv2d_maxpool(x, w, self.b, activation=bounds)
                np.testing.assert_allclose(got, torch_layer(x, w, self.b, activation=bounds),
                                           rtol=1e-5, atol=1e-5)

    def test_library_errors_are_surfaced(self):
        cases = [({"pool": 2, "pool_padding": 2}, "pool_padding"),
                 ({"pool": 3, "pool_padding": (0, 0, 0, 3)}, "pool_padding right"),
                 ({"pool": 20, "padding": 1}, "pool = 20"),
                 ({"padding": 10**9}, "padding top")]
        for kwargs, text in cases:
            for call in (lambda: convpool.conv2d_maxpool(self.x, self.w, **kwargs),
                         lambda: convpool.Operator(self.w, **kwargs)(self.x)):
                with self.subTest(kwargs=str(kwargs)):
                    with self.assertRaises(convpool.InvalidArgumentError) as ctx:
                        call()
                    self.assertIn(text, ctx.exception.message)
                    self.assertIn(ctx.exception.message, str(ctx.exception))

    def test_layer_struct_comes_from_the_library(self):
        import ctypes
        from convpool import _native
        lib = _native.load()
        layer = _native.init_struct(_native.ConvpoolLayer, lib.convpool_layer_init,
                                    _native.FLOAT16, 7, 5, 3, 2)
        self.assertEqual(layer.size, ctypes.sizeof(_native.ConvpoolLayer))
        self.assertEqual((layer.dtype, layer.c_out, layer.c_in, layer.k), (1, 7, 5, 3))
        self.assertEqual((layer.stride, layer.dilation, layer.groups), (1, 1, 1))
        self.assertEqual((layer.pool, layer.pool_stride, layer.ceil_mode), (2, 0, 0))
        self.assertEqual(list(layer.padding) + list(layer.pool_padding), [0] * 8)
        self.assertEqual((layer.activation, layer.clamp_min, layer.clamp_max),
                         (0, -np.inf, np.inf))
        opts = _native.init_struct(_native.ConvpoolOptions, lib.convpool_options_init)
        self.assertEqual(opts.size, ctypes.sizeof(_native.ConvpoolOptions))

    def test_operator_spec_and_repr(self):
        with convpool.Operator(self.w, pool=3, pool_stride=2, padding=(1, 2),
                               activation="relu") as op:
            self.assertEqual(op.spec.padding, (1, 2, 1, 2))
            self.assertEqual(op.spec.pool_stride, 2)
            self.assertIn("relu", repr(op))
            self.assertIn("stride2", repr(op))

    def test_float16_and_bfloat16(self):
        kwargs = {"pool": 3, "pool_stride": 2, "padding": 1, "activation": "relu6",
                  "pool_padding": 1, "ceil_mode": True}
        x16, w16, b16 = (a.astype(np.float16) for a in (self.x, self.w, self.b))
        want = torch_layer(x16, w16, b16, **kwargs)
        got = convpool.conv2d_maxpool(x16, w16, b16, **kwargs)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)
        xb, wb, bb = (convpool.float32_to_bfloat16(a) for a in (self.x, self.w, self.b))
        want = torch_layer(*(convpool.bfloat16_to_float32(a) for a in (xb, wb, bb)), **kwargs)
        got = convpool.conv2d_maxpool(xb, wb, bb, dtype="bfloat16", **kwargs)
        np.testing.assert_allclose(convpool.bfloat16_to_float32(got), want, rtol=1e-2,
                                   atol=2e-2)


class TestConvKeywords(unittest.TestCase):
    """stride, dilation, groups and the residual, against torch in float64."""

    def setUp(self):
        self.rng = np.random.default_rng(31)

    def signed(self, shape):
        return self.rng.random(shape, dtype=np.float32) * 2 - 1

    def layer(self, c_in, c_out, k, groups, height=17, width=14, batch=2):
        return (self.signed((batch, c_in, height, width)),
                self.signed((c_out, c_in // groups, k, k)), self.signed(c_out))

    def declines(self, impl, k, c_in, kwargs):
        """The value the algorithm must decline, naming it, or None."""
        stride, dilation = kwargs.get("stride", 1), kwargs.get("dilation", 1)
        groups = kwargs.get("groups", 1)
        if impl == "depthwise" and groups != c_in:
            return f"groups = {groups}, C_in = {c_in}"
        if k > 1 and dilation > 1 and impl == "sr":
            return f"dilation = {dilation}"
        if impl in ("winograd", "winograd2x3"):
            if k != 3:
                return f"k = {k}"
            if stride != 1:
                return f"stride = {stride}"
            if dilation != 1:
                return f"dilation = {dilation}"
            if groups != 1:
                return f"groups = {groups}"
        return None

    def check(self, x, w, b, impl="auto", residual=None, **kwargs):
        """One-shot and Operator against torch, or the algorithm's refusal."""
        why = self.declines(impl, w.shape[2], x.shape[1], kwargs)
        if why is not None:
            with self.assertRaises(convpool.UnsupportedError) as ctx:
                convpool.conv2d_maxpool(x, w, b, impl=impl, residual=residual, **kwargs)
            self.assertIn(why, ctx.exception.message)
            return None
        want = torch_layer(x, w, b, residual=residual, **kwargs)
        got = convpool.conv2d_maxpool(x, w, b, impl=impl, residual=residual, **kwargs)
        self.assertEqual(got.shape, want.shape, kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))
        with convpool.Operator(w, b, impl=impl, residual=residual is not None, **kwargs) as op:
            self.assertEqual(op.output_shape(x.shape), want.shape)
            self.assertEqual(op(x, residual=residual).tobytes(), got.tobytes(), kwargs)
        return got

    def test_grid_against_torch(self):
        """Stride 1..3, dilation 1..2, groups 1, 2 and depthwise (multiplier 1 and 2),
        residual or not, on every algorithm (those that do not compute a layer decline
        it, naming the value)."""
        for impl in convpool.impls():
            for groups, c_in, c_out in ((1, 4, 6), (2, 6, 4), (5, 5, 5), (3, 3, 6)):
                for k in (1, 3):
                    x, w, b = self.layer(c_in, c_out, k, groups)
                    for stride in (1, 2, 3):
                        for dilation in (1, 2):
                            for with_residual in (False, True):
                                kwargs = {"stride": stride, "dilation": dilation,
                                          "groups": groups, "padding": (1, 2, 0, 1),
                                          "activation": "relu", "pool": 2,
                                          "pool_stride": 1 + stride % 2}
                                residual = None
                                if with_residual:
                                    spec = convpool.LayerSpec.make(**kwargs)
                                    oh, ow, _, _ = spec.output_size(17, 14, k)
                                    residual = self.signed((2, c_out, oh, ow))
                                with self.subTest(impl=impl, groups=groups, k=k,
                                                  stride=stride, dilation=dilation,
                                                  residual=with_residual):
                                    self.check(x, w, b, impl, residual, **kwargs)

    def test_network_layers(self):
        # The ResNet stem: 7x7 stride 2, pad 3, ReLU, max pool 3 stride 2 pad 1.
        x, w, b = self.layer(3, 8, 7, 1, 40, 38, 1)
        self.check(x, w, b, stride=2, padding=3, activation="relu", pool=3, pool_stride=2,
                   pool_padding=1)
        # A ResNet block's end: 3x3 conv + the shortcut, then ReLU.
        x, w, b = self.layer(8, 8, 3, 1, 14, 14)
        self.check(x, w, b, padding=1, activation="relu", residual=self.signed((2, 8, 14, 14)))
        # MobileNet depthwise 3x3 of stride 2, ReLU6.
        x, w, b = self.layer(12, 12, 3, 12, 15, 16)
        self.check(x, w, b, groups=12, stride=2, padding=1, activation="relu6")

    def test_float16_and_bfloat16(self):
        kwargs = {"stride": 2, "groups": 2, "padding": 1, "activation": "relu", "pool": 2}
        x, w, b = self.layer(4, 6, 3, 2)
        residual = self.signed((2, 6, 9, 7))
        x16, w16, b16, r16 = (a.astype(np.float16) for a in (x, w, b, residual))
        want = torch_layer(x16, w16, b16, residual=r16, **kwargs)
        got = convpool.conv2d_maxpool(x16, w16, b16, residual=r16, **kwargs)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)
        xb, wb, bb, rb = (convpool.float32_to_bfloat16(a) for a in (x, w, b, residual))
        want = torch_layer(*(convpool.bfloat16_to_float32(a) for a in (xb, wb, bb)),
                           residual=convpool.bfloat16_to_float32(rb), **kwargs)
        got = convpool.conv2d_maxpool(xb, wb, bb, dtype="bfloat16", residual=rb, **kwargs)
        np.testing.assert_allclose(convpool.bfloat16_to_float32(got), want, rtol=1e-2,
                                   atol=2e-2)
        with convpool.Operator(wb, bb, dtype="bfloat16", residual=True, **kwargs) as op:
            self.assertEqual(op(xb, residual=rb).tobytes(), got.tobytes())

    def test_residual_nan_and_inf_propagate_as_torch(self):
        x, w, b = self.layer(4, 4, 3, 1)
        residual = self.signed((2, 4, 15, 12))
        residual[0, 0, 3, 3], residual[0, 1, 7, 2], residual[1, 2, 0, 0] = np.nan, np.inf, -np.inf
        residual[1, 3, 5, 5], residual[1, 3, 5, 6] = np.inf, -np.inf   # one window: inf - inf
        wd = self.signed((4, 1, 3, 3))   # the depthwise layer of the same shapes
        for impl in convpool.impls():
            groups, wi = (4, wd) if impl == "depthwise" else (1, w)
            with self.subTest(impl=impl):
                got = convpool.conv2d_maxpool(x, wi, b, pool=2, activation="relu", groups=groups,
                                              residual=residual, impl=impl)
                want = torch_layer(x, wi, b, pool=2, activation="relu", groups=groups,
                                   residual=residual)
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
                self.assertTrue(np.isnan(got).any() and np.isinf(got).any())
                finite = np.isfinite(want)
                np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)

    def test_output_and_conv_shapes(self):
        """The library's sizes against LayerSpec.output_size (torch's rule)."""
        x, w, _ = self.layer(4, 4, 3, 1)
        for stride in (1, 2, 3, 4):
            for dilation in (1, 2, 3):
                for padding in (0, 1, (2, 0, 1, 3)):
                    spec = convpool.LayerSpec.make(stride=stride, dilation=dilation,
                                                   padding=padding, pool=2)
                    with convpool.Operator(w, threads=1, residual=True, **spec.kwargs()) as op:
                        for h, wd in ((9, 9), (12, 7), (20, 5)):
                            oh, ow, ph, pw = spec.output_size(h, wd, 3)
                            if oh < 1 or ow < 1 or ph < 1 or pw < 1:
                                continue
                            with self.subTest(spec=spec, h=h, w=wd):
                                self.assertEqual(op.output_shape((1, 4, h, wd)), (1, 4, ph, pw))
                                self.assertEqual(op.conv_shape((1, 4, h, wd)), (1, 4, oh, ow))

    def test_python_side_checks(self):
        x, w, b = self.layer(4, 6, 3, 2)
        cases = [(ValueError, "stride", {"stride": 0}),
                 (TypeError, "stride", {"stride": 1.5}),
                 (ValueError, "dilation", {"dilation": -1}),
                 (TypeError, "dilation", {"dilation": "2"}),
                 (ValueError, "groups", {"groups": 0}),
                 (TypeError, "groups", {"groups": True})]
        for exc, text, kwargs in cases:
            for call in (lambda: convpool.conv2d_maxpool(x, w, **kwargs),
                         lambda: convpool.Operator(w, **kwargs)):
                with self.subTest(kwargs=str(kwargs)):
                    with self.assertRaises(exc) as ctx:
                        call()
                    self.assertNotIsInstance(ctx.exception, convpool.Error)
                    self.assertIn(text, str(ctx.exception))
        # x must have groups x w's channels
        with self.assertRaises(ValueError) as ctx:
            convpool.conv2d_maxpool(x, w, b, groups=3)
        self.assertIn("groups = 3", str(ctx.exception))
        # the residual: its shape, dtype and layout, and the Operator's promise
        good = self.signed((2, 6, 15, 12))
        for residual, exc, text in ((good[:, :, :-1].copy(), ValueError, "(2, 6, 15, 12)"),
                                    (good.astype(np.float16), TypeError, "residual"),
                                    (good[:, :, :, ::2], ValueError, "residual"),
                                    (good[0], ValueError, "residual")):
            with self.assertRaises(exc) as ctx:
                convpool.conv2d_maxpool(x, w, b, groups=2, residual=residual)
            self.assertIn(text, str(ctx.exception))
        with convpool.Operator(w, b, groups=2, residual=True) as op:
            with self.assertRaises(ValueError) as ctx:
                op(x)
            self.assertIn("residual=True", str(ctx.exception))
            out = np.empty(op.output_shape(x.shape), np.float32)
            shared = np.empty(out.size + good.size, np.float32)
            with self.assertRaises(ValueError) as ctx:
                op(x, out=shared[:out.size].reshape(out.shape),
                   residual=shared[:good.size].reshape(good.shape))
            self.assertIn("overlaps residual", str(ctx.exception))
            self.assertIn("residual", repr(op))
        with convpool.Operator(w, b, groups=2) as op:
            with self.assertRaises(ValueError) as ctx:
                op(x, residual=good)
            self.assertIn("without a residual", str(ctx.exception))
        with self.assertRaises(TypeError):
            convpool.Operator(w, b, groups=2, residual=good)

    def test_library_errors_are_surfaced(self):
        x, w, b = self.layer(4, 6, 3, 2)
        cases = [({"groups": 4}, w[:, :1].copy(), "conv groups = 4"),
                 ({"groups": 2, "stride": 2**25}, w, "conv stride = 33554432"),
                 ({"groups": 2, "dilation": 2**25}, w, "conv dilation = 33554432"),
                 ({"groups": 2, "dilation": 9}, w, "dilated filter k = 3, dilation = 9")]
        for kwargs, weights, text in cases:
            for call in (lambda: convpool.conv2d_maxpool(x, weights, **kwargs),
                         lambda: convpool.Operator(weights, **kwargs)(x)):
                with self.subTest(kwargs=str(kwargs)):
                    with self.assertRaises(convpool.InvalidArgumentError) as ctx:
                        call()
                    self.assertIn(text, ctx.exception.message)


def bf16_oracle(values32):
    """bfloat16 bits of float32 values, nearest even, by comparing the two candidates.

    Independent of convpool.bfloat16's bit arithmetic: the candidates are the
    pattern truncated toward zero and the next one up in magnitude; the
    distances are exact in float64, and a tie picks the even pattern. Finite
    inputs only.
    """
    bits = np.asarray(values32, np.float32).view(np.uint32)
    low = (bits >> 16).astype(np.int64)
    high = low + 1                      # next magnitude (may be the infinity pattern)
    v = np.asarray(values32, np.float32).astype(np.float64)

    def decode(b):
        return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    d_low = np.abs(v - decode(low))
    with np.errstate(invalid="ignore"):
        d_high = np.abs(decode(high) - v)
    # Past the largest finite bfloat16 "high" is infinity: measure to 2**128 instead.
    d_high = np.where(np.isinf(decode(high)), np.abs(2.0 ** 128 - np.abs(v)), d_high)
    pick_high = (d_high < d_low) | ((d_high == d_low) & (low % 2 == 1))
    return np.where(pick_high, high, low).astype(np.uint16)


class TestOnnxAutoPads(unittest.TestCase):
    """convpool.onnx_auto_pads: an ONNX node's auto_pad as explicit pads."""

    def test_values_of_the_rule(self):
        f = convpool.onnx_auto_pads
        # size 5, K 3, stride 2: output 3, 2 pads, one on each side
        self.assertEqual(f("SAME_UPPER", 5, 3, 2), (1, 1, 1, 1))
        # size 6: one pad, at the end (UPPER) or at the beginning (LOWER)
        self.assertEqual(f("SAME_UPPER", 6, 3, 2), (0, 0, 1, 1))
        self.assertEqual(f("SAME_LOWER", 6, 3, 2), (1, 1, 0, 0))
        self.assertEqual(f(b"SAME_UPPER", (4, 4), 2), (0, 0, 1, 1))
        # rows: output 4 and a dilated span of 5, 4 pads; columns: stride 3
        # over 8 with a 1-wide window needs none
        self.assertEqual(f("SAME_LOWER", (7, 8), (3, 1), (2, 3), (2, 1)), (2, 0, 2, 0))
        self.assertEqual(f("VALID", 9, 5, 2), (0, 0, 0, 0))
        self.assertEqual(f("NOTSET", 9, 5, pads=(1, 2, 3, 4)), (1, 2, 3, 4))
        self.assertEqual(f("NOTSET", 9, 5), (0, 0, 0, 0))

    def test_bad_values_are_refused(self):
        f = convpool.onnx_auto_pads
        with self.assertRaisesRegex(ValueError, "auto_pad = 'SAME'"):
            f("SAME", 4, 3)
        with self.assertRaisesRegex(TypeError, "auto_pad must be a str"):
            f(1, 4, 3)
        with self.assertRaisesRegex(ValueError, "stride = 0"):
            f("SAME_UPPER", 4, 3, 0)
        with self.assertRaisesRegex(ValueError, "size rows = 0"):
            f("SAME_UPPER", (0, 4), 3)
        with self.assertRaisesRegex(ValueError, "kernel = .* got 3"):
            f("VALID", 4, (3, 3, 3))

    def test_same_conv_and_pool_against_torch(self):
        """SAME pads make the conv output ceil(H / s) and the pooled one ceil(OH / S);
        the values are torch's with those pads written out (zeros before the conv,
        -inf before the pool)."""
        import torch
        import torch.nn.functional as F
        t = torch.from_numpy
        rng = np.random.default_rng(5)
        for h, wd in ((7, 8), (13, 6)):
            x = rng.standard_normal((2, 5, h, wd)).astype(np.float32)
            for k, s, d in ((1, 2, 1), (2, 1, 1), (3, 2, 1), (3, 1, 2), (4, 3, 1), (5, 2, 1)):
                w = rng.standard_normal((4, 5, k, k)).astype(np.float32)
                b = rng.standard_normal(4).astype(np.float32)
                for mode in ("SAME_UPPER", "SAME_LOWER"):
                    pads = convpool.onnx_auto_pads(mode, (h, wd), k, s, d)
                    oh, ow = -(-h // s), -(-wd // s)
                    xp = F.pad(t(x.astype(np.float64)), (pads[1], pads[3], pads[0], pads[2]))
                    y = F.relu(F.conv2d(xp, t(w.astype(np.float64)), t(b.astype(np.float64)),
                                        stride=s, dilation=d))
                    self.assertEqual(tuple(y.shape[2:]), (oh, ow))
                    for p, ps in ((1, 1), (2, 2), (3, 2), (2, 3)):
                        ppads = convpool.onnx_auto_pads(mode, (oh, ow), p, ps)
                        case = dict(h=h, w=wd, k=k, s=s, d=d, mode=mode, p=p, ps=ps)
                        with self.subTest(**case):
                            got = convpool.conv2d_maxpool(
                                x, w, b, pool=p, pool_stride=ps, padding=pads, stride=s,
                                dilation=d, pool_padding=ppads, activation="relu")
                            yp = F.pad(y, (ppads[1], ppads[3], ppads[0], ppads[2]),
                                       value=-np.inf)
                            want = F.max_pool2d(yp, p, ps).numpy()
                            self.assertEqual(got.shape, (2, 4, -(-oh // ps), -(-ow // ps)))
                            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                                       err_msg=str(case))


class TestBfloat16Conversions(unittest.TestCase):
    """convpool.float32_to_bfloat16 and convpool.bfloat16_to_float32."""

    def test_every_pattern_round_trips(self):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        values = convpool.bfloat16_to_float32(bits)
        self.assertEqual(values.dtype, np.float32)
        self.assertEqual(values.shape, bits.shape)
        nan = np.isnan(values)
        self.assertEqual(int(nan.sum()), 2 * 127)       # exponent all ones, significand != 0
        with np.errstate(invalid="ignore"):          # signalling NaN patterns
            wide = values.astype(np.float64)
        for source in (values, wide):
            back = convpool.float32_to_bfloat16(source)
            self.assertEqual(back.dtype, np.uint16)
            np.testing.assert_array_equal(back[~nan], bits[~nan])
            self.assertTrue(np.isnan(convpool.bfloat16_to_float32(back[nan])).all())
        # Decoding is exact: the low 16 bits of each float32 are zero.
        np.testing.assert_array_equal(values.view(np.uint32) >> 16, bits)

    def test_ties_round_to_even(self):
        one = 1.0
        cases = [
            (one + 2.0 ** -8, 0x3F80),          # halfway 1 / 1+2^-7: down to the even 1
            (one + 3 * 2.0 ** -8, 0x3F82),      # halfway 1+2^-7 / 1+2^-6: up to the even one
            (-(one + 2.0 ** -8), 0xBF80),
            (-(one + 3 * 2.0 ** -8), 0xBF82),
            (one + 2.0 ** -8 + 2.0 ** -20, 0x3F81),   # just above the tie: up
            (one + 2.0 ** -8 - 2.0 ** -20, 0x3F80),   # just below: down
            (2.0 ** -126 * (1 + 2.0 ** -8), 0x0080),  # tie at the smallest normal
            (3 * 2.0 ** -134, 0x0002),          # tie between subnormals 1 and 2: to 2
            (2.0 ** -134, 0x0000),              # half the smallest subnormal: to 0
        ]
        for value, want in cases:
            for dtype in (np.float32, np.float64):
                with self.subTest(value=value, dtype=dtype):
                    got = convpool.float32_to_bfloat16(np.array([value], dtype))
                    self.assertEqual(int(got[0]), want, hex(int(got[0])))

    def test_matches_an_independent_oracle(self):
        rng = np.random.default_rng(7)
        bits = rng.integers(0, 1 << 32, size=200_000, dtype=np.uint64).astype(np.uint32)
        # Every pattern whose low half is a tie or next to one, in a few binades.
        highs = np.array([0x0000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x3F81, 0x7F7E, 0x7F7F,
                          0x8001, 0xBF80, 0xFF7F], dtype=np.uint32)
        lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
        edges = ((highs[:, None] << 16) | lows[None, :]).ravel()
        values = np.concatenate([bits, edges]).view(np.float32)
        values = values[np.isfinite(values)]
        np.testing.assert_array_equal(convpool.float32_to_bfloat16(values), bf16_oracle(values))

    def test_nan_and_infinities(self):
        f32 = np.array([np.inf, -np.inf, np.nan, -np.nan, -0.0, 0.0], np.float32)
        got = convpool.float32_to_bfloat16(f32)
        self.assertEqual([int(v) for v in got[[0, 1, 4, 5]]], [0x7F80, 0xFF80, 0x8000, 0x0000])
        self.assertTrue(np.isnan(convpool.bfloat16_to_float32(got[2:4])).all())
        # NaN payloads only in the low half, quiet or signalling, stay NaN (not infinity).
        payloads = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7F80FFFF], np.uint32)
        bits = convpool.float32_to_bfloat16(payloads.view(np.float32))
        back = convpool.bfloat16_to_float32(bits)
        self.assertTrue(np.isnan(back).all(), back)
        # Overflow: float32 max is past the bfloat16 overflow midpoint; the largest
        # bfloat16 itself is kept; the midpoint ties to the even infinity.
        top = float(convpool.bfloat16_to_float32(np.uint16(0x7F7F)))
        big = np.array([np.finfo(np.float32).max, top, -top, top + 2.0 ** 119,
                        top + 2.0 ** 118], np.float64)
        self.assertEqual([int(v) for v in convpool.float32_to_bfloat16(big)],
                         [0x7F80, 0x7F7F, 0xFF7F, 0x7F80, 0x7F7F])
        self.assertEqual([int(v) for v in convpool.float32_to_bfloat16(big.astype(np.float32))],
                         [0x7F80, 0x7F7F, 0xFF7F, 0x7F80, 0x7F7F])
        self.assertEqual(int(convpool.float32_to_bfloat16(np.float64(1e300))), 0x7F80)

    def test_float64_is_rounded_once(self):
        # 1 + 2^-8 + 2^-30 rounds to 1 + 2^-8 in float32, a tie that then goes down to 1;
        # rounded directly it is above the tie and goes up.
        value = 1.0 + 2.0 ** -8 + 2.0 ** -30
        self.assertEqual(int(convpool.float32_to_bfloat16(np.float64(value))), 0x3F81)
        self.assertEqual(int(convpool.float32_to_bfloat16(np.float32(value))), 0x3F80)
        self.assertEqual(int(convpool.float32_to_bfloat16([value])[0]), 0x3F81)

    def test_shapes_and_argument_types(self):
        a = data((2, 3, 4), seed=5)
        self.assertEqual(convpool.float32_to_bfloat16(a).shape, (2, 3, 4))
        self.assertEqual(convpool.float32_to_bfloat16(a.T).shape, (4, 3, 2))     # strided
        np.testing.assert_array_equal(convpool.float32_to_bfloat16(a.T),
                                      convpool.float32_to_bfloat16(a).T)
        zero_d = convpool.float32_to_bfloat16(np.float32(1.0))
        self.assertIsInstance(zero_d, np.ndarray)
        self.assertEqual((zero_d.shape, int(zero_d)), ((), 0x3F80))
        self.assertEqual(convpool.bfloat16_to_float32([0x3F80, 0xC000]).tolist(), [1.0, -2.0])
        self.assertEqual(convpool.float32_to_bfloat16(a.astype(np.float16)).dtype, np.uint16)
        with self.assertRaises(TypeError):
            convpool.bfloat16_to_float32(np.ones(3, np.float32))
        with self.assertRaises(ValueError):
            convpool.bfloat16_to_float32([70000])
        with self.assertRaises(TypeError):
            convpool.float32_to_bfloat16(np.array(["1.0"]))


class TestBfloat16Layer(unittest.TestCase):
    """dtype="bfloat16" through the Operator and the one-shot call."""

    def setUp(self):
        rng = np.random.default_rng(11)
        self.x32 = (rng.random((2, 5, 9, 8), dtype=np.float32) * 2 - 1)
        self.w32 = (rng.random((7, 5, 3, 3), dtype=np.float32) * 2 - 1)
        self.b32 = (rng.random(7, dtype=np.float32) * 2 - 1)
        self.x, self.w, self.b = (convpool.float32_to_bfloat16(a)
                                  for a in (self.x32, self.w32, self.b32))

    def decoded(self, *arrays):
        return [convpool.bfloat16_to_float32(a).astype(np.float64) for a in arrays]

    def test_operator_and_one_shot(self):
        x, w, b = self.decoded(self.x, self.w, self.b)
        want = expected(x, w, b, 2)
        scale = reference.add_bias(reference.max_pool_numpy(
            reference.conv2d_numpy(np.abs(x), np.abs(w)), 2), np.abs(b))
        for impl in ("sr", "im2col"):
            with self.subTest(impl=impl):
                with convpool.Operator(self.w, self.b, pool=2, dtype="bfloat16",
                                       impl=impl) as op:
                    self.assertEqual(op.dtype, np.uint16)
                    self.assertEqual(op.dtype_name, "bfloat16")
                    y = op(self.x)
                self.assertEqual((y.dtype, y.shape), (np.uint16, (2, 7, 3, 3)))
                got = convpool.bfloat16_to_float32(y).astype(np.float64)
                # Within a bf16 ulp (2^-7 relative) of the exact result, plus fp32 error.
                np.testing.assert_array_less(np.abs(got - want), 2.0 ** -7 * scale + 1e-6)
                one_shot = convpool.conv2d_maxpool(self.x, self.w, self.b, pool=2, impl=impl,
                                                   dtype="bfloat16")
                self.assertEqual(one_shot.dtype, np.uint16)
                self.assertEqual(one_shot.tobytes(), y.tobytes())

    def test_sizes_change_between_runs(self):
        w, b = self.decoded(self.w, self.b)
        with convpool.Operator(self.w, self.b, pool=1, dtype="bfloat16") as op:
            for shape in ((1, 5, 3, 3), (3, 5, 12, 7), (1, 5, 4, 40)):
                xb = convpool.float32_to_bfloat16(data(shape, seed=sum(shape)))
                got = convpool.bfloat16_to_float32(op(xb)).astype(np.float64)
                (x,) = self.decoded(xb)
                scale = reference.add_bias(reference.conv2d_numpy(np.abs(x), np.abs(w)),
                                           np.abs(b))
                np.testing.assert_array_less(np.abs(got - expected(x, w, b)),
                                             2.0 ** -7 * scale + 1e-6)

    def test_float_weights_are_rounded_once(self):
        with convpool.Operator(self.w, self.b, dtype="bfloat16") as op:
            want = op(self.x)
        for w, b in ((self.w32, self.b32), (self.w32.astype(np.float64), self.b32)):
            with self.subTest(dtype=w.dtype):
                with convpool.Operator(w, b, dtype="bfloat16") as op:
                    self.assertEqual(op(self.x).tobytes(), want.tobytes())

    def test_store_rounds_half_to_even(self):
        # K=1, C_in=1: y = x + b exactly in float32; x in [1, 2) on the bf16 grid and
        # b = 2^-8 put every output halfway between two bfloat16 numbers.
        m = np.arange(128, 256, dtype=np.float64)
        x = convpool.float32_to_bfloat16((m / 128).reshape(1, 1, 8, 16))
        w = convpool.float32_to_bfloat16(np.ones((1, 1, 1, 1)))
        b = convpool.float32_to_bfloat16(np.array([2.0 ** -8]))
        for impl in ("sr", "im2col"):
            with self.subTest(impl=impl):
                y = convpool.conv2d_maxpool(x, w, b, impl=impl, dtype="bfloat16")
                # Ties go to the even pattern: m even stays, m odd goes up.
                want = convpool.float32_to_bfloat16((m + m % 2) / 128).reshape(1, 1, 8, 16)
                np.testing.assert_array_equal(y, want)


class TestLibraryLookup(unittest.TestCase):
    def run_python(self, code, env):
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, cwd=str(REPO), timeout=120)

    def test_bad_convpool_lib_lists_the_path(self):
        env = dict(os.environ, CONVPOOL_LIB="/nonexistent/libconvpool.so",
                   PYTHONPATH=str(REPO / "python"))
        code = ("import convpool\n"
                "try:\n    convpool.info()\n"
                "except OSError as e:\n    print(type(e).__name__); print(e)\n")
        proc = self.run_python(code, env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("LibraryNotFoundError", proc.stdout)
        self.assertIn("/nonexistent/libconvpool.so", proc.stdout)

    def test_import_without_library_is_lazy(self):
        env = dict(os.environ, CONVPOOL_LIB="/nonexistent/libconvpool.so",
                   PYTHONPATH=str(REPO / "python"))
        proc = self.run_python("import convpool.layer as l; print(l.LayerSpec.of(2).output_size(5, 5, 3))",
                               env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("(3, 3, 1, 1)", proc.stdout)


if __name__ == "__main__":
    unittest.main()
