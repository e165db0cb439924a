// The conv family on the GPU, on cuDNN 9's legacy convolution API (still shipped, marked
// deprecated), plain NCHW. The algorithm of each (direction, shapes, parameters, TF32 setting)
// is chosen once, among those needing at most kMaxConvWorkspaceBytes of workspace, and cached
// with its descriptors: by cudnnFind*AlgorithmEx, which times the candidates on the real
// buffers, while autotuning is on (engine/autotune.h); while it is off (the training loop's timed
// iterations), by cuDNN's heuristics (cudnnGet*Algorithm_v7), which run nothing, and searched
// later if the shape comes back with autotuning on. Workspace is a temporary tensor in memprof's
// workspace category.
#include <array>
#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "engine/autotune.h"
#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/pointwise_kernels.h"

namespace ts::engine::cuda {

struct ConvPlan {
  TensorDesc x, y;  // y: the output (forward) or dy (backward)
  FilterDesc w;
  ConvDesc conv;
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool searched = false;  // timed by cudnnFind*Ex; else cuDNN's heuristics' pick
};

namespace {

enum class Pass { forward = 0, backward_data = 1, backward_weights = 2 };

struct ConvGeom {
  int64_t n, c, h, w;     // input
  int64_t o, cg, kh, kw;  // weights [o, c / groups, kh, kw]
  int64_t oh, ow;         // output
};

ConvGeom conv_geom(const Shape& x, const Shape& w, const Conv2dParams& p, const char* op) {
  if (x.size() != 4 || w.size() != 4) {
    throw std::invalid_argument(std::string(op) + ": expected 4-D input and weights, got " + shape_str(x) + " and " +
                                shape_str(w));
  }
  const int64_t g = p.groups;
  if (g < 1 || x[1] % g != 0 || w[0] % g != 0 || w[1] * g != x[1]) {
    throw std::invalid_argument(std::string(op) + ": input " + shape_str(x) + " and weights " + shape_str(w) +
                                " do not match groups=" + std::to_string(g));
  }
  if (p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 || p.pad_h < 0 || p.pad_w < 0) {
    throw std::invalid_argument(std::string(op) + ": bad stride/dilation/padding");
  }
  ConvGeom c{x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], 0, 0};
  c.oh = conv_out_size(x[2], w[2], p.stride_h, p.pad_h, p.dilation_h);
  c.ow = conv_out_size(x[3], w[3], p.stride_w, p.pad_w, p.dilation_w);
  return c;
}

std::string plan_key(Pass pass, const ConvGeom& g, const Conv2dParams& p, bool tf32) {
  std::ostringstream k;
  k << static_cast<int>(pass) << '|' << g.n << ',' << g.c << ',' << g.h << ',' << g.w << '|' << g.o << ',' << g.cg
    << ',' << g.kh << ',' << g.kw << '|' << p.stride_h << ',' << p.stride_w << ',' << p.pad_h << ',' << p.pad_w << ','
    << p.dilation_h << ',' << p.dilation_w << ',' << p.groups << '|' << tf32;
  return k.str();
}

// Descriptors for the geometry; the math type is what the algorithm search may use.
void describe(ConvPlan& plan, const ConvGeom& g, const Conv2dParams& p, bool tf32, const char* op) {
  set_nchw(plan.x, g.n, g.c, g.h, g.w, op);
  set_nchw(plan.y, g.n, g.o, g.oh, g.ow, op);
  TS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                            to_int(g.o, op, "output channels"), to_int(g.cg, op, "input channels"),
                                            to_int(g.kh, op, "kernel height"), to_int(g.kw, op, "kernel width")));
  TS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      plan.conv.get(), to_int(p.pad_h, op, "padding"), to_int(p.pad_w, op, "padding"), to_int(p.stride_h, op, "stride"),
      to_int(p.stride_w, op, "stride"), to_int(p.dilation_h, op, "dilation"), to_int(p.dilation_w, op, "dilation"),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TS_CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan.conv.get(), to_int(p.groups, op, "groups")));
  // TF32 allowed: the default math (TF32 tensor cores for fp32 on Ampere and later).
  // Not allowed: FMA only. (TENSOR_OP_MATH_ALLOW_CONVERSION would allow fp16 down-conversion.)
  TS_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.get(), tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  int on = 0, oc = 0, ohh = 0, oww = 0;
  TS_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(plan.conv.get(), plan.x.get(), plan.w.get(), &on, &oc, &ohh, &oww));
  if (on != g.n || oc != g.o || ohh != g.oh || oww != g.ow) {
    throw std::logic_error(std::string(op) + ": cuDNN's output shape [" + std::to_string(on) + ", " +
                           std::to_string(oc) + ", " + std::to_string(ohh) + ", " + std::to_string(oww) +
                           "] differs from ours");
  }
}

