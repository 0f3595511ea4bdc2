#!/usr/bin/env python3
"""Plots issue 7's fp8 attention decode at 64 rows (context 32K) process by process, grouped
by the H200 machine each process ran on (docs/performance.md, eighth pass), from the JSON kept
under docs/bench/issue7-versions/: each device call of 2026-12-01 got a fresh machine, and
within a call the builds were timed in alternating processes. 551687b's kernel (unchanged
until 8ceab5f) sits in two groups, about 49.4 us (processes within 2% of each other) and 53.5
us (within 5%): most of one build's spread is between machines. Beside it, the builds it was
compared with on the same machine.

Usage: scripts/plot_ab_machines.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-ab-machines.png; an existing FILE is replaced only with
  --force)
Prints each machine's median of 551687b's kernel. A missing file or benchmark, or an existing
output without --force, is an error naming it (exit 2).
"""
import json
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_runs, run_figure

BENCH = "attention/decode/b64/ctx32768/fp8"
BASE = "551687b's kernel"  # 551687b, ebd3261, d3342a9 and the experiments switched off: the same kernel
FLOOR_US = 32.97  # the cost model's bytes over the 4210 GB/s copy of the eighth pass
TARGET_PCT = 65.0

# (machine label, file, how to read it, {series in the file: label in the plot})
SOURCES = [
    ("call 1", "h200-2026-12-01-in-kernel-merge-d928b06.json", "gbench", {"": BASE}),
    ("call 5", "h200-2026-12-01-fp8-logits-ahead-ab.json", "us", {"no": BASE, "ahead": "fp8 logits one step ahead"}),
    ("call 6", "h200-2026-12-01-l2-prefetch-ab.json", "us", {"0": BASE, "2": "L2 prefetch 2 steps ahead",
                                                            "4": "L2 prefetch 4 steps ahead"}),
    ("call 7", "h200-2026-12-01-fp8-stages-ab.json", "us", {"0": BASE, "4": "fp8 ring of 4 stages"}),
    ("call 8", "h200-2026-12-01-ab-76f0e4e-551687b.json", "ab", {"a": "76f0e4e (before the seventh pass)", "b": BASE}),
    ("call 8", "h200-2026-12-01-ab-551687b-aa.json", "ab", {"a": BASE, "b": BASE}),
    ("call 11", "h200-2026-12-01-ab-d3342a9-8ceab5f.json", "ab", {"a": BASE, "b": "8ceab5f (V rows on sectors)"}),
]


def read_series(name, kind, wanted):
    """{series key: [us per process]} of BENCH in one file."""
    path = os.path.join(VERSIONS_DIR, name)
    out = {}
    if kind == "ab":
        runs = read_ab_runs(path).get(BENCH)
        if runs:
            out = {"a": runs[0], "b": runs[1]}
    else:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise FigureInputError(f"cannot read {path}: {e}")
        if kind == "gbench":
            out[""] = [b["real_time"] for b in data.get("benchmarks", []) if b["name"].startswith(BENCH + "/")]
        else:  # "us"
            out = data.get("us", {}).get(BENCH, {})
    missing = [k for k in wanted if not out.get(k)]
    if missing:
        raise FigureInputError(f"{path}: no {BENCH} results for {', '.join(repr(k) for k in missing)}")
    return out


def load_data():
    machines, points = [], []  # points: (machine index, label, us)
    for machine, name, kind, wanted in SOURCES:
        if machine not in machines:
            machines.append(machine)
        series = read_series(name, kind, wanted)
        for key, label in wanted.items():
            points += [(machines.index(machine), label, t) for t in series[key]]
    return machines, points


def draw(plt, loaded):
    machines, points = loaded
    labels = list(dict.fromkeys(label for _, label, _ in points))
    colors = {BASE: "tab:blue", "8ceab5f (V rows on sectors)": "tab:green"}
    others = iter(["tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:gray"])
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for k, label in enumerate(labels):
        xs = [m + (k - (len(labels) - 1) / 2) * 0.07 for m, lab, _ in points if lab == label]
        ys = [t for _, lab, t in points if lab == label]
        ax.scatter(xs, ys, s=16, color=colors.get(label) or next(others), label=label, alpha=0.8)
    target = FLOOR_US / (TARGET_PCT / 100.0)
    ax.axhline(target, color="black", lw=0.8, ls="--")
    ax.text(len(machines) - 0.5, target - 0.4, f"{TARGET_PCT:.0f}% of the copy bandwidth ({target:.1f} us)",
            ha="right", va="top", fontsize=8)
    ax.set_xticks(range(len(machines)), machines)
    ax.set_xlabel("device call of 2026-12-01 (a fresh H200 machine each)")
    ax.set_ylabel("us per launch (one point per process)")
    ax.set_title("fp8 attention decode, 64 rows, ctx 32K: processes grouped by machine")
    ax.set_ylim(46, 62)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    for m, machine in enumerate(machines):
        base = [t for i, lab, t in points if i == m and lab == BASE]
        print(f"{machine}: {BASE} median {statistics.median(base):.2f} us over {len(base)} processes "
              f"({min(base):.2f}-{max(base):.2f})")
    return fig


def main():
    return run_figure(__doc__, "issue7-ab-machines.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
