#!/usr/bin/env python3
"""Check a convpool CLI dump directory against the float64 references.

    python3 scripts/check_conv.py --dump-dir DIR

DIR holds what `convpool --dump-dir DIR` writes: meta.json (dtype, batch,
in_channels, out_channels, height, width, filter, pool, bias, seed, and the
optional layer keys padding, activation, pool_stride, pool_padding,
ceil_mode, stride, dilation, groups, residual), x.bin, w.bin ([C_out,
C_in/groups, K, K]), bias.bin (when bias), residual.bin (when residual) and
out.bin, raw little-endian arrays in C order (dtype float32, float16, or
bfloat16 as uint16 bit patterns).

Recomputes the layer with the NumPy and torch references (they must agree)
on the exact input values (bfloat16: the decoded patterns), judges out.bin
with the rules of tests/support/reference.py, and prints the
tolerance, max |delta|, the number of bad elements, a damage map (bad elements
per batch, per block of 16 output channels, per pooled row) and how many
outputs equal the bias exactly (an output equal to its bias means the conv
contribution was lost). For bfloat16 it also compares out.bin with torch's
own bfloat16 layer under the loose sanity tolerance (reference.compare_loose).

Exit status: 0 all good; 1 bad elements or the references disagree;
2 the dump directory is unreadable or inconsistent.
"""

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "support"))
import reference as ref_mod  # noqa: E402  (the test oracle, tests/support/reference.py)
from convpool.layer import LayerSpec, pooled_size  # noqa: E402

META_KEYS = ("dtype", "batch", "in_channels", "out_channels", "height", "width",
             "filter", "pool", "bias", "seed")
DTYPES = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2"}   # storage in the files
CHANNEL_BLOCK = 16


class DumpError(Exception):
    """The dump directory cannot be checked."""


def layer_spec(meta):
    """The layer of a meta.json: its optional keys, with the CLI's defaults."""
    act = meta.get("activation", "none")
    if isinstance(act, dict) and list(act) == ["clamp"]:
        act = tuple(act["clamp"])
    elif act == "none":
        act = None
    return LayerSpec.make(pool=meta["pool"], padding=meta.get("padding", 0), activation=act,
                          pool_stride=meta.get("pool_stride"),
                          pool_padding=meta.get("pool_padding", 0),
                          ceil_mode=meta.get("ceil_mode", False), stride=meta.get("stride", 1),
                          dilation=meta.get("dilation", 1), groups=meta.get("groups", 1))


