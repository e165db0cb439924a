#pragma once
// A synthetic PyTorch profiler trace (Kineto's Chrome trace JSON) of any size, for importing at
// scale (issue 42's benchmark, bench/trace_import_bench.cpp): data-parallel ResNet-50 training
// steps on one GPU as `torch.profiler` with CPU and CUDA activities, `profile_memory`,
// `with_stack` and DDP write them. Written as a stream (one step at a time, ~1.2 MB), so memory
// stays flat whatever the size; deterministic for a seed.
//
// What a step holds (docs/import.md maps each onto the store):
// - `ProfilerStep#k` (user_annotation) over the step on the main thread, its `gpu_user_annotation`
//   twin on stream 7; record_function phases `forward`, `backward`, `optimizer` (user_annotation),
//   the data loader's and the optimizer's own annotations;
// - cpu_op ranges nested as PyTorch nests them (aten::conv2d > aten::convolution >
//   aten::_convolution > aten::cudnn_convolution; batch norm, relu, add, pooling, linear, the loss;
//   the autograd engine's backward functions on the autograd thread; AccumulateGrad; the
//   optimizer's foreach ops), with `External id`, `Record function id`, `Sequence number`,
//   `Fwd thread id`, `Ev Idx` args; python_function ranges (nn.Module wrappers and frames) around
//   the modules;
// - cuda_runtime calls (cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync,
//   cudaStreamSynchronize) with correlation ids; their `kernel`, `gpu_memcpy` (with bytes),
//   `gpu_memset` and `cuda_sync` activities on device 0, stream 7 for compute and stream 20 for
//   DDP's ncclDevKernel_AllReduce_Sum_f32_RING_LL buckets, which overlap backward's gemm kernels;
//   `ac2g` flow events (ph s / f) from each launch to its activity;
// - `[memory]` instants (Total Allocated, Total Reserved, Bytes, Addr, Device Type, Device Id):
//   activations allocated in forward and freed in backward, on cuda:0, and pinned host buffers;
// - the file's own parts: schemaVersion, deviceProperties (an H100), baseTimeNanoseconds,
//   process and thread metadata, the profiler's span and instants, traceName.
#include <cstdint>
#include <filesystem>
#include <functional>

namespace ts::bench {

struct SyntheticTraceOptions {
  // Bytes of JSON to write at least: the file ends with the step that reaches this (a step is
  // ~1.2 MB) and the trace's closing records; at least one step is written.
  int64_t target_bytes = 20'000'000;
  uint64_t seed = 42;
  bool gzip = false;                                 // gzip the file (target_bytes counts the JSON)
  std::function<void(int64_t json_bytes)> progress;  // after every step
};

// What was written, counted as import-trace counts it (importers/kineto_import.h).
struct SyntheticTraceCounts {
  int64_t json_bytes = 0;  // of JSON
  int64_t file_bytes = 0;  // on disk (smaller when gzipped)
  int64_t records = 0;     // elements of traceEvents
  int64_t steps = 0;       // ProfilerStep#k ranges: iterations
  int64_t cpu_ranges = 0;  // cpu_op and user_annotation ranges, the steps included: CPU events
  // kernel, gpu_memcpy, gpu_memset, gpu_user_annotation, cuda_runtime, cuda_sync: GPU activities
  int64_t gpu_activities = 0;
  int64_t memory_points = 0;  // [memory] instants
  int64_t left_out = 0;       // python_function ranges, flows, metadata, the profiler's own records
  // Parts of the above.
  int64_t kernels = 0, nccl_kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, python_functions = 0, flows = 0;
};

// Throws std::runtime_error when the file cannot be written.
SyntheticTraceCounts write_synthetic_kineto_trace(const std::filesystem::path& path,
                                                  const SyntheticTraceOptions& options);

}  // namespace ts::bench
