// GPU expand (gpu/expand) against the reference (reference/expand.hpp):
//  - every column of every row equals qsa::expand_rows exactly, over ratios
//    {1, 4, 8}, budgets {16, 64, 2048} (and 8192 at ratio 1: more block ids
//    than the kernel stages in shared memory) and both layouts (count column on and
//    off), on random rows: full selections, fewer valid blocks than K_B, rows
//    that see no block (V = 0), empty selections, junk after the first -1
//    (ignored, as the reference ignores it) and padding rows; every output
//    element is written (outputs are poisoned first);
//  - with the slots written beside the ids (gpu::ExpandSlots), every slot
//    equals reference token_slots over the same sweep, on random block
//    tables with unmapped pages, entries past the cache, rows past their
//    request's seq_len, pages past the table and padding rows, in pages of
//    16, 7 and 1 tokens (the kernel divides by a multiplication; at 1 token
//    per page the pages outnumber the table entries it holds in shared
//    memory);
//  - the spec's worked example;
//  - validate_expand accepts what the reference accepts and rejects, naming
//    row and slot, what it rejects.
#include "gpu/expand/expand.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/expand.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;

constexpr uint64_t kSeed = 0xe4a9d0001ULL;

struct ExpandCase {
  int ratio;
  int budget;
  bool count;
};

std::string case_name(const ExpandCase& c) {
  return "r" + std::to_string(c.ratio) + "_K" + std::to_string(c.budget) + (c.count ? "_count" : "_plain");
}
std::string param_name(const testing::TestParamInfo<ExpandCase>& info) { return case_name(info.param); }
void PrintTo(const ExpandCase& c, std::ostream* os) { *os << case_name(c); }

// Random selections for T rows; the last rows are padding.
struct Rows {
  TensorI32 block_ids;
  std::vector<int64_t> pos;
};

Rows random_rows(const ExpandParams& p, int64_t T, int64_t padding, uint64_t seed) {
  const int r = p.ratio, kb = p.budget / p.ratio;
  const CounterRng rng(seed, "gpu.expand.rows");
  Rows rows{TensorI32({T, kb}, -1), std::vector<int64_t>(static_cast<size_t>(T), -1)};
  uint64_t draw = 0;
  auto uniform = [&](int64_t n) { return static_cast<int64_t>(rng.bits(draw++) % static_cast<uint64_t>(n)); };
  for (int64_t t = 0; t < T - padding; ++t) {
    // Positions from "no complete block" up to twice the budget, so that V
    // is sometimes 0, sometimes below K_B and sometimes above it.
    const int64_t pos = t == 0 ? r - 1 - (r > 1 ? 1 : 0) : uniform(2 * int64_t{p.budget} + 2 * r);
    rows.pos[t] = pos;
    const int64_t visible = (pos + 1) / r;
    const int64_t cap = std::min<int64_t>(visible, kb);
    int64_t valid = cap;
    if (t % 3 == 1) valid = cap > 0 ? uniform(cap + 1) : 0;  // fewer than possible, maybe none
    int32_t* ids = rows.block_ids.row(t);
    for (int64_t s = 0; s < valid; ++s) ids[s] = static_cast<int32_t>(uniform(visible));
    // Junk after the first -1 is outside the prefix: the reference ignores it.
    if (t % 4 == 2)
      for (int64_t s = valid + 1; s < kb; ++s) ids[s] = static_cast<int32_t>(uniform(4 * visible + 8)) - 3;
  }
  for (int64_t t = T - padding; t < T; ++t)  // padding rows carry junk too; nothing reads it
    for (int s = 0; s < kb; ++s) rows.block_ids.at(t, s) = static_cast<int32_t>(uniform(100)) - 50;
  return rows;
}

TensorI32 run_gpu(const ExpandParams& p, const Rows& rows) {
  const int64_t T = static_cast<int64_t>(rows.pos.size());
  DeviceBuffer<int32_t> ids(rows.block_ids.data);
  DeviceBuffer<int64_t> pos(rows.pos);
  DeviceBuffer<int32_t> out(static_cast<size_t>(T * p.width()));
  out.poison(gpu::kPoisonId);
  gpu::launch_expand(p, T, ids.get(), pos.get(), out.get(), nullptr);
  TensorI32 result({T, p.width()});
  result.data = out.download();
  return result;
}

