#!/usr/bin/env python3
"""Plots one decode row's spread-kernel launch, phase by phase, from the stamps of every block
(docs/performance.md, issue 7's twenty-sixth pass): a56d177's kernel (the variants build's
V0), 50565f1 (the slot chain's loads first) and d8a59f2 (the gates loaded after the
attention), from docs/bench/issue7-versions/h200-2026-12-02-spread-stamps-{chain-v0,50565f1,
d8a59f2}.jsonl.gz. Each phase ends at a stamped point: the median over launches of the median
block's time after the launch's first wait release (scripts/spread_stamps.py prints every
point); the last phase ends at the next launch's first release. The stamped builds run a
little slower than the plain kernels (8.22 against 8.13 us at d8a59f2).

Usage: scripts/plot_spread_stamps.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-spread-stamps.png; an existing FILE is replaced only
  with --force)
Prints each version's phases in microseconds. A missing or malformed stamps file, or an
existing output without --force, is an error naming it (exit 2).
"""
import os
import statistics
import sys

import spread_stamps
from figure_out import FigureInputError, VERSIONS_DIR, run_figure

VERSIONS = [
    ("a56d177", "h200-2026-12-02-spread-stamps-chain-v0.jsonl.gz"),
    ("50565f1", "h200-2026-12-02-spread-stamps-50565f1.jsonl.gz"),
    ("d8a59f2", "h200-2026-12-02-spread-stamps-d8a59f2.jsonl.gz"),
]
# (phase, the point that ends it; None: the next launch's release). Every stamps layout of
# the twenty-sixth pass names these points.
PHASES = [
    ("slot chain", "copies issued"),
    ("K, V and PV", "attention done"),
    ("partials stored", "partials stored"),
    ("barrier", "barrier passed"),
    ("merge loads", "merge (m, l), maxima"),
    ("sums", "sums"),
    ("outputs", "outputs stored"),
    ("grid end, next release", None),
]
COLORS = ["#c44e52", "#4c72b0", "#8172b3", "#bbbbbb", "#dd8452", "#ccb974", "#55a868", "#64b5cd"]


def phase_ends(path):
    """The microseconds at which each of PHASES ends, for one stamps file."""
    try:
        launches = spread_stamps.load(path)
    except SystemExit as e:  # load() names the file and the problem
        raise FigureInputError(str(e))
    names = spread_stamps.layout(launches)[0]
    times = spread_stamps.point_times(launches)
    ends = []
    for phase, point in PHASES:
        if point is None:
            period = spread_stamps.periods(launches)
            if not period:
                raise FigureInputError(f"{path}: no two consecutive launches")
            ends.append(statistics.median(period))
        elif point in names and names.index(point) in times:
            ends.append(statistics.median(times[names.index(point)][0]))
        else:
            raise FigureInputError(f"{path}: no '{point}' stamps (the {phase} phase's end)")
    return ends


def load_data():
    return [(label, phase_ends(os.path.join(VERSIONS_DIR, name))) for label, name in VERSIONS]


def draw(plt, data):
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for row, (label, ends) in enumerate(data):
        start, parts = 0.0, []
        for k, ((phase, _), end) in enumerate(zip(PHASES, ends)):
            ax.barh(row, end - start, left=start, color=COLORS[k], edgecolor="white",
                    label=phase if row == 0 else None)
            parts.append(f"{phase} {end - start:.2f}")
            start = end
        ax.text(start + 0.05, row, f"{start:.2f} us", va="center", fontsize=8)
        print(f"{label}: " + ", ".join(parts) + f"; period {start:.2f} us")
    ax.set_yticks(range(len(data)))
    ax.set_yticklabels([label for label, _ in data])
    ax.invert_yaxis()
    ax.set_xlim(0, max(ends[-1] for _, ends in data) + 0.8)
    ax.set_xlabel("us after the launch's first block is released by griddepcontrol.wait (median block)")
    ax.set_title("One decode row, ctx 32K, bf16: the spread kernel's launch from stamps of every block (H200)",
                 fontsize=9)
    ax.legend(ncol=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-spread-stamps.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
