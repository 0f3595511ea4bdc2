// qsa_fuzz_seeds CORPUS_DIR REGRESSION_DIR: writes the trace fuzzer's seed
// corpus (tests/fuzz/corpus) and the hand-made regression files for the
// global-heap corruptions HDF5 1.10 cannot survive (tests/fuzz/regressions).
// The traces use a micro config (hidden 16, head_dim 8) so that each file is
// a few KB of data in HDF5's own structures, which is what the fuzzer should
// mutate. Regenerate with:
//   cmake --build build/cpu --target qsa_fuzz_seeds
//   build/cpu/harness/fuzz/qsa_fuzz_seeds tests/fuzz/corpus tests/fuzz/regressions
// Files are rewritten in place; the `created` attribute makes bytes differ
// between runs, nothing else does.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "harness/gen/generator.hpp"
#include "harness/trace/h5_attrs.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/trace_io.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<char>;

QsaConfig micro_config() {
  QsaConfig c = config_preset("tiny");
  c.hidden_size = 16;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.rotary_dim = 4;
  c.mrope_section = {1, 1, 0};
  c.indexer_heads = 1;
  c.indexer_head_dim = 8;
  c.budget = 8;
  c.compress_ratio = 4;
  c.page_size = 16;
  return c;
}

GenOptions micro_options() {
  GenOptions o;
  o.seed = 7;
  o.prompt_lens = {6};
  o.decode_steps = 1;
  o.mtp_drafts = 0;
  o.padding = 1;
  o.sinks = 1;
  o.needle_fractions = {0.5};
  return o;
}

// Every optional input a step can carry, and an initial cache state.
void add_optional_inputs(Trace& t) {
  for (TraceStep& s : t.steps) {
    const StepLayout layout = derive_step_layout(t.config, t.geometry, s.meta);
    s.meta.block_table_c = s.meta.block_table;
    s.meta.ring_blocks = layout.ring_blocks;
    s.meta.slot_mapping = layout.main_slot;
  }
  const QsaConfig& c = t.config;
  const int64_t G = c.num_kv_heads, D = c.head_dim, dI = c.indexer_head_dim;
  // The cache's last rows, which the steps do not write.
  const int64_t kv_rows = t.geometry.num_pages * c.page_size;
  const int64_t ring_rows = t.geometry.num_ring_blocks * c.ring_capacity();
  const int64_t comp_rows = t.geometry.num_pages * c.compressed_rows_per_page();
  CacheSnapshot& s = t.initial_state;
  s.kv_slots = TensorI64({2});
  s.kv_slots.data = {kv_rows - 2, kv_rows - 1};
  s.kv_positions = TensorI64({2});
  s.kv_positions.data = {0, 1};
  s.kv_k = TensorD({2, G, D});
  s.kv_v = TensorD({2, G, D});
  for (int64_t i = 0; i < s.kv_k.numel(); ++i) s.kv_k.data[i] = s.kv_v.data[i] = 0.25 * static_cast<double>(i % 4);
  s.ring_slots = TensorI64({1});
  s.ring_slots.data = {ring_rows - 1};
  s.ring_positions = TensorI64({1});
  s.ring_positions.data = {1};
  s.ring_rope = TensorI64({1, 3});
  s.ring_rope.data = {1, 1, 1};
  s.ring_keys = TensorD({1, dI});
  s.comp_slots = TensorI64({1});
  s.comp_slots.data = {comp_rows - 1};
  s.comp_blocks = TensorI64({1});
  s.comp_blocks.data = {0};
  s.comp_keys = TensorD({1, dI});
}

void write(const Trace& t, const fs::path& file, FloatStorage floats = FloatStorage::kAuto) {
  write_trace(t, file.string(), {floats, true});
  std::printf("wrote %s (%ju bytes)\n", file.c_str(), static_cast<uintmax_t>(fs::file_size(file)));
}

Bytes load(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void store(const Bytes& bytes, const fs::path& file) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("wrote %s (%zu bytes)\n", file.c_str(), bytes.size());
}

// Copies `from` to `to` and lets `patch` edit the copy through HDF5.
void patched(const fs::path& from, const fs::path& to, const std::function<void(hid_t)>& patch) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  h5::Handle f = h5::open_file_write(to.string());
  patch(f.get());
  h5::check(f.reset(), "closing " + to.string());
  std::printf("wrote %s (%ju bytes)\n", to.c_str(), static_cast<uintmax_t>(fs::file_size(to)));
}

void replace_dataset(hid_t f, const std::string& path, const std::vector<hsize_t>& dims, hid_t type,
                     const void* data, hid_t dcpl = H5P_DEFAULT) {
  h5::check(H5Ldelete(f, path.c_str(), H5P_DEFAULT), path);
  const h5::Handle space = h5::own_space(h5::check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), path));
  const h5::Handle d = h5::own_dataset(
      h5::check_id(H5Dcreate2(f, path.c_str(), type, space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT), path));
  if (data != nullptr) h5::check(H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path);
}

// h5py writes numpy byte strings as fixed-length strings; readers accept both.
void fixed_string_attr(hid_t f, const std::string& group, const std::string& name) {
  const h5::Handle g = h5::open_group(f, group);
  const std::string value = h5::read_attr_string(g.get(), group, name);
  h5::check(H5Adelete(g.get(), name.c_str()), name);
  const h5::Handle type = h5::own_type(h5::check_id(H5Tcopy(H5T_C_S1), name));
  h5::check(H5Tset_size(type.get(), value.size() + 3), name);  // null-padded
  const h5::Handle space = h5::own_space(h5::check_id(H5Screate(H5S_SCALAR), name));
  const h5::Handle a = h5::own_attr(h5::check_id(H5Acreate2(g.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), name));
  std::string buffer = value + std::string(3, '\0');
  h5::check(H5Awrite(a.get(), type.get(), buffer.data()), name);
}

