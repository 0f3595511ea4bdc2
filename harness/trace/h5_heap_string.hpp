// Variable-length string attributes read without HDF5's global-heap reader.
//
// A variable-length string attribute stores a descriptor (byte count, address
// of a global heap collection, object index) and the characters in that
// collection. HDF5 1.10 (Debian 12 ships 1.10.8) trusts the collection when it
// reads the characters: a corrupted object size or index makes H5HG_read copy
// past its buffers (a segfault or a heap overflow), and a corrupted free-space
// record makes the collection parser loop forever. So the characters are
// fetched here instead: HDF5 hands over the raw descriptor (through a
// conversion to an opaque type, which it never dereferences), and the
// collection is read from the file and walked with every offset and size
// checked. HDF5 never loads the collection. docs/robustness.md has the details.
#pragma once

#include <hdf5.h>

#include <string>

namespace qsa::h5 {

// Bytes one string attribute may hold; a descriptor or collection claiming
// more is rejected before anything is allocated.
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;

// The value of a scalar variable-length string attribute `attr`, cut at its
// first NUL as HDF5's own reader would. `label` names it in messages
// ("/config attribute rope_style"). A corrupt descriptor or collection is an
// IoError naming the attribute and what is wrong.
std::string read_vlen_string_attr(hid_t attr, const std::string& label);

}  // namespace qsa::h5
