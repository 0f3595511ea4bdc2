#!/usr/bin/env python3
"""PyTorch and Triton baselines at the shapes of qsa_bench_gpu, as Google Benchmark JSON.

Baselines (names: baseline_<impl>/<kernel>/<shape>/<dtype>, the shape and dtype parts as in
qsa_bench_gpu, so scripts/compare_bench.py matches them by name):
  baseline_torch/attention   gather K/V through the block table + bf16 matmuls + fp32
                             softmax (P cast to bf16) + sigmoid gate; fp8 KV dequantised after
                             the gather, scales folded into the logits and the output
  baseline_triton/attention  a split-K Triton sparse decode kernel (scripts/bench_triton.py);
                             checked against the torch baseline on every shape, dropped with a
                             message when it fails or disagrees
  baseline_torch/select      gather each request's visible compressed keys + matmul + ReLU +
                             head sum, torch.topk over the block scores
  baseline_torch/projection  torch.nn.functional.linear in bf16 (cuBLAS) for the layer's weights;
                             the context also records a measured 8192^3 bf16 matmul rate

Shapes and conventions repeat harness/bench/gpu/gpu_shapes.hpp (change both together): the
`qwen4-exp` preset; decode batches 1, 8, 64, 256 at contexts 4K, 32K, 128K (a row at position
`context`, seq_len context + 1); prefill chunks 512, 2048, 8192 after the same contexts (fp8
only at chunk 2048). Token ids come from random selections of min(V, K_B) visible blocks,
expanded with the open group's tail; pages of a shuffled pool; inputs rotated over input sets
until a rotation exceeds twice the L2 (at most 256 sets here: Python launches are slow).
Timing: CUDA events around batches of launches after a warm-up rotation, median per launch.

Usage (on the H200; needs torch, and triton for the Triton baseline):
  python3 scripts/bench_baselines.py --out bench-baselines.json [--filter REGEX]
         [--iterations N] [--skip-prefill] [--no-triton]
  python3 scripts/bench_baselines.py --dry-run      # lists the baselines; needs no torch
"""

import argparse
import datetime
import json
import math
import os
import re
import socket
import subprocess
import sys
import time

# ---- the qwen4-exp preset (reference/core/config.cpp) ----
HIDDEN = 2560
H, G, D = 24, 2, 256
HI, DI = 4, 128
BUDGET, RATIO, PAGE = 2048, 4, 1600
KB = BUDGET // RATIO             # selected blocks
W = BUDGET + RATIO - 1           # token-index row width
RPP = PAGE // RATIO              # compressed rows per page
ATTN_SCALE = 1.0 / math.sqrt(D)
SCORE_SCALE = 1.0 / math.sqrt(DI)

# ---- the grid (harness/bench/gpu/gpu_shapes.hpp) ----
DECODE_BATCHES = [1, 8, 64, 256]
CONTEXTS = [4096, 32768, 131072]
PREFILL_CHUNKS = [512, 2048, 8192]
FP8_PREFILL_CHUNK = 2048

POOL_BYTES = 16 * 2**30          # harness/bench/gpu/device_slab.hpp kPoolBytes
MAX_COPIES = 256
MIN_BATCH_SECONDS = 1e-3        # harness/bench/gpu/gpu_timing.hpp kMinBatchSeconds (200e-6 before 2026-12-01)
PREFILL_ROWS_PER_PIECE = 256     # torch attention processes prefill rows in pieces (memory)
SELECT_ROWS_PER_PIECE = 1024


class Shape:
    def __init__(self, name, requests):
        self.name = name
        self.requests = requests  # [(context, query_len)]

    @property
    def rows(self):
        return sum(q for _, q in self.requests)

    @property
    def decode(self):
        return all(q == 1 for _, q in self.requests)


def decode_shape(batch, ctx):
    return Shape(f"decode/b{batch}/ctx{ctx}", [(ctx, 1)] * batch)


def prefill_shape(chunk, ctx):
    return Shape(f"prefill/c{chunk}/ctx{ctx}", [(ctx, chunk)])


# harness/bench/gpu/projection_bench.cpp: (name, in_dim, out_dim); rows = batches and chunks.
PROJECTIONS = [("index_qk_proj", HIDDEN, (HI + 1) * DI), ("q_proj", HIDDEN, 2 * H * D), ("k_proj", HIDDEN, G * D),
               ("o_proj", H * D, HIDDEN)]


