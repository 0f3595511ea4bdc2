#!/usr/bin/env python3
"""Plots the ninth pass of issue 7 (docs/performance.md): attention decode at 64 and 256 rows,
context 32K, bf16 and fp8 KV, process by process, for each A/B comparison of that pass
(scripts/bench-ab.sh: the two builds in alternating processes on one fresh H200 machine). The
JSON is the ab.json of each comparison, kept under docs/bench/issue7-versions/. A dashed line
marks the issue's target where it has one, as a time: the cost model's floor over the target
fraction of the copy bandwidth.

Usage: scripts/plot_ab_changes.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-ninth-pass.png; an existing FILE is replaced only with
  --force)
Prints each comparison's medians. A missing file or benchmark, or an existing output without
--force, is an error naming it (exit 2).
"""
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_runs, run_figure


# (label, ab.json, name of side a, name of side b)
COMPARISONS = [
    ("call 1", "h200-2026-12-01-ab-cbfe6a4-1ac718b.json", "cbfe6a4", "1ac718b: bf16 rows swizzled"),
    ("call 2", "h200-2026-12-01-ab-1ac718b-a31dfef.json", "1ac718b", "a31dfef: fp8 16-id steps"),
    ("call 5", "h200-2026-12-01-split-issue-ab.json", "a31dfef", "K and V issued apart (reverted)"),
    ("call 7", "h200-2026-12-01-vec-epilogue-ab.json", "a31dfef", "epilogue stores as vectors (reverted)"),
]

# (benchmark, floor in us: the cost model's bytes over this pass's ~4215 GB/s copy, target % or None)
PANELS = [
    ("attention/decode/b64/ctx32768/bf16", 64.8, 80.0),
    ("attention/decode/b256/ctx32768/bf16", 259.5, 85.0),
    ("attention/decode/b64/ctx32768/fp8", 33.0, 65.0),
    ("attention/decode/b256/ctx32768/fp8", 131.7, None),
]


def read_runs(name):
    """{benchmark: (a runs, b runs)} of one ab.json."""
    return read_ab_runs(os.path.join(VERSIONS_DIR, name))


def load_data():
    data = []
    for label, name, side_a, side_b in COMPARISONS:
        runs = read_runs(name)
        for bench, _, _ in PANELS:
            if bench not in runs or not runs[bench][0] or not runs[bench][1]:
                raise FigureInputError(f"{name}: no {bench} results")
        data.append((label, side_a, side_b, runs))
    return data


def draw(plt, data):
    fig, axes = plt.subplots(1, len(PANELS), figsize=(12, 4.2))
    for ax, (bench, floor, target) in zip(axes, PANELS):
        for c, (label, side_a, side_b, runs) in enumerate(data):
            a, b = runs[bench]
            ax.scatter([c - 0.12] * len(a), a, s=14, color="tab:gray", alpha=0.8, label="A (before)" if c == 0 else None)
            ax.scatter([c + 0.12] * len(b), b, s=14, color="tab:green", alpha=0.8, label="B (the change)" if c == 0 else None)
        if target is not None:
            at = floor / (target / 100.0)
            ax.axhline(at, color="black", lw=0.8, ls="--")
            ax.text(-0.4, at, f"target: {target:.0f}% of the copy bandwidth", ha="left", va="bottom", fontsize=7)
        ax.set_xticks(range(len(data)), [d[0] for d in data], fontsize=8)
        parts = bench.split("/")  # attention/decode/b<rows>/ctx32768/<dtype>
        ax.set_title(f"{parts[4]} KV, {parts[2][1:]} rows, ctx 32K", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    axes[0].set_ylabel("us per launch (one point per process)")
    axes[0].legend(fontsize=7, loc="upper right")
    changes = "; ".join(f"{d[0]}: {d[1]} -> {d[2]}" for d in data)
    fig.suptitle("Issue 7, ninth pass: A/B processes per comparison", fontsize=10)
    fig.text(0.5, 0.01, changes, ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    for label, side_a, side_b, runs in data:
        for bench, _, _ in PANELS:
            a, b = runs[bench]
            print(f"{label}: {bench}: {side_a} median {statistics.median(a):.2f} us, "
                  f"{side_b} median {statistics.median(b):.2f} us")
    return fig


def main():
    return run_figure(__doc__, "issue7-ninth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
