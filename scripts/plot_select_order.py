#!/usr/bin/env python3
"""Plots the twelfth pass of issue 7 (docs/performance.md): select at 64 rows x 128K (bf16) in
processes that run different benchmarks before it, one point per process. The same binary
(230e808; crosses: with the top-k launched plainly instead of as a dependent) measures ~159 us
when only select or the copy ran before it and ~167 us after a prepare benchmark. The A/B
processes of the pass (select benchmarks only) are shown for reference; the dashed line is
1.3x the floor, the issue's target. Data: docs/bench/issue7-versions/
h200-2026-12-01-select-order-230e808.json and h200-2026-12-01-ab-7d71aa2-230e808.json.

Usage: scripts/plot_select_order.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-twelfth-pass.png; an existing FILE is replaced only with
  --force)
Prints each group's range. A missing or malformed data file, or an existing output without
--force, is an error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_runs, run_figure

ORDER_FILE = "h200-2026-12-01-select-order-230e808.json"
AB_FILE = "h200-2026-12-01-ab-7d71aa2-230e808.json"
BENCH = "select/decode/b64/ctx131072/bf16"
FLOOR_US = 127.1  # the runs' floor_us (127.06-127.2)
# (label, orders in the data file that belong to the group)
GROUPS = [("only select before it", ("alone",)), ("the 1 GiB copy first", ("copy",)),
          ("a prepare benchmark first", ("prepare", "p64", "p256")), ("the full run's list", ("full",))]


def read_orders(path):
    """[(order, plain top-k launch?, median us)] of the order file."""
    try:
        with open(path) as f:
            runs = json.load(f)["runs"]
        return [(r["order"], "plain" in r["binary"], float(r["median_us"][BENCH])) for r in runs]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def load_data():
    """(the order file's points, the A/B processes' select times)."""
    points = read_orders(os.path.join(VERSIONS_DIR, ORDER_FILE))
    ab = read_ab_runs(os.path.join(VERSIONS_DIR, AB_FILE))
    if BENCH not in ab:
        raise FigureInputError(f"{AB_FILE} has no benchmark {BENCH}")
    return points, ab[BENCH][1]


def draw(plt, data):
    points, ab_runs = data
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    labels = ["A/B processes (select only)"] + [label for label, _ in GROUPS]
    ax.scatter([0.0] * len(ab_runs), ab_runs, color="tab:gray", marker="o")
    print(f"A/B: {min(ab_runs):.1f}-{max(ab_runs):.1f} us over {len(ab_runs)} processes")
    for x, (label, orders) in enumerate(GROUPS, start=1):
        for plain, marker, color in ((False, "o", "tab:blue"), (True, "x", "tab:orange")):
            ys = [us for order, p, us in points if order in orders and p == plain]
            if not ys:
                continue
            ax.scatter([x + (0.12 if plain else -0.12)] * len(ys), ys, marker=marker, color=color)
            kind = "plain top-k" if plain else "230e808"
            print(f"{label}, {kind}: {min(ys):.1f}-{max(ys):.1f} us over {len(ys)} processes")
    ax.axhline(1.3 * FLOOR_US, color="tab:red", linestyle="--", linewidth=1,
               label=f"1.3x the floor ({1.3 * FLOOR_US:.1f} us): the target")
    ax.scatter([], [], marker="o", color="tab:blue", label="230e808")
    ax.scatter([], [], marker="x", color="tab:orange", label="230e808, top-k launched plainly")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("select, 64 rows x 128K: median per process, us")
    ax.set_title("One binary, different benchmarks before select in the process (H200, 2026-12-01)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-twelfth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
