// Every way a trace file can be wrong (docs/trace-format.md, "Validation")
// ends in a typed error whose message names the file problem, the dataset or
// attribute, and the step: IoError for files that cannot be read, InputError
// for contents, ConfigError for an impossible config. Broken files are made
// from a valid trace, either in memory before writing or by patching the
// written file through the HDF5 wrapper.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "harness/trace/h5_attrs.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/trace_io.hpp"
#include "tests/harness/trace_file_test.hpp"

namespace qsa {
namespace {

using testing_support::kTraceSeed;
using testing_support::make_trace;
using testing_support::ScratchDir;
using testing_support::Values;

using testing_support::expect_error;
using testing_support::put_dataset;
using testing_support::remove_link;

// Every suite here starts from a valid written trace (trace_file_test.hpp).
class TraceBadInput : public testing_support::TraceFileTest {};

void replace_attr_string(hid_t file, const std::string& group, const std::string& name, const std::string& v) {
  const h5::Handle g = h5::open_group(file, group);
  h5::check(H5Adelete(g.get(), name.c_str()), name);
  h5::write_attr_string(g.get(), name, v);
}

void replace_attr_int(hid_t file, const std::string& group, const std::string& name, int64_t v) {
  const h5::Handle g = h5::open_group(file, group);
  h5::check(H5Adelete(g.get(), name.c_str()), name);
  h5::write_attr_int(g.get(), name, v);
}

// ---- files that cannot be read ---------------------------------------------

TEST_F(TraceBadInput, NonexistentFile) {
  const std::string file = dir_.file("nope.h5");
  expect_read_error<IoError>(file, {"'" + file + "'", "no such file"});
}

TEST_F(TraceBadInput, NotAnHdf5File) {
  const std::string file = dir_.file("garbage.h5");
  std::ofstream(file, std::ios::binary) << std::string(4096, '\x5a') << "not hdf5 at all";
  expect_read_error<IoError>(file, {"'" + file + "'", "not an HDF5 file"});
  expect_error<IoError>([&] { list_datasets(file); }, {"not an HDF5 file"});
}

TEST_F(TraceBadInput, TruncatedFile) {
  const std::string file = write(valid());
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  expect_read_error<IoError>(file, {"'" + file + "'", "truncated"});
}

TEST_F(TraceBadInput, NotATrace) {
  expect_read_error<InputError>(patched([](hid_t f) { replace_attr_string(f, "/", "format", "netcdf"); }),
                                {"format is 'netcdf'", "not a qsa trace"});
}

TEST_F(TraceBadInput, UnknownSchemaVersion) {
  Trace t = valid();
  t.schema_version = 7;
  expect_rejected<InputError>(t, {"unknown schema version 7 (this qsa reads version 1)"});
}

// ---- missing or malformed datasets and attributes -------------------------

TEST_F(TraceBadInput, MissingDataset) {
  expect_read_error<InputError>(patched([](hid_t f) { remove_link(f, "/steps/000001/seq_lens"); }),
                                {"missing dataset /steps/000001/seq_lens"});
}

TEST_F(TraceBadInput, MissingWeight) {
  expect_read_error<InputError>(patched([](hid_t f) { remove_link(f, "/weights/o_proj"); }),
                                {"missing dataset /weights/o_proj"});
}

TEST_F(TraceBadInput, MissingConfigAttribute) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle g = h5::open_group(f, "/config");
    h5::check(H5Adelete(g.get(), "p_rounding"), "p_rounding");
  });
  expect_read_error<InputError>(file, {"/config has no attribute 'p_rounding'"});
}

TEST_F(TraceBadInput, UnknownConfigName) {
  expect_read_error<InputError>(patched([](hid_t f) { replace_attr_string(f, "/config", "kv_dtype", "fp4"); }),
                                {"/config attribute kv_dtype", "unknown KV dtype 'fp4'"});
}

TEST_F(TraceBadInput, ConfigAttributeOfTheWrongType) {
  expect_read_error<InputError>(patched([](hid_t f) { replace_attr_string(f, "/config", "head_dim", "32"); }),
                                {"/config attribute head_dim has dtype string, expected an integer"});
}

