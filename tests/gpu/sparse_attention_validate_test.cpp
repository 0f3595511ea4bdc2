// Host validation for the GPU sparse attention launcher
// (gpu/attention/sparse_attention_validate.hpp):
//  - a valid step passes in both modes' reach and yields the launch sizes;
//  - bad token_to_req, block_table, seq_lens and shapes are InputErrors that
//    name the tensor and coordinates;
//  - lenient mode accepts any id (the reference ignores ids outside [0, L)),
//    strict mode rejects ids outside [-1, L), non -1 ids in padding rows and
//    a count column outside [0, width - 1], naming row and column;
//  - validate_token_slots accepts reference token_slots and rejects a slot
//    that differs (an id's, a -1's, the count column's), naming row and
//    column, and slots of another shape;
//  - unsupported configurations are ConfigErrors, contradictory params
//    InputErrors; the launcher rejects a short or misaligned workspace and bad split sizes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/common/device_buffer.hpp"
#include "reference/core/step_layout.hpp"
#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

using gpu::TokenIdCheck;

gpu_test::AttnCase small_case(bool count = false) {
  gpu_test::AttnSpec s;
  s.count = count;
  return gpu_test::make_attn_case(s, gpu_test::case_seed("validate"));
}

gpu::SparseAttentionDims validate(const gpu_test::AttnCase& c, TokenIdCheck ids = TokenIdCheck::kLenient) {
  return gpu::validate_sparse_attention(c.params, c.kv_params, c.token_idx, c.layout.token_to_req, c.layout.seq_lens,
                                        c.layout.block_table, ids);
}

template <class Fn>
void expect_input_error(Fn fn, const std::string& needle) {
  const std::string msg = test::input_error_message(fn);
  EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected to contain: " << needle;
}

TEST(GpuSparseAttentionValidate, ValidStepGivesLaunchSizes) {
  const gpu_test::AttnCase c = small_case();
  const gpu::SparseAttentionDims d = validate(c);
  EXPECT_EQ(d.num_tokens, c.layout.num_tokens);
  EXPECT_EQ(d.num_reqs, 2);
  EXPECT_EQ(d.max_pages, c.layout.block_table.dim(1));
  EXPECT_EQ(d.num_pages, c.kv_params.num_pages);
}

TEST(GpuSparseAttentionValidate, RejectsBadStepMetadata) {
  gpu_test::AttnCase c = small_case();
  c.layout.token_to_req[1] = 2;  // only requests 0 and 1 exist
  expect_input_error([&] { validate(c); }, "token_to_req[1] = 2");
  c = small_case();
  c.layout.token_to_req[0] = -2;
  expect_input_error([&] { validate(c); }, "token_to_req[0] = -2");
  c = small_case();
  c.layout.block_table.at(1, 2) = static_cast<int32_t>(c.kv_params.num_pages);
  expect_input_error([&] { validate(c); }, "block_table[1, 2]");
  c = small_case();
  c.layout.block_table.at(0, 0) = -3;
  expect_input_error([&] { validate(c); }, "block_table[0, 0] = -3");
  c = small_case();
  c.layout.seq_lens[1] = -1;
  expect_input_error([&] { validate(c); }, "seq_lens[1]");
  c = small_case();
  c.token_idx = TensorI32({c.layout.num_tokens, c.params.index_width + 1}, -1);
  expect_input_error([&] { validate(c); }, "token_idx");
}

TEST(GpuSparseAttentionValidate, TokenSlotsMustBeTheReferencesSlots) {
  for (bool count : {false, true}) {
    SCOPED_TRACE(count ? "count column" : "no count column");
    const gpu_test::AttnCase c = small_case(count);
    ASSERT_NO_THROW(validate(c));
    TensorI32 slots;
    token_slots(c.token_idx, count, c.layout.token_to_req, c.layout.seq_lens, c.layout.block_table,
                c.params.page_size, c.kv_params.num_pages, slots);
    const auto check = [&](const TensorI32& s) {
      gpu::validate_token_slots(c.params, c.kv_params, c.token_idx, c.layout.token_to_req, c.layout.seq_lens,
                                c.layout.block_table, s);
    };
    EXPECT_NO_THROW(check(slots));
    int64_t mapped = -1, dead = -1;  // a column with a slot, and one attention skips
    const int64_t W = slots.dim(1), ids = W - (count ? 1 : 0);
    for (int64_t i = 0; i < static_cast<int64_t>(slots.data.size()); ++i) {
      if (i % W >= ids) continue;
      if (slots.data[i] >= 0 && mapped < 0) mapped = i;
      if (slots.data[i] < 0 && dead < 0) dead = i;
    }
    ASSERT_GE(mapped, 0);
    ASSERT_GE(dead, 0);
    TensorI32 bad = slots;
    bad.data[mapped] += 1;  // the next slot of the same page: another token's K and V
    expect_input_error([&] { check(bad); }, fmt::format("token_slots[{}, {}]", mapped / W, mapped % W));
    bad = slots;
    bad.data[dead] = 0;  // a slot where attention reads nothing
    expect_input_error([&] { check(bad); }, fmt::format("token_slots[{}, {}] is 0", dead / W, dead % W));
    if (count) {
      bad = slots;
      bad.at(0, W - 1) += 1;
      expect_input_error([&] { check(bad); }, "count column");
    }
    expect_input_error([&] { check(TensorI32({slots.dim(0), W + 1})); }, "token_slots");
  }
}

