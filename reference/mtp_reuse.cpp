#include "reference/mtp_reuse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace qsa {

namespace {
template <class T>
void copy_row(const Tensor<T>& src, int64_t from, Tensor<T>& dst, int64_t to) {
  const int64_t w = src.numel() / src.dim(0);
  std::copy(src.row(from), src.row(from) + w, dst.row(to));
}
}  // namespace

MtpRows save_mtp_rows(const StepLayout& l, const TensorI32& block_ids, const TensorD& block_scores,
                      const TensorI32& token_idx) {
  MtpRows s;
  s.block_ids = TensorI32({l.num_reqs, block_ids.dim(1)});
  s.block_scores = TensorD({l.num_reqs, block_scores.dim(1)});
  s.token_idx = TensorI32({l.num_reqs, token_idx.dim(1)});
  for (int i = 0; i < l.num_reqs; ++i) {
    const int64_t last = l.row_end(i) - 1;
    copy_row(block_ids, last, s.block_ids, i);
    copy_row(block_scores, last, s.block_scores, i);
    copy_row(token_idx, last, s.token_idx, i);
  }
  return s;
}

void reuse_mtp_rows(const StepLayout& l, const MtpRows& saved, bool count_column, TensorI32& block_ids,
                    TensorD& block_scores, TensorI32& token_idx) {
  if (!saved.valid())
    throw InputError("an MTP reuse step came before any selecting step: there are no step-0 rows to reuse");
  if (saved.block_ids.dim(0) < l.num_reqs)
    throw InputError(fmt::format("the MTP reuse step has {} requests but step 0 saved rows for {}",
                                 l.num_reqs, saved.block_ids.dim(0)));
  block_ids = TensorI32({l.num_tokens, saved.block_ids.dim(1)}, -1);
  block_scores = TensorD({l.num_tokens, saved.block_scores.dim(1)}, -std::numeric_limits<double>::infinity());
  token_idx = TensorI32({l.num_tokens, saved.token_idx.dim(1)}, -1);
  for (int64_t t = 0; t < l.num_tokens; ++t) {
    const int req = l.token_to_req[t];
    if (req < 0) {
      if (count_column) token_idx.at(t, token_idx.dim(1) - 1) = 0;
      continue;
    }
    copy_row(saved.block_ids, req, block_ids, t);
    copy_row(saved.block_scores, req, block_scores, t);
    copy_row(saved.token_idx, req, token_idx, t);
  }
}

}  // namespace qsa
