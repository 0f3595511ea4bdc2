// Hostile traces (issue 8, docs/robustness.md): each category a trace from
// another engine, a truncated copy or a crafted file can fall into ends in a
// typed error whose message names the problem, never a crash, a hang or an
// allocation of what a header claims. Files are written with the project's
// writer and then edited through the HDF5 C API or at the byte level; the
// loader-level checks go through read_trace (which validates) or
// list_datasets (`qsa inspect`), the step-sequence checks through
// replay_trace. trace_bad_input_test.cpp covers the everyday mistakes; this
// file covers what only a broken or malicious file does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "harness/replay/replay.hpp"
#include "harness/trace/h5_attrs.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/h5_heap_string.hpp"
#include "harness/trace/h5_types.hpp"
#include "harness/trace/trace_io.hpp"
#include "tests/harness/trace_file_test.hpp"

namespace qsa {
namespace {

using testing_support::kTraceSeed;
using testing_support::make_trace;
using testing_support::ScratchDir;
using testing_support::Values;
using Bytes = std::vector<char>;

using testing_support::expect_error;
using testing_support::put_dataset;
using testing_support::remove_link;

void put_unwritten_dataset(hid_t f, const std::string& path, const std::vector<hsize_t>& dims) {
  const h5::Handle dcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dcpl"));
  std::vector<hsize_t> chunk(dims.size(), 1);
  h5::check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), "chunk");
  h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
  put_dataset(f, path, dims, H5T_IEEE_F64LE, nullptr, dcpl.get());
}

void put_attr(hid_t f, const std::string& obj, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
              const void* data) {
  const h5::Handle o(h5::check_id(H5Oopen(f, obj.c_str(), H5P_DEFAULT), obj), H5Oclose);
  if (h5::has_attr(o.get(), name)) h5::check(H5Adelete(o.get(), name.c_str()), name);
  const h5::Handle space = h5::own_space(h5::check_id(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      name));
  const h5::Handle a = h5::own_attr(
      h5::check_id(H5Acreate2(o.get(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), name));
  if (data != nullptr) h5::check(H5Awrite(a.get(), type, data), name);
}

void put_int_attr(hid_t f, const std::string& obj, const std::string& name, int64_t v) {
  put_attr(f, obj, name, H5T_NATIVE_INT64, {}, &v);
}

void put_double_attr(hid_t f, const std::string& obj, const std::string& name, double v) {
  put_attr(f, obj, name, H5T_NATIVE_DOUBLE, {}, &v);
}

Bytes load(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void store(const Bytes& b, const std::string& file) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(b.data(), static_cast<std::streamsize>(b.size()));
}

void put_le(Bytes& b, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b.at(at + i) = static_cast<char>((v >> (8 * i)) & 0xff);
}

size_t find_bytes(const Bytes& b, const std::string& needle, size_t from = 0) {
  for (size_t i = from; i + needle.size() <= b.size(); ++i)
    if (std::memcmp(&b[i], needle.data(), needle.size()) == 0) return i;
  ADD_FAILURE() << "byte pattern not found";
  return 0;
}

class AdversarialTrace : public testing_support::TraceFileTest {
 protected:
  template <class E>
  void expect_listing_error(const std::string& file, const std::vector<std::string>& substrings) {
    expect_error<E>([&] { list_datasets(file); }, substrings);
  }
};

// ---- shapes claiming huge sizes: refused from the header, before allocating --

TEST_F(AdversarialTrace, WeightClaimingAnExabyteIsRejectedBeforeAllocating) {
  const std::string file = patched([](hid_t f) { put_unwritten_dataset(f, "/weights/o_proj", {1ULL << 30, 1ULL << 30}); });
  EXPECT_LT(std::filesystem::file_size(file), std::uintmax_t{1} << 20);
  expect_read_error<InputError>(file, {"/weights/o_proj has shape [1073741824, 1073741824]", "memory limit",
                                       "--max-memory"});
}

TEST_F(AdversarialTrace, ElementCountOverflowingInt64IsRejected) {
  const std::string file = patched(
      [](hid_t f) { put_unwritten_dataset(f, "/steps/000000/outputs/q", {1ULL << 40, 1ULL << 40, 1ULL << 40}); });
  expect_read_error<InputError>(file, {"/steps/000000/outputs/q has shape [1099511627776, 1099511627776, "
                                       "1099511627776]",
                                       "9223372036854775807 elements", "memory limit"});
}

// HDF5 refuses to create a dimension of 2^63 or more, but a file can say so:
// a dataspace of 0x0123456789abcdef rows gets its top byte patched. HDF5 1.10
// then refuses to open the dataset (an IoError); the reader's own check
// ("impossible shape", an InputError) is the second line behind it.
TEST_F(AdversarialTrace, DimensionPastInt64IsRejected) {
  const uint64_t rows = 0x0123456789abcdefULL;
  const std::string file = patched([&](hid_t f) {
    const h5::Handle dcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dcpl"));
    h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_LATE), "alloc time");
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
    put_dataset(f, "/steps/000000/positions", {rows}, H5T_NATIVE_UINT8, nullptr, dcpl.get());
  });
  Bytes b = load(file);
  Bytes pattern(8, 0);
  put_le(pattern, 0, rows, 8);
  const std::string needle(pattern.begin(), pattern.end());
  int patched_dims = 0;  // the extent, and the maximum extent where stored
  for (auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end()); it != b.end();
       it = std::search(it + 8, b.end(), needle.begin(), needle.end())) {
    it[7] = static_cast<char>(0x81);
    ++patched_dims;
  }
  ASSERT_GE(patched_dims, 1);
  store(b, file);
  expect_read_error<QsaError>(file, {"/steps/000000/positions"});
}

