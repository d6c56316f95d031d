#!/usr/bin/python3
"""Bar chart of the convpool benchmark: GFLOP/s per case per system.

usage: plot.py RESULTS.csv OUT.png

Reads the CSV written by convpool-bench (its '# key: value' header lines give
the machine, threads and measured peaks) and draws one group of bars per case
(ours, the fastest oneDNN variant with NCHW in and out, the fastest blocked
one, torch) with the measured fp32 FMA peak as
a horizontal line (and the bf16 peak when a bf16 case is present). Cases a
system cannot run are marked "n/a". Without matplotlib it prints why and exits
with status 0, so the benchmark never fails because of the chart.
"""
import csv
import sys

SYSTEMS = [("ours_gflops", "ours (convpool)"),
           ("onednn_best_nchw_gflops", "oneDNN, best NCHW in/out"),
           ("onednn_best_blocked_gflops", "oneDNN, best blocked"),
           ("torch_gflops", "torch")]


def read_results(path):
    meta, rows = {}, []
    with open(path, newline="") as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                meta[key.strip()] = value.strip()
            else:
                lines.append(line)
    for row in csv.DictReader(lines):
        rows.append(row)
    return meta, rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2])
        return 2
    csv_path, png_path = argv[1], argv[2]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        print(f"plot skipped: matplotlib is not available ({exc})")
        return 0

    meta, rows = read_results(csv_path)
    if not rows:
        print(f"plot skipped: no cases in {csv_path}")
        return 0

    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
    labels = [f"{short.get(r['dtype'], r['dtype'])} B={r['batch']}\n"
              f"{r['cin']}->{r['cout']}\n{r['height']}x{r['width']} K={r['k']} P={r['pool']}"
              for r in rows]
    n_sys = len(SYSTEMS)
    width = 0.8 / n_sys
    fig, ax = plt.subplots(figsize=(max(8.0, 1.6 * len(rows) + 2.0), 5.5))
    top = 0.0
    all_values = [number(r.get(c)) for r in rows for c, _ in SYSTEMS]
    top_hint = max([v for v in all_values if v is not None] + [number(meta.get("peak_fp32")) or 1.0])
    for j, (column, name) in enumerate(SYSTEMS):
        xs = [i + (j - (n_sys - 1) / 2) * width for i in range(len(rows))]
        values = [number(r.get(column)) for r in rows]
        heights = [v if v is not None else 0.0 for v in values]
        ax.bar(xs, heights, width, label=name)
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, top_hint * 0.01, "n/a", ha="center", va="bottom", rotation=90,
                        fontsize=7)
        top = max([top] + heights)

    peak32 = number(meta.get("peak_fp32"))
    peak16 = number(meta.get("peak_bf16"))
    if peak32:
        ax.axhline(peak32, color="black", linestyle="-", linewidth=1.2,
                   label=f"measured fp32 FMA peak ({peak32:.0f})")
        top = max(top, peak32)
    if peak16 and any(r["dtype"] == "bfloat16" for r in rows):
        ax.axhline(peak16, color="gray", linestyle="--", linewidth=1.2,
                   label=f"measured bf16 dot peak ({peak16:.0f})")
        top = max(top, peak16)

    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("GFLOP/s (conv flop / time)")
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    title = "convpool vs oneDNN vs torch"
    if meta.get("machine"):
        title += f" - {meta['machine']}, {meta.get('threads', '?')} threads"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"wrote {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
