// HDF5 1.10 dies with SIGSEGV on a few corrupt files instead of returning an
// error (docs/robustness.md, "What HDF5 1.10 still does"), and qsa cannot
// catch a crash inside the library. So the CLI decodes a trace once in a
// forked child before decoding it in its own process: a child that dies
// becomes an IoError naming the file (exit 2). A child that survives ran
// the same deterministic decode from an identical copy of this process, so
// the parent's decode does not crash either; it also reproduces any typed
// error the child met, which is why the child's errors are not passed back.
#pragma once

#include <functional>
#include <string>

#include "harness/trace/trace_io.hpp"

namespace qsa {

// Runs `decode` (which reads `path`) in a forked child and waits for it.
// Returns when the child finished, whether `decode` returned or threw. Throws
// IoError, as for the corrupt structures HDF5 does report, when the child was
// killed by a signal or exited abnormally (a sanitizer's report). Without a
// child (fork failed: process limit, memory) it returns at once, and the
// caller decodes unguarded.
void decode_in_child_first(const std::string& path, const std::function<void()>& decode);

// read_trace behind decode_in_child_first: how the CLI reads a trace.
Trace read_trace_guarded(const std::string& path, const TraceReadOptions& options);

}  // namespace qsa