// Offset of the first global heap collection ("GCOL") of a file.
size_t heap_offset(const Bytes& b) {
  for (size_t i = 0; i + 4 <= b.size(); ++i)
    if (std::memcmp(&b[i], "GCOL", 4) == 0) return i;
  throw InternalError("no global heap collection in the seed trace");
}

void put_le(Bytes& b, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b.at(at + i) = static_cast<char>((v >> (8 * i)) & 0xff);
}

void make_corpus(const fs::path& dir) {
  const QsaConfig config = micro_config();
  const Trace full = generate_trace(config, micro_options());
  write(full, dir / "valid-micro.h5");

  GenOptions io = micro_options();
  io.inputs_only = true;
  const Trace inputs = generate_trace(config, io);
  write(inputs, dir / "valid-micro-inputs-only.h5");

  QsaConfig fp8 = config;
  fp8.kv_dtype = KvDtype::kFp8;
  fp8.indexer_dtype = IndexerDtype::kFp8;
  fp8.count_column = true;
  fp8.speculative_tokens = 1;
  GenOptions mixed = micro_options();
  mixed.prompt_lens = {6, 5};
  mixed.mrope = true;
  mixed.decode_steps = 0;
  mixed.mtp_drafts = 2;
  mixed.inputs_only = true;  // the fp8 codes come with the initial state
  Trace rich = generate_trace(fp8, mixed);
  add_optional_inputs(rich);
  write(rich, dir / "valid-micro-fp8-mrope-state.h5");

  const fs::path f64 = dir / "valid-micro-f64-fixed-strings.h5";
  write(inputs, dir / "tmp.h5", FloatStorage::kFloat64);
  patched(dir / "tmp.h5", f64, [](hid_t f) {
    fixed_string_attr(f, "/", "format");
    fixed_string_attr(f, "/config", "rope_style");
  });
  fs::remove(dir / "tmp.h5");

  // Broken files: cut and flipped bytes of the inputs-only trace.
  const Bytes base = load(dir / "valid-micro-inputs-only.h5");
  store(Bytes(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(base.size() / 2)), dir / "broken-truncated-half.h5");
  store(Bytes(base.begin(), base.end() - 700), dir / "broken-truncated-tail.h5");
  for (int k = 1; k <= 2; ++k) {
    Bytes b = base;
    for (size_t i = 0; i < 8; ++i) b[(b.size() * (8 * k + i)) / 40 + 13 * i] ^= static_cast<char>(0x5a + k);
    store(b, dir / fmt::format("broken-flipped-{}.h5", k));
  }

  // Hostile contents near the validator's boundaries.
  const fs::path src = dir / "valid-micro-inputs-only.h5";
  patched(src, dir / "hostile-huge-shape.h5", [](hid_t f) {
    const h5::Handle dcpl = h5::own_plist(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dcpl"));
    const hsize_t chunk[2] = {1024, 16};
    h5::check(H5Pset_chunk(dcpl.get(), 2, chunk), "chunk");
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
    replace_dataset(f, "/steps/000000/hidden", {1000000000000ULL, 16}, H5T_IEEE_F64LE, nullptr, dcpl.get());
  });
  patched(src, dir / "hostile-cyclic-groups.h5", [](hid_t f) {
    h5::check(H5Lcreate_hard(f, "/", f, "/steps/000000/loop", H5P_DEFAULT, H5P_DEFAULT), "cycle");
  });
  patched(src, dir / "hostile-negative-page.h5", [](hid_t f) {
    const int32_t table[1] = {-7};
    replace_dataset(f, "/steps/000000/block_table", {1, 1}, H5T_NATIVE_INT32, table);
  });
}

// The global-heap corruptions that crash or hang HDF5 1.10's own string
// reader; h5_heap_string.cpp reads around it, and these keep it that way. The
// base is the smallest file that reaches it: a root group whose `format`
// attribute is a variable-length string (the first thing the loader reads).
void make_regressions(const fs::path& dir) {
  const fs::path minimal = dir / "tmp.h5";
  {
    h5::Handle f = h5::create_file(minimal.string());
    const h5::Handle root = h5::open_group(f.get(), "/");
    h5::write_attr_string(root.get(), "format", "qsa-trace");
  }
  const Bytes base = load(minimal);
  fs::remove(minimal);
  const size_t gcol = heap_offset(base);
  const size_t obj1 = gcol + 16;  // first object: index 2, refs 2, reserved 4, size 8
  Bytes b = base;
  put_le(b, obj1 + 8, uint64_t{1} << 40, 8);  // H5HG_read: memcpy of 1 TiB (segfault)
  store(b, dir / "heap-object-size-huge.h5");
  b = base;
  put_le(b, obj1 + 8, 4000, 8);  // the collection parser never ends (hang)
  store(b, dir / "heap-object-size-past-descriptor.h5");
  b = base;
  put_le(b, obj1, 0, 2);  // object 1 becomes free space of size 0 (hang)
  put_le(b, obj1 + 8, 0, 8);
  store(b, dir / "heap-free-space-size-zero.h5");
  b = base;
  put_le(b, obj1, 999, 2);  // the descriptor's object is gone (HDF5 reads a null string)
  store(b, dir / "heap-object-missing.h5");
  b = base;
  put_le(b, gcol + 8, uint64_t{1} << 50, 8);  // collection size past the end of the file
  store(b, dir / "heap-collection-size-huge.h5");
}

}  // namespace
}  // namespace qsa

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR REGRESSION_DIR\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    std::filesystem::create_directories(argv[2]);
    qsa::make_corpus(argv[1]);
    qsa::make_regressions(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsa_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
