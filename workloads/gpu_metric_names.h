#pragma once
// The names of the figures the training loop records on a GPU, in one place: the writer
// (training_loop.cpp, device_iteration_timer.cpp), the tests and the docs (docs/schema.md,
// "metrics") all mean these.
namespace ts::workloads {

// Per timed and warm-up iteration (unit ns), from CUDA-event pairs on the engine's stream: the
// iteration's device time (IterationResult::device_ns), and each phase's, summed over the
// phase's runs in the iteration (wgan's five critic steps), on the loop's own thread only (a3c's
// learners run their phases on theirs: none of them is timed so).
inline constexpr const char* kGpuEventNs = "gpu_event_ns";
inline constexpr const char* kGpuEventDataNs = "gpu_event_data_ns";
inline constexpr const char* kGpuEventForwardNs = "gpu_event_forward_ns";
inline constexpr const char* kGpuEventBackwardNs = "gpu_event_backward_ns";
inline constexpr const char* kGpuEventOptimizerNs = "gpu_event_optimizer_ns";

// Per run (unit plans), over the loop (engine/autotune.h): convolution plans searched (every
// candidate timed, autotuning on: the warm-up), from the library's heuristics (autotuning off:
// shapes first seen in a timed iteration), and searches made while autotuning was off, i.e. in
// a timed iteration: 0 by design.
inline constexpr const char* kGpuConvPlansSearched = "gpu_conv_plans_searched";
inline constexpr const char* kGpuConvPlansHeuristic = "gpu_conv_plans_heuristic";
inline constexpr const char* kGpuConvSearchesTimed = "gpu_conv_searches_timed";

}  // namespace ts::workloads
