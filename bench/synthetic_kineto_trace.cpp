#include "bench/synthetic_kineto_trace.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ts::bench {

namespace {

namespace fs = std::filesystem;

// The file, plain or through zlib.
class Sink {
 public:
  Sink(const fs::path& path, bool gzip) : path_(path) {
    if (gzip) {
      gz_ = ::gzopen(path.c_str(), "wb6");
      if (gz_ == nullptr) fail("cannot create");
      ::gzbuffer(gz_, 1 << 20);
    } else {
      file_ = std::fopen(path.c_str(), "wb");
      if (file_ == nullptr) fail("cannot create");
    }
  }
  ~Sink() {
    if (gz_ != nullptr) ::gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void write(std::string_view s) {
    if (s.empty()) return;
    const bool ok = gz_ != nullptr
                        ? ::gzwrite(gz_, s.data(), static_cast<unsigned>(s.size())) == static_cast<int>(s.size())
                        : std::fwrite(s.data(), 1, s.size(), file_) == s.size();
    if (!ok) fail("cannot write");
    bytes_ += static_cast<int64_t>(s.size());
  }
  void close() {
    const bool ok = gz_ != nullptr ? ::gzclose(gz_) == Z_OK : std::fclose(file_) == 0;
    gz_ = nullptr;
    file_ = nullptr;
    if (!ok) fail("cannot finish");
  }
  int64_t bytes() const { return bytes_; }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(fmt::format("{} '{}': {}", what, path_.string(), std::strerror(errno)));
  }
  fs::path path_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
};

constexpr int64_t kPid = 2815731, kMainTid = 2815731, kAutogradTid = 2816052;
constexpr int kComputeStream = 7, kCommStream = 20;
constexpr int64_t kBatch = 32;
constexpr int64_t kParamBytes = 25'557'032 * 4;  // ResNet-50's weights (fp32)
constexpr int64_t kBaseTimeNs = 1'764'374'400'000'000'000;
constexpr int64_t kDeviceBase = 0x7f3a'0000'0000, kHostBase = 0x5633'0000'0000;

// Kernel names as CUPTI gives them for ResNet-50 in TF32 on an H100 (cuDNN 9, cuBLAS 12).
constexpr std::string_view kConvFprop =
    "sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cudnn";
constexpr std::string_view kConvDgrad =
    "sm90_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cudnn";
constexpr std::string_view kConvWgrad =
    "sm90_xmma_wgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_execute_"
    "segment_k_on_kernel__5x_cudnn";
constexpr std::string_view kNchwToNhwc =
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
    "(cudnn::engines_precompiled::nhwc_transpose_type)0>(cudnn::engines_precompiled::nhwc_transpose_params_t<float>, "
    "float const*, float*)";
constexpr std::string_view kBnForward =
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*, "
    "cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, "
    "float)";
constexpr std::string_view kBnBackward =
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, "
    "float*, float*, float const*, float const*, float)";
constexpr std::string_view kRelu =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
    "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous "
    "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2>)";
constexpr std::string_view kThresholdBackward =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
    "namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
    "at::detail::Array<char*, 3> >(int, at::native::(anonymous "
    "namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
    "at::detail::Array<char*, 3>)";
constexpr std::string_view kAdd =
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, "
    "3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)";
constexpr std::string_view kMaxPool =
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, "
    "int, int, int, int, int, int, int, int, int, int, float*, long*)";
constexpr std::string_view kMaxPoolBackward =
    "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float>(float const*, long const*, int, "
    "long, long, long, int, int, int, int, int, int, int, int, int, int, float*)";
constexpr std::string_view kMean =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)";
constexpr std::string_view kSum =
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4>)";
constexpr std::string_view kDiv =
    "void at::native::elementwise_kernel<128, 2, "
    "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::DivFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, "
    "float, float, at::native::binary_internal::DivFunctor<float> > const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::DivFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, "
    "float, float, at::native::binary_internal::DivFunctor<float> > const&)::{lambda(int)#1})";
constexpr std::string_view kGemmTN =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas";
constexpr std::string_view kGemmNN =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas";
constexpr std::string_view kGemmNT =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas";
constexpr std::string_view kLogSoftmax =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)";
constexpr std::string_view kLogSoftmaxBackward =
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)";
constexpr std::string_view kNllLoss =
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
    "float*, float const*, long const*, float const*, bool, long, long, long, long)";
constexpr std::string_view kNllLossBackward =
    "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float "
    "const*, long const*, float const*, float const*, bool, int, int, long, long)";
constexpr std::string_view kNccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kForeachAdd =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
    "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)";
constexpr std::string_view kForeachMul =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, "
    "std::multiplies<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, float)";

enum class LayerKind { conv, bn, relu, add, maxpool, avgpool, linear };

// One module of ResNet-50's forward, in order.
struct Layer {
  LayerKind kind;
  std::string module;     // "nn.Module: Conv2d_12"
  int64_t out_bytes = 0;  // its output (an activation kept for backward)
  int params = 0;         // parameter tensors
  bool first = false;     // the stem's convolution: no gradient for its input
};

