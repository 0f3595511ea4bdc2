#!/usr/bin/env python3
"""Write and read qsa trace v1 files (docs/trace-format.md) with numpy and h5py only.

The dataclasses mirror harness/trace/trace.hpp. Float tensors come back from
read_trace as float64 numpy arrays, ids and positions as int32/int64 arrays.

Float storage ("auto", the default) is lossless: a tensor is stored as bf16
when every value is bf16-representable, else as float32 when every value is
float32-representable, else as float64. The float32 rung is this writer's
addition to the format's "bf16 or float64" rule (the format allows float32):
recorders hand over float32 tensors from torch (fp32 models, fp32 scores),
and float32 keeps those exact at half the size of float64. Explicit modes
"bf16", "float32" and "float64" round with round-to-nearest-even directly
from the float64 value (no double rounding); for float32 or bf16 inputs from
torch that is exactly torch's own .to(torch.bfloat16).

bf16 is an HDF5 float type with the bf16 bit layout (sign 15, exponent 7..14,
bias 127, mantissa 0..6), written as raw bits so nothing is converted on the
way; h5py reads it as float32 and HDF5 converts it exactly to float64.
fp8 tensors may be passed as Fp8Codes (uint8 codes plus their encoding); they
are stored as uint8 with an `encoding` attribute and decoded on read unless
read_trace(..., keep_fp8_codes=True).

CLI:  qsa_trace.py inspect FILE [--all-steps]   a short summary
      qsa_trace.py selftest                      round-trips a random tiny trace
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover - environment problem, not a bug
    sys.exit(f"qsa_trace.py needs numpy and h5py ({exc}); on Debian: apt-get install python3-h5py")

FORMAT = "qsa-trace"
SCHEMA_VERSION = 1
FLOAT_MODES = ("auto", "bf16", "float32", "float64")
FP8_ENCODINGS = ("e4m3fn", "e4m3fnuz", "e4m3fn_eager_nan")

# ---------------------------------------------------------------------------
# Config (reference/core/config.hpp): defaults are the "qwen4-exp" preset.
# ---------------------------------------------------------------------------

_PROFILE_KNOBS = {
    "exact": dict(round_storage=0, angle="exact", cos_sin="exact", rope_per_op_rounding=0,
                  round_logits_bf16=0, p_rounding="none", round_sigmoid_bf16=0),
    "engine": dict(round_storage=1, angle="fp32", cos_sin="bf16", rope_per_op_rounding=0,
                   round_logits_bf16=0, p_rounding="bf16_unnormalized", round_sigmoid_bf16=0),
    "hf-eager": dict(round_storage=1, angle="fp32", cos_sin="bf16", rope_per_op_rounding=1,
                     round_logits_bf16=1, p_rounding="bf16_normalized", round_sigmoid_bf16=1),
}
KNOB_NAMES = tuple(_PROFILE_KNOBS["exact"].keys())

_STRING_CHOICES = {
    "rope_style": ("neox", "gptj"),
    "score_scale": ("inv_sqrt_dim", "one"),
    "fp8_flavor": FP8_ENCODINGS,
    "kv_dtype": ("bf16", "fp8", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact"),
    "indexer_dtype": ("bf16", "fp8"),
    "profile": ("exact", "engine", "hf-eager", "custom"),
    "angle": ("exact", "fp32", "fp32_bf16_inv_freq"),
    "cos_sin": ("exact", "fp32", "bf16"),
    "p_rounding": ("none", "bf16_unnormalized", "bf16_normalized"),
}


@dataclass
class Config:
    # model
    hidden_size: int = 2560
    num_heads: int = 24
    num_kv_heads: int = 2
    head_dim: int = 256
    rotary_dim: int = 64
    rope_theta: float = 1e7
    mrope_section: List[int] = field(default_factory=lambda: [11, 11, 10])
    rope_style: str = "neox"
    rms_norm_eps: float = 1e-6
    indexer_heads: int = 4
    indexer_kv_heads: int = 1
    indexer_head_dim: int = 128
    budget: int = 2048
    compress_ratio: int = 4
    # serving
    page_size: int = 1600
    speculative_tokens: int = 0
    # engine variants
    score_scale: str = "inv_sqrt_dim"
    fp8_flavor: str = "e4m3fn"
    count_column: int = 0
    profile: str = "engine"
    round_storage: int = 1
    angle: str = "fp32"
    cos_sin: str = "bf16"
    rope_per_op_rounding: int = 0
    round_logits_bf16: int = 0
    p_rounding: str = "bf16_unnormalized"
    round_sigmoid_bf16: int = 0
    kv_dtype: str = "bf16"
    k_scale: float = 1.0
    v_scale: float = 1.0
    indexer_dtype: str = "bf16"
    octave_window: int = 64
    octave_sinks: int = 4

    @staticmethod
    def preset(name: str) -> "Config":
        if name == "qwen4-exp":
            return Config()
        if name == "tiny":
            return Config(hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=32, rotary_dim=16,
                          rope_theta=10000.0, mrope_section=[3, 3, 2], indexer_heads=2,
                          indexer_head_dim=32, budget=16, compress_ratio=4, page_size=16)
        raise ValueError(f"unknown config preset '{name}' (accepted: qwen4-exp, tiny)")

    def apply_profile(self, profile: str) -> None:
        """Sets `profile`; a named profile also overwrites the knobs (config.hpp apply_profile)."""
        if profile not in _STRING_CHOICES["profile"]:
            raise ValueError(f"unknown profile '{profile}' (accepted: {', '.join(_STRING_CHOICES['profile'])})")
        self.profile = profile
        if profile != "custom":
            for k, v in _PROFILE_KNOBS[profile].items():
                setattr(self, k, v)

    def blocks_budget(self) -> int:
        return self.budget // self.compress_ratio

    def row_width(self) -> int:
        return self.budget + self.compress_ratio - 1

    def index_row_width(self) -> int:
        return self.row_width() + (1 if self.count_column else 0)

    def ring_capacity(self) -> int:
        r, s = self.compress_ratio, self.speculative_tokens
        c = r * ((r + s + r - 1) // r)
        while self.page_size % c:
            c += r
        return c

    def validate(self) -> None:
        """The checks of validate_config that a writer can get wrong; ValueError names the field."""
        for name in ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "indexer_heads",
                     "indexer_head_dim", "budget", "compress_ratio", "page_size"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"config.{name} = {getattr(self, name)} must be positive")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"config.num_heads = {self.num_heads} is not a multiple of num_kv_heads")
        if self.indexer_kv_heads != 1:
            raise ValueError(f"config.indexer_kv_heads = {self.indexer_kv_heads} (must be 1)")
        if self.rotary_dim <= 0 or self.rotary_dim % 2 or self.rotary_dim > min(self.head_dim, self.indexer_head_dim):
            raise ValueError(f"config.rotary_dim = {self.rotary_dim} must be even, positive and fit "
                             f"head_dim = {self.head_dim} and indexer_head_dim = {self.indexer_head_dim}")
        if len(self.mrope_section) != 3 or min(self.mrope_section) < 0 or sum(self.mrope_section) != self.rotary_dim // 2:
            raise ValueError(f"config.mrope_section = {list(self.mrope_section)} must be 3 non-negative "
                             f"values summing to rotary_dim / 2 = {self.rotary_dim // 2}")
        if self.budget % self.compress_ratio:
            raise ValueError(f"config.budget = {self.budget} is not a multiple of compress_ratio = {self.compress_ratio}")
        if self.page_size % 16 or self.page_size % self.compress_ratio:
            raise ValueError(f"config.page_size = {self.page_size} must be a multiple of 16 and of compress_ratio")
        for name, choices in _STRING_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"config.{name} = '{getattr(self, name)}' (accepted: {', '.join(choices)})")
        if self.profile != "custom":
            want = _PROFILE_KNOBS[self.profile]
            bad = [k for k in KNOB_NAMES if getattr(self, k) != want[k]]
            if bad:
                raise ValueError(f"config knobs {bad} differ from profile '{self.profile}'; use profile 'custom'")


_CONFIG_INTS = ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "rotary_dim", "indexer_heads",
                "indexer_kv_heads", "indexer_head_dim", "budget", "compress_ratio", "page_size",
                "speculative_tokens", "count_column", "octave_window", "octave_sinks",
                "round_storage", "rope_per_op_rounding", "round_logits_bf16", "round_sigmoid_bf16")
_CONFIG_FLOATS = ("rope_theta", "rms_norm_eps", "k_scale", "v_scale")
_CONFIG_STRINGS = tuple(_STRING_CHOICES.keys())
CONFIG_ATTRS = _CONFIG_INTS + _CONFIG_FLOATS + _CONFIG_STRINGS + ("mrope_section",)
assert set(CONFIG_ATTRS) == {f.name for f in dataclasses.fields(Config)}

# ---------------------------------------------------------------------------
# Trace dataclasses (harness/trace/trace.hpp)
# ---------------------------------------------------------------------------


@dataclass
class Fp8Codes:
    """fp8 values as their uint8 codes, stored with an `encoding` attribute."""
    codes: np.ndarray
    encoding: str = "e4m3fn"


WEIGHT_NAMES = ("index_qk_proj", "index_q_norm", "index_k_norm", "q_proj", "k_proj", "v_proj",
                "q_norm", "k_norm", "o_proj")


@dataclass
class Weights:
    index_qk_proj: np.ndarray  # [(H_I+1)*d_I, hidden]: H_I query heads, then the raw key
    index_q_norm: np.ndarray   # [d_I] zero-centred (gain 1 + w)
    index_k_norm: np.ndarray   # [d_I]
    q_proj: np.ndarray         # [H*2D, hidden]: per head [Q | gate]
    k_proj: np.ndarray         # [G*D, hidden]
    v_proj: np.ndarray         # [G*D, hidden]
    q_norm: np.ndarray         # [D]
    k_norm: np.ndarray         # [D]
    o_proj: np.ndarray         # [hidden, H*D]


@dataclass
class Geometry:
    num_pages: int = 0
    num_ring_blocks: int = 0


# name -> (kind, rank); kind "f" float, "i32"/"i64" integer storage.
CACHE_FIELDS = {
    "kv_slots": ("i64", 1), "kv_positions": ("i64", 1), "kv_k": ("f", 3), "kv_v": ("f", 3),
    "ring_slots": ("i64", 1), "ring_positions": ("i64", 1), "ring_rope": ("i64", 2), "ring_keys": ("f", 2),
    "comp_slots": ("i64", 1), "comp_blocks": ("i64", 1), "comp_keys": ("f", 2),
}


@dataclass
class CacheSnapshot:
    kv_slots: Optional[np.ndarray] = None
    kv_positions: Optional[np.ndarray] = None
    kv_k: Optional[np.ndarray] = None
    kv_v: Optional[np.ndarray] = None
    ring_slots: Optional[np.ndarray] = None
    ring_positions: Optional[np.ndarray] = None
    ring_rope: Optional[np.ndarray] = None
    ring_keys: Optional[np.ndarray] = None
    comp_slots: Optional[np.ndarray] = None
    comp_blocks: Optional[np.ndarray] = None
    comp_keys: Optional[np.ndarray] = None

    def empty(self) -> bool:
        return all(getattr(self, n) is None for n in CACHE_FIELDS)


OUTPUT_FIELDS = {
    "index_q": ("f", 3), "raw_keys": ("f", 2), "comp_tokens": ("i32", 1), "comp_blocks": ("i64", 1),
    "comp_slots": ("i64", 1), "comp_keys": ("f", 2), "block_ids": ("i32", 2), "block_scores": ("f", 2),
    "token_idx": ("i32", 2), "q": ("f", 3), "k": ("f", 3), "v": ("f", 3), "gate": ("f", 3),
    "attn": ("f", 3), "gated": ("f", 3), "out": ("f", 2),
}
STEP_INPUTS = {
    "hidden": ("f", (2,)), "positions": ("i64", (1, 2)), "query_start_loc": ("i32", (1,)),
    "seq_lens": ("i32", (1,)), "block_table": ("i32", (2,)), "block_table_c": ("i32", (2,)),
    "ring_blocks": ("i32", (1,)), "slot_mapping": ("i64", (1,)),
}


@dataclass
class Step:
    hidden: np.ndarray            # [T, hidden]
    positions: np.ndarray         # [T], [1, T] or [3, T]; padding -1
    query_start_loc: np.ndarray   # [R+1]
    seq_lens: np.ndarray          # [R] context plus this chunk
    block_table: np.ndarray       # [R, pages], -1 unmapped
    name: str = ""
    mtp_reuse: bool = False
    block_table_c: Optional[np.ndarray] = None
    ring_blocks: Optional[np.ndarray] = None
    slot_mapping: Optional[np.ndarray] = None
    outputs: Dict[str, np.ndarray] = field(default_factory=dict)  # OUTPUT_FIELDS; missing = not recorded

    @property
    def num_tokens(self) -> int:
        return int(np.asarray(self.hidden).shape[0])

    @property
    def num_reqs(self) -> int:
        return int(np.asarray(self.seq_lens).shape[0])


@dataclass
class Trace:
    config: Config
    weights: Weights
    steps: List[Step] = field(default_factory=list)
    geometry: Geometry = field(default_factory=Geometry)
    initial_state: CacheSnapshot = field(default_factory=CacheSnapshot)
    producer: str = "qsa_trace.py"
    producer_version: str = ""
    seed: int = 0
    description: str = ""
    created: str = ""  # set by write_trace when empty
    schema_version: int = SCHEMA_VERSION


# ---------------------------------------------------------------------------
# Float codecs
# ---------------------------------------------------------------------------


def _f64_to_f32_bits_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float32 bit patterns of x rounded to odd (truncate, then set the last bit
    when inexact). Rounding that result to bf16 with RNE equals RNE straight
    from float64, because float32 keeps more than 8 + 2 significant bits."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        inexact = np.isfinite(x) & (back != x)
        away = inexact & (np.abs(back) > np.abs(x))
        f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    return f.view(np.uint32) | inexact.astype(np.uint32)


def _f32_bits_to_bf16_bits(bits: np.ndarray) -> np.ndarray:
    b = bits.astype(np.uint64)
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16  # RNE; overflow carries into inf
    quiet_nan = (b >> 16) | 0x0040
    return np.where(nan, quiet_nan, rounded).astype(np.uint16)


def to_bf16_bits(x) -> np.ndarray:
    """bf16 bit patterns of x (any float array), round-to-nearest-even, NaN kept quiet."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return _f32_bits_to_bf16_bits(x.view(np.uint32))
    return _f32_bits_to_bf16_bits(_f64_to_f32_bits_round_to_odd(np.asarray(x, dtype=np.float64)))