// A workspace for the algorithm search: as much as the cap, less when memory is short.
Tensor search_workspace(int device, size_t& bytes) {
  for (size_t b : {kMaxConvWorkspaceBytes, kMaxConvWorkspaceBytes / 4, kMaxConvWorkspaceBytes / 16}) {
    try {
      Tensor t = workspace_tensor(static_cast<int64_t>(b), device);
      bytes = b;
      return t;
    } catch (const OutOfMemoryError&) {
      // try a smaller one
    }
  }
  bytes = 0;
  return Tensor();
}

// Without TF32 the descriptor is FMA math, and a candidate reported as tensor-op math is not taken.
bool math_usable(cudnnMathType_t math, bool tf32) {
  return tf32 || (math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

// Picks the fastest successful candidate within the workspace. With TF32 allowed the search
// ran with the default math type and the call uses the math type the winner was timed with
// (as cuDNN asks). Without TF32 the search ran with FMA math; the descriptor stays FMA and
// candidates reported as tensor-op math are skipped.
template <class Perf>
void choose(ConvPlan& plan, const Perf* perf, int count, size_t ws_bytes, bool tf32, const char* op) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > ws_bytes) continue;
    if (!math_usable(r.mathType, tf32)) continue;
    plan.algo = static_cast<int>(r.algo);
    plan.workspace = r.memory;
    plan.math = tf32 ? r.mathType : CUDNN_FMA_MATH;
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.get(), plan.math));
    return;
  }
  throw std::runtime_error(std::string(op) + ": cuDNN found no usable algorithm (" + std::to_string(count) +
                           " candidates, workspace cap " + format_bytes(static_cast<int64_t>(ws_bytes)) +
                           (tf32 ? "" : ", FP32 math without TF32") + ")");
}

// The workspace cuDNN says `algo` needs with the descriptor's current math type; SIZE_MAX when
// it refuses the algorithm for these descriptors.
size_t workspace_of(cudnnHandle_t h, const ConvPlan& plan, Pass pass, int algo) {
  size_t bytes = 0;
  cudnnStatus_t rc = CUDNN_STATUS_SUCCESS;
  switch (pass) {
    case Pass::forward:
      rc = cudnnGetConvolutionForwardWorkspaceSize(h, plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case Pass::backward_data:
      rc = cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan.w.get(), plan.y.get(), plan.conv.get(), plan.x.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case Pass::backward_weights:
      rc = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, plan.x.get(), plan.y.get(), plan.conv.get(), plan.w.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return rc == CUDNN_STATUS_SUCCESS ? bytes : SIZE_MAX;
}

// The first of cuDNN's heuristic candidates (best predicted first) that the same rules as
// choose() allow: the workspace cap and, without TF32, no tensor-op math. The heuristics run
// nothing, so the workspace is asked of cuDNN for the math type the call will use rather than
// read from the candidate.
template <class Perf>
void choose_heuristic(ConvPlan& plan, cudnnHandle_t h, Pass pass, const Perf* perf, int count, bool tf32,
                      const char* op) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || !math_usable(r.mathType, tf32)) continue;
    const cudnnMathType_t math = tf32 ? r.mathType : CUDNN_FMA_MATH;
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.get(), math));
    const size_t ws = workspace_of(h, plan, pass, static_cast<int>(r.algo));
    if (ws > kMaxConvWorkspaceBytes) continue;
    plan.algo = static_cast<int>(r.algo);
    plan.workspace = ws;
    plan.math = math;
    return;
  }
  throw std::runtime_error(std::string(op) + ": cuDNN's heuristics offered no usable algorithm (" +
                           std::to_string(count) + " candidates, workspace cap " +
                           format_bytes(static_cast<int64_t>(kMaxConvWorkspaceBytes)) +
                           (tf32 ? "" : ", FP32 math without TF32") + ")");
}