std::vector<Layer> resnet50() {
  std::vector<Layer> layers;
  int convs = 0, bns = 0, relus = 0;
  const auto bytes = [](int64_t c, int64_t hw) { return kBatch * c * hw * hw * 4; };
  const auto conv = [&](int64_t c, int64_t hw, bool first = false) {
    layers.push_back({LayerKind::conv, fmt::format("nn.Module: Conv2d_{}", convs++), bytes(c, hw), 1, first});
  };
  const auto bn = [&](int64_t c, int64_t hw) {
    layers.push_back({LayerKind::bn, fmt::format("nn.Module: BatchNorm2d_{}", bns++), bytes(c, hw), 2});
  };
  const auto relu = [&](int64_t c, int64_t hw) {
    layers.push_back({LayerKind::relu, fmt::format("nn.Module: ReLU_{}", relus++), bytes(c, hw), 0});
  };
  conv(64, 112, true);
  bn(64, 112);
  relu(64, 112);
  layers.push_back({LayerKind::maxpool, "nn.Module: MaxPool2d_0", bytes(64, 56), 0});
  const int blocks[] = {3, 4, 6, 3};
  const int64_t widths[] = {64, 128, 256, 512}, sizes[] = {56, 28, 14, 7};
  int adds = 0;
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b) {
      const int64_t w = widths[stage], hw = sizes[stage];
      conv(w, b == 0 && stage > 0 ? hw * 2 : hw);
      bn(w, b == 0 && stage > 0 ? hw * 2 : hw);
      relu(w, b == 0 && stage > 0 ? hw * 2 : hw);
      conv(w, hw);
      bn(w, hw);
      relu(w, hw);
      conv(4 * w, hw);
      bn(4 * w, hw);
      if (b == 0) {  // the downsample branch
        conv(4 * w, hw);
        bn(4 * w, hw);
      }
      layers.push_back({LayerKind::add, fmt::format("aten::add_{}", adds++), bytes(4 * w, hw), 0});
      relu(4 * w, hw);
    }
  }
  layers.push_back({LayerKind::avgpool, "nn.Module: AdaptiveAvgPool2d_0", kBatch * 2048 * 4, 0});
  layers.push_back({LayerKind::linear, "nn.Module: Linear_0", kBatch * 1000 * 4, 2});
  return layers;
}

class Generator {
 public:
  Generator(Sink& sink, const SyntheticTraceOptions& o) : sink_(sink), o_(o), rng_(o.seed), layers_(resnet50()) {}

  SyntheticTraceCounts run() {
    head();
    while (c_.steps == 0 || sink_.bytes() < o_.target_bytes - 4096) {
      std::string step;
      step.reserve(2 << 20);
      write_step(step);
      sink_.write(step);
      if (o_.progress) o_.progress(sink_.bytes());
    }
    tail();
    c_.json_bytes = sink_.bytes();
    return c_;
  }

 private:
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  double jitter(double us) { return us * uniform(0.94, 1.08); }
  static double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

  // --- records ---------------------------------------------------------------------------------
  // Every record but the array's first starts with the comma that separates it from the last.
  void range(std::string& out, std::string_view cat, std::string_view name, int64_t pid, int64_t tid, double ts,
             double dur, std::string_view args) {
    fmt::format_to(std::back_inserter(out),
                   ",\n  {{\n    \"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": {}, \"tid\": {},\n    "
                   "\"ts\": {:.3f}, \"dur\": {:.3f},\n    \"args\": {{\n      {}\n    }}\n  }}",
                   cat, name, pid, tid, ts, dur, args);
    ++c_.records;
    if (cat == "cpu_op" || cat == "user_annotation") {
      ++c_.cpu_ranges;
    } else if (cat == "python_function") {
      ++c_.python_functions, ++c_.left_out;
    } else {
      ++c_.gpu_activities;
      c_.kernels += cat == "kernel";
      c_.memcpys += cat == "gpu_memcpy";
      c_.memsets += cat == "gpu_memset";
      c_.runtime_calls += cat == "cuda_runtime";
    }
  }
  void flow(std::string& out, bool start, int64_t id, int64_t pid, int64_t tid, double ts) {
    fmt::format_to(std::back_inserter(out),
                   ",\n  {{\n    \"ph\": \"{}\", \"id\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {:.3f},\n    \"cat\": "
                   "\"ac2g\", \"name\": \"ac2g\"{}\n  }}",
                   start ? "s" : "f", id, pid, tid, ts, start ? "" : ", \"bp\": \"e\"");
    ++c_.records, ++c_.flows, ++c_.left_out;
  }
  // A [memory] instant: `bytes` allocated (> 0) or freed (< 0) at `addr` on the GPU or the host.
  void memory(std::string& out, int64_t tid, double ts, int64_t bytes, int64_t addr, bool gpu) {
    int64_t& allocated = gpu ? gpu_allocated_ : host_allocated_;
    int64_t& reserved = gpu ? gpu_reserved_ : host_reserved_;
    allocated += bytes;
    // The caching allocator reserves 2 MiB-rounded segments and keeps them.
    reserved = std::max(reserved, (allocated + (20 << 20)) / (2 << 20) * (2 << 20));
    fmt::format_to(std::back_inserter(out),
                   ",\n  {{\n    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n"
                   "    \"pid\": {}, \"tid\": {},\n    \"ts\": {:.3f},\n    \"args\": {{\n      \"Total Reserved\": "
                   "{}, \"Total Allocated\": {}, \"Bytes\": {}, \"Addr\": {}, \"Device Id\": {}, \"Device Type\": {}\n"
                   "    }}\n  }}",
                   kPid, tid, ts, reserved, allocated, bytes, addr, gpu ? 0 : -1, gpu ? 1 : 0);
    ++c_.records, ++c_.memory_points;
  }
  int64_t alloc_addr(int64_t bytes, bool gpu) {
    const int64_t addr = (gpu ? kDeviceBase : kHostBase) + next_addr_;
    next_addr_ = (next_addr_ + (bytes + 511) / 512 * 512) % (int64_t{1} << 36);
    return addr;
  }

