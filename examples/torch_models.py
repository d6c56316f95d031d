#!/usr/bin/env python3
"""torchvision's CNNs fused by convpool.torch.fuse(), against torch: what was fused, why the
rest stayed with torch, the accuracy and the time.

    python3 examples/torch_models.py                       # the nine models of the README
    python3 examples/torch_models.py --models resnet18 vgg16 --runs 7
    python3 examples/torch_models.py --check               # also fail on a bad accuracy
    python3 examples/torch_models.py --batch 8             # eight images per run

Each model is built from torchvision's definition with weights=None and seed
0 (nothing is downloaded), in eval mode, and run on --batch 224x224 images
(default one) of torch.rand with --threads threads for torch (torch.set_num_threads) and so
for convpool (its shared pool follows torch). For each model:

- fuse(model): every chain the binding and the library accept is fused;
  the Conv2d modules left to torch are counted by reason;
- the accuracy of the fused model: max|fused - torch| / max|torch| of the
  logits, and of the features (the input of the last nn.Linear) where the
  model has one (GoogLeNet's random initialisation gives features near
  1e-11, so its logits are its classifier's bias);
- the median time of --runs runs after a warm-up, torch and fused
  alternating, and the ratio fused/torch;
- fuse(model, x): each layer timed against torch on the image and kept only
  where convpool is faster; the same timing of that model.

Needs torch and torchvision (Debian: python3-torch, python3-torchvision) and
libconvpool (build/lib, $CONVPOOL_LIB, or an installed package). About 10
minutes on 2 cores for the nine models.
"""

import argparse
import collections
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

try:
    import convpool
except ImportError:                      # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import convpool

import torch
from torch import nn

import convpool.torch as cpt

try:
    import torchvision
except ImportError as exc:
    sys.exit(f"this example needs torchvision ({exc}); on Debian: apt-get install "
             "python3-torchvision")

MODELS = ["vgg16", "vgg16_bn", "resnet18", "resnet50", "googlenet", "densenet121",
          "squeezenet1_0", "mobilenet_v2", "alexnet"]

#: --check: the largest max|d| / max|ref| accepted (logits and features, float32).
CHECK_RTOL = 1e-4


def median_times(fns, x, runs):
    """Median wall time of each fn(x), in seconds: one warm-up each, then runs rounds
    in which every fn runs once (alternating, so that load hits them alike)."""
    times = [[] for _ in fns]
    with torch.no_grad():
        for fn in fns:
            fn(x)
        for _ in range(runs):
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                fn(x)
                times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def last_linear(model):
    names = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    return names[-1] if names else None


def outputs(model, x, linear):
    """(logits, the input of the module at path `linear` or None)."""
    seen = {}
    hook = None
    if linear is not None:
        hook = model.get_submodule(linear).register_forward_pre_hook(
            lambda module, args: seen.setdefault("features", args[0].detach().clone()))
    with torch.no_grad():
        logits = model(x)
    if hook is not None:
        hook.remove()
    return logits, seen.get("features")


def relative_error(got, want):
    if got is None or want is None:
        return None
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max())


def reason_label(reason):
    """A short label for a Conv2d left to torch."""
    match = re.match(r"(stride|dilation|groups) (\S+): this convpool binding", reason)
    if match:
        return f"{match.group(1)} {match.group(2)}" if match.group(1) != "groups" else "groups"
    if reason.startswith("torch is faster"):
        return "torch faster"
    if reason.startswith("not called"):
        return "unused in eval"
    if "refuses the example's shape" in reason:
        return "shape refused"
    if "library refuses" in reason:
        return "library refuses"
    return reason.split(":")[0][:40]


def why_left(report):
    """'7 stride 2, 17 groups; 8 residual add + ReLU' from a report."""
    convs = collections.Counter(reason_label(e.reason) for e in report.left
                                if e.kind == "Conv2d")
    parts = [f"{n} {label}" for label, n in sorted(convs.items(), key=lambda kv: -kv[1])]
    adds = collections.Counter(e.kind for e in report.left if e.kind.startswith("add"))
    tails = [f"{n} residual {kind}" for kind, n in adds.items()]
    return ", ".join(parts) + ("; " + ", ".join(tails) + " with torch" if tails else "") or "—"


