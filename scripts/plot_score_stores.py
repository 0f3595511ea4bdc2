#!/usr/bin/env python3
"""Plots the fifteenth pass of issue 7 (docs/performance.md): what kept select's tensor-core scorer
from the speed of a plain read, and the order effect of the full run:
  - left: probes that read the scorer's 512 MiB of keys at 64 rows x 128K (no mma), adding its
    grid, its page table and its 4-byte score stores one at a time, then the stores with cache
    hints; the register scorer's ncu time for comparison;
  - middle: a 512 MiB read stream timed after 16 GiB were freed, against a process that freed
    nothing: the driver's work on freed memory, which the benchmark now waits out;
  - right: select and the decode step, c02612b against df5df5b (the staged scorer with
    evict-last score stores), A/B medians of 6 alternating processes on one machine.
Data: docs/bench/issue7-versions/h200-2026-12-01-store-probes.json and
h200-2026-12-01-ab-c02612b-df5df5b.json (scripts/bench-ab.sh's ab.json).

Usage: scripts/plot_score_stores.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-fifteenth-pass.png; an existing FILE is replaced only with
  --force)
Prints the probes' times, when the read stream was back to its speed after the free, and the
A/B changes. A missing or malformed data file, or an existing output without --force, is an
error naming it (exit 2).
"""
import json
import os
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_medians, run_figure

PROBES = "h200-2026-12-01-store-probes.json"
AB = "h200-2026-12-01-ab-c02612b-df5df5b.json"
SETTLE_MS = 100  # harness/bench/gpu/gpu_env.hpp, kDefaultSettleMs


def read_json(name):
    path = os.path.join(VERSIONS_DIR, name)
    try:
        with open(path) as f:
            return path, json.load(f)
    except (OSError, ValueError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def load_data():
    path, p = read_json(PROBES)
    try:
        probes = [(v["name"], min(v["us"])) for v in p["scorer_like"]["variants"]]
        scorer = min(p["ncu_scorer_b64_ctx131072"]["register_scorer_us"])
        slow = [(float(t), float(us)) for t, us in p["after_free_timeline"]["slow"]["t_ms_us"]]
        control = [(float(t), float(us)) for t, us in p["after_free_timeline"]["control"]["t_ms_us"]]
        before = float(p["after_free_timeline"]["slow"]["before_us"])
    except (KeyError, TypeError, ValueError) as e:
        raise FigureInputError(f"{path}: {e!r} missing or malformed")
    if not probes or not slow:
        raise FigureInputError(f"{path}: no probes or no timeline")
    changes = [(name, a, b, c) for name, (a, b, c) in read_ab_medians(os.path.join(VERSIONS_DIR, AB)).items()]
    for name, us in probes:
        print(f"probe: {name}: {us:.1f} us")
    back = next((t for t, us in slow if us <= 1.02 * before), None)
    print(f"after the 16 GiB free: {slow[0][1]:.1f} us at {slow[0][0]:.1f} ms, back within 2% of "
          f"{before:.1f} us at {back:.1f} ms" if back is not None else "after the free: never back")
    for name, a, b, c in changes:
        print(f"A/B {name}: {a:.2f} -> {b:.2f} us ({c:+.1f}%)")
    return probes, scorer, (slow, control, before), changes


def short(name):
    return name.replace("select/decode/", "select ").replace("select/prefill/", "prefill select ") \
        .replace("step_no_gemm/decode/", "step ").replace("/bf16", "").replace("/fp8", " fp8") \
        .replace("ctx131072", "128K").replace("ctx32768", "32K").replace("/", " ")


def draw(plt, data):
    probes, scorer, (slow, control, before), changes = data
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(18, 6.6), gridspec_kw={"width_ratios": [1.3, 1, 1.1]})
    colors = plt.get_cmap("tab10").colors
    ys = list(range(len(probes)))[::-1]
    bar_colors = [colors[2] if ("evict_last" in n or ".cs" in n) else colors[3] if "stores" in n else colors[0]
                  for n, _ in probes]
    left.barh(ys, [us for _, us in probes], color=bar_colors)
    left.set_yticks(ys)
    left.set_yticklabels([n for n, _ in probes], fontsize=8)
    left.axvline(scorer, color="black", linestyle="--", linewidth=1)
    left.text(scorer, len(probes) - 0.4, f" the register scorer\n (ncu) {scorer:.1f} us", fontsize=8, va="top")
    left.set_xlim(100, max(max(us for _, us in probes), scorer) + 12)
    left.set_xlabel("us per launch (512 MiB of keys)")
    left.set_title("probes of the scorer's loop without its mma")
    mid.plot([t for t, _ in slow], [us for _, us in slow], "o-", color=colors[3], markersize=3,
             label="after 16 GiB were allocated, written and freed")
    mid.plot([t for t, _ in control], [us for _, us in control], "o-", color=colors[0], markersize=3,
             label="nothing freed")
    mid.axhline(before, color="gray", linewidth=0.8)
    mid.axvline(SETTLE_MS, color="black", linestyle="--", linewidth=1, label="the benchmark's wait (100 ms)")
    mid.set_xscale("log")
    mid.set_xlabel("ms after the free returned")
    mid.set_ylabel("us per 512 MiB read")
    mid.set_title("a read stream after a large free")
    mid.legend(fontsize=8, loc="upper right")
    ys = list(range(len(changes)))[::-1]
    right.barh(ys, [c for _, _, _, c in changes], color=[colors[2] if c < 0 else colors[3] for _, _, _, c in changes])
    right.set_yticks(ys)
    right.set_yticklabels([short(n) for n, _, _, _ in changes], fontsize=8)
    for y, (_, a, b, c) in zip(ys, changes):
        right.text(min(c, 0) - 0.3, y, f"{a:.1f} -> {b:.1f} us", fontsize=7, va="center", ha="right")
    right.axvline(0, color="black", linewidth=0.8)
    right.set_xlim(min(c for _, _, _, c in changes) - 7, 2)
    right.set_xlabel("change of the median, c02612b to df5df5b (%)")
    right.set_title("A/B, 6 alternating processes per side")
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-fifteenth-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