class ProjShape:
    def __init__(self, weight, rows, in_dim, out_dim):
        self.name = f"{weight}/t{rows}"
        self.rows, self.in_dim, self.out_dim = rows, in_dim, out_dim
        self.requests = [(0, rows)]
        self.decode = False


def grid(fp8, skip_prefill):
    shapes = [decode_shape(b, c) for c in CONTEXTS for b in DECODE_BATCHES]
    if not skip_prefill:
        shapes += [prefill_shape(n, c) for c in CONTEXTS for n in PREFILL_CHUNKS if not fp8 or n == FP8_PREFILL_CHUNK]
    return shapes


def planned(args):
    """(kernel, impl, shape, dtype) in run order."""
    out = []
    for weight, in_dim, out_dim in PROJECTIONS:
        for rows in DECODE_BATCHES + ([] if args.skip_prefill else PREFILL_CHUNKS):
            shape = ProjShape(weight, rows, in_dim, out_dim)
            name = f"baseline_torch/projection/{shape.name}"
            if not args.filter or re.search(args.filter, name):
                out.append(("projection", "torch", shape, "bf16", name))
    for kernel in ("select", "attention"):
        for dtype in ("bf16", "fp8"):
            for shape in grid(dtype == "fp8", args.skip_prefill):
                impls = ["torch"] + (["triton"] if kernel == "attention" and not args.no_triton else [])
                for impl in impls:
                    name = f"baseline_{impl}/{kernel}/{shape.name}/{dtype}"
                    if args.filter and not re.search(args.filter, name):
                        continue
                    out.append((kernel, impl, shape, dtype, name))
    return out


def attended(p, L):
    v = min((p + 1) // RATIO, L // RATIO)
    return min(v, KB) * RATIO + (p + 1 - ((p + 1) // RATIO) * RATIO)


def working_set_bytes(kernel, shape, e):
    """Bytes one launch must bring from DRAM (rotation sizing only; the reports use the
    cost model's bytes from qsa_bench_gpu's JSON)."""
    if kernel == "projection":
        return (shape.rows * shape.in_dim + shape.out_dim * shape.in_dim + shape.rows * shape.out_dim) * 2
    if kernel == "select":
        keys = sum((c + q) // RATIO * DI * e for c, q in shape.requests)
        return keys + shape.rows * HI * DI * e
    kv = 0
    for c, q in shape.requests:
        L = c + q
        kv += min(L, sum(attended(p, L) for p in range(c, L))) * 2 * G * D * e
    return kv + shape.rows * (3 * H * D * 2 + W * 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="JSON output file (Google Benchmark format)")
    ap.add_argument("--filter", help="regex on the baseline names")
    ap.add_argument("--iterations", type=int, default=int(os.environ.get("QSA_BENCH_ITERATIONS", "10")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("QSA_BENCH_SEED", "20261130")))
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="list the baselines and exit (no torch needed)")
    args = ap.parse_args()
    started = time.time()
    plan = planned(args)
    if args.dry_run:
        for kernel, impl, shape, dtype, name in plan:
            print(f"{name}  rows={shape.rows} requests={len(shape.requests)}")
        print(f"{len(plan)} baselines")
        return 0
    if not args.out:
        ap.error("--out is required unless --dry-run")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("bench_baselines.py: torch is not installed, NOT RUN", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("bench_baselines.py: no CUDA device, NOT RUN", file=sys.stderr)
        return 77
    from bench_torch import run_all  # the torch-dependent half
    result = run_all(plan, args)
    result["context"].update({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "scripts/bench_baselines.py",
        "qsa_commit": commit(),
        "qsa_seed": str(args.seed),
        "qsa_iterations": str(args.iterations),
    })
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)
    failed = [b["name"] for b in result["benchmarks"] if b.get("error_occurred")]
    print(f"bench_baselines.py: {len(result['benchmarks']) - len(failed)} baselines timed, {len(failed)} failed"
          f" in {time.time() - started:.0f} s -> {args.out}", file=sys.stderr)
    return 0


def commit():
    if os.environ.get("QSA_COMMIT"):
        return os.environ["QSA_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
