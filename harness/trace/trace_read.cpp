// read_trace: every dataset and attribute of docs/trace-format.md, with its
// rank and dtype class checked as it is read and the memory budget checked
// before each allocation; then validate_trace checks the contents.
#include <fmt/format.h>

#include <string>
#include <type_traits>

#include "harness/trace/config_attrs.hpp"
#include "harness/trace/dataset_io.hpp"
#include "harness/trace/h5_attrs.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/trace_fields.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa {

namespace {

// Reads one optional field of a table into its tensor when the dataset exists.
struct FieldReader {
  h5::DatasetReader& reader;
  std::string group;  // "/steps/000003/outputs/"

  template <class T>
  bool operator()(const FieldSpec& spec, Tensor<T>& t) const {
    const std::string path = group + spec.name;
    if (!reader.exists(path)) return false;
    if constexpr (std::is_same_v<T, double>) {
      t = reader.floats(path, {spec.rank}, spec.shape);
    } else if constexpr (std::is_same_v<T, int32_t>) {
      t = reader.ints32(path, {spec.rank}, spec.shape);
    } else {
      t = reader.ints64(path, {spec.rank}, spec.shape);
    }
    return true;
  }
};

void require(const h5::DatasetReader& reader, const std::string& path, const char* what) {
  if (!reader.exists(path)) throw InputError(fmt::format("missing {} {}", what, path));
}

void read_root(hid_t file, Trace& t) {
  const h5::Handle root = h5::open_group(file, "/");
  const hid_t r = root.get();
  if (!h5::has_attr(r, "format"))
    throw InputError("the root group has no attribute 'format'; this is not a qsa trace");
  const std::string format = h5::read_attr_string(r, "/", "format");
  if (format != "qsa-trace")
    throw InputError(fmt::format("format is '{}', expected 'qsa-trace'; this is not a qsa trace", format));
  const int64_t version = h5::read_attr_int(r, "/", "schema_version");
  if (version != kTraceSchemaVersion)
    throw InputError(fmt::format("unknown schema version {} (this qsa reads version {})", version,
                                 kTraceSchemaVersion));
  t.schema_version = static_cast<int>(version);
  // Provenance is informational: absent means unknown.
  if (h5::has_attr(r, "producer")) t.producer = h5::read_attr_string(r, "/", "producer");
  if (h5::has_attr(r, "producer_version"))
    t.producer_version = h5::read_attr_string(r, "/", "producer_version");
  if (h5::has_attr(r, "description")) t.description = h5::read_attr_string(r, "/", "description");
  if (h5::has_attr(r, "seed")) t.seed = h5::read_attr_uint64(r, "/", "seed");
}

void read_weights(h5::DatasetReader& reader, LayerWeights& w) {
  for_each_weight(w, [&](const FieldSpec& spec, TensorD& t) {
    const std::string path = std::string("/weights/") + spec.name;
    require(reader, path, "dataset");
    t = reader.floats(path, {spec.rank}, spec.shape);
  });
}

// Datasets of one family go together: all present or all absent.
void read_initial_state(h5::DatasetReader& reader, CacheSnapshot& s) {
  const std::string group = "/initial_state/";
  if (!reader.exists("/initial_state")) return;
  const FieldReader read{reader, group};
  SnapshotFamily family = SnapshotFamily::kKv;
  std::string first;  // first dataset of the current family
  bool first_present = false;
  for_each_snapshot(s, [&](SnapshotFamily f, const FieldSpec& spec, auto& t) {
    const bool here = read(spec, t);
    if (first.empty() || f != family) {
      family = f;
      first = spec.name;
      first_present = here;
    } else if (here != first_present) {
      throw InputError(fmt::format("{}{} is {} but {}{} is {}; the datasets of a family go together",
                                   group, spec.name, here ? "present" : "missing", group, first,
                                   first_present ? "present" : "missing"));
    }
  });
}

void read_step(h5::DatasetReader& reader, hid_t file, int64_t index, bool load_outputs, TraceStep& step) {
  const std::string path = fmt::format("/steps/{:06d}", index);
  require(reader, path, "group");
  const h5::Handle g = h5::open_group(file, path);
  if (h5::has_attr(g.get(), "name")) step.name = h5::read_attr_string(g.get(), path, "name");
  const int64_t mtp = h5::read_attr_int(g.get(), path, "mtp_reuse");
  if (mtp != 0 && mtp != 1)
    throw InputError(fmt::format("{} attribute mtp_reuse = {}, expected 0 or 1", path, mtp));
  StepMetadata& m = step.meta;
  m.mtp_reuse = mtp == 1;

  const std::string p = path + "/";
  for (const char* name : {"hidden", "positions", "query_start_loc", "seq_lens", "block_table"})
    require(reader, p + name, "dataset");
  step.hidden = reader.floats(p + "hidden", {2}, "[T, hidden]");
  m.positions = reader.ints64(p + "positions", {1, 2}, "[T], [1, T] or [3, T]");
  m.query_start_loc = reader.ints32(p + "query_start_loc", {1}, "[R + 1]").data;
  m.seq_lens = reader.ints32(p + "seq_lens", {1}, "[R]").data;
  m.block_table = reader.ints32(p + "block_table", {2}, "[R, pages]");
  if (reader.exists(p + "block_table_c"))
    m.block_table_c = reader.ints32(p + "block_table_c", {2}, "[R, pages]");
  if (reader.exists(p + "ring_blocks")) m.ring_blocks = reader.ints32(p + "ring_blocks", {1}, "[R]").data;
  if (reader.exists(p + "slot_mapping")) m.slot_mapping = reader.ints64(p + "slot_mapping", {1}, "[T]").data;

  if (load_outputs && reader.exists(p + "outputs"))
    for_each_recorded(step.recorded, FieldReader{reader, p + "outputs/"});
}

void read_steps(h5::DatasetReader& reader, hid_t file, bool load_outputs, std::vector<TraceStep>& steps) {
  require(reader, "/steps", "group");
  const h5::Handle g = h5::open_group(file, "/steps");
  const int64_t n = h5::read_attr_int(g.get(), "/steps", "num_steps");
  H5G_info_t info{};
  h5::check(H5Gget_info(g.get(), &info), "reading /steps");
  if (n < 0 || static_cast<hsize_t>(n) != info.nlinks)
    throw InputError(fmt::format("/steps holds {} entries but its attribute num_steps = {}", info.nlinks, n));
  for (int64_t i = 0; i < n; ++i) {
    steps.emplace_back();
    read_step(reader, file, i, load_outputs, steps.back());
  }
}

void read_contents(hid_t file, const TraceReadOptions& options, Trace& t) {
  read_root(file, t);
  h5::DatasetReader reader(file, options.max_bytes);
  require(reader, "/config", "group");
  t.config = read_config_attrs(h5::open_group(file, "/config").get());
  require(reader, "/geometry", "group");
  const h5::Handle geometry = h5::open_group(file, "/geometry");
  t.geometry.num_pages = h5::read_attr_int(geometry.get(), "/geometry", "num_pages");
  t.geometry.num_ring_blocks = h5::read_attr_int(geometry.get(), "/geometry", "num_ring_blocks");
  read_weights(reader, t.weights);
  read_initial_state(reader, t.initial_state);
  read_steps(reader, file, options.load_outputs, t.steps);
}

}  // namespace

Trace read_trace(const std::string& path, const TraceReadOptions& options) {
  const h5::QuietErrors quiet;
  Trace trace;
  try {
    const h5::Handle file = h5::open_file_read(path);
    read_contents(file.get(), options, trace);
  } catch (const QsaError& e) {
    // open_file_read already names the file.
    if (std::string(e.what()).find(h5::quoted(path)) != std::string::npos) throw;
    rethrow_in(e, h5::quoted(path));
  }
  validate_trace(trace, h5::quoted(path));
  return trace;
}

}  // namespace qsa
