#!/usr/bin/env python3
"""Plots issue 7's prefill attention on the H200 (docs/performance.md, nineteenth to twenty-first
passes) from the share sweeps kept under docs/bench/issue7-versions/ (scripts/bench_share.py's
share.json): each version of the Hopper union-tile kernel against the plan's reuse (attended
(row, id) pairs per entry loaded, the axis kAuto decides on), next to the decode kernel, which
does not care what rows share.
  left:  the 8K-row chunk at 32K context, time against reuse, with the issue's target (35% of
         the matrix rate);
  right: the union kernel's time over the decode kernel's for 512- and 2048-row chunks, where
         the union kernel's fixed costs weigh most, with the crossing (1.0) and the kAuto
         threshold each version had.
It prints each version's time at the highest share and each crossing, interpolated linearly in
1 / reuse between the measured neighbours (how performance.md quotes them).

Usage: scripts/plot_prefill_reuse.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-prefill-reuse.png; an existing FILE is replaced only with
  --force)
A version may have been swept at the short chunks only (no line on the left). A missing or
malformed sweep file, a version with neither the 8K chunk nor a short one, or an existing output
without --force, is an error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, VERSIONS_DIR, run_figure

PREFIX = "h200-2026-12-02-prefill-share-"
CHUNK8K = "attention/prefill/c8192/ctx32768/bf16"
TARGET_MS = 412.619e9 / (0.35 * 790e12) * 1e3  # the 8K chunk's FLOPs at 35% of 790 TFLOP/s

# Each version: its label, the sweeps that timed it, and the kAuto threshold it was given.
VERSIONS = [
    ("f85446b (16 entries per step)", ["decode-crossover-f85446b", "crossover-shapes-42fb8f1"], 2.3),
    ("f4b813a (32 entries per step)", ["wg32-after", "crossover-shapes-wg32", "crossover-short-8a41668"], 2.0),
    ("5eaa1cf (copies by warp rows)", ["5eaa1cf", "crossover-short-5eaa1cf"], 1.7),
    ("3c29945 (exact epilogue)", ["3c29945"], 1.7),
    ("1e59054 (masks late)", ["crossover-short-1e59054"], 1.5),
]
COLORS = ["#8c8c8c", "#4c72b0", "#c44e52", "#55a868", "#8172b3"]
SHORT_CHUNKS = ("512", "2048")


def read_sweep(name):
    """{benchmark: [(share, median_us, reuse or None)]} of one share.json."""
    path = os.path.join(VERSIONS_DIR, PREFIX + name + ".json")
    try:
        with open(path) as f:
            raw = json.load(f)
        return {bench: [(float(s), float(v["median_us"]), v.get("reuse")) for s, v in by_share.items()]
                for bench, by_share in raw.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def merged(names):
    """The sweeps' points per benchmark, one per share (a later file's point replaces an
    earlier one's), sorted by share."""
    out = {}
    for name in names:
        for bench, pts in read_sweep(name).items():
            out.setdefault(bench, {}).update((pt[0], pt) for pt in pts)
    return {bench: sorted(by_share.values()) for bench, by_share in out.items()}


def union_over_decode(points, bench):
    """[(reuse, union time / decode time)] where both kernels ran at the same share."""
    union = {s: (t, r) for s, t, r in points.get(bench, []) if r is not None}
    decode = {s: t for s, t, _ in points.get(bench + "/decode_kernel", [])}
    return sorted((union[s][1], union[s][0] / decode[s]) for s in union if s in decode)


def crossing(ratios):
    """The reuse at which union / decode falls through 1, linear in 1 / reuse between the
    measured neighbours; None where the points do not bracket it."""
    for (r0, q0), (r1, q1) in zip(ratios, ratios[1:]):
        if q0 >= 1.0 > q1:
            x0, x1 = 1.0 / r0, 1.0 / r1
            return 1.0 / (x0 + (q0 - 1.0) / (q0 - q1) * (x1 - x0))
    return None


def short_bench(rows):
    return f"attention/prefill/c{rows}/ctx32768/bf16"


def load_data():
    data = []
    for label, names, threshold in VERSIONS:
        points = merged(names)
        if CHUNK8K not in points and not any(short_bench(rows) in points for rows in SHORT_CHUNKS):
            raise FigureInputError(f"{label}: neither {CHUNK8K} nor a short chunk in {', '.join(names)}")
        data.append((label, points, threshold))
    return data


def draw(plt, data):
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.3))
    decode = None
    for (label, points, threshold), color in zip(data, COLORS):
        if CHUNK8K in points:  # (a version swept at short chunks only has no line here)
            pts = sorted((r, t / 1e3) for _, t, r in points[CHUNK8K] if r is not None)
            left.plot([r for r, _ in pts], [t for _, t in pts], "o-", color=color, label=label)
            print(f"{label}: 8K chunk {pts[-1][1]:.2f} ms at reuse {pts[-1][0]:.2f}")
        if CHUNK8K + "/decode_kernel" in points:
            decode = points[CHUNK8K + "/decode_kernel"]
        for rows, style in zip(SHORT_CHUNKS, ("o-", "s--")):
            ratios = union_over_decode(points, short_bench(rows))
            if ratios:
                right.plot([r for r, _ in ratios], [q for _, q in ratios], style, color=color,
                           label=f"{label.split()[0]}, {rows} rows")
                cross = crossing(ratios)
                print(f"{label}: {rows} rows cross the decode kernel at reuse "
                      + (f"{cross:.2f}" if cross else "outside the points"))
        right.axvline(threshold, color=color, linestyle=":", alpha=0.8)
    if decode:
        left.axhline(sum(t for _, t, _ in decode) / len(decode) / 1e3, color="#dd8452", linestyle="--",
                     label="decode kernel (any reuse)")
    left.axhline(TARGET_MS, color="#55a868", linestyle=":", label=f"target: 35% of the matrix rate ({TARGET_MS:.2f} ms)")
    left.set_xlabel("plan reuse (attended row-id pairs per entry loaded)")
    left.set_ylabel("time per launch (ms, median)")
    left.set_ylim(0, 9)
    left.set_title("8K-row prefill chunk at 32K context, bf16 KV", fontsize=10)
    left.legend(fontsize=8)
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xlabel("plan reuse (dotted: each version's kAuto threshold)")
    right.set_ylabel("union kernel / decode kernel")
    right.set_title("Short chunks at 32K context: where the union kernel wins", fontsize=10)
    right.legend(fontsize=7, ncol=2)
    fig.suptitle("Hopper union-tile prefill kernel by version, H200 (QSA_BENCH_SHARE sweeps)", fontsize=11)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    sys.exit(run_figure(__doc__, "issue7-prefill-reuse.png", load_data, draw))
