// derive_step_layout: the per-token layout of spec sections 4 and 10 on the
// tiny preset (r = 4, P = 16, C = 4, P/r = 4 compressed rows per page), with
// expected values worked out by hand from the formulas, and every metadata
// mistake a trace can make rejected with a message that names it; each id's
// cache slot (token_slots) by hand, against paged_slot, and on bad input.
#include "reference/core/step_layout.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reference/core/errors.hpp"
#include "reference/core/rng.hpp"

namespace qsa {
namespace {

const QsaConfig& tiny() {
  static const QsaConfig c = config_preset("tiny");
  return c;
}

constexpr CacheGeometry kGeometry{6, 6};

TensorI32 table(const std::vector<std::vector<int32_t>>& rows) {
  TensorI32 t({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())});
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j)
      t.at(static_cast<int64_t>(i), static_cast<int64_t>(j)) = rows[i][j];
  return t;
}

// Request 0: context 5, chunk 3 (p = 5..7); request 1: context 0, chunk 6
// (p = 0..5); two padding rows. Pages are scattered so that a formula using
// the logical page instead of the table entry would show.
StepMetadata mixed_step() {
  StepMetadata m = simple_step({5, 0}, {3, 6}, 2, 2);
  m.block_table = table({{5, 2}, {1, -1}});
  return m;
}

StepLayout derive(const StepMetadata& m) { return derive_step_layout(tiny(), kGeometry, m); }

// The InputError message of derive_step_layout, or "" when it passes.
std::string input_error(const StepMetadata& m) {
  try {
    derive(m);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_rejected(const StepMetadata& m, const std::string& substring) {
  const std::string msg = input_error(m);
  ASSERT_FALSE(msg.empty()) << "metadata was accepted";
  EXPECT_NE(msg.find(substring), std::string::npos) << "'" << substring << "' missing from: " << msg;
}

std::vector<int64_t> rope_row(const StepLayout& l, int a) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < l.num_tokens; ++t) out.push_back(l.rope_pos.at(a, t));
  return out;
}

TEST(StepLayout, MixedBatchWithPadding) {
  const StepLayout l = derive(mixed_step());
  EXPECT_EQ(l.num_reqs, 2);
  EXPECT_EQ(l.num_tokens, 11);
  EXPECT_EQ(l.num_valid_tokens, 9);
  EXPECT_EQ(l.query_lens, (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(l.seq_lens, (std::vector<int32_t>{8, 6}));
  EXPECT_EQ(l.context_len(0), 5);
  EXPECT_EQ(l.context_len(1), 0);
  EXPECT_EQ(l.row_begin(1), 3);
  EXPECT_EQ(l.row_end(1), 9);
  EXPECT_EQ(l.ring_blocks, (std::vector<int32_t>{5, 1}));  // default: block_table[req, 0]
  EXPECT_EQ(l.token_to_req, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1, 1, -1, -1}));
  EXPECT_EQ(l.pos, (std::vector<int64_t>{5, 6, 7, 0, 1, 2, 3, 4, 5, -1, -1}));
  for (int a = 0; a < 3; ++a) EXPECT_EQ(rope_row(l, a), l.pos) << "rope row " << a;
  // V = min((p+1) div 4, L div 4) with L = 8 and 6.
  EXPECT_EQ(l.visible_blocks, (std::vector<int32_t>{1, 1, 2, 0, 0, 0, 1, 1, 1, 0, 0}));
  // Pages 5 and 1: 5*16 + p and 1*16 + p.
  EXPECT_EQ(l.main_slot, (std::vector<int64_t>{85, 86, 87, 16, 17, 18, 19, 20, 21, -1, -1}));
  // Request 0 writes all 3 tokens to ring 5 (5*4 + p mod 4); request 1 only
  // its last 4 (p = 2..5) to ring 1.
  EXPECT_EQ(l.ring_slot, (std::vector<int64_t>{21, 22, 23, -1, -1, 6, 7, 4, 5, -1, -1}));
  // p = 7 completes block 1 (row 5*4 + 1), p = 3 completes block 0 (row 1*4 + 0).
  EXPECT_EQ(l.compressed_slot, (std::vector<int64_t>{-1, -1, 21, -1, -1, -1, 4, -1, -1, -1, -1}));
  EXPECT_FALSE(l.mtp_reuse);
}

