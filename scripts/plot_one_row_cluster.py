#!/usr/bin/env python3
"""Plots where the cluster decode kernel's time went at one decode row
(docs/performance.md, issue 7's twenty-second pass), from
docs/bench/issue7-versions/h200-2026-12-02-cluster-decode-breakdown.jsonl:
the split-K kernel with its merge launch against the one-launch cluster
kernel, cut at the points where the measurement build stopped its blocks
(QSA_CL_MODE: 2 after the attention, 3 after the clusters' merge, 4 after
the arrival; 0 the whole kernel). Each time is the median over the file's
processes of one benchmark's median; the split kernel is one bar.

Usage: scripts/plot_one_row_cluster.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-one-row-cluster.png; an existing FILE
  is replaced only with --force)
Prints each context's phases in microseconds. A missing or malformed data
file, or an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

DATA = os.path.join(VERSIONS_DIR, "h200-2026-12-02-cluster-decode-breakdown.jsonl")
# (stop point, label of the phase that ends there), in kernel order.
STOPS = [
    ("alone", "attention: 130 blocks of 32 ids"),
    ("cluster-merge", "merge in each cluster (DSMEM), partials stored"),
    ("arrival", "fence and arrival count"),
    ("full", "last cluster merges the 5 partials, stores"),
]
COLORS = ["#4c72b0", "#c44e52", "#bbbbbb", "#dd8452"]
CONTEXTS = ["32768", "131072"]


def load_data():
    """{context: {variant: median us}} for the cluster kernel, plus 'split' for the split-K kernel."""
    times = {}
    try:
        with open(DATA) as f:
            for line in f:
                if not line.strip():
                    continue
                rec = json.loads(line)
                for b in rec["data"]["benchmarks"]:
                    ctx = b["name"].split("/ctx")[1].split("/")[0]
                    kernel = "split" if "/split_kernel" in b["name"] else rec["variant"]
                    times.setdefault(ctx, {}).setdefault(kernel, []).append(float(b["median_us"]))
    except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
        raise FigureInputError(f"{DATA}: {e}")
    out = {}
    for ctx in CONTEXTS:
        got = times.get(ctx, {})
        missing = [k for k in ["split"] + [s for s, _ in STOPS] if k not in got]
        if missing:
            raise FigureInputError(f"{DATA}: context {ctx} has no {', '.join(missing)} runs")
        out[ctx] = {k: statistics.median(v) for k, v in got.items()}
    return out


def draw(plt, data):
    fig, ax = plt.subplots(figsize=(9, 3.6))
    labels = []
    y = 0
    for ctx in CONTEXTS:
        t = data[ctx]
        ax.barh(y, t["split"], color="#8172b2", edgecolor="white",
                label="split-K kernel + merge kernel (two launches)" if y == 0 else None)
        ax.text(t["split"] + 0.15, y, f"{t['split']:.2f} us", va="center", fontsize=8)
        labels.append(f"split-K, ctx {int(ctx) // 1024}K")
        print(f"ctx {ctx}: split-K kernel + merge {t['split']:.2f} us")
        y += 1
        start, phases = 0.0, []
        for (key, name), color in zip(STOPS, COLORS):
            width = t[key] - start
            ax.barh(y, width, left=start, color=color, edgecolor="white", label=name if y == 1 else None)
            if width >= 0.5:
                ax.text(start + width / 2, y, f"{width:.1f}", ha="center", va="center", fontsize=8)
            phases.append(f"{name} {width:.2f}")
            start = t[key]
        ax.text(start + 0.15, y, f"{start:.2f} us", va="center", fontsize=8)
        labels.append(f"cluster, ctx {int(ctx) // 1024}K")
        print(f"ctx {ctx}: cluster kernel " + ", ".join(phases) + f"; total {start:.2f} us")
        y += 1
    ax.axvline(6.0, color="#55a868", linestyle=":", linewidth=1)
    ax.text(6.0, y - 0.45, "target 6 us", fontsize=7, color="#55a868", ha="center")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_ylim(-0.6, y - 0.2)
    ax.set_xlim(0, 13)
    ax.set_xlabel("us per launch, back to back; a phase is the time its blocks added by running on to its end")
    ax.set_title("One decode row, bf16 KV, H200 (2026-12-02): the one-launch cluster kernel, phase by phase", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-one-row-cluster.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