TEST_F(AdversarialTrace, MemoryLimitIsConfigurable) {
  const std::string file = write(valid());
  TraceReadOptions tight;
  tight.max_bytes = 65536;
  expect_read_error<InputError>(file, {"memory limit of 65536 bytes", "--max-memory"}, tight);
  TraceReadOptions roomy;
  roomy.max_bytes = int64_t{16} << 20;
  EXPECT_NO_THROW(read_trace(file, roomy));
}

// A fixed-length string's size comes from the file's datatype message.
TEST_F(AdversarialTrace, FixedLengthStringPastTheCapIsRejected) {
  const std::string file = dir_.file("big-string.h5");
  {
    // Attributes over 64 KiB need the 1.8 file format (dense storage).
    const h5::Handle fapl = h5::own_plist(h5::check_id(H5Pcreate(H5P_FILE_ACCESS), "fapl"));
    h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "libver");
    const h5::Handle f = h5::own_file(h5::check_id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), file));
    const h5::Handle type = h5::own_type(h5::check_id(H5Tcopy(H5T_C_S1), "type"));
    h5::check(H5Tset_size(type.get(), h5::kMaxStringBytes + 1), "size");
    std::string value(h5::kMaxStringBytes + 1, '\0');
    std::memcpy(value.data(), "qsa-trace", 9);
    put_attr(f.get(), "/", "format", type.get(), {}, value.data());
  }
  expect_read_error<InputError>(file, {"/ attribute format is a fixed-length string of 16777217 bytes"});
}

// ---- variable-length strings: HDF5 1.10's global-heap reader is bypassed -----

// Offset of the heap collection and of the `format` attribute's descriptor
// (4-byte length 9, 8-byte collection address, 4-byte object index 1).
struct FormatString {
  size_t collection;
  size_t descriptor;
};

FormatString locate_format_string(const Bytes& b) {
  FormatString s{};
  s.collection = find_bytes(b, "GCOL");
  std::string pattern(16, '\0');
  Bytes d(16, 0);
  put_le(d, 0, 9, 4);
  put_le(d, 4, s.collection, 8);
  put_le(d, 12, 1, 4);
  pattern.assign(d.begin(), d.end());
  s.descriptor = find_bytes(b, pattern);
  EXPECT_EQ(std::string(&b[s.collection + 32], 9), "qsa-trace") << "object 1 is not the format string";
  return s;
}

