#!/usr/bin/env python3
"""torchvision's VGG-16 and AlexNet with their conv layers fused by convpool, against torch.

    python3 examples/torch_vgg.py                      # vgg16 and alexnet, batch 1
    python3 examples/torch_vgg.py --models vgg11 --batch 2 --runs 7

The models are built from torchvision's definitions with weights=None and a
fixed seed (nothing is downloaded). convpool.torch.fuse(model, x) replaces
each Conv2d -> ReLU -> [MaxPool2d] chain by one ConvPool2d after timing it
against torch on x (torch keeps the layers where it is faster); what it
cannot run (AlexNet's stride-4 first conv) stays with torch. The script
prints the fuse report, the accuracy of the fused model (max|d| / max|ref|
of the logits), then per fused layer the times fuse() measured (best of
--runs, alternating) and for the whole model the median of --runs runs after
a warm-up, torch against convpool, both on the library's usable CPUs
(torch.set_num_threads; convpool's pool follows torch). About a minute on 2
cores. examples/torch_models.py does the same for more models.

Needs torch and torchvision (Debian: python3-torch, python3-torchvision) and
libconvpool (build/lib, $CONVPOOL_LIB, or an installed package).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

try:
    import convpool
except ImportError:                      # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import convpool

import torch

import convpool.torch as cpt

try:
    import torchvision
except ImportError as exc:
    sys.exit(f"this example needs torchvision ({exc}); on Debian: apt-get install "
             "python3-torchvision")


def median_time(fn, x, runs):
    """Median wall time of fn(x) over `runs` runs after one warm-up run, in seconds."""
    with torch.no_grad():
        fn(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def layer_rows(report, model, x):
    """Per fused layer: (path, what, in shape, out shape, GFLOP, torch s, convpool s).

    The times are fuse(model, x)'s: best of its trials, torch and convpool
    alternating on the layer's input in the model.
    """
    inputs = {}
    hooks = []
    for entry in report.fused:
        def keep(module, args, path=entry.path):
            inputs[path] = tuple(args[0].shape)
        hooks.append(model.get_submodule(entry.path).register_forward_pre_hook(keep))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    rows = []
    for entry in report.fused:
        conv = model.get_submodule(entry.path)
        shape_in = inputs[entry.path]
        k = conv.kernel_size[0]
        pads = cpt.conv_padding(conv)
        oh = shape_in[2] + pads[0] + pads[2] - k + 1
        ow = shape_in[3] + pads[1] + pads[3] - k + 1
        gflop = 2e-9 * shape_in[0] * conv.out_channels * oh * ow * conv.in_channels * k * k
        rows.append((entry.path, entry.source, shape_in, gflop, entry.torch_ms * 1e-3,
                     entry.convpool_ms * 1e-3))
    return rows


def run(name, batch, runs):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.rand(batch, 3, 224, 224)
    # Each layer timed against torch on x; torch keeps those where it is faster.
    fused, report = cpt.fuse(model, x, report=True, trials=runs)
    print(f"\n=== {name}, batch {batch}, 224x224 ===")
    print(report)
    with torch.no_grad():
        want, got = model(x), fused(x)
    error = float((got - want).abs().max() / want.abs().max())
    print(f"accuracy: max|fused - torch| / max|torch| = {error:.2g} over {want.numel()} logits")

    rows = layer_rows(report, model, x)
    print(f"\nper fused layer (best of {runs} runs after a warm-up, alternating):")
    print("| layer | what | input | GFLOP | torch ms | convpool ms | speed-up |")
    print("|---|---|---|---:|---:|---:|---:|")
    for path, what, shape_in, gflop, t_torch, t_ours in rows:
        print(f"| {path} | {what} | {'x'.join(map(str, shape_in[1:]))} | {gflop:.2f} | "
              f"{t_torch * 1e3:.1f} | {t_ours * 1e3:.1f} | {t_torch / t_ours:.2f} |")
    sum_torch = sum(r[4] for r in rows)
    sum_ours = sum(r[5] for r in rows)
    if rows:
        print(f"| all fused layers | | | {sum(r[3] for r in rows):.2f} | {sum_torch * 1e3:.1f} | "
              f"{sum_ours * 1e3:.1f} | {sum_torch / sum_ours:.2f} |")
    t_model = median_time(model, x, runs)
    t_fused = median_time(fused, x, runs)
    print(f"\nwhole model (median of {runs}): torch {t_model * 1e3:.1f} ms, fused "
          f"{t_fused * 1e3:.1f} ms (speed-up {t_model / t_fused:.2f})")
    return {"model": name, "error": error, "torch_ms": t_model * 1e3,
            "fused_ms": t_fused * 1e3}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["vgg16", "alexnet"],
                   help="torchvision model names (default: vgg16 alexnet)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=5, help="timed runs per measurement")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads (default: the library's usable CPUs)")
    args = p.parse_args(argv)
    facts = convpool.info()
    threads = args.threads or facts["usable_cpus"]
    torch.set_num_threads(threads)
    print(f"convpool {facts['version']} ({facts['library']}), isa {facts['isa']}, "
          f"{facts['usable_cpus']} usable CPUs; torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads; torchvision {torchvision.__version__}")
    results = [run(name, args.batch, args.runs) for name in args.models]
    print("\n| model | max abs Δ / max abs ref | torch ms | fused ms | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['model']} | {r['error']:.1e} | {r['torch_ms']:.1f} | {r['fused_ms']:.1f} | "
              f"{r['torch_ms'] / r['fused_ms']:.2f} |")


if __name__ == "__main__":
    main()