  std::string op_args(int64_t ext, int64_t seq) {
    return seq >= 0 ? fmt::format("\"External id\": {},\"Record function id\": {}, \"Sequence number\": {}, \"Fwd "
                                  "thread id\": {}, \"Ev Idx\": {}",
                                  ext, ++record_function_, seq, seq_thread_, ++ev_idx_)
                    : fmt::format("\"External id\": {},\"Record function id\": {}, \"Ev Idx\": {}", ext,
                                  ++record_function_, ++ev_idx_);
  }

  // A range of category `cat` on `tid` from `t` around what `body(out, from)` writes (returning
  // its end): the range is written before its contents, as the profiler writes them.
  template <class Body>
  double around(std::string& out, std::string_view cat, std::string_view name, int64_t tid, double t, int64_t seq,
                Body&& body) {
    int64_t ext = 0;  // Python frames have none
    std::string args;
    if (cat == "python_function") {
      args = fmt::format("\"Python parent id\": {}, \"Python id\": {}, \"Ev Idx\": {}", python_id_, python_id_ + 1,
                         ++ev_idx_);
      ++python_id_;
    } else {
      ext = ++external_id_;
      args = op_args(ext, seq);
    }
    std::string inner;
    const double end = body(inner, t + uniform(0.6, 2.5), ext) + uniform(0.5, 2.0);
    range(out, cat, name, kPid, tid, t, end - t, args);
    out += inner;
    return end;
  }
  // A chain of cpu_ops each around the next, the innermost around `body`.
  template <class Body>
  double chain(std::string& out, std::initializer_list<std::string_view> names, int64_t tid, double t, int64_t seq,
               Body&& body) {
    std::vector<std::string_view> v(names);
    std::function<double(std::string&, size_t, double)> level = [&](std::string& o, size_t i, double from) {
      return around(o, "cpu_op", v[i], tid, from, seq, [&](std::string& in, double start, int64_t ext) {
        return i + 1 < v.size() ? level(in, i + 1, start) : body(in, start, ext);
      });
    };
    return level(out, 0, t);
  }

  // A runtime call at `t` on `tid` and the GPU activity it starts on `stream` (a kernel, a copy
  // of `bytes` or a set), with the flow between them. Returns the call's end.
  double launch(std::string& out, int64_t tid, double t, int64_t ext, std::string_view cat, std::string_view name,
                double gpu_us, int stream = kComputeStream, int64_t bytes = 0) {
    const int64_t corr = ++correlation_;
    const std::string_view api = cat == "gpu_memcpy"     ? "cudaMemcpyAsync"
                                 : cat == "gpu_memset"   ? "cudaMemsetAsync"
                                 : stream == kCommStream ? "cudaLaunchKernelExC"
                                                         : "cudaLaunchKernel";
    const int cbid = cat == "gpu_memcpy" ? 41 : cat == "gpu_memset" ? 51 : stream == kCommStream ? 430 : 211;
    const double call = cat == "gpu_memcpy" ? uniform(6, 12) : uniform(3.5, 7.5);
    range(out, "cuda_runtime", api, kPid, tid, t, call,
          fmt::format("\"External id\": {}, \"cbid\": {}, \"correlation\": {}", ext, cbid, corr));
    flow(out, true, corr, kPid, tid, t);
    double& clock = stream == kCommStream ? comm_clock_ : compute_clock_;
    // DDP's comm stream waits for the bucket's gradients: what stream 7 has queued so far.
    const double ready = stream == kCommStream ? std::max(clock, compute_clock_) : clock;
    const double start = std::max(t + call * 0.7, ready) + uniform(0.8, 2.5);
    const double dur = jitter(gpu_us);
    clock = start + dur;
    std::string args;
    if (cat == "kernel") {
      const int64_t blocks = std::clamp<int64_t>(static_cast<int64_t>(gpu_us * 24), 8, 65535);
      args = fmt::format(
          "\"External id\": {}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": {}, \"correlation\": {}, "
          "\"registers per thread\": {}, \"shared memory\": {}, \"blocks per SM\": {:.6f}, \"warps per SM\": {:.6f}, "
          "\"grid\": [{}, 1, 1], \"block\": [{}, 1, 1], \"est. achieved occupancy %\": {}",
          ext, stream, corr, stream == kCommStream ? 96 : 128, stream == kCommStream ? 4224 : 49152,
          static_cast<double>(blocks) / 132, static_cast<double>(blocks) * 4 / 132, blocks,
          stream == kCommStream ? 640 : 128, stream == kCommStream ? 2 : 25);
      c_.nccl_kernels += stream == kCommStream;
    } else if (cat == "gpu_memcpy") {
      args = fmt::format(
          "\"External id\": {}, \"device\": 0, \"context\": 1, \"stream\": {}, \"correlation\": {}, \"bytes\": {}, "
          "\"memory bandwidth (GB/s)\": {:.6f}",
          ext, stream, corr, bytes, static_cast<double>(bytes) / (dur * 1e3));
    } else {
      args = fmt::format("\"External id\": {}, \"device\": 0, \"context\": 1, \"stream\": {}, \"correlation\": {}, "
                         "\"bytes\": {}, \"memory bandwidth (GB/s)\": {:.6f}",
                         ext, stream, corr, bytes, static_cast<double>(bytes) / (dur * 1e3));
    }
    range(out, cat, name, 0, stream, start, dur, args);
    flow(out, false, corr, 0, stream, start);
    if (stream == kComputeStream) {
      step_gpu_from_ = std::min(step_gpu_from_, start);
      step_gpu_to_ = std::max(step_gpu_to_, clock);
    }
    return t + call;
  }
  double kernel(std::string& out, int64_t tid, double t, int64_t ext, std::string_view name, double gpu_us,
                int stream = kComputeStream) {
    return launch(out, tid, t, ext, "kernel", name, gpu_us, stream) + uniform(0.3, 1.5);
  }