class HeapCorruption : public AdversarialTrace {
 protected:
  // A valid trace whose bytes `corrupt` edits; read_trace must fail naming
  // the `format` attribute.
  void expect_corrupt(const std::function<void(Bytes&, const FormatString&)>& corrupt, const std::string& what) {
    const std::string file = write(valid());
    Bytes b = load(file);
    corrupt(b, locate_format_string(b));
    store(b, file);
    expect_read_error<IoError>(file, {"reading / attribute format", what});
  }
};

TEST_F(HeapCorruption, ObjectSizeThatWouldMakeHdf5CopyATebibyte) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.collection + 16 + 8, uint64_t{1} << 40, 8); },
                 "object 1 of the global heap collection at address");
}

TEST_F(HeapCorruption, ObjectSizeThatWouldMakeHdf5LoopForever) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.collection + 16 + 8, 4000, 8); },
                 "its descriptor says 9 bytes, object 1");
}

TEST_F(HeapCorruption, FreeSpaceOfSizeZero) {
  expect_corrupt(
      [](Bytes& b, const FormatString& s) {
        put_le(b, s.collection + 16, 0, 2);
        put_le(b, s.collection + 16 + 8, 0, 8);
      },
      "has size 0");
}

TEST_F(HeapCorruption, MissingObject) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.collection + 16, 999, 2); },
                 "object 1 is not in the global heap collection");
}

TEST_F(HeapCorruption, CollectionPastTheEndOfTheFile) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.collection + 8, uint64_t{1} << 50, 8); },
                 "claims 1125899906842624 bytes");
}

TEST_F(HeapCorruption, NoCollectionAtTheDescriptorsAddress) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.descriptor + 4, 96, 8); },
                 "no global heap collection");
}

TEST_F(HeapCorruption, DescriptorClaimingFourGigabytes) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.descriptor, 0xfffffff0u, 4); },
                 "its descriptor claims 4294967280 bytes");
}

TEST_F(HeapCorruption, DescriptorWithAnUndefinedAddress) {
  expect_corrupt([](Bytes& b, const FormatString& s) { put_le(b, s.descriptor + 4, ~uint64_t{0}, 8); },
                 "undefined address");
}

// The bypass reads what HDF5 wrote: empty strings, many strings over several
// collections, a long one in a collection of its own, and a file with a
// userblock (addresses relative to a base past it).
TEST_F(AdversarialTrace, VariableLengthStringsReadBackExactly) {
  const std::string file = dir_.file("strings.h5");
  const h5::Handle fcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_FILE_CREATE), "fcpl"));
  h5::check(H5Pset_userblock(fcpl.get(), 512), "userblock");
  std::vector<std::string> values = {"", "x", std::string(100000, 'L') + "ong", "ünïcode ✓"};
  for (int i = 0; i < 400; ++i) values.push_back("step name " + std::to_string(i) + std::string(i % 37, '.'));
  {
    const h5::Handle f = h5::own_file(h5::check_id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), file));
    const h5::Handle g = h5::create_group(f.get(), "g");
    for (size_t i = 0; i < values.size(); ++i) h5::write_attr_string(g.get(), "a" + std::to_string(i), values[i]);
  }
  EXPECT_EQ(load(file).size() > 512 && std::string(&load(file)[512], 4) == "\x89HDF", true) << "no userblock";
  const h5::Handle f = h5::open_file_read(file);
  const h5::Handle g = h5::open_group(f.get(), "/g");
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(h5::read_attr_string(g.get(), "/g", "a" + std::to_string(i)), values[i]) << "attribute " << i;
}

// ---- negative or overflowing indices ----------------------------------------

TEST_F(AdversarialTrace, NegativePage) {
  Trace t = valid();
  t.steps[2].meta.block_table.at(0, 1) = -7;
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "block_table[0, 1] = -7 is out of range"});
}

TEST_F(AdversarialTrace, QueryStartLocWhoseDifferenceOverflowsInt32) {
  Trace t = valid();
  // Each request alone passes (a chunk no longer than its sequence); the
  // second's length is INT32_MIN - INT32_MAX, which int32 cannot hold.
  t.steps[2].meta.query_start_loc = {0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  t.steps[2].meta.seq_lens = {std::numeric_limits<int32_t>::max(), 3};
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "/steps/000002/query_start_loc[2] = -2147483648 is negative"});
}

