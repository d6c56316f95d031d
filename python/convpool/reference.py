"""Float64 references for conv2d + bias + max pool, and the tolerance rules.

Used by tests/test_harness.py and tools/check_conv.py. Needs numpy; the torch
reference needs torch. Does not need libconvpool.

Two independent references are computed in float64 on the exact input values:

* NumPy: the convolution as K*K shifted matrix products
  (``out[:, :, oh, ow] += W[:, :, i, j] @ X[:, :, oh+i, ow+j]``), max pooling
  with floor sizing by a reshape, bias added after the max.
* torch: ``F.max_pool2d(F.conv2d(X, W, bias), P, P)`` in float64.

They must agree (``Reference.compare_references``) before a result is judged against them.

Tolerance rules (``judge``), with ``S`` = the bound on the rounding error
scale of an output: the conv of |x| and |w| (the sum of |x*w| over the window),
max-pooled over the same window, plus |bias|:

* float32, criterion "allclose": ``np.isclose(ours, ref)`` with numpy's
  defaults (rtol 1e-5, atol 1e-8); used for the assignment's [0, 1) data.
* float32, criterion "bound": ``|ours - ref| <= 1e-5 * S + 1e-6``.
* criterion "relative": as "bound" without the absolute 1e-6 (for data whose
  outputs are far below 1e-6, where the floor would accept anything).
* float16: ours within 1 fp16 ulp of fp16(ref) (the exact result rounded to
  half), or ``|ours - ref| <= 1e-5 * S + 1e-6 + ulp/2`` where cancellation
  makes the result tiny (fp32 accumulation error dominates the fp16 ulp).
* Non-finite references: NaN where ref is NaN, exactly ±inf where ref is ±inf.

float16 rounding check: an output is "determined" when the exact value lies
farther than the fp32 bound (1e-5 * S + 1e-6) from both fp16 rounding
midpoints; then fp32 accumulation plus one round-to-nearest-even store must
give exactly fp16(ref). More than 1% of the determined outputs (among those
within tolerance) rounding otherwise fails the result, even though each is
within the 1-ulp tolerance (truncation, for example, misrounds about half).
"""

import numpy as np

FLOAT32_RTOL = 1e-5          # per sum|x*w|, for the "bound" criterion
FLOAT32_ATOL = 1e-6
REFERENCE_RTOL = 1e-10       # numpy vs torch, both float64, per sum|x*w|
ROUNDING_MISMATCH_FRACTION = 0.01   # float16: allowed share of misrounded determined outputs

TOLERANCE_TAG = {
    ("float32", "allclose"): "allclose",
    ("float32", "bound"): "f32-bound",
    ("float32", "relative"): "f32-relative",
    ("float16", "allclose"): "f16-ulp",
    ("float16", "bound"): "f16-ulp",
    ("float16", "relative"): "f16-ulp-relative",
}

