#!/usr/bin/env python3
"""Turns a copy of the source tree into the measurement build of the thirteenth pass of issue 7
(docs/performance.md): select's top-k kernel stamps clock64 at its phase boundaries, and the GPU
benchmark gains two allocation probes. Never apply it to the working tree: the stamps add a
barrier before each phase boundary and print from the kernel.

  - gpu/select/select_topk.hpp, gpu/select/select.hip: thread 0 of blocks 0-5 of a 64-row top-k
    launch records the cycle counter after a __syncthreads at each boundary (kernel start,
    griddepcontrol.wait returned, sample loaded, its threshold, the gather, the k-th key, the
    winners picked, sorted, written) and prints one "TOPK block ..." line at its 41st and 42nd
    launch, with the radix passes of both selections and the keys gathered. Where the top-k
    takes the row histogram (hist_top_keys, fourteenth pass), "sample" is the histogram's load
    and pick and "thr" is empty;
  - harness/bench/gpu/gpu_main.cpp: QSA_PROBE_ALLOC_GIB=N allocates, writes (hipMemset) and
    frees N GiB before any benchmark; QSA_PROBE_HOLD_GIB=N allocates and writes N GiB and keeps
    them.

Usage: scripts/topk_stamps.py TREE
  e.g. mkdir -p /tmp/stamps && git archive HEAD CMakeLists.txt CMakePresets.json cmake reference
       gpu harness tests | tar -x -C /tmp/stamps && scripts/topk_stamps.py /tmp/stamps
  then build TREE's cuda-bench preset and run
       QSA_BENCH_ITERATIONS=10 qsa_bench_gpu --benchmark_filter=select/decode/b64/ctx131072/bf16/
The TOPK lines are the input of docs/bench/issue7-versions/h200-2026-12-01-topk-phases.json.
A tree where a line this script anchors on has moved or changed is refused by name (exit 2),
and nothing is written then.
"""
import os
import sys

STAMP_FACILITY = """
// ---- measurement build (scripts/topk_stamps.py) ----
__shared__ long long g_stamps[16];
__shared__ int g_passes[4];
__device__ inline void stamp(int i) {
  __syncthreads();
  if (threadIdx.x == 0) g_stamps[i] = clock64();
}
"""

PRINT_STAMPS = """  stamp(8);
  if (threadIdx.x == 0 && blockIdx.x < 6 && a.rows == 64) {
    static __device__ unsigned launches[6];
    const unsigned n = atomicAdd(&launches[blockIdx.x], 1u);
    if (n == 40 || n == 41) {
      const long long* s = g_stamps;
      printf("TOPK block %d launch %u passes %d %d gathered %d | wait %lld sample %lld thr %lld gather %lld "
             "kth %lld pick %lld sort %lld write %lld | total %lld\\n",
             int(blockIdx.x), n, g_passes[0], g_passes[1], g_passes[2], s[1] - s[0], s[2] - s[1], s[3] - s[2],
             s[4] - s[3], s[5] - s[4], s[6] - s[5], s[7] - s[6], s[8] - s[7], s[8] - s[1]);
    }
  }
"""

PROBES = """      for (const char* name : {"QSA_PROBE_ALLOC_GIB", "QSA_PROBE_HOLD_GIB"}) {  // scripts/topk_stamps.py
        const char* gib = std::getenv(name);
        if (gib == nullptr) continue;
        const size_t bytes = static_cast<size_t>(std::atof(gib) * double(1ull << 30));
        void* p = nullptr;
        if (hipMalloc(&p, bytes) != hipSuccess || hipMemset(p, 1, bytes) != hipSuccess ||
            hipDeviceSynchronize() != hipSuccess)
          return 1;
        if (std::string(name) == "QSA_PROBE_ALLOC_GIB" && hipFree(p) != hipSuccess) return 1;
      }
"""