TEST_F(AdversarialTrace, NegativeSeqLens) {
  Trace t = valid();
  t.steps[0].meta.seq_lens = {-5};
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "seq_lens[0] = -5"});
}

TEST_F(AdversarialTrace, SlotMappingOfUint64PastInt64) {
  Trace t = valid();
  const size_t T = t.steps[2].meta.slot_mapping.size();
  std::vector<uint64_t> slots(t.steps[2].meta.slot_mapping.begin(), t.steps[2].meta.slot_mapping.end());
  slots[0] = ~uint64_t{0};
  const std::string file = write(t);
  {
    h5::Handle f = h5::open_file_write(file);
    put_dataset(f.get(), "/steps/000002/slot_mapping", {T}, H5T_NATIVE_UINT64, slots.data());
  }
  expect_read_error<InputError>(file, {"step 2 ('mixed')", "slot_mapping[0]"});
}

TEST_F(AdversarialTrace, NegativeAndHugeGeometry) {
  expect_read_error<InputError>(patched([](hid_t f) { put_int_attr(f, "/geometry", "num_pages", -3); }),
                                {"/geometry num_pages = -3", "must be in [1, 2147483647]"});
  expect_read_error<InputError>(patched([](hid_t f) { put_int_attr(f, "/geometry", "num_ring_blocks", int64_t{1} << 40); }),
                                {"num_ring_blocks = 1099511627776", "must be in [1, 2147483647]"});
}

TEST_F(AdversarialTrace, NegativeInitialStateSlot) {
  Trace t = valid();
  t.initial_state.kv_slots.data[0] = -1;
  expect_rejected<InputError>(t, {"/initial_state/kv_slots[0] = -1 is out of range [0, 128)"});
}

TEST_F(AdversarialTrace, RecordedTokenIndexBelowMinusOne) {
  Trace t = valid();
  t.steps[1].recorded.token_idx.data[0] = -2;
  expect_rejected<InputError>(t, {"step 1 ('decode')", "outputs/token_idx[0, 0] = -2 is out of range [-1, "});
}

// ---- page tables and slots pointing past the cache ---------------------------

TEST_F(AdversarialTrace, PageOnePastTheCache) {
  Trace t = valid();
  t.steps[0].meta.block_table.at(0, 0) = static_cast<int32_t>(t.geometry.num_pages);
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "block_table[0, 0] = 8 is out of range (cache has 8 pages"});
}

TEST_F(AdversarialTrace, CompressedPageTablePastTheCache) {
  Trace t = valid();
  t.steps[2].meta.block_table_c.at(1, 0) = 1000;
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "block_table_c[1, 0] = 1000 is out of range"});
}

TEST_F(AdversarialTrace, RingBlockPastTheCache) {
  Trace t = valid();
  t.steps[2].meta.ring_blocks = {3, 8};
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "ring block 8 of request 1 is out of range (there are 8)"});
}

TEST_F(AdversarialTrace, SlotMappingPastTheCache) {
  Trace t = valid();
  t.steps[2].meta.slot_mapping[0] = t.geometry.num_pages * t.config.page_size;
  expect_rejected<InputError>(t, {"step 2 ('mixed')", "slot_mapping[0]"});
}

TEST_F(AdversarialTrace, InitialRingSlotPastTheCache) {
  Trace t = valid();
  t.initial_state.ring_slots.data[1] = 1 << 20;
  expect_rejected<InputError>(t, {"/initial_state/ring_slots[1] = 1048576 is out of range"});
}

TEST_F(AdversarialTrace, RecordedCompressedSlotPastTheCache) {
  Trace t = valid();
  t.steps[0].recorded.comp_slots.data[0] = t.geometry.num_pages * t.config.compressed_rows_per_page();
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "outputs/comp_slots[0] = 32 is out of range [0, 32)"});
}

// ---- inconsistent step sequences ----------------------------------------------

TEST_F(AdversarialTrace, NumStepsThatDisagrees) {
  expect_read_error<InputError>(patched([](hid_t f) { put_int_attr(f, "/steps", "num_steps", 2); }),
                                {"/steps holds 3 entries but its attribute num_steps = 2"});
  expect_read_error<InputError>(patched([](hid_t f) { put_int_attr(f, "/steps", "num_steps", -1); }),
                                {"num_steps = -1"});
}

