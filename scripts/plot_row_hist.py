#!/usr/bin/env python3
"""Plots the fourteenth pass of issue 7 (docs/performance.md): the select scorer counting each
row's first radix digit so that the top-k can skip its sample (56521ff), bf16 keys:
  - left: select's change against f241c5d (A/B medians, 4-6 alternating processes per side on
    one machine) for each version the pass built, at 1, 8, 64 and 256 rows and contexts of 32K
    and 128K tokens;
  - right: the same change split in two by a build whose scorer counts and whose top-k reads and
    zeroes the bins without using them: what the counting costs (f241c5d to that build) and what
    the top-k saves with the bins (that build to the shared 16-bit version), in microseconds.
Data: the docs/bench/issue7-versions/h200-2026-12-01-ab-*hist*.json and
h200-2026-12-01-ab-f241c5d-56521ff.json files (scripts/bench-ab.sh's ab.json).

Usage: scripts/plot_row_hist.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-fourteenth-pass.png; an existing FILE is replaced only with
  --force)
Prints each version's change per benchmark and each split. A missing or malformed data file, or
an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, run_figure

VERSIONS_DIR = os.path.join(os.path.dirname(__file__), "..", "docs", "bench", "issue7-versions")
PREFIX = "h200-2026-12-01-ab-"
# (label, A/B file against f241c5d), in the order built
VERSIONS = [("atomics into the row's bins in L2", "f241c5d-hist-global-atomics"),
            ("32-bit bins in shared memory\n(one block per SM)", "f241c5d-hist-shared-32bit"),
            ("16-bit bins, max-L1 carveout\n(one block per SM)", "f241c5d-hist-shared-16bit-maxl1"),
            ("16-bit bins, 32 KiB carveout\n(two blocks per SM)", "f241c5d-hist-shared-16bit"),
            ("56521ff: the same,\nat most 16 rows", "f241c5d-56521ff")]
SPLIT_COST = "f241c5d-hist-count-only"    # f241c5d -> counting, bins not used
SPLIT_SAVING = "hist-count-only-vs-hist"  # counting, bins not used -> bins used
SHAPES = [(rows, ctx) for rows in (1, 8, 64, 256) for ctx in (32768, 131072)]


def name(rows, ctx):
    return f"select/decode/b{rows}/ctx{ctx}/bf16"


def label(rows, ctx):
    return f"{rows} row{'s' if rows > 1 else ''}\n{ctx // 1024}K"


def load_ab(stem):
    """{benchmark: (median A, median B, change %)} of one ab.json."""
    path = os.path.join(VERSIONS_DIR, PREFIX + stem + ".json")
    try:
        with open(path) as f:
            rows = json.load(f)["benchmarks"]
        return {r["benchmark"]: (float(r["a"]["median"]), float(r["b"]["median"]), float(r["change_pct"]))
                for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def load_data():
    versions = [(lbl, load_ab(stem)) for lbl, stem in VERSIONS]
    cost, saving = load_ab(SPLIT_COST), load_ab(SPLIT_SAVING)
    split = [(rows, ctx, cost[name(rows, ctx)][1] - cost[name(rows, ctx)][0],
              saving[name(rows, ctx)][1] - saving[name(rows, ctx)][0])
             for rows, ctx in SHAPES if name(rows, ctx) in cost and name(rows, ctx) in saving]
    if not split:
        raise FigureInputError(f"{PREFIX}{SPLIT_COST}.json and {PREFIX}{SPLIT_SAVING}.json share no benchmark")
    for lbl, ab in versions:
        print(lbl.replace("\n", " ") + ": " +
              ", ".join(f"b{r}/{c // 1024}K {ab[name(r, c)][2]:+.1f}%" for r, c in SHAPES if name(r, c) in ab))
    for rows, ctx, c, s in split:
        print(f"split b{rows}/{ctx // 1024}K: counting {c:+.2f} us, the top-k with the bins {s:+.2f} us")
    return versions, split


def draw(plt, data):
    versions, split = data
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 6.2), gridspec_kw={"width_ratios": [1.6, 1]})
    width = 0.8 / len(versions)
    colors = plt.get_cmap("tab10").colors
    for i, (lbl, ab) in enumerate(versions):
        xs = [j + (i - (len(versions) - 1) / 2) * width for j, s in enumerate(SHAPES) if name(*s) in ab]
        ys = [ab[name(*s)][2] for s in SHAPES if name(*s) in ab]
        left.bar(xs, ys, width, color=colors[i], label=lbl)
    left.axhline(0, color="black", linewidth=0.8)
    left.set_xticks(range(len(SHAPES)))
    left.set_xticklabels([label(*s) for s in SHAPES])
    left.set_ylabel("select time against f241c5d (%)")
    left.set_title("select (bf16), A/B medians: each version of the row histogram")
    left.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
    xs = range(len(split))
    right.bar([x - 0.2 for x in xs], [c for _, _, c, _ in split], 0.4, color=colors[3],
              label="the scorer counts, the top-k reads the bins\nbut does not use them (f241c5d to that)")
    right.bar([x + 0.2 for x in xs], [s for _, _, _, s in split], 0.4, color=colors[2],
              label="the top-k uses the bins (that to the\n16-bit, two-blocks version)")
    right.axhline(0, color="black", linewidth=0.8)
    right.set_xticks(list(xs))
    right.set_xticklabels([label(r, c) for r, c, _, _ in split])
    right.set_ylabel("change of select's median (us)")
    right.set_title("what the counting costs and the top-k saves")
    right.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-fourteenth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