TOLERANCE_TEXT = {
    ("float32", "allclose"): "np.isclose defaults: |d| <= 1e-8 + 1e-5*|ref|",
    ("float32", "bound"): "|d| <= 1e-5 * sum|x*w| + 1e-6 (sum|x*w| pooled, + |bias|)",
    ("float16", "allclose"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                             "+ 1e-6 + ulp/2",
    ("float16", "bound"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                          "+ 1e-6 + ulp/2",
    ("float32", "relative"): "|d| <= 1e-5 * sum|x*w| (no absolute floor; tiny data)",
    ("float16", "relative"): "|ours - fp16(ref)| <= 1 fp16 ulp, or |d| <= 1e-5 * sum|x*w| "
                             "+ ulp/2 (no absolute floor; tiny data)",
}


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------
def output_size(height, width, k, pool):
    """(OH, OW, PH, PW) of the contract (stride 1, no padding, floor pooling)."""
    oh, ow = height - k + 1, width - k + 1
    return oh, ow, oh // pool, ow // pool


def conv2d_numpy(x, w):
    """Valid convolution (cross-correlation) in float64, no bias.

    x [B, C, H, W], w [Co, C, K, K] -> [B, Co, H-K+1, W-K+1]. Each filter tap
    (i, j) is one matrix product over the channels, W[:, :, i, j] @ X[b]; the
    spatial shift is applied to the product (a contiguous [Co, H*W] block) by
    slicing rows i..i+OH and columns j..j+OW. Each column of the product
    depends only on X[b, :, h, w], so shifting the product equals shifting X.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    batch, channels, height, width = x.shape
    c_out, c_in, k, k2 = w.shape
    assert c_in == channels and k == k2
    oh, ow = height - k + 1, width - k + 1
    out = np.zeros((batch, c_out, oh, ow), dtype=np.float64)
    flat = x.reshape(batch, channels, height * width)
    with np.errstate(invalid="ignore", over="ignore"):   # inf - inf -> NaN is intended
        for i in range(k):
            for j in range(k):
                tap = np.ascontiguousarray(w[:, :, i, j])
                for b in range(batch):
                    product = (tap @ flat[b]).reshape(c_out, height, width)
                    out[b] += product[:, i:i + oh, j:j + ow]
    return out


def max_pool_numpy(y, pool):
    """P x P max pooling, stride P, floor sizing; NaN propagates (np.max)."""
    if pool == 1:
        return y
    batch, channels, oh, ow = y.shape
    ph, pw = oh // pool, ow // pool
    cropped = y[:, :, :ph * pool, :pw * pool]
    return cropped.reshape(batch, channels, ph, pool, pw, pool).max(axis=(3, 5))


def add_bias(y, bias):
    if bias is None:
        return y
    return y + np.asarray(bias, dtype=np.float64)[None, :, None, None]


# --------------------------------------------------------------------------
# A reference for one (x, w): conv results cached across bias and pool
# --------------------------------------------------------------------------
class Reference:
    """Both references and the error scale for one input x and weights w.

    The unpooled float64 conv (NumPy) and conv(|x|, |w|) are computed once and
    reused for every pool size and bias; the torch conv is cached per bias.
    """

    def __init__(self, x, w):
        self.x = np.asarray(x, dtype=np.float64)
        self.w = np.asarray(w, dtype=np.float64)
        self.k = self.w.shape[2]
        self._conv = None
        self._abs_conv = None
        self._torch = {}

    @property
    def conv(self):
        """NumPy float64 conv, no bias, unpooled."""
        if self._conv is None:
            self._conv = conv2d_numpy(self.x, self.w)
        return self._conv

    @property
    def abs_conv(self):
        """conv(|x|, |w|): sum of |x*w| over each window, unpooled."""
        if self._abs_conv is None:
            if (self.x >= 0).all() and (self.w >= 0).all():
                self._abs_conv = self.conv   # identical for non-negative data
            else:
                self._abs_conv = conv2d_numpy(np.abs(self.x), np.abs(self.w))
        return self._abs_conv

    def numpy_result(self, bias, pool):
        """NumPy reference: max pool of the conv, then + bias."""
        return add_bias(max_pool_numpy(self.conv, pool), bias)

    def torch_result(self, bias, pool):
        """torch reference: F.max_pool2d(F.conv2d(x, w, bias), pool, pool)."""
        import torch
        import torch.nn.functional as F
        key = None if bias is None else np.asarray(bias, dtype=np.float64).tobytes()
        if key not in self._torch:
            xt = torch.from_numpy(self.x)
            wt = torch.from_numpy(self.w)
            bt = None if bias is None else torch.from_numpy(np.asarray(bias, np.float64))
            with torch.no_grad():
                self._torch[key] = F.conv2d(xt, wt, bt)
        with torch.no_grad():
            return F.max_pool2d(self._torch[key], pool, pool).numpy()

    def error_scale(self, bias, pool):
        """S: sum|x*w| max-pooled over each window (finite conv values only) + |bias|.

        Where the conv value itself is ±inf or NaN the scale is irrelevant (the
        pooled result is then judged exactly) or the element cannot be the max
        (-inf), so those positions contribute 0.
        """
        scale = self.abs_conv
        finite = np.isfinite(self.conv)
        if not finite.all():
            scale = np.where(finite & np.isfinite(scale), scale, 0.0)
        scale = max_pool_numpy(scale, pool)
        if bias is not None:
            scale = scale + np.abs(np.asarray(bias, np.float64))[None, :, None, None]
        return scale

    def compare_references(self, bias, pool):
        """Check that the two references agree; returns (ok, message, numpy_result).

        NaN positions must match, infinities must be equal, finite values must
        satisfy |numpy - torch| <= 1e-10 * S.
        """
        a = self.numpy_result(bias, pool)
        b = self.torch_result(bias, pool)
        if a.shape != b.shape:
            return False, f"reference shapes differ: numpy {a.shape}, torch {b.shape}", a
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            where = np.argwhere(nan_a != nan_b)[0]
            return False, (f"NaN positions differ ({int((nan_a != nan_b).sum())} elements), "
                           f"first at {tuple(int(v) for v in where)}: numpy "
                           f"{a[tuple(where)]!r}, torch {b[tuple(where)]!r}"), a
        inf = np.isinf(a) | np.isinf(b)
        if not np.array_equal(a[inf], b[inf]):
            return False, "infinities differ between numpy and torch", a
        finite = np.isfinite(a) & np.isfinite(b)
        scale = self.error_scale(bias, pool)
        with np.errstate(invalid="ignore"):
            delta = np.where(finite, np.abs(a - b), 0.0)
        bad = finite & ~(delta <= REFERENCE_RTOL * scale + 1e-300)
        if bad.any():
            where = tuple(int(v) for v in np.argwhere(bad)[0])
            return False, (f"numpy and torch disagree at {int(bad.sum())} elements, max "
                           f"|d| = {delta[finite].max():.3g}; first at {where}: numpy "
                           f"{a[where]!r}, torch {b[where]!r}"), a
        max_delta = float(delta[finite].max()) if finite.any() else 0.0
        return True, f"references agree (max |numpy - torch| = {max_delta:.2g})", a


# --------------------------------------------------------------------------
# Judging a result
# --------------------------------------------------------------------------
class Verdict:
    """Outcome of judge(): ok, bad mask and the facts a report prints."""

    def __init__(self, bad, max_delta, first_bad, ours, ref, tol, key, rounding):
        self.bad = bad                    # bool array, shape of the output
        self.n_bad = int(bad.sum())
        self.max_delta = max_delta        # max |ours - ref| where both are finite
        self.first_bad = first_bad        # index tuple or None
        self.ours_at_first = ours
        self.ref_at_first = ref
        self.tol_at_first = tol
        self.tolerance_text = TOLERANCE_TEXT[key]   # the rule in words
        self.tolerance_tag = TOLERANCE_TAG[key]     # its short name
        self.rounding = rounding          # float16: (misrounded, determined), else None
        self.rounding_ok = (rounding is None
                            or rounding[0] <= ROUNDING_MISMATCH_FRACTION * rounding[1])
        self.ok = self.n_bad == 0 and self.rounding_ok

    def describe_rounding(self):
        """'fp16 RNE: m of n determined elements differ' (float16 only), else ''."""
        if self.rounding is None:
            return ""
        text = f"fp16 RNE: {self.rounding[0]} of {self.rounding[1]} determined elements differ"
        return text if self.rounding_ok else text + " (TOO MANY: rounding is not RNE)"

    def describe_first(self):
        if self.first_bad is None:
            return ""
        return (f"first mismatch at {self.first_bad}: ours {self.ours_at_first!r}, "
                f"ref {self.ref_at_first!r}, tol {self.tol_at_first:.3g}")


def half_ulp_units(values16):
    """The fp16 ulp at each value (spacing to the next larger magnitude), float64."""
    return np.spacing(np.abs(values16.astype(np.float16))).astype(np.float64)


def judge(ours, ref, scale, dtype, criterion="bound"):
    """Compare ours (float32/float16 array) with the float64 reference ref.

    scale: the error scale S of each element (Reference.error_scale).
    dtype: "float32" or "float16". criterion: "allclose" (float32; float16 uses
    "bound"), "bound" or "relative" (no absolute floor).
    Returns a Verdict.
    """
    dtype = np.dtype(dtype).name
    o = np.asarray(ours).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if o.shape != ref.shape:
        raise ValueError(f"shape of ours {o.shape} != reference {ref.shape}")
    ok = np.zeros(ref.shape, dtype=bool)
    tol = np.zeros(ref.shape, dtype=np.float64)
    rounding = None

    nan_ref = np.isnan(ref)
    ok[nan_ref] = np.isnan(o[nan_ref])
    inf_ref = np.isinf(ref)
    ok[inf_ref] = o[inf_ref] == ref[inf_ref]

    fin = np.isfinite(ref)
    e, of, s = ref[fin], o[fin], scale[fin]
    atol = 0.0 if criterion == "relative" else FLOAT32_ATOL
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(of - e)
        if dtype == "float32":
            if criterion == "allclose":
                t = 1e-8 + 1e-5 * np.abs(e)
                good = np.isclose(of, e)
            else:
                t = FLOAT32_RTOL * s + atol
                good = d <= t
        elif dtype == "float16":
            r16 = e.astype(np.float16)
            ulp = half_ulp_units(r16)
            r = r16.astype(np.float64)
            near_half = np.abs(of - r) <= ulp
            t32 = FLOAT32_RTOL * s + atol
            t = t32 + 0.5 * ulp
            good = (of == r) | near_half | (d <= t)      # of == r covers overflow to inf
            t = np.maximum(t, ulp)
            # Rounding check: where the exact value is farther than the fp32 error
            # bound from both rounding midpoints, fp32 accumulation + one RNE store
            # must give exactly fp16(ref). Counted among the elements within
            # tolerance; the others are reported as bad already.
            lower = np.nextafter(r16, np.float16(-np.inf)).astype(np.float64)
            upper = np.nextafter(r16, np.float16(np.inf)).astype(np.float64)
            margin = np.minimum(e - (r + lower) / 2, (r + upper) / 2 - e)
            determined = np.isfinite(r) & (margin > t32) & good
            rounding = (int((determined & (of != r)).sum()), int(determined.sum()))
        else:
            raise ValueError(f"no tolerance rule for dtype {dtype}")
    ok[fin] = good
    tol[fin] = t

    bad = ~ok
    pairs = np.isfinite(o) & fin
    max_delta = float(np.abs(o[pairs] - ref[pairs]).max()) if pairs.any() else 0.0
    if (fin & ~np.isfinite(o) & bad).any():
        max_delta = float("inf")   # ours is wrongly NaN/inf where the reference is finite
    if not bad.any():
        return Verdict(bad, max_delta, None, None, None, 0.0, (dtype, criterion), rounding)
    idx = tuple(int(v) for v in np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape))
    return Verdict(bad, max_delta, idx, o[idx], ref[idx], tol[idx], (dtype, criterion), rounding)


# --------------------------------------------------------------------------
# Spot check (cheap, for large runs whose full reference would be too slow)
# --------------------------------------------------------------------------
def spot_check(x, w, bias, pool, ours, samples=256, seed=0):
    """Judge `samples` random output elements against an exact float64 recompute.

    For each sampled (b, co, ph, pw) the P x P conv values of its window are
    computed as direct dot products in float64. Returns a Verdict over the
    samples (first_bad holds the output index).
    """
    rng = np.random.default_rng(seed)
    k = w.shape[2]
    n = min(samples, ours.size)
    flat = rng.choice(ours.size, size=n, replace=False)
    idx = np.unravel_index(flat, ours.shape)
    ref = np.empty(n)
    scale = np.empty(n)
    w64 = w.astype(np.float64)
    for s in range(n):
        b, co, r, c = (int(v[s]) for v in idx)
        values, mags = [], []
        for dy in range(pool):
            for dx in range(pool):
                oh, ow = r * pool + dy, c * pool + dx
                window = x[b, :, oh:oh + k, ow:ow + k].astype(np.float64)
                values.append(float((window * w64[co]).sum()))
                mags.append(float(np.abs(window * w64[co]).sum()))
        best = float(np.max(values))          # NaN propagates like the pool
        best_scale = max((m for v, m in zip(values, mags) if np.isfinite(v)), default=0.0)
        if bias is not None:
            best += float(bias[co])
            best_scale += abs(float(bias[co]))
        ref[s], scale[s] = best, best_scale
    verdict = judge(ours[idx], ref, scale, ours.dtype, "bound")
    if verdict.first_bad is not None:
        verdict.first_bad = tuple(int(v[verdict.first_bad[0]]) for v in idx)
    return verdict
