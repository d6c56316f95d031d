#!/usr/bin/python3
"""Unfused torch baseline for the convpool benchmark.

Times F.conv2d (with bias, stride, padding, dilation, groups), + a residual,
F.relu and F.max_pool2d (each when asked; the pooling skipped for pool 1
stride 1 without padding) on random data of the given shape and dtype, on
`--threads` intra-op threads, and prints machine-readable lines:

    torch_version 1.13.0
    median_ms 123.456
    min_ms 120.001

or, when the case cannot run, a single line starting with "n/a" and the reason:

    n/a float16 convolution is not implemented on the CPU in torch 1.13.0

The exit status is 0 in both cases; it is non-zero only for bad arguments.
It is run by build/bin/convpool-bench, and can be run alone, e.g.

    /usr/bin/python3 bench/torch_baseline.py --dtype float32 --batch 1 \\
        --cin 256 --cout 256 --height 224 --width 224 --k 3 --pool 2 --threads 2
"""
import argparse
import statistics
import sys
import time

DTYPES = {"float32": "float32", "fp32": "float32", "f32": "float32",
          "float16": "float16", "fp16": "float16", "f16": "float16",
          "bfloat16": "bfloat16", "bf16": "bfloat16"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--cin", type=int, default=256)
    parser.add_argument("--cout", type=int, default=256)
    parser.add_argument("--height", type=int, default=224)
    parser.add_argument("--width", type=int, default=224)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--pad", type=int, default=0)
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--dilation", type=int, default=1)
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--pool-stride", type=int, default=0, help="0: the window")
    parser.add_argument("--pool-pad", type=int, default=0)
    parser.add_argument("--relu", action="store_true")
    parser.add_argument("--residual", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()

    try:
        import torch
        import torch.nn.functional as F
    except Exception as exc:  # missing module or a broken install
        print(f"n/a torch is not importable by {sys.executable}: {exc}")
        return 0
    print(f"torch_version {torch.__version__}")

    torch.set_num_threads(max(1, args.threads))
    dtype = getattr(torch, DTYPES[args.dtype])
    gen = torch.Generator().manual_seed(1234)
    shape_x = (args.batch, args.cin, args.height, args.width)
    shape_w = (args.cout, args.cin // args.groups, args.k, args.k)
    pool_stride = args.pool_stride or args.pool
    pooled = args.pool > 1 or pool_stride > 1 or args.pool_pad > 0

    def layer(x, w, b, r=None):
        y = F.conv2d(x, w, b, args.stride, args.pad, args.dilation, args.groups)
        if r is not None:
            y = y + r
        if args.relu:
            y = F.relu(y)
        return F.max_pool2d(y, args.pool, pool_stride, args.pool_pad) if pooled else y

    # Probe the dtype on a tiny problem first: a missing CPU kernel fails fast
    # here instead of after allocating the full tensors.
    try:
        tiny = torch.ones(1, 1, 3, 3, dtype=dtype)
        F.max_pool2d(F.conv2d(tiny, torch.ones(1, 1, 2, 2, dtype=dtype),
                              torch.ones(1, dtype=dtype)), 1, 1)
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[0]
        print(f"n/a {args.dtype} conv2d is not available on the CPU in torch "
              f"{torch.__version__} ({reason})")
        return 0

    x = torch.rand(shape_x, generator=gen).to(dtype)
    w = (torch.rand(shape_w, generator=gen) - 0.5).to(dtype)
    b = (torch.rand(args.cout, generator=gen) * 2 - 1).to(dtype)
    r = None
    if args.residual:
        conv = F.conv2d(x[:1, :, :, :], w, b, args.stride, args.pad, args.dilation, args.groups)
        r = (torch.rand((args.batch,) + tuple(conv.shape[1:]), generator=gen) * 2 - 1).to(dtype)

    times = []
    with torch.inference_mode():
        for i in range(args.warmup + args.iters):
            t0 = time.perf_counter()
            layer(x, w, b, r)
            t1 = time.perf_counter()
            if i >= args.warmup:
                times.append((t1 - t0) * 1e3)
    print(f"median_ms {statistics.median(times):.4f}")
    print(f"min_ms {min(times):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
