// OUT.json of a sweep: everything needed to reproduce and read it (version,
// command line, settings and seeds, each trace with its producer and config,
// the points, the notes on skipped combinations, the method's fixed choices)
// and the aggregates of OUT.csv as objects.
#pragma once

#include <string>
#include <vector>

#include "harness/sweep/sweep_plan.hpp"
#include "harness/sweep/sweep_settings.hpp"

namespace qsa {

std::string sweep_json(const std::vector<SweepTrace>& inputs, const SweepSettings& settings, const SweepPlan& plan,
                       const std::string& csv, const std::string& command_line, const std::string& prefix,
                       const std::string& per_row_path);

}  // namespace qsa
