// The RoI family's ops (Faster R-CNN): roi_align and roi_pool. RoI coordinates are data, not
// parameters: they get no gradient, which is Faster R-CNN's approximate joint training.
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

void check_rois_arg(const Tensor& x, const Tensor& rois, const char* op) {
  check_defined(x, op, "input");
  check_defined(rois, op, "rois");
  check_same_device(x, rois, op);
  if (x.dim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x.shape()));
  if (rois.dim() != 2 || rois.size(1) != 5) fail(op, "rois must be [R, 5], got " + shape_str(rois.shape()));
  if (rois.requires_grad() && thread_context().grad_enabled) fail(op, "rois get no gradient; pass them detached");
}

struct RoiAlignBackward : Node {
  Tensor rois;
  Shape x_shape;
  float spatial_scale = 1;
  int64_t sampling_ratio = 2;
  bool aligned = false;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(g[0]).roi_align_backward(g[0], rois, x_shape, spatial_scale, sampling_ratio, aligned);
    add_op_work(other_work(bytes_of({&g[0], &rois, &dx})));
    mark_not_differentiable("roi_align_backward", {&g[0]}, {&dx});
    return {dx};
  }
  void release_saved() override { rois = Tensor(); }
  std::string name() const override { return "RoiAlignBackward"; }
};

struct RoiPoolBackward : Node {
  Tensor rois, argmax;
  Shape x_shape;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(g[0]).roi_pool_backward(g[0], argmax, rois, x_shape);
    add_op_work(other_work(bytes_of({&g[0], &argmax, &rois, &dx})));
    mark_not_differentiable("roi_pool_backward", {&g[0]}, {&dx});
    return {dx};
  }
  void release_saved() override { rois = argmax = Tensor(); }
  std::string name() const override { return "RoiPoolBackward"; }
};

}  // namespace

Tensor roi_align(const Tensor& x_in, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale,
                 int64_t sampling_ratio, bool aligned) {
  static const auto name = op_name("roi_align");
  check_rois_arg(x_in, rois, "roi_align");
  OpScope scope(name);
  // Blocked activations come back to plain here; the reorder's backward takes dx back.
  const Tensor x = to_layout(x_in, Layout::plain());
  const Tensor r = rois.detach();
  Tensor y = backend_of(x).roi_align_forward(x, r, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
  scope.add_work(other_work(bytes_of({&x, &r, &y})));
  if (needs_grad({&x})) {
    auto n = std::make_shared<RoiAlignBackward>();
    n->rois = r;
    n->x_shape = x.shape();
    n->spatial_scale = spatial_scale;
    n->sampling_ratio = sampling_ratio;
    n->aligned = aligned;
    connect(n, {&x}, {&y});
  }
  return y;
}

Tensor roi_pool(const Tensor& x_in, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale) {
  static const auto name = op_name("roi_pool");
  check_rois_arg(x_in, rois, "roi_pool");
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  const Tensor r = rois.detach();
  PoolResult res = backend_of(x).roi_pool_forward(x, r, pooled_h, pooled_w, spatial_scale);
  scope.add_work(other_work(bytes_of({&x, &r, &res.y, &res.workspace})));
  if (needs_grad({&x})) {
    auto n = std::make_shared<RoiPoolBackward>();
    n->rois = r;
    n->argmax = res.workspace;
    n->x_shape = x.shape();
    connect(n, {&x}, {&res.y});
  }
  return res.y;
}

}  // namespace ts::engine::ops
