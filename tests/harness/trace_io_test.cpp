// Trace v1 round trips (docs/trace-format.md): what is written is read back
// bit for bit when the storage is exact (bf16-representable data as bf16, the
// rest as float64, fp8 values as codes), explicit lossy storage rounds exactly
// as documented, and writes are atomic and refuse to clobber a file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/trace/trace_fields.hpp"
#include "harness/trace/trace_io.hpp"
#include "reference/core/fp8.hpp"
#include "tests/harness/trace_test_support.hpp"

namespace qsa {
namespace {

using testing_support::kTraceSeed;
using testing_support::make_trace;
using testing_support::same_bits;
using testing_support::ScratchDir;
using testing_support::Values;

void expect_same_config(const QsaConfig& a, const QsaConfig& b) {
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.mrope_section, b.mrope_section);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.indexer_heads, b.indexer_heads);
  EXPECT_EQ(a.indexer_kv_heads, b.indexer_kv_heads);
  EXPECT_EQ(a.indexer_head_dim, b.indexer_head_dim);
  EXPECT_EQ(a.budget, b.budget);
  EXPECT_EQ(a.compress_ratio, b.compress_ratio);
  EXPECT_EQ(a.page_size, b.page_size);
  EXPECT_EQ(a.speculative_tokens, b.speculative_tokens);
  EXPECT_EQ(a.score_scale, b.score_scale);
  EXPECT_EQ(a.fp8_flavor, b.fp8_flavor);
  EXPECT_EQ(a.count_column, b.count_column);
  EXPECT_EQ(a.profile, b.profile);
  EXPECT_EQ(a.precision.round_storage, b.precision.round_storage);
  EXPECT_EQ(a.precision.angle, b.precision.angle);
  EXPECT_EQ(a.precision.cos_sin, b.precision.cos_sin);
  EXPECT_EQ(a.precision.rope_per_op_rounding, b.precision.rope_per_op_rounding);
  EXPECT_EQ(a.precision.round_logits_bf16, b.precision.round_logits_bf16);
  EXPECT_EQ(a.precision.p_rounding, b.precision.p_rounding);
  EXPECT_EQ(a.precision.round_sigmoid_bf16, b.precision.round_sigmoid_bf16);
  EXPECT_EQ(a.kv_dtype, b.kv_dtype);
  EXPECT_EQ(a.k_scale, b.k_scale);
  EXPECT_EQ(a.v_scale, b.v_scale);
  EXPECT_EQ(a.indexer_dtype, b.indexer_dtype);
  EXPECT_EQ(a.octave_window, b.octave_window);
  EXPECT_EQ(a.octave_sinks, b.octave_sinks);
}

// Every tensor of a trace with its path in the file, by element type.
struct Tensors {
  std::vector<std::pair<std::string, const TensorD*>> floats;
  std::vector<std::pair<std::string, const TensorI32*>> i32;
  std::vector<std::pair<std::string, const TensorI64*>> i64;
  void add(const std::string& n, const TensorD& t) { floats.emplace_back(n, &t); }
  void add(const std::string& n, const TensorI32& t) { i32.emplace_back(n, &t); }
  void add(const std::string& n, const TensorI64& t) { i64.emplace_back(n, &t); }
};

Tensors tensors_of(const Trace& t) {
  Tensors out;
  for_each_weight(t.weights, [&](const FieldSpec& f, const TensorD& x) { out.add(std::string("/weights/") + f.name, x); });
  for_each_snapshot(t.initial_state, [&](SnapshotFamily, const FieldSpec& f, const auto& x) {
    out.add(std::string("/initial_state/") + f.name, x);
  });
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const std::string p = "/steps/00000" + std::to_string(i) + "/";
    const TraceStep& s = t.steps[i];
    out.add(p + "hidden", s.hidden);
    out.add(p + "positions", s.meta.positions);
    out.add(p + "block_table", s.meta.block_table);
    out.add(p + "block_table_c", s.meta.block_table_c);
    for_each_recorded(s.recorded, [&](const FieldSpec& f, const auto& x) { out.add(p + "outputs/" + f.name, x); });
  }
  return out;
}

template <class T>
void expect_same_ints(const std::vector<std::pair<std::string, const Tensor<T>*>>& a,
                      const std::vector<std::pair<std::string, const Tensor<T>*>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(*a[i].second, *b[i].second)) << a[i].first;
}