// Every column of T random rows (the last 3 padding) against expand_rows.
void expect_ids_match(const ExpandCase& c, int64_t T) {
  const ExpandParams p{c.ratio, c.budget, c.count};
  const uint64_t seed = kSeed ^ stream_id(case_name(c) + (T == 40 ? "" : "_T" + std::to_string(T)));
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const Rows rows = random_rows(p, T, 3, seed);
  ASSERT_NO_THROW(gpu::validate_expand(p, rows.block_ids, rows.pos));
  TensorI32 want;
  expand_rows(p, rows.block_ids, rows.pos, want);
  const TensorI32 got = run_gpu(p, rows);
  ASSERT_EQ(got.shape, want.shape);
  int failures = 0;
  for (int64_t t = 0; t < want.dim(0) && failures < 10; ++t)
    for (int64_t col = 0; col < want.dim(1); ++col)
      if (got.at(t, col) != want.at(t, col) && failures++ < 10)
        ADD_FAILURE() << "row " << t << " (pos " << rows.pos[t] << ") column " << col << ": gpu "
                      << got.at(t, col) << (got.at(t, col) == static_cast<int32_t>(gpu::kPoisonId) ? " (never written)" : "")
                      << ", reference " << want.at(t, col);
}

// The attention's metadata for the rows: R requests (row t takes request
// t mod R, padding rows -1), seq_lens that sometimes fall short of a row's
// position, a table of page size 16 with unmapped entries and entries past
// the cache's num_pages, and fewer columns than the longest row needs.
struct SlotMeta {
  std::vector<int32_t> token_to_req, seq_lens;
  TensorI32 table;
  int page_size = 0;
  int64_t num_pages = 0;
};

SlotMeta random_meta(const Rows& rows, int64_t padding, int page_size, uint64_t seed) {
  const CounterRng rng(seed, "gpu.expand.slots");
  uint64_t draw = 0;
  auto uniform = [&](int64_t n) { return static_cast<int64_t>(rng.bits(draw++) % static_cast<uint64_t>(n)); };
  const auto T = static_cast<int64_t>(rows.pos.size());
  const int R = 3;
  SlotMeta m;
  m.page_size = page_size;
  m.token_to_req.assign(static_cast<size_t>(T), -1);
  m.seq_lens.assign(R, 1);
  for (int64_t t = 0; t < T - padding; ++t) {
    m.token_to_req[t] = static_cast<int32_t>(t % R);
    int32_t& len = m.seq_lens[t % R];
    len = std::max<int32_t>(len, static_cast<int32_t>(rows.pos[t] + 1));
  }
  m.seq_lens[1] = std::max<int32_t>(1, m.seq_lens[1] / 2);  // request 1's later rows read past its seq_len
  int64_t longest = 1;
  for (int32_t len : m.seq_lens) longest = std::max<int64_t>(longest, len);
  const int max_pages = static_cast<int>(std::max<int64_t>(1, (longest + m.page_size - 1) / m.page_size - 1));
  m.num_pages = 3 * max_pages;
  m.table = TensorI32({R, max_pages});
  for (int32_t& e : m.table.data) {
    const int64_t u = uniform(10);
    e = u == 0 ? -1 : u == 1 ? static_cast<int32_t>(m.num_pages + uniform(5)) : static_cast<int32_t>(uniform(m.num_pages));
  }
  return m;
}