// One request whose chunk crosses from logical page 0 into page 1 and
// completes a block on each.
TEST(StepLayout, ChunkCrossingAPage) {
  StepMetadata m = simple_step({14}, {6}, 2);  // p = 14..19, L = 20
  m.block_table = table({{3, 2}});
  m.mtp_reuse = true;
  const StepLayout l = derive(m);
  EXPECT_EQ(l.main_slot, (std::vector<int64_t>{62, 63, 32, 33, 34, 35}));
  EXPECT_EQ(l.visible_blocks, (std::vector<int32_t>{3, 4, 4, 4, 4, 5}));
  EXPECT_EQ(l.ring_slot, (std::vector<int64_t>{-1, -1, 12, 13, 14, 15}));
  // Block 3 -> compressed page 0 (3*4 + 3); block 4 -> compressed page 1 (2*4 + 0).
  EXPECT_EQ(l.compressed_slot, (std::vector<int64_t>{-1, 15, -1, -1, -1, 8}));
  EXPECT_TRUE(l.mtp_reuse);
}

TEST(StepLayout, PositionShapesAgreeForText) {
  const StepMetadata base = mixed_step();
  const int64_t T = base.positions.dim(0);
  StepMetadata one_row = base, three_rows = base;
  one_row.positions = TensorI64({1, T});
  three_rows.positions = TensorI64({3, T});
  for (int64_t t = 0; t < T; ++t) {
    // Padding columns carry junk: the layout must still report -1 there.
    const int64_t v = t < 9 ? base.positions.at(t) : 99;
    one_row.positions.at(0, t) = v;
    for (int a = 0; a < 3; ++a) three_rows.positions.at(a, t) = v;
  }
  const StepLayout ref = derive(base);
  for (const StepMetadata* m : {&one_row, &three_rows}) {
    const StepLayout l = derive(*m);
    EXPECT_EQ(l.rope_pos.shape, ref.rope_pos.shape);
    EXPECT_EQ(l.rope_pos.data, ref.rope_pos.data);
  }

  // mRoPE rows stay distinct; p still comes from seq_lens, not positions.
  StepMetadata mrope = three_rows;
  for (int64_t t = 0; t < 9; ++t) mrope.positions.at(1, t) = 40 + t;
  const StepLayout l = derive(mrope);
  EXPECT_EQ(l.rope_pos.at(1, 4), 44);
  EXPECT_EQ(l.rope_pos.at(0, 4), 1);
  EXPECT_EQ(l.rope_pos.at(1, 10), -1);
  EXPECT_EQ(l.pos, ref.pos);

  StepMetadata two_rows = base;
  two_rows.positions = TensorI64({2, T}, 0);
  expect_rejected(two_rows, "positions has shape");
}