// `read` equals `written` everywhere, with each float of `written` mapped
// through `stored` (identity for exact storage), compared bit for bit.
template <class Stored>
void expect_round_trip(const Trace& written, const Trace& read, Stored stored) {
  EXPECT_EQ(read.schema_version, kTraceSchemaVersion);
  EXPECT_EQ(read.producer, written.producer);
  EXPECT_EQ(read.producer_version, written.producer_version);
  EXPECT_EQ(read.seed, written.seed);
  EXPECT_EQ(read.description, written.description);
  expect_same_config(written.config, read.config);
  EXPECT_EQ(read.geometry.num_pages, written.geometry.num_pages);
  EXPECT_EQ(read.geometry.num_ring_blocks, written.geometry.num_ring_blocks);
  ASSERT_EQ(read.steps.size(), written.steps.size());
  for (size_t i = 0; i < written.steps.size(); ++i) {
    const StepMetadata& a = written.steps[i].meta;
    const StepMetadata& b = read.steps[i].meta;
    EXPECT_EQ(read.steps[i].name, written.steps[i].name);
    EXPECT_EQ(b.query_start_loc, a.query_start_loc) << "step " << i;
    EXPECT_EQ(b.seq_lens, a.seq_lens) << "step " << i;
    EXPECT_EQ(b.ring_blocks, a.ring_blocks) << "step " << i;
    EXPECT_EQ(b.slot_mapping, a.slot_mapping) << "step " << i;
    EXPECT_EQ(b.mtp_reuse, a.mtp_reuse) << "step " << i;
  }
  const Tensors a = tensors_of(written), b = tensors_of(read);
  expect_same_ints(a.i32, b.i32);
  expect_same_ints(a.i64, b.i64);
  ASSERT_EQ(a.floats.size(), b.floats.size());
  for (size_t i = 0; i < a.floats.size(); ++i) {
    TensorD expected = *a.floats[i].second;
    for (double& x : expected.data) x = stored(x);
    EXPECT_TRUE(same_bits(expected, *b.floats[i].second)) << a.floats[i].first;
  }
}

double identity(double x) { return x; }

std::map<std::string, DatasetInfo> datasets_by_path(const std::string& file) {
  std::map<std::string, DatasetInfo> out;
  for (DatasetInfo& d : list_datasets(file)) out[d.path] = d;
  return out;
}

bool only_file_in(const std::filesystem::path& dir, const std::string& file) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().string());
  return names == std::vector<std::string>{file};
}

TEST(TraceIo, Bf16RepresentableDataRoundTripsExactlyAsBf16) {
  SCOPED_TRACE("seed " + std::to_string(kTraceSeed));
  const ScratchDir dir;
  const Trace trace = make_trace(kTraceSeed, Values::kBf16Exact);
  const std::string file = dir.file("t.h5");
  write_trace(trace, file);
  expect_round_trip(trace, read_trace(file), identity);
  const auto ds = datasets_by_path(file);
  EXPECT_EQ(ds.at("/weights/q_proj").dtype, "bf16");
  EXPECT_EQ(ds.at("/steps/000000/hidden").dtype, "bf16");
  EXPECT_EQ(ds.at("/steps/000000/outputs/block_scores").dtype, "bf16");  // -inf is a bf16 value
  EXPECT_EQ(ds.at("/steps/000000/positions").dtype, "int64");
  EXPECT_EQ(ds.at("/steps/000000/block_table").dtype, "int32");
  EXPECT_EQ(ds.at("/steps/000002/positions").shape, (Shape{3, 6}));
  EXPECT_EQ(ds.at("/steps/000001/positions").shape, (Shape{1, 1}));
  EXPECT_EQ(ds.at("/steps/000001/outputs/comp_keys").shape, (Shape{0, 32}));
  EXPECT_EQ(ds.at("/weights/q_proj").stored_bytes, 4 * 2 * 32 * 64 * 2);
  EXPECT_TRUE(only_file_in(dir.path(), file)) << "a temporary file was left behind";
}

TEST(TraceIo, Float64DataRoundTripsExactlyInAuto) {
  SCOPED_TRACE("seed " + std::to_string(kTraceSeed));
  const ScratchDir dir;
  const Trace trace = make_trace(kTraceSeed, Values::kFloat64);
  const std::string file = dir.file("t.h5");
  write_trace(trace, file);
  expect_round_trip(trace, read_trace(file), identity);
  const auto ds = datasets_by_path(file);
  EXPECT_EQ(ds.at("/weights/q_proj").dtype, "float64");
  EXPECT_EQ(ds.at("/weights/k_proj").dtype, "bf16");  // auto decides per dataset
  EXPECT_EQ(ds.at("/steps/000002/outputs/out").dtype, "float64");
}

TEST(TraceIo, ExplicitStorageRoundsAsDocumented) {
  SCOPED_TRACE("seed " + std::to_string(kTraceSeed));
  const ScratchDir dir;
  const Trace trace = make_trace(kTraceSeed, Values::kFloat64);
  const struct {
    FloatStorage storage;
    double (*stored)(double);
    const char* dtype;
  } cases[] = {
      {FloatStorage::kFloat64, identity, "float64"},
      {FloatStorage::kFloat32, round_fp32, "float32"},
      {FloatStorage::kBf16, round_bf16, "bf16"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dtype);
    const std::string file = dir.file(std::string(c.dtype) + ".h5");
    write_trace(trace, file, {c.storage, false});
    expect_round_trip(trace, read_trace(file), c.stored);
    EXPECT_EQ(datasets_by_path(file).at("/steps/000000/hidden").dtype, c.dtype);
  }
}