  // --- one training step -----------------------------------------------------------------------
  void write_step(std::string& out) {
    const int64_t k = step_index_++;
    const std::string step_name = fmt::format("ProfilerStep#{}", k);
    step_gpu_from_ = 1e300, step_gpu_to_ = -1e300;
    const double t0 = cpu_clock_;
    int64_t step_ext = 0;
    const double end =
        around(out, "user_annotation", step_name, kMainTid, t0, -1, [&](std::string& in, double t, int64_t ext) {
          step_ext = ext;
          t = data(in, t) + uniform(5, 15);
          t = forward(in, t) + uniform(5, 15);
          t = backward(in, t) + uniform(5, 15);
          t = optimizer(in, t) + uniform(3, 8);
          return loss_item(in, t);
        });
    range(out, "gpu_user_annotation", step_name, 0, kComputeStream, step_gpu_from_, step_gpu_to_ - step_gpu_from_,
          fmt::format("\"External id\": {}", step_ext));
    ++c_.steps;
    cpu_clock_ = end + uniform(20, 60);  // the loop's own Python between steps
  }

  // The loader's batch: pinned host buffers, copied to the GPU.
  double data(std::string& out, double t) {
    return around(out, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", kMainTid, t,
                  -1, [&](std::string& in, double s, int64_t) {
                    const int64_t images = kBatch * 3 * 224 * 224 * 4, labels = kBatch * 8;
                    const int64_t host = alloc_addr(images, false);
                    memory(in, kMainTid, s, images, host, false);
                    s += uniform(300, 600);  // collate and pin
                    for (const int64_t bytes : {images, labels}) {
                      s = chain(in, {"aten::to", "aten::_to_copy", "aten::copy_"}, kMainTid, s, -1,
                                [&](std::string& c, double u, int64_t ext) {
                                  const int64_t addr = alloc_addr(bytes, true);
                                  memory(c, kMainTid, u, bytes, addr, true);
                                  inputs_.push_back({addr, bytes});
                                  return launch(c, kMainTid, u + uniform(1, 3), ext, "gpu_memcpy",
                                                "Memcpy HtoD (Pinned -> Device)", 2.0 + mib(bytes) * 40.0,
                                                kComputeStream, bytes);
                                }) +
                          uniform(2, 6);
                    }
                    memory(in, kMainTid, s, -images, host, false);
                    return s + uniform(1, 3);
                  });
  }

  // A leaf op's output allocated on the GPU (kept until backward frees it).
  void keep(std::string& out, double t, int64_t bytes) {
    const int64_t addr = alloc_addr(bytes, true);
    memory(out, kMainTid, t, bytes, addr, true);
    activations_.push_back({addr, bytes});
  }

  double forward(std::string& out, double t) {
    return around(out, "user_annotation", "forward", kMainTid, t, -1, [&](std::string& in, double s, int64_t) {
      s = around(in, "python_function", "nn.Module: DistributedDataParallel_0", kMainTid, s, -1,
                 [&](std::string& d, double u, int64_t) {
                   return around(d, "python_function", "nn.Module: ResNet_0", kMainTid, u, -1,
                                 [&](std::string& r, double v, int64_t) {
                                   forward_seq_.clear();
                                   for (const Layer& layer : layers_) v = module(r, v, layer) + uniform(1, 4);
                                   return v;
                                 });
                 });
      return loss(in, s + uniform(2, 6));
    });
  }

