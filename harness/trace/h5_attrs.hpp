// Scalar and small-array attributes. Writers use fixed little-endian types
// (int64, uint64, float64, variable-length UTF-8 strings). Readers accept
// what h5py writes for the same Python values (any integer width, fixed or
// variable-length strings) and throw InputError naming the object and the
// attribute when one is missing or has the wrong type class; `where` is the
// object's path, e.g. "/config".
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qsa::h5 {

void write_attr_string(hid_t obj, const std::string& name, const std::string& value);
void write_attr_int(hid_t obj, const std::string& name, int64_t value);
void write_attr_uint64(hid_t obj, const std::string& name, uint64_t value);
void write_attr_double(hid_t obj, const std::string& name, double value);
void write_attr_ints(hid_t obj, const std::string& name, const std::vector<int64_t>& values);

bool has_attr(hid_t obj, const std::string& name);

std::string read_attr_string(hid_t obj, const std::string& where, const std::string& name);
int64_t read_attr_int(hid_t obj, const std::string& where, const std::string& name);
uint64_t read_attr_uint64(hid_t obj, const std::string& where, const std::string& name);
// Integer attributes are accepted too (h5py writes 10000 as int64).
double read_attr_double(hid_t obj, const std::string& where, const std::string& name);
// A 1-D integer array of exactly `count` values.
std::vector<int64_t> read_attr_ints(hid_t obj, const std::string& where, const std::string& name,
                                    size_t count);

}  // namespace qsa::h5
