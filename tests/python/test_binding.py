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
from convpool import reference  # noqa: E402


def expected(x, w, bias=None, pool=1):
    y = reference.max_pool_numpy(reference.conv2d_numpy(x, w), pool)
    return reference.add_bias(y, bias)


def data(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(shape, dtype=np.float32).astype(dtype)


class TestInfo(unittest.TestCase):
    def test_info(self):
        facts = convpool.info()
        self.assertEqual(facts["version"], convpool.__version__)
        self.assertIn(facts["isa"], ("avx512f", "avx2", "scalar"))
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

    def test_impl_values(self):
        with convpool.Operator(self.w, impl="sr") as op:
            want = op(self.x)
        try:
            with convpool.Operator(self.w, impl="im2col") as op:
                got = op(self.x)
        except convpool.UnsupportedError as exc:
            self.assertTrue(exc.message, "an unsupported algorithm must say why")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5)
        with self.assertRaises(ValueError):
            convpool.Operator(self.w, impl="winograd")


class TestErrors(unittest.TestCase):
    def setUp(self):
        self.w = data((4, 3, 3, 3))
        self.x = data((1, 3, 8, 8))

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

    def test_operator_rejects_input_too_small(self):
        with convpool.Operator(self.w, pool=2) as op:
            with self.assertRaises(convpool.InvalidArgumentError):
                op(data((1, 3, 3, 8)))                               # conv output 1 row < pool
            np.testing.assert_allclose(op(self.x), expected(self.x, self.w, None, 2), rtol=1e-5)

    def test_bfloat16_unsupported(self):
        bits = np.zeros((4, 3, 3, 3), dtype=np.uint16)
        try:
            op = convpool.Operator(bits, dtype="bfloat16")
        except convpool.UnsupportedError as exc:
            self.assertEqual(exc.status, 2)
            self.assertTrue(exc.message)
        else:
            op.close()
            self.skipTest("this build supports bfloat16; its accuracy is not covered here")


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
        proc = self.run_python("import convpool.reference as r; print(r.output_size(5, 5, 3, 2))",
                               env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("(3, 3, 1, 1)", proc.stdout)


if __name__ == "__main__":
    unittest.main()