TEST(TraceIo, Fp8IndexerValuesAreStoredAsCodesWithTheirEncoding) {
  SCOPED_TRACE("seed " + std::to_string(kTraceSeed));
  const ScratchDir dir;
  QsaConfig config = testing_support::variant_config();
  config.indexer_dtype = IndexerDtype::kFp8;
  Trace trace = make_trace(kTraceSeed, Values::kFloat64, config);
  // The indexer's fp8 values, including the flavour's extremes (fnuz: 240).
  const auto to_fp8 = [&](TensorD& t) {
    for (double& x : t.data) x = round_fp8(64.0 * x, config.fp8_flavor);
  };
  to_fp8(trace.initial_state.comp_keys);
  to_fp8(trace.steps[0].recorded.comp_keys);
  to_fp8(trace.steps[0].recorded.index_q);
  trace.steps[0].recorded.index_q.data[0] = fp8_max(config.fp8_flavor);
  trace.steps[0].recorded.index_q.data[1] = -fp8_max(config.fp8_flavor);
  // Step 2's index_q stays off the fp8 grid: it must fall back to floats.
  const std::string file = dir.file("t.h5");
  write_trace(trace, file);
  expect_round_trip(trace, read_trace(file), identity);
  const auto ds = datasets_by_path(file);
  EXPECT_EQ(ds.at("/steps/000000/outputs/index_q").dtype, "uint8 (e4m3fnuz)");
  EXPECT_EQ(ds.at("/steps/000000/outputs/comp_keys").dtype, "uint8 (e4m3fnuz)");
  EXPECT_EQ(ds.at("/initial_state/comp_keys").dtype, "uint8 (e4m3fnuz)");
  EXPECT_EQ(ds.at("/steps/000002/outputs/index_q").dtype, "float64");
  EXPECT_EQ(ds.at("/steps/000000/outputs/q").dtype, "float64");  // only the indexer's tensors
}

TEST(TraceIo, RefusesToReplaceAFileUnlessForced) {
  const ScratchDir dir;
  const Trace first = make_trace(kTraceSeed, Values::kBf16Exact);
  const Trace second = make_trace(kTraceSeed + 1, Values::kBf16Exact);
  const std::string file = dir.file("t.h5");
  write_trace(first, file);
  try {
    write_trace(second, file);
    FAIL() << "an existing file was replaced without overwrite";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + file + "' exists; pass --force to replace it"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_trace(file).seed, kTraceSeed);
  write_trace(second, file, {FloatStorage::kAuto, true});
  EXPECT_EQ(read_trace(file).seed, kTraceSeed + 1);
  EXPECT_TRUE(only_file_in(dir.path(), file));
}

TEST(TraceIo, AFailedWriteLeavesNoFileBehind) {
  const ScratchDir dir;
  Trace trace = make_trace(kTraceSeed, Values::kBf16Exact);
  trace.weights.o_proj = TensorD();  // the writer fails half way through
  const std::string file = dir.file("t.h5");
  EXPECT_THROW(write_trace(trace, file), InputError);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  try {
    write_trace(trace, dir.file("missing/t.h5"));
    FAIL() << "wrote into a missing directory";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(TraceIo, OutputsCanBeSkipped) {
  const ScratchDir dir;
  const Trace trace = make_trace(kTraceSeed, Values::kBf16Exact);
  const std::string file = dir.file("t.h5");
  write_trace(trace, file);
  TraceReadOptions options;
  options.load_outputs = false;
  const Trace read = read_trace(file, options);
  ASSERT_EQ(read.steps.size(), 3u);
  for (const TraceStep& s : read.steps) {
    EXPECT_TRUE(s.recorded.q.empty());
    EXPECT_TRUE(s.recorded.comp_tokens.shape.empty());
    EXPECT_FALSE(s.hidden.empty());
  }
}

TEST(TraceIo, InputsOnlyTraceWithoutInitialStateRoundTrips) {
  const ScratchDir dir;
  Trace trace = make_trace(kTraceSeed, Values::kBf16Exact);
  trace.initial_state = CacheSnapshot();
  for (TraceStep& s : trace.steps) s.recorded = RecordedStages();
  const std::string file = dir.file("t.h5");
  write_trace(trace, file);
  expect_round_trip(trace, read_trace(file), identity);
  const auto ds = datasets_by_path(file);
  EXPECT_EQ(ds.count("/initial_state/kv_slots"), 0u);
  EXPECT_EQ(ds.count("/steps/000000/outputs/q"), 0u);
  EXPECT_EQ(ds.count("/steps/000000/block_table_c"), 0u);  // optional inputs stay absent
}

}  // namespace
}  // namespace qsa
