// qsa_trace_fuzz_replay FILE|DIR...: runs the trace fuzz target once on each
// file (a directory: on each regular file in it, sorted by name), without
// libFuzzer, so any compiler and preset can replay the regression files and
// the seed corpus (ctest fuzz.regressions; under ASan + UBSan in the asan
// preset). A file that crashes, aborts or runs past the per-file alarm fails
// the run, and its name is the last line printed before the failure.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "harness/fuzz/trace_fuzzer.hpp"

namespace {

// Generous for a sanitizer build on a loaded machine; the slowest seed takes
// well under a second. SIGALRM's default action ends the process.
constexpr unsigned kSecondsPerFile = 60;

std::vector<std::filesystem::path> collect(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> here;
      for (const auto& entry : fs::directory_iterator(arg))
        if (entry.is_regular_file()) here.push_back(entry.path());
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "qsa_trace_fuzz_replay: %s is neither a file nor a directory\n", argv[i]);
      std::exit(2);
    }
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  const auto files = collect(argc, argv);
  if (files.empty()) {
    std::fprintf(stderr, "qsa_trace_fuzz_replay: no files to replay\n");
    return 2;
  }
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "qsa_trace_fuzz_replay: cannot read %s\n", file.c_str());
      return 2;
    }
    std::printf("replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
    std::fflush(stdout);
    ::alarm(kSecondsPerFile);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ::alarm(0);
  }
  std::printf("%zu files replayed: none crashed, hung or raised an untyped error\n", files.size());
  return 0;
}
