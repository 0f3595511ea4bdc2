#include "harness/trace/h5_heap_string.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "harness/trace/h5_file.hpp"
#include "reference/core/errors.hpp"

namespace qsa::h5 {

namespace {

// The opaque type the raw descriptors are converted to: HDF5 has no
// conversion from a variable-length type to an opaque one, so the one
// registered below is the only path, and it never touches the heap.
constexpr char kDescriptorTag[] = "qsa raw variable-length descriptor";

// One decoded descriptor, as the conversion leaves it in the read buffer.
struct Descriptor {
  uint64_t length = 0;         // bytes of the string
  uint64_t address = 0;        // collection address, relative to the file's base address
  uint64_t index = 0;          // object index within the collection
  uint64_t address_bytes = 0;  // the file's address width, as the descriptor has it
  uint64_t defined = 0;        // 0: HDF5's undefined address (all bits set)
};

// Little-endian, as every HDF5 file field; false when it does not fit 64 bits.
bool decode_le(const unsigned char* p, size_t n, uint64_t& out) {
  out = 0;
  for (size_t i = n; i-- > 0;) {
    if (i >= 8) {
      if (p[i] != 0) return false;
      continue;
    }
    out = (out << 8) | p[i];
  }
  return true;
}

bool is_vlen_string(hid_t type) {
  return H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0;
}

bool is_descriptor_type(hid_t type) {
  if (H5Tget_class(type) != H5T_OPAQUE || H5Tget_size(type) != sizeof(Descriptor)) return false;
  char* tag = H5Tget_tag(type);
  const bool ours = tag != nullptr && std::strcmp(tag, kDescriptorTag) == 0;
  H5free_memory(tag);
  return ours;
}

// Disk layout of one element: 4-byte length, address (the file's address
// width), 4-byte object index.
herr_t convert_descriptors(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t nelmts, size_t buf_stride,
                           size_t /*bkg_stride*/, void* buf, void* /*bkg*/, hid_t /*dxpl*/) {
  switch (cdata->command) {
    case H5T_CONV_INIT:
      // Declining (-1) lets HDF5 look for another path, so nothing else changes.
      if (!is_vlen_string(src) || !is_descriptor_type(dst)) return -1;
      cdata->need_bkg = H5T_BKG_NO;
      return 0;
    case H5T_CONV_FREE: return 0;
    case H5T_CONV_CONV: break;
    default: return -1;
  }
  const size_t src_size = H5Tget_size(src);
  if (src_size < 4 + 1 + 4 || src_size > 4 + 16 + 4) return -1;
  const size_t src_stride = buf_stride != 0 ? buf_stride : src_size;
  const size_t dst_stride = buf_stride != 0 ? buf_stride : sizeof(Descriptor);
  if (src_stride < src_size || dst_stride < sizeof(Descriptor)) return -1;
  auto* bytes = static_cast<unsigned char*>(buf);
  // Each output is wider than its input: go backwards so no input is
  // overwritten before it is read.
  for (size_t i = nelmts; i-- > 0;) {
    unsigned char raw[4 + 16 + 4];
    std::memcpy(raw, bytes + i * src_stride, src_size);
    Descriptor d;
    d.address_bytes = src_size - 8;
    uint64_t address = 0;
    decode_le(raw, 4, d.length);
    const bool fits = decode_le(raw + 4, d.address_bytes, address);
    decode_le(raw + 4 + d.address_bytes, 4, d.index);
    bool all_ones = true;
    for (size_t b = 0; b < d.address_bytes; ++b) all_ones = all_ones && raw[4 + b] == 0xff;
    d.defined = fits && !all_ones ? 1 : 0;
    d.address = d.defined != 0 ? address : 0;
    std::memcpy(bytes + i * dst_stride, &d, sizeof d);
  }
  return 0;
}

Handle descriptor_type() {
  Handle t = own_type(check_id(H5Tcreate(H5T_OPAQUE, sizeof(Descriptor)), "building the descriptor type"));
  check(H5Tset_tag(t.get(), kDescriptorTag), "building the descriptor type");
  return t;
}

void register_conversion() {
  static std::once_flag once;
  std::call_once(once, [] {
    Handle vlen = own_type(check_id(H5Tcopy(H5T_C_S1), "building the string type"));
    check(H5Tset_size(vlen.get(), H5T_VARIABLE), "building the string type");
    const Handle opaque = descriptor_type();
    check(H5Tregister(H5T_PERS_SOFT, "qsa_vlen_descriptor", vlen.get(), opaque.get(), convert_descriptors),
          "registering the string descriptor conversion");
  });
}

// The file an attribute lives in, as the raw bytes HDF5 reads (sec2 driver).
struct RawFile {
  int fd = -1;
  uint64_t base = 0;  // userblock size: HDF5 addresses are relative to it
  uint64_t size = 0;
  size_t address_bytes = 0, length_bytes = 0;
};

RawFile raw_file(hid_t attr, const std::string& label) {
  const std::string what = "reading " + label;
  const Handle file = own_file(check_id(H5Iget_file_id(attr), what));
  const Handle fapl = own_plist(check_id(H5Fget_access_plist(file.get()), what));
  if (H5Pget_driver(fapl.get()) != H5FD_SEC2)
    throw IoError(what + ": variable-length strings are read only from files opened with HDF5's sec2 driver");
  unsigned intent = 0;
  check(H5Fget_intent(file.get(), &intent), what);
  if ((intent & H5F_ACC_RDWR) != 0) check(H5Fflush(file.get(), H5F_SCOPE_LOCAL), what);  // heap on disk
  const Handle fcpl = own_plist(check_id(H5Fget_create_plist(file.get()), what));
  RawFile f;
  hsize_t userblock = 0;
  check(H5Pget_userblock(fcpl.get(), &userblock), what);
  check(H5Pget_sizes(fcpl.get(), &f.address_bytes, &f.length_bytes), what);
  f.base = userblock;
  void* handle = nullptr;
  check(H5Fget_vfd_handle(file.get(), H5P_DEFAULT, &handle), what);
  if (handle == nullptr) throw IoError(what + ": HDF5 gave no file handle");
  f.fd = *static_cast<int*>(handle);
  struct stat st {};
  if (fstat(f.fd, &st) != 0) throw IoError(fmt::format("{}: {}", what, std::strerror(errno)));
  f.size = static_cast<uint64_t>(st.st_size);
  return f;  // the fd stays valid: HDF5 keeps the file open while `attr` is
}

void read_exact(const RawFile& f, uint64_t offset, void* out, size_t n, const std::string& what) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(f.fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw IoError(fmt::format("{}: the file ends at byte {}", what, offset));
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

// The characters of object `d.index` of the collection at `d.address`. The
// collection: "GCOL", version 1, 3 reserved bytes, its size (length width);
// then objects: index (2), reference count (2), reserved (4), size (length
// width), data padded to 8 bytes. Index 0 is free space, its size counting
// its own header.
std::string read_heap_object(const RawFile& f, const Descriptor& d, const std::string& label) {
  const std::string what = fmt::format("reading {}: corrupt variable-length string", label);
  const std::string where = fmt::format("the global heap collection at address {}", d.address);
  const size_t lw = f.length_bytes;
  if (lw < 1 || lw > 8 || f.address_bytes != d.address_bytes)
    throw IoError(fmt::format("{}: its descriptor has {}-byte addresses, the file {}", what, d.address_bytes,
                              f.address_bytes));
  const uint64_t start = f.base + d.address;
  const size_t header = 8 + lw;
  if (d.address > f.size || start < f.base || start > f.size || f.size - start < header)
    throw IoError(fmt::format("{}: {} lies past the end of the file ({} bytes)", what, where, f.size));
  unsigned char head[16] = {};
  read_exact(f, start, head, header, what);
  uint64_t size = 0;
  decode_le(head + 8, lw, size);
  if (std::memcmp(head, "GCOL", 4) != 0 || head[4] != 1)
    throw IoError(fmt::format("{}: no global heap collection (signature GCOL, version 1) at address {}", what,
                              d.address));
  if (size < header || size > f.size - start || size > kMaxStringBytes + 4096)
    throw IoError(fmt::format("{}: {} claims {} bytes (the file has {} from there)", what, where, size,
                              f.size - start));
  std::vector<unsigned char> c(static_cast<size_t>(size));
  read_exact(f, start, c.data(), c.size(), what);

  const size_t object_header = 8 + lw;
  size_t off = header;
  while (c.size() - off >= object_header) {
    uint64_t index = 0, object_size = 0;
    decode_le(&c[off], 2, index);
    decode_le(&c[off + 8], lw, object_size);
    if (index == 0) {  // free space: its size covers its header
      if (object_size < object_header)
        throw IoError(fmt::format("{}: the free space of {} has size {}", what, where, object_size));
      if (object_size > c.size() - off) break;
      off += static_cast<size_t>(object_size);
      continue;
    }
    const size_t room = c.size() - off - object_header;
    if (object_size > room)
      throw IoError(fmt::format("{}: object {} of {} claims {} bytes, {} remain in the collection", what, index,
                                where, object_size, room));
    if (index == d.index) {
      if (object_size != d.length)
        throw IoError(fmt::format("{}: its descriptor says {} bytes, object {} of {} holds {}", what, d.length,
                                  index, where, object_size));
      const auto* p = reinterpret_cast<const char*>(&c[off + object_header]);
      return std::string(p, static_cast<size_t>(object_size));
    }
    const size_t padded = static_cast<size_t>((object_size + 7) / 8 * 8);
    if (padded > room) break;  // the last object may end the collection unpadded
    off += object_header + padded;
  }
  throw IoError(fmt::format("{}: object {} is not in {}", what, d.index, where));
}

}  // namespace

std::string read_vlen_string_attr(hid_t attr, const std::string& label) {
  register_conversion();
  {
    const Handle space = own_space(check_id(H5Aget_space(attr), "reading the space of " + label));
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n != 1)  // H5Aread below fills one descriptor
      throw InputError(fmt::format("{} holds {} values, expected one", label, n));
  }
  const Handle type = descriptor_type();
  Descriptor d;
  check(H5Aread(attr, type.get(), &d), "reading " + label);
  if (d.length == 0) return "";  // HDF5 stores no characters for an empty or null string
  if (d.length > kMaxStringBytes)
    throw IoError(fmt::format("reading {}: its descriptor claims {} bytes (at most {} are read)", label,
                              d.length, kMaxStringBytes));
  if (d.defined == 0 || d.address == 0)
    throw IoError(fmt::format("reading {}: corrupt variable-length string: {} bytes at an undefined address",
                              label, d.length));
  std::string value = read_heap_object(raw_file(attr, label), d, label);
  return value.substr(0, value.find('\0'));
}

}  // namespace qsa::h5
