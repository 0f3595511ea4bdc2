// One registration function per benchmark file; gpu_main.cpp calls them in
// this order, which is the order Google Benchmark runs them in (the copy
// benchmark first: the others' percentages use its bandwidth). A new kernel's
// benchmark is one file gpu/<kernel>_bench.cpp plus one line here and in
// gpu_main.cpp.
#pragma once

namespace qsa::bench {

void register_copy_benchmarks();       // copy_bench.cpp
void register_select_benchmarks();     // select_bench.cpp
void register_expand_benchmarks();     // expand_bench.cpp
void register_attention_benchmarks();  // attention_bench.cpp
void register_prepare_benchmarks();    // prepare_bench.cpp
void register_projection_benchmarks(); // projection_bench.cpp
void register_step_benchmarks();       // step_bench.cpp (whole-step launch sequences, last)

}  // namespace qsa::bench
