// QsaConfig <-> the attributes of /config (docs/trace-format.md): one
// attribute per field, enums by their stable names (to_string / parse_*),
// booleans as int 0/1. Reading requires every attribute: a trace must say how
// it was computed, so nothing falls back to a default.
#pragma once

#include <hdf5.h>

#include "reference/core/config.hpp"

namespace qsa {

void write_config_attrs(hid_t group, const QsaConfig& config);
// InputError naming the missing or malformed attribute; the result is not
// validated (validate_config does that).
QsaConfig read_config_attrs(hid_t group);

}  // namespace qsa
