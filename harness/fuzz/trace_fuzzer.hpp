// The fuzz target of the trace loader, shared by the libFuzzer binary
// (qsa_trace_fuzzer, the `fuzz` preset) and the replay binary every build has
// (qsa_trace_fuzz_replay, which runs the regression files and the seed corpus
// under ctest). docs/robustness.md.
#pragma once

#include <cstddef>
#include <cstdint>

// Writes the bytes to a scratch file and runs read_trace (which validates)
// and list_datasets (`qsa inspect`) on it. The project's typed errors
// (ConfigError, InputError, IoError) are the expected way to fail; an
// InternalError aborts, and any other exception escapes, so both are findings
// as much as a sanitizer report, a crash or a hang.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
