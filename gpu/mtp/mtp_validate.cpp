#include "gpu/mtp/mtp_validate.hpp"

#include <fmt/format.h>

#include "reference/core/errors.hpp"

namespace qsa::gpu {

std::vector<int32_t> mtp_last_rows(const StepLayout& layout) {
  std::vector<int32_t> last(static_cast<size_t>(layout.num_reqs));
  for (int i = 0; i < layout.num_reqs; ++i) last[static_cast<size_t>(i)] = layout.row_end(i) - 1;
  return last;
}

void validate_mtp_save(const std::vector<int32_t>& last_row, int64_t num_tokens) {
  for (size_t i = 0; i < last_row.size(); ++i)
    if (last_row[i] < 0 || last_row[i] >= num_tokens)
      throw InputError(fmt::format("gpu mtp save: last_row[{}] = {} is not a row of the step ({} rows); every "
                                   "request of a selecting step has a last token in [0, {})",
                                   i, last_row[i], num_tokens, num_tokens));
}

void validate_mtp_reuse(const std::vector<int32_t>& token_to_req, int64_t saved_rows) {
  if (saved_rows <= 0)
    throw InputError("gpu mtp reuse: an MTP reuse step came before any selecting step: there are no step-0 rows "
                     "to reuse");
  for (size_t t = 0; t < token_to_req.size(); ++t)
    if (token_to_req[t] < -1 || token_to_req[t] >= saved_rows)
      throw InputError(fmt::format("gpu mtp reuse: token_to_req[{}] = {} has no saved row (step 0 saved rows "
                                   "for {} requests; -1 marks a padding row)",
                                   t, token_to_req[t], saved_rows));
}

}  // namespace qsa::gpu
