// One sweep point: the reference driver runs the trace's steps under the
// point's config (sweep_plan.hpp, point_config), and right after each step
// that holds scored rows, every such row is scored (sweep_row.hpp) against
// its request's context as the main cache holds it. Rows are scored in
// parallel; each row's values depend on that row alone, so results are the
// same for any thread count.
#pragma once

#include <vector>

#include "harness/sweep/sweep_plan.hpp"
#include "harness/sweep/sweep_series.hpp"
#include "harness/sweep/sweep_settings.hpp"

namespace qsa {

PointValues run_sweep_point(const SweepTrace& input, const SweepPoint& point, const std::vector<ScoredRow>& rows,
                            const SweepSettings& settings);

}  // namespace qsa
