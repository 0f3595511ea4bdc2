// The backends `qsa replay` runs a trace through: the fp64 reference
// (reference/step_driver.hpp) or the GPU step driver (gpu/step/), behind one
// interface, so the replay loop and the comparator are written once.
#pragma once

#include <memory>
#include <string>

#include "harness/trace/trace.hpp"
#include "reference/step_driver.hpp"

namespace qsa {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // feed: the recorded stages (isolated replay) or null (chained).
  virtual StepOutputs run(const TraceStep& step, const StageRecord* feed) = 0;
};

// Restores trace.initial_state into a fresh driver.
std::unique_ptr<StepRunner> make_reference_runner(const Trace& trace);

// ConfigError when this qsa was built without a GPU backend (the cpu preset),
// or for a config the GPU kernels do not implement; InternalError when no GPU
// is usable. The GPU runner runs chained only: it takes no feed.
std::unique_ptr<StepRunner> make_gpu_runner(const Trace& trace);
bool gpu_backend_built();

// A step's outputs in the recorded-stages layout, so one backend's outputs can
// stand in for a trace's recording (`--backend both`).
StageRecord as_record(const StepOutputs& o);

}  // namespace qsa