  // One module's forward: its wrapper, the frame of its forward(), its ops and kernels.
  double module(std::string& out, double t, const Layer& l) {
    const int64_t seq = ++sequence_;
    forward_seq_.push_back(seq);
    const double mb = mib(l.out_bytes);
    const auto body = [&](std::string& in, double s, int64_t) -> double {
      switch (l.kind) {
        case LayerKind::conv:
          return chain(in, {"aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution"},
                       kMainTid, s, seq, [&](std::string& c, double u, int64_t ext) {
                         keep(c, u, l.out_bytes);
                         if (l.first) u = kernel(c, kMainTid, u + 1, ext, kNchwToNhwc, 6 + mb * 0.4);
                         return kernel(c, kMainTid, u + uniform(2, 5), ext, kConvFprop, 18 + mb * 1.3);
                       });
        case LayerKind::bn:
          return chain(in, {"aten::batch_norm", "aten::_batch_norm_impl_index", "aten::cudnn_batch_norm"}, kMainTid, s,
                       seq, [&](std::string& c, double u, int64_t ext) {
                         keep(c, u, l.out_bytes);
                         return kernel(c, kMainTid, u + uniform(2, 5), ext, kBnForward, 8 + mb * 0.9);
                       });
        case LayerKind::relu:
          return chain(in, {"aten::relu_", "aten::clamp_min_"}, kMainTid, s, seq,
                       [&](std::string& c, double u, int64_t ext) {
                         return kernel(c, kMainTid, u + uniform(1, 3), ext, kRelu, 4 + mb * 0.5);
                       });
        case LayerKind::add:
          return chain(in, {"aten::add_"}, kMainTid, s, seq, [&](std::string& c, double u, int64_t ext) {
            return kernel(c, kMainTid, u + uniform(1, 3), ext, kAdd, 5 + mb * 0.7);
          });
        case LayerKind::maxpool:
          return chain(in, {"aten::max_pool2d", "aten::max_pool2d_with_indices"}, kMainTid, s, seq,
                       [&](std::string& c, double u, int64_t ext) {
                         keep(c, u, l.out_bytes);
                         keep(c, u + 0.5, l.out_bytes * 2);  // the indices (int64)
                         return kernel(c, kMainTid, u + uniform(2, 4), ext, kMaxPool, 6 + mb * 0.8);
                       });
        case LayerKind::avgpool:
          s = chain(in, {"aten::adaptive_avg_pool2d", "aten::mean"}, kMainTid, s, seq,
                    [&](std::string& c, double u, int64_t ext) {
                      keep(c, u, l.out_bytes);
                      return kernel(c, kMainTid, u + uniform(2, 4), ext, kMean, 9);
                    });
          return chain(in, {"aten::flatten", "aten::view"}, kMainTid, s + uniform(1, 3), -1,
                       [&](std::string&, double u, int64_t) { return u + uniform(1, 2); });
        case LayerKind::linear:
          return chain(in, {"aten::linear"}, kMainTid, s, seq, [&](std::string& c, double u, int64_t) {
            u = chain(c, {"aten::t", "aten::transpose", "aten::as_strided"}, kMainTid, u, -1,
                      [&](std::string&, double v, int64_t) { return v + uniform(0.5, 1.5); });
            return chain(c, {"aten::addmm"}, kMainTid, u + 1, seq, [&](std::string& a, double v, int64_t ext) {
              keep(a, v, l.out_bytes);
              return kernel(a, kMainTid, v + uniform(2, 5), ext, kGemmTN, 12);
            });
          });
      }
      return s;
    };
    if (l.kind == LayerKind::add) return body(out, t, 0);  // a plain op between modules
    return around(out, "python_function", l.module, kMainTid, t, -1, [&](std::string& in, double s, int64_t) {
      const char* frame = l.kind == LayerKind::conv      ? "torch/nn/modules/conv.py(554): forward"
                          : l.kind == LayerKind::bn      ? "torch/nn/modules/batchnorm.py(176): forward"
                          : l.kind == LayerKind::relu    ? "torch/nn/modules/activation.py(133): forward"
                          : l.kind == LayerKind::linear  ? "torch/nn/modules/linear.py(125): forward"
                          : l.kind == LayerKind::maxpool ? "torch/nn/modules/pooling.py(212): forward"
                                                         : "torch/nn/modules/pooling.py(1403): forward";
      return around(in, "python_function", frame, kMainTid, s, -1, body);
    });
  }

  double loss(std::string& out, double t) {
    loss_seq_ = ++sequence_;
    return chain(out, {"aten::cross_entropy_loss"}, kMainTid, t, loss_seq_, [&](std::string& c, double u, int64_t) {
      u = chain(c, {"aten::log_softmax", "aten::_log_softmax"}, kMainTid, u, loss_seq_,
                [&](std::string& a, double v, int64_t ext) {
                  keep(a, v, kBatch * 1000 * 4);
                  return kernel(a, kMainTid, v + uniform(2, 4), ext, kLogSoftmax, 5);
                });
      return chain(c, {"aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss_forward"}, kMainTid, u + 1, loss_seq_,
                   [&](std::string& a, double v, int64_t ext) {
                     keep(a, v, 512);
                     return kernel(a, kMainTid, v + uniform(2, 4), ext, kNllLoss, 4);
                   });
    });
  }

