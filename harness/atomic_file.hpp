// Results are written to a temporary name beside the target and renamed, so
// an interrupted run never leaves a half-written file; an existing file is
// replaced only when `overwrite` is set.
#pragma once

#include <string>

namespace qsa {

// IoError when the target exists and !overwrite, or on any write failure.
void write_file_atomically(const std::string& path, const std::string& content, bool overwrite);

// The temporary name used for `path` by this process.
std::string temporary_name(const std::string& path);

}  // namespace qsa
