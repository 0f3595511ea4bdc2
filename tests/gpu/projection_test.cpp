// GPU projection (gpu/projection) against the fp64 reference
// (reference/projection.hpp), on random bf16 x and w:
//  - every element within gpu_projection_tol of qsa::project (fp32 output),
//    and within gpu_bf16_store_tol of it with p.round_output and for the bf16
//    variant; identical NaN masks; every element written (poisoned first);
//  - shapes: tiny and odd ones that leave partial tiles on every side, exact
//    tile multiples, rows = 0, the tiny and qwen4-exp projections of a step;
//  - the bf16 variant is bit for bit the bf16 bits of the rounded fp32
//    variant, and a row's result does not depend on the rows launched with it;
//  - grids larger than the launch limit (grid-stride tiles) and the
//    ConfigError / InputError checks.
#include "gpu/projection/projection.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/common/bf16.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "reference/core/config.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/projection.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;

constexpr uint64_t kSeed = 0x9e0f0001ULL;

// Which launcher, and whether the fp32 one rounds its output.
enum class Out { kFp32, kFp32Rounded, kBf16 };

struct Case {
  std::string label;
  int64_t rows;
  int in_dim;
  int out_dim;
};

std::string case_name(const Case& c, Out out) {
  const char* suffix = out == Out::kFp32 ? "fp32" : out == Out::kFp32Rounded ? "fp32round" : "bf16";
  return c.label + "_" + std::to_string(c.rows) + "x" + std::to_string(c.in_dim) + "x" +
         std::to_string(c.out_dim) + "_" + suffix;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.label << " " << c.rows << "x" << c.in_dim << "x" << c.out_dim; }
void PrintTo(Out out, std::ostream* os) { *os << (out == Out::kFp32 ? "fp32" : out == Out::kFp32Rounded ? "fp32round" : "bf16"); }

ProjectionParams params(const Case& c, bool round_output) {
  ProjectionParams p;
  p.rows = c.rows;
  p.in_dim = c.in_dim;
  p.out_dim = c.out_dim;
  p.round_output = round_output;
  return p;
}

// Random bf16 operands: the bits for the GPU and their exact values for the reference.
struct Operands {
  std::vector<uint16_t> x_bits, w_bits;
  TensorD x, w;
};

void fill_bf16(std::vector<uint16_t>& bits, TensorD& values, uint64_t seed, const char* name) {
  const CounterRng rng(seed, name);
  bits.resize(values.data.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = bf16_bits(rng.normal(i));
    values.data[i] = bf16_value(bits[i]);
  }
}

Operands random_operands(const Case& c, uint64_t seed) {
  Operands o{{}, {}, TensorD({c.rows, c.in_dim}), TensorD({c.out_dim, c.in_dim})};
  fill_bf16(o.x_bits, o.x, seed, "gpu.projection.x");
  fill_bf16(o.w_bits, o.w, seed, "gpu.projection.w");
  return o;
}

// Σ_k |x_k w_k| per output element, the scale of the accumulation bound.
TensorD abs_sums(const Case& c, const Operands& o) {
  TensorD s({c.rows, c.out_dim});
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.out_dim; ++j) {
      const double* xr = o.x.row(r);
      const double* wr = o.w.row(j);
      double sum = 0.0;
      for (int k = 0; k < c.in_dim; ++k) sum += std::fabs(xr[k] * wr[k]);
      s.at(r, j) = sum;
    }
  return s;
}

// Runs one launcher on fresh device copies; outputs as values (bf16 bits
// widened exactly) plus whether each element is still the poison pattern.
struct GpuOut {
  std::vector<double> values;
  std::vector<bool> unwritten;
  std::vector<uint32_t> bits;  // fp32 bits, or the bf16 bits
};

GpuOut run_gpu(const Case& c, const Operands& o, Out out) {
  DeviceBuffer<uint16_t> x(o.x_bits), w(o.w_bits);
  const size_t n = static_cast<size_t>(c.rows) * static_cast<size_t>(c.out_dim);
  GpuOut g;
  if (out == Out::kBf16) {
    DeviceBuffer<uint16_t> y(n);
    y.poison(gpu::kPoisonBf16Pair);
    gpu::launch_projection_bf16(params(c, false), x.get(), w.get(), y.get(), nullptr);
    QSA_GPU_CHECK(hipDeviceSynchronize());
    for (uint16_t b : y.download()) {
      g.values.push_back(bf16_value(b));
      g.unwritten.push_back(b == gpu::kPoisonBf16);
      g.bits.push_back(b);
    }
  } else {
    DeviceBuffer<float> y(n);
    y.poison(gpu::kPoisonFloat);
    gpu::launch_projection(params(c, out == Out::kFp32Rounded), x.get(), w.get(), y.get(), nullptr);
    QSA_GPU_CHECK(hipDeviceSynchronize());
    for (float v : y.download()) {
      g.values.push_back(v);
      g.unwritten.push_back(gpu::float_bits(v) == gpu::kPoisonFloat);
      g.bits.push_back(gpu::float_bits(v));
    }
  }
  return g;
}

