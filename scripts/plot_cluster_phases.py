#!/usr/bin/env python3
"""Plots one decode row's launch phase by phase for the spread kernel given slots and for the
cluster kernel of the thirty-first pass (docs/performance.md, issue 7): a cluster of 16 blocks
per (row, KV group) whose partials merge through distributed shared memory. Inputs, in
docs/bench/issue7-versions/: the spread kernel's stamps of the twenty-ninth pass (V8,
h200-2026-12-03-spread-stamps-v8-slots.jsonl.gz, read as scripts/plot_spread_stamps.py does) and the
cluster kernel's (h200-2026-12-03-cluster-decode-stamps.csv.gz: rows "launch, block, then 10
%globaltimer stamps of thread 0", zero where unused). Each phase ends at the median over
launches of the median block's time after the launch's first wait release; the last ends at the
next launch's first release.

Usage: scripts/plot_cluster_phases.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-cluster-phases.png; an existing FILE is replaced only
  with --force)
Prints each kernel's phases in microseconds. A missing or malformed stamps file, or an
existing output without --force, is an error naming it (exit 2).
"""
import csv
import gzip
import os
import statistics
import sys

from plot_spread_stamps import phase_ends
from figure_out import FigureInputError, VERSIONS_DIR, phase_bars, run_figure

PHASES = ["slots", "K, V and attention", "partials out (stores / pushes)", "barrier (grid / cluster)",
          "merge and outputs", "grid end, next release"]
COLORS = ["#c44e52", "#4c72b0", "#8172b3", "#bbbbbb", "#55a868", "#64b5cd"]
# The spread build's points that end PHASES (None: the next launch's release).
SPREAD_POINTS = ["slots resolved", "attention done", "partials stored", "barrier passed", "outputs stored", None]
# The cluster build's stamp index that ends each phase: 1 is the wait's release, 2 the slots in
# shared memory, 5 every group's partial in shared memory, 6 the pushes issued, 7 the cluster
# barrier passed, 8 the outputs stored.
CLUSTER_POINTS = [2, 5, 6, 7, 8, None]


def cluster_ends(path):
    launches = {}
    try:
        with gzip.open(path, "rt") as f:
            for row in csv.reader(f):
                stamps = [int(x) for x in row[2:]]
                if len(stamps) < 9:
                    raise ValueError(f"a row of {len(row)} fields")
                if stamps[0] != 0:
                    launches.setdefault(int(row[0]), []).append(stamps)
    except (OSError, ValueError, EOFError) as e:
        raise FigureInputError(f"{path}: {e}")
    if len(launches) < 2:
        raise FigureInputError(f"{path}: fewer than two stamped launches")
    released = {seq: min(b[1] for b in blocks) for seq, blocks in launches.items()}
    ends = []
    for point in CLUSTER_POINTS:
        if point is None:
            first = sorted(released.values())
            ends.append(statistics.median(b - a for a, b in zip(first, first[1:])) / 1e3)
        else:
            ends.append(statistics.median(statistics.median(b[point] - released[seq] for b in blocks)
                                          for seq, blocks in launches.items()) / 1e3)
    return ends


def load_data():
    return [("spread kernel, 65 blocks per pair\n(twenty-ninth pass V8: given slots)",
             phase_ends(os.path.join(VERSIONS_DIR, "h200-2026-12-03-spread-stamps-v8-slots.jsonl.gz"),
                        list(zip(PHASES, SPREAD_POINTS)))),
            ("cluster of 16 blocks per pair\n(thirty-first pass, not kept)",
             cluster_ends(os.path.join(VERSIONS_DIR, "h200-2026-12-03-cluster-decode-stamps.csv.gz")))]


def draw(plt, data):
    return phase_bars(plt, data, PHASES, COLORS,
                      "One decode row, ctx 32K, bf16, stamped builds (H200): the exchange shrinks a little, "
                      "the gather of 32 SMs grows more", figsize=(10, 2.9), label_size=8)


def main():
    return run_figure(__doc__, "issue7-cluster-phases.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
