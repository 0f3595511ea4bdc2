#include "harness/sweep/sweep_series.hpp"

#include <algorithm>

#include "reference/core/errors.hpp"

namespace qsa {

// The series order here and the value order in put() are the same walk:
// per (policy, budget) the exact-KV metrics then the "both" pair per KV
// dtype; finally the dense KV-only pair per KV dtype.
PointValues::PointValues(const SweepAxes& axes, const std::vector<int>& budgets, int h, int64_t n) : heads(h), rows(n) {
  for (SweepPolicy p : axes.policies) {
    const std::string policy = to_string(p);
    for (int b : budgets) {
      series.push_back({policy, b, "exact", "mass_recall", true});
      series.push_back({policy, b, "exact", "topk_recall", true});
      series.push_back({policy, b, "exact", "block_recall", false});
      series.push_back({policy, b, "exact", "attn_err_sparsity", true});
      series.push_back({policy, b, "exact", "out_err_sparsity", false});
      for (KvDtype d : axes.kv_dtypes) {
        series.push_back({policy, b, to_string(d), "attn_err_both", true});
        series.push_back({policy, b, to_string(d), "out_err_both", false});
      }
    }
  }
  for (KvDtype d : axes.kv_dtypes) {
    series.push_back({"dense", 0, to_string(d), "attn_err_kv", true});
    series.push_back({"dense", 0, to_string(d), "out_err_kv", false});
  }
  for (size_t s = 0; s < series.size(); ++s) values.emplace_back(static_cast<size_t>(rows * width(s)), 0.0);
}

void PointValues::put(int64_t row, const RowValues& v) {
  size_t s = 0;
  auto heads_of = [&](const double* x) {
    std::copy_n(x, heads, &values[s][static_cast<size_t>(row * heads)]);
    ++s;
  };
  auto one = [&](double x) {
    values[s][static_cast<size_t>(row)] = x;
    ++s;
  };
  for (const PolicyBudgetValues& pb : v.by_policy_budget) {
    heads_of(pb.mass_recall.data());
    heads_of(pb.topk_recall.data());
    one(pb.block_recall);
    heads_of(pb.attn_err_sparsity.data());
    one(pb.out_err_sparsity);
    for (size_t k = 0; k < pb.out_err_both.size(); ++k) {
      heads_of(&pb.attn_err_both[k * static_cast<size_t>(heads)]);
      one(pb.out_err_both[k]);
    }
  }
  for (size_t k = 0; k < v.out_err_kv.size(); ++k) {
    heads_of(&v.attn_err_kv[k * static_cast<size_t>(heads)]);
    one(v.out_err_kv[k]);
  }
  if (s != series.size()) throw InternalError("sweep row values do not match the point's series");
}

}  // namespace qsa
