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
from figure_out import FigureInputError, VERSIONS_DIR, phase_bars, run_figure

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


def phase_ends(path, phases=PHASES):
    """The microseconds at which each of `phases` ((name, the point that ends it; None: the
    next launch's release)) ends, for one stamps file."""
    try:
        launches = spread_stamps.load(path)
    except SystemExit as e:  # load() names the file and the problem
        raise FigureInputError(str(e))
    names = spread_stamps.layout(launches)[0]
    times = spread_stamps.point_times(launches)
    ends = []
    for phase, point in phases:
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
    return phase_bars(plt, data, [phase for phase, _ in PHASES], COLORS,
                      "One decode row, ctx 32K, bf16: the spread kernel's launch from stamps of every block (H200)")


def main():
    return run_figure(__doc__, "issue7-spread-stamps.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
