// decode_in_child_first: a decode that kills its process (as HDF5 1.10 does on
// a few corrupt files) becomes an IoError naming the file, while a decode
// that returns or throws leaves the parent to decode and report for itself.
// The real HDF5 crashes are the cli.adversarial case (tests/fuzz/hdf5-known).
#include "harness/trace/decode_guard.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/harness/trace_file_test.hpp"

namespace qsa {
namespace {

using testing_support::expect_error;

TEST(DecodeGuard, ChildKilledBySignalIsAnIoErrorNamingTheFile) {
  // SIGABRT (what HDF5's own assertions raise), not SIGSEGV: a sanitizer
  // would catch the SEGV and exit instead.
  expect_error<IoError>([] { decode_in_child_first("x.h5", [] { std::abort(); }); },
                        {"'x.h5'", "crashed HDF5", "died with signal 6", "docs/robustness.md"});
}

TEST(DecodeGuard, ChildKilledOutrightIsReportedAsLikelyOutOfMemory) {
  expect_error<IoError>([] { decode_in_child_first("big.h5", [] { ::kill(::getpid(), SIGKILL); }); },
                        {"'big.h5'", "killed (signal 9)", "out of memory", "--max-memory"});
}

TEST(DecodeGuard, ChildExitingAbnormallyIsAnIoError) {
  // What a sanitizer's report does: print, then exit non-zero.
  expect_error<IoError>([] { decode_in_child_first("y.h5", [] { std::_Exit(1); }); },
                        {"'y.h5'", "crashed HDF5", "exited with status 1"});
}

TEST(DecodeGuard, TypedErrorsAreLeftToTheParentsOwnDecode) {
  EXPECT_NO_THROW(decode_in_child_first("z.h5", [] { throw InputError("bad dataset"); }));
}

TEST(DecodeGuard, DecodeRunsInAChildNotInThisProcess) {
  testing_support::ScratchDir dir;
  const std::string marker = dir.file("child-ran");
  int touched = 0;
  decode_in_child_first("w.h5", [&] {
    touched = 1;  // the child's copy
    std::ofstream(marker) << "ran";
  });
  EXPECT_EQ(touched, 0);
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the decode never ran";
}

class GuardedRead : public testing_support::TraceFileTest {};

TEST_F(GuardedRead, ReadsWhatReadTraceReads) {
  const std::string file = write(valid());
  const Trace plain = read_trace(file);
  const Trace guarded = read_trace_guarded(file, {});
  ASSERT_EQ(guarded.steps.size(), plain.steps.size());
  EXPECT_TRUE(testing_support::same_bits(guarded.steps.back().hidden, plain.steps.back().hidden));
  EXPECT_EQ(guarded.seed, plain.seed);
}

TEST_F(GuardedRead, ReportsTheSameErrorAsReadTrace) {
  const std::string file = write(valid());
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  expect_error<IoError>([&] { read_trace_guarded(file, {}); }, {"'" + file + "'", "truncated"});
}

}  // namespace
}  // namespace qsa
