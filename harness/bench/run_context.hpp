// The commit a benchmark run measured, for the JSON context of qsa_bench_cpu
// and qsa_bench_gpu: QSA_COMMIT (the device runner copies the tree without
// git history), else `git rev-parse HEAD` of the working directory with
// "+dirty" for uncommitted changes to tracked files, else "unknown".
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace qsa::bench {

// Output of a shell command, trailing newlines removed; empty on failure.
inline std::string command_output(const char* cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd, "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), pipe.get()) != nullptr) out += buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

inline std::string bench_commit() {
  if (const char* c = std::getenv("QSA_COMMIT"); c != nullptr && *c != '\0') return c;
  const std::string head = command_output("git rev-parse HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  const bool dirty = !command_output("git status --porcelain --untracked-files=no 2>/dev/null | head -1").empty();
  return dirty ? head + "+dirty" : head;
}

}  // namespace qsa::bench
