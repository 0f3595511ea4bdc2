// Per-stage summaries of a step's outputs: what `qsa example` prints, and a
// quick way to see that a stage produced plausible numbers.
#pragma once

#include <string>
#include <vector>

#include "reference/step_driver.hpp"

namespace qsa {

struct StageSummary {
  std::string stage;
  std::string shape;
  int64_t count = 0;      // real rows' elements (padding excluded)
  int64_t non_finite = 0;
  double mean_abs = 0;
  double rms = 0;
  double min = 0;
  double max = 0;
  double checksum = 0;    // fp64 sum: changes whenever any value does
};

std::vector<StageSummary> summarize_step(const StepOutputs& o);

// Selection statistics: mean valid blocks per row, mean attended tokens.
std::string describe_selection(const StepOutputs& o, bool count_column);

std::string format_summaries(const std::vector<StageSummary>& rows);

}  // namespace qsa