// Compares against qsa::project with the same rounding, element by element;
// reports up to 10 failures and the worst error relative to its bound.
void expect_matches_reference(const Case& c, const Operands& o, Out out, const GpuOut& g) {
  const bool rounded = out != Out::kFp32;
  TensorD want;
  project(params(c, rounded), o.x, o.w, want);
  const TensorD abs_sum = abs_sums(c, o);
  ASSERT_EQ(g.values.size(), want.data.size());
  int failures = 0;
  double worst = 0.0;
  int64_t worst_at = -1;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / c.out_dim, j = static_cast<int64_t>(i) % c.out_dim;
    const double got = g.values[i], ref = want.data[i];
    double bound = tol::gpu_projection_tol(c.in_dim, abs_sum.data[i]);
    if (rounded) bound = tol::gpu_bf16_store_tol(bound, std::fabs(ref));
    const double err = std::fabs(got - ref);
    const bool bad = g.unwritten[i] || std::isnan(got) != std::isnan(ref) || !(err <= bound);
    if (bad && failures++ < 10)
      ADD_FAILURE() << "[row=" << r << ", out=" << j << "]: gpu " << got << (g.unwritten[i] ? " (never written)" : "")
                    << ", reference " << ref << ", |diff| " << err << " > bound " << bound;
    if (bound > 0 && err / bound > worst) {
      worst = err / bound;
      worst_at = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(failures, 0) << failures << " bad elements";
  if (worst_at >= 0)
    std::printf("  worst |diff| / bound = %.3g at [row=%lld, out=%lld]\n", worst,
                static_cast<long long>(worst_at / c.out_dim), static_cast<long long>(worst_at % c.out_dim));
}

using Param = std::tuple<Case, Out>;
std::string param_name(const testing::TestParamInfo<Param>& info) {
  return case_name(std::get<0>(info.param), std::get<1>(info.param));
}

class GpuProjection : public testing::TestWithParam<Param> {};

TEST_P(GpuProjection, MatchesReferenceWithinTheFp32Bound) {
  const auto& [c, out] = GetParam();
  const uint64_t seed = kSeed ^ stream_id(case_name(c, out));
  SCOPED_TRACE(testing::Message() << "case " << case_name(c, out) << ", seed " << seed);
  const Operands o = random_operands(c, seed);
  const GpuOut g = run_gpu(c, o, out);
  expect_matches_reference(c, o, out, g);
}

std::vector<Case> odd_cases() {
  return {{"odd", 1, 1, 1},      {"odd", 17, 33, 65},  {"odd", 3, 300, 7},   {"odd", 2, 5, 3},
          {"odd", 0, 40, 24},    {"exact", 64, 64, 64}, {"odd", 65, 32, 65}, {"odd", 130, 97, 129},
          {"odd", 200, 96, 40}};
}

// The four projections of a step (index_qk_proj, q_proj with its gate, k/v
// and o_proj) at a decode-sized and a chunk-sized row count.
std::vector<Case> model_cases(const std::string& preset, int64_t rows) {
  const QsaConfig m = config_preset(preset);
  const std::string label = preset == "qwen4-exp" ? "qwen4exp" : preset;
  return {{label + "_indexqk", rows, m.hidden_size, (m.indexer_heads + 1) * m.indexer_head_dim},
          {label + "_qgate", rows, m.hidden_size, m.num_heads * 2 * m.head_dim},
          {label + "_kv", rows, m.hidden_size, m.num_kv_heads * m.head_dim},
          {label + "_o", rows, m.num_heads * m.head_dim, m.hidden_size}};
}

std::vector<Case> model_shapes() {
  std::vector<Case> all = model_cases("tiny", 7);
  for (const Case& c : model_cases("tiny", 70)) all.push_back(c);
  for (const Case& c : model_cases("qwen4-exp", 5)) all.push_back(c);
  return all;
}

const auto kOuts = testing::Values(Out::kFp32, Out::kFp32Rounded, Out::kBf16);
INSTANTIATE_TEST_SUITE_P(Odd, GpuProjection, testing::Combine(testing::ValuesIn(odd_cases()), kOuts), param_name);
INSTANTIATE_TEST_SUITE_P(Model, GpuProjection, testing::Combine(testing::ValuesIn(model_shapes()), kOuts),
                         param_name);

// Both launchers run one kernel, so the bf16 store is exactly the bf16 bits
// of the rounded fp32 store (the high half of a bf16-valued float).
TEST(GpuProjectionVariants, Bf16StoreIsTheRoundedFp32Store) {
  for (const Case& c : {Case{"odd", 17, 33, 65}, Case{"qwen4exp_kv", 5, 2560, 512}}) {
    const uint64_t seed = kSeed ^ stream_id(case_name(c, Out::kBf16));
    SCOPED_TRACE(testing::Message() << "case " << case_name(c, Out::kBf16) << ", seed " << seed);
    const Operands o = random_operands(c, seed);
    const GpuOut rounded = run_gpu(c, o, Out::kFp32Rounded), bf16 = run_gpu(c, o, Out::kBf16);
    for (size_t i = 0; i < bf16.bits.size(); ++i)
      ASSERT_EQ(bf16.bits[i], rounded.bits[i] >> 16) << "[row=" << i / c.out_dim << ", out=" << i % c.out_dim << "]";
  }
}

// A token's projection is the same whichever rows are launched with it.
TEST(GpuProjectionVariants, RowsDoNotDependOnTheirBatch) {
  const Case all{"odd", 130, 97, 129};
  const uint64_t seed = kSeed ^ stream_id("batch");
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const Operands o = random_operands(all, seed);
  const GpuOut full = run_gpu(all, o, Out::kFp32);
  const int64_t first = 61, count = 5;  // straddles the tile edge at row 64
  Operands part = o;
  part.x_bits.assign(o.x_bits.begin() + first * all.in_dim, o.x_bits.begin() + (first + count) * all.in_dim);
  const GpuOut sub = run_gpu(Case{"odd", count, all.in_dim, all.out_dim}, part, Out::kFp32);
  for (size_t i = 0; i < sub.bits.size(); ++i)
    ASSERT_EQ(sub.bits[i], full.bits[static_cast<size_t>(first * all.out_dim) + i])
        << "[row=" << first + static_cast<int64_t>(i) / all.out_dim << ", out=" << i % all.out_dim << "]";
}

// More row tiles, then more column tiles, than one grid dimension holds
// (65535 tiles of 64): the kernel walks the rest in a grid-stride loop.
TEST(GpuProjectionVariants, TilesBeyondTheGridAreComputed) {
  for (const Case& c : {Case{"tallgrid", 64 * 65535 + 70, 3, 2}, Case{"widegrid", 2, 2, 64 * 65535 + 100}}) {
    const uint64_t seed = kSeed ^ stream_id(c.label);
    SCOPED_TRACE(testing::Message() << "case " << case_name(c, Out::kFp32) << ", seed " << seed);
    const Operands o = random_operands(c, seed);
    const GpuOut g = run_gpu(c, o, Out::kFp32);
    expect_matches_reference(c, o, Out::kFp32, g);
  }
}

TEST(GpuProjectionChecks, RejectsBadParamsAndPointers) {
  DeviceBuffer<uint16_t> x(64), w(64);
  DeviceBuffer<float> y(64);
  y.poison(gpu::kPoisonFloat);
  auto launch = [&](int64_t rows, int in_dim, int out_dim, const uint16_t* xp, const uint16_t* wp, float* yp) {
    gpu::launch_projection(params(Case{"", rows, in_dim, out_dim}, false), xp, wp, yp, nullptr);
  };
  EXPECT_THROW(launch(-1, 8, 8, x.get(), w.get(), y.get()), ConfigError);
  EXPECT_THROW(launch(2, 0, 8, x.get(), w.get(), y.get()), ConfigError);
  EXPECT_THROW(launch(2, 8, 0, x.get(), w.get(), y.get()), ConfigError);
  EXPECT_THROW(launch(2, 8, -3, x.get(), w.get(), y.get()), ConfigError);
  EXPECT_THROW(launch(int64_t{1} << 31, 8, 8, x.get(), w.get(), y.get()), ConfigError);
  EXPECT_THROW(launch(2, 8, 8, nullptr, w.get(), y.get()), InputError);
  EXPECT_THROW(launch(2, 8, 8, x.get(), nullptr, y.get()), InputError);
  EXPECT_THROW(launch(2, 8, 8, x.get(), w.get(), nullptr), InputError);
  uint16_t* null_bf16 = nullptr;
  EXPECT_THROW(gpu::launch_projection_bf16(params(Case{"", 2, 8, 8}, false), x.get(), w.get(), null_bf16, nullptr),
               InputError);
  // rows = 0: nothing to do, no pointer is read and nothing is written.
  EXPECT_NO_THROW(launch(0, 8, 8, nullptr, nullptr, nullptr));
  EXPECT_NO_THROW(launch(0, 8, 8, x.get(), w.get(), y.get()));
  QSA_GPU_CHECK(hipDeviceSynchronize());
  for (float v : y.download()) ASSERT_EQ(gpu::float_bits(v), gpu::kPoisonFloat);
}

}  // namespace
}  // namespace qsa
