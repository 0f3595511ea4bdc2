#include "harness/sweep/sweep_row.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness/sweep/sweep_policies.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/expand.hpp"

namespace qsa {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatMap = Eigen::Map<const RowMajor>;
using MatMap = Eigen::Map<RowMajor>;
using StridedMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
using ConstVecMap = Eigen::Map<const Eigen::VectorXd>;

// Logits [H, n] of every head against tokens 0..n-1 of k ([n, G, D]).
std::vector<double> logits(const RowSetup& s, const double* q, const double* k, int64_t n) {
  const int group = s.heads / s.kv_heads, D = s.head_dim;
  std::vector<double> out(static_cast<size_t>(s.heads * n));
  for (int g = 0; g < s.kv_heads; ++g) {
    const ConstMatMap qg(q + int64_t{g} * group * D, group, D);
    const StridedMap kg(k + int64_t{g} * D, n, D, Eigen::OuterStride<>(int64_t{s.kv_heads} * D));
    MatMap lg(out.data() + int64_t{g} * group * n, group, n);
    lg.noalias() = qg * kg.transpose();
  }
  for (double& x : out) x *= s.scale;
  return out;
}

std::vector<double> softmax_rows(const std::vector<double>& logit, int heads, int64_t n) {
  std::vector<double> p(logit.size());
  for (int h = 0; h < heads; ++h) {
    const double* l = &logit[static_cast<size_t>(h * n)];
    double* ph = &p[static_cast<size_t>(h * n)];
    const double mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int64_t t = 0; t < n; ++t) sum += ph[t] = std::exp(l[t] - mx);
    for (int64_t t = 0; t < n; ++t) ph[t] /= sum;
  }
  return p;
}

// A [H, D] over the ids (ascending), from logits [H, n] and v [n, G, D]:
// the same loop for a sparse set and for 0..p.
std::vector<double> attend(const RowSetup& s, const std::vector<double>& logit, int64_t n, const double* v,
                           const std::vector<int32_t>& ids) {
  const int D = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t width = int64_t{s.kv_heads} * D;
  std::vector<double> a(static_cast<size_t>(s.heads * D), 0.0);
  for (int h = 0; h < s.heads; ++h) {
    const double* l = &logit[static_cast<size_t>(h * n)];
    double mx = -std::numeric_limits<double>::infinity();
    for (int32_t t : ids) mx = std::max(mx, l[t]);
    double sum = 0;
    double* ah = &a[static_cast<size_t>(h * D)];
    const int64_t g_off = int64_t{h / group} * D;
    for (int32_t t : ids) {
      const double w = std::exp(l[t] - mx);
      sum += w;
      const double* vt = v + t * width + g_off;
      for (int d = 0; d < D; ++d) ah[d] += w * vt[d];
    }
    for (int d = 0; d < D; ++d) ah[d] /= sum;
  }
  return a;
}

