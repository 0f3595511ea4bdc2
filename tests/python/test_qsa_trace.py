#!/usr/bin/env python3
"""Tests of scripts/qsa_trace.py (trace v1 writer/reader). Plain unittest:

    python3 tests/python/test_qsa_trace.py            # from the repo root
    python3 -m unittest discover -s tests/python

QSA_BIN=build/cpu/harness/qsa additionally checks that the C++ `qsa inspect`
reads what Python writes.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import qsa_trace as qt  # noqa: E402

SEED = 20261130  # every random tensor below derives from it; printed on failure via the messages


def raw_u16(path, dataset):
    """The stored 16-bit patterns of a dataset, read without any conversion."""
    with h5py.File(path, "r") as f:
        ds = f[dataset]
        out = np.empty(ds.shape, dtype=np.uint16)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
        return out


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name="t.h5"):
        return os.path.join(self.dir, name)


class TinyConfigTest(unittest.TestCase):
    def test_tiny_preset_matches_cpp(self):
        c = qt.Config.preset("tiny")
        self.assertEqual((c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.rotary_dim), (64, 4, 2, 32, 16))
        self.assertEqual((c.rope_theta, list(c.mrope_section)), (10000.0, [3, 3, 2]))
        self.assertEqual((c.indexer_heads, c.indexer_head_dim, c.budget, c.compress_ratio, c.page_size),
                         (2, 32, 16, 4, 16))
        c.validate()

    def test_profiles_set_knobs_and_mismatch_is_rejected(self):
        c = qt.Config.preset("tiny")
        c.apply_profile("hf-eager")
        self.assertEqual((c.rope_per_op_rounding, c.p_rounding), (1, "bf16_normalized"))
        c.validate()
        c.angle = "fp32_bf16_inv_freq"
        with self.assertRaisesRegex(ValueError, "profile 'hf-eager'"):
            c.validate()
        c.apply_profile("custom")
        c.validate()
        self.assertEqual(c.angle, "fp32_bf16_inv_freq")


class RoundTripTest(TempDirCase):
    def test_random_tiny_trace_round_trips_exactly(self):
        tr = qt.random_trace(seed=SEED, initial_state=True)
        qt.write_trace(tr, self.path())
        back = qt.read_trace(self.path(), keep_fp8_codes=True)
        self.assertEqual(qt.trace_differences(tr, back), [], f"seed {SEED}")
        self.assertEqual(back.steps[2].positions.shape, (3, tr.steps[2].num_tokens))
        self.assertEqual(back.steps[0].outputs["block_ids"].dtype, np.int32)
        self.assertEqual(back.steps[0].outputs["comp_blocks"].dtype, np.int64)
        self.assertEqual(back.weights.q_proj.dtype, np.float64)
        self.assertEqual(os.listdir(self.dir), ["t.h5"], "no temporary file may remain")

    def test_fp8_codes_decode_on_read(self):
        tr = qt.random_trace(seed=SEED, initial_state=True)
        qt.write_trace(tr, self.path())
        back = qt.read_trace(self.path())
        codes = tr.initial_state.comp_keys.codes
        np.testing.assert_array_equal(back.initial_state.comp_keys, qt.decode_fp8(codes, "e4m3fn"))
        with h5py.File(self.path(), "r") as f:
            self.assertEqual(f["initial_state/comp_keys"].dtype, np.uint8)
            self.assertEqual(f["initial_state/comp_keys"].attrs["encoding"], "e4m3fn")

    def test_fp8_tables_have_the_documented_extremes(self):
        self.assertEqual(qt.decode_fp8(0x7E, "e4m3fn"), 448.0)
        self.assertTrue(np.isnan(qt.decode_fp8(0x7F, "e4m3fn")))
        self.assertEqual(qt.decode_fp8(0x7F, "e4m3fnuz"), 240.0)
        self.assertTrue(np.isnan(qt.decode_fp8(0x80, "e4m3fnuz")))
        self.assertEqual(qt.decode_fp8(0x01, "e4m3fn"), 2.0 ** -9)


class FloatStorageTest(TempDirCase):
    def _trace_with_q(self, q):
        tr = qt.random_trace(seed=SEED)
        tr.steps[0].outputs = {"q": q}
        return tr

    def _stored(self, tr, dataset="steps/000000/outputs/q", **kw):
        qt.write_trace(tr, self.path(), overwrite=True, **kw)
        with h5py.File(self.path(), "r") as f:
            kind = qt.float_storage_name(f[dataset])
        return kind, qt.read_trace(self.path())

    def test_bf16_representable_values_are_stored_as_bf16_exactly(self):
        tr = qt.random_trace(seed=SEED)
        q = tr.steps[0].outputs["q"]
        self.assertTrue(qt.is_bf16_exact(q))
        kind, back = self._stored(tr)
        self.assertEqual(kind, "bf16")
        np.testing.assert_array_equal(back.steps[0].outputs["q"], q)

    def test_h5py_reads_the_bf16_type_as_float32_values(self):
        tr = qt.random_trace(seed=SEED)
        qt.write_trace(tr, self.path())
        with h5py.File(self.path(), "r") as f:
            ds = f["weights/q_proj"]
            self.assertEqual(ds.dtype, np.float32)
            np.testing.assert_array_equal(ds[()].astype(np.float64), tr.weights.q_proj)

    def test_float64_fallback_keeps_values_exact(self):
        rng = np.random.default_rng(SEED)
        tr = qt.random_trace(seed=SEED)
        q = rng.standard_normal(tr.steps[0].outputs["q"].shape)
        q.flat[0] = 0.1  # not float32-representable
        kind, back = self._stored(self._trace_with_q(q))
        self.assertEqual(kind, "float64")
        np.testing.assert_array_equal(back.steps[0].outputs["q"], q)

    def test_float32_values_are_stored_as_float32_exactly(self):
        rng = np.random.default_rng(SEED)
        shape = qt.random_trace(seed=SEED).steps[0].outputs["q"].shape
        q = rng.standard_normal(shape).astype(np.float32)
        q.flat[0] = np.float32(1.0 + 2.0 ** -20)  # not bf16-representable
        kind, back = self._stored(self._trace_with_q(q))
        self.assertEqual(kind, "float32")
        np.testing.assert_array_equal(back.steps[0].outputs["q"], q.astype(np.float64))

    def test_forced_bf16_rounds_to_nearest_even(self):
        shape = qt.random_trace(seed=SEED).steps[0].outputs["q"].shape
        q = np.full(shape, 1.0)
        ulp = 2.0 ** -7
        # halfway above 1.0 ties to even (1.0); halfway above 1+ulp ties up to 1+2ulp;
        # a hair above the halfway point rounds up; float64-only bits are not double-rounded.
        q.flat[:4] = [1.0 + ulp / 2, 1.0 + 1.5 * ulp, 1.0 + ulp / 2 + 2.0 ** -40, 3.0e38 * 1.5]
        kind, back = self._stored(self._trace_with_q(q), floats="bf16")
        self.assertEqual(kind, "bf16")
        got = back.steps[0].outputs["q"].flat[:4]
        self.assertEqual(list(got[:3]), [1.0, 1.0 + 2 * ulp, 1.0 + ulp])
        self.assertTrue(np.isposinf(got[3]))

    def test_rounding_matches_float32_then_bf16_for_float32_inputs(self):
        rng = np.random.default_rng(SEED)
        x = (rng.standard_normal(4096) * np.exp2(rng.integers(-130, 120, 4096))).astype(np.float32)
        via64 = qt.to_bf16_bits(x.astype(np.float64))
        via32 = qt.to_bf16_bits(x)
        np.testing.assert_array_equal(via64, via32)

    def test_nan_and_inf_survive_bf16(self):
        bits = qt.to_bf16_bits(np.array([np.nan, np.inf, -np.inf, -0.0]))
        self.assertEqual([hex(b) for b in bits[1:]], ["0x7f80", "0xff80", "0x8000"])
        self.assertTrue(np.isnan(qt.bf16_bits_to_float(bits[:1])[0]))

    def test_bf16_bit_layout_of_one_is_0x3f80(self):
        tr = qt.random_trace(seed=SEED)
        tr.weights.q_norm = np.zeros_like(tr.weights.q_norm) + 1.0
        qt.write_trace(tr, self.path())
        self.assertTrue(np.all(raw_u16(self.path(), "weights/q_norm") == 0x3F80))
        with open(self.path(), "rb") as fh:
            self.assertIn(b"\x80\x3f" * tr.config.head_dim, fh.read(), "little-endian 0x3F80 run on disk")
        with h5py.File(self.path(), "r") as f:
            t = f["weights/q_norm"].id.get_type()
            self.assertEqual((t.get_size(), t.get_fields(), t.get_ebias(), t.get_precision()),
                             (2, (15, 7, 8, 0, 7), 127, 16))


class WriterRulesTest(TempDirCase):
    def test_refuses_to_overwrite_unless_asked(self):
        tr = qt.random_trace(seed=SEED)
        qt.write_trace(tr, self.path())
        with self.assertRaises(FileExistsError):
            qt.write_trace(tr, self.path())
        tr.description = "second"
        qt.write_trace(tr, self.path(), overwrite=True)
        self.assertEqual(qt.read_trace(self.path()).description, "second")
        self.assertEqual(os.listdir(self.dir), ["t.h5"])

    def test_bad_shape_is_rejected_before_writing(self):
        tr = qt.random_trace(seed=SEED)
        tr.weights.q_proj = tr.weights.q_proj[:, :-1]
        with self.assertRaisesRegex(ValueError, r"weights/q_proj has shape \[256, 63\], expected \[256, 64\]"):
            qt.write_trace(tr, self.path())
        self.assertEqual(os.listdir(self.dir), [])

    def test_failure_mid_write_leaves_no_file(self):
        tr = qt.random_trace(seed=SEED)
        tr.steps[1].outputs["block_ids"] = tr.steps[1].outputs["block_ids"].astype(np.float64)
        with self.assertRaisesRegex(TypeError, "steps/000001/outputs/block_ids"):
            qt.write_trace(tr, self.path())
        self.assertEqual(os.listdir(self.dir), [])

    def test_non_finite_hidden_is_rejected(self):
        tr = qt.random_trace(seed=SEED)
        tr.steps[0].hidden[3, 5] = np.nan
        with self.assertRaisesRegex(ValueError, "steps/000000/hidden holds NaN"):
            qt.write_trace(tr, self.path())


class ReaderRulesTest(TempDirCase):
    def test_missing_config_attribute_is_named(self):
        qt.write_trace(qt.random_trace(seed=SEED), self.path())
        with h5py.File(self.path(), "a") as f:
            del f["config"].attrs["p_rounding"]
        with self.assertRaisesRegex(qt.TraceError, "p_rounding"):
            qt.read_trace(self.path())

    def test_wrong_format_and_version_are_rejected(self):
        qt.write_trace(qt.random_trace(seed=SEED), self.path())
        with h5py.File(self.path(), "a") as f:
            f.attrs["schema_version"] = 2
        with self.assertRaisesRegex(qt.TraceError, "schema_version 2"):
            qt.read_trace(self.path())
        with h5py.File(self.path(), "a") as f:
            f.attrs["format"] = "other"
        with self.assertRaisesRegex(qt.TraceError, "format"):
            qt.read_trace(self.path())

    def test_float_where_ids_belong_is_rejected(self):
        qt.write_trace(qt.random_trace(seed=SEED), self.path())
        with h5py.File(self.path(), "a") as f:
            g = f["steps/000000"]
            data = g["seq_lens"][()].astype(np.float32)
            del g["seq_lens"]
            g["seq_lens"] = data
        with self.assertRaisesRegex(qt.TraceError, "steps/000000/seq_lens: expected integers"):
            qt.read_trace(self.path())


class CliTest(TempDirCase):
    SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "qsa_trace.py"

    def test_selftest_and_inspect(self):
        r = subprocess.run([sys.executable, str(self.SCRIPT), "selftest"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        qt.write_trace(qt.random_trace(seed=SEED), self.path())
        r = subprocess.run([sys.executable, str(self.SCRIPT), "inspect", self.path()], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("steps: 3", r.stdout)
        r = subprocess.run([sys.executable, str(self.SCRIPT), "inspect", self.path("missing.h5")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


def _find_step_count(obj):
    """Every value the JSON gives for a step count: an int under num_steps or steps, or a steps list."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("num_steps", "steps") and isinstance(v, int):
                found.append(v)
            elif k == "steps" and isinstance(v, list):
                found.append(len(v))
            found.extend(_find_step_count(v))
    elif isinstance(obj, list):
        for v in obj:
            found.extend(_find_step_count(v))
    return found


