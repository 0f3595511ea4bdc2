#!/usr/bin/env python3
"""Plots the fourteenth pass of issue 7 (docs/performance.md): the select scorer counting each
row's first radix digit so that the top-k can skip its sample (56521ff), bf16 keys:
  - left: select's change against f241c5d (A/B medians, 4-6 alternating processes per side on
    one machine) for each version the pass built, at 1, 8, 64 and 256 rows and contexts of 32K
    and 128K tokens;
  - middle: the same change split in two by a build whose scorer counts and whose top-k reads
    and zeroes the bins without using them: what the counting costs (f241c5d to that build) and
    what the top-k saves with the bins (that build to the shared 16-bit version), in microseconds;
  - right: one launch at 64 rows x 128K from %globaltimer stamps: when the scorer's 256 blocks
    end (also for a scorer that does not count), and when the top-k's blocks are released and
    end (medians), with and without the bins.
Data: the docs/bench/issue7-versions/h200-2026-12-01-ab-*hist*.json and
h200-2026-12-01-ab-f241c5d-56521ff.json files (scripts/bench-ab.sh's ab.json), and
h200-2026-12-01-select-timeline-b64-56521ff.json.

Usage: scripts/plot_row_hist.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-fourteenth-pass.png; an existing FILE is replaced only with
  --force)
Prints each version's change per benchmark and each split. A missing or malformed data file, or
an existing output without --force, is an error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_medians, run_figure

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
TIMELINE = "h200-2026-12-01-select-timeline-b64-56521ff.json"


def name(rows, ctx):
    return f"select/decode/b{rows}/ctx{ctx}/bf16"


def label(rows, ctx):
    return f"{rows} row{'s' if rows > 1 else ''}\n{ctx // 1024}K"


def load_ab(stem):
    """{benchmark: (median A, median B, change %)} of one ab.json."""
    return read_ab_medians(os.path.join(VERSIONS_DIR, PREFIX + stem + ".json"))


def load_timeline():
    """(sorted scorer block ends with and without counting, {variant: (release, end) medians}), in
    microseconds."""
    path = os.path.join(VERSIONS_DIR, TIMELINE)
    try:
        with open(path) as f:
            t = json.load(f)
        ends = sorted(b["end_ns"] / 1000 for b in t["scorer_block_ends"]["blocks"])
        plain = sorted(b["end_ns"] / 1000 for b in t["scorer_block_ends_without_counting"]["blocks"])
        topk = {v: (d["median_wait_release_ns"] / 1000, d["median_end_ns"] / 1000) for v, d in t["variants"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")
    if not ends or not plain or set(topk) != {"v3", "hist"}:
        raise FigureInputError(f"{path}: no scorer block ends, or not the variants v3 and hist")
    return ends, plain, topk


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
    ends, plain, topk = load_timeline()
    print(f"64 rows x 128K: the scorer's first block ends {-ends[0]:.1f} us before its last, the median one "
          f"{-ends[len(ends) // 2]:.1f} us; the top-k ends {topk['v3'][1]:.1f} us after it (sampled), "
          f"{topk['hist'][1]:.1f} us (bins)")
    return versions, split, (ends, plain), topk


def draw(plt, data):
    versions, split, (ends, plain), topk = data
    fig, (left, right, last) = plt.subplots(1, 3, figsize=(17, 6.2), gridspec_kw={"width_ratios": [1.6, 1, 1]})
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
    last.step(ends, [(i + 1) / len(ends) for i in range(len(ends))], where="post", color="black",
              label="the scorer's blocks that have ended")
    last.step(plain, [(i + 1) / len(plain) for i in range(len(plain))], where="post", color="gray", linestyle="--",
              label="the same, a scorer that does not count\n(another launch, another machine)")
    for (v, lbl), color in zip((("v3", "sampled top-k"), ("hist", "top-k with the bins")), (colors[3], colors[2])):
        release, end = topk[v]
        last.axvspan(release, end, ymin=0.05 if v == "v3" else 0.12, ymax=0.1 if v == "v3" else 0.17, color=color,
                     label=f"{lbl}: released to its median end")
    last.axvline(0, color="gray", linewidth=0.8)
    last.set_xlabel("us from the end of the scorer's last block")
    last.set_ylabel("fraction of the scorer's 256 blocks")
    last.set_title("64 rows x 128K, one launch (%globaltimer)")
    last.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-fourteenth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