# (file, anchor line, where, text): the text goes after the first line equal to the anchor
# (whitespace included; "last-after": the last such line), or replaces it ("replace": the first;
# "replace-every": each of them).
EDITS = [
    ("gpu/select/select_topk.hpp", "namespace qsa::gpu::select_detail {", "after", STAMP_FACILITY),
    ("gpu/select/select_topk.hpp",
     "  while (st.bucket != st.need && st.pass < kRadixPasses) radix_pass<kThreads>(src, sh, st);", "after",
     "  if (threadIdx.x == 0) {\n    g_passes[0] = g_passes[1];\n    g_passes[1] = st.pass;\n  }\n"),
    ("gpu/select/select_topk.hpp", "  if (tid == 0) sh.count = 0;", "after", "  stamp(2);\n"),
    ("gpu/select/select_topk.hpp",
     "  const uint64_t t = rank_threshold<kThreads>(sample, kTopKSample, sample_rank(visible, k), sh);", "after",
     "  stamp(3);\n"),
    # the histogram path (fourteenth pass): its load and pick take the sample's and threshold's places
    ("gpu/select/select_topk.hpp",
     "  const uint32_t total = pick_bin_of<kThreads>(bins, sh, st, pass_shift(0), (1u << pass_bits(0)) - 1u);",
     "after", "  stamp(2);\n  stamp(3);\n"),
    ("gpu/select/select_topk.hpp", "  const uint32_t n = sh.count;", "replace-every",
     "  stamp(4);\n  const uint32_t n = sh.count;\n  if (threadIdx.x == 0) g_passes[2] = static_cast<int>(n);\n"),
    ("gpu/select/select_topk.hpp",
     "  while (st.bucket != st.need && st.pass < kRadixPasses) radix_pass<kThreads>(gathered, sh, st);", "after",
     "  stamp(5);\n"),
    ("gpu/select/select_topk.hpp", "    radix_top_keys<kThreads>(scores, visible, k, sh);", "after",
     "  stamp(6);\n"),
    ("gpu/select/select_topk.hpp", "    bitonic_sort_desc<kThreads>(sh.keys, n);", "after", "  }\n  stamp(7);\n  {\n"),
    ("gpu/select/select.hip",
     "  wait_for_primary();  // the decode path launches it as a dependent of the scoring kernel", "replace",
     "  if (threadIdx.x == 0) g_stamps[0] = clock64();\n  wait_for_primary();\n  stamp(1);\n"),
    ("gpu/select/select.hip", "  topk_phase<kThreads>(a, t, visible, sh, hist, bins);", "last-after", PRINT_STAMPS),
    ("harness/bench/gpu/gpu_main.cpp", "      qsa::bench::add_gpu_context();", "after", PROBES),
    ("harness/bench/gpu/gpu_main.cpp", "#include <cstdio>", "after", "#include <cstdlib>\n"),
]


class TreeError(Exception):
    pass


def apply(text, path, anchor, where, insert):
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if line == anchor]
    if not hits:
        raise TreeError(f"{path}: no line '{anchor.strip()}' (the code this script instruments has changed)")
    new = insert.rstrip("\n").split("\n")
    if where == "replace-every":
        for i in reversed(hits):
            lines[i:i + 1] = new
        return "\n".join(lines)
    i = hits[-1] if where == "last-after" else hits[0]
    if where == "replace":
        lines[i:i + 1] = new
    else:
        lines[i + 1:i + 1] = new
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1] if len(argv) > 1 and argv[1] in ("-h", "--help") else
              "usage: scripts/topk_stamps.py TREE (see --help)", file=sys.stderr)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    tree = argv[1]
    texts = {}
    try:
        for path, anchor, where, insert in EDITS:
            full = os.path.join(tree, path)
            if full not in texts:
                try:
                    with open(full) as f:
                        texts[full] = f.read()
                except OSError as e:
                    raise TreeError(f"cannot read {full}: {e.strerror or e}")
            texts[full] = apply(texts[full], path, anchor, where, insert)
    except TreeError as e:
        print(f"topk_stamps.py: {e}", file=sys.stderr)
        return 2
    for full, text in texts.items():
        tmp = full + ".stamps-tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, full)
    print(f"topk_stamps.py: instrumented {len(texts)} files under {tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