// Every slot of T random rows (the last 3 padding) against token_slots.
void expect_slots_match(const ExpandCase& c, int64_t T) {
  const ExpandParams p{c.ratio, c.budget, c.count};
  const uint64_t seed = kSeed ^ stream_id(case_name(c) + ".slots" + (T == 40 ? "" : "_T" + std::to_string(T)));
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const int64_t padding = 3;
  const Rows rows = random_rows(p, T, padding, seed);
  // Pages of 16 tokens (a power of two), 7 and 1 (every id its own page).
  const int page_size = c.ratio == 1 ? 1 : c.ratio == 4 ? 16 : 7;
  const SlotMeta m = random_meta(rows, padding, page_size, seed);
  TensorI32 ids, want;
  expand_rows(p, rows.block_ids, rows.pos, ids);
  token_slots(ids, p.count_column, m.token_to_req, m.seq_lens, m.table, m.page_size, m.num_pages, want);

  DeviceBuffer<int32_t> d_blocks(rows.block_ids.data), d_t2r(m.token_to_req), d_lens(m.seq_lens),
      d_table(m.table.data);
  DeviceBuffer<int64_t> d_pos(rows.pos);
  DeviceBuffer<int32_t> d_ids(static_cast<size_t>(T * p.width())), d_slots(static_cast<size_t>(T * p.width()));
  d_ids.poison(gpu::kPoisonId);
  d_slots.poison(gpu::kPoisonId);
  gpu::ExpandSlots sl;
  sl.token_to_req = d_t2r.get();
  sl.seq_lens = d_lens.get();
  sl.block_table = d_table.get();
  sl.num_reqs = static_cast<int>(m.seq_lens.size());
  sl.max_pages = static_cast<int>(m.table.dim(1));
  sl.page_size = m.page_size;
  sl.num_pages = m.num_pages;
  sl.token_slots = d_slots.get();
  gpu::launch_expand(p, T, d_blocks.get(), d_pos.get(), d_ids.get(), nullptr, &sl);
  ASSERT_EQ(d_ids.download(), ids.data) << "the ids change when the slots are written too";
  const std::vector<int32_t> got = d_slots.download();
  int failures = 0, mapped = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mapped += want.data[i] >= 0;
    if (got[i] != want.data[i] && failures++ < 10)
      ADD_FAILURE() << "row " << i / p.width() << " column " << i % p.width() << " (id " << ids.data[i] << "): gpu "
                    << got[i] << (got[i] == static_cast<int32_t>(gpu::kPoisonId) ? " (never written)" : "")
                    << ", reference " << want.data[i];
  }
  EXPECT_GT(mapped, 0) << "no column maps to a slot: the case tests only the -1 rules";
}

class GpuExpand : public testing::TestWithParam<ExpandCase> {};

TEST_P(GpuExpand, MatchesReferenceExactly) { expect_ids_match(GetParam(), 40); }

TEST_P(GpuExpand, SlotsMatchReferenceExactly) { expect_slots_match(GetParam(), 40); }

// Above 4096 rows the launch takes the kernels of 128 threads per row, whose
// shared memory stages 1024 block ids (the sweep's 40 rows take those of
// 512): a row of 512 block ids staged, one of 2048 read from memory.
TEST(GpuExpandManyRows, NarrowKernelsMatchReference) {
  for (const ExpandCase& c : {ExpandCase{4, 2048, true}, ExpandCase{1, 2048, false}}) {
    SCOPED_TRACE(case_name(c));
    expect_ids_match(c, 4100);
    expect_slots_match(c, 4100);
  }
}

TEST(GpuExpandSlots, BadSlotArgumentsAreRejected) {
  const ExpandParams p{4, 16, false};
  DeviceBuffer<int32_t> blocks(std::vector<int32_t>{0, -1, -1, -1}), t2r(std::vector<int32_t>{0}),
      lens(std::vector<int32_t>{8}), table(std::vector<int32_t>{0}), ids(19), slots(19);  // width K + r - 1
  DeviceBuffer<int64_t> pos(std::vector<int64_t>{7});
  gpu::ExpandSlots sl;
  sl.token_to_req = t2r.get();
  sl.seq_lens = lens.get();
  sl.block_table = table.get();
  sl.num_reqs = 1;
  sl.max_pages = 1;
  sl.page_size = 16;
  sl.num_pages = 1;
  sl.token_slots = slots.get();
  EXPECT_NO_THROW(gpu::launch_expand(p, 1, blocks.get(), pos.get(), ids.get(), nullptr, &sl));
  gpu::ExpandSlots bad = sl;
  bad.token_slots = nullptr;
  EXPECT_THROW(gpu::launch_expand(p, 1, blocks.get(), pos.get(), ids.get(), nullptr, &bad), InputError);
  bad = sl;
  bad.page_size = 0;
  EXPECT_THROW(gpu::launch_expand(p, 1, blocks.get(), pos.get(), ids.get(), nullptr, &bad), ConfigError);
  bad = sl;
  bad.num_pages = int64_t{1} << 28;  // 2^28 pages of 16 slots overflow int32
  EXPECT_THROW(gpu::launch_expand(p, 1, blocks.get(), pos.get(), ids.get(), nullptr, &bad), ConfigError);
  bad = sl;
  bad.max_pages = -1;
  EXPECT_THROW(gpu::launch_expand(p, 1, blocks.get(), pos.get(), ids.get(), nullptr, &bad), InputError);
}

