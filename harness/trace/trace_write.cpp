// write_trace: the layout of docs/trace-format.md, written to a temporary
// name and renamed so that an interrupted write never leaves a half-written
// trace. The writer stores what it is given without validating it (tests and
// `qsa gen --corrupt`-style tools need to write broken traces); read_trace is
// where validation happens.
#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#include "harness/atomic_file.hpp"
#include "harness/trace/config_attrs.hpp"
#include "harness/trace/dataset_io.hpp"
#include "harness/trace/h5_attrs.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/trace_fields.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa {

namespace {

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// Writes any present tensor of a field table; floats go through the storage
// policy, and fp8-eligible ones become codes when the indexer dtype is fp8.
struct FieldWriter {
  hid_t group;
  FloatStorage storage;
  std::optional<Fp8Flavor> fp8;

  template <class T>
  void operator()(const FieldSpec& spec, const Tensor<T>& t) const {
    if (!present(t)) return;
    if constexpr (std::is_same_v<T, double>) {
      h5::write_floats(group, spec.name, t, storage, spec.fp8_codes ? fp8 : std::nullopt);
    } else if constexpr (std::is_same_v<T, int32_t>) {
      h5::write_ints32(group, spec.name, t.shape, t.ptr());
    } else {
      h5::write_ints64(group, spec.name, t.shape, t.ptr());
    }
  }
  template <class T>
  void operator()(SnapshotFamily, const FieldSpec& spec, const Tensor<T>& t) const {
    (*this)(spec, t);
  }
};

template <class T>
void write_vector(hid_t group, const char* name, const std::vector<T>& v) {
  const Shape shape{static_cast<int64_t>(v.size())};
  if constexpr (std::is_same_v<T, int32_t>) {
    h5::write_ints32(group, name, shape, v.data());
  } else {
    h5::write_ints64(group, name, shape, v.data());
  }
}

void write_weights(hid_t file, const LayerWeights& w, FloatStorage storage) {
  const h5::Handle g = h5::create_group(file, "weights");
  for_each_weight(w, [&](const FieldSpec& spec, const TensorD& t) {
    if (!present(t)) throw InputError(fmt::format("weight {} is missing (it has no shape)", spec.name));
    h5::write_floats(g.get(), spec.name, t, storage);
  });
}

void write_step(hid_t steps, size_t index, const TraceStep& step, const FieldWriter& fields) {
  const h5::Handle g = h5::create_group(steps, fmt::format("{:06d}", index));
  h5::write_attr_string(g.get(), "name", step.name);
  h5::write_attr_int(g.get(), "mtp_reuse", step.meta.mtp_reuse ? 1 : 0);
  const StepMetadata& m = step.meta;
  FieldWriter inputs = fields;
  inputs.group = g.get();
  inputs.fp8.reset();
  if (!present(step.hidden) || !present(m.positions) || !present(m.block_table))
    throw InputError(fmt::format("step {} ('{}') lacks hidden, positions or block_table", index, step.name));
  inputs(FieldSpec{"hidden", 2, "", false}, step.hidden);
  inputs(FieldSpec{"positions", m.positions.rank(), "", false}, m.positions);
  write_vector(g.get(), "query_start_loc", m.query_start_loc);
  write_vector(g.get(), "seq_lens", m.seq_lens);
  inputs(FieldSpec{"block_table", 2, "", false}, m.block_table);
  if (!m.block_table_c.empty()) inputs(FieldSpec{"block_table_c", 2, "", false}, m.block_table_c);
  if (!m.ring_blocks.empty()) write_vector(g.get(), "ring_blocks", m.ring_blocks);
  if (!m.slot_mapping.empty()) write_vector(g.get(), "slot_mapping", m.slot_mapping);

  bool any = false;
  for_each_recorded(step.recorded, [&](const FieldSpec&, const auto& t) { any = any || present(t); });
  if (!any) return;
  const h5::Handle out = h5::create_group(g.get(), "outputs");
  FieldWriter outputs = fields;
  outputs.group = out.get();
  for_each_recorded(step.recorded, outputs);
}

void write_contents(hid_t file, const Trace& t, const TraceWriteOptions& options) {
  const h5::Handle root = h5::open_group(file, "/");
  h5::write_attr_string(root.get(), "format", "qsa-trace");
  h5::write_attr_int(root.get(), "schema_version", t.schema_version);
  h5::write_attr_string(root.get(), "producer", t.producer);
  h5::write_attr_string(root.get(), "producer_version", t.producer_version);
  h5::write_attr_uint64(root.get(), "seed", t.seed);
  h5::write_attr_string(root.get(), "description", t.description);
  h5::write_attr_string(root.get(), "created", utc_now_iso8601());

  const h5::Handle config = h5::create_group(file, "config");
  write_config_attrs(config.get(), t.config);
  const h5::Handle geometry = h5::create_group(file, "geometry");
  h5::write_attr_int(geometry.get(), "num_pages", t.geometry.num_pages);
  h5::write_attr_int(geometry.get(), "num_ring_blocks", t.geometry.num_ring_blocks);

  write_weights(file, t.weights, options.floats);

  FieldWriter fields{H5I_INVALID_HID, options.floats, std::nullopt};
  if (t.config.indexer_dtype == IndexerDtype::kFp8) fields.fp8 = t.config.fp8_flavor;
  bool any_state = false;
  for_each_snapshot(t.initial_state,
                    [&](SnapshotFamily, const FieldSpec&, const auto& x) { any_state = any_state || present(x); });
  if (any_state) {
    const h5::Handle g = h5::create_group(file, "initial_state");
    fields.group = g.get();
    for_each_snapshot(t.initial_state, fields);
  }

  const h5::Handle steps = h5::create_group(file, "steps");
  h5::write_attr_int(steps.get(), "num_steps", static_cast<int64_t>(t.steps.size()));
  for (size_t i = 0; i < t.steps.size(); ++i) write_step(steps.get(), i, t.steps[i], fields);
}

}  // namespace

void write_trace(const Trace& trace, const std::string& path, const TraceWriteOptions& options) {
  namespace fs = std::filesystem;
  const h5::QuietErrors quiet;
  std::error_code ec;
  if (fs::exists(path, ec) && !options.overwrite)
    throw IoError(fmt::format("{} exists; pass --force to replace it", h5::quoted(path)));
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw IoError(fmt::format("cannot write {}: directory '{}' does not exist", h5::quoted(path),
                              parent.string()));

  const std::string tmp = temporary_name(path);  // NAME.tmp-PID, shared with other outputs
  try {
    h5::Handle file = h5::create_file(tmp);
    write_contents(file.get(), trace, options);
    // Closing flushes; a failure here (disk full) must not be renamed into place.
    h5::check(file.reset(), "closing " + h5::quoted(tmp));
    fs::rename(tmp, path, ec);
    if (ec) throw IoError(fmt::format("cannot rename {} to {}: {}", h5::quoted(tmp), h5::quoted(path), ec.message()));
  } catch (const QsaError& e) {
    fs::remove(tmp, ec);
    rethrow_in(e, "writing " + h5::quoted(path));
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace qsa
