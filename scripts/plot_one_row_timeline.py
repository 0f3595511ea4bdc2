#!/usr/bin/env python3
"""Plots where one decode row's time goes (docs/performance.md, issue 7's
fifth pass) from docs/bench/issue7-versions/h200-2026-11-30-one-row-timeline.json:
one bar per version, cut into the phases of one launch (attention kernel,
split merge kernel, the waits between them), from globaltimer stamps.

Usage: scripts/plot_one_row_timeline.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-one-row-timeline.png; an existing FILE
  is replaced only with --force)
Prints each version's phases in microseconds. A missing or malformed data
file, or an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

DATA = os.path.join(VERSIONS_DIR, "h200-2026-11-30-one-row-timeline.json")
# (phase label, the point that ends it); each phase starts where the one before ends, the first at the wait.
PHASES = [
    ("ids, request, seq_len, block table", "slots"),
    ("first K, V tiles", "kv0"),
    ("one step", "loop"),
    ("warps' merge, partial stores", "attn_end"),
    ("attention done -> merge released", "merge_wait"),
    ("split merge kernel", "merge_end"),
    ("merge done -> next attention released", "next_wait"),
]
COLORS = ["#4c72b0", "#55a868", "#8172b2", "#c44e52", "#bbbbbb", "#dd8452", "#dddddd"]


def phases(run):
    pts = run["points"]
    out, start = [], 0.0
    for label, key in PHASES:
        end = float(pts[key])
        if end < start:
            raise ValueError(f"{run['label']}: point {key} ({end}) comes before the phase start ({start})")
        out.append((label, start, end - start))
        start = end
    return out


def load_data():
    """[(label, phases, median without stamps)] of the data file's runs."""
    try:
        with open(DATA) as f:
            runs = json.load(f)["runs"]
        return [(r["label"], phases(r), float(r["clean_median_us"])) for r in runs]
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise FigureInputError(f"{DATA}: {e}")


def draw(plt, bars):
    fig, ax = plt.subplots(figsize=(9, 4.3))
    for y, (label, ph, clean) in enumerate(bars):
        for (name, start, width), color in zip(ph, COLORS):
            ax.barh(y, width, left=start, color=color, edgecolor="white", label=name if y == 0 else None)
            if width >= 0.9:
                ax.text(start + width / 2, y, f"{width:.1f}", ha="center", va="center", fontsize=8)
        total = ph[-1][1] + ph[-1][2]
        ax.text(total + 0.2, y, f"{total:.1f} us stamped\n({clean:.1f} us without stamps)", va="center", fontsize=8)
        print(f"{label}: " + ", ".join(f"{n} {w:.2f}" for n, _, w in ph) + f"; total {total:.2f} us")
    ax.axvline(11.8, color="#dd8452", linestyle="--", linewidth=1)
    ax.text(11.8, len(bars) - 0.45, "vLLM Triton 11.8 us", fontsize=7, color="#dd8452", ha="center")
    ax.axvline(6.0, color="#55a868", linestyle=":", linewidth=1)
    ax.text(6.0, len(bars) - 0.45, "target 6 us", fontsize=7, color="#55a868", ha="center")
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels([b[0] for b in bars])
    ax.set_ylim(-0.6, len(bars) - 0.2)
    ax.set_xlim(0, 21)
    ax.set_xlabel("microseconds from the attention kernel's release from griddepcontrol.wait")
    ax.set_title("One decode row (context 32K, bf16 KV, 33 splits), H200: one launch, phase by phase", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-one-row-timeline.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