TEST(GpuSparseAttentionValidate, LenientAcceptsWhatTheReferenceIgnoresStrictRejectsIt) {
  gpu_test::AttnCase c = small_case();  // ids already include -2..-9 and ids >= L
  EXPECT_NO_THROW(validate(c));
  EXPECT_THROW(validate(c, TokenIdCheck::kStrict), InputError);

  for (int64_t row = 0; row < c.layout.num_tokens; ++row)
    for (int64_t col = 0; col < c.params.index_width; ++col) c.token_idx.at(row, col) = row < 3 ? 0 : -1;
  EXPECT_NO_THROW(validate(c, TokenIdCheck::kStrict));
  const int32_t L1 = c.layout.seq_lens[1];
  c.token_idx.at(1, 5) = L1;
  expect_input_error([&] { validate(c, TokenIdCheck::kStrict); }, "token_idx[1, 5] = " + std::to_string(L1));
  c.token_idx.at(1, 5) = -4;
  expect_input_error([&] { validate(c, TokenIdCheck::kStrict); }, "token_idx[1, 5] = -4");
  c.token_idx.at(1, 5) = 0;
  c.token_idx.at(3, 0) = 0;  // row 3 is padding
  expect_input_error([&] { validate(c, TokenIdCheck::kStrict); }, "padding row");

  gpu_test::AttnCase counted = small_case(/*count=*/true);
  const int64_t w = counted.params.index_width;
  for (int64_t row = 0; row < counted.layout.num_tokens; ++row) {
    for (int64_t col = 0; col < w; ++col) counted.token_idx.at(row, col) = -1;
    counted.token_idx.at(row, w - 1) = 0;
  }
  EXPECT_NO_THROW(validate(counted, TokenIdCheck::kStrict));
  counted.token_idx.at(2, w - 1) = static_cast<int32_t>(w);
  expect_input_error([&] { validate(counted, TokenIdCheck::kStrict); }, "count column");
  EXPECT_NO_THROW(validate(counted)) << "lenient mode clamps the count, as the reference does";
}

TEST(GpuSparseAttentionValidate, RejectsUnsupportedConfigurations) {
  const gpu_test::AttnCase c = small_case();
  AttentionParams p = c.params;
  KvCacheParams kv = c.kv_params;
  auto check = [&] { gpu::check_sparse_attention_params(p, kv); };
  p.head_dim = kv.head_dim = 48;
  EXPECT_THROW(check(), ConfigError);
  p = c.params;
  kv = c.kv_params;
  p.p_rounding = PRounding::kBf16Normalized;
  EXPECT_NO_THROW(check()) << "bf16-normalised P (hf-eager) runs on the decode path";
  p = c.params;
  p.octave_shadow = true;
  EXPECT_THROW(check(), ConfigError);
  p = c.params;
  kv.dtype = KvDtype::kOctaveK3V4;
  EXPECT_THROW(check(), ConfigError);
  kv = c.kv_params;
  kv.kv_heads = 1;
  EXPECT_THROW(check(), InputError);
  kv = c.kv_params;
  p.kv_heads = 3;
  EXPECT_THROW(check(), InputError);
  p = c.params;
  p.count_column = true;
  p.index_width = 0;
  EXPECT_THROW(check(), InputError);
}

TEST(GpuSparseAttentionValidate, LauncherRejectsShortOrMisalignedWorkspaceAndBadSplits) {
  gpu_test::AttnSpec s;
  s.ids = 600;  // ten splits of the default 64 ids, three of 256
  const gpu_test::AttnCase c = gpu_test::make_attn_case(s, gpu_test::case_seed("workspace"));
  const gpu::SparseAttentionDims d = validate(c);
  EXPECT_EQ(gpu::sparse_attention_splits(c.params), 10);
  EXPECT_EQ(gpu::sparse_attention_splits(c.params, 256), 3);
  EXPECT_THROW(gpu::sparse_attention_splits(c.params, 100), InputError);
  EXPECT_THROW(gpu::sparse_attention_splits(c.params, 0), InputError);
  const size_t need = gpu::sparse_attention_workspace_floats(c.params, d);
  EXPECT_EQ(need, static_cast<size_t>(d.num_tokens * c.params.heads * 10 * (c.params.head_dim + 2)));
  gpu::DeviceBuffer<float> ws(need - 1);
  gpu::SparseAttentionArgs a;
  a.workspace = ws.get();
  a.workspace_floats = ws.size();
  expect_input_error([&] { gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, d, a, nullptr); },
                     "workspace");
  // Long enough but 4-byte aligned only: the split merge reads 16-byte vectors.
  gpu::DeviceBuffer<float> roomy(need + 1);
  a.workspace = roomy.get() + 1;
  a.workspace_floats = need;
  expect_input_error([&] { gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, d, a, nullptr); },
                     "workspace must be 16-byte aligned");
  gpu::DeviceBuffer<float> enough(need);
  a.workspace = enough.get();
  a.workspace_floats = enough.size();
  expect_input_error([&] { gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, d, a, nullptr); },
                     "is null");
}

}  // namespace
}  // namespace qsa
