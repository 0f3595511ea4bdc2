#!/usr/bin/env python3
"""Plots the tenth pass of issue 7 (docs/performance.md): select at 64 rows x 128K, bf16 and
fp8 indexer keys, process by process, in the two A/B runs of 5147a68 against 7986523 (the
top-k change), one timed with batches of at least 200 us and one with batches of at least
1 ms. The marker says how many launches each process's batches held: at 200 us the older
build's ~200 us launch was timed alone in five processes of six, and those measured more.
A dashed line marks the issue's target (1.3 x the 128 us floor). Data:
docs/bench/issue7-versions/h200-2026-12-01-select-batches.json.

Usage: scripts/plot_select_batches.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-tenth-pass.png; an existing FILE is replaced only with
  --force)
Prints each (run, build) median. A missing or malformed data file, or an existing output
without --force, is an error naming it (exit 2).
"""
import json
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

DATA = os.path.join(VERSIONS_DIR, "h200-2026-12-01-select-batches.json")
RUNS = [("200us", "batches >= 200 us"), ("1ms", "batches >= 1 ms")]
BUILDS = [("5147a68", "5147a68 (before)", "tab:gray"), ("7986523", "7986523 (top-k change)", "tab:blue")]
MARKERS = {1: "x", 2: "o"}  # launches per batch; more than two: a square
TARGET_US = 1.3 * 128.0


def load(path):
    try:
        with open(path) as f:
            processes = json.load(f)["processes"]
        return [(p["run"], p["build"], p["benchmark"], float(p["median_us"]), int(p["launches_per_batch"]))
                for p in processes]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def processes_of(rows, run, build, name):
    """(median us, launches per batch) of each process of `build` in `run`."""
    pts = [(us, n) for (ru, bu, bench, us, n) in rows if ru == run and bu == build and bench == name]
    if not pts:
        raise FigureInputError(f"no processes of {build} in run {run} for {name}")
    return pts


def load_data():
    dtypes = ["bf16", "fp8"]
    rows = load(DATA)
    series = {(dtype, run, build): processes_of(rows, run, build, f"select/decode/b64/ctx131072/{dtype}")
              for dtype in dtypes for run, _ in RUNS for build, _, _ in BUILDS}
    return dtypes, series


def draw(plt, loaded):
    dtypes, series = loaded
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, dtype in zip(axes, dtypes):
        name = f"select/decode/b64/ctx131072/{dtype}"
        for r, (run, run_label) in enumerate(RUNS):
            for b, (build, build_label, color) in enumerate(BUILDS):
                pts = series[(dtype, run, build)]
                x0 = 2.5 * r + b
                for i, (us, n) in enumerate(pts):
                    ax.scatter(x0 + 0.08 * (i - len(pts) / 2), us, color=color, marker=MARKERS.get(n, "s"), s=28)
                med = statistics.median(us for us, _ in pts)
                ax.hlines(med, x0 - 0.3, x0 + 0.3, color=color, linewidth=1)
                print(f"{name} {run}: {build} median {med:.2f} us over {len(pts)} processes, "
                      f"launches per batch {sorted({n for _, n in pts})}")
        ax.axhline(TARGET_US, color="tab:red", linestyle="--", linewidth=1)
        ax.set_xticks([0.5, 3.0], [label for _, label in RUNS])
        ax.set_title(f"select, 64 rows x 128K, {dtype} keys")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("median time per launch (us), one point per process")
    handles = [plt.Line2D([], [], color=color, linewidth=6) for _, _, color in BUILDS]
    labels = [label for _, label, _ in BUILDS]
    handles += [plt.Line2D([], [], color="tab:red", linestyle="--")]
    labels += ["target (1.3 x floor)"]
    handles += [plt.Line2D([], [], color="black", marker=m, linestyle="") for m in ("x", "o", "s")]
    labels += ["1 launch per batch", "2 launches per batch", "6 launches per batch"]
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Tenth pass: the top-k change, timed with two batch sizes (H200, 2026-12-01)")
    fig.tight_layout(rect=(0, 0.13, 1, 0.95))
    return fig


def main():
    return run_figure(__doc__, "issue7-tenth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
