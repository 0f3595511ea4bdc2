#!/usr/bin/env python3
"""Record a qsa trace (docs/trace-format.md) of one QSA layer of Hugging Face
transformers' eager Qwen4Exp implementation (transformers >= 5.16,
transformers.models.qwen4_exp).

The model runs a batch of R equal-length requests (no padding): a prefill,
single-token decode steps and a cached multi-token chunk, each forward call
becoming one trace step with R requests. For the recorded layer the script
captures the attention input, the RoPE positions the model used and every
stage output (indexer Q, raw keys, compressed keys, block ids and scores,
token indices, Q/K/V/gate, attention output, gated output, o_proj output).

How values are captured: the recorded attention module, its indexer, the
rotary embedding and the cache's update/update_indexer are wrapped. After the
module has run, the wrapper replays the layer with the module's own
submodules and functions (a transcription of Qwen4ExpTextQSAIndexer.forward
and Qwen4ExpTextAttention.forward of 5.17) on the inputs and cache contents
the module actually saw, and stashes the intermediates. The replay must
reproduce the indexer's mask and the layer's output bit for bit, otherwise
the recording fails (--allow-mismatch only warns), so a transformers version
whose code differs, or a non-eager attention, cannot produce a silently wrong
trace.

Examples:
  record_hf_trace.py --random-config --dtype bfloat16 -o data/hf_bf16.h5
  record_hf_trace.py --random-config --dtype float32 --mrope --ratio 8 -o data/hf_fp32_mrope_r8.h5
  record_hf_trace.py --checkpoint /models/qwen4-exp --layer 3 --prompt-len 4096 -o big.h5
  record_hf_trace.py --selftest       # records tiny traces into a temp dir and checks them
  record_hf_trace.py --dry-run --random-config   # imports and builds the model only
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import tempfile
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsa_trace as qt  # noqa: E402

QSA_LAYER = "qwen_sparse_attention"
LAYER_ALIASES = {"qsa": QSA_LAYER, "linear": "linear_attention", QSA_LAYER: QSA_LAYER,
                 "linear_attention": "linear_attention"}


class RecordError(RuntimeError):
    """A recording that cannot be trusted; the message says why."""


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", metavar="DIR", help="a local Qwen4Exp checkpoint (text or VL)")
    src.add_argument("--random-config", action="store_true", help="a small random-weight Qwen4Exp text model")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=301)
    ap.add_argument("--decode-steps", type=int, default=4)
    ap.add_argument("--decode-chunk", type=int, default=3, help="tokens of the cached chunk step after decode (0: none)")
    ap.add_argument("--mrope", action="store_true",
                    help="3-row positions with distinct t/h/w rows over an image-like span of each prompt")
    ap.add_argument("--ratio", type=int, default=None, help="indexer_compress_ratio (random default 4)")
    ap.add_argument("--budget", type=int, default=None, help="indexer_budget (random default 32)")
    ap.add_argument("--layer", type=int, default=None,
                    help="decoder layer index of the QSA layer to record (default: the first QSA layer)")
    ap.add_argument("--page-size", type=int, default=64, help="trace page size P (not a model setting)")
    ap.add_argument("-o", "--output", metavar="OUT.h5")
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    ap.add_argument("--allow-mismatch", action="store_true",
                    help="warn instead of failing when the replay differs from the module's output")
    ap.add_argument("--dry-run", action="store_true", help="import, build the model, print the plan; no forward")
    ap.add_argument("--selftest", action="store_true", help="record tiny traces into a temp dir and check them")
    g = ap.add_argument_group("random config")
    g.add_argument("--layer-types", default="qsa,qsa",
                   help="comma list of qsa|linear (default qsa,qsa; needs at least one qsa)")
    g.add_argument("--hidden", type=int, default=256)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--kv-heads", type=int, default=2)
    g.add_argument("--head-dim", type=int, default=64)
    g.add_argument("--rotary-dim", type=int, default=32, help="head_dim * partial_rotary_factor")
    g.add_argument("--indexer-heads", type=int, default=2)
    g.add_argument("--indexer-head-dim", type=int, default=64)
    g.add_argument("--rope-theta", type=float, default=1e7)
    g.add_argument("--vocab", type=int, default=512)
    g.add_argument("--hf-init", action="store_true",
                   help="keep transformers' init (norm weights 0, std 0.02) instead of re-drawing the QSA layers' "
                        "projections with std 1/sqrt(fan_in) and norm weights with std 0.1")
    g.add_argument("--bf16-inv-freq", action="store_true",
                   help="with --dtype bfloat16, keep the bf16 inv_freq that model.to(bfloat16) produces "
                        "(default: restore fp32 inv_freq, as from_pretrained(dtype=bfloat16) has)")
    ck = ap.add_argument_group("checkpoint")
    ck.add_argument("--no-truncate", action="store_true",
                    help="load every layer (default: only layers up to the recorded one, which alone affect it)")
    args = ap.parse_args(argv)
    if not args.selftest and not args.dry_run:
        if not args.checkpoint and not args.random_config:
            ap.error("give --checkpoint DIR or --random-config")
        if not args.output:
            ap.error("give -o OUT.h5")
    if args.selftest or (args.dry_run and not args.checkpoint):
        args.random_config = True
    for name in ("requests", "prompt_len"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.decode_steps < 0 or args.decode_chunk < 0:
        ap.error("--decode-steps and --decode-chunk must be >= 0")
    return args


# ---------------------------------------------------------------------------
# Model construction
# ---------------------------------------------------------------------------


def import_hf():
    try:
        import torch
        import transformers
        from transformers.models.qwen4_exp import configuration_qwen4_exp as configuration
        from transformers.models.qwen4_exp import modeling_qwen4_exp as modeling
    except ImportError as exc:
        raise RecordError(f"cannot import torch / transformers.models.qwen4_exp ({exc}); "
                          "this script needs torch and transformers >= 5.16") from exc
    return torch, transformers, configuration, modeling


def default_mrope_section(pairs: int):
    # Interleaved like the released [11, 11, 10]: h and w get pairs // 3 each.
    return [pairs - 2 * (pairs // 3), pairs // 3, pairs // 3]


def random_text_config(args, configuration):
    layer_types = []
    for name in args.layer_types.split(","):
        if name.strip() not in LAYER_ALIASES:
            raise RecordError(f"--layer-types: unknown layer type '{name}' (accepted: qsa, linear)")
        layer_types.append(LAYER_ALIASES[name.strip()])
    if QSA_LAYER not in layer_types:
        raise RecordError("--layer-types needs at least one qsa layer")
    if args.rotary_dim <= 0 or args.rotary_dim % 2 or args.rotary_dim > args.head_dim:
        raise RecordError(f"--rotary-dim {args.rotary_dim} must be even, positive and <= --head-dim {args.head_dim}")
    rope = {"rope_type": "default", "rope_theta": float(args.rope_theta),
            "partial_rotary_factor": args.rotary_dim / args.head_dim,
            "mrope_section": default_mrope_section(args.rotary_dim // 2), "mrope_interleaved": True}
    kw = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=len(layer_types),
              num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
              layer_types=layer_types, rms_norm_eps=1e-6, rope_parameters=rope,
              max_position_embeddings=max(4096, 2 * (args.prompt_len + args.decode_steps + args.decode_chunk)),
              indexer_n_heads=args.indexer_heads, indexer_kv_heads=1, indexer_head_dim=args.indexer_head_dim,
              indexer_budget=args.budget or 32, indexer_compress_ratio=args.ratio or 4,
              hc_count=2, hc_lowrank=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
              shared_expert_intermediate_size=64, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4, ple_layer_ids=[],
              tie_word_embeddings=False, attention_bias=False)
    try:
        return configuration.Qwen4ExpTextConfig(**kw)
    except Exception as exc:  # strict dataclass validation
        raise RecordError(f"transformers rejected the random config: {exc}") from exc


def set_eager(model, config):
    """Eager attention is what this recorder transcribes; the replay check enforces it."""
    if model is not None and hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
            return
        except Exception:
            pass
    config._attn_implementation = "eager"


def reinit_qsa_layers(torch, model, std_norm=0.1):
    # Trained-like scales: unit-variance projections of unit-RMS inputs, and
    # norm weights that differ from 0 so the trace exercises the (1 + w) gains.
    for layer in model.layers:
        attn = getattr(layer, "self_attn", None)
        if attn is None:
            continue
        for lin in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, attn.indexer.index_qk_proj):
            torch.nn.init.normal_(lin.weight, std=1.0 / math.sqrt(lin.weight.shape[1]))
        for norm in (attn.q_norm, attn.k_norm, attn.indexer.q_layernorm, attn.indexer.k_layernorm):
            torch.nn.init.normal_(norm.weight, std=std_norm)


def build_random_model(args, torch, configuration, modeling, device, dtype):
    cfg = random_text_config(args, configuration)
    set_eager(None, cfg)
    torch.manual_seed(args.seed)
    model = modeling.Qwen4ExpTextModel(cfg)  # fp32 on CPU, so one seed gives one model in every dtype
    set_eager(model, cfg)
    if not args.hf_init:
        with torch.no_grad():
            reinit_qsa_layers(torch, model)
    model.to(device)
    if dtype != torch.float32:
        inv = model.rotary_emb.inv_freq.detach().clone()
        orig = model.rotary_emb.original_inv_freq.detach().clone()
        model.to(dtype)
        if not args.bf16_inv_freq:
            model.rotary_emb.inv_freq = inv
            model.rotary_emb.original_inv_freq = orig
    return model.eval(), cfg


def find_text_model(modeling, model):
    for m in model.modules():
        if isinstance(m, modeling.Qwen4ExpTextModel):
            return m
    raise RecordError(f"no Qwen4ExpTextModel inside {type(model).__name__}")


def load_checkpoint(args, torch, transformers, modeling, device, dtype):
    cfg = transformers.AutoConfig.from_pretrained(args.checkpoint)
    text_cfg = cfg.text_config if hasattr(cfg, "text_config") and cfg.text_config is not None else cfg
    if args.ratio:
        text_cfg.indexer_compress_ratio = args.ratio
    if args.budget:
        text_cfg.indexer_budget = args.budget
    types = list(text_cfg.layer_types)
    layer = first_qsa_layer(types) if args.layer is None else args.layer
    if not 0 <= layer < len(types) or types[layer] != QSA_LAYER:
        raise RecordError(f"--layer {layer}: not a QSA layer (layer_types: {types})")
    if not args.no_truncate:
        text_cfg.num_hidden_layers = layer + 1
        text_cfg.layer_types = types[:layer + 1]
        text_cfg.ple_layer_ids = [i for i in (text_cfg.ple_layer_ids or []) if i <= layer + 1]
    cls = modeling.Qwen4ExpForConditionalGeneration if getattr(cfg, "model_type", "") == "qwen4_exp" \
        else modeling.Qwen4ExpForCausalLM
    kw = dict(config=cfg, attn_implementation="eager", output_loading_info=True)
    try:
        model, info = cls.from_pretrained(args.checkpoint, dtype=dtype, **kw)
    except TypeError:
        model, info = cls.from_pretrained(args.checkpoint, torch_dtype=dtype, **kw)
    missing = [k for k in info.get("missing_keys", []) if "visual" not in k and "lm_head" not in k]
    if missing:
        raise RecordError(f"the checkpoint lacks {len(missing)} weights the recorded layers need, e.g. {missing[:5]}")
    text = find_text_model(modeling, model)
    set_eager(model, text.config)
    return text.to(device).eval(), text.config, layer


def first_qsa_layer(types):
    for i, t in enumerate(types):
        if t == QSA_LAYER:
            return i
    raise RecordError(f"the model has no {QSA_LAYER} layer (layer_types: {list(types)})")


# ---------------------------------------------------------------------------
# Capture and replay of one layer
# ---------------------------------------------------------------------------


class LayerRecorder:
    """Wraps the recorded layer; after every forward call `pop()` returns its
    captures as numpy arrays ([B, T, ...] per tensor)."""

    def __init__(self, torch, modeling, text_model, layer_idx, allow_mismatch=False):
        self.torch, self.modeling = torch, modeling
        self.attn = text_model.layers[layer_idx].self_attn
        self.layer_idx = layer_idx
        self.rotary = text_model.rotary_emb
        self.rope = modeling.apply_rotary_pos_emb
        self.eager = modeling.eager_attention_forward
        self.allow_mismatch = allow_mismatch
        self.active = False
        self.current = {}
        self.records = []
        self.rope_positions = None
        self.patched_cache_cls = None
        self._orig = {}
        self.warnings = []

    # -- installation --
    def install(self):
        attn, idx, rot = self.attn, self.attn.indexer, self.rotary
        self._orig["attn"], self._orig["indexer"], self._orig["rotary"] = attn.forward, idx.forward, rot.forward
        attn.forward, idx.forward, rot.forward = self._attn_forward, self._indexer_forward, self._rotary_forward

    def uninstall(self):
        for mod in (self.attn, self.attn.indexer, self.rotary):
            mod.__dict__.pop("forward", None)
        if self.patched_cache_cls is not None:
            for name in ("update", "update_indexer"):
                own = self._orig.get(name + "_own")
                if own is not None:
                    setattr(self.patched_cache_cls, name, own)
                else:
                    delattr(self.patched_cache_cls, name)
            self.patched_cache_cls = None

    def _patch_cache(self, cache):
        cls = type(cache)
        if self.patched_cache_cls is cls:
            return
        if self.patched_cache_cls is not None:
            raise RecordError("the model switched cache classes between steps")
        for name, layer_pos in (("update", 2), ("update_indexer", 1)):
            if not hasattr(cls, name):
                raise RecordError(f"{cls.__name__} has no {name}(); this transformers version is not supported")
            orig = getattr(cls, name)
            self._orig[name + "_own"] = cls.__dict__.get(name)  # restored exactly by uninstall()

            def spy(cache_self, *a, _orig=orig, _name=name, _pos=layer_pos, **k):
                out = _orig(cache_self, *a, **k)
                layer = a[_pos] if len(a) > _pos else k.get("layer_idx")
                if self.active and layer == self.layer_idx:
                    self.current[_name] = out
                return out

            setattr(cls, name, spy)
        self.patched_cache_cls = cls

    # -- wrappers --
    def _rotary_forward(self, x, position_ids, *a, **k):
        self.rope_positions = position_ids.detach().clone()
        return self._orig["rotary"](x, position_ids, *a, **k)

    def _indexer_forward(self, hidden_states, position_embeddings, attention_mask, past_key_values, *a, **k):
        mask = self._orig["indexer"](hidden_states, position_embeddings, attention_mask, past_key_values, *a, **k)
        if self.active:
            self.current["indexer_mask"] = mask
        return mask

    def _attn_forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, **kwargs):
        if past_key_values is not None:
            self._patch_cache(past_key_values)
        self.current = {}
        self.active = True
        try:
            out, weights = self._orig["attn"](hidden_states, position_embeddings, attention_mask,
                                              past_key_values=past_key_values, **kwargs)
        finally:
            self.active = False
        with self.torch.no_grad():
            self.records.append(self._replay(hidden_states, position_embeddings, attention_mask,
                                             past_key_values is not None, out))
        return out, weights

    def pop(self):
        if len(self.records) != 1:
            raise RecordError(f"expected one call of layer {self.layer_idx} per forward, got {len(self.records)}")
        rec = self.records.pop()
        if self.rope_positions is None:
            raise RecordError("the rotary embedding was not called")
        rec["rope_positions"] = self.rope_positions[..., -rec["T"]:].cpu().numpy().astype(np.int64)
        return rec

    # -- replay: Qwen4ExpTextQSAIndexer.forward and Qwen4ExpTextAttention.forward (5.17) --
    def _check(self, what, replay, real):
        torch = self.torch
        if replay.shape == real.shape and torch.equal(replay, real):
            return
        diff = (replay.float() - real.float()).abs().max().item() if replay.shape == real.shape else float("nan")
        msg = (f"layer {self.layer_idx}: the replayed {what} differs from the module's (shapes "
               f"{list(replay.shape)} / {list(real.shape)}, max |diff| {diff:.3g}); transformers' code differs "
               "from the 5.17 transcription or attention is not eager")
        if not self.allow_mismatch:
            raise RecordError(msg)
        self.warnings.append(msg)

    def _replay(self, hidden, position_embeddings, attention_mask, cached, real_out):
        torch, attn, rope = self.torch, self.attn, self.rope
        idx = attn.indexer
        B, T, _ = hidden.shape
        L = attention_mask.shape[-1]
        r, d_i, kb = idx.compress_ratio, idx.index_head_dim, idx.block_topk
        full_cos, full_sin = position_embeddings
        cur_cos, cur_sin = full_cos[:, -T:, :], full_sin[:, -T:, :]

        # indexer
        qk = idx.index_qk_proj(hidden)
        q_i, token_k = torch.split(qk, [idx.index_n_heads * d_i, idx.index_kv_heads * d_i], dim=-1)
        q_i = q_i.reshape(B, T, -1, d_i)
        raw_cur = token_k.reshape(B, T, -1, d_i).squeeze(2)
        q_i = rope(idx.q_layernorm(q_i), cos=cur_cos, sin=cur_sin, unsqueeze_dim=2)
        raw_all = self.current.get("update_indexer") if cached else raw_cur
        if raw_all is None:
            raise RecordError("the cache's update_indexer was not called for the recorded layer")
        self._check("current raw keys in the cache", raw_all[:, -T:], raw_cur)
        visible = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0

        width = idx.token_budget + r - 1
        sel = torch.full((B, T, width), -1, dtype=torch.int32, device=hidden.device)
        block_ids = np.full((B, T, kb), -1, dtype=np.int32)
        block_scores = np.full((B, T, kb), -np.inf, dtype=np.float32)
        comp = []  # (b, t, block, key)
        for b in range(B):
            for t in range(T):
                vis = torch.nonzero(visible[b, 0, t], as_tuple=False).flatten()
                p = L - T + t
                if vis.numel() != p + 1 or not torch.equal(vis.cpu(), torch.arange(p + 1)):
                    raise RecordError(f"request {b} row {t} (p = {p}) sees {vis.numel()} tokens, not 0..{p}: "
                                      "padded or packed batches are not supported")
                ncb = vis.shape[-1] // r
                if ncb > 0:
                    bti = vis[: ncb * r].view(ncb, r)
                    groups = raw_all[b].index_select(0, bti.flatten()).view(*bti.shape, d_i)
                    pooled = idx.k_layernorm(groups.float().mean(dim=1).to(raw_all.dtype))
                    starts = bti[:, 0]
                    bkeys = rope(pooled.unsqueeze(1), cos=full_cos[b].index_select(0, starts),
                                 sin=full_sin[b].index_select(0, starts)).squeeze(1)
                    scores = torch.matmul(q_i[b, t].float(), bkeys.float().transpose(-1, -2)).transpose(-1, -2)
                    scores = torch.relu(scores).sum(dim=-1) / math.sqrt(d_i)
                    top = scores.topk(min(kb, ncb), dim=0)
                    chosen = top.indices
                    selected = bti.index_select(0, chosen).flatten()
                    # Block row k of bti holds tokens k*r .. k*r+r-1 (checked above), so its index is the block id.
                    block_ids[b, t, : chosen.numel()] = chosen.cpu().numpy()
                    block_scores[b, t, : chosen.numel()] = top.values.float().cpu().numpy()
                    if (p + 1) % r == 0:
                        comp.append((b, t, ncb - 1, bkeys[ncb - 1].float().cpu().numpy()))
                else:
                    selected = torch.tensor([], device=hidden.device)
                tail = vis[ncb * r:]
                selected = torch.cat([selected, tail]).to(torch.int32)
                sel[b, t, : selected.numel()] = selected
        sel_mask = torch.zeros((B, T, L + 1), device=attention_mask.device, dtype=torch.bool)
        sel_mask = sel_mask.scatter(-1, torch.where(sel >= 0, sel, L).long(), True)[..., :L].unsqueeze(1)
        if attention_mask.is_floating_point():
            sel_mask = torch.where(sel_mask, attention_mask.new_zeros(()), torch.finfo(attention_mask.dtype).min)
        if "indexer_mask" not in self.current:
            raise RecordError("the recorded layer's indexer was not called")
        self._check("indexer selection mask", sel_mask, self.current["indexer_mask"])

        # main attention
        if attention_mask.is_floating_point():
            combined = attention_mask + sel_mask
        else:
            combined = attention_mask & sel_mask
        d = attn.head_dim
        q, gate = torch.chunk(attn.q_proj(hidden).view(B, T, -1, d * 2), 2, dim=-1)
        gate = gate.reshape(B, T, -1)
        q = attn.q_norm(q.view(B, T, -1, d)).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(hidden).view(B, T, -1, d)).transpose(1, 2)
        v = attn.v_proj(hidden).view(B, T, -1, d).transpose(1, 2)
        q, k = rope(q, k, cur_cos, cur_sin)
        if cached:
            if "update" not in self.current:
                raise RecordError("the cache's update was not called for the recorded layer")
            k_all, v_all = self.current["update"]
            self._check("current keys in the cache", k_all[:, :, -T:], k)
            self._check("current values in the cache", v_all[:, :, -T:], v)
        else:
            k_all, v_all = k, v
        a, _ = self.eager(attn, q, k_all, v_all, combined, dropout=0.0, scaling=attn.scaling)
        gated = a.reshape(B, T, -1).contiguous() * torch.sigmoid(gate)
        out = attn.o_proj(gated)
        self._check("layer output", out, real_out)

        f = lambda x: x.detach().float().cpu().numpy()  # noqa: E731  (bf16 -> f32 is exact)
        return {"T": T, "L": L, "hidden": f(hidden), "index_q": f(q_i), "raw_keys": f(raw_cur),
                "q": f(q.transpose(1, 2)), "k": f(k.transpose(1, 2)), "v": f(v.transpose(1, 2)),
                "gate": f(gate.view(B, T, -1, d)), "attn": f(a.view(B, T, -1, d)),
                "gated": f(gated.view(B, T, -1, d)), "out": f(real_out), "token_idx": sel.cpu().numpy(),
                "block_ids": block_ids, "block_scores": block_scores, "comp": comp}


# ---------------------------------------------------------------------------
# Positions, trace config, weights
# ---------------------------------------------------------------------------


class RopePlan:
    """RoPE positions (t, h, w) of request-relative position p. Text-only: three
    equal rows. --mrope: an image-like span of gh x gw tokens per request
    (t fixed, h = row, w = column), after which positions resume at
    span start + max(gh, gw), as Qwen-VL numbers tokens after an image."""

    def __init__(self, mrope: bool, requests: int, prompt_len: int):
        self.spans = []
        for i in range(requests):
            start, gh, gw = 16 + 8 * i, 6, 8
            while mrope and gh > 1 and start + gh * gw >= prompt_len:
                gh -= 1
            ok = mrope and start + gh * gw < prompt_len and gh > 1
            self.spans.append((start, gh, gw) if ok else None)
        if mrope and not any(self.spans):
            raise RecordError(f"--mrope needs --prompt-len > 40 to fit an image-like span (got {prompt_len})")

    def rows(self, req: int, p: np.ndarray) -> np.ndarray:
        out = np.stack([p, p, p]).astype(np.int64)
        span = self.spans[req]
        if span is None:
            return out
        s, gh, gw = span
        n = gh * gw
        inside = (p >= s) & (p < s + n)
        k = p - s
        out[0] = np.where(inside, s, out[0])
        out[1] = np.where(inside, s + k // gw, out[1])
        out[2] = np.where(inside, s + k % gw, out[2])
        after = p >= s + n
        shifted = p - n + max(gh, gw)
        for row in range(3):
            out[row] = np.where(after, shifted, out[row])
        return out


def hf_mrope_axes(section, pairs):
    """The axis (0 t, 1 h, 2 w) each frequency pair gets in
    Qwen4ExpTextRotaryEmbedding.recomposition_frequencies."""
    axes = [0] * pairs
    for dim, offset in ((1, 1), (2, 2)):
        for j in range(offset, min(section[dim] * 3, pairs), 3):
            axes[j] = dim
    return axes


def trace_mrope_section(section, pairs):
    """A section summing to pairs (what the reference requires) that assigns
    every pair the axis transformers assigns it."""
    want = hf_mrope_axes(section, pairs)
    for h in range(pairs + 1):
        for w in range(pairs + 1 - h):
            if hf_mrope_axes([pairs - h - w, h, w], pairs) == want:
                return [pairs - h - w, h, w]
    raise RecordError(f"mrope_section {list(section)} has no equivalent summing to {pairs}")


def trace_config(torch, text_model, attn, dtype, page_size):
    idx, rot = attn.indexer, text_model.rotary_emb
    hf = attn.config
    rotary_dim = 2 * rot.inv_freq.numel()
    prf = (hf.rope_parameters or {}).get("partial_rotary_factor", 1.0)
    if rotary_dim != int(attn.head_dim * prf):
        raise RecordError(f"rotary inv_freq has {rot.inv_freq.numel()} entries, expected head_dim * "
                          f"partial_rotary_factor / 2 = {int(attn.head_dim * prf) // 2}")
    if rot.rope_type != "default" or float(getattr(rot, "attention_scaling", 1.0)) != 1.0:
        raise RecordError(f"rope_type '{rot.rope_type}' (scaling {rot.attention_scaling}) is not plain RoPE")
    theta = float((hf.rope_parameters or {}).get("rope_theta", getattr(hf, "rope_theta", float("nan"))))
    if not math.isfinite(theta):
        raise RecordError("the config gives no rope_theta (rope_parameters['rope_theta'])")
    eps = {float(m.eps) for m in (attn.q_norm, attn.k_norm, idx.q_layernorm, idx.k_layernorm)}
    if len(eps) != 1:
        raise RecordError(f"the four norms of the layer use different eps {sorted(eps)}")
    for lin in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, idx.index_qk_proj):
        if lin.bias is not None:
            raise RecordError("attention biases are not part of the trace format")
    c = qt.Config(hidden_size=hf.hidden_size, num_heads=hf.num_attention_heads, num_kv_heads=hf.num_key_value_heads,
                  head_dim=attn.head_dim, rotary_dim=rotary_dim, rope_theta=theta,
                  mrope_section=trace_mrope_section(list(rot.mrope_section), rotary_dim // 2), rope_style="neox",
                  rms_norm_eps=eps.pop(), indexer_heads=idx.index_n_heads, indexer_kv_heads=idx.index_kv_heads,
                  indexer_head_dim=idx.index_head_dim, budget=idx.token_budget, compress_ratio=idx.compress_ratio,
                  page_size=page_size, speculative_tokens=0, score_scale="inv_sqrt_dim", fp8_flavor="e4m3fn",
                  count_column=0, kv_dtype="bf16", k_scale=1.0, v_scale=1.0, indexer_dtype="bf16",
                  octave_window=64, octave_sinks=4)
    # RotaryEmbedding.forward: inv_freq.float() @ positions.float() in fp32; a bf16 buffer
    # (model.to(bfloat16)) contributes bf16-rounded frequencies.
    angle = "fp32_bf16_inv_freq" if rot.inv_freq.dtype == torch.bfloat16 else "fp32"
    if rot.inv_freq.dtype not in (torch.float32, torch.bfloat16):
        raise RecordError(f"rotary inv_freq has dtype {rot.inv_freq.dtype}; only float32 and bfloat16 are modelled")
    if dtype == torch.float32:
        c.apply_profile("custom")
        c.round_storage, c.angle, c.cos_sin, c.rope_per_op_rounding = 0, angle, "fp32", 0
        c.round_logits_bf16, c.p_rounding, c.round_sigmoid_bf16 = 0, "none", 0
    else:
        c.apply_profile("hf-eager")
        if angle != "fp32":
            c.apply_profile("custom")
            c.angle = angle
    c.validate()
    return c, check_inv_freq(rot.inv_freq, theta, rotary_dim)


def check_inv_freq(inv_freq, theta, rotary_dim):
    """The reference rebuilds inv_freq as f32(1 / f32(theta^(2j/R))); say so if the model's differs."""
    got = inv_freq.detach().float().cpu().numpy().astype(np.float64)
    exps = (np.arange(0, rotary_dim, 2, dtype=np.float32) / np.float32(rotary_dim)).astype(np.float64)
    want = np.float32(1.0) / np.power(theta, exps).astype(np.float32)
    if str(inv_freq.dtype) == "torch.bfloat16":
        want = qt.round_bf16(want)
    bad = int(np.sum(got != want.astype(np.float64)))
    return "" if not bad else (f"{bad} of {got.size} inv_freq values differ from f32(1/f32(theta^(2j/R))) "
                               f"(max rel {np.max(np.abs(got / want - 1)):.2g})")


