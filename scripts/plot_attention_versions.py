#!/usr/bin/env python3
"""Plots issue 7's attention decode versions (docs/performance.md) from the
benchmark JSON kept under docs/bench/: the share of the copy bandwidth each
version reached at 64 and 256 rows with a bf16 cache and at 64 rows with an
fp8 cache (context 32K), with vLLM's Triton kernel and the issue's targets
as lines.

Usage: scripts/plot_attention_versions.py [--out FILE.png] [--force]
  (default FILE: docs/figures/issue7-attention-versions.png; an existing
  FILE is replaced only with --force)
Each version's number is the pct_copy_bw counter of its run (the copy
bandwidth measured in that same run); a missing file or bf16 benchmark, or
an existing output without --force, is an error naming it (exit 2); a run
without the fp8 benchmark (the v9 repeats) has no fp8 bar.
"""
import json
import os
import sys

from figure_out import run_figure

BENCH = os.path.join(os.path.dirname(__file__), "..", "docs", "bench")
VERSIONS = [  # (label, JSON file under docs/bench)
    ("v0", "h200-2026-11-30-f93bdd0.json"),
    ("v1", "issue7-versions/h200-2026-11-30-attention-v1-block-phases.json"),
    ("v2", "issue7-versions/h200-2026-11-30-attention-v2-chunked-slots.json"),
    ("v3", "issue7-versions/h200-2026-11-30-attention-v3-per-warp.json"),
    ("v4", "issue7-versions/h200-2026-11-30-attention-v4-lean-addressing.json"),
    ("v5", "issue7-versions/h200-2026-11-30-attention-v5-l2-prefetch.json"),
    ("v6", "h200-2026-11-30-issue7.json"),
    ("v7", "issue7-versions/h200-2026-11-30-attention-v7-8warps-8ids.json"),
    ("v8", "issue7-versions/h200-2026-11-30-attention-v8-row-per-lane-copies.json"),
    ("v9", "h200-2026-11-30-issue7-db3eb09.json"),
    # The same v9 kernel in three later processes (third pass, 40285ba): the spread between runs.
    ("v9 r2", "h200-2026-11-30-issue7-40285ba.json"),
    ("v9 r3", "issue7-versions/h200-2026-11-30-40285ba-repeat-a.json"),
    ("v9 r4", "issue7-versions/h200-2026-11-30-40285ba-repeat-b.json"),
    # v9 launched as a programmatic dependent (fourth pass, 74b9232).
    ("v10", "h200-2026-11-30-issue7-74b9232.json"),
    # v10 with fewer instructions per block and a one-round-trip split merge (fifth pass, bcaa15f).
    ("v11", "h200-2026-11-30-issue7-bcaa15f.json"),
    # fp8 fragments from fp8 rows, SFU softmax with a lagging max (sixth pass, 76e6864).
    ("v12", "issue7-versions/h200-2026-11-30-attention-v12-sfu-softmax-76e6864.json"),
    # v12 with fp8 Q as f16 fragments in mma register order (sixth pass, 90cb4bb).
    ("v13", "h200-2026-11-30-issue7-90cb4bb.json"),
    # Seventh pass: a step's copies in fewer instructions (e55c36a), the fp8 format at compile time
    # and a leaner cross-warp merge (330fd4f), four logit mma chains (551687b); then 551687b in
    # two later processes that ran other benchmarks first (the spread between processes).
    ("v14", "issue7-versions/h200-2026-11-30-attention-v14-copy-issue-e55c36a.json"),
    ("v15", "issue7-versions/h200-2026-11-30-attention-v15-fnuz-epilogue-330fd4f.json"),
    ("v16", "issue7-versions/h200-2026-11-30-attention-v16-chains-551687b.json"),
    ("v16 r2", "issue7-versions/h200-2026-11-30-attention-v16-repeat.json"),
    ("v16 r3", "h200-2026-11-30-issue7-551687b.json"),
]
PANELS = [  # (rows, KV dtype, vLLM label, vLLM %, target label, target %)
    (64, "bf16", "vLLM Triton 68%", 68.0, "target 80%", 80.0),
    (256, "bf16", "vLLM Triton 80%", 80.0, "target 85%", 85.0),
    (64, "fp8", "vLLM Triton 37%", 37.0, "target 65%", 65.0),
]


def pct_copy(path, rows, dtype):
    """The run's pct_copy_bw for the benchmark; None for a missing fp8 one."""
    with open(path) as f:
        benchmarks = json.load(f)["benchmarks"]
    prefix = f"attention/decode/b{rows}/ctx32768/{dtype}/"
    for b in benchmarks:
        if b["name"].startswith(prefix):
            return float(b["pct_copy_bw"])
    if dtype == "fp8":
        return None
    raise KeyError(f"{path} has no {prefix} benchmark")


def load_data():
    data = [[pct_copy(os.path.join(BENCH, f), p[0], p[1]) for _, f in VERSIONS] for p in PANELS]
    return data


def draw(plt, data):
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 3.8), sharey=True)
    labels = [v for v, _ in VERSIONS]
    for ax, panel, values in zip(axes, PANELS, data):
        rows, dtype, vllm_label, vllm, target_label, target = panel
        colors = ["#a1b5d8" if " r" in v else "#4c72b0" for v in labels]  # reruns of v9 and v16 lighter
        ax.bar(labels, [0.0 if v is None else v for v in values], color=colors)
        ax.tick_params(axis="x", labelsize=7, rotation=90)
        ax.axhline(vllm, color="#dd8452", linestyle="--", label=vllm_label)
        ax.axhline(target, color="#55a868", linestyle=":", label=target_label)
        ax.set_title(f"{rows} rows, context 32K, {dtype} KV")
        ax.set_xlabel("version (r2..: the same code rerun in later processes; v9 r3, r4 without fp8)", fontsize=8)
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("% of copy bandwidth (same run)")
    axes[0].set_ylim(0, 100)
    fig.suptitle("Sparse attention decode on an H200: issue 7's versions")
    fig.tight_layout()
    return fig


def main():
    return run_figure(__doc__, "issue7-attention-versions.png", load_data, draw,
                      errors=(OSError, KeyError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
