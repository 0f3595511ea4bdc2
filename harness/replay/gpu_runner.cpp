// The GPU backend of `qsa replay`; compiled to a ConfigError in builds
// without a GPU backend (QSA_HAVE_GPU is set by harness/CMakeLists.txt).
#include <fmt/format.h>

#include "harness/replay/step_runner.hpp"

#if QSA_HAVE_GPU
#include "gpu/step/gpu_step_driver.hpp"
#endif

namespace qsa {

#if QSA_HAVE_GPU

namespace {

class GpuRunner final : public StepRunner {
 public:
  explicit GpuRunner(const Trace& t) : driver_(t.config, t.weights, t.geometry) {
    const CacheSnapshot& st = t.initial_state;
    for (int64_t i = 0; i < st.kv_slots.numel(); ++i)
      driver_.write_kv(st.kv_slots.at(i), st.kv_positions.at(i), st.kv_k.row(i), st.kv_v.row(i));
    for (int64_t i = 0; i < st.ring_slots.numel(); ++i)
      driver_.write_ring(st.ring_slots.at(i), st.ring_positions.at(i), st.ring_rope.row(i), st.ring_keys.row(i));
    for (int64_t i = 0; i < st.comp_slots.numel(); ++i)
      driver_.write_compressed(st.comp_slots.at(i), st.comp_blocks.at(i), st.comp_keys.row(i));
  }
  StepOutputs run(const TraceStep& step, const StageRecord* feed) override {
    if (feed != nullptr)
      throw ConfigError("the GPU backend replays chained only (it cannot feed recorded stages): use --mode chained");
    return driver_.run(step.meta, step.hidden);
  }

 private:
  gpu::GpuStepDriver driver_;
};

}  // namespace

std::unique_ptr<StepRunner> make_gpu_runner(const Trace& trace) { return std::make_unique<GpuRunner>(trace); }
bool gpu_backend_built() { return true; }

#else

std::unique_ptr<StepRunner> make_gpu_runner(const Trace&) {
  throw ConfigError(
      "this qsa was built without a GPU backend: configure with `cmake --preset cuda` (NVIDIA) or "
      "`--preset hip` (AMD) to replay with --backend hip or both");
}
bool gpu_backend_built() { return false; }

#endif

}  // namespace qsa