TEST(StepLayout, ExplicitRingBlocksAndCompressedTable) {
  StepMetadata m = mixed_step();
  m.ring_blocks = {3, 0};
  m.block_table_c = table({{4, 0}, {2, -1}});
  const StepLayout l = derive(m);
  EXPECT_EQ(l.ring_blocks, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(l.ring_slot, (std::vector<int64_t>{13, 14, 15, -1, -1, 2, 3, 0, 1, -1, -1}));
  EXPECT_EQ(l.compressed_slot, (std::vector<int64_t>{-1, -1, 17, -1, -1, -1, 8, -1, -1, -1, -1}));
  EXPECT_EQ(l.main_slot, derive(mixed_step()).main_slot);  // the main table is untouched
  EXPECT_EQ(l.block_table_c.data, m.block_table_c.data);
}

TEST(StepLayout, MatchingSlotMappingAccepted) {
  StepMetadata m = mixed_step();
  m.slot_mapping = derive(m).main_slot;
  EXPECT_EQ(input_error(m), "");
}

TEST(StepLayout, RejectsBadQueryStartLoc) {
  StepMetadata m = mixed_step();
  m.query_start_loc.clear();
  expect_rejected(m, "query_start_loc is empty");
  m = mixed_step();
  m.query_start_loc = {1, 3, 9};
  expect_rejected(m, "query_start_loc[0] = 1");
  m = mixed_step();
  m.query_start_loc = {0, 3, 3};  // request 1 has no tokens
  expect_rejected(m, "not increasing at request 1");
  m = mixed_step();
  m.query_start_loc = {0, 3, 12};  // positions has 11 columns
  m.seq_lens = {8, 12};
  expect_rejected(m, "exceeds the 11 position columns");
}

TEST(StepLayout, RejectsBadSeqLens) {
  StepMetadata m = mixed_step();
  m.seq_lens[1] = 5;  // chunk of 6
  expect_rejected(m, "seq_lens[1] = 5 is shorter");
  m = mixed_step();
  m.seq_lens.push_back(4);
  expect_rejected(m, "seq_lens has 3 entries");
}

TEST(StepLayout, RejectsBlockTableEntriesOutOfRange) {
  for (int32_t bad : {6, -2}) {
    SCOPED_TRACE(bad);
    StepMetadata m = mixed_step();
    m.block_table.at(1, 0) = bad;
    m.ring_blocks = {0, 1};
    expect_rejected(m, "block_table[1, 0] = " + std::to_string(bad));
    m = mixed_step();
    m.block_table_c = table({{5, bad}, {1, -1}});
    expect_rejected(m, "block_table_c[0, 1]");
  }
}

TEST(StepLayout, RejectsUnmappedOrMissingPages) {
  StepMetadata m = simple_step({14}, {4}, 1);  // L = 18 needs 2 pages
  expect_rejected(m, "block_table row 0 has 1 pages");
  m = simple_step({14}, {4}, 2);
  m.block_table = table({{3, -1}});  // p = 16, 17 land on unmapped page 1
  expect_rejected(m, "which block_table leaves unmapped");
  m = mixed_step();
  m.block_table_c = table({{5, 2}, {-1, -1}});  // p = 3 of request 1 completes block 0
  expect_rejected(m, "unmapped in block_table_c");
}

TEST(StepLayout, RejectsTwoTokensOnOneSlot) {
  StepMetadata m = simple_step({0, 0}, {3, 3}, 1);
  m.block_table = table({{2}, {2}});
  m.ring_blocks = {0, 1};  // keep the rings apart so the slot clash is what fails
  expect_rejected(m, "both written to main KV slot 32");
}

TEST(StepLayout, RejectsBadRingBlocks) {
  StepMetadata m = mixed_step();
  m.ring_blocks = {0, 6};
  expect_rejected(m, "ring block 6 of request 1 is out of range");
  m.ring_blocks = {-1, 0};
  expect_rejected(m, "ring block -1 of request 0 is out of range");
  m.ring_blocks = {2, 2};
  expect_rejected(m, "share ring block 2");
  m.ring_blocks = {2};
  expect_rejected(m, "ring_blocks has 1 entries");
}

TEST(StepLayout, RejectsDisagreeingSlotMapping) {
  StepMetadata m = mixed_step();
  m.slot_mapping = derive(m).main_slot;
  m.slot_mapping[4] += 1;
  expect_rejected(m, "slot_mapping[4] = 18 disagrees");
  m.slot_mapping.pop_back();
  expect_rejected(m, "slot_mapping has 10 entries");
}

TEST(StepLayout, RejectsNegativePositionOfRealToken) {
  StepMetadata m = mixed_step();
  m.positions.at(4) = -3;
  expect_rejected(m, "positions[0, 4] = -3 is negative");
  const int64_t T = m.positions.dim(0);
  m = mixed_step();
  TensorI64 rows({3, T});
  for (int a = 0; a < 3; ++a)
    for (int64_t t = 0; t < T; ++t) rows.at(a, t) = m.positions.at(t);
  rows.at(2, 7) = -1;
  m.positions = rows;
  expect_rejected(m, "positions[2, 7] = -1 is negative");
}

TEST(StepLayout, PagedSlotAndVisibleBlocks) {
  const TensorI32 t = table({{5, -1}});
  EXPECT_EQ(paged_slot(t, 0, 3, 16), 83);
  EXPECT_EQ(paged_slot(t, 0, 17, 16), -1);  // unmapped page
  EXPECT_EQ(paged_slot(t, 0, 32, 16), -1);  // beyond the table
  EXPECT_EQ(paged_slot(t, 0, -1, 16), -1);
  EXPECT_EQ(visible_blocks(-1, 8, 4), 0);
  EXPECT_EQ(visible_blocks(2, 8, 4), 0);
  EXPECT_EQ(visible_blocks(3, 8, 4), 1);
  EXPECT_EQ(visible_blocks(11, 10, 4), 2);  // capped by L div r
  EXPECT_EQ(visible_blocks(0, 1, 1), 1);
}

constexpr uint64_t kSlotSeed = 0x5107ULL;

TensorI32 tensor(Shape shape, std::vector<int32_t> values) {
  TensorI32 t(std::move(shape));
  t.data = std::move(values);
  return t;
}

// Page size 4; request 0 (seq_len 10) on pages {5, -1, 2}, request 1 (seq_len
// 13, more than its 3 pages hold) on pages {0, 7, 1} of a 7-page cache, so
// its page 7 is out of range. Row 2 is padding. The last column is the count.
TEST(TokenSlots, FollowAttentionsRulesByHand) {
  const TensorI32 table = tensor({2, 3}, {5, -1, 2, 0, 7, 1});
  const TensorI32 ids = tensor({3, 8}, {1, 4, 9, 10, -1, 8, 2, 6,  //
                                                   0, 2, 3, 5, 12, -7, 1, 7,  //
                                                   1, 2, 3, 4, 5, 6, 7, 7});
  TensorI32 slots;
  token_slots(ids, true, {0, 1, -1}, {10, 13}, table, 4, 7, slots);
  const std::vector<int32_t> expected = {
      // 1: page 0 (5) -> 21; 4: page 1 unmapped; 9: page 2 (2) -> 9; 10 >= seq_len;
      // -1; 8: page 2 -> 8; column 6 is past the count 6; the count is copied.
      21, -1, 9, -1, -1, 8, -1, 6,
      // 0, 2, 3 on page 0 (0); 5 on page 1, whose entry 7 is past the cache;
      // 12 on page 3, beyond the table; -7; 1; the count.
      0, 2, 3, -1, -1, -1, 1, 7,
      // a padding row reads nothing; its count is copied
      -1, -1, -1, -1, -1, -1, -1, 7};
  EXPECT_EQ(slots.data, expected);
  // Without the count column every column holds an id, the last one too.
  TensorI32 plain;
  token_slots(ids, false, {0, 1, -1}, {10, 13}, table, 4, 7, plain);
  EXPECT_EQ(plain.at(0, 6), 22);  // id 2 on page 0 (physical 5)
  EXPECT_EQ(plain.at(0, 7), -1);  // id 6 on the unmapped page 1
  EXPECT_EQ(plain.at(1, 7), -1);  // id 7 on page 1 (physical 7, past the cache)
  EXPECT_EQ(plain.at(2, 7), -1);  // padding
}

// On random rows (ids of every kind, random tables with unmapped pages), a
// column's slot is paged_slot's wherever attention reads the id, else -1.
TEST(TokenSlots, AreThePagedSlotsAttentionReads) {
  const CounterRng rng(kSlotSeed, "token_slots");
  uint64_t draws = 0;
  const auto draw = [&](int lo, int hi) {
    return static_cast<int32_t>(lo + static_cast<int64_t>(rng.bits(draws++) % static_cast<uint64_t>(hi - lo + 1)));
  };
  const int P = 16, R = 3, pages = 6, W = 41;
  const int64_t T = 9, num_pages = 20;
  TensorI32 table({R, pages});
  for (int32_t& e : table.data) e = draw(-1, num_pages - 1);
  const std::vector<int32_t> lens = {0, 50, 96};
  std::vector<int32_t> t2r(T);
  TensorI32 ids({T, W});
  for (int64_t t = 0; t < T; ++t) {
    t2r[t] = draw(-1, R - 1);
    for (int c = 0; c < W; ++c) ids.at(t, c) = draw(-2, 110);
  }
  TensorI32 slots;
  token_slots(ids, false, t2r, lens, table, P, num_pages, slots);
  int read = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int c = 0; c < W; ++c) {
      SCOPED_TRACE(testing::Message() << "row " << t << " column " << c << " seed " << kSlotSeed);
      const int32_t id = ids.at(t, c);
      const bool attended = t2r[t] >= 0 && id >= 0 && id < lens[t2r[t]];
      const int64_t slot = attended ? paged_slot(table, t2r[t], id, P) : -1;
      ASSERT_EQ(slots.at(t, c), slot);
      read += slot >= 0;
    }
  EXPECT_GT(read, 20);  // the draw exercises mapped pages, not only the -1 cases
}

TEST(TokenSlots, BadInputIsAnInputError) {
  const TensorI32 table = tensor({1, 2}, {0, 1});
  const TensorI32 ids = tensor({2, 4}, {0, 1, 2, 3, 0, 1, 2, 3});
  TensorI32 slots;
  EXPECT_THROW(token_slots(ids, false, {0}, {8}, table, 4, 2, slots), InputError);         // token_to_req size
  EXPECT_THROW(token_slots(ids, false, {0, 1}, {8}, table, 4, 2, slots), InputError);      // request 1 of 1
  EXPECT_THROW(token_slots(ids, false, {0, 0}, {8, 8}, table, 4, 2, slots), InputError);   // table rows
  EXPECT_THROW(token_slots(ids, false, {0, 0}, {8}, table, 0, 2, slots), InputError);      // page size
  EXPECT_THROW(token_slots(ids, false, {0, 0}, {8}, table, 1600, int64_t{1} << 21, slots),
               InputError);  // 2^21 pages of 1600 slots overflow int32
  TensorI32 wrong({1, 4});
  EXPECT_THROW(token_slots(ids, false, {0, 0}, {8}, table, 4, 2, wrong), InputError);      // output shape
}

}  // namespace
}  // namespace qsa
