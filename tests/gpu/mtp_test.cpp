// GPU MTP top-k reuse (gpu/mtp) against the reference (reference/mtp_reuse.hpp):
//  - a selecting step of three requests (one of a single token) plus padding
//    rows saves each request's last row; the saved ids, scores and token ids
//    equal save_mtp_rows bit for bit (scores as the fp32 values the reference
//    holds in doubles, -inf and NaN included);
//  - reuse steps (as many requests as saved, and fewer) built from the GPU's
//    saved rows equal reuse_mtp_rows bit for bit, padding rows included, with
//    the count column on and off, at tiny and qwen4-exp widths; the saved
//    rows are left alone; every output element is written (poisoned first);
//  - mtp_last_rows, the validators' rejections (naming the entry) and the
//    launchers' ConfigError / InputError checks.
#include "gpu/mtp/mtp_reuse.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/common/bf16.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "reference/core/config.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/mtp_reuse.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;

constexpr uint64_t kSeed = 0x3a7b0001ULL;
constexpr int32_t kPagesPerReq = 3;

struct Case {
  std::string preset;  // gives K_B and the row width
  bool count_column;
};

std::string case_name(const Case& c) {
  return std::string(c.preset == "tiny" ? "tiny" : "qwen4exp") + (c.count_column ? "_count" : "_plain");
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }
std::string param_name(const testing::TestParamInfo<Case>& info) { return case_name(info.param); }

// Layouts come from the tiny preset whatever the widths: they only place rows.
StepLayout layout(const std::vector<int32_t>& context, const std::vector<int32_t>& query, int64_t padding) {
  const QsaConfig c = config_preset("tiny");
  const int64_t pages = static_cast<int64_t>(query.size()) * kPagesPerReq;
  return derive_step_layout(c, CacheGeometry{pages, pages}, simple_step(context, query, kPagesPerReq, padding));
}

// One step's selection rows: host tensors for the reference (scores as the
// doubles of fp32 values) and the fp32 scores the GPU holds.
struct Rows {
  TensorI32 ids, idx;
  TensorD scores;
  std::vector<float> scores_f;
};

Rows random_rows(int64_t T, int kb, int width, bool count_column, uint64_t seed) {
  const CounterRng rng(seed, "gpu.mtp.rows");
  uint64_t draw = 0;
  Rows r{TensorI32({T, kb}), TensorI32({T, width}), TensorD({T, kb}), {}};
  for (int64_t i = 0; i < r.ids.numel(); ++i) {
    r.ids.data[i] = static_cast<int32_t>(rng.bits(draw++) % 5000) - 1;  // -1 now and then
    float s = static_cast<float>(rng.normal(draw++));
    if (i % 11 == 3) s = -std::numeric_limits<float>::infinity();  // an empty slot's score
    if (i % 97 == 5) s = gpu::bits_float(0x7fc00000u);              // NaN ranks first in select
    r.scores_f.push_back(s);
    r.scores.data[i] = static_cast<double>(s);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int col = 0; col < width; ++col)
      r.idx.at(t, col) = count_column && col == width - 1 ? static_cast<int32_t>(rng.bits(draw++) % width)
                                                          : static_cast<int32_t>(rng.bits(draw++) % 9000) - 1;
  return r;
}

// Device copies of a row set (selection or saved rows).
struct DeviceRows {
  DeviceBuffer<int32_t> ids, idx;
  DeviceBuffer<float> scores;
  DeviceRows(int64_t rows, int kb, int width)
      : ids(static_cast<size_t>(rows * kb)), idx(static_cast<size_t>(rows * width)),
        scores(static_cast<size_t>(rows * kb)) {
    ids.poison(gpu::kPoisonId);
    idx.poison(gpu::kPoisonId);
    scores.poison(gpu::kPoisonFloat);
  }
  explicit DeviceRows(const Rows& r) : ids(r.ids.data), idx(r.idx.data), scores(r.scores_f) {}
};