INSTANTIATE_TEST_SUITE_P(Sweep, GpuExpand,
                         testing::Values(ExpandCase{1, 16, false}, ExpandCase{1, 16, true}, ExpandCase{1, 64, false},
                                         ExpandCase{1, 64, true}, ExpandCase{1, 2048, false},
                                         ExpandCase{1, 2048, true}, ExpandCase{4, 16, false},
                                         ExpandCase{4, 16, true}, ExpandCase{4, 64, false}, ExpandCase{4, 64, true},
                                         ExpandCase{4, 2048, false}, ExpandCase{4, 2048, true},
                                         ExpandCase{8, 16, false}, ExpandCase{8, 16, true}, ExpandCase{8, 64, false},
                                         ExpandCase{8, 64, true}, ExpandCase{8, 2048, false},
                                         ExpandCase{8, 2048, true}, ExpandCase{1, 8192, false},
                                         ExpandCase{1, 8192, true}),
                         param_name);

TEST(GpuExpandExample, SpecWorkedExample) {
  // r 4, K 8, p 13, blocks [2, 0]: [8, 9, 10, 11, 0, 1, 2, 3, 12, 13, -1], count 10.
  const ExpandParams p{4, 8, true};
  Rows rows{TensorI32({1, 2}), {13}};
  rows.block_ids.data = {2, 0};
  const TensorI32 got = run_gpu(p, rows);
  EXPECT_EQ(got.data, (std::vector<int32_t>{8, 9, 10, 11, 0, 1, 2, 3, 12, 13, -1, 10}));
}

TEST(GpuExpandValidate, RejectsWhatTheReferenceRejects) {
  const ExpandParams p{4, 16, false};  // K_B = 4
  Rows rows{TensorI32({2, 4}, -1), {13, 5}};  // row 0 sees 3 blocks, row 1 sees 1
  rows.block_ids.at(0, 0) = 2;
  EXPECT_NO_THROW(gpu::validate_expand(p, rows.block_ids, rows.pos));

  Rows bad = rows;
  bad.block_ids.at(1, 0) = 1;  // block 1 is not complete at p = 5
  std::string msg = test::input_error_message([&] { gpu::validate_expand(p, bad.block_ids, bad.pos); });
  EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot 0"), std::string::npos) << msg;
  TensorI32 ref_out;
  EXPECT_THROW(expand_rows(p, bad.block_ids, bad.pos, ref_out), InputError) << "the reference agrees";

  bad = rows;
  bad.block_ids.at(0, 1) = -2;
  msg = test::input_error_message([&] { gpu::validate_expand(p, bad.block_ids, bad.pos); });
  EXPECT_NE(msg.find("slot 1"), std::string::npos) << msg;

  bad = rows;
  bad.block_ids.at(0, 2) = 99;  // after the first -1 (slot 1): ignored, as by the reference
  EXPECT_NO_THROW(gpu::validate_expand(p, bad.block_ids, bad.pos));

  EXPECT_THROW(gpu::validate_expand(p, TensorI32({2, 3}, -1), rows.pos), InputError);
  EXPECT_THROW(gpu::validate_expand(ExpandParams{4, 18, false}, rows.block_ids, rows.pos), ConfigError);
  EXPECT_THROW(gpu::validate_expand(ExpandParams{0, 16, false}, rows.block_ids, rows.pos), ConfigError);
  bad = rows;
  bad.pos[1] = int64_t{1} << 40;
  EXPECT_THROW(gpu::validate_expand(p, bad.block_ids, bad.pos), InputError);
}

}  // namespace
}  // namespace qsa