TEST_F(AdversarialTrace, GapInTheStepNumbering) {
  const std::string file = patched([](hid_t f) {
    h5::check(H5Lmove(f, "/steps/000001", f, "/steps/000007", H5P_DEFAULT, H5P_DEFAULT), "move");
  });
  expect_read_error<InputError>(file, {"missing group /steps/000001"});
}

TEST_F(AdversarialTrace, ForeignEntryAmongTheSteps) {
  const std::string file = patched([](hid_t f) {
    const int32_t x = 1;
    put_dataset(f, "/steps/notes", {1}, H5T_NATIVE_INT32, &x);
    put_int_attr(f, "/steps", "num_steps", 4);
  });
  expect_read_error<InputError>(file, {"missing group /steps/000003"});
}

TEST_F(AdversarialTrace, StepThatIsADataset) {
  const std::string file = patched([](hid_t f) {
    remove_link(f, "/steps/000001");
    const int32_t x = 1;
    put_dataset(f, "/steps/000001", {1}, H5T_NATIVE_INT32, &x);
  });
  expect_read_error<IoError>(file, {"/steps/000001"});
}

// The loader checks each step on its own; what only the order of steps can
// contradict is found when the steps run, still as an InputError.
TEST_F(AdversarialTrace, ReuseStepBeforeAnySelectingStep) {
  Trace t = valid();
  t.steps.erase(t.steps.begin());  // the decode step is now first and reuses
  const Trace loaded = read_trace(write(t));
  ReplayOptions options;
  options.mode = ReplayMode::kChained;
  expect_error<InputError>([&] { replay_trace(loaded, "t.h5", options); },
                           {"an MTP reuse step came before any selecting step"});
}

TEST_F(AdversarialTrace, StepReadingContextThatWasNeverWritten) {
  Trace t = valid();
  t.steps.erase(t.steps.begin(), t.steps.begin() + 2);  // the mixed step's context was never written
  const Trace loaded = read_trace(write(t));
  ReplayOptions options;
  options.mode = ReplayMode::kChained;
  expect_error<InputError>([&] { replay_trace(loaded, "t.h5", options); }, {"was never written"});
}

// ---- NaN and Inf ------------------------------------------------------------------

TEST_F(AdversarialTrace, NanInANormWeight) {
  Trace t = valid();
  t.weights.q_norm.data[3] = NAN;
  expect_rejected<InputError>(t, {"weight q_norm holds a non-finite value nan at flat index 3"});
}

TEST_F(AdversarialTrace, InfInTheInitialState) {
  Trace t = valid();
  t.initial_state.kv_k.data[1] = INFINITY;
  expect_rejected<InputError>(t, {"/initial_state/kv_k[0, 0, 1] is +inf"});
  t = valid();
  t.initial_state.ring_keys.data[0] = -INFINITY;
  expect_rejected<InputError>(t, {"/initial_state/ring_keys[0, 0] is -inf"});
}

TEST_F(AdversarialTrace, NanFp8CodeInTheInitialState) {
  // variant_config's fp8 flavour is e4m3fnuz, whose only NaN is code 0x80.
  const Trace t = valid();
  const auto c = static_cast<hsize_t>(t.initial_state.comp_keys.dim(0)), d = static_cast<hsize_t>(t.config.indexer_head_dim);
  std::vector<uint8_t> codes(c * d, 0x38);
  codes[d + 2] = 0x80;
  const std::string file = patched([&](hid_t f) {
    put_dataset(f, "/initial_state/comp_keys", {c, d}, H5T_NATIVE_UINT8, codes.data());
    const h5::Handle ds = h5::open_dataset(f, "/initial_state/comp_keys");
    h5::write_attr_string(ds.get(), "encoding", "e4m3fnuz");
  });
  expect_read_error<InputError>(file, {"/initial_state/comp_keys[1, 2] is NaN"});
}