double rel_err(const double* a, const double* ref, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  if (norm == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

// Relative error per head of a [H, D] against ref.
std::vector<double> head_errs(const RowSetup& s, const std::vector<double>& a, const std::vector<double>& ref) {
  std::vector<double> out(static_cast<size_t>(s.heads));
  for (int h = 0; h < s.heads; ++h)
    out[static_cast<size_t>(h)] =
        rel_err(&a[static_cast<size_t>(h * s.head_dim)], &ref[static_cast<size_t>(h * s.head_dim)], s.head_dim);
  return out;
}

// The layer output's relative error: o_proj is linear, so it maps the gated
// difference; identical attention gives exactly 0.
class OutputError {
 public:
  OutputError(const RowSetup& s, const double* gate, const std::vector<double>& a_ref)
      : w_(s.o_proj->ptr(), s.o_proj->dim(0), s.o_proj->dim(1)), sig_(a_ref.size()), a_ref_(a_ref) {
    for (size_t i = 0; i < sig_.size(); ++i) sig_[i] = 1.0 / (1.0 + std::exp(-gate[i]));
    std::vector<double> o(a_ref.size());
    for (size_t i = 0; i < o.size(); ++i) o[i] = a_ref[i] * sig_[i];
    const Eigen::VectorXd y = w_ * ConstVecMap(o.data(), static_cast<int64_t>(o.size()));
    norm_ = y.norm();
  }
  double operator()(const std::vector<double>& a) const {
    std::vector<double> x(a.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = (a[i] - a_ref_[i]) * sig_[i];
    const Eigen::VectorXd y = w_ * ConstVecMap(x.data(), static_cast<int64_t>(x.size()));
    const double diff = y.norm();
    if (norm_ == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
    return diff / norm_;
  }

 private:
  ConstMatMap w_;
  std::vector<double> sig_;
  const std::vector<double>& a_ref_;
  double norm_ = 0;
};

// rank[h·n + t]: position of token t in head h's order by descending P.
std::vector<int64_t> token_ranks(const std::vector<double>& p, int heads, int64_t n) {
  std::vector<int64_t> rank(p.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int h = 0; h < heads; ++h) {
    const double* ph = &p[static_cast<size_t>(h * n)];
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [ph](int32_t a, int32_t b) { return ph[a] > ph[b] || (ph[a] == ph[b] && a < b); });
    for (int64_t i = 0; i < n; ++i) rank[static_cast<size_t>(h * n + order[static_cast<size_t>(i)])] = i;
  }
  return rank;
}

// Token set of the first min(K_B, |order|) blocks plus the open tail, ascending.
std::vector<int32_t> token_set(const RowSetup& s, const std::vector<int32_t>& order, int budget, int64_t pos) {
  ExpandParams ep;
  ep.ratio = s.ratio;
  ep.budget = budget;
  const int kb = budget / s.ratio;
  std::vector<int32_t> blocks(static_cast<size_t>(kb), -1);
  std::copy_n(order.begin(), std::min<size_t>(order.size(), blocks.size()), blocks.begin());
  std::vector<int32_t> row(static_cast<size_t>(ep.width()));
  expand_row(ep, blocks.data(), kb, pos, row.data());
  std::vector<int32_t> ids;
  for (int32_t t : row)
    if (t >= 0) ids.push_back(t);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int32_t> policy_order(const RowSetup& s, const RowInput& in, SweepPolicy p,
                                  const std::vector<double>& probs, int max_blocks) {
  const int64_t n = in.pos + 1;
  switch (p) {
    case SweepPolicy::kIndexer:
      return indexer_order(in.block_ids, in.block_width, max_blocks);
    case SweepPolicy::kOracleMax:
      return oracle_order(probs.data(), s.heads, n, s.ratio, in.visible, true, max_blocks);
    case SweepPolicy::kOracleSum:
      return oracle_order(probs.data(), s.heads, n, s.ratio, in.visible, false, max_blocks);
    case SweepPolicy::kWindow:
      return window_order(in.visible, s.ratio, s.window_sinks, max_blocks);
    case SweepPolicy::kRandom:
      return random_order(in.visible, max_blocks, in.random);
  }
  return {};
}

}  // namespace

RowValues score_row(const RowSetup& s, const RowInput& in) {
  const int64_t n = in.pos + 1;
  const ContextKv& ctx = *in.context;
  const size_t n_kv = ctx.kq.size();
  const int H = s.heads;
  std::vector<int32_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);

  const std::vector<double> logit = logits(s, in.q, ctx.k.data(), n);
  const std::vector<double> probs = softmax_rows(logit, H, n);
  const std::vector<double> dense = attend(s, logit, n, ctx.v.data(), all);
  const OutputError out_err(s, in.gate, dense);
  std::vector<std::vector<double>> logit_q;
  RowValues rv;
  for (size_t k = 0; k < n_kv; ++k) {
    logit_q.push_back(logits(s, in.q, ctx.kq[k].data(), n));
    const std::vector<double> a = attend(s, logit_q[k], n, ctx.vq[k].data(), all);
    const std::vector<double> e = head_errs(s, a, dense);
    rv.attn_err_kv.insert(rv.attn_err_kv.end(), e.begin(), e.end());
    rv.out_err_kv.push_back(out_err(a));
  }

  const int max_blocks = s.budgets.back() / s.ratio;
  const std::vector<int64_t> rank = token_ranks(probs, H, n);
  const std::vector<int32_t> oracle = policy_order(s, in, SweepPolicy::kOracleMax, probs, max_blocks);
  for (SweepPolicy policy : s.policies) {
    const std::vector<int32_t> order = policy_order(s, in, policy, probs, max_blocks);
    for (int budget : s.budgets) {
      const std::vector<int32_t> ids = token_set(s, order, budget, in.pos);
      const auto kb = static_cast<size_t>(std::min<int64_t>(budget / s.ratio, in.visible));
      PolicyBudgetValues v;
      const auto size = static_cast<int64_t>(ids.size());
      for (int h = 0; h < H; ++h) {
        double mass = 0;
        int64_t hits = 0;
        for (int32_t t : ids) {
          mass += probs[static_cast<size_t>(h * n + t)];
          hits += rank[static_cast<size_t>(h * n + t)] < size;
        }
        v.mass_recall.push_back(mass);
        v.topk_recall.push_back(static_cast<double>(hits) / static_cast<double>(size));
      }
      int64_t common = 0;
      const size_t taken = std::min(kb, order.size());
      for (size_t i = 0; i < taken; ++i)
        common += std::find(oracle.begin(), oracle.begin() + static_cast<ptrdiff_t>(kb), order[i]) !=
                  oracle.begin() + static_cast<ptrdiff_t>(kb);
      v.block_recall = kb == 0 ? 1.0 : static_cast<double>(common) / static_cast<double>(kb);
      const std::vector<double> sparse = attend(s, logit, n, ctx.v.data(), ids);
      v.attn_err_sparsity = head_errs(s, sparse, dense);
      v.out_err_sparsity = out_err(sparse);
      for (size_t k = 0; k < n_kv; ++k) {
        const std::vector<double> both = attend(s, logit_q[k], n, ctx.vq[k].data(), ids);
        const std::vector<double> e = head_errs(s, both, dense);
        v.attn_err_both.insert(v.attn_err_both.end(), e.begin(), e.end());
        v.out_err_both.push_back(out_err(both));
      }
      rv.by_policy_budget.push_back(std::move(v));
    }
  }
  return rv;
}

}  // namespace qsa