TEST_F(TraceBadInput, ImpossibleConfig) {
  Trace t = valid();
  t.config.num_heads = 3;
  expect_rejected<ConfigError>(t, {"/config", "num_attention_heads = 3"});
}

TEST_F(TraceBadInput, FlagThatIsNotZeroOrOne) {
  expect_read_error<InputError>(patched([](hid_t f) { replace_attr_int(f, "/steps/000001", "mtp_reuse", 2); }),
                                {"/steps/000001 attribute mtp_reuse = 2, expected 0 or 1"});
}

TEST_F(TraceBadInput, NumStepsDisagreesWithTheGroups) {
  expect_read_error<InputError>(patched([](hid_t f) { replace_attr_int(f, "/steps", "num_steps", 4); }),
                                {"/steps holds 3 entries but its attribute num_steps = 4"});
}

TEST_F(TraceBadInput, WrongRank) {
  Trace t = valid();
  t.weights.q_norm.shape = {1, t.config.head_dim};
  expect_rejected<InputError>(t, {"/weights/q_norm has rank 2 (shape [1, 32]), expected rank 1"});
}

TEST_F(TraceBadInput, WrongHiddenShape) {
  Trace t = valid();
  t.steps[0].hidden = testing_support::random_floats({5, 63}, kTraceSeed, "bad hidden", Values::kBf16Exact);
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "/steps/000000/hidden has shape [5, 63], expected [T, hidden]"});
}

TEST_F(TraceBadInput, BlockTableWithTooFewRows) {
  Trace t = valid();
  t.steps[2].meta.block_table.shape = {1, 2};
  t.steps[2].meta.block_table.data.resize(2);
  expect_rejected<InputError>(t, {"/steps/000002/block_table has shape [1, 2], expected [R, pages] with R = 2 rows"});
}

TEST_F(TraceBadInput, FloatBlockTable) {
  const std::vector<double> table = {0.0, 1.0};
  const std::string file = patched(
      [&](hid_t f) { put_dataset(f, "/steps/000000/block_table", {1, 2}, H5T_NATIVE_DOUBLE, table.data()); });
  expect_read_error<InputError>(file, {"/steps/000000/block_table has dtype float64, expected integers"});
}

TEST_F(TraceBadInput, IdsThatDoNotFitInt32) {
  const std::vector<int64_t> qsl = {0, int64_t{1} << 40};
  const std::string file = patched(
      [&](hid_t f) { put_dataset(f, "/steps/000000/query_start_loc", {2}, H5T_NATIVE_INT64, qsl.data()); });
  expect_read_error<InputError>(file, {"/steps/000000/query_start_loc holds 1099511627776", "int32"});
}

TEST_F(TraceBadInput, CodesWithoutAnEncoding) {
  const std::vector<uint8_t> codes(5 * 64, 3);
  const std::string file = patched(
      [&](hid_t f) { put_dataset(f, "/steps/000000/hidden", {5, 64}, H5T_NATIVE_UINT8, codes.data()); });
  expect_read_error<InputError>(file, {"/steps/000000/hidden has dtype uint8, expected floats"});
}

TEST_F(TraceBadInput, UnknownFp8Encoding) {
  const std::vector<uint8_t> codes(5 * 64, 3);
  const std::string file = patched([&](hid_t f) {
    put_dataset(f, "/steps/000000/hidden", {5, 64}, H5T_NATIVE_UINT8, codes.data());
    const h5::Handle d = h5::open_dataset(f, "/steps/000000/hidden");
    h5::write_attr_string(d.get(), "encoding", "e5m2");
  });
  expect_read_error<InputError>(file, {"/steps/000000/hidden attribute encoding", "unknown fp8 flavour 'e5m2'"});
}

TEST_F(TraceBadInput, GroupWhereADatasetBelongs) {
  const std::string file = patched([](hid_t f) {
    remove_link(f, "/steps/000000/hidden");
    h5::create_group(f, "/steps/000000/hidden");
  });
  expect_read_error<InputError>(file, {"/steps/000000/hidden is a group, expected a dataset"});
}

