// Batch normalisation (training forward and backward on cuDNN, spatial mode; eval forward and
// the eval-mode gradient on our kernels) and pooling (our kernels: max pooling keeps argmax
// indices for backward, which receives no x).
#include <stdexcept>

#include "engine/cuda/cuda_common.h"

namespace ts::engine::cuda {

namespace {

struct BnDescs {
  TensorDesc x, param;
};

// [N, C, H, W] (or [N, C] as [N, C, 1, 1]) and the per-channel descriptor cuDNN derives.
void describe_bn(BnDescs& d, const Shape& s, const char* op) {
  set_nchw(d.x, s[0], s[1], s[2], s[3], op);
  TS_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d.param.get(), d.x.get(), CUDNN_BATCHNORM_SPATIAL));
}

Tensor channel_temp(int64_t c, int device) { return workspace_tensor(c * static_cast<int64_t>(sizeof(float)), device); }

}  // namespace

BatchNormStats CudaBackend::batch_norm_forward_train(const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
                                                     float eps) {
  const char* op = "batch_norm";
  check_on(x_in, device_, op, "input");
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(beta, device_, c, op, "beta");
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  BatchNormStats r;
  r.y = Tensor::empty(x.shape(), x.device());
  r.mean = Tensor::empty({c}, x.device());
  r.var = Tensor::empty({c}, x.device());
  if (x.numel() == 0) return r;
  BnDescs d;
  describe_bn(d, s, op);
  // cuDNN saves the batch mean and 1 / sqrt(var + eps); the contract wants the biased batch
  // variance, recovered from the latter (running statistics are the op layer's business, so
  // cuDNN's running-average outputs are not asked for).
  Tensor inv = channel_temp(c, device_);
  const float one = 1.0f, zero = 0.0f;
  {
    std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
    TS_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(env.ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                          d.x.get(), x.data(), d.x.get(), r.y.data(), d.param.get(),
                                                          gamma.data(), beta.data(), 1.0, nullptr, nullptr,
                                                          static_cast<double>(eps), r.mean.data(), inv.data()));
  }
  TS_CUDA_CHECK(kernels::var_from_inv_std(inv.data(), eps, r.var.data(), c, env.stream));
  return r;
}

Tensor CudaBackend::batch_norm_forward_eval(const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
                                            const Tensor& running_mean, const Tensor& running_var, float eps) {
  const char* op = "batch_norm";
  check_on(x_in, device_, op, "input");
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(beta, device_, c, op, "beta");
  check_channel_vec(running_mean, device_, c, op, "running_mean");
  check_channel_vec(running_var, device_, c, op, "running_var");
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  Tensor inv = channel_temp(c, device_);
  TS_CUDA_CHECK(kernels::inv_std(running_var.data(), eps, inv.data(), c, env.stream));
  TS_CUDA_CHECK(kernels::bn_eval_forward(x.data(), gamma.data(), beta.data(), running_mean.data(), inv.data(), y.data(),
                                         s[0], c, s[2] * s[3], env.stream));
  return y;
}

BatchNormGrads CudaBackend::batch_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& gamma,
                                                const Tensor& mean, const Tensor& var, float eps,
                                                bool use_global_stats) {
  const char* op = "batch_norm_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(x_in, device_, op, "input");
  if (dy_in.shape() != x_in.shape()) {
    throw std::invalid_argument("batch_norm_backward: dy " + shape_str(dy_in.shape()) + " vs x " +
                                shape_str(x_in.shape()));
  }
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1], hw = s[2] * s[3];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(mean, device_, c, op, "mean");
  check_channel_vec(var, device_, c, op, "var");
  const Tensor x = as_plain(*this, x_in);
  const Tensor dy = as_plain(*this, dy_in);
  BatchNormGrads r;
  {
    Env env(*impl_);
    r.dx = Tensor::empty(x.shape(), x.device());
    r.dgamma = Tensor::empty({c}, x.device());
    r.dbeta = Tensor::empty({c}, x.device());
    Tensor inv = channel_temp(c, device_);
    TS_CUDA_CHECK(kernels::inv_std(var.data(), eps, inv.data(), c, env.stream));
    if (!use_global_stats) {
      if (x.numel() > 0) {
        BnDescs d;
        describe_bn(d, s, op);
        const float one = 1.0f, zero = 0.0f;
        std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
        // mean and 1 / sqrt(var + eps) from the forward pass, as cuDNN's saved statistics.
        TS_CUDNN_CHECK(cudnnBatchNormalizationBackward(
            env.ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d.x.get(), x.data(), d.x.get(),
            dy.data(), d.x.get(), r.dx.data(), d.param.get(), gamma.data(), r.dgamma.data(), r.dbeta.data(),
            static_cast<double>(eps), mean.data(), inv.data()));
      } else {
        TS_CUDA_CHECK(kernels::fill(r.dgamma.data(), c, 0.0f, env.stream));
        TS_CUDA_CHECK(kernels::fill(r.dbeta.data(), c, 0.0f, env.stream));
      }
    } else {
      // Eval mode: mean and var are constants, so y is affine in x:
      // dx = dy gamma inv_std, dgamma = sum dy (x - mean) inv_std, dbeta = sum dy.
      TS_CUDA_CHECK(
          kernels::bn_eval_backward_data(dy.data(), gamma.data(), inv.data(), r.dx.data(), s[0], c, hw, env.stream));
      Tensor partials =
          workspace_tensor(kernels::channel_partials(s[0], c, hw) * static_cast<int64_t>(sizeof(double)), device_);
      TS_CUDA_CHECK(kernels::channel_sums(dy.data(), x.data(), mean.data(), inv.data(), s[0], c, hw,
                                          reinterpret_cast<double*>(partials.data()), r.dbeta.data(), r.dgamma.data(),
                                          env.stream));
    }
  }
  if (!x_in.layout().is_plain()) r.dx = to_layout(r.dx, x_in.layout());
  return r;
}