TEST_F(AdversarialTrace, NonFiniteConfigFloats) {
  expect_read_error<ConfigError>(patched([](hid_t f) { put_double_attr(f, "/config", "rope_theta", NAN); }),
                                 {"/config", "rope_theta = nan must be positive and finite"});
  expect_read_error<ConfigError>(patched([](hid_t f) { put_double_attr(f, "/config", "k_scale", INFINITY); }),
                                 {"/config", "k_scale = inf"});
}

// NaN in a recorded output is what an engine produced: a finding for the
// comparator, not a malformed trace (docs/trace-format.md).
TEST_F(AdversarialTrace, NanInARecordedOutputIsKept) {
  Trace t = valid();
  t.steps[0].recorded.out.data[4] = NAN;
  const Trace loaded = read_trace(write(t));
  EXPECT_TRUE(std::isnan(loaded.steps[0].recorded.out.data[4]));
}

// ---- truncated files and datasets ---------------------------------------------

TEST_F(AdversarialTrace, FileCutByOneByte) {
  const std::string file = write(valid());
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  expect_read_error<IoError>(file, {"'" + file + "'", "truncated"});
}

TEST_F(AdversarialTrace, FileCutInsideTheSuperblock) {
  const std::string file = write(valid());
  std::filesystem::resize_file(file, 40);
  expect_read_error<IoError>(file, {"'" + file + "'"});
}

TEST_F(AdversarialTrace, EmptyFile) {
  const std::string file = dir_.file("empty.h5");
  store({}, file);
  expect_read_error<IoError>(file, {"'" + file + "'", "not an HDF5 file"});
}

TEST_F(AdversarialTrace, HiddenWithFewerRowsThanPositions) {
  Trace t = valid();
  t.steps[0].hidden = testing_support::random_floats({3, t.config.hidden_size}, kTraceSeed, "short", Values::kBf16Exact);
  expect_rejected<InputError>(t, {"step 0 ('prefill')", "hidden has 3 rows but positions has 5 columns (T)"});
}

// A compressed chunk whose bytes were overwritten: the dataset's header is
// intact, its data cannot be decoded.
TEST_F(AdversarialTrace, CorruptCompressedChunk) {
  const std::string file = write(valid());
  haddr_t chunk_addr = 0;
  hsize_t chunk_size = 0;
  {
    h5::Handle f = h5::open_file_write(file);
    const h5::Handle dcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dcpl"));
    const hsize_t chunk[2] = {5, 64};
    h5::check(H5Pset_chunk(dcpl.get(), 2, chunk), "chunk");
    h5::check(H5Pset_deflate(dcpl.get(), 6), "deflate");
    const std::vector<double> hidden(5 * 64, 0.25);
    put_dataset(f.get(), "/steps/000000/hidden", {5, 64}, H5T_NATIVE_DOUBLE, hidden.data(), dcpl.get());
    const h5::Handle d = h5::open_dataset(f.get(), "/steps/000000/hidden");
    const h5::Handle space = h5::own_space(h5::check_id(H5Dget_space(d.get()), "space"));
    hsize_t offset[2] = {0, 0};
    unsigned mask = 0;
    h5::check(H5Dget_chunk_info(d.get(), space.get(), 0, offset, &mask, &chunk_addr, &chunk_size), "chunk info");
  }
  Bytes b = load(file);
  ASSERT_GT(chunk_size, 8u);
  for (hsize_t i = 2; i < chunk_size; ++i) b.at(chunk_addr + i) = static_cast<char>(0xa5 ^ i);
  store(b, file);
  expect_read_error<IoError>(file, {"reading /steps/000000/hidden"});
}

// ---- wrong types ----------------------------------------------------------------

TEST_F(AdversarialTrace, StringDatasetWhereFloatsBelong) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle type = h5::utf8_string_type();
    std::vector<const char*> strings(5 * 64, "0.5");
    put_dataset(f, "/steps/000000/hidden", {5, 64}, type.get(), strings.data());
  });
  expect_read_error<InputError>(file, {"/steps/000000/hidden has dtype string, expected floats"});
}

