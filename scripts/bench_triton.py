"""A Triton sparse GQA decode kernel: the baseline `baseline_triton/attention/...` of
scripts/bench_baselines.py (imported only there, and only when triton is present).

Semantics are those of gpu/attention (spec section 7): for row t, KV group g and the
group's query heads, S = (Q_h . K[id]) * scale over the row's valid ids (-1, ids >= L
and unmapped pages skipped), P = softmax(S) in fp32 with P rounded to bf16 before the PV
product, A = sum P V, O = A * sigmoid(gate), A and O stored as bf16.

Design: split-K. Program (t, g, s) loads the group's query heads (padded to 16 rows for
the tensor-core dot) once, walks its share of the row's ids in tiles of BLOCK_N gathered
K/V rows (one contiguous D-vector per id and head), and keeps an online softmax; a second
kernel merges the splits by log-sum-exp and applies the gate. The split count fills the
GPU when a batch is small (batch 1 has only G = 2 groups).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _sparse_attention_partial(
    Q, K, V, IDX, T2R, LENS, BT, ACC, ML,
    W, MAX_PAGES, IDS_PER_SPLIT, SPLITS,
    scale, k_scale, v_scale,
    H: tl.constexpr, G: tl.constexpr, J: tl.constexpr, JP: tl.constexpr, D: tl.constexpr,
    P: tl.constexpr, BLOCK_N: tl.constexpr, FP8: tl.constexpr,
):
    t = tl.program_id(0)
    g = tl.program_id(1)
    s = tl.program_id(2)
    req = tl.load(T2R + t)
    L = tl.load(LENS + req)
    offs_j = tl.arange(0, JP)
    offs_d = tl.arange(0, D)
    jmask = offs_j < J
    head = g * J + offs_j
    q = tl.load(Q + (t * H + head)[:, None] * D + offs_d[None, :], mask=jmask[:, None], other=0.0)
    m_i = tl.full([JP], float("-inf"), tl.float32)
    l_i = tl.zeros([JP], dtype=tl.float32)
    acc = tl.zeros([JP, D], dtype=tl.float32)
    start = s * IDS_PER_SPLIT
    end = tl.minimum(start + IDS_PER_SPLIT, W)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        ids = tl.load(IDX + t * W + offs_n, mask=offs_n < end, other=-1)
        valid = (ids >= 0) & (ids < L)
        safe = tl.where(valid, ids, 0)
        page = tl.load(BT + req * MAX_PAGES + safe // P, mask=valid, other=-1)
        valid = valid & (page >= 0)
        slot = tl.where(valid, page.to(tl.int64) * P + (safe % P), 0)
        kv_off = (slot * G + g)[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv_off, mask=valid[:, None], other=0.0)
        v = tl.load(V + kv_off, mask=valid[:, None], other=0.0)
        if FP8:
            k = (k.to(tl.float32) * k_scale).to(tl.bfloat16)
            v = (v.to(tl.float32) * v_scale).to(tl.bfloat16)
        qk = tl.dot(q, tl.trans(k)) * scale
        qk = tl.where(valid[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(qk - m_use[:, None])
        alpha = tl.exp(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    base = (t * H + head) * SPLITS + s
    tl.store(ACC + base[:, None] * D + offs_d[None, :], acc, mask=jmask[:, None])
    tl.store(ML + base * 2, m_i, mask=jmask)
    tl.store(ML + base * 2 + 1, l_i, mask=jmask)


@triton.jit
def _sparse_attention_merge(ACC, ML, GATE, OUT, GATED, SPLITS, D: tl.constexpr, SP: tl.constexpr):
    row = tl.program_id(0)  # t * H + h
    offs_s = tl.arange(0, SP)
    smask = offs_s < SPLITS
    m = tl.load(ML + (row * SPLITS + offs_s) * 2, mask=smask, other=float("-inf"))
    l = tl.load(ML + (row * SPLITS + offs_s) * 2 + 1, mask=smask, other=0.0)
    m_max = tl.max(m, 0)
    m_use = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.exp(m - m_use)
    l_tot = tl.sum(l * w, 0)
    offs_d = tl.arange(0, D)
    acc = tl.load(ACC + (row * SPLITS + offs_s)[:, None] * D + offs_d[None, :], mask=smask[:, None], other=0.0)
    o = tl.sum(acc * w[:, None], 0)
    o = tl.where(l_tot > 0, o / l_tot, 0.0)
    gate = tl.load(GATE + row * D + offs_d).to(tl.float32)
    tl.store(OUT + row * D + offs_d, o.to(tl.bfloat16))
    tl.store(GATED + row * D + offs_d, (o * tl.sigmoid(gate)).to(tl.bfloat16))


def _next_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


class TritonSparseAttention:
    """Launches for one shape; workspace allocated once (as an engine would)."""

    def __init__(self, T, W, H, G, D, P, sm_count, block_n=64, num_warps=4, num_stages=2):
        self.T, self.W, self.H, self.G, self.D, self.P = T, W, H, G, D, P
        self.block_n, self.num_warps, self.num_stages = block_n, num_warps, num_stages
        # Enough programs for two waves of the SMs, each split at least one tile.
        tiles = (W + block_n - 1) // block_n
        want = max(1, (2 * sm_count + T * G - 1) // (T * G))
        per_split = (tiles + min(want, tiles) - 1) // min(want, tiles)
        self.ids_per_split = per_split * block_n
        self.splits = (W + self.ids_per_split - 1) // self.ids_per_split
        dev = torch.device("cuda")
        self.acc = torch.empty(T * H * self.splits * D, dtype=torch.float32, device=dev)
        self.ml = torch.empty(T * H * self.splits * 2, dtype=torch.float32, device=dev)
        self.out = torch.empty(T, H, D, dtype=torch.bfloat16, device=dev)
        self.gated = torch.empty(T, H, D, dtype=torch.bfloat16, device=dev)

    def __call__(self, q, gate, k_cache, v_cache, token_idx, t2r, seq_lens, block_table, scale, k_scale, v_scale, fp8):
        J = self.H // self.G
        _sparse_attention_partial[(self.T, self.G, self.splits)](
            q, k_cache, v_cache, token_idx, t2r, seq_lens, block_table, self.acc, self.ml,
            self.W, block_table.shape[1], self.ids_per_split, self.splits,
            scale, k_scale, v_scale,
            H=self.H, G=self.G, J=J, JP=max(16, _next_pow2(J)), D=self.D, P=self.P,
            BLOCK_N=self.block_n, FP8=fp8, num_warps=self.num_warps, num_stages=self.num_stages)
        _sparse_attention_merge[(self.T * self.H,)](
            self.acc, self.ml, gate, self.out, self.gated, self.splits,
            D=self.D, SP=max(2, _next_pow2(self.splits)), num_warps=4)
        return self.out, self.gated


def versions():
    return {"triton": triton.__version__}
