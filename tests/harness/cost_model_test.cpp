// The benchmarks' cost model (harness/bench/cost_model.hpp) against values
// worked out by hand for the `tiny` preset: H = 4, G = 2, D = 32, H_I = 2,
// d_I = 32, K = 16, r = 4 (K_B = 4, W = 19), P = 16 (4 compressed rows per
// page), ring capacity C = 4, hidden 64.
#include "harness/bench/cost_model.hpp"

#include <gtest/gtest.h>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"

namespace qsa::bench {
namespace {

QsaConfig tiny() { return config_preset("tiny"); }

TEST(CostModel, ShapesAndRowFacts) {
  const QsaConfig c = tiny();
  ASSERT_EQ(c.ring_capacity(), 4);
  EXPECT_EQ(decode_shape(3, 40).rows(), 3);
  EXPECT_EQ(prefill_shape(8, 6).rows(), 8);
  EXPECT_EQ(prefill_shape(8, 6).requests.at(0).seq_len(), 14);
  // p = 40, L = 41: V = 41 div 4 = 10 > K_B = 4, so 16 block tokens plus the
  // open group's tail {40}.
  EXPECT_EQ(visible_blocks_at(c, 40, 41), 10);
  EXPECT_EQ(attended_tokens_at(c, 40, 41), 17);
  // p = 7 closes group 1: V = 2 blocks (8 tokens) and an empty tail.
  EXPECT_EQ(attended_tokens_at(c, 7, 14), 8);
  // Prefill rows p = 6..13 of L = 14 attend p + 1 tokens each (V < K_B):
  // 7 + 8 + ... + 14 = 84, but only 14 distinct tokens exist.
  EXPECT_EQ(attended_kv_tokens(c, prefill_shape(8, 6)), 14);
  EXPECT_EQ(attended_kv_tokens(c, decode_shape(2, 40)), 34);
}

TEST(CostModel, SelectDecodeAndPrefill) {
  const QsaConfig c = tiny();
  // Per request: keys 10 blocks x 32 x 2 B = 640, block table ceil(10/4) = 3
  // entries = 12; per row: query 2 x 32 x 2 = 128, token_to_req + V = 8,
  // K_B ids and scores 4 x (4 + 4) = 32. Two requests: 2 x 820.
  const KernelCost d = select_cost(c, decode_shape(2, 40));
  EXPECT_DOUBLE_EQ(d.bytes, 1640.0);
  EXPECT_DOUBLE_EQ(d.flops, 2.0 * (2 * 2 * 32 * 10));
  // Prefill p = 6..13, L = 14: V = 1, 2, 2, 2, 2, 3, 3, 3 (sum 18), keys of
  // V_max = 3 blocks = 192 B, one table entry, 8 rows x 168.
  const KernelCost p = select_cost(c, prefill_shape(8, 6));
  EXPECT_DOUBLE_EQ(p.bytes, 192.0 + 4.0 + 8 * 168.0);
  EXPECT_DOUBLE_EQ(p.flops, 2.0 * 2 * 32 * 18);
  // fp8 halves the keys and the query.
  QsaConfig f = c;
  f.indexer_dtype = IndexerDtype::kFp8;
  EXPECT_DOUBLE_EQ(select_cost(f, decode_shape(2, 40)).bytes, 2 * (320.0 + 12 + 64 + 8 + 32));
}

TEST(CostModel, Expand) {
  QsaConfig c = tiny();
  // Per row: 4 ids x 4 B + an int64 position, 19 token ids x 4 B written.
  EXPECT_DOUBLE_EQ(expand_cost(c, decode_shape(2, 40)).bytes, 2 * (16.0 + 8 + 76));
  EXPECT_DOUBLE_EQ(expand_cost(c, decode_shape(2, 40)).flops, 0.0);
  c.count_column = true;  // width 20
  EXPECT_DOUBLE_EQ(expand_cost(c, decode_shape(1, 40)).bytes, 16.0 + 8 + 80);
}

TEST(CostModel, AttentionDecodePrefillAndFp8) {
  QsaConfig c = tiny();
  // Per row: Q and gate 2 x 4 x 32 x 2 = 512, ids 19 x 4 = 76, token_to_req 4,
  // A fp32 512 and O bf16 256 -> 1360. Per request: seq_len 4, ceil(41/16) = 3
  // table entries = 12, 17 tokens x K and V (2 x 2 x 32 x 2 B = 256) = 4352.
  const KernelCost d = attention_cost(c, decode_shape(2, 40));
  EXPECT_DOUBLE_EQ(d.bytes, 2 * (1360.0 + 4 + 12 + 4352));
  EXPECT_DOUBLE_EQ(d.flops, 2 * (4.0 * 4 * 32 * 17));
  // Prefill: 8 rows, 14 distinct tokens, one page; FLOPs over all 84 attended.
  const KernelCost p = attention_cost(c, prefill_shape(8, 6));
  EXPECT_DOUBLE_EQ(p.bytes, 8 * 1360.0 + 4 + 4 + 14 * 256.0);
  EXPECT_DOUBLE_EQ(p.flops, 4.0 * 4 * 32 * 84);
  // An exact union given by the caller replaces the bound.
  EXPECT_DOUBLE_EQ(attention_cost(c, prefill_shape(8, 6), 10).bytes, 8 * 1360.0 + 8 + 10 * 256.0);
  c.kv_dtype = KvDtype::kFp8;
  EXPECT_DOUBLE_EQ(attention_cost(c, decode_shape(2, 40)).bytes, 2 * (1360.0 + 4 + 12 + 17 * 128.0));
  c.kv_dtype = KvDtype::kOctaveK3V4;
  EXPECT_THROW(attention_cost(c, decode_shape(1, 40)), ConfigError);
}

TEST(CostModel, AttentionAtQwen4ExpDecode) {
  const QsaConfig c = config_preset("qwen4-exp");
  // p = 4096: V = 1024 >= K_B = 512 -> 2048 block tokens + tail {4096}.
  EXPECT_EQ(attended_tokens_at(c, 4096, 4097), 2049);
  const KernelCost k = attention_cost(c, decode_shape(1, 4096));
  EXPECT_DOUBLE_EQ(k.flops, 4.0 * 24 * 256 * 2049);
  const double per_row = 2 * 24 * 256 * 2 + 2051 * 4 + 4 + 24 * 256 * 6;
  EXPECT_DOUBLE_EQ(k.bytes, per_row + 4 + 3 * 4 + 2049.0 * 2 * 2 * 256 * 2);
}

TEST(CostModel, ProjectionsPrepareAndStep) {
  const QsaConfig c = tiny();
  EXPECT_DOUBLE_EQ(projection_cost(3, 64, 10).bytes, (3 * 64 + 10 * 64 + 3 * 10) * 2.0);
  EXPECT_DOUBLE_EQ(projection_cost(3, 64, 10).flops, 2.0 * 3 * 64 * 10);
  // Input projections: out = 3 x 32 (indexer) + 2 x 4 x 32 (Q | gate) + 2 x 2 x 32 (K, V) = 480.
  EXPECT_DOUBLE_EQ(input_projections_cost(c, decode_shape(2, 40)).flops, 2.0 * 2 * 64 * 480);
  EXPECT_DOUBLE_EQ(output_projection_cost(c, decode_shape(2, 40)).flops, 2.0 * 2 * 128 * 64);

  // Prepare, per row: reads (96 + 128 + 128) x 2 + 8 = 712, writes indexer Q
  // 128 + Q 256 + K, V 256 = 640; per step the four norm weights 256.
  // Decode at p = 40: no group completes, one page, one ring write of 64.
  EXPECT_DOUBLE_EQ(prepare_cost(c, decode_shape(2, 40)).bytes, 256 + 2 * (712.0 + 640 + 4 + 64));
  // Prefill p = 6..13: groups 1 and 2 complete (2 rows x 64), group 1
  // straddles the chunk start (tokens 4, 5 from the ring: 2 x 64), the last
  // C = 4 raw keys go to the ring (4 x 64).
  EXPECT_DOUBLE_EQ(prepare_cost(c, prefill_shape(8, 6)).bytes, 256 + 8 * 1352.0 + 4 + 128 + 128 + 256);
  EXPECT_DOUBLE_EQ(prepare_cost(c, prefill_shape(8, 6)).flops, 0.0);

  const StepShape s = decode_shape(2, 40);
  KernelCost sum = input_projections_cost(c, s);
  for (const KernelCost& k : {prepare_cost(c, s), select_cost(c, s), expand_cost(c, s), attention_cost(c, s),
                              output_projection_cost(c, s)})
    sum += k;
  EXPECT_DOUBLE_EQ(step_cost(c, s).bytes, sum.bytes);
  EXPECT_DOUBLE_EQ(step_cost(c, s).flops, sum.flops);
}

TEST(CostModel, StepWithoutGemms) {
  const QsaConfig c = tiny();
  const StepShape s = decode_shape(2, 40);
  // Decode at p = 40 (sections above): prepare 256 + 2 x 1420, select 1640,
  // expand 2 x 100, attention 2 x 5728; FLOPs of select and attention only.
  const KernelCost k = step_no_gemm_cost(c, s);
  EXPECT_DOUBLE_EQ(k.bytes, (256 + 2 * 1420.0) + 1640.0 + 2 * 100.0 + 2 * 5728.0);
  EXPECT_DOUBLE_EQ(k.flops, 2.0 * (2 * 2 * 32 * 10) + 2 * (4.0 * 4 * 32 * 17));
  // The GEMMs are exactly what step_cost adds.
  const KernelCost gemms = input_projections_cost(c, s);
  const KernelCost all = step_cost(c, s);
  EXPECT_DOUBLE_EQ(all.bytes, k.bytes + gemms.bytes + output_projection_cost(c, s).bytes);
  EXPECT_DOUBLE_EQ(all.flops, k.flops + gemms.flops + output_projection_cost(c, s).flops);
  // An exact KV-token union replaces the attention's bound (17 per request)
  // in both: 30 distinct tokens instead of 34, 4 x 256 B fewer.
  EXPECT_DOUBLE_EQ(step_no_gemm_cost(c, s, 30).bytes, k.bytes - 4 * 256.0);
  EXPECT_DOUBLE_EQ(step_cost(c, s, 30).bytes, all.bytes - 4 * 256.0);
}

TEST(CostModel, CopyAndFloor) {
  EXPECT_DOUBLE_EQ(copy_cost(1e9).bytes, 2e9);
  // Memory-bound: 2 ms at 1 TB/s beats 1 ms of math at 1 PFLOP/s.
  EXPECT_DOUBLE_EQ(floor_seconds({2e9, 1e12}, 1e12, 1e15), 2e-3);
  EXPECT_DOUBLE_EQ(floor_seconds({1e9, 4e12}, 1e12, 1e15), 4e-3);
}

}  // namespace
}  // namespace qsa::bench