  // A tensor freed on the autograd thread.
  void free_last(std::string& out, double t) {
    if (activations_.empty()) return;
    const auto [addr, bytes] = activations_.back();
    activations_.pop_back();
    memory(out, kAutogradTid, t, -bytes, addr, true);
  }
  // A gradient made and handed on (freed once its consumer ran).
  void gradient(std::string& out, double t, int64_t bytes) {
    const int64_t addr = alloc_addr(bytes, true);
    memory(out, kAutogradTid, t, bytes, addr, true);
    memory(out, kAutogradTid, t + uniform(1, 3), -bytes, addr, true);
  }

  // One autograd node on the autograd thread: evaluate_function > Node > its ops.
  template <class Body>
  double node(std::string& out, double t, std::string_view name, int64_t seq, Body&& body) {
    const std::string evaluate = fmt::format("autograd::engine::evaluate_function: {}", name);
    return chain(out, {evaluate, name}, kAutogradTid, t, seq, body);
  }

  double backward(std::string& out, double t) {
    return around(out, "user_annotation", "backward", kMainTid, t, -1, [&](std::string& in, double s, int64_t) {
      double main_end = 0;
      const double bwd_end =
          around(in, "python_function", "torch/_tensor.py(626): backward", kMainTid, s, -1,
                 [&](std::string& p, double u, int64_t) {
                   return around(p, "python_function", "torch/autograd/__init__.py(347): backward", kMainTid, u, -1,
                                 [&](std::string& q, double v, int64_t) {
                                   v = chain(q, {"aten::ones_like", "aten::empty_like"}, kMainTid, v, -1,
                                             [&](std::string&, double w, int64_t) { return w + uniform(1, 3); });
                                   // The engine's thread does the work while this one waits for it.
                                   seq_thread_ = 1;
                                   const double done = autograd(q, v + uniform(5, 15));
                                   seq_thread_ = 0;
                                   main_end = done;
                                   return done + uniform(3, 8);
                                 });
                 });
      return std::max(bwd_end, main_end);
    });
  }

  double autograd(std::string& out, double t) {
    t = node(out, t, "NllLossBackward0", loss_seq_, [&](std::string& c, double u, int64_t) {
      return chain(c, {"aten::nll_loss_backward"}, kAutogradTid, u, -1, [&](std::string& a, double v, int64_t ext) {
        gradient(a, v, kBatch * 1000 * 4);
        return kernel(a, kAutogradTid, v + 2, ext, kNllLossBackward, 4);
      });
    });
    t = node(out, t + 2, "LogSoftmaxBackward0", loss_seq_, [&](std::string& c, double u, int64_t) {
      return chain(c, {"aten::_log_softmax_backward_data"}, kAutogradTid, u, -1,
                   [&](std::string& a, double v, int64_t ext) {
                     free_last(a, v);
                     free_last(a, v + 0.5);
                     return kernel(a, kAutogradTid, v + 2, ext, kLogSoftmaxBackward, 5);
                   });
    });
    // DDP's buckets: ~25 MB of gradients each, all-reduced on stream 20 while backward goes on.
    int64_t bucket = 0;
    constexpr int64_t kBucketBytes = 25 << 20;
    const int64_t param_bytes = kParamBytes / 161;  // an average parameter tensor
    for (size_t i = layers_.size(); i-- > 0;) {
      const Layer& l = layers_[i];
      const int64_t seq = forward_seq_[i];
      const double mb = mib(l.out_bytes);
      t += uniform(2, 6);
      switch (l.kind) {
        case LayerKind::conv:
          t = node(out, t, "ConvolutionBackward0", seq, [&](std::string& c, double u, int64_t) {
            return chain(
                c, {"aten::convolution_backward"}, kAutogradTid, u, -1, [&](std::string& a, double v, int64_t ext) {
                  if (!l.first) {
                    gradient(a, v, l.out_bytes);
                    v = kernel(a, kAutogradTid, v + 2, ext, kConvDgrad, 20 + mb * 1.4);
                  }
                  v = launch(a, kAutogradTid, v + 1, ext, "gpu_memset", "Memset (Device)", 1.5, kComputeStream, 65536) +
                      1;
                  v = kernel(a, kAutogradTid, v + 1, ext, kConvWgrad, 22 + mb * 1.5);
                  free_last(a, v);
                  return v;
                });
          });
          break;
        case LayerKind::bn:
          t = node(out, t, "CudnnBatchNormBackward0", seq, [&](std::string& c, double u, int64_t) {
            return chain(c, {"aten::cudnn_batch_norm_backward"}, kAutogradTid, u, -1,
                         [&](std::string& a, double v, int64_t ext) {
                           gradient(a, v, l.out_bytes);
                           v = kernel(a, kAutogradTid, v + 2, ext, kBnBackward, 10 + mb * 1.6);
                           free_last(a, v);
                           return v;
                         });
          });
          break;
        case LayerKind::relu:
          t = node(out, t, "ReluBackward0", seq, [&](std::string& c, double u, int64_t) {
            return chain(c, {"aten::threshold_backward"}, kAutogradTid, u, -1,
                         [&](std::string& a, double v, int64_t ext) {
                           return kernel(a, kAutogradTid, v + 2, ext, kThresholdBackward, 5 + mb * 0.8);
                         });
          });
          break;
        case LayerKind::add:
          t = node(out, t, "AddBackward0", seq, [&](std::string&, double u, int64_t) { return u + uniform(1, 2); });
          break;
        case LayerKind::maxpool:
          t = node(out, t, "MaxPool2DWithIndicesBackward0", seq, [&](std::string& c, double u, int64_t) {
            return chain(c, {"aten::max_pool2d_with_indices_backward"}, kAutogradTid, u, -1,
                         [&](std::string& a, double v, int64_t ext) {
                           v = kernel(a, kAutogradTid, v + 2, ext, kMaxPoolBackward, 8 + mb * 1.2);
                           free_last(a, v);
                           free_last(a, v + 0.5);
                           return v;
                         });
          });
          break;
        case LayerKind::avgpool:
          t = node(out, t, "MeanBackward1", seq, [&](std::string& c, double u, int64_t) {
            return chain(c, {"aten::div"}, kAutogradTid, u, -1, [&](std::string& a, double v, int64_t ext) {
              free_last(a, v);
              return kernel(a, kAutogradTid, v + 2, ext, kDiv, 14);
            });
          });
          break;
        case LayerKind::linear:
          t = node(out, t, "AddmmBackward0", seq, [&](std::string& c, double u, int64_t) {
            return chain(c, {"aten::mm"}, kAutogradTid, u, -1, [&](std::string& a, double v, int64_t ext) {
              v = kernel(a, kAutogradTid, v + 2, ext, kGemmNN, 10);
              v = kernel(a, kAutogradTid, v + 2, ext, kGemmNT, 9);
              v = kernel(a, kAutogradTid, v + 2, ext, kSum, 4);
              free_last(a, v);
              return v;
            });
          });
          break;
      }
      // Its parameters' gradients accumulated, and the bucket all-reduced when full.
      for (int p = 0; p < l.params; ++p) {
        t = node(out, t + uniform(1, 3), "torch::autograd::AccumulateGrad", -1, [&](std::string& c, double u, int64_t) {
          return chain(c, {"aten::detach", "detach"}, kAutogradTid, u, -1,
                       [&](std::string&, double v, int64_t) { return v + uniform(0.5, 1.5); });
        });
        bucket += param_bytes;
      }
      if (bucket >= kBucketBytes || (i == 0 && bucket > 0)) {
        const int64_t bytes = bucket;
        bucket = 0;
        t = chain(out, {"c10d::allreduce_", "record_param_comms", "nccl:all_reduce"}, kAutogradTid, t + 3, -1,
                  [&](std::string& c, double u, int64_t ext) {
                    return kernel(c, kAutogradTid, u + 2, ext, kNccl, 40 + mib(bytes) * 9.0, kCommStream);
                  });
      }
    }
    // What forward kept and backward did not free (the inputs, the loss).
    while (!activations_.empty()) free_last(out, t + 0.5);
    for (const auto& [addr, bytes] : inputs_) memory(out, kAutogradTid, t + 1, -bytes, addr, true);
    inputs_.clear();
    return t + uniform(2, 5);
  }