// ---- the memory guard ---------------------------------------------------

// A header claiming 6.4e13 elements, never written (no chunk exists, no fill):
// the file stays tiny and the reader must refuse before allocating.
TEST_F(TraceBadInput, HugeDataspaceIsRejectedBeforeAllocating) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle dcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dcpl"));
    const hsize_t chunk[2] = {1024, 64};
    h5::check(H5Pset_chunk(dcpl.get(), 2, chunk), "chunk");
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
    put_dataset(f, "/steps/000000/hidden", {1000000000000ULL, 64}, H5T_IEEE_F64LE, nullptr, dcpl.get());
  });
  EXPECT_LT(std::filesystem::file_size(file), std::uintmax_t{1} << 20);
  expect_read_error<InputError>(file, {"/steps/000000/hidden has shape [1000000000000, 64]", "memory limit"});
}

TEST_F(TraceBadInput, MemoryLimitCountsTheWholeTrace) {
  TraceReadOptions options;
  options.max_bytes = 100000;  // the weights alone take more as fp64
  expect_read_error<InputError>(write(valid()), {"memory limit of 100000 bytes"}, options);
}

// ---- contents that validation rejects -------------------------------------

TEST_F(TraceBadInput, NanInHidden) {
  Trace t = valid();
  t.steps[0].hidden.at(2, 17) = NAN;
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "hidden[2, 17] is NaN"});
}

TEST_F(TraceBadInput, InfInWeights) {
  Trace t = valid();
  t.weights.k_proj.data[7] = INFINITY;
  expect_rejected<InputError>(t, {"weight k_proj", "non-finite"});
}

TEST_F(TraceBadInput, OutOfRangeBlockTablePage) {
  Trace t = valid();
  t.steps[2].meta.block_table.at(0, 1) = 9000;
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "block_table[0, 1] = 9000 is out of range"});
}

TEST_F(TraceBadInput, NonMonotoneQueryStartLoc) {
  Trace t = valid();
  t.steps[2].meta.query_start_loc = {0, 3, 2};
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "query_start_loc is not increasing at request 1"});
}

TEST_F(TraceBadInput, SeqLensShorterThanTheChunk) {
  Trace t = valid();
  t.steps[0].meta.seq_lens = {3};
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "seq_lens[0] = 3 is shorter than the request's chunk of 5"});
}

TEST_F(TraceBadInput, SlotMappingThatDisagrees) {
  Trace t = valid();
  t.steps[2].meta.slot_mapping[1] += 1;
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "slot_mapping[1]", "disagrees with the block table"});
}

TEST_F(TraceBadInput, RecordedOutputWithTheWrongShape) {
  Trace t = valid();
  t.steps[0].recorded.q = testing_support::random_floats({5, 4, 33}, kTraceSeed, "bad q", Values::kBf16Exact);
  expect_rejected<InputError>(t, {"/steps/000000/outputs/q has shape [5, 4, 33], expected [T, H, D] = [5, 4, 32]"});
}

TEST_F(TraceBadInput, CompressedOutputsOfDifferentLengths) {
  Trace t = valid();
  t.steps[0].recorded.comp_keys =
      testing_support::random_floats({2, 32}, kTraceSeed, "bad comp_keys", Values::kBf16Exact);
  expect_rejected<InputError>(t, {"/steps/000000/outputs/comp_keys has shape [2, 32]", "n from"});
}

TEST_F(TraceBadInput, InitialStateSlotOutOfRange) {
  Trace t = valid();
  t.initial_state.kv_slots.data[1] = 500;
  expect_rejected<InputError>(t, {"/initial_state/kv_slots[1] = 500 is out of range [0, 128)"});
}

TEST_F(TraceBadInput, InitialStateFamilyWithAMissingDataset) {
  expect_read_error<InputError>(patched([](hid_t f) { remove_link(f, "/initial_state/ring_rope"); }),
                                {"/initial_state/ring_rope is missing", "go together"});
}

}  // namespace
}  // namespace qsa