@unittest.skipUnless(os.environ.get("QSA_BIN"), "set QSA_BIN to the built qsa binary to run the C++ cross-check")
class CrossLanguageTest(TempDirCase):
    def run_inspect(self, tr):
        qt.write_trace(tr, self.path(), overwrite=True)
        r = subprocess.run([os.environ["QSA_BIN"], "inspect", self.path(), "--json"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, f"qsa inspect failed:\n{r.stdout}\n{r.stderr}")
        counts = _find_step_count(json.loads(r.stdout))
        self.assertIn(len(tr.steps), counts, f"step count {len(tr.steps)} not found in:\n{r.stdout}")

    def test_cpp_inspect_reads_inputs_only_trace(self):
        self.run_inspect(qt.random_trace(seed=SEED, outputs=False))

    def test_cpp_inspect_reads_trace_with_outputs(self):
        self.run_inspect(qt.random_trace(seed=SEED, outputs=True))


DATA = Path(__file__).resolve().parents[2] / "data"


class CppWrittenTracesTest(unittest.TestCase):
    """The bundled synthetic traces were written by the C++ `qsa gen`: Python must read them."""

    def test_reads_the_synthetic_trace(self):
        tr = qt.read_trace(DATA / "tiny-synthetic.h5")
        self.assertEqual(tr.producer, "qsa gen")
        self.assertEqual((tr.config.hidden_size, tr.config.budget, tr.config.compress_ratio), (64, 16, 4))
        self.assertEqual(len(tr.steps), 9)
        for i, st in enumerate(tr.steps):
            t = st.hidden.shape[0]
            self.assertEqual(st.outputs["out"].shape, (t, 64), f"step {i}")
            self.assertEqual(st.outputs["token_idx"].shape, (t, 19), f"step {i}")
            self.assertTrue(np.all(qt.round_bf16(st.hidden) == st.hidden), f"step {i}: hidden not bf16")
        self.assertTrue(tr.steps[-1].mtp_reuse)
        self.assertEqual(np.asarray(tr.steps[0].positions).shape[0], 3)

    def test_decodes_cpp_fp8_codes(self):
        tr = qt.read_trace(DATA / "tiny-fp8.h5")
        self.assertEqual(tr.config.indexer_dtype, "fp8")
        q = tr.steps[0].outputs["index_q"]
        finite = q[np.isfinite(q)]
        self.assertLessEqual(np.abs(finite).max(), 448.0)
        # every decoded value is an e4m3fn grid point
        grid = set(qt.decode_fp8(np.arange(256, dtype=np.uint8), "e4m3fn").tolist())
        self.assertTrue(set(np.unique(finite).tolist()) <= grid)
        self.assertEqual(tr.steps[0].outputs["token_idx"].shape[1], tr.config.budget + tr.config.compress_ratio)


if __name__ == "__main__":
    unittest.main()