// ---------------------------------------------------------------- pooling

namespace {

kernels::PoolGeom pool_geom(const Shape& x, const Pool2dParams& p, const char* op) {
  if (x.size() != 4) throw std::invalid_argument(std::string(op) + ": expected a 4-D input, got " + shape_str(x));
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 ||
      p.pad_h * 2 > p.kernel_h || p.pad_w * 2 > p.kernel_w) {
    throw std::invalid_argument(std::string(op) +
                                ": bad kernel/stride/padding (padding must be at most half the kernel)");
  }
  kernels::PoolGeom g;
  g.planes = x[0] * x[1];
  g.h = to_int(x[2], op, "height");
  g.w = to_int(x[3], op, "width");
  g.oh = to_int(conv_out_size(x[2], p.kernel_h, p.stride_h, p.pad_h, 1), op, "output height");
  g.ow = to_int(conv_out_size(x[3], p.kernel_w, p.stride_w, p.pad_w, 1), op, "output width");
  g.kh = to_int(p.kernel_h, op, "kernel");
  g.kw = to_int(p.kernel_w, op, "kernel");
  g.sh = to_int(p.stride_h, op, "stride");
  g.sw = to_int(p.stride_w, op, "stride");
  g.ph = to_int(p.pad_h, op, "padding");
  g.pw = to_int(p.pad_w, op, "padding");
  to_int(static_cast<int64_t>(g.h) * g.w, op, "plane size");  // argmax indices are int32
  return g;
}

Shape pool_out_shape(const Shape& x, const kernels::PoolGeom& g) { return {x[0], x[1], g.oh, g.ow}; }

void check_dy(const Tensor& dy, const Shape& want, const char* op) {
  if (dy.shape() != want) {
    throw std::invalid_argument(std::string(op) + ": dy " + shape_str(dy.shape()) + " does not match output " +
                                shape_str(want));
  }
}

}  // namespace

PoolResult CudaBackend::max_pool2d_forward(const Tensor& x_in, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  check_on(x_in, device_, op, "input");
  const kernels::PoolGeom g = pool_geom(x_in.shape(), p, op);
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  PoolResult r;
  r.y = Tensor::empty(pool_out_shape(x.shape(), g), x.device());
  // int32 indices in the fp32 tensor's storage (same size); see cuda_backend.h.
  r.workspace = Tensor::empty({r.y.numel()}, x.device(), Layout::plain(), memprof::Category::workspace);
  TS_CUDA_CHECK(
      kernels::max_pool_forward(x.data(), g, r.y.data(), reinterpret_cast<int32_t*>(r.workspace.data()), env.stream));
  return r;
}

Tensor CudaBackend::max_pool2d_backward(const Tensor& dy_in, const Tensor& workspace, const Shape& x_shape,
                                        const Layout& x_layout, const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(workspace, device_, op, "workspace");
  const kernels::PoolGeom g = pool_geom(x_shape, p, op);
  check_dy(dy_in, pool_out_shape(x_shape, g), op);
  if (workspace.numel() < dy_in.numel()) {
    throw std::invalid_argument("max_pool2d_backward: workspace too small for " + shape_str(x_shape));
  }
  const Tensor dy = as_plain(*this, dy_in);
  Tensor dx;
  {
    Env env(*impl_);
    dx = Tensor::empty(x_shape, dy.device());
    TS_CUDA_CHECK(kernels::max_pool_backward(dy.data(), reinterpret_cast<const int32_t*>(workspace.data()), g,
                                             dx.data(), env.stream));
  }
  return x_layout.is_plain() ? dx : to_layout(dx, x_layout);
}

Tensor CudaBackend::avg_pool2d_forward(const Tensor& x_in, const Pool2dParams& p) {
  const char* op = "avg_pool2d";
  check_on(x_in, device_, op, "input");
  const kernels::PoolGeom g = pool_geom(x_in.shape(), p, op);
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  Tensor y = Tensor::empty(pool_out_shape(x.shape(), g), x.device());
  TS_CUDA_CHECK(kernels::avg_pool_forward(x.data(), g, p.count_include_pad, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::avg_pool2d_backward(const Tensor& dy_in, const Shape& x_shape, const Layout& x_layout,
                                        const Pool2dParams& p) {
  const char* op = "avg_pool2d_backward";
  check_on(dy_in, device_, op, "dy");
  const kernels::PoolGeom g = pool_geom(x_shape, p, op);
  check_dy(dy_in, pool_out_shape(x_shape, g), op);
  const Tensor dy = as_plain(*this, dy_in);
  Tensor dx;
  {
    Env env(*impl_);
    dx = Tensor::empty(x_shape, dy.device());
    TS_CUDA_CHECK(kernels::avg_pool_backward(dy.data(), g, p.count_include_pad, dx.data(), env.stream));
  }
  return x_layout.is_plain() ? dx : to_layout(dx, x_layout);
}

}  // namespace ts::engine::cuda