// Times every candidate with the call's own buffers (the search writes the output, which the
// real call then overwrites).
void search(ConvPlan& plan, CudaBackend::Impl& im, cudnnHandle_t h, Pass pass, bool tf32, const void* a, const void* b,
            void* out, const char* op) {
  size_t ws_bytes = 0;
  Tensor ws = search_workspace(im.device, ws_bytes);
  void* ws_ptr = ws.defined() ? ws.data() : nullptr;
  int returned = 0;
  switch (pass) {
    case Pass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, plan.x.get(), a, plan.w.get(), b, plan.conv.get(),
                                                            plan.y.get(), out, static_cast<int>(perf.size()), &returned,
                                                            perf.data(), ws_ptr, ws_bytes));
      choose(plan, perf.data(), returned, ws_bytes, tf32, op);
      break;
    }
    case Pass::backward_data: {  // a = w, b = dy, out = dx
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, plan.w.get(), a, plan.y.get(), b, plan.conv.get(),
                                                                 plan.x.get(), out, static_cast<int>(perf.size()),
                                                                 &returned, perf.data(), ws_ptr, ws_bytes));
      choose(plan, perf.data(), returned, ws_bytes, tf32, op);
      break;
    }
    case Pass::backward_weights: {  // a = x, b = dy, out = dw
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, plan.x.get(), a, plan.y.get(), b, plan.conv.get(),
                                                                   plan.w.get(), out, static_cast<int>(perf.size()),
                                                                   &returned, perf.data(), ws_ptr, ws_bytes));
      choose(plan, perf.data(), returned, ws_bytes, tf32, op);
      break;
    }
  }
  plan.searched = true;
}

// cuDNN's heuristics' pick: nothing runs on the device. Room for two entries per algorithm: the
// heuristics may list an algorithm with and without tensor-op math.
void from_heuristics(ConvPlan& plan, cudnnHandle_t h, Pass pass, bool tf32, const char* op) {
  int returned = 0;
  switch (pass) {
    case Pass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x.get(), plan.w.get(), plan.conv.get(),
                                                            plan.y.get(), static_cast<int>(perf.size()), &returned,
                                                            perf.data()));
      choose_heuristic(plan, h, pass, perf.data(), returned, tf32, op);
      break;
    }
    case Pass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, 2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w.get(), plan.y.get(), plan.conv.get(),
                                                                 plan.x.get(), static_cast<int>(perf.size()), &returned,
                                                                 perf.data()));
      choose_heuristic(plan, h, pass, perf.data(), returned, tf32, op);
      break;
    }
    case Pass::backward_weights: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, 2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      TS_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, plan.x.get(), plan.y.get(), plan.conv.get(),
                                                                   plan.w.get(), static_cast<int>(perf.size()),
                                                                   &returned, perf.data()));
      choose_heuristic(plan, h, pass, perf.data(), returned, tf32, op);
      break;
    }
  }
}

// The cached plan of `key`; on a miss, searched while autotuning is on, else from the
// heuristics. A heuristic plan met again while autotuning is on is searched and replaced, so
// that it is not kept for good because its shape first came in a timed iteration.
std::shared_ptr<ConvPlan> get_plan(CudaBackend::Impl& im, Env& env, Pass pass, const ConvGeom& g, const Conv2dParams& p,
                                   const void* a, const void* b, void* out, const char* op) {
  const bool tf32 = tf32_allowed();
  const bool searching = autotune();
  const std::string key = plan_key(pass, g, p, tf32);
  {
    std::lock_guard<std::mutex> lock(im.plans_mutex);
    auto it = im.conv_plans.find(key);
    if (it != im.conv_plans.end() && (it->second->searched || !searching)) return it->second;
  }
  auto plan = std::make_shared<ConvPlan>();
  describe(*plan, g, p, tf32, op);
  cudnnHandle_t h = env.ctx.cudnn();
  if (searching) {
    search(*plan, im, h, pass, tf32, a, b, out, op);
    ++im.plans_searched;
    // Made while off: autotuning was turned off before the search ended (a heuristic plan is
    // made while off by definition).
    if (!autotune()) ++im.searched_while_off;
  } else {
    from_heuristics(*plan, h, pass, tf32, op);
    ++im.plans_heuristic;
    ++im.heuristic_while_off;
  }
  std::lock_guard<std::mutex> lock(im.plans_mutex);
  auto [it, inserted] = im.conv_plans.emplace(key, plan);
  if (!inserted && plan->searched && !it->second->searched) it->second = plan;
  return it->second;
}

const char* fwd_algo_name(int a) {
  switch (static_cast<cudnnConvolutionFwdAlgo_t>(a)) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* bwd_data_algo_name(int a) {
  switch (static_cast<cudnnConvolutionBwdDataAlgo_t>(a)) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* bwd_filter_algo_name(int a) {
  switch (static_cast<cudnnConvolutionBwdFilterAlgo_t>(a)) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
  }
}

// The call's workspace (nullptr when the algorithm needs none).
Tensor call_workspace(const ConvPlan& plan, int device) {
  return plan.workspace > 0 ? workspace_tensor(static_cast<int64_t>(plan.workspace), device) : Tensor();
}

}  // namespace

