// Replays a trace through a backend and compares every recorded stage.
//
// chained:  the backend runs the steps end to end from the initial state; a
//           difference early on propagates, which shows how error grows.
// isolated: each stage is fed the recorded outputs of the stages before it
//           (StepDriver's feed), so the first wrong stage is pinpointed.
#pragma once

#include <string>

#include "harness/compare/report.hpp"
#include "harness/compare/stage_tolerances.hpp"
#include "harness/trace/trace.hpp"

namespace qsa {

enum class ReplayMode { kChained, kIsolated };

struct ReplayOptions {
  ReplayMode mode = ReplayMode::kIsolated;
  std::string backend = "reference";  // reference, hip or both
  int only_step = -1;        // compare just this step (all steps still run)
  std::string only_stage;    // compare just this stage
  bool auto_context = true;  // kSameImplementation for qsa-produced traces, else kEngine
  ToleranceContext context = ToleranceContext::kEngine;
};

std::string to_string(ReplayMode mode);
ReplayMode parse_replay_mode(const std::string& s);

// Restores a trace's initial cache state into a driver's caches.
class StepDriver;
void restore_initial_state(const CacheSnapshot& state, StepDriver& driver);

// hip and both run the GPU step driver (chained only); both compares it with
// the reference stage by stage, selections tie-aware.
bool replay_backend_is_gpu(const std::string& backend);

ReplayReport replay_trace(const Trace& trace, const std::string& trace_path, const ReplayOptions& options);

}  // namespace qsa