  double optimizer(std::string& out, double t) {
    return around(out, "user_annotation", "optimizer", kMainTid, t, -1, [&](std::string& in, double s, int64_t) {
      s = around(
          in, "user_annotation", "Optimizer.step#SGD.step", kMainTid, s, -1, [&](std::string& o, double u, int64_t) {
            // momentum = momentum * 0.9 + grad; param -= lr * momentum, over 161 tensors in chunks.
            const std::string_view ops[] = {"aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_add_"};
            for (int i = 0; i < 3; ++i) {
              const std::string_view name = i == 0 ? kForeachMul : kForeachAdd;
              const double gpu_us = i == 0 ? 18.0 : 24.0;
              u = chain(o, {ops[i]}, kMainTid, u + uniform(3, 8), -1, [&](std::string& c, double v, int64_t ext) {
                for (int chunk = 0; chunk < 6; ++chunk) v = kernel(c, kMainTid, v, ext, name, gpu_us);
                return v;
              });
            }
            return u;
          });
      return around(in, "user_annotation", "Optimizer.zero_grad#SGD.zero_grad", kMainTid, s + uniform(3, 8), -1,
                    [&](std::string&, double u, int64_t) { return u + uniform(20, 40); });
    });
  }

  // loss.item(): a 4-byte copy back, and the host waits for the GPU.
  double loss_item(std::string& out, double t) {
    return chain(out, {"aten::item", "aten::_local_scalar_dense"}, kMainTid, t, -1,
                 [&](std::string& c, double u, int64_t ext) {
                   u = launch(c, kMainTid, u + 1, ext, "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 1.5,
                              kComputeStream, 4) +
                       uniform(0.5, 1.5);
                   const int64_t corr = ++correlation_;
                   const double waited = std::max(compute_clock_, comm_clock_) - u + uniform(3, 8);
                   const double wait = std::max(waited, uniform(2, 4));
                   range(c, "cuda_runtime", "cudaStreamSynchronize", kPid, kMainTid, u, wait,
                         fmt::format("\"External id\": {}, \"cbid\": 131, \"correlation\": {}", ext, corr));
                   range(c, "cuda_sync", "Stream Sync", 0, kComputeStream, u + 0.5, wait - 1.0,
                         fmt::format("\"External id\": {}, \"device\": 0, \"context\": 1, \"stream\": {}, "
                                     "\"correlation\": {}, \"event\": -1",
                                     ext, kComputeStream, corr));
                   return u + wait + uniform(1, 2);
                 });
  }