TEST_F(AdversarialTrace, CompoundWhereIntegersBelong) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle type = h5::own_type(h5::check_id(H5Tcreate(H5T_COMPOUND, 8), "compound"));
    h5::check(H5Tinsert(type.get(), "a", 0, H5T_NATIVE_INT32), "a");
    h5::check(H5Tinsert(type.get(), "b", 4, H5T_NATIVE_INT32), "b");
    const int32_t pairs[2] = {0, 1};
    put_dataset(f, "/steps/000000/block_table", {1, 1}, type.get(), pairs);
  });
  expect_read_error<InputError>(file, {"/steps/000000/block_table has dtype compound, expected integers"});
}

TEST_F(AdversarialTrace, BoolFlagStoredAsAnEnum) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle type = h5::own_type(h5::check_id(H5Tenum_create(H5T_NATIVE_INT8), "enum"));
    int8_t v = 0;
    h5::check(H5Tenum_insert(type.get(), "FALSE", &v), "FALSE");
    v = 1;
    h5::check(H5Tenum_insert(type.get(), "TRUE", &v), "TRUE");
    put_attr(f, "/config", "count_column", type.get(), {}, &v);
  });
  expect_read_error<InputError>(file, {"/config attribute count_column has dtype enum", "write int 0/1"});
}

TEST_F(AdversarialTrace, AttributesOfTheWrongKind) {
  expect_read_error<InputError>(patched([](hid_t f) { put_int_attr(f, "/config", "rope_style", 1); }),
                                {"/config attribute rope_style has dtype int64, expected a string"});
  expect_read_error<InputError>(patched([](hid_t f) { put_double_attr(f, "/config", "head_dim", 32.0); }),
                                {"/config attribute head_dim has dtype float64, expected an integer"});
  const int64_t two[2] = {3, 3};
  expect_read_error<InputError>(
      patched([&](hid_t f) { put_attr(f, "/steps", "num_steps", H5T_NATIVE_INT64, {2}, two); }),
      {"/steps attribute num_steps holds 2 values, expected one"});
}

TEST_F(AdversarialTrace, StringAttributeWithANullDataspace) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle type = h5::utf8_string_type();
    const h5::Handle space = h5::own_space(h5::check_id(H5Screate(H5S_NULL), "null space"));
    const h5::Handle root = h5::open_group(f, "/");
    h5::check(H5Adelete(root.get(), "format"), "format");
    h5::own_attr(h5::check_id(H5Acreate2(root.get(), "format", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), "a"));
  });
  expect_read_error<InputError>(file, {"/ attribute format holds 0 values, expected one"});
}

TEST_F(AdversarialTrace, VariableLengthSequenceWhereAStringBelongs) {
  const std::string file = patched([](hid_t f) {
    const h5::Handle type = h5::own_type(h5::check_id(H5Tvlen_create(H5T_NATIVE_INT32), "vlen"));
    int32_t values[3] = {1, 2, 3};
    hvl_t v{3, values};
    put_attr(f, "/", "format", type.get(), {}, &v);
  });
  expect_read_error<InputError>(file, {"/ attribute format has dtype vlen, expected a string"});
}

