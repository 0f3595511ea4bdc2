#include "harness/trace/decode_guard.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/trace/h5_file.hpp"
#include "reference/core/errors.hpp"

namespace qsa {

namespace {

// The child's exit status when `decode` returned or threw a typed error.
constexpr int kDecodeFinished = 0;

std::string describe_death(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("died with signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

}  // namespace

void decode_in_child_first(const std::string& path, const std::function<void()>& decode) {
  // Whatever is buffered now would otherwise be written twice, once by each.
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return;
  if (pid == 0) {
    try {
      decode();
    } catch (...) {
      // The parent's own decode meets the same error and reports it.
    }
    // _exit: no atexit handlers, no flushing of the parent's copied buffers,
    // no HDF5 library shutdown in the child.
    ::_exit(kDecodeFinished);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return;  // our own child cannot be lost; decode unguarded if it is
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kDecodeFinished) return;
  // SIGKILL is what the kernel's out-of-memory killer sends: a large trace
  // within the --max-memory budget, not a corrupt file.
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
    throw IoError(fmt::format(
        "{}: a child process decoding the file first was killed (signal 9), most likely by the kernel "
        "for running out of memory; free memory or lower --max-memory, the bound on what a trace may "
        "make qsa allocate",
        h5::quoted(path)));
  throw IoError(fmt::format(
      "{}: decoding the file crashed HDF5: a child process that read it first {}. The file is corrupt "
      "in a way HDF5 1.10 does not detect; nothing was read from it (docs/robustness.md)",
      h5::quoted(path), describe_death(status)));
}

Trace read_trace_guarded(const std::string& path, const TraceReadOptions& options) {
  decode_in_child_first(path, [&] { read_trace(path, options); });
  return read_trace(path, options);
}

}  // namespace qsa