def run(name, runs, timed, batch):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.rand(batch, 3, 224, 224)
    convs = sum(isinstance(m, nn.Conv2d) for m in model.modules())
    fused, report = cpt.fuse(model, report=True)
    linear = last_linear(model)
    want_logits, want_features = outputs(model, x, linear)
    got_logits, got_features = outputs(fused, x, linear)
    row = {"model": name, "convs": convs, "fused": len(report.fused), "why": why_left(report),
           "logits": relative_error(got_logits, want_logits),
           "features": relative_error(got_features, want_features)}
    if timed:
        t0 = time.perf_counter()
        fused_t, report_t = cpt.fuse(model, x, report=True)
        row["fuse_s"] = time.perf_counter() - t0
        row["fused_timed"] = len(report_t.fused)
        t_torch, t_fused, t_timed = median_times([model, fused, fused_t], x, runs)
        row["timed_ms"] = t_timed * 1e3
        print(f"\n=== {name}: fuse(model, x), each layer timed on the image ===\n{report_t}")
    else:
        t_torch, t_fused = median_times([model, fused], x, runs)
        print(f"\n=== {name}: fuse(model) ===\n{report}")
    row["torch_ms"], row["fused_ms"] = t_torch * 1e3, t_fused * 1e3
    print(f"{name}: logits max|d|/max|ref| {row['logits']:.2g}, features "
          f"{row['features'] if row['features'] is None else format(row['features'], '.2g')}; "
          f"torch {row['torch_ms']:.1f} ms, fused {row['fused_ms']:.1f} ms"
          + (f", timed fuse {row['timed_ms']:.1f} ms" if timed else ""), flush=True)
    return row


def table(rows, timed):
    head = ("| model | Conv2d | fused | why the rest stayed with torch | max\\|Δ\\|/max\\|ref\\| "
            "logits | features | torch ms | fused ms | fused/torch |")
    rule = "|---|---:|---:|---|---:|---:|---:|---:|---:|"
    if timed:
        head += " timed: fused | timed ms | timed/torch |"
        rule += "---:|---:|---:|"
    lines = [head, rule]
    for r in rows:
        features = "—" if r["features"] is None else f"{r['features']:.1e}"
        line = (f"| {r['model']} | {r['convs']} | {r['fused']} | {r['why']} | "
                f"{r['logits']:.1e} | {features} | {r['torch_ms']:.1f} | {r['fused_ms']:.1f} | "
                f"{r['fused_ms'] / r['torch_ms']:.2f} |")
        if timed:
            line += (f" {r['fused_timed']} | {r['timed_ms']:.1f} | "
                     f"{r['timed_ms'] / r['torch_ms']:.2f} |")
        lines.append(line)
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=MODELS, help="torchvision model names")
    p.add_argument("--runs", type=int, default=5, help="timed runs per model")
    p.add_argument("--threads", type=int, default=2, help="torch's (and convpool's) threads")
    p.add_argument("--batch", type=int, default=1, help="images per run")
    p.add_argument("--no-timed", dest="timed", action="store_false",
                   help="skip fuse(model, x) (the per-layer timing)")
    p.add_argument("--check", action="store_true",
                   help=f"exit 1 if an accuracy is above {CHECK_RTOL:g} or nothing was fused")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)     # torchvision's init_weights notices
    torch.set_num_threads(args.threads)
    facts = convpool.info()
    print(f"convpool {facts['version']} ({facts['library']}), isa {facts['isa']}, "
          f"{facts['usable_cpus']} usable CPUs; torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads; torchvision {torchvision.__version__}; batch "
          f"{args.batch}")
    if args.batch < 1:
        p.error(f"--batch must be at least 1 (got {args.batch})")
    rows = [run(name, args.runs, args.timed, args.batch) for name in args.models]
    print("\n" + table(rows, args.timed))
    if args.check:
        bad = [r["model"] for r in rows
               if r["fused"] == 0 or r["logits"] > CHECK_RTOL
               or (r["features"] is not None and r["features"] > CHECK_RTOL)]
        if bad:
            print(f"check failed for {', '.join(bad)} (accuracy above {CHECK_RTOL:g} or nothing "
                  "fused)")
            return 1
        print(f"check: every model within {CHECK_RTOL:g}, each with fused layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