def load_dump(directory):
    """Read meta.json and the arrays; returns (meta, x, w, bias or None, residual or None,
    out).

    The arrays are in the dump's storage dtype (bfloat16: uint16 bit patterns).
    """
    directory = Path(directory)
    try:
        meta = json.loads((directory / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise DumpError(f"cannot read {directory / 'meta.json'}: {exc}") from None
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise DumpError(f"meta.json lacks {', '.join(missing)}")
    if meta["dtype"] not in DTYPES:
        raise DumpError(f"meta.json dtype {meta['dtype']!r} is not one of {sorted(DTYPES)}")
    dtype = np.dtype(DTYPES[meta["dtype"]])
    b, ci, co = meta["batch"], meta["in_channels"], meta["out_channels"]
    h, w, k, p = meta["height"], meta["width"], meta["filter"], meta["pool"]
    try:
        meta["layer"] = layer_spec(meta)
    except (TypeError, ValueError) as exc:
        raise DumpError(f"meta.json: {exc}") from None
    oh, ow, ph, pw = meta["layer"].output_size(h, w, k)
    groups = meta["layer"].groups
    if min(b, ci, co, k, p, oh, ow, ph, pw) < 1 or ci % groups or co % groups:
        raise DumpError(f"meta.json describes an empty or invalid layer: {meta}")
    shapes = {"x.bin": (b, ci, h, w), "w.bin": (co, ci // groups, k, k),
              "out.bin": (b, co, ph, pw)}
    if meta["bias"]:
        shapes["bias.bin"] = (co,)
    if meta.get("residual", False):
        shapes["residual.bin"] = (b, co, oh, ow)
    arrays = {}
    for name, shape in shapes.items():
        path = directory / name
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise DumpError(f"cannot read {path}: {exc}") from None
        expected = int(np.prod(shape)) * dtype.itemsize
        if len(raw) != expected:
            raise DumpError(f"{path} has {len(raw)} bytes; shape {shape} of {meta['dtype']} "
                            f"needs {expected}")
        native = dtype.newbyteorder("=")
        arrays[name] = np.frombuffer(raw, dtype=dtype).reshape(shape).astype(native)
    return (meta, arrays["x.bin"], arrays["w.bin"], arrays.get("bias.bin"),
            arrays.get("residual.bin"), arrays["out.bin"])


def runs(counts, prefix=""):
    """Compress a sequence of counts into 'prefix a-b: n' runs of equal nonzero values."""
    parts = []
    start = None
    for i, value in enumerate(list(counts) + [None]):
        if start is not None and (value != counts[start]):
            label = f"{start}" if i - 1 == start else f"{start}-{i - 1}"
            parts.append(f"{prefix}{label}: {counts[start]}")
            start = None
        if start is None and value:
            start = i
    return parts


def compact(parts, limit=24):
    if not parts:
        return "none"
    if len(parts) > limit:
        return ", ".join(parts[:limit]) + f", ... ({len(parts) - limit} more runs)"
    return ", ".join(parts)


def damage_map(bad):
    """Lines describing where the bad elements are ([B, C_out, PH, PW] mask)."""
    batch, c_out, ph, pw = bad.shape
    per_batch = bad.sum(axis=(1, 2, 3))
    per_channel = bad.sum(axis=(0, 2, 3))
    blocks = [int(per_channel[i:i + CHANNEL_BLOCK].sum())
              for i in range(0, c_out, CHANNEL_BLOCK)]
    per_row = bad.sum(axis=(0, 1, 3))
    lines = [
        f"  per batch (of {c_out * ph * pw} each): "
        + ("[" + ", ".join(str(int(v)) for v in per_batch) + "]" if batch <= 32
           else compact(runs([int(v) for v in per_batch], "b"))),
        f"  per output-channel block of {CHANNEL_BLOCK} (up to {batch * CHANNEL_BLOCK * ph * pw}"
        f" each; block i = channels 16i..16i+15): "
        + compact(runs(blocks, "block ")),
        f"  per pooled row (of {batch * c_out * pw} each): "
        + compact(runs([int(v) for v in per_row], "row ")),
    ]
    full_rows = [(b, r) for b in range(batch) for r in range(ph) if bad[b, :, r, :].all()]
    if full_rows:
        shown = ", ".join(f"(b={b}, row {r})" for b, r in full_rows[:12])
        lines.append(f"  whole (batch, pooled row) planes bad: {len(full_rows)}: {shown}"
                     + (" ..." if len(full_rows) > 12 else ""))
    return lines


def check(directory, list_bad=5):
    """Check one dump; prints the report and returns the exit status."""
    try:
        meta, x, w, bias, residual, out = load_dump(directory)
    except DumpError as exc:
        print(f"check_conv: error: {exc}")
        return 2
    dtype, pool = meta["dtype"], meta["layer"]
    print(f"dump {directory}: {dtype} b{meta['batch']} {meta['in_channels']}->"
          f"{meta['out_channels']} {meta['height']}x{meta['width']} k{meta['filter']} "
          f"pool{meta['pool']} {'bias' if meta['bias'] else 'nobias'} seed {meta['seed']}"
          + ("" if pool.is_default else f" {pool}")
          + (" residual" if residual is not None else ""))
    x, w, bias64, r64 = (ref_mod.to_float64(a, dtype) for a in (x, w, bias, residual))
    values = ref_mod.to_float64(out, dtype)
    reference = ref_mod.Reference(x, w)
    agree, message, expected = reference.compare_references(bias64, pool, r64)
    print(("references: " if agree else "REFERENCES DISAGREE: ") + message)
    scale = reference.error_scale(bias64, pool, r64)
    verdict = ref_mod.judge(out, expected, scale, dtype, "bound")
    print(f"tolerance: {verdict.tolerance_text}")
    print(f"max |delta| = {verdict.max_delta:.6g}; bad elements: {verdict.n_bad} of {out.size}"
          f" ({100.0 * verdict.n_bad / out.size:.3f}%)")
    if verdict.rounding is not None:
        print(verdict.describe_rounding())
    print("damage map:")
    for line in damage_map(verdict.bad):
        print(line)
    if verdict.n_bad:
        for flat in np.flatnonzero(verdict.bad)[:list_bad]:
            idx = tuple(int(v) for v in np.unravel_index(flat, out.shape))
            print(f"  bad at (b, co, ph, pw) = {idx}: ours {float(values[idx])!r}, "
                  f"ref {float(expected[idx])!r}")
    if residual is not None:
        print("outputs equal to their bias: not counted (the residual is added too)")
    elif bias64 is not None:
        equal = values == bias64[None, :, None, None]
        print(f"outputs equal to their bias exactly: {int(equal.sum())} (a lost conv "
              f"contribution shows here)")
    else:
        print(f"outputs exactly 0 (no bias): {int((values == 0).sum())} (a lost conv "
              f"contribution shows here)")
    sane = True
    if dtype == "bfloat16":
        try:
            torch_bf16 = reference.torch_bfloat16_result(bias64, pool, r64)
        except (RuntimeError, ValueError) as exc:
            print(f"torch bfloat16 sanity check skipped: torch could not run it "
                  f"({type(exc).__name__}: {exc})")
        else:
            sane, text = ref_mod.compare_loose(values, torch_bf16, scale)
            print(f"torch bfloat16 layer (loose, |d| <= {ref_mod.TORCH_BF16_RTOL:g} * "
                  f"sum|x*w|): " + ("agrees, " if sane else "FAR OFF: ") + text)
    ok = agree and verdict.ok and sane
    if ok:
        print("[ OK ] all elements within tolerance")
    elif not agree:
        print("[FAIL] references disagree")
    elif not verdict.ok:
        print(f"[FAIL] {verdict.n_bad} bad elements"
              + ("" if verdict.rounding_ok else "; rounding is not round-to-nearest-even"))
    else:
        print("[FAIL] far from torch's bfloat16 layer")
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dump-dir", required=True, help="directory written by convpool --dump-dir")
    p.add_argument("--list-bad", type=int, default=5, help="bad elements to print (default 5)")
    args = p.parse_args(argv)
    return check(args.dump_dir, args.list_bad)


if __name__ == "__main__":
    sys.exit(main())