Tensor CudaBackend::conv2d_forward(const Tensor& x_in, const Tensor& w, const Tensor* bias, const Conv2dParams& p) {
  const char* op = "conv2d";
  check_on(x_in, device_, op, "input");
  check_on(w, device_, op, "weights");
  if (!w.layout().is_plain()) throw std::invalid_argument("conv2d: weights must be plain OIHW");
  const bool has_bias = bias && bias->defined();
  if (has_bias) {
    check_on(*bias, device_, op, "bias");
    if (bias->dim() != 1 || bias->size(0) != w.size(0) || !bias->layout().is_plain()) {
      throw std::invalid_argument("conv2d: bias " + shape_str(bias->shape()) + " for weights " + shape_str(w.shape()));
    }
  }
  const ConvGeom g = conv_geom(x_in.shape(), w.shape(), p, op);
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  Tensor y = Tensor::empty({g.n, g.o, g.oh, g.ow}, x.device());
  if (y.numel() == 0) return y;
  std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
  auto plan = get_plan(*impl_, env, Pass::forward, g, p, x.data(), w.data(), y.data(), op);
  Tensor ws = call_workspace(*plan, device_);
  const float one = 1.0f, zero = 0.0f;
  TS_CUDNN_CHECK(cudnnConvolutionForward(env.ctx.cudnn(), &one, plan->x.get(), x.data(), plan->w.get(), w.data(),
                                         plan->conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(plan->algo),
                                         ws.defined() ? ws.data() : nullptr, plan->workspace, &zero, plan->y.get(),
                                         y.data()));
  if (has_bias) TS_CUDA_CHECK(kernels::add_channel_bias(y.data(), bias->data(), g.n, g.o, g.oh * g.ow, env.stream));
  return y;
}

Tensor CudaBackend::conv2d_backward_data(const Tensor& dy_in, const Tensor& w, const Shape& x_shape,
                                         const Layout& x_layout, const Conv2dParams& p) {
  const char* op = "conv2d_backward_data";
  check_on(dy_in, device_, op, "dy");
  check_on(w, device_, op, "weights");
  if (!w.layout().is_plain()) throw std::invalid_argument("conv2d_backward_data: weights must be plain OIHW");
  const ConvGeom g = conv_geom(x_shape, w.shape(), p, op);
  if (dy_in.shape() != Shape{g.n, g.o, g.oh, g.ow}) {
    throw std::invalid_argument("conv2d_backward_data: dy " + shape_str(dy_in.shape()) + " does not match output " +
                                shape_str({g.n, g.o, g.oh, g.ow}));
  }
  const Tensor dy = as_plain(*this, dy_in);
  Tensor dx;
  {
    Env env(*impl_);
    dx = Tensor::empty(x_shape, dy.device());
    if (dx.numel() > 0) {
      if (dy.numel() == 0) {
        TS_CUDA_CHECK(kernels::fill(dx.data(), dx.numel(), 0.0f, env.stream));
      } else {
        std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
        auto plan = get_plan(*impl_, env, Pass::backward_data, g, p, w.data(), dy.data(), dx.data(), op);
        Tensor ws = call_workspace(*plan, device_);
        const float one = 1.0f, zero = 0.0f;
        TS_CUDNN_CHECK(cudnnConvolutionBackwardData(
            env.ctx.cudnn(), &one, plan->w.get(), w.data(), plan->y.get(), dy.data(), plan->conv.get(),
            static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algo), ws.defined() ? ws.data() : nullptr, plan->workspace,
            &zero, plan->x.get(), dx.data()));
      }
    }
  }
  // A gradient comes back in the layout of what it is the gradient of.
  return x_layout.is_plain() ? dx : to_layout(dx, x_layout);
}