def bf16_bits_to_float(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x) -> np.ndarray:
    """x rounded to bf16 (RNE), as float64."""
    return bf16_bits_to_float(to_bf16_bits(x)).astype(np.float64)


def is_bf16_exact(x) -> bool:
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        ok = (f.astype(np.float64) == x) & ((f.view(np.uint32) & 0xFFFF) == 0)
    return bool(np.all(ok | np.isnan(x)))


def is_f32_exact(x) -> bool:
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        ok = x.astype(np.float32).astype(np.float64) == x
    return bool(np.all(ok | np.isnan(x)))


def storage_for(x, mode: str = "auto") -> str:
    """The storage type ("bf16", "float32", "float64") a float tensor gets under `mode`."""
    if mode != "auto":
        return mode
    if is_bf16_exact(x):
        return "bf16"
    return "float32" if is_f32_exact(x) else "float64"


def bf16_h5_type():
    """HDF5 float type with the bf16 layout (sign 15, exponent 7..14 bias 127, mantissa 0..6).
    The fields must shrink before the size does, so the order of calls matters."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_size(2)
    t.set_ebias(127)
    t.set_precision(16)
    return t


def _fp8_table(encoding: str) -> np.ndarray:
    if encoding not in FP8_ENCODINGS:
        raise ValueError(f"unknown fp8 encoding '{encoding}' (accepted: {', '.join(FP8_ENCODINGS)})")
    codes = np.arange(256)
    bias = 8 if encoding == "e4m3fnuz" else 7
    e, m = (codes >> 3) & 0xF, (codes & 7).astype(np.float64)
    mag = np.where(e == 0, m / 8 * 2.0 ** (1 - bias), (1 + m / 8) * np.exp2(e - bias))
    val = np.where(codes & 0x80, -mag, mag)
    if encoding == "e4m3fnuz":
        val[0x80] = np.nan  # the only NaN; no negative zero
    else:
        val[(codes & 0x7F) == 0x7F] = np.nan  # e4m3fn: S.1111.111; the eager variant decodes alike
    return val


def decode_fp8(codes, encoding: str) -> np.ndarray:
    return _fp8_table(encoding)[np.asarray(codes, dtype=np.uint8)]


# ---------------------------------------------------------------------------
# Shape checks shared by the writer (before anything is written)
# ---------------------------------------------------------------------------


def _shape(a) -> tuple:
    return tuple((a.codes if isinstance(a, Fp8Codes) else np.asarray(a)).shape)


def _expect(where: str, a, want: Sequence[int]) -> None:
    got = _shape(a)
    if got != tuple(want):
        raise ValueError(f"{where} has shape {list(got)}, expected {list(want)}")


def weight_shapes(c: Config) -> Dict[str, tuple]:
    hi, di, h, g, d, hid = (c.indexer_heads, c.indexer_head_dim, c.num_heads, c.num_kv_heads,
                            c.head_dim, c.hidden_size)
    return {"index_qk_proj": ((hi + c.indexer_kv_heads) * di, hid), "index_q_norm": (di,),
            "index_k_norm": (di,), "q_proj": (h * 2 * d, hid), "k_proj": (g * d, hid),
            "v_proj": (g * d, hid), "q_norm": (d,), "k_norm": (d,), "o_proj": (hid, h * d)}


def _check_outputs(where: str, c: Config, t: int, out: Dict[str, np.ndarray]) -> None:
    unknown = sorted(set(out) - set(OUTPUT_FIELDS))
    if unknown:
        raise ValueError(f"{where}/outputs: unknown dataset(s) {unknown} (known: {', '.join(OUTPUT_FIELDS)})")
    fixed = {"index_q": (t, c.indexer_heads, c.indexer_head_dim), "raw_keys": (t, c.indexer_head_dim),
             "block_ids": (t, c.blocks_budget()), "block_scores": (t, c.blocks_budget()),
             "q": (t, c.num_heads, c.head_dim), "k": (t, c.num_kv_heads, c.head_dim),
             "v": (t, c.num_kv_heads, c.head_dim), "gate": (t, c.num_heads, c.head_dim),
             "attn": (t, c.num_heads, c.head_dim), "gated": (t, c.num_heads, c.head_dim),
             "out": (t, c.hidden_size)}
    for name, want in fixed.items():
        if out.get(name) is not None:
            _expect(f"{where}/outputs/{name}", out[name], want)
    if out.get("token_idx") is not None:
        s = _shape(out["token_idx"])
        if len(s) != 2 or s[0] != t or s[1] not in (c.row_width(), c.row_width() + 1):
            raise ValueError(f"{where}/outputs/token_idx has shape {list(s)}, expected "
                             f"[{t}, {c.row_width()}] or [{t}, {c.row_width() + 1}]")
    comp = [n for n in ("comp_tokens", "comp_blocks", "comp_slots", "comp_keys") if out.get(n) is not None]
    if comp:
        n = _shape(out[comp[0]])[0] if _shape(out[comp[0]]) else -1
        for name in comp:
            want = (n, c.indexer_head_dim) if name == "comp_keys" else (n,)
            _expect(f"{where}/outputs/{name}", out[name], want)


def _check_trace(tr: Trace) -> None:
    c = tr.config
    c.validate()
    shapes = weight_shapes(c)
    for name in WEIGHT_NAMES:
        w = getattr(tr.weights, name)
        if w is None:
            raise ValueError(f"weights/{name} is missing")
        _expect(f"weights/{name}", w, shapes[name])
        if not np.all(np.isfinite(np.asarray(w, dtype=np.float64))):
            raise ValueError(f"weights/{name} holds NaN or Inf")
    s = tr.initial_state
    if s is not None:
        for group, f in (("kv", ("kv_slots", "kv_positions", "kv_k", "kv_v")),
                         ("ring", ("ring_slots", "ring_positions", "ring_rope", "ring_keys")),
                         ("comp", ("comp_slots", "comp_blocks", "comp_keys"))):
            present = [n for n in f if getattr(s, n) is not None]
            if present and len(present) != len(f):
                raise ValueError(f"initial_state: {group} datasets go together; got only {present}")
            if present:
                n = _shape(getattr(s, f[0]))[0]
                tails = {"kv_k": (c.num_kv_heads, c.head_dim), "kv_v": (c.num_kv_heads, c.head_dim),
                         "ring_rope": (3,), "ring_keys": (c.indexer_head_dim,), "comp_keys": (c.indexer_head_dim,)}
                for name in f:
                    _expect(f"initial_state/{name}", getattr(s, name), (n,) + tails.get(name, ()))
    for i, st in enumerate(tr.steps):
        where = f"steps/{i:06d}"
        hid = np.asarray(st.hidden)
        if hid.ndim != 2 or hid.shape[1] != c.hidden_size:
            raise ValueError(f"{where}/hidden has shape {list(hid.shape)}, expected [T, {c.hidden_size}]")
        if not np.all(np.isfinite(hid.astype(np.float64))):
            raise ValueError(f"{where}/hidden holds NaN or Inf")
        t, r = hid.shape[0], np.asarray(st.seq_lens).shape[0] if np.asarray(st.seq_lens).ndim == 1 else -1
        pos = np.asarray(st.positions)
        if not (pos.shape == (t,) or (pos.ndim == 2 and pos.shape[0] in (1, 3) and pos.shape[1] == t)):
            raise ValueError(f"{where}/positions has shape {list(pos.shape)}, expected [{t}], [1, {t}] or [3, {t}]")
        if r < 0:
            raise ValueError(f"{where}/seq_lens must have rank 1")
        _expect(f"{where}/query_start_loc", st.query_start_loc, (r + 1,))
        bt = np.asarray(st.block_table)
        if bt.ndim != 2 or bt.shape[0] != r:
            raise ValueError(f"{where}/block_table has shape {list(bt.shape)}, expected [{r}, pages]")
        if st.block_table_c is not None:
            btc = np.asarray(st.block_table_c)
            if btc.ndim != 2 or btc.shape[0] != r:
                raise ValueError(f"{where}/block_table_c has shape {list(btc.shape)}, expected [{r}, pages]")
        if st.ring_blocks is not None:
            _expect(f"{where}/ring_blocks", st.ring_blocks, (r,))
        if st.slot_mapping is not None:
            _expect(f"{where}/slot_mapping", st.slot_mapping, (t,))
        _check_outputs(where, c, t, st.outputs or {})


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

_INT_DTYPES = {"i32": np.int32, "i64": np.int64}


def _write_float(group, name: str, value, mode: str, where: str) -> None:
    if isinstance(value, Fp8Codes):
        codes = np.asarray(value.codes)
        if codes.dtype != np.uint8:
            raise TypeError(f"{where}: fp8 codes must be uint8, got {codes.dtype}")
        _fp8_table(value.encoding)  # rejects an unknown encoding
        ds = group.create_dataset(name, data=codes)
        ds.attrs["encoding"] = value.encoding
        return
    x = np.asarray(value)
    if x.dtype.kind not in "fiu" and x.dtype.name != "bfloat16":
        raise TypeError(f"{where}: expected a float tensor, got dtype {x.dtype}")
    x = x.astype(np.float64)
    kind = storage_for(x, mode)
    if kind == "bf16":
        tid = bf16_h5_type()
        dsid = h5py.h5d.create(group.id, name.encode(), tid, h5py.h5s.create_simple(x.shape))
        if x.size:
            # Raw bits with the file type as memory type: HDF5 converts nothing.
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(to_bf16_bits(x)), mtype=tid)
    elif kind == "float32":
        with np.errstate(over="ignore"):
            group.create_dataset(name, data=x.astype(np.float32))
    elif kind == "float64":
        group.create_dataset(name, data=x)
    else:
        raise ValueError(f"unknown float storage '{mode}' (accepted: {', '.join(FLOAT_MODES)})")


def _write_int(group, name: str, value, kind: str, where: str) -> None:
    a = np.asarray(value)
    if a.size and a.dtype.kind not in "iub":
        raise TypeError(f"{where}: expected integers ({kind}), got dtype {a.dtype}")
    dt = _INT_DTYPES[kind]
    if a.size and (a.min() < np.iinfo(dt).min or a.max() > np.iinfo(dt).max):
        raise ValueError(f"{where}: values outside the {np.dtype(dt).name} range")
    group.create_dataset(name, data=a.astype(dt))


def _write_any(group, name, value, kind, mode, where):
    if kind == "f":
        _write_float(group, name, value, mode, where)
    else:
        _write_int(group, name, value, kind, where)


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_file(f, tr: Trace, floats: str) -> None:
    f.attrs["format"] = FORMAT
    f.attrs["schema_version"] = np.int64(tr.schema_version)
    f.attrs["producer"] = tr.producer
    f.attrs["producer_version"] = tr.producer_version
    f.attrs["seed"] = np.uint64(tr.seed)
    f.attrs["description"] = tr.description
    f.attrs["created"] = tr.created or _utc_now()

    cfg = f.create_group("config")
    c = tr.config
    for name in _CONFIG_INTS:
        cfg.attrs[name] = np.int64(int(getattr(c, name)))
    for name in _CONFIG_FLOATS:
        cfg.attrs[name] = np.float64(getattr(c, name))
    for name in _CONFIG_STRINGS:
        cfg.attrs[name] = str(getattr(c, name))
    cfg.attrs["mrope_section"] = np.asarray(c.mrope_section, dtype=np.int64)

    geo = f.create_group("geometry")
    geo.attrs["num_pages"] = np.int64(tr.geometry.num_pages)
    geo.attrs["num_ring_blocks"] = np.int64(tr.geometry.num_ring_blocks)

    wg = f.create_group("weights")
    for name in WEIGHT_NAMES:
        _write_float(wg, name, getattr(tr.weights, name), floats, f"weights/{name}")

    s = tr.initial_state
    if s is not None and not s.empty():
        ig = f.create_group("initial_state")
        for name, (kind, _) in CACHE_FIELDS.items():
            if getattr(s, name) is not None:
                _write_any(ig, name, getattr(s, name), kind, floats, f"initial_state/{name}")

    sg = f.create_group("steps")
    sg.attrs["num_steps"] = np.int64(len(tr.steps))
    for i, st in enumerate(tr.steps):
        where = f"steps/{i:06d}"
        g = sg.create_group(f"{i:06d}")
        g.attrs["name"] = st.name or f"step {i}"
        g.attrs["mtp_reuse"] = np.int64(1 if st.mtp_reuse else 0)
        for name, (kind, _) in STEP_INPUTS.items():
            value = getattr(st, name)
            if value is not None:
                _write_any(g, name, value, kind, floats, f"{where}/{name}")
        recorded = {k: v for k, v in (st.outputs or {}).items() if v is not None}
        if recorded:
            og = g.create_group("outputs")
            for name, (kind, _) in OUTPUT_FIELDS.items():
                if name in recorded:
                    _write_any(og, name, recorded[name], kind, floats, f"{where}/outputs/{name}")


def write_trace(trace: Trace, path, overwrite: bool = False, floats: str = "auto") -> None:
    """Writes `trace` to `path` atomically (PATH.tmp-PID, then rename).

    Refuses (FileExistsError) to replace an existing file unless overwrite.
    Shapes are checked first (ValueError naming the dataset), so a bad trace
    never reaches the disk. floats: "auto" (lossless, see the module doc),
    "bf16", "float32" or "float64" (rounded RNE when needed).
    """
    path = os.fspath(path)
    if floats not in FLOAT_MODES:
        raise ValueError(f"unknown float storage '{floats}' (accepted: {', '.join(FLOAT_MODES)})")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True (--force) to replace it")
    _check_trace(trace)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with h5py.File(tmp, "w") as f:
            _write_file(f, trace, floats)
        if os.path.exists(path) and not overwrite:  # appeared while we wrote
            raise FileExistsError(f"{path} exists; pass overwrite=True (--force) to replace it")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


class TraceError(ValueError):
    """A trace file that does not follow docs/trace-format.md; the message names the dataset."""


def _attr_str(v) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _attr_str(v[()])
    return str(v)


def float_storage_name(ds) -> str:
    """"bf16", "float16", "float32", "float64" or "uint8 (ENC)" for a float dataset."""
    t = ds.id.get_type()
    if isinstance(t, h5py.h5t.TypeFloatID):
        if t.get_size() == 2:
            return "bf16" if t.get_fields() == (15, 7, 8, 0, 7) else "float16"
        return {4: "float32", 8: "float64"}.get(t.get_size(), f"float{8 * t.get_size()}")
    if ds.dtype == np.uint8 and "encoding" in ds.attrs:
        return f"uint8 ({_attr_str(ds.attrs['encoding'])})"
    return str(ds.dtype)


def _read_float(ds, where: str, keep_fp8: bool):
    if "encoding" in ds.attrs:
        if ds.dtype != np.uint8:
            raise TraceError(f"{where}: an `encoding` attribute needs uint8 codes, got {ds.dtype}")
        enc = _attr_str(ds.attrs["encoding"])
        codes = ds[()]
        return Fp8Codes(codes, enc) if keep_fp8 else decode_fp8(codes, enc)
    if not isinstance(ds.id.get_type(), h5py.h5t.TypeFloatID):
        raise TraceError(f"{where}: expected a float dataset, got {ds.dtype}")
    # Let HDF5 convert (exactly) from the file type, bf16 included.
    return ds.astype(np.float64)[()]


def _read_int(ds, where: str, kind: str):
    if ds.dtype.kind not in "iu":
        raise TraceError(f"{where}: expected integers ({'int32' if kind == 'i32' else 'int64'}), got {ds.dtype}")
    return ds[()].astype(_INT_DTYPES[kind])


def _read_ds(group, name, kind, ranks, where, keep_fp8):
    ds = group[name]
    if not isinstance(ds, h5py.Dataset):
        raise TraceError(f"{where} is not a dataset")
    ranks = (ranks,) if isinstance(ranks, int) else ranks
    if ds.ndim not in ranks:
        raise TraceError(f"{where} has rank {ds.ndim}, expected {' or '.join(map(str, ranks))}")
    return _read_float(ds, where, keep_fp8) if kind == "f" else _read_int(ds, where, kind)


def read_trace(path, load_outputs: bool = True, keep_fp8_codes: bool = False) -> Trace:
    """Reads a trace v1 file. Raises TraceError (a ValueError) naming what is wrong."""
    path = os.fspath(path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open as HDF5 ({exc})") from exc
    with f:
        fmt = _attr_str(f.attrs.get("format", ""))
        if fmt != FORMAT:
            raise TraceError(f"{path}: attribute `format` is '{fmt}', expected '{FORMAT}'")
        version = int(f.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise TraceError(f"{path}: schema_version {version} is not supported (this reader: {SCHEMA_VERSION})")
        for group in ("config", "geometry", "weights", "steps"):
            if group not in f:
                raise TraceError(f"{path}: group /{group} is missing")

        ca = f["config"].attrs
        values = {}
        for name in CONFIG_ATTRS:
            if name not in ca:
                raise TraceError(f"{path}: /config attribute `{name}` is missing")
            v = ca[name]
            if name in _CONFIG_INTS:
                values[name] = int(v)
            elif name in _CONFIG_FLOATS:
                values[name] = float(v)
            elif name in _CONFIG_STRINGS:
                values[name] = _attr_str(v)
            else:
                sec = [int(x) for x in np.asarray(v).reshape(-1)]
                if len(sec) != 3:
                    raise TraceError(f"{path}: /config attribute `mrope_section` has {len(sec)} values, expected 3")
                values[name] = sec
        config = Config(**values)

        ga = f["geometry"].attrs
        for name in ("num_pages", "num_ring_blocks"):
            if name not in ga:
                raise TraceError(f"{path}: /geometry attribute `{name}` is missing")
        geometry = Geometry(int(ga["num_pages"]), int(ga["num_ring_blocks"]))

        wg = f["weights"]
        w = {}
        for name in WEIGHT_NAMES:
            if name not in wg:
                raise TraceError(f"{path}: dataset /weights/{name} is missing")
            w[name] = _read_ds(wg, name, "f", len(weight_shapes(config)[name]), f"/weights/{name}", keep_fp8_codes)
        weights = Weights(**w)

        state = CacheSnapshot()
        if "initial_state" in f:
            ig = f["initial_state"]
            for name, (kind, rank) in CACHE_FIELDS.items():
                if name in ig:
                    setattr(state, name, _read_ds(ig, name, kind, rank, f"/initial_state/{name}", keep_fp8_codes))

        sg = f["steps"]
        n = int(sg.attrs.get("num_steps", -1))
        names = sorted(k for k in sg.keys())
        if n < 0 or names != [f"{i:06d}" for i in range(n)]:
            raise TraceError(f"{path}: /steps holds {names[:4]}{'...' if len(names) > 4 else ''} "
                             f"but num_steps = {n}; expected groups 000000 .. {n - 1:06d}")
        steps = []
        for i in range(n):
            where = f"/steps/{i:06d}"
            g = sg[f"{i:06d}"]
            kw = {}
            for name, (kind, ranks) in STEP_INPUTS.items():
                if name in g:
                    kw[name] = _read_ds(g, name, kind, ranks, f"{where}/{name}", keep_fp8_codes)
                elif name in ("hidden", "positions", "query_start_loc", "seq_lens", "block_table"):
                    raise TraceError(f"{path}: dataset {where}/{name} is missing")
            outputs = {}
            if load_outputs and "outputs" in g:
                og = g["outputs"]
                for name, (kind, rank) in OUTPUT_FIELDS.items():
                    if name in og:
                        outputs[name] = _read_ds(og, name, kind, rank, f"{where}/outputs/{name}", keep_fp8_codes)
            steps.append(Step(name=_attr_str(g.attrs.get("name", "")),
                              mtp_reuse=bool(int(g.attrs.get("mtp_reuse", 0))), outputs=outputs, **kw))

        return Trace(config=config, weights=weights, steps=steps, geometry=geometry, initial_state=state,
                     producer=_attr_str(f.attrs.get("producer", "")),
                     producer_version=_attr_str(f.attrs.get("producer_version", "")),
                     seed=int(f.attrs.get("seed", 0)), description=_attr_str(f.attrs.get("description", "")),
                     created=_attr_str(f.attrs.get("created", "")), schema_version=version)


# ---------------------------------------------------------------------------
# Helpers for producers and tests
# ---------------------------------------------------------------------------


def expand_tokens(config: Config, blocks: Sequence[int], p: int) -> np.ndarray:
    """One token_idx row (spec section 6) for a query at request-relative position p
    whose selection is `blocks` (valid ids only, in selection order)."""
    r, w = config.compress_ratio, config.row_width()
    row = np.full(config.index_row_width(), -1, dtype=np.int32)
    n_exp = len(blocks) * r
    t_start = ((p + 1) // r) * r
    n_tail = p + 1 - t_start
    for col in range(n_exp):
        row[col] = blocks[col // r] * r + col % r
    row[n_exp:n_exp + n_tail] = np.arange(t_start, p + 1)
    if config.count_column:
        row[w] = n_exp + n_tail
    return row


def paged_slot(block_table: np.ndarray, req: int, p: int, page_size: int) -> int:
    page = p // page_size
    if page >= block_table.shape[1] or block_table[req, page] < 0:
        return -1
    return int(block_table[req, page]) * page_size + p % page_size


def random_trace(seed: int = 0, config: Optional[Config] = None, outputs: bool = True,
                 initial_state: bool = False) -> Trace:
    """A small valid trace (tiny preset by default): 2 requests, a prefill with a
    padding row, a decode step with [1, T] positions and a chunk with 3-row
    mRoPE positions. Outputs have the right shapes and consistent ids; their
    float values are random (bf16 for most, float32 scores, float64 `out`)."""
    c = config or Config.preset("tiny")
    rng = np.random.default_rng(seed)

    def bf(shape, scale=1.0):
        return round_bf16(rng.standard_normal(shape) * scale)

    hid, hi, di, h, g, d = (c.hidden_size, c.indexer_heads, c.indexer_head_dim, c.num_heads,
                            c.num_kv_heads, c.head_dim)
    shapes = weight_shapes(c)
    weights = Weights(**{n: bf(s, 0.1 if len(s) == 1 else 1.0 / np.sqrt(s[1])) for n, s in shapes.items()})
    r, kb, p_size = c.compress_ratio, c.blocks_budget(), c.page_size
    plan = [("prefill", [0, 0], [13, 9], 1, "1"), ("decode 0", [13, 9], [1, 1], 0, "1xT"),
            ("chunk", [14, 10], [4, 3], 0, "3")]
    max_len = max(ctx + q for _, ctxs, qs, _, _ in plan for ctx, q in zip(ctxs, qs))
    pages = -(-max_len // p_size)
    block_table = np.arange(2 * pages, dtype=np.int32).reshape(2, pages)
    steps = []
    for name, ctxs, qlens, pad, pos_form in plan:
        qsl = np.concatenate([[0], np.cumsum(qlens)]).astype(np.int32)
        seq_lens = np.asarray([a + b for a, b in zip(ctxs, qlens)], dtype=np.int32)
        t = int(qsl[-1]) + pad
        req = np.full(t, -1)
        pos = np.full(t, -1, dtype=np.int64)
        for i, (ctx, q) in enumerate(zip(ctxs, qlens)):
            req[qsl[i]:qsl[i + 1]] = i
            pos[qsl[i]:qsl[i + 1]] = np.arange(ctx, ctx + q)
        if pos_form == "1":
            positions = pos
        elif pos_form == "1xT":
            positions = pos[None, :]
        else:
            positions = np.stack([pos, np.where(pos >= 0, pos + 1, -1), np.where(pos >= 0, pos + 2, -1)])
        st = Step(name=name, hidden=bf((t, hid)), positions=positions, query_start_loc=qsl,
                  seq_lens=seq_lens, block_table=block_table.copy())
        if outputs:
            o = {"index_q": bf((t, hi, di)), "raw_keys": bf((t, di)), "q": bf((t, h, d)),
                 "k": bf((t, g, d)), "v": bf((t, g, d)), "gate": bf((t, h, d)), "attn": bf((t, h, d)),
                 "gated": bf((t, h, d)), "out": rng.standard_normal((t, hid))}
            ids = np.full((t, kb), -1, dtype=np.int32)
            scores = np.full((t, kb), -np.inf)
            tok = np.full((t, c.index_row_width()), -1, dtype=np.int32)
            if c.count_column:
                tok[:, -1] = 0
            comp_tokens, comp_blocks, comp_slots = [], [], []
            for row in range(t):
                if req[row] < 0:
                    continue
                p = int(pos[row])
                vis = min((p + 1) // r, int(seq_lens[req[row]]) // r)
                chosen = list(rng.permutation(vis)[:min(vis, kb)])
                ids[row, :len(chosen)] = chosen
                scores[row, :len(chosen)] = np.sort(rng.standard_normal(len(chosen)).astype(np.float32))[::-1]
                tok[row] = expand_tokens(c, chosen, p)
                if (p + 1) % r == 0:
                    b = p // r
                    rows_per_page = p_size // r
                    comp_tokens.append(row)
                    comp_blocks.append(b)
                    comp_slots.append(int(block_table[req[row], b // rows_per_page]) * rows_per_page
                                      + b % rows_per_page)
            o.update(block_ids=ids, block_scores=scores, token_idx=tok,
                     comp_tokens=np.asarray(comp_tokens, dtype=np.int32),
                     comp_blocks=np.asarray(comp_blocks, dtype=np.int64),
                     comp_slots=np.asarray(comp_slots, dtype=np.int64),
                     comp_keys=bf((len(comp_tokens), di)))
            st.outputs = o
        steps.append(st)
    state = CacheSnapshot()
    if initial_state:
        state = CacheSnapshot(kv_slots=np.arange(3, dtype=np.int64), kv_positions=np.arange(3, dtype=np.int64),
                              kv_k=bf((3, g, d)), kv_v=bf((3, g, d)),
                              ring_slots=np.arange(2, dtype=np.int64), ring_positions=np.arange(2, dtype=np.int64),
                              ring_rope=np.tile(np.arange(2, dtype=np.int64)[:, None], (1, 3)),
                              ring_keys=bf((2, di)), comp_slots=np.zeros(1, dtype=np.int64),
                              comp_blocks=np.zeros(1, dtype=np.int64),
                              comp_keys=Fp8Codes(rng.integers(0, 0x7E, (1, di), dtype=np.uint8), "e4m3fn"))
    return Trace(config=c, weights=weights, steps=steps, geometry=Geometry(2 * pages, 2 * pages),
                 initial_state=state, producer="qsa_trace.py random_trace", producer_version="1",
                 seed=seed, description=f"random tiny trace, seed {seed}")


def _same(a, b) -> bool:
    if isinstance(a, Fp8Codes) or isinstance(b, Fp8Codes):
        return (isinstance(a, Fp8Codes) and isinstance(b, Fp8Codes) and a.encoding == b.encoding
                and np.array_equal(a.codes, b.codes))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True)
    return np.array_equal(a, b)


def trace_differences(a: Trace, b: Trace) -> List[str]:
    """What differs between two traces (values compared exactly; `created` ignored)."""
    diffs = []
    for f in dataclasses.fields(Config):
        if getattr(a.config, f.name) != getattr(b.config, f.name) and \
                list(np.atleast_1d(getattr(a.config, f.name))) != list(np.atleast_1d(getattr(b.config, f.name))):
            diffs.append(f"config.{f.name}: {getattr(a.config, f.name)} != {getattr(b.config, f.name)}")
    for name in ("producer", "producer_version", "seed", "description", "schema_version", "geometry"):
        if getattr(a, name) != getattr(b, name):
            diffs.append(f"{name}: {getattr(a, name)!r} != {getattr(b, name)!r}")
    for name in WEIGHT_NAMES:
        if not _same(getattr(a.weights, name), getattr(b.weights, name)):
            diffs.append(f"weights/{name}")
    for name in CACHE_FIELDS:
        x, y = getattr(a.initial_state, name), getattr(b.initial_state, name)
        if (x is None) != (y is None) or (x is not None and not _same(x, y)):
            diffs.append(f"initial_state/{name}")
    if len(a.steps) != len(b.steps):
        return diffs + [f"num_steps: {len(a.steps)} != {len(b.steps)}"]
    for i, (s, u) in enumerate(zip(a.steps, b.steps)):
        if s.name != u.name or s.mtp_reuse != u.mtp_reuse:
            diffs.append(f"steps/{i:06d} attrs")
        for name in STEP_INPUTS:
            x, y = getattr(s, name), getattr(u, name)
            if (x is None) != (y is None) or (x is not None and not _same(x, y)):
                diffs.append(f"steps/{i:06d}/{name}")
        for name in sorted(set(s.outputs) | set(u.outputs)):
            if name not in s.outputs or name not in u.outputs or not _same(s.outputs[name], u.outputs[name]):
                diffs.append(f"steps/{i:06d}/outputs/{name}")
    return diffs


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def inspect_file(path: str, all_steps: bool = False, out=sys.stdout) -> None:
    tr = read_trace(path)
    c = tr.config
    with h5py.File(path, "r") as f:
        wtypes = {n: float_storage_name(f["weights"][n]) for n in WEIGHT_NAMES}
        stored = {}
        for i in range(len(tr.steps)):
            g = f["steps"][f"{i:06d}"]
            if "outputs" in g:
                stored[i] = {n: float_storage_name(g["outputs"][n]) for n in g["outputs"]
                             if OUTPUT_FIELDS.get(n, ("", 0))[0] == "f"}
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"{path}: qsa trace v{tr.schema_version} by {tr.producer} ({tr.producer_version}), seed {tr.seed}, "
      f"created {tr.created}")
    if tr.description:
        p(f"  description: {tr.description}")
    p(f"  config: hidden {c.hidden_size}, H {c.num_heads}, G {c.num_kv_heads}, D {c.head_dim}, rotary "
      f"{c.rotary_dim}, theta {c.rope_theta:g}, mrope {list(c.mrope_section)}, H_I {c.indexer_heads}, "
      f"d_I {c.indexer_head_dim}, K {c.budget}, r {c.compress_ratio}, page {c.page_size}")
    p(f"  precision: profile {c.profile} (round_storage {c.round_storage}, angle {c.angle}, cos_sin "
      f"{c.cos_sin}, rope_per_op {c.rope_per_op_rounding}, logits_bf16 {c.round_logits_bf16}, p "
      f"{c.p_rounding}, sigmoid_bf16 {c.round_sigmoid_bf16}); kv {c.kv_dtype}, indexer {c.indexer_dtype}, "
      f"score_scale {c.score_scale}")
    p(f"  geometry: {tr.geometry.num_pages} pages, {tr.geometry.num_ring_blocks} ring blocks")
    p("  weights: " + ", ".join(f"{n} {list(np.shape(getattr(tr.weights, n)))} {wtypes[n]}" for n in WEIGHT_NAMES))
    st = tr.initial_state
    p("  initial state: " + ("none" if st.empty() else ", ".join(
        f"{n} {len(getattr(st, n))}" for n in ("kv_slots", "ring_slots", "comp_slots") if getattr(st, n) is not None)))
    p(f"  steps: {len(tr.steps)}")
    shown = tr.steps if all_steps else tr.steps[:12]
    for i, s in enumerate(shown):
        pos = np.asarray(s.positions)
        outs = ", ".join(f"{n}:{stored.get(i, {}).get(n, 'int')}" for n in s.outputs) or "none"
        p(f"    {i:6d} {s.name!r}: T {s.num_tokens}, R {s.num_reqs}, seq_lens {list(map(int, s.seq_lens))}, "
          f"positions {'x'.join(map(str, pos.shape))}{', mtp_reuse' if s.mtp_reuse else ''}; outputs {outs}")
    if len(shown) < len(tr.steps):
        p(f"    ... {len(tr.steps) - len(shown)} more (--all-steps)")


def selftest() -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.h5")
        tr = random_trace(seed=7, initial_state=True)
        write_trace(tr, path)
        back = read_trace(path, keep_fp8_codes=True)
        diffs = trace_differences(tr, back)
        if diffs:
            print("selftest FAILED: round trip differs in " + "; ".join(diffs[:10]))
            return 1
        try:
            write_trace(tr, path)
            print("selftest FAILED: an existing file was overwritten without overwrite=True")
            return 1
        except FileExistsError:
            pass
        with h5py.File(path, "r") as f:
            kinds = {float_storage_name(f["steps/000000/outputs"][n]) for n in ("q", "block_scores", "out")}
        if kinds != {"bf16", "float32", "float64"}:
            print(f"selftest FAILED: expected bf16, float32 and float64 storage, got {sorted(kinds)}")
            return 1
        inspect_file(path)
    print("selftest ok: random tiny trace round-tripped exactly (bf16, float32, float64, fp8, ints)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ins = sub.add_parser("inspect", help="print a short summary of a trace")
    ins.add_argument("file")
    ins.add_argument("--all-steps", action="store_true", help="list every step (default: the first 12)")
    sub.add_parser("selftest", help="round-trip a random tiny trace in a temporary directory")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "inspect":
            inspect_file(args.file, args.all_steps)
            return 0
        return selftest()
    except (TraceError, ValueError, TypeError, OSError) as exc:
        print(f"qsa_trace.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
