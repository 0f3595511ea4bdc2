#!/usr/bin/env python3
"""Plots the thirteenth pass of issue 7 (docs/performance.md), select at 64 rows x 128K (bf16):
  - left: where select's top-k kernel spends its time once the scorer has finished, phase by
    phase, in each version the pass built (clock64 stamps of blocks 0-5, medians over blocks and
    processes, select-only processes; 1,000 cycles are about 0.5 us);
  - right: select's process median after different things ran in the process, among them a
    probe that allocated, wrote and freed 16 GiB (the same slow time as after the prepare
    benchmarks) and one that kept its 16 GiB (the fast time).
Data: docs/bench/issue7-versions/h200-2026-12-01-topk-phases.json and
h200-2026-12-01-select-alloc-probe-e17272e.json.

Usage: scripts/plot_topk_phases.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-thirteenth-pass.png; an existing FILE is replaced only with
  --force)
Prints each version's phase medians and each order's select medians. A missing or malformed data
file, or an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

PHASES_FILE = "h200-2026-12-01-topk-phases.json"
PROBE_FILE = "h200-2026-12-01-select-alloc-probe-e17272e.json"
PHASES = ["sample", "thr", "gather", "kth", "pick", "sort", "write"]
# (label, device call, tree) of the select-only runs of each version, in the order built
VERSIONS = [("e17272e", "call-2", "t0"),
            ("+ L2 evict-first keys,\nidle sort waves (not kept)", "call-2", "t1"),
            ("03e1c02 (its 1024-thread\nblock): radix, rank sort", "call-3", "t1"),
            ("+ L1 prefetch\n(25a8ec0, reverted)", "call-5", "25a8ec0 + stamps"),
            ("2bf7300: float compare\nin the gather", "call-6", "2bf7300 + stamps")]
# tick labels of the probe's orders (the data file's order names, up to a colon)
ORDER_LABELS = {"alone": "select\nonly", "prepare first": "prepare\nfirst", "alloc16": "16 GiB\nallocated,\nfreed",
                "hold16": "16 GiB\nallocated,\nkept", "projection benchmarks at 64 rows first": "projection\nfirst"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)["runs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def phase_medians(runs, call, tree):
    """{phase: median cycles} over the blocks of the select-only runs of one version."""
    blocks = [b for r in runs if r.get("call") == call and r.get("tree") == tree and r.get("order") == "alone"
              for b in r.get("topk_blocks", [])]
    if not blocks:
        raise FigureInputError(f"{PHASES_FILE} has no select-only run of {call} {tree}")
    try:
        return {p: statistics.median(int(b[p]) for b in blocks) for p in PHASES + ["after_wait"]}
    except (KeyError, ValueError, TypeError) as e:
        raise FigureInputError(f"{PHASES_FILE}: a block of {call} {tree} lacks a phase ({e})")


def load_data():
    """([(label, phase medians)] of VERSIONS, [(order, select medians)] of the probe)."""
    runs = load(os.path.join(VERSIONS_DIR, PHASES_FILE))
    medians = [(label, phase_medians(runs, call, tree)) for label, call, tree in VERSIONS]
    try:
        probe = [(r["order"].split(":")[0], [float(x) for x in r["select_us"]])
                 for r in load(os.path.join(VERSIONS_DIR, PROBE_FILE))]
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise FigureInputError(f"{PROBE_FILE}: a run lacks its order or times ({e})")
    return medians, probe


def draw(plt, data):
    medians, probe = data
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.0), gridspec_kw={"width_ratios": [1.7, 1]})
    colors = plt.get_cmap("tab10").colors
    for y, (label, m) in enumerate(medians):
        start = 0.0
        for i, p in enumerate(PHASES):
            left.barh(y, m[p] / 1000, left=start, color=colors[i], label=p if y == 0 else None)
            start += m[p] / 1000
        left.text(start + 0.3, y, f"{m['after_wait'] / 1000:.1f}K", va="center", fontsize=8)
        print(f"{label.replace(chr(10), ' ')}: " + ", ".join(f"{p} {m[p]:.0f}" for p in PHASES) +
              f"; total {m['after_wait']:.0f} cycles")
    left.set_yticks(range(len(medians)), [label for label, _ in medians], fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("top-k after the scorer: thousands of SM cycles (median block)")
    left.set_title("Select's top-k, phase by phase (64 rows x 128K)", fontsize=10)
    left.legend(fontsize=7, ncol=len(PHASES), loc="upper center", bbox_to_anchor=(0.5, -0.16))
    for x, (order, us) in enumerate(probe):
        right.scatter([x] * len(us), us, color="tab:blue")
        print(f"{order}: select {min(us):.1f}-{max(us):.1f} us over {len(us)} processes")
    right.set_xticks(range(len(probe)), [ORDER_LABELS.get(o, o) for o, _ in probe], fontsize=7)
    right.set_ylabel("select, process median, us (build with stamps)")
    right.set_title("What ran before select in the process", fontsize=10)
    fig.suptitle("Issue 7, thirteenth pass (H200, 2026-12-01)", fontsize=11)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-thirteenth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
