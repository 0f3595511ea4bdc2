#include "harness/atomic_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "reference/core/errors.hpp"

namespace qsa {

std::string temporary_name(const std::string& path) { return fmt::format("{}.tmp-{}", path, ::getpid()); }

void write_file_atomically(const std::string& path, const std::string& content, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(path, ec))
    throw IoError(fmt::format("'{}' exists; pass --force to replace it", path));
  const std::string tmp = temporary_name(path);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw IoError(fmt::format("cannot create '{}' (does the folder exist and is it writable?)", tmp));
    f << content;
    f.flush();
    if (!f) {
      fs::remove(tmp, ec);
      throw IoError(fmt::format("writing '{}' failed (disk full?)", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    fs::remove(tmp, ec);
    throw IoError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
  }
}

}  // namespace qsa