def trace_weights(attn):
    idx = attn.indexer
    f = lambda m: m.weight.detach().float().cpu().numpy()  # noqa: E731  bf16 -> f32 is exact
    return qt.Weights(index_qk_proj=f(idx.index_qk_proj), index_q_norm=f(idx.q_layernorm),
                      index_k_norm=f(idx.k_layernorm), q_proj=f(attn.q_proj), k_proj=f(attn.k_proj),
                      v_proj=f(attn.v_proj), q_norm=f(attn.q_norm), k_norm=f(attn.k_norm), o_proj=f(attn.o_proj))


def make_step(name, rec, past, cfg: qt.Config, pages_per_req, mrope):
    B, T = rec["hidden"].shape[:2]
    P, r = cfg.page_size, cfg.compress_ratio
    seq_len = past + T
    if rec["L"] != seq_len:
        raise RecordError(f"step '{name}': the mask covers {rec['L']} keys, expected {seq_len}")
    table = np.full((B, pages_per_req), -1, dtype=np.int32)
    for i in range(B):
        n = -(-seq_len // P)
        table[i, :n] = i * pages_per_req + np.arange(n)
    pos3 = rec["rope_positions"]  # [3, B, T]
    positions = pos3.reshape(3, B * T) if mrope else pos3[0].reshape(B * T)
    if not mrope and not (np.array_equal(pos3[0], pos3[1]) and np.array_equal(pos3[0], pos3[2])):
        raise RecordError(f"step '{name}': the model used distinct t/h/w positions without --mrope")
    flat = lambda x: x.reshape((B * T,) + x.shape[2:])  # noqa: E731  request-major rows
    out = {k: flat(rec[k]) for k in ("index_q", "raw_keys", "q", "k", "v", "gate", "attn", "gated", "out",
                                     "token_idx", "block_ids", "block_scores")}
    rows_per_page = P // r
    comp = rec["comp"]
    out["comp_tokens"] = np.asarray([b * T + t for b, t, _, _ in comp], dtype=np.int32)
    out["comp_blocks"] = np.asarray([blk for _, _, blk, _ in comp], dtype=np.int64)
    out["comp_slots"] = np.asarray([int(table[b, blk // rows_per_page]) * rows_per_page + blk % rows_per_page
                                    for b, _, blk, _ in comp], dtype=np.int64)
    out["comp_keys"] = (np.stack([key for _, _, _, key in comp]) if comp
                        else np.zeros((0, cfg.indexer_head_dim), dtype=np.float32))
    step = qt.Step(name=name, hidden=flat(rec["hidden"]), positions=positions.astype(np.int64),
                   query_start_loc=(np.arange(B + 1) * T).astype(np.int32),
                   seq_lens=np.full(B, seq_len, dtype=np.int32), block_table=table, outputs=out)
    check_selection(step, cfg, past, T)
    return step


def check_selection(step, cfg: qt.Config, past, T):
    """token_idx must be the spec's expansion of block_ids (HF's own order), and
    each row must select min(V, K_B) blocks."""
    kb, r = cfg.blocks_budget(), cfg.compress_ratio
    ids, tok = step.outputs["block_ids"], step.outputs["token_idx"]
    for row in range(ids.shape[0]):
        p = past + row % T
        valid = [int(x) for x in ids[row] if x >= 0]
        if len(valid) != min((p + 1) // r, kb) or len(set(valid)) != len(valid):
            raise RecordError(f"step '{step.name}' row {row}: {len(valid)} blocks selected, expected "
                              f"{min((p + 1) // r, kb)} distinct")
        if not np.array_equal(tok[row], qt.expand_tokens(cfg, valid, p)):
            raise RecordError(f"step '{step.name}' row {row}: token indices are not the expansion of block ids")


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


def setup_torch(torch, args):
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RecordError("--device cuda but torch sees no GPU")
    # fp32 matmuls in true fp32 (TF32 would change fp32 results), and bf16 GEMMs
    # without reduced-precision split-K reductions.
    torch.set_float32_matmul_precision("highest")
    for setting in ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
                    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction"):
        obj, attr = setting.rsplit(".", 1)
        try:
            setattr(eval(obj, {"torch": torch}), attr, False)
        except Exception:
            pass
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    return device, dtype


def record(args):
    torch, transformers, configuration, modeling = import_hf()
    device, dtype = setup_torch(torch, args)
    if args.checkpoint:
        model, hf_cfg, layer = load_checkpoint(args, torch, transformers, modeling, device, dtype)
    else:
        model, hf_cfg = build_random_model(args, torch, configuration, modeling, device, dtype)
        layer = first_qsa_layer(hf_cfg.layer_types) if args.layer is None else args.layer
        if not 0 <= layer < len(hf_cfg.layer_types) or hf_cfg.layer_types[layer] != QSA_LAYER:
            raise RecordError(f"--layer {layer}: not a QSA layer (layer_types: {list(hf_cfg.layer_types)})")
    attn = model.layers[layer].self_attn
    cfg, inv_note = trace_config(torch, model, attn, dtype, args.page_size)
    impl = getattr(model.config, "_attn_implementation", None)
    versions = f"transformers {transformers.__version__} / torch {torch.__version__}"
    gpu = torch.cuda.get_device_name(0) if str(device).startswith("cuda") else "cpu"
    print(f"model: {versions}, {args.dtype} on {gpu}, attention '{impl}', layer {layer} of "
          f"{list(hf_cfg.layer_types)}, inv_freq {model.rotary_emb.inv_freq.dtype}")
    if inv_note:
        print(f"warning: {inv_note}")
    steps_plan = [("prefill", args.prompt_len)] + [(f"decode {i}", 1) for i in range(args.decode_steps)]
    if args.decode_chunk:
        steps_plan.append(("chunk", args.decode_chunk))
    total = sum(n for _, n in steps_plan)
    pages_per_req = -(-total // cfg.page_size)
    plan = RopePlan(args.mrope, args.requests, args.prompt_len)
    if args.dry_run:
        print(f"dry run: would record {len(steps_plan)} steps {[n for n, _ in steps_plan]} of "
              f"{args.requests} requests, {total} tokens each, pages of {cfg.page_size}")
        print("trace config: " + ", ".join(f"{k}={getattr(cfg, k)}" for k in qt.CONFIG_ATTRS))
        return None

    rec = LayerRecorder(torch, modeling, model, layer, args.allow_mismatch)
    rec.install()
    gen = torch.Generator().manual_seed(args.seed + 1)
    steps, cache, past = [], None, 0
    try:
        with torch.no_grad():
            for name, T in steps_plan:
                ids = torch.randint(0, hf_cfg.vocab_size, (args.requests, T), generator=gen)
                p = np.arange(past, past + T)
                rows = np.stack([plan.rows(i, p) for i in range(args.requests)], axis=1)  # [3, R, T]
                text = np.broadcast_to(p, (args.requests, T))[None]
                pos4 = torch.from_numpy(np.concatenate([text, rows]).astype(np.int64)).to(device)
                out = model(input_ids=ids.to(device), position_ids=pos4, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                if cache is None:
                    raise RecordError("the model returned no cache")
                r = rec.pop()
                if not np.array_equal(r["rope_positions"], rows):
                    raise RecordError(f"step '{name}': RoPE used other positions than the ones passed")
                steps.append(make_step(name, r, past, cfg, pages_per_req, args.mrope))
                past += T
    finally:
        rec.uninstall()
    for w in rec.warnings:
        print(f"warning: {w}")

    trace = qt.Trace(config=cfg, weights=trace_weights(attn), steps=steps,
                     geometry=qt.Geometry(args.requests * pages_per_req, args.requests * pages_per_req),
                     producer="record_hf_trace.py", producer_version=versions, seed=args.seed,
                     description=(f"{shlex.join(sys.argv)} | {args.dtype} on {gpu}, attention {impl}, layer "
                                  f"{layer}, inv_freq {model.rotary_emb.inv_freq.dtype}, TF32 off, bf16 "
                                  f"reduced-precision reductions off"))
    qt.write_trace(trace, args.output, overwrite=args.force)
    summarize(trace, args.output)
    return trace


def summarize(trace, path):
    c = trace.config
    print(f"wrote {path}: {len(trace.steps)} steps, profile {c.profile} (angle {c.angle}, cos_sin {c.cos_sin}), "
          f"K {c.budget}, r {c.compress_ratio}, page {c.page_size}, mrope {list(c.mrope_section)}")
    for s in trace.steps:
        ids = s.outputs["block_ids"]
        full = int(np.sum(np.all(ids >= 0, axis=1)))
        print(f"  {s.name:>9}: T {s.num_tokens:4d}, R {s.num_reqs}, seq_lens {list(map(int, s.seq_lens))}, "
              f"positions {'x'.join(map(str, np.shape(s.positions)))}, rows at full budget {full}, "
              f"compressed rows {len(s.outputs['comp_tokens'])}")


def selftest(args):
    """Tiny recordings on the chosen device, read back and checked."""
    with tempfile.TemporaryDirectory() as d:
        cases = [("float32", False, 4), ("bfloat16", True, 4), ("float32", True, 8)]
        for dtype, mrope, ratio in cases:
            a = parse_args(["--random-config", "--dtype", dtype, "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                            "--head-dim", "32", "--rotary-dim", "16", "--indexer-heads", "2",
                            "--indexer-head-dim", "32", "--budget", "16", "--ratio", str(ratio), "--prompt-len", "45",
                            "--decode-steps", "2", "--decode-chunk", "3", "--page-size", "16", "--seed", "5",
                            "-o", os.path.join(d, f"{dtype}_{mrope}_{ratio}.h5")]
                           + (["--mrope"] if mrope else []) + (["--device", args.device] if args.device else []))
            tr = record(a)
            back = qt.read_trace(a.output)
            diffs = qt.trace_differences(tr, back)
            if diffs:
                raise RecordError(f"selftest: {a.output} did not round-trip: {diffs[:5]}")
            if mrope and back.steps[0].positions.shape[0] != 3:
                raise RecordError("selftest: --mrope did not record 3-row positions")
    print("selftest ok")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.selftest:
            selftest(args)
        else:
            record(args)
        return 0
    except (RecordError, ValueError, FileExistsError, OSError) as exc:
        if os.environ.get("QSA_DEBUG"):
            traceback.print_exc()
        print(f"record_hf_trace.py: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # anything unexpected: the traceback is the report
        traceback.print_exc()
        print(f"record_hf_trace.py: error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