WeightGrads CudaBackend::conv2d_backward_weights(const Tensor& x_in, const Tensor& dy_in, const Shape& w_shape,
                                                 bool bias, const Conv2dParams& p, const Layout& w_layout) {
  const char* op = "conv2d_backward_weights";
  if (!w_layout.is_plain()) throw std::invalid_argument("conv2d_backward_weights: weights must be plain OIHW");
  check_on(x_in, device_, op, "input");
  check_on(dy_in, device_, op, "dy");
  const ConvGeom g = conv_geom(x_in.shape(), w_shape, p, op);
  if (dy_in.shape() != Shape{g.n, g.o, g.oh, g.ow}) {
    throw std::invalid_argument("conv2d_backward_weights: dy " + shape_str(dy_in.shape()) + " does not match output " +
                                shape_str({g.n, g.o, g.oh, g.ow}));
  }
  const Tensor x = as_plain(*this, x_in);
  const Tensor dy = as_plain(*this, dy_in);
  Env env(*impl_);
  WeightGrads r;
  r.dw = Tensor::empty(w_shape, x.device());
  if (bias) r.dbias = Tensor::empty({g.o}, x.device());
  if (r.dw.numel() > 0) {
    if (x.numel() == 0 || dy.numel() == 0) {
      TS_CUDA_CHECK(kernels::fill(r.dw.data(), r.dw.numel(), 0.0f, env.stream));
    } else {
      std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
      auto plan = get_plan(*impl_, env, Pass::backward_weights, g, p, x.data(), dy.data(), r.dw.data(), op);
      Tensor ws = call_workspace(*plan, device_);
      const float one = 1.0f, zero = 0.0f;
      TS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          env.ctx.cudnn(), &one, plan->x.get(), x.data(), plan->y.get(), dy.data(), plan->conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algo), ws.defined() ? ws.data() : nullptr, plan->workspace,
          &zero, plan->w.get(), r.dw.data()));
    }
  }
  if (bias && g.o > 0) {
    const int64_t hw = g.oh * g.ow;
    Tensor partials =
        workspace_tensor(kernels::channel_partials(g.n, g.o, hw) * static_cast<int64_t>(sizeof(double)), device_);
    TS_CUDA_CHECK(kernels::channel_sums(dy.data(), nullptr, nullptr, nullptr, g.n, g.o, hw,
                                        reinterpret_cast<double*>(partials.data()), r.dbias.data(), nullptr,
                                        env.stream));
  }
  return r;
}

ConvPlanStats CudaBackend::conv_plan_stats() const {
  return {impl_->plans_searched.load(), impl_->plans_heuristic.load(), impl_->searched_while_off.load(),
          impl_->heuristic_while_off.load()};
}

size_t CudaBackend::cached_conv_plans() const {
  std::lock_guard<std::mutex> lock(impl_->plans_mutex);
  return impl_->conv_plans.size();
}

void CudaBackend::clear_cache() {
  std::lock_guard<std::mutex> lock(impl_->plans_mutex);
  impl_->conv_plans.clear();
}

std::string CudaBackend::conv_algo_info(const Shape& x_shape, const Shape& w_shape, const Conv2dParams& p, int which) {
  if (which < 0 || which > 2) throw std::invalid_argument("conv_algo_info: which must be 0, 1 or 2");
  const ConvGeom g = conv_geom(x_shape, w_shape, p, "conv_algo_info");
  const Device dev = cuda_device(device_);
  // Runs the pass once on zeros so that its plan exists, then reads the plan.
  Tensor x = Tensor::zeros(x_shape, dev), w = Tensor::zeros(w_shape, dev);
  Tensor dy = Tensor::zeros({g.n, g.o, g.oh, g.ow}, dev);
  const Pass pass = static_cast<Pass>(which);
  switch (pass) {
    case Pass::forward: conv2d_forward(x, w, nullptr, p); break;
    case Pass::backward_data: conv2d_backward_data(dy, w, x_shape, Layout::plain(), p); break;
    case Pass::backward_weights: conv2d_backward_weights(x, dy, w_shape, false, p, Layout::plain()); break;
  }
  std::shared_ptr<ConvPlan> plan;
  {
    std::lock_guard<std::mutex> lock(impl_->plans_mutex);
    auto it = impl_->conv_plans.find(plan_key(pass, g, p, tf32_allowed()));
    if (it == impl_->conv_plans.end()) return "no plan";
    plan = it->second;
  }
  const char* names[] = {"fwd", "bwd_data", "bwd_weights"};
  const char* algo = pass == Pass::forward         ? fwd_algo_name(plan->algo)
                     : pass == Pass::backward_data ? bwd_data_algo_name(plan->algo)
                                                   : bwd_filter_algo_name(plan->algo);
  return std::string(names[which]) + " algo " + std::to_string(plan->algo) + " (" + algo + "), workspace " +
         format_bytes(static_cast<int64_t>(plan->workspace)) + ", math " + std::to_string(static_cast<int>(plan->math));
}

}  // namespace ts::engine::cuda