TEST_F(AdversarialTrace, NamedDatatypeWhereADatasetBelongs) {
  const std::string file = patched([](hid_t f) {
    remove_link(f, "/weights/q_norm");
    const h5::Handle type = h5::own_type(h5::check_id(H5Tcopy(H5T_NATIVE_DOUBLE), "type"));
    h5::check(H5Tcommit2(f, "/weights/q_norm", type.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "commit");
  });
  expect_read_error<InputError>(file, {"/weights/q_norm is a named datatype, expected a dataset"});
}

TEST_F(AdversarialTrace, ScalarWhereAMatrixBelongs) {
  const double x = 1.0;
  expect_read_error<InputError>(
      patched([&](hid_t f) { put_dataset(f, "/steps/000000/hidden", {}, H5T_NATIVE_DOUBLE, &x); }),
      {"/steps/000000/hidden has rank 0", "expected rank 2"});
}

TEST_F(AdversarialTrace, DatasetWhereTheOutputsGroupBelongs) {
  const int32_t x = 1;
  const std::string file = patched([&](hid_t f) { put_dataset(f, "/steps/000000/outputs", {1}, H5T_NATIVE_INT32, &x); });
  expect_read_error<QsaError>(file, {"/steps/000000/outputs"});
}

// ---- deep or cyclic group structures --------------------------------------------

TEST_F(AdversarialTrace, HardLinkCycle) {
  const std::string file = patched([](hid_t f) {
    h5::check(H5Lcreate_hard(f, "/", f, "/steps/000000/outputs/loop", H5P_DEFAULT, H5P_DEFAULT), "cycle");
  });
  EXPECT_NO_THROW(read_trace(file));  // the loader opens datasets by name only
  expect_listing_error<InputError>(file, {"/steps/000000/outputs/loop is a hard link back to /",
                                          "the groups form a cycle"});
}

TEST_F(AdversarialTrace, TwoLinksBackToTheRoot) {
  const std::string file = patched([](hid_t f) {
    h5::check(H5Lcreate_hard(f, "/", f, "/a", H5P_DEFAULT, H5P_DEFAULT), "a");
    h5::check(H5Lcreate_hard(f, "/", f, "/b", H5P_DEFAULT, H5P_DEFAULT), "b");
  });
  expect_listing_error<InputError>(file, {"/a is a hard link back to /"});
}

TEST_F(AdversarialTrace, SharedGroupIsListedOnce) {
  const std::string plain = write(valid(), "plain.h5");
  const size_t expected = list_datasets(plain).size();
  const std::string file = patched([](hid_t f) {
    h5::check(H5Lcreate_hard(f, "/weights", f, "/weights_again", H5P_DEFAULT, H5P_DEFAULT), "shared");
  });
  EXPECT_EQ(list_datasets(file).size(), expected);
  EXPECT_NO_THROW(read_trace(file));
}

// 30 levels of groups, each linking twice to the next: 2^30 paths through 31
// groups. Before groups were listed once, `qsa inspect` walked every path (a
// hang); the depth limit alone only stops cycles.
TEST_F(AdversarialTrace, ChainOfSharedGroupsIsWalkedOnce) {
  const std::string plain = write(valid(), "plain.h5");
  const size_t expected = list_datasets(plain).size() + 1;
  const std::string file = patched([](hid_t f) {
    std::string group = "/chain";
    h5::create_group(f, group);
    for (int i = 0; i < 30; ++i) {
      h5::create_group(f, group + "/x");
      h5::check(H5Lcreate_hard(f, (group + "/x").c_str(), f, (group + "/y").c_str(), H5P_DEFAULT, H5P_DEFAULT),
                "second link");
      group += "/x";
    }
    const int32_t x = 1;
    put_dataset(f, group + "/leaf", {1}, H5T_NATIVE_INT32, &x);
  });
  const std::vector<DatasetInfo> listed = list_datasets(file);
  EXPECT_EQ(listed.size(), expected);
  EXPECT_NO_THROW(read_trace(file));
}

TEST_F(AdversarialTrace, DeeplyNestedGroups) {
  const std::string file = patched([](hid_t f) {
    std::string path = "/steps/000000/outputs";
    for (int i = 0; i < 40; ++i) {
      path += "/d" + std::to_string(i);
      h5::create_group(f, path);
    }
  });
  EXPECT_NO_THROW(read_trace(file));
  expect_listing_error<InputError>(file, {"nests deeper than 32 groups"});
}

TEST_F(AdversarialTrace, SoftLinkToItself) {
  const std::string file = patched([](hid_t f) {
    remove_link(f, "/steps/000000/hidden");
    h5::check(H5Lcreate_soft("/steps/000000/hidden", f, "/steps/000000/hidden", H5P_DEFAULT, H5P_DEFAULT), "soft");
  });
  expect_read_error<IoError>(file, {"/steps/000000/hidden"});
}

TEST_F(AdversarialTrace, StepGroupThatIsTheStepsGroupAgain) {
  const std::string file = patched([](hid_t f) {
    h5::check(H5Lcreate_hard(f, "/steps", f, "/steps/000003", H5P_DEFAULT, H5P_DEFAULT), "cycle");
    put_int_attr(f, "/steps", "num_steps", 4);
  });
  expect_read_error<InputError>(file, {"/steps/000003 has no attribute 'mtp_reuse'"});
}

}  // namespace
}  // namespace qsa