// Bit-for-bit comparison of one output tensor; poison left in place is
// reported as never written.
template <class Got, class Want, class Bits>
void expect_bits(const char* what, const std::vector<Got>& got, const Tensor<Want>& want, Bits bits,
                 uint32_t poison) {
  ASSERT_EQ(got.size(), want.data.size()) << what;
  const int64_t width = want.dim(1);
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint32_t g = bits(got[i]), w = bits(static_cast<Got>(want.data[i]));
    if (g != w && failures++ < 10)
      ADD_FAILURE() << what << "[row=" << static_cast<int64_t>(i) / width << ", col=" << static_cast<int64_t>(i) % width
                    << "]: gpu " << got[i] << (g == poison ? " (never written)" : "") << ", reference " << want.data[i];
  }
}

uint32_t id_bits(int32_t v) { return static_cast<uint32_t>(v); }
uint32_t score_bits(float v) { return gpu::float_bits(v); }

void expect_rows(const DeviceRows& d, const TensorI32& ids, const TensorD& scores, const TensorI32& idx) {
  expect_bits("block_ids", d.ids.download(), ids, id_bits, gpu::kPoisonId);
  expect_bits("block_scores", d.scores.download(), scores, score_bits, gpu::kPoisonFloat);
  expect_bits("token_idx", d.idx.download(), idx, id_bits, gpu::kPoisonId);
}

class GpuMtp : public testing::TestWithParam<Case> {};

