#!/usr/bin/env python3
"""Plots the eleventh pass of issue 7 (docs/performance.md): the tensor-core select scorer,
version by version. Left: each decode benchmark's median against be962f1's median in the same
A/B run (the fma-chain scorer, 0%), for v1..v4 (each measured against be962f1) and v5
(measured against v4, shown chained through v4's change); the dashed line is where select at
64 rows x 128K would meet the issue's target (166 us). Right: the prefill selection's medians
(2048 rows x 32K), log scale. Data: docs/bench/issue7-versions/h200-2026-12-01-ab-*mma*.json.

Usage: scripts/plot_select_mma_versions.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-eleventh-pass.png; an existing FILE is replaced only with
  --force)
Prints each version's change per benchmark. A missing or malformed data file, or an existing
output without --force, is an error naming it (exit 2).
"""
import os
import statistics
import sys

from figure_out import FigureInputError, VERSIONS_DIR, read_ab_runs, run_figure

AGAINST_BASE = [("v1", "h200-2026-12-01-ab-be962f1-mma-v1.json"), ("v2", "h200-2026-12-01-ab-be962f1-mma-v2.json"),
                ("v3", "h200-2026-12-01-ab-be962f1-mma-v3.json"), ("v4", "h200-2026-12-01-ab-be962f1-mma-v4.json")]
V5 = ("v5", "h200-2026-12-01-ab-mma-v4-v5.json")  # against v4
DECODE = [("select/decode/b1/ctx131072/bf16", "1 row x 128K", "tab:green"),
          ("select/decode/b64/ctx32768/bf16", "64 rows x 32K", "tab:orange"),
          ("select/decode/b64/ctx131072/bf16", "64 rows x 128K", "tab:blue"),
          ("select/decode/b256/ctx131072/bf16", "256 rows x 128K", "tab:purple")]
PREFILL = "select/prefill/c2048/ctx32768/bf16"
TARGET_US = 1.3 * 128.0


def medians(path, name):
    """(side a's median, side b's median) over the processes of one ab.json."""
    runs = read_ab_runs(path)
    if name not in runs:
        raise FigureInputError(f"{path} has no benchmark {name}")
    a, b = runs[name]
    if not a or not b:
        raise FigureInputError(f"{path}: {name} has a side without processes")
    return statistics.median(a), statistics.median(b)


def load_data():
    change = {}  # (benchmark, version) -> % against be962f1
    prefill = {}  # version -> median us (be962f1 too)
    for version, name in AGAINST_BASE:
        path = os.path.join(VERSIONS_DIR, name)
        for bench, _, _ in DECODE:
            base, new = medians(path, bench)
            change[(bench, version)] = 100.0 * (new / base - 1.0)
        base, new = medians(path, PREFILL)
        prefill["be962f1"] = base  # the last run, v4's: the committed comparison
        prefill[version] = new
    path = os.path.join(VERSIONS_DIR, V5[1])
    for bench, _, _ in DECODE:
        v4, v5 = medians(path, bench)
        change[(bench, V5[0])] = 100.0 * ((1.0 + change[(bench, "v4")] / 100.0) * v5 / v4 - 1.0)
    v4, v5 = medians(path, PREFILL)
    prefill[V5[0]] = prefill["v4"] * v5 / v4
    base_64, _ = medians(os.path.join(VERSIONS_DIR, AGAINST_BASE[-1][1]), "select/decode/b64/ctx131072/bf16")
    return change, prefill, base_64


def draw(plt, loaded):
    change, prefill, base_64 = loaded
    versions = [v for v, _ in AGAINST_BASE] + [V5[0]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    for bench, label, color in DECODE:
        ys = [change[(bench, v)] for v in versions]
        left.plot(range(len(versions)), ys, marker="o", color=color, label=label)
        print(f"{bench}: " + ", ".join(f"{v} {y:+.1f}%" for v, y in zip(versions, ys)))
    left.axhline(0.0, color="black", linewidth=0.8)
    left.axhline(100.0 * (TARGET_US / base_64 - 1.0), color="tab:red", linestyle="--", linewidth=1,
                 label="target at 64 rows x 128K (166 us)")
    left.set_xticks(range(len(versions)), [v if v != "v5" else "v5 (via v4)" for v in versions])
    left.set_ylabel("median against be962f1 (fma chains), %")
    left.set_title("select decode, bf16 keys: tensor-core versions")
    left.legend(fontsize=8)
    names = ["be962f1"] + versions
    right.bar(range(len(names)), [prefill[n] for n in names], color=["tab:gray"] + ["tab:blue"] * len(versions))
    right.set_yscale("log")
    right.set_xticks(range(len(names)), names, fontsize=8)
    right.set_ylabel("median, us")
    right.set_title("select prefill, 2048 rows x 32K")
    print("prefill: " + ", ".join(f"{n} {prefill[n]:.0f} us" for n in names))
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-eleventh-pass.png", load_data, draw)


if __name__ == "__main__":
    sys.exit(main())
