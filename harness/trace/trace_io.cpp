// list_datasets (`qsa inspect`): every dataset of an HDF5 file as stored.
// read_trace, write_trace and validate_trace live in trace_read.cpp,
// trace_write.cpp and trace_validate.cpp.
#include "harness/trace/trace_io.hpp"

#include <fmt/format.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/trace/dataset_io.hpp"
#include "harness/trace/h5_file.hpp"
#include "harness/trace/h5_types.hpp"
#include "harness/trace/trace_fields.hpp"

namespace qsa {

namespace {

// Hard links can make groups share children or form cycles: each group is
// listed once (without that, two links back to the root double the work at
// every level), a link back to an ancestor is an error, and no trace nests
// deeper than a few levels.
constexpr int kMaxDepth = 32;

struct Walk {
  std::vector<DatasetInfo>& out;
  std::set<haddr_t> listed;                              // group headers already walked
  std::vector<std::pair<haddr_t, std::string>> parents;  // the groups above, outermost first
};

DatasetInfo describe_dataset(hid_t dataset, const std::string& path) {
  DatasetInfo info;
  info.path = path;
  const h5::Handle space = h5::own_space(h5::check_id(H5Dget_space(dataset), "reading the shape of " + path));
  for (hsize_t d : h5::dataspace_dims(space.get())) info.shape.push_back(static_cast<int64_t>(d));
  const h5::Handle type = h5::own_type(h5::check_id(H5Dget_type(dataset), "reading the dtype of " + path));
  const h5::TypeInfo t = h5::describe_type(type.get());
  info.dtype = t.name;
  if (t.kind == h5::TypeKind::kUnsignedInt && t.size == 1)
    if (const auto encoding = h5::dataset_encoding(dataset, path)) info.dtype += " (" + *encoding + ")";
  info.stored_bytes = static_cast<int64_t>(H5Dget_storage_size(dataset));
  return info;
}

void walk(hid_t group, const std::string& prefix, Walk& w) {
  if (w.parents.size() > static_cast<size_t>(kMaxDepth))
    throw InputError(fmt::format("{} nests deeper than {} groups", prefix, kMaxDepth));
  H5O_info_t oinfo{};
  h5::check(H5Oget_info2(group, &oinfo, H5O_INFO_BASIC), "reading the header of " + prefix);
  for (const auto& [addr, path] : w.parents)
    if (addr == oinfo.addr)
      throw InputError(fmt::format("{} is a hard link back to {}: the groups form a cycle",
                                   prefix.substr(0, prefix.size() - 1), path));
  if (!w.listed.insert(oinfo.addr).second) return;  // reached before through another link
  w.parents.emplace_back(oinfo.addr, prefix);
  H5G_info_t ginfo{};
  h5::check(H5Gget_info(group, &ginfo), "listing " + prefix);
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    const std::string what = fmt::format("listing entry {} of {}", i, prefix);
    const ssize_t len = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    h5::check(static_cast<herr_t>(len < 0 ? -1 : 0), what);
    std::string name(static_cast<size_t>(len) + 1, '\0');
    h5::check(static_cast<herr_t>(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                                     name.size(), H5P_DEFAULT) < 0 ? -1 : 0),
              what);
    name.resize(static_cast<size_t>(len));
    const std::string path = prefix + name;
    if (H5Oexists_by_name(group, name.c_str(), H5P_DEFAULT) <= 0) {  // dangling or external link
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    const h5::Handle obj(h5::check_id(H5Oopen(group, name.c_str(), H5P_DEFAULT), "opening " + path), H5Oclose);
    const H5I_type_t kind = H5Iget_type(obj.get());
    if (kind == H5I_GROUP) walk(obj.get(), path + "/", w);
    if (kind == H5I_DATASET) w.out.push_back(describe_dataset(obj.get(), path));
  }
  w.parents.pop_back();
}

}  // namespace

std::vector<DatasetInfo> list_datasets(const std::string& path) {
  const h5::QuietErrors quiet;
  std::vector<DatasetInfo> out;
  try {
    const h5::Handle file = h5::open_file_read(path);
    const h5::Handle root = h5::open_group(file.get(), "/");
    Walk w{out, {}, {}};
    walk(root.get(), "/", w);
  } catch (const QsaError& e) {
    if (std::string(e.what()).find(h5::quoted(path)) != std::string::npos) throw;
    rethrow_in(e, h5::quoted(path));
  }
  return out;
}

}  // namespace qsa
