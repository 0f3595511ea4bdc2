// The values one sweep point produces, named as series: (policy, budget, KV
// dtype, metric), each with one value per scored row and head, or per row.
//
// Which axes a metric depends on decides its key, so the CSV holds no
// duplicated numbers:
//   mass_recall, topk_recall, attn_err_sparsity       per head, exact KV
//   block_recall, out_err_sparsity                     per row,  exact KV
//   attn_err_both (per head), out_err_both (per row)   every axis
//   attn_err_kv (per head), out_err_kv (per row)       policy "dense", budget 0
// Metrics on exact KV carry kv_dtype "exact".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/sweep/sweep_settings.hpp"

namespace qsa {

struct SeriesKey {
  std::string policy;    // a SweepPolicy name, or "dense"
  int budget = 0;        // tokens; 0 for dense
  std::string kv_dtype;  // a KvDtype name, or "exact"
  std::string metric;
  bool per_head = true;
};

// One row's values as the scorer computes them.
struct PolicyBudgetValues {
  std::vector<double> mass_recall;        // [H]
  std::vector<double> topk_recall;        // [H]
  std::vector<double> attn_err_sparsity;  // [H]
  double block_recall = 0;
  double out_err_sparsity = 0;
  std::vector<double> attn_err_both;  // [n_kv, H]
  std::vector<double> out_err_both;   // [n_kv]
};
struct RowValues {
  std::vector<PolicyBudgetValues> by_policy_budget;  // [policy][budget], budgets fastest
  std::vector<double> attn_err_kv;                   // [n_kv, H]
  std::vector<double> out_err_kv;                    // [n_kv]
};

// Every value of a point: values[s][row · width + head], width H or 1.
struct PointValues {
  std::vector<SeriesKey> series;
  int heads = 0;
  int64_t rows = 0;
  std::vector<std::vector<double>> values;

  PointValues(const SweepAxes& axes, const std::vector<int>& budgets, int heads, int64_t rows);
  int width(size_t s) const { return series[s].per_head ? heads : 1; }
  // Stores one row; rows are disjoint slices, so rows may be put concurrently.
  void put(int64_t row, const RowValues& v);
};

}  // namespace qsa
