#!/usr/bin/env python3
"""Plots issue 7's one-row attention decode (docs/performance.md, fourth pass)
from the benchmark JSON kept under docs/bench/: the time of one decode row
(context 32K) against the 8-id steps its busiest warp runs, for bf16 and fp8
KV, with a least-squares line per dtype. The points are the cluster-merge
experiment at 16 down to 1 splits per row and the split-K kernel of 74b9232
(33 splits, one step per warp); the line's intercept is the cost that no
split count removes.

Usage: scripts/plot_one_row_steps.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-one-row-steps.png; an existing FILE is
  replaced only with --force)
A missing file or benchmark, or an existing output without --force, is an
error naming it (exit 2).
"""
import json
import math
import os
import sys

from figure_out import run_figure

BENCH = os.path.join(os.path.dirname(__file__), "..", "docs", "bench")
RUNS = [f"issue7-versions/h200-2026-11-30-attention-cluster-merge-max{s}.json" for s in (16, 8, 4, 2, 1)]
RUNS.append("h200-2026-11-30-issue7-74b9232.json")
COLS = 2051  # counted columns of a decode row (K_B = 2048 blocks of r = 4, expanded, with its tail)
WARPS, STEP = 8, 8  # warps per block, ids per warp step of the tensor-core kernel


def busiest_warp_steps(splits):
    """Steps of the busiest warp, by the launcher's rule: ids per split
    rounded up to whole steps, a split's steps shared by its 8 warps."""
    ids = math.ceil(math.ceil(COLS / splits) / STEP) * STEP
    return math.ceil(ids // STEP / WARPS)


def points(dtype):
    out = []
    for run in RUNS:
        path = os.path.join(BENCH, run)
        with open(path) as f:
            benchmarks = json.load(f)["benchmarks"]
        name = f"attention/decode/b1/ctx32768/{dtype}/"
        hit = [b for b in benchmarks if b["name"].startswith(name)]
        if not hit:
            raise KeyError(f"{path} has no {name} benchmark")
        out.append((busiest_warp_steps(int(hit[0]["splits"])), float(hit[0]["median_us"])))
    return out


def fit(pts):
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return my - slope * mx, slope


def load_data():
    data = {d: points(d) for d in ("bf16", "fp8")}
    return data


def draw(plt, data):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for (dtype, pts), color in zip(data.items(), ("#4c72b0", "#c44e52")):
        a, b = fit(pts)
        xs = [x for x, _ in pts]
        ax.plot(xs, [y for _, y in pts], "o", color=color)
        ax.plot([0, max(xs)], [a, a + b * max(xs)], "-", color=color, alpha=0.6,
                label=f"{dtype} KV: {a:.1f} us + {b:.2f} us per step")
        print(f"{dtype}: {a:.2f} us + {b:.3f} us per step; points {pts}")
    ax.axhline(6.0, color="#55a868", linestyle=":", label="issue 7 target (bf16) 6 us")
    ax.axhline(11.8, color="#dd8452", linestyle="--", label="vLLM Triton (bf16) 11.8 us")
    ax.set_xlabel("8-id steps of the busiest warp (33 splits: 1; 16: 3; 8: 5; 4: 9; 2: 17; 1: 33)", fontsize=8)
    ax.set_ylabel("time per launch (us, median)")
    ax.set_xlim(0, 35)
    ax.set_ylim(0, 130)
    ax.set_title("One decode row, context 32K, H200: time against steps per warp", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-one-row-steps.png", load_data, draw, errors=(OSError, KeyError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
