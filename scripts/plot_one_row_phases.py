#!/usr/bin/env python3
"""Plots where the one-launch decode kernels' time went at one decode row,
context 32K (docs/performance.md, issue 7's twenty-second and twenty-third
passes): the split-K kernel with its merge launch against
  - the cluster kernel (twenty-second pass, not kept), from
    docs/bench/issue7-versions/h200-2026-12-02-cluster-decode-breakdown.jsonl,
    cut where its measurement build stopped its blocks (QSA_CL_MODE: 2 after
    the attention, 3 after the clusters' merge, 4 after the arrival; 0 the
    whole kernel);
  - the spread kernel (twenty-third pass, kAuto's kernel for one row since
    7d8baca), from
    docs/bench/issue7-versions/h200-2026-12-02-spread-decode-breakdown.jsonl,
    cut the same way (its switch patch's QSA_SP_MODE: 2 after the attention,
    3 after the barrier, 4 after the merge's loads, 5 after its sums; the
    whole kernel with QSA_SP_PAD=1, the committed kernel's shape).
Each time is the median over the file's processes of one benchmark's
median; the split-K path is one bar (from the spread file's run).

Usage: scripts/plot_one_row_phases.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-one-row-phases.png; an existing FILE
  is replaced only with --force)
Prints each kernel's phases in microseconds. A missing or malformed data
file, or an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

CTX = "32768"
# Per kernel: its data file and its (variant, phase that ends there) stops in
# kernel order.
KERNELS = {
    "cluster": ("h200-2026-12-02-cluster-decode-breakdown.jsonl", [
        ("alone", "attention: 130 blocks of 32 ids"),
        ("cluster-merge", "merge in each cluster (DSMEM), partials stored"),
        ("arrival", "fence and arrival count"),
        ("full", "last cluster merges the 5 partials, stores"),
    ]),
    "spread": ("h200-2026-12-02-spread-decode-breakdown.jsonl", [
        ("pad-mode2", "attention: 130 blocks of 32 ids"),
        ("pad-mode3", "partials stored, barrier"),
        ("pad-mode4", "merge: the share's partials loaded"),
        ("pad-mode5", "merge: each head's max, weighted sums"),
        ("pad", "merge: parts added, outputs stored"),
    ]),
}
SPLIT_FROM = ("spread", "final")  # (kernel whose file, variant) holds the split-K runs
COLORS = ["#4c72b0", "#c44e52", "#bbbbbb", "#dd8452", "#55a868"]


def load_file(name):
    """{variant: [median us]} of the file's one-row runs at context CTX; split-K runs as 'split/<variant>'."""
    path = os.path.join(VERSIONS_DIR, name)
    times = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                rec = json.loads(line)
                for b in rec["data"]["benchmarks"]:
                    if "/b1/" not in b["name"] or b["name"].split("/ctx")[1].split("/")[0] != CTX:
                        continue
                    if "/split_kernel/" in b["name"]:
                        key = "split/" + rec["variant"]
                    elif "/spread_kernel/" in b["name"] or "/cluster_kernel/" in b["name"]:
                        key = rec["variant"]
                    else:
                        continue  # kAuto's runs: the same kernels, not a stop
                    times.setdefault(key, []).append(float(b["median_us"]))
    except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
        raise FigureInputError(f"{path}: {e}")
    return path, times


def load_data():
    """{kernel: {stop variant: median us}}, plus {'split': us}."""
    out = {}
    for kernel, (name, stops) in KERNELS.items():
        path, times = load_file(name)
        missing = [v for v, _ in stops if v not in times]
        if kernel == SPLIT_FROM[0]:
            if "split/" + SPLIT_FROM[1] not in times:
                missing.append("split/" + SPLIT_FROM[1])
            else:
                out["split"] = statistics.median(times["split/" + SPLIT_FROM[1]])
        if missing:
            raise FigureInputError(f"{path}: context {CTX} has no {', '.join(missing)} runs")
        out[kernel] = {v: statistics.median(times[v]) for v, _ in stops}
    return out


def draw(plt, data):
    fig, ax = plt.subplots(figsize=(9, 4.6))
    split = data["split"]
    ax.barh(0, split, color="#8172b2", edgecolor="white", label="split-K kernel + merge kernel (two launches)")
    ax.text(split + 0.15, 0, f"{split:.2f} us", va="center", fontsize=8)
    print(f"ctx {CTX}: split-K kernel + merge {split:.2f} us")
    labels = ["split-K path (kAuto's before 7d8baca)"]
    for y, (kernel, (_, stops)) in enumerate(KERNELS.items(), start=1):
        t, start, phases = data[kernel], 0.0, []
        for (key, name), color in zip(stops, COLORS):
            width = t[key] - start
            ax.barh(y, width, left=start, color=color, edgecolor="white", hatch="//" if kernel == "cluster" else None)
            if width >= 0.5:
                ax.text(start + width / 2, y, f"{width:.1f}", ha="center", va="center", fontsize=8)
            phases.append(f"{name} {width:.2f}")
            start = t[key]
        ax.text(start + 0.15, y, f"{start:.2f} us", va="center", fontsize=8)
        labels.append({"cluster": "cluster kernel (not kept)", "spread": "spread kernel, v3 (7d8baca)"}[kernel])
        print(f"ctx {CTX}: {kernel} kernel " + ", ".join(phases) + f"; total {start:.2f} us")
    # One legend entry per phase name, in order of first appearance.
    seen = []
    for kernel, (_, stops) in KERNELS.items():
        for (key, name), color in zip(stops, COLORS):
            if (name, color, kernel) not in seen:
                seen.append((name, color, kernel))
    for name, color, kernel in seen:
        ax.barh(0, 0, color=color, hatch="//" if kernel == "cluster" else None, edgecolor="white",
                label=f"{kernel}: {name}")
    ax.axvline(6.0, color="#55a868", linestyle=":", linewidth=1)
    ax.text(6.05, -0.5, "target 6 us", fontsize=7, color="#55a868", ha="left")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_ylim(-0.6, len(labels) - 0.2)
    ax.set_xlim(0, 13)
    ax.set_xlabel("us per launch, back to back; a phase is the time its blocks added by running on to its end")
    ax.set_title(f"One decode row (bf16 KV, ctx {int(CTX) // 1024}K), H200, 2026-12-02: the one-launch kernels by phase",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.45, -0.2), ncol=2)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-one-row-phases.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
