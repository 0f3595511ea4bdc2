// A sweep is resumable: finished points are kept as parts, a rerun with the
// same arguments skips them and writes the same bytes, and a rerun with other
// arguments is refused rather than mixing two sweeps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "harness/gen/generator.hpp"
#include "harness/sweep/sweep_runner.hpp"

namespace qsa {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kGenSeed = 77;

std::vector<SweepTrace> inputs() {
  GenOptions g;
  g.seed = kGenSeed;
  g.prompt_lens = {30, 19};
  g.decode_steps = 2;
  g.mtp_drafts = 0;
  g.inputs_only = true;
  return {{"gen:resume", "test", generate_trace(config_preset("tiny"), g)}};
}

SweepSettings settings() {
  SweepSettings s;
  s.axes.budgets = {8, 16};
  s.axes.ratios = {2, 4};
  s.axes.kv_dtypes = {KvDtype::kFp8};
  s.axes.indexer_dtypes = {IndexerDtype::kBf16, IndexerDtype::kFp8};
  s.axes.policies = {SweepPolicy::kIndexer, SweepPolicy::kOracleSum, SweepPolicy::kRandom};
  s.rows = parse_row_spec("every:3");
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

class SweepResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qsa_sweep_resume_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  SweepRunOptions options(const std::string& name) const {
    SweepRunOptions o;
    o.output = (dir_ / name).string();
    return o;
  }
  fs::path dir_;
};

TEST_F(SweepResume, RerunAfterLosingAPartWritesTheSameBytes) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed));
  const auto in = inputs();
  SweepRunOptions o = options("s");
  o.per_row_path = (dir_ / "rows.csv").string();
  const SweepSummary first = run_sweep(in, settings(), o);
  EXPECT_EQ(first.points, 4);
  EXPECT_EQ(first.computed, 4);
  const std::string csv = slurp(first.csv_path), rows = slurp(o.per_row_path);
  ASSERT_GT(first.csv_lines, 0);

  // An interrupted run is a run with parts missing.
  fs::remove(dir_ / "s.parts" / "t0-gen_resume-r4-fp8.csv");
  const SweepSummary second = run_sweep(in, settings(), o);
  EXPECT_EQ(second.computed, 1);
  EXPECT_EQ(second.resumed, 3);
  EXPECT_EQ(slurp(second.csv_path), csv);
  EXPECT_EQ(slurp(o.per_row_path), rows);

  // A fresh sweep elsewhere agrees byte for byte too.
  SweepRunOptions fresh = options("fresh");
  fresh.per_row_path = (dir_ / "rows2.csv").string();
  EXPECT_EQ(slurp(run_sweep(in, settings(), fresh).csv_path), csv);
}

TEST_F(SweepResume, OtherArgumentsAreRejectedNamingTheDifference) {
  const auto in = inputs();
  run_sweep(in, settings(), options("s"));
  SweepSettings other = settings();
  other.axes.budgets = {8, 32};
  try {
    run_sweep(in, other, options("s"));
    FAIL() << "a sweep with other budgets resumed another sweep's parts";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("budgets was 8,16, now 8,32"), std::string::npos) << e.what();
  }
  SweepSettings seed = settings();
  seed.seed = 5;
  EXPECT_THROW(run_sweep(in, seed, options("s")), ConfigError);
  // --force starts over.
  SweepRunOptions forced = options("s");
  forced.force = true;
  EXPECT_EQ(run_sweep(in, other, forced).computed, 4);
}

TEST_F(SweepResume, ExistingOutputsAreReplacedOnlyWithForce) {
  const auto in = inputs();
  const SweepSummary done = run_sweep(in, settings(), options("s"));
  fs::remove_all(done.parts_dir);
  EXPECT_THROW(run_sweep(in, settings(), options("s")), IoError);
  SweepRunOptions forced = options("s");
  forced.force = true;
  EXPECT_EQ(run_sweep(in, settings(), forced).computed, 4);
}

TEST_F(SweepResume, OutputPrefixMayEndInCsv) {
  const SweepSummary s = run_sweep(inputs(), settings(), options("named.csv"));
  EXPECT_EQ(s.csv_path, (dir_ / "named.csv").string());
  EXPECT_EQ(s.json_path, (dir_ / "named.json").string());
  EXPECT_TRUE(fs::exists(dir_ / "named.parts" / "manifest.txt"));
}

}  // namespace
}  // namespace qsa