  // --- the file's head and tail ----------------------------------------------------------------
  void head() {
    std::string h = fmt::format(R"({{
  "schemaVersion": 1,
  "deviceProperties": [
    {{
      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929347584,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }}
  ],
  "cupti_version": 24,
  "cuda_runtime_version": 12040,
  "cuda_driver_version": 12040,
  "profile_memory": 1,
  "with_stack": 1,
  "trace_id": "5F2D1E0A7C4B4B0F9A3E6D1C2B7A8E90",
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": {},
  "traceEvents": [
  {{
    "name": "process_name", "ph": "M", "ts": {:.3f}, "pid": {}, "tid": 0,
    "args": {{
      "name": "python3"
    }}
  }})",
                                kBaseTimeNs, cpu_clock_, kPid);
    ++c_.records, ++c_.left_out;
    const auto meta = [&](std::string_view name, int64_t pid, int64_t tid, std::string_view key, std::string_view v) {
      fmt::format_to(std::back_inserter(h),
                     ",\n  {{\n    \"name\": \"{}\", \"ph\": \"M\", \"ts\": {:.3f}, \"pid\": {}, \"tid\": {},\n    "
                     "\"args\": {{\n      \"{}\": {}\n    }}\n  }}",
                     name, cpu_clock_, pid, tid, key, v);
      ++c_.records, ++c_.left_out;
    };
    meta("process_labels", kPid, 0, "labels", "\"CPU\"");
    meta("process_sort_index", kPid, 0, "sort_index", std::to_string(kPid));
    meta("process_name", 0, 0, "name", "\"python3\"");
    meta("process_labels", 0, 0, "labels", "\"GPU 0\"");
    meta("process_sort_index", 0, 0, "sort_index", "5000000");
    meta("thread_name", kPid, kMainTid, "name", fmt::format("\"thread {} (python3)\"", kMainTid));
    meta("thread_sort_index", kPid, kMainTid, "sort_index", std::to_string(kMainTid));
    meta("thread_name", kPid, kAutogradTid, "name", fmt::format("\"thread {} (pt_autograd_0)\"", kAutogradTid));
    meta("thread_sort_index", kPid, kAutogradTid, "sort_index", std::to_string(kAutogradTid));
    for (const int stream : {kComputeStream, kCommStream}) {
      meta("thread_name", 0, stream, "name", fmt::format("\"stream {} \"", stream));
      meta("thread_sort_index", 0, stream, "sort_index", std::to_string(stream));
    }
    sink_.write(h);
  }

  void tail() {
    const double first = 1'000'000.0;
    std::string t = fmt::format(
        ",\n  {{\n    \"ph\": \"X\", \"cat\": \"Trace\", \"ts\": {:.3f}, \"dur\": {:.3f},\n    \"pid\": \"Spans\", "
        "\"tid\": \"PyTorch Profiler\",\n    \"name\": \"PyTorch Profiler (0)\",\n    \"args\": {{\n      \"Op "
        "count\": "
        "0\n    }}\n  }}"
        ",\n  {{\n    \"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": "
        "\"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": {:.3f}\n  }}"
        ",\n  {{\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": "
        "\"\", \"ts\": {:.3f}\n  }}\n],\n  \"traceName\": \"resnet50_ddp_rank0.pt.trace.json\"\n}}\n",
        first, cpu_clock_ - first, first, cpu_clock_);
    c_.records += 3, c_.left_out += 3;
    sink_.write(t);
  }

  Sink& sink_;
  const SyntheticTraceOptions& o_;
  std::mt19937_64 rng_;
  std::vector<Layer> layers_;
  SyntheticTraceCounts c_;
  double cpu_clock_ = 1'000'000.0, compute_clock_ = 0, comm_clock_ = 0;
  double step_gpu_from_ = 0, step_gpu_to_ = 0;
  int64_t step_index_ = 0, external_id_ = 0, correlation_ = 0, record_function_ = 0, sequence_ = 0, ev_idx_ = 0,
          python_id_ = 0, seq_thread_ = 0, loss_seq_ = 0;
  int64_t gpu_allocated_ = 3 * kParamBytes, gpu_reserved_ = 0, host_allocated_ = 0, host_reserved_ = 0;
  int64_t next_addr_ = 0;
  std::vector<int64_t> forward_seq_;
  std::vector<std::pair<int64_t, int64_t>> activations_, inputs_;  // (address, bytes) still allocated
};

}  // namespace

SyntheticTraceCounts write_synthetic_kineto_trace(const fs::path& path, const SyntheticTraceOptions& options) {
  Sink sink(path, options.gzip);
  SyntheticTraceCounts counts = Generator(sink, options).run();
  sink.close();
  counts.file_bytes = static_cast<int64_t>(fs::file_size(path));
  return counts;
}

}  // namespace ts::bench