TEST_P(GpuMtp, SaveAndReuseMatchTheReferenceBitForBit) {
  const Case& cs = GetParam();
  QsaConfig m = config_preset(cs.preset);
  m.count_column = cs.count_column;
  const int kb = m.blocks_budget(), width = m.index_row_width();
  const uint64_t seed = kSeed ^ stream_id(case_name(cs));
  SCOPED_TRACE(testing::Message() << "case " << case_name(cs) << ", seed " << seed);

  // Selecting step: requests of 4, 1 and 6 tokens, then two padding rows.
  const StepLayout sel = layout({0, 5, 11}, {4, 1, 6}, 2);
  const Rows rows = random_rows(sel.num_tokens, kb, width, cs.count_column, seed);
  const MtpRows want_saved = save_mtp_rows(sel, rows.ids, rows.scores, rows.idx);
  const std::vector<int32_t> last = gpu::mtp_last_rows(sel);
  ASSERT_NO_THROW(gpu::validate_mtp_save(last, sel.num_tokens));

  const DeviceRows d_rows(rows);
  const DeviceBuffer<int32_t> d_last(last);
  DeviceRows saved(sel.num_reqs, kb, width);
  gpu::launch_mtp_save(sel.num_reqs, kb, width, d_last.get(), d_rows.ids.get(), d_rows.scores.get(),
                       d_rows.idx.get(), saved.ids.get(), saved.scores.get(), saved.idx.get(), nullptr);
  QSA_GPU_CHECK(hipDeviceSynchronize());
  {
    SCOPED_TRACE("save");
    expect_rows(saved, want_saved.block_ids, want_saved.block_scores, want_saved.token_idx);
  }

  // Draft steps: all three requests (2, 1 and 3 tokens) with two padding
  // rows, then only the first two requests with one padding row.
  const std::vector<StepLayout> reuse_steps = {layout({4, 6, 17}, {2, 1, 3}, 2), layout({4, 6}, {1, 1}, 1)};
  for (size_t s = 0; s < reuse_steps.size(); ++s) {
    SCOPED_TRACE(testing::Message() << "reuse step " << s);
    const StepLayout& l = reuse_steps[s];
    ASSERT_NO_THROW(gpu::validate_mtp_reuse(l.token_to_req, sel.num_reqs));
    TensorI32 want_ids, want_idx;
    TensorD want_scores;
    reuse_mtp_rows(l, want_saved, cs.count_column, want_ids, want_scores, want_idx);

    const DeviceBuffer<int32_t> d_req(l.token_to_req);
    DeviceRows out(l.num_tokens, kb, width);
    gpu::launch_mtp_reuse(l.num_tokens, kb, width, cs.count_column, d_req.get(), saved.ids.get(),
                          saved.scores.get(), saved.idx.get(), out.ids.get(), out.scores.get(), out.idx.get(),
                          nullptr);
    QSA_GPU_CHECK(hipDeviceSynchronize());
    expect_rows(out, want_ids, want_scores, want_idx);
    SCOPED_TRACE("saved rows after the reuse");
    expect_rows(saved, want_saved.block_ids, want_saved.block_scores, want_saved.token_idx);
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, GpuMtp,
                         testing::Values(Case{"tiny", false}, Case{"tiny", true}, Case{"qwen4-exp", false},
                                         Case{"qwen4-exp", true}),
                         param_name);

TEST(GpuMtpValidate, LastRowsAndRejections) {
  const StepLayout sel = layout({0, 5, 11}, {4, 1, 6}, 2);  // 13 rows
  EXPECT_EQ(gpu::mtp_last_rows(sel), (std::vector<int32_t>{3, 4, 10}));
  EXPECT_NO_THROW(gpu::validate_mtp_save({3, 4, 10}, 13));
  std::string msg = test::input_error_message([] { gpu::validate_mtp_save({3, -1, 10}, 13); });
  EXPECT_NE(msg.find("last_row[1] = -1"), std::string::npos) << msg;
  msg = test::input_error_message([] { gpu::validate_mtp_save({3, 4, 13}, 13); });
  EXPECT_NE(msg.find("last_row[2] = 13"), std::string::npos) << msg;

  EXPECT_NO_THROW(gpu::validate_mtp_reuse({0, -1, 2, 2}, 3));
  msg = test::input_error_message([] { gpu::validate_mtp_reuse({0, 1, 3}, 3); });
  EXPECT_NE(msg.find("token_to_req[2] = 3"), std::string::npos) << msg;
  msg = test::input_error_message([] { gpu::validate_mtp_reuse({-2}, 3); });
  EXPECT_NE(msg.find("token_to_req[0] = -2"), std::string::npos) << msg;
  msg = test::input_error_message([] { gpu::validate_mtp_reuse({0}, 0); });
  EXPECT_NE(msg.find("before any selecting step"), std::string::npos) << msg;

  // A reuse step with more requests than step 0 saved: both sides reject it.
  const StepLayout two = layout({0, 0}, {1, 1}, 0);
  const MtpRows saved_one = save_mtp_rows(layout({0}, {1}, 0), TensorI32({1, 2}), TensorD({1, 2}), TensorI32({1, 3}));
  TensorI32 ids, idx;
  TensorD scores;
  EXPECT_THROW(reuse_mtp_rows(two, saved_one, false, ids, scores, idx), InputError);
  EXPECT_THROW(gpu::validate_mtp_reuse(two.token_to_req, 1), InputError);
}

TEST(GpuMtpValidate, LaunchersRejectBadShapesAndPointers) {
  DeviceBuffer<int32_t> i32(64);
  DeviceBuffer<float> f32(64);
  int32_t* ip = i32.get();
  float* fp = f32.get();
  auto save = [&](int reqs, int kb, int width, const int32_t* last) {
    gpu::launch_mtp_save(reqs, kb, width, last, ip, fp, ip, ip, fp, ip, nullptr);
  };
  auto reuse = [&](int64_t tokens, int kb, int width, bool count, const int32_t* req) {
    gpu::launch_mtp_reuse(tokens, kb, width, count, req, ip, fp, ip, ip, fp, ip, nullptr);
  };
  EXPECT_THROW(save(1, 0, 4, ip), ConfigError);
  EXPECT_THROW(save(1, 2, 0, ip), ConfigError);
  EXPECT_THROW(save(-1, 2, 4, ip), InputError);
  EXPECT_THROW(save(1, 2, 4, nullptr), InputError);
  EXPECT_NO_THROW(save(0, 2, 4, nullptr));  // nothing to save, nothing read
  EXPECT_THROW(reuse(1, 0, 4, false, ip), ConfigError);
  EXPECT_THROW(reuse(1, 2, 1, true, ip), ConfigError);  // no room for ids and the count
  EXPECT_THROW(reuse(-1, 2, 4, false, ip), InputError);
  EXPECT_THROW(reuse(int64_t{1} << 31, 2, 4, false, ip), InputError);
  EXPECT_THROW(reuse(1, 2, 4, false, nullptr), InputError);
  EXPECT_NO_THROW(reuse(0, 2, 4, false, nullptr));
  QSA_GPU_CHECK(hipDeviceSynchronize());
}

}  // namespace
}  // namespace qsa
