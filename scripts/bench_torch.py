"""The torch half of scripts/bench_baselines.py: inputs made like qsa_bench_gpu's, the torch
baselines, the Triton baseline's driver and the timing. Imported only on a machine with torch
and a CUDA device."""

import math
import statistics
import sys

import torch

from bench_baselines import (ATTN_SCALE, D, DI, FP8_PREFILL_CHUNK, G, H, HI, KB, MAX_COPIES,  # noqa: F401
                             MIN_BATCH_SECONDS, PAGE, POOL_BYTES, PREFILL_ROWS_PER_PIECE, RATIO, RPP, SCORE_SCALE,
                             SELECT_ROWS_PER_PIECE, W, working_set_bytes)

DEV = torch.device("cuda")
BF16 = torch.bfloat16
FP8 = torch.float8_e4m3fn
TRITON_TOLERANCE = 3e-2  # relative L2 of O against the torch baseline (both round P and O to bf16)


# ---------------------------------------------------------------- inputs


def rotation_bytes():
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    return max(2 * l2, 128 * 2**20)


def rotation_copies(kernel, shape, e):
    need = math.ceil(rotation_bytes() / max(1, working_set_bytes(kernel, shape, e)))
    return max(1, min(need, MAX_COPIES))


def pages_per_request(shape):
    return max(1, max((c + q + PAGE - 1) // PAGE for c, q in shape.requests))


def rows_meta(shape):
    t2r, pos = [], []
    for i, (c, q) in enumerate(shape.requests):
        t2r += [i] * q
        pos += range(c, c + q)
    lens = [c + q for c, q in shape.requests]
    return (torch.tensor(t2r, dtype=torch.int32, device=DEV), torch.tensor(pos, dtype=torch.int64, device=DEV),
            torch.tensor(lens, dtype=torch.int32, device=DEV))


def page_pool(pages_wanted, page_bytes, seed):
    pages = max(1, min(pages_wanted, POOL_BYTES // page_bytes))
    gen = torch.Generator().manual_seed(seed)
    return pages, torch.randperm(pages, generator=gen).to(device=DEV, dtype=torch.int64)


def block_table(shape, perm, pool_pages, copy, ppr, lens):
    R = len(shape.requests)
    i = torch.arange(R, device=DEV)[:, None]
    j = torch.arange(ppr, device=DEV)[None, :]
    bt = perm[((copy * R + i) * ppr + j) % pool_pages]
    mapped = j < ((lens.long() + PAGE - 1) // PAGE)[:, None]
    return torch.where(mapped, bt, -1).to(torch.int32).contiguous()


def random_values(shape, fp8, gen, scale=1.0):
    x = torch.randn(shape, dtype=BF16, device=DEV, generator=gen)
    if scale != 1.0:
        x = x * scale
    return x.to(FP8) if fp8 else x


def random_pool(rows, width, fp8, gen):
    """[rows, *width] random values filled in pieces (a 16 GiB pool must not need 64 GiB of fp32)."""
    out = torch.empty((rows,) + tuple(width), dtype=FP8 if fp8 else BF16, device=DEV)
    step = max(1, (2**28) // math.prod(width))
    for a in range(0, rows, step):
        b = min(rows, a + step)
        out[a:b] = random_values((b - a,) + tuple(width), fp8, gen)
    return out


def visible(pos, lens_rows):
    return torch.minimum((pos + 1) // RATIO, lens_rows // RATIO)


def random_selection(pos, lens_rows, gen):
    """[T, KB] int64: min(V, KB) distinct visible blocks per row in random order, then -1."""
    V = visible(pos, lens_rows)
    vmax = max(1, int(V.max()))
    pieces = []
    for a in range(0, pos.shape[0], SELECT_ROWS_PER_PIECE):
        v = V[a:a + SELECT_ROWS_PER_PIECE]
        r = torch.rand(v.shape[0], vmax, device=DEV, generator=gen)
        r.masked_fill_(torch.arange(vmax, device=DEV)[None, :] >= v[:, None], -1.0)
        vals, ids = r.topk(min(KB, vmax), dim=1)
        ids = torch.where(vals >= 0, ids, -1)
        if ids.shape[1] < KB:
            ids = torch.cat([ids, torch.full((ids.shape[0], KB - ids.shape[1]), -1, device=DEV)], 1)
        pieces.append(ids)
    return torch.cat(pieces)


def expand(ids, pos):
    """Token ids of the selected blocks, then the open group's tail (spec section 6; the same
    id set as the reference's row, in block order)."""
    T = ids.shape[0]
    tok = ids[:, :, None] * RATIO + torch.arange(RATIO, device=DEV)
    tok = torch.where(ids[:, :, None] >= 0, tok, -1).reshape(T, KB * RATIO)
    t_start = ((pos + 1) // RATIO) * RATIO
    j = torch.arange(RATIO - 1, device=DEV)[None, :]
    tail = torch.where(j < (pos + 1 - t_start)[:, None], t_start[:, None] + j, -1)
    return torch.cat([tok, tail], 1).to(torch.int32).contiguous()


class Inputs:
    """Rotation input sets of one (kernel, shape, dtype) and the shared pool."""

    def __init__(self, kernel, shape, dtype, seed):
        self.kernel, self.shape, self.fp8 = kernel, shape, dtype == "fp8"
        e = 1 if self.fp8 else 2
        self.copies = rotation_copies(kernel, shape, e)
        gen = torch.Generator(device=DEV).manual_seed(seed)
        if kernel == "projection":
            self.sets = [{"x": random_values((shape.rows, shape.in_dim), False, gen),
                          "w": random_values((shape.out_dim, shape.in_dim), False, gen)} for _ in range(self.copies)]
            return
        ppr = pages_per_request(shape)
        R = len(shape.requests)
        if kernel == "attention":
            pool_pages, perm = page_pool(self.copies * R * ppr, 2 * PAGE * G * D * e, seed)
            self.k_cache = random_pool(pool_pages * PAGE, (G, D), self.fp8, gen)
            self.v_cache = random_pool(pool_pages * PAGE, (G, D), self.fp8, gen)
        else:
            pool_pages, perm = page_pool(self.copies * R * ppr, RPP * DI * e, seed)
            self.keys = random_pool(pool_pages * RPP, (DI,), self.fp8, gen)
        self.sets = []
        for k in range(self.copies):
            t2r, pos, lens = rows_meta(shape)
            s = {"t2r": t2r, "t2r_long": t2r.long(), "lens": lens,
                 "bt": block_table(shape, perm, pool_pages, k, ppr, lens)}
            s["bt_long"] = s["bt"].long()
            lens_rows = lens.long()[s["t2r_long"]]
            T = shape.rows
            if kernel == "attention":
                s["token_idx"] = expand(random_selection(pos, lens_rows, gen), pos)
                s["q"] = random_values((T, H, D), False, gen)
                s["gate"] = random_values((T, H, D), False, gen)
                s["out"] = torch.empty(T, H, D, dtype=BF16, device=DEV)
                s["gated"] = torch.empty(T, H, D, dtype=BF16, device=DEV)
            else:
                s["visible"] = visible(pos, lens_rows)
                s["vmax"] = int(s["visible"].max())
                s["q"] = random_values((T, HI, DI), self.fp8, gen)
            self.sets.append(s)
        self.torch_gated = None  # the torch baseline's O of set 0, for checking Triton


# ---------------------------------------------------------------- torch baselines


def _attention_rows(q, gate, tok, t2r, lens, bt, k_cache, v_cache, fp8, out, gated):
    n = tok.shape[0]
    ids = tok.long()
    valid = (ids >= 0) & (ids < lens.long()[t2r][:, None])
    ids = torch.where(valid, ids, 0)
    page = torch.gather(bt[t2r], 1, ids // PAGE)
    valid &= page >= 0
    slot = torch.where(valid, page * PAGE + ids % PAGE, 0)
    k = k_cache[slot]  # [n, W, G, D]
    v = v_cache[slot]
    if fp8:  # per-tensor scales are 1 here; a scale would fold into the logits and the output
        k = k.to(BF16)
        v = v.to(BF16)
    s = torch.matmul(q.view(n, G, H // G, D), k.permute(0, 2, 3, 1)).float() * ATTN_SCALE  # [n, G, J, W]
    s.masked_fill_(~valid[:, None, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1).to(BF16)
    o = torch.matmul(p, v.permute(0, 2, 1, 3)).reshape(n, H, D)
    out.copy_(o)
    gated.copy_((o.float() * torch.sigmoid(gate.float())).to(BF16))


def torch_attention(inp, s):
    T = s["token_idx"].shape[0]
    step = T if T <= PREFILL_ROWS_PER_PIECE else PREFILL_ROWS_PER_PIECE
    for a in range(0, T, step):
        b = min(T, a + step)
        _attention_rows(s["q"][a:b], s["gate"][a:b], s["token_idx"][a:b], s["t2r_long"][a:b], s["lens"], s["bt_long"],
                        inp.k_cache, inp.v_cache, inp.fp8, s["out"][a:b], s["gated"][a:b])
    return s["gated"]


def _scores_topk(scores, vis):
    blocks = torch.arange(scores.shape[1], device=DEV)
    scores.masked_fill_(blocks[None, :] >= vis[:, None], float("-inf"))
    vals, ids = torch.topk(scores, min(KB, scores.shape[1]), dim=1)
    return torch.where(vals > float("-inf"), ids, -1), vals


def torch_select(inp, s):
    vmax = s["vmax"]
    b = torch.arange(vmax, device=DEV)
    q = s["q"].to(BF16) if inp.fp8 else s["q"]
    if inp.shape.decode:  # every row its own request: gather each row's keys
        rows = s["bt_long"][s["t2r_long"]][:, b // RPP] * RPP + b % RPP  # [T, vmax]
        kc = inp.keys[rows]
        kc = kc.to(BF16) if inp.fp8 else kc
        scores = torch.matmul(q, kc.transpose(1, 2)).float().relu_().sum(1) * SCORE_SCALE
        return _scores_topk(scores, s["visible"])
    kc = inp.keys[s["bt_long"][0, b // RPP] * RPP + b % RPP]  # one request: keys gathered once
    kc = (kc.to(BF16) if inp.fp8 else kc).t()
    out = None
    for a in range(0, q.shape[0], SELECT_ROWS_PER_PIECE):
        scores = torch.matmul(q[a:a + SELECT_ROWS_PER_PIECE], kc).float().relu_().sum(1) * SCORE_SCALE
        out = _scores_topk(scores, s["visible"][a:a + SELECT_ROWS_PER_PIECE])
    return out


def torch_projection(s):
    return torch.nn.functional.linear(s["x"], s["w"])


def matmul_rate():
    """Dense bf16 matmul FLOP/s (8192^3, cuBLAS through torch): the matrix rate of ../shared/h200.md."""
    n = 8192
    a = torch.randn(n, n, dtype=BF16, device=DEV)
    b = torch.randn(n, n, dtype=BF16, device=DEV)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(8):
        start.record()
        torch.matmul(a, b)
        stop.record()
        stop.synchronize()
        if i >= 2:
            times.append(start.elapsed_time(stop) * 1e-3)
    return 2.0 * n ** 3 / statistics.median(times)


# ---------------------------------------------------------------- Triton baseline


class TritonRunner:
    """One compiled configuration per dtype; the first call tries the configurations in order."""

    CONFIGS = [(64, 4, 2), (64, 4, 1), (32, 4, 1)]  # (BLOCK_N, num_warps, num_stages)

    def __init__(self):
        self.config = {}   # dtype -> config that compiled
        self.broken = {}   # dtype -> message

    def launcher(self, inp, sm_count):
        import bench_triton
        dtype = "fp8" if inp.fp8 else "bf16"
        if dtype in self.broken:
            raise RuntimeError(self.broken[dtype])
        T = inp.shape.rows
        configs = [self.config[dtype]] if dtype in self.config else self.CONFIGS
        last = None
        for bn, nw, ns in configs:
            run = bench_triton.TritonSparseAttention(T, W, H, G, D, PAGE, sm_count, bn, nw, ns)
            s = inp.sets[0]
            try:
                call = self._bind(run, inp)
                call(s)
                torch.cuda.synchronize()
                self.config[dtype] = (bn, nw, ns)
                return call, run
            except Exception as e:  # compile or launch failure: try the next configuration
                last = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        self.broken[dtype] = f"Triton kernel failed in every configuration ({last})"
        raise RuntimeError(self.broken[dtype])

    @staticmethod
    def _bind(run, inp):
        def call(s):
            return run(s["q"], s["gate"], inp.k_cache, inp.v_cache, s["token_idx"], s["t2r"], s["lens"], s["bt"],
                       ATTN_SCALE, 1.0, 1.0, inp.fp8)[1]
        return call


def relative_l2(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ---------------------------------------------------------------- timing and the run


def time_sets(fn, sets, iterations):
    copies = len(sets)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def batch(n):
        start.record()
        for i in range(n):
            fn(sets[i % copies])
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3

    batch(copies)  # warm-up rotation
    rotation = batch(copies)
    n = copies * max(1, math.ceil(MIN_BATCH_SECONDS / rotation)) if rotation > 0 else copies
    per = [batch(n) / n for _ in range(iterations)]
    return {"median": statistics.median(per), "min": min(per), "mean": statistics.mean(per), "copies": copies,
            "launches_per_batch": n, "iterations": iterations}


def copy_bandwidth():
    src = torch.empty(2**30, dtype=torch.uint8, device=DEV).fill_(0x5A)
    dst = torch.empty_like(src)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(12):
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        if i >= 2:
            times.append(start.elapsed_time(stop) * 1e-3)
    return 2 * 2**30 / statistics.median(times)


def entry(name, index, t=None, error=None, label=""):
    e = {"name": name, "family_index": index, "per_family_instance_index": 0, "run_name": name,
         "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1, "time_unit": "us"}
    if error is not None:
        e.update({"error_occurred": True, "error_message": error, "iterations": 0, "real_time": 0.0, "cpu_time": 0.0})
    else:
        e.update({"iterations": t["iterations"], "real_time": t["mean"] * 1e6, "cpu_time": t["mean"] * 1e6,
                  "median_us": t["median"] * 1e6, "min_us": t["min"] * 1e6, "copies": t["copies"],
                  "launches_per_batch": t["launches_per_batch"]})
    if label:
        e["label"] = label
    return e


def run_all(plan, args):
    props = torch.cuda.get_device_properties(0)
    context = {"qsa_gpu": props.name, "qsa_gpu_sms": str(props.multi_processor_count),
               "qsa_gpu_l2_bytes": str(getattr(props, "L2_cache_size", 0)), "torch": torch.__version__,
               "qsa_copy_GBps_torch": f"{copy_bandwidth() / 1e9:.1f}",
               "qsa_matrix_TFLOPps_torch": f"{matmul_rate() / 1e12:.1f}"}
    try:
        import bench_triton
        context.update(bench_triton.versions())
    except ImportError as e:
        context["triton"] = f"unavailable ({e})"
        args.no_triton = True
    benchmarks, inputs, key, triton = [], None, None, TritonRunner()
    for index, (kernel, impl, shape, dtype, name) in enumerate(plan):
        if impl == "triton" and args.no_triton:
            continue
        label = ""
        try:
            if key != (kernel, shape.name, dtype):
                inputs = None
                torch.cuda.empty_cache()
                inputs = Inputs(kernel, shape, dtype, args.seed)
                key = (kernel, shape.name, dtype)
            if impl == "torch" and kernel == "attention":
                fn = lambda s: torch_attention(inputs, s)  # noqa: E731
                inputs.torch_gated = fn(inputs.sets[0]).clone()
            elif impl == "torch" and kernel == "select":
                fn = lambda s: torch_select(inputs, s)  # noqa: E731
            elif impl == "torch":
                fn = torch_projection
            else:
                fn, _ = triton.launcher(inputs, props.multi_processor_count)
                if inputs.torch_gated is None:
                    inputs.torch_gated = torch_attention(inputs, inputs.sets[0]).clone()
                err = relative_l2(fn(inputs.sets[0]), inputs.torch_gated)
                label = f"config {triton.config[dtype]}, relative L2 vs torch {err:.1e}"
                if not err < TRITON_TOLERANCE:
                    raise RuntimeError(f"Triton output differs from the torch baseline: relative L2 {err:.3g}")
            t = time_sets(fn, inputs.sets, args.iterations)
            benchmarks.append(entry(name, index, t, label=label))
            print(f"{name:58s} {t['median'] * 1e6:10.1f} us  (copies {t['copies']})", file=sys.stderr, flush=True)
        except Exception as e:  # one failing baseline (OOM, compile error) must not end the run
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            benchmarks.append(entry(name, index, error=msg))
            print(f"{name:58s} FAILED {msg}", file=sys.stderr, flush=True)
            inputs, key = None, None
            torch.cuda.empty_cache()
    return {"context": context, "benchmarks": benchmarks}
