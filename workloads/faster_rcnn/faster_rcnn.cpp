#include "workloads/faster_rcnn/faster_rcnn.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#include "engine/ops.h"

namespace ts::workloads {

using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

// ---------------------------------------------------------------- presets

FasterRcnnConfig faster_rcnn_config(const std::string& preset) {
  FasterRcnnConfig c;  // full: the defaults
  if (preset == "full") {
    c.calibration_images = 4;  // about 3 s of forward each on two cores
  } else if (preset == "small") {
    c.backbone = "ResNet-50";
    c.blocks = {3, 4, 6};
    c.short_side = 224;
    c.max_side = 373;  // 1000 x 224 / 600
    c.synthetic_width = 298;
    c.anchor_sizes = {48, 96, 192};  // 128/256/512 x 224/600
    c.train_proposals = {2000, 500, 0.7f, 6};
    c.test_proposals = {1000, 150, 0.7f, 6};
    // layer4 runs on every RoI (1.46 GFLOP each, forward): 16 keeps the head's share of the
    // work near full's (about 60%) and the step near a second on two cores.
    c.roi_samples.batch = 16;
  } else if (preset == "tiny") {
    c.backbone = "ResNet (tiny)";
    c.blocks = {1, 1, 1};
    c.head_blocks = 1;
    c.base_width = 8;
    c.freeze_at = 0;  // trained from scratch: nothing pretrained to keep
    c.num_classes = 7;
    c.short_side = 72;
    c.max_side = 120;
    c.synthetic_width = 96;
    c.min_object = 0.2f;
    c.anchor_sizes = {16, 32, 64};  // 128/256/512 x 72/600, rounded
    c.rpn_targets.batch = 64;
    c.train_proposals = {300, 100, 0.7f, 2};
    c.test_proposals = {300, 50, 0.7f, 2};
    c.roi_samples.batch = 32;
    // Its RoIs span one to three cells of a 5x6 map: 7x7 samples them as densely as 14x14
    // samples full's, at a quarter of layer4's work.
    c.pooled_size = 7;
    c.base_lr = 0.08;  // per 16 images: 0.01 at the default batch of 2 (0.02 diverges at times)
    c.warmup = 20;
    c.default_batch = 2;
  } else {
    throw std::invalid_argument("faster_rcnn has no preset '" + preset + "' (tiny, small, full)");
  }
  return c;
}

engine::optim::LrSchedule faster_rcnn_lr_schedule(const FasterRcnnConfig& cfg, int64_t batch) {
  engine::optim::LrSchedule lr;
  lr.base_lr = cfg.base_lr * static_cast<double>(batch) / 16.0;
  lr.warmup_steps = cfg.warmup;
  return lr;
}

// ---------------------------------------------------------------- frozen batch norm

namespace {
thread_local bool g_calibrating = false;

Tensor buffer(int64_t n, float v, engine::Device device) {
  Tensor t = Tensor::empty({n}, device, engine::Layout::plain(), vocabulary::Category::other);
  if (!device.is_meta()) engine::backend_for(device).fill(t, v);
  return t;
}

// Named layers for ops outside any module (RoI pooling, losses).
struct NamedLayer {
  explicit NamedLayer(std::string n) : path(std::move(n)), id(engine::op_name(path)) {}
  engine::OwnerScope scope() const { return engine::OwnerScope(&path, id); }
  std::string path;
  profiler::StringId id;
};
}  // namespace

FrozenBnCalibration::FrozenBnCalibration() : saved_(g_calibrating) { g_calibrating = true; }
FrozenBnCalibration::~FrozenBnCalibration() { g_calibrating = saved_; }
bool FrozenBnCalibration::active() { return g_calibrating; }

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t channels, engine::Device device, float eps) : Module(device), eps_(eps) {
  weight_ = register_buffer("weight", buffer(channels, 1.0f, device));
  bias_ = register_buffer("bias", buffer(channels, 0.0f, device));
  mean_ = register_buffer("running_mean", buffer(channels, 0.0f, device));
  var_ = register_buffer("running_var", buffer(channels, 1.0f, device));
}

Tensor FrozenBatchNorm2d::forward(const Tensor& x) const {
  auto s = scope();
  if (g_calibrating) {
    engine::NoGradScope no_grad;
    engine::Backend& be = engine::backend_of(x);
    const engine::BatchNormStats st = be.batch_norm_forward_train(x, weight_, bias_, eps_);
    const std::vector<float> m = st.mean.to_vector(), v = st.var.to_vector();
    sum_mean_.resize(m.size(), 0.0);
    sum_square_.resize(m.size(), 0.0);
    ++passes_;
    std::vector<float> mean(m.size()), var(m.size());
    const auto p = static_cast<double>(passes_);
    for (size_t c = 0; c < m.size(); ++c) {
      sum_mean_[c] += m[c];
      sum_square_[c] += static_cast<double>(v[c]) + static_cast<double>(m[c]) * m[c];
      const double mu = sum_mean_[c] / p;
      mean[c] = static_cast<float>(mu);
      var[c] = static_cast<float>(std::max(sum_square_[c] / p - mu * mu, 0.0));
    }
    const auto n = static_cast<int64_t>(m.size());
    be.copy(Tensor::from_vector({n}, mean, x.device()), mean_);
    be.copy(Tensor::from_vector({n}, var, x.device()), var_);
  }
  return ops::batch_norm(x, weight_, bias_, mean_, var_, /*training=*/false, 0.0f, eps_);
}

// ---------------------------------------------------------------- backbone

DetectionBottleneck::DetectionBottleneck(int64_t in, int64_t width, int64_t stride, bool stride_in_1x1, float eps,
                                         engine::Device device, engine::Rng& rng)
    : Module(device) {
  const int64_t out = width * 4;
  const int64_t s1 = stride_in_1x1 ? stride : 1, s3 = stride_in_1x1 ? 1 : stride;
  conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(nn::conv_options(in, width, 1, s1), device, rng));
  bn1_ = register_module("bn1", std::make_shared<FrozenBatchNorm2d>(width, device, eps));
  conv2_ =
      register_module("conv2", std::make_shared<nn::Conv2d>(nn::conv_options(width, width, 3, s3, 1), device, rng));
  bn2_ = register_module("bn2", std::make_shared<FrozenBatchNorm2d>(width, device, eps));
  conv3_ = register_module("conv3", std::make_shared<nn::Conv2d>(nn::conv_options(width, out, 1), device, rng));
  bn3_ = register_module("bn3", std::make_shared<FrozenBatchNorm2d>(out, device, eps));
  if (stride != 1 || in != out) {
    down_conv_ = register_module("downsample.0",
                                 std::make_shared<nn::Conv2d>(nn::conv_options(in, out, 1, stride), device, rng));
    down_bn_ = register_module("downsample.1", std::make_shared<FrozenBatchNorm2d>(out, device, eps));
  }
}

Tensor DetectionBottleneck::forward(const Tensor& x) const {
  auto s = scope();
  Tensor y = ops::relu(bn1_->forward(conv1_->forward(x)));
  y = ops::relu(bn2_->forward(conv2_->forward(y)));
  y = bn3_->forward(conv3_->forward(y));
  const Tensor identity = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
  return ops::relu(ops::add(y, identity));
}

ResNetC4::ResNetC4(const FasterRcnnConfig& cfg, engine::Device device, engine::Rng& rng) : Module(device) {
  const int64_t w = cfg.base_width;
  conv1_ = register_module("conv1",
                           std::make_shared<nn::Conv2d>(nn::conv_options(cfg.in_channels, w, 7, 2, 3), device, rng));
  bn1_ = register_module("bn1", std::make_shared<FrozenBatchNorm2d>(w, device, cfg.bn_eps));
  int64_t in = w;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t width = w << stage;
    for (int64_t b = 0; b < cfg.blocks[static_cast<size_t>(stage)]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      auto block = register_module(
          name, std::make_shared<DetectionBottleneck>(in, width, stride, cfg.stride_in_1x1, cfg.bn_eps, device, rng));
      if (stage == 0 && cfg.freeze_at >= 2) {
        for (auto& p : block->parameters()) p.set_requires_grad(false);
      }
      blocks_.push_back(block);
      in = width * 4;
    }
  }
  if (cfg.freeze_at >= 1) {
    for (auto& p : conv1_->parameters()) p.set_requires_grad(false);
  }
}

Tensor ResNetC4::forward(const Tensor& x) const {
  Tensor y;
  {
    auto s = scope();
    y = ops::relu(bn1_->forward(conv1_->forward(x)));
    engine::Pool2dParams pool;
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride_h = pool.stride_w = 2;
    pool.pad_h = pool.pad_w = 1;
    y = ops::max_pool2d(y, pool);
  }
  for (const auto& b : blocks_) y = b->forward(y);
  return y;
}

// ---------------------------------------------------------------- heads

namespace {
// Detectron's head initialisation: Gaussian weights, zero biases.
void init_normal(const nn::Module& m, float stddev, engine::Rng& rng) {
  for (const auto& [name, p] : m.named_parameters()) {
    if (name.ends_with("bias")) {
      if (!p.device().is_meta()) engine::backend_of(p).fill(p, 0.0f);
    } else {
      rng.fill_normal(p, 0.0f, stddev);
    }
  }
}
}  // namespace

RpnHead::RpnHead(int64_t channels, int64_t anchors, engine::Device device, engine::Rng& rng) : Module(device) {
  conv_ = register_module(
      "conv", std::make_shared<nn::Conv2d>(nn::conv_options(channels, channels, 3, 1, 1, true), device, rng));
  cls_logits_ = register_module(
      "cls_logits", std::make_shared<nn::Conv2d>(nn::conv_options(channels, 2 * anchors, 1, 1, 0, true), device, rng));
  bbox_pred_ = register_module(
      "bbox_pred", std::make_shared<nn::Conv2d>(nn::conv_options(channels, 4 * anchors, 1, 1, 0, true), device, rng));
  init_normal(*this, 0.01f, rng);
}

RpnHead::Outputs RpnHead::forward(const Tensor& features) const {
  Tensor t;
  {
    auto s = scope();
    t = ops::relu(conv_->forward(features));
  }
  return {cls_logits_->forward(t), bbox_pred_->forward(t)};
}

RoiHead::RoiHead(const FasterRcnnConfig& cfg, engine::Device device, engine::Rng& rng) : Module(device) {
  int64_t in = cfg.trunk_channels();
  const int64_t width = cfg.base_width * 8;
  for (int64_t b = 0; b < cfg.head_blocks; ++b) {
    blocks_.push_back(register_module(
        "layer4." + std::to_string(b),
        std::make_shared<DetectionBottleneck>(in, width, b == 0 ? 2 : 1, cfg.stride_in_1x1, cfg.bn_eps, device, rng)));
    in = width * 4;
  }
  cls_score_ = register_module("cls_score", std::make_shared<nn::Linear>(in, cfg.num_classes, device, rng));
  bbox_pred_ = register_module("bbox_pred", std::make_shared<nn::Linear>(in, 4 * cfg.num_classes, device, rng));
  init_normal(*cls_score_, 0.01f, rng);
  init_normal(*bbox_pred_, 0.001f, rng);
}

RoiHead::Outputs RoiHead::forward(const Tensor& pooled) const {
  Tensor y = pooled;
  for (const auto& b : blocks_) y = b->forward(y);
  {
    auto s = scope();
    y = ops::global_avg_pool2d(y);
  }
  return {cls_score_->forward(y), bbox_pred_->forward(y)};
}

// ---------------------------------------------------------------- the detector

FasterRCNN::FasterRCNN(const FasterRcnnConfig& cfg, engine::Device device, uint64_t seed) : Module(device), cfg_(cfg) {
  if (cfg.num_classes < 2) throw std::invalid_argument("FasterRCNN: needs at least one foreground class");
  engine::Rng rng(seed);
  cell_anchors_ = frcnn::cell_anchors(cfg.anchor_sizes, cfg.anchor_ratios, static_cast<float>(cfg.feature_stride));
  backbone_ = register_module("backbone", std::make_shared<ResNetC4>(cfg, device, rng));
  rpn_ = register_module("rpn", std::make_shared<RpnHead>(cfg.trunk_channels(), cfg.num_anchors(), device, rng));
  roi_head_ = register_module("roi_head", std::make_shared<RoiHead>(cfg, device, rng));
}

std::vector<Tensor> FasterRCNN::trainable_parameters() const {
  std::vector<Tensor> out;
  for (const auto& p : parameters()) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

// What the shared trunk and the RPN give for a batch, plus host copies for the box machinery.
struct FasterRCNN::RpnPass {
  Tensor features;
  Tensor objectness_rows;                // [N * H * W * A, 2], rows ordered (n, y, x, a) like grid_anchors
  Tensor delta_rows;                     // [N * H * W * A, 4]
  std::vector<float> fg_scores, deltas;  // host: softmax foreground probability, deltas
  std::vector<Box> anchors;              // one image's H * W * A anchors
  int64_t per_image = 0;
};

FasterRCNN::RpnPass FasterRCNN::run_rpn(const Tensor& images) const {
  static const NamedLayer rpn_layer("rpn");
  RpnPass r;
  r.features = backbone_->forward(images);
  const RpnHead::Outputs out = rpn_->forward(r.features);
  const int64_t n = images.size(0), fh = r.features.size(2), fw = r.features.size(3);
  r.per_image = fh * fw * cfg_.num_anchors();
  {
    auto s = rpn_layer.scope();
    r.objectness_rows = ops::reshape(ops::permute(out.objectness, {0, 2, 3, 1}), {n * r.per_image, 2});
    r.delta_rows = ops::reshape(ops::permute(out.deltas, {0, 2, 3, 1}), {n * r.per_image, 4});
  }
  const std::vector<float> logits = r.objectness_rows.to_vector();
  r.fg_scores.resize(static_cast<size_t>(n * r.per_image));
  for (size_t i = 0; i < r.fg_scores.size(); ++i) {
    // Two-way softmax: p(fg) = 1 / (1 + exp(l_bg - l_fg)).
    r.fg_scores[i] = 1.0f / (1.0f + std::exp(logits[2 * i] - logits[2 * i + 1]));
  }
  r.deltas = r.delta_rows.to_vector();
  r.anchors = frcnn::grid_anchors(cell_anchors_, fh, fw, static_cast<float>(cfg_.feature_stride));
  return r;
}

Tensor FasterRCNN::pool(const Tensor& features, const Tensor& rois) const {
  static const NamedLayer pooler("roi_head.pooler");
  auto s = pooler.scope();
  const float scale = 1.0f / static_cast<float>(cfg_.feature_stride);
  if (cfg_.roi_pool) return ops::roi_pool(features, rois, cfg_.pooled_size, cfg_.pooled_size, scale);
  return ops::roi_align(features, rois, cfg_.pooled_size, cfg_.pooled_size, scale, cfg_.sampling_ratio, cfg_.aligned);
}

namespace {
// Host-built index, label and target tensors, on the model's device.
Tensor float_tensor(const std::vector<float>& v, const engine::Shape& shape, engine::Device device) {
  return Tensor::from_vector(shape, v, device);
}
std::vector<float> as_float(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }
}  // namespace

FasterRCNN::Losses FasterRCNN::forward_train(const Tensor& images, const std::vector<ImageTargets>& targets,
                                             engine::Rng& rng) const {
  static const NamedLayer loss_layer("loss"), proposals_layer("rpn.proposals");
  const int64_t n = images.size(0);
  if (static_cast<int64_t>(targets.size()) != n)
    throw std::invalid_argument("faster_rcnn: one target record per image");
  const RpnPass rpn = run_rpn(images);
  const frcnn::BoxCoder head_coder{cfg_.box_weights};
  const int64_t k = cfg_.num_classes;

  std::vector<int64_t> sampled, positives, fg_rows;
  std::vector<float> rpn_labels, rpn_targets, roi_rows, roi_labels, roi_targets;
  Losses out;
  {
    auto s = proposals_layer.scope();
    for (int64_t i = 0; i < n; ++i) {
      const ImageTargets& t = targets[static_cast<size_t>(i)];
      std::vector<ObjectBox> gt;
      std::vector<Box> gt_boxes;
      for (const auto& o : t.objects) {
        if (o.difficult) continue;  // as the paper's code: difficult objects are not trained on
        gt.push_back(o);
        gt_boxes.push_back(o.box);
      }
      const auto h = static_cast<float>(t.height), w = static_cast<float>(t.width);
      const int64_t base = i * rpn.per_image;
      const frcnn::AnchorTargets at = frcnn::assign_anchor_targets(rpn.anchors, gt_boxes, h, w, cfg_.rpn_targets, rng);
      for (size_t j = 0; j < at.sampled.size(); ++j) sampled.push_back(base + at.sampled[j]);
      for (int64_t a : at.positives) positives.push_back(base + a);
      rpn_labels.insert(rpn_labels.end(), at.labels.begin(), at.labels.end());
      rpn_targets.insert(rpn_targets.end(), at.box_targets.begin(), at.box_targets.end());

      const std::vector<Box> proposals = frcnn::generate_proposals(
          rpn.anchors, rpn.fg_scores.data() + base, rpn.deltas.data() + 4 * base, h, w, cfg_.train_proposals);
      frcnn::RoiSamples rs = frcnn::sample_rois(proposals, gt, cfg_.roi_samples, head_coder, rng);
      if (rs.rois.empty()) {
        // No proposal survived and no object: the whole image as one background RoI keeps the
        // head in the graph.
        rs.rois.push_back({0, 0, w, h});
        rs.labels.push_back(0);
      }
      for (size_t r = 0; r < rs.rois.size(); ++r) {
        const int64_t row = static_cast<int64_t>(roi_labels.size());
        if (static_cast<int64_t>(r) < rs.foreground) fg_rows.push_back(row * k + static_cast<int64_t>(rs.labels[r]));
        const Box& b = rs.rois[r];
        roi_rows.insert(roi_rows.end(), {static_cast<float>(i), b.x1, b.y1, b.x2, b.y2});
        roi_labels.push_back(rs.labels[r]);
      }
      roi_targets.insert(roi_targets.end(), rs.box_targets.begin(), rs.box_targets.end());
    }
  }
  const engine::Device dev = images.device();
  out.rpn_sampled = static_cast<int64_t>(sampled.size());
  out.rpn_positives = static_cast<int64_t>(positives.size());
  out.rois = static_cast<int64_t>(roi_labels.size());
  out.roi_foreground = static_cast<int64_t>(fg_rows.size());
  {
    auto s = loss_layer.scope();
    if (sampled.empty()) {
      out.rpn_objectness = ops::scale(ops::sum(rpn.objectness_rows), 0.0f);
    } else {
      const Tensor idx = float_tensor(as_float(sampled), {out.rpn_sampled}, dev);
      out.rpn_objectness = ops::softmax_cross_entropy(ops::index_select_rows(rpn.objectness_rows, idx),
                                                      float_tensor(rpn_labels, {out.rpn_sampled}, dev));
    }
    if (positives.empty()) {
      // Zero, but every RPN parameter still gets a (zero) gradient.
      out.rpn_box = ops::scale(ops::sum(rpn.delta_rows), 0.0f);
    } else {
      const Tensor idx = float_tensor(as_float(positives), {out.rpn_positives}, dev);
      out.rpn_box = ops::smooth_l1_loss(ops::index_select_rows(rpn.delta_rows, idx),
                                        float_tensor(rpn_targets, {out.rpn_positives, 4}, dev), Tensor(), cfg_.rpn_beta,
                                        static_cast<float>(std::max<int64_t>(out.rpn_sampled, 1)));
    }
  }
  const Tensor rois = float_tensor(roi_rows, {out.rois, 5}, dev);
  const RoiHead::Outputs head = roi_head_->forward(pool(rpn.features, rois));
  {
    auto s = loss_layer.scope();
    out.roi_class = ops::softmax_cross_entropy(head.class_logits, float_tensor(roi_labels, {out.rois}, dev));
    if (fg_rows.empty()) {
      out.roi_box = ops::scale(ops::sum(head.box_deltas), 0.0f);
    } else {
      // Class-specific regression: row r * K + class of [R * K, 4].
      const Tensor per_class = ops::reshape(head.box_deltas, {out.rois * k, 4});
      const Tensor idx = float_tensor(as_float(fg_rows), {out.roi_foreground}, dev);
      out.roi_box = ops::smooth_l1_loss(ops::index_select_rows(per_class, idx),
                                        float_tensor(roi_targets, {out.roi_foreground, 4}, dev), Tensor(),
                                        cfg_.head_beta, static_cast<float>(out.rois));
    }
    out.total = ops::add(ops::add(out.rpn_objectness, out.rpn_box), ops::add(out.roi_class, out.roi_box));
  }
  return out;
}

std::vector<std::vector<frcnn::Detection>> FasterRCNN::detect(const Tensor& images,
                                                              const std::vector<ImageTargets>& info) const {
  static const NamedLayer proposals_layer("rpn.proposals"), post_layer("roi_head.postprocess");
  const int64_t n = images.size(0);
  if (static_cast<int64_t>(info.size()) != n) throw std::invalid_argument("faster_rcnn: one image record per image");
  const RpnPass rpn = run_rpn(images);
  std::vector<std::vector<Box>> proposals(static_cast<size_t>(n));
  std::vector<float> roi_rows;
  {
    auto s = proposals_layer.scope();
    for (int64_t i = 0; i < n; ++i) {
      const auto h = static_cast<float>(info[static_cast<size_t>(i)].height);
      const auto w = static_cast<float>(info[static_cast<size_t>(i)].width);
      const int64_t base = i * rpn.per_image;
      proposals[static_cast<size_t>(i)] = frcnn::generate_proposals(
          rpn.anchors, rpn.fg_scores.data() + base, rpn.deltas.data() + 4 * base, h, w, cfg_.test_proposals);
      for (const Box& b : proposals[static_cast<size_t>(i)])
        roi_rows.insert(roi_rows.end(), {static_cast<float>(i), b.x1, b.y1, b.x2, b.y2});
    }
  }
  std::vector<std::vector<frcnn::Detection>> out(static_cast<size_t>(n));
  const auto total = static_cast<int64_t>(roi_rows.size() / 5);
  if (total == 0) return out;
  const RoiHead::Outputs head =
      roi_head_->forward(pool(rpn.features, float_tensor(roi_rows, {total, 5}, images.device())));
  auto s = post_layer.scope();
  const std::vector<float> logits = head.class_logits.to_vector(), deltas = head.box_deltas.to_vector();
  const int64_t k = cfg_.num_classes;
  const frcnn::BoxCoder coder{cfg_.box_weights};
  int64_t row = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto h = static_cast<float>(info[static_cast<size_t>(i)].height);
    const auto w = static_cast<float>(info[static_cast<size_t>(i)].width);
    const auto& props = proposals[static_cast<size_t>(i)];
    std::vector<std::vector<Box>> boxes(static_cast<size_t>(k));
    std::vector<std::vector<float>> scores(static_cast<size_t>(k));
    for (size_t p = 0; p < props.size(); ++p, ++row) {
      const float* z = logits.data() + row * k;
      float m = z[0];
      for (int64_t c = 1; c < k; ++c) m = std::max(m, z[c]);
      double sum = 0;
      for (int64_t c = 0; c < k; ++c) sum += std::exp(static_cast<double>(z[c] - m));
      for (int64_t c = 1; c < k; ++c) {
        const auto prob = static_cast<float>(std::exp(static_cast<double>(z[c] - m)) / sum);
        if (!(prob > cfg_.score_threshold)) continue;
        const Box b = frcnn::clip_box(coder.decode(props[p], deltas.data() + (row * k + c) * 4), h, w);
        if (!std::isfinite(b.x1) || !std::isfinite(b.y1) || !std::isfinite(b.x2) || !std::isfinite(b.y2)) continue;
        boxes[static_cast<size_t>(c)].push_back(b);
        scores[static_cast<size_t>(c)].push_back(prob);
      }
    }
    auto& dets = out[static_cast<size_t>(i)];
    for (int64_t c = 1; c < k; ++c) {
      for (int64_t j : frcnn::nms(boxes[static_cast<size_t>(c)], scores[static_cast<size_t>(c)], cfg_.test_nms)) {
        dets.push_back({i, static_cast<int32_t>(c), scores[static_cast<size_t>(c)][static_cast<size_t>(j)],
                        boxes[static_cast<size_t>(c)][static_cast<size_t>(j)]});
      }
    }
    std::stable_sort(dets.begin(), dets.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
    if (static_cast<int64_t>(dets.size()) > cfg_.detections_per_image)
      dets.resize(static_cast<size_t>(cfg_.detections_per_image));
  }
  return out;
}

// ---------------------------------------------------------------- the workload

namespace {
engine::optim::SgdOptions sgd_options(const FasterRcnnConfig& cfg, int64_t batch) {
  engine::optim::SgdOptions o;
  o.lr = faster_rcnn_lr_schedule(cfg, batch);
  o.momentum = cfg.momentum;
  o.weight_decay = cfg.weight_decay;
  return o;
}
}  // namespace

FasterRcnnWorkload::FasterRcnnWorkload(std::shared_ptr<FasterRCNN> model, std::unique_ptr<DetectionSource> data,
                                       int64_t batch, uint64_t seed)
    : model_(std::move(model)),
      data_(std::move(data)),
      batch_(batch),
      sgd_(model_->trainable_parameters(), sgd_options(model_->config(), batch)),
      rng_(seed ^ 0xfa57e2) {
  if (batch <= 0) throw std::invalid_argument("batch size must be positive");
  if (data_->num_classes() + 1 != model_->config().num_classes) {
    throw std::invalid_argument("faster_rcnn: the model has " + std::to_string(model_->config().num_classes - 1) +
                                " foreground classes, the data " + std::to_string(data_->num_classes()));
  }
}

Batch FasterRcnnWorkload::next_batch() { return batch_from(*data_); }

Batch FasterRcnnWorkload::batch_from(DetectionSource& source) const {
  std::vector<DetectionImage> images;
  images.push_back(source.next_train());
  // The batch takes at least batch x the first image's pixels: checked before the other images
  // are made, which would otherwise fill memory one by one (a batch of 2^31 - 1 did).
  engine::cpu::check_host_buffer({batch_, 3, images[0].height, images[0].width}, sizeof(float),
                                 "detection image batch");
  for (int64_t i = 1; i < batch_; ++i) images.push_back(source.next_train());
  return make_detection_batch(images, model_->device());
}

void FasterRcnnWorkload::calibrate(const Batch& batch) { calibrate_from(batch, *data_); }

void FasterRcnnWorkload::calibrate_on(DetectionSource& images) {
  if (calibrated_) return;
  calibrate_from(batch_from(images), images);
}

void FasterRcnnWorkload::calibrate_from(const Batch& batch, DetectionSource& more) {
  if (calibrated_) return;
  engine::NoGradScope no_grad;
  // Forwards: their feature maps are activations wherever this runs (at creation too).
  engine::CategoryScope category(vocabulary::Category::activations);
  FrozenBnCalibration calibration;
  engine::Rng rng(0xca11b);  // its own stream: calibrating does not shift the training samples
  model_->forward_train(batch.inputs, decode_detection_labels(batch.labels), rng);
  for (int64_t i = batch.samples; i < model_->config().calibration_images; ++i) {
    const Batch one = make_detection_batch({more.next_train()}, model_->device());
    model_->forward_train(one.inputs, decode_detection_labels(one.labels), rng);
  }
  calibrated_ = true;
}

Tensor FasterRcnnWorkload::forward_loss(const Batch& batch) {
  if (!calibrated_) calibrate(batch);
  last_ = model_->forward_train(batch.inputs, decode_detection_labels(batch.labels), rng_);
  return last_.total;
}

Quality FasterRcnnWorkload::evaluate(int64_t batches) {
  if (!calibrated_) calibrate(next_batch());
  if (batches < 0 && data_->heldout_size() < 0)
    throw std::invalid_argument("faster_rcnn: an unbounded held-out set needs a batch count");
  model_->train(false);
  engine::NoGradScope no_grad;
  std::vector<frcnn::Detection> detections;
  std::vector<std::vector<ObjectBox>> truth;
  int64_t index = 0;
  for (int64_t b = 0; batches < 0 || b < batches; ++b) {
    std::vector<DetectionImage> images;
    for (int64_t i = 0; i < batch_; ++i) {
      std::optional<DetectionImage> im = data_->heldout(index++);
      if (!im) break;
      images.push_back(std::move(*im));
    }
    if (images.empty()) break;
    const Batch batch = make_detection_batch(images, model_->device());
    const std::vector<ImageTargets> info = decode_detection_labels(batch.labels);
    const auto first = static_cast<int64_t>(truth.size());
    for (const auto& per_image : model_->detect(batch.inputs, info)) {
      for (auto d : per_image) {
        d.image += first;
        detections.push_back(d);
      }
    }
    for (const auto& t : info) truth.push_back(t.objects);
  }
  model_->train(true);
  const frcnn::MapResult m = frcnn::mean_average_precision(detections, truth, model_->config().num_classes - 1, 0.5f);
  return Quality{"mAP@0.5", m.map, "fraction", true};
}

// ---------------------------------------------------------------- registration

namespace {

PresetTable describe(const FasterRcnnConfig& c) {
  const auto num = table_number;  // short, for the many numbers below
  const auto& tp = c.train_proposals;
  const auto& ep = c.test_proposals;
  const auto& rs = c.roi_samples;
  return {
      {"architecture", "Faster R-CNN, ResNet C4 (Detectron R-C4): conv1..layer3 shared, layer4 in the RoI head"},
      {"backbone", c.backbone + ": bottlenecks " + table_list(c.blocks) + " (layer1..3) + " +
                       std::to_string(c.head_blocks) + " (layer4 on RoIs); stride-2 in the " +
                       (c.stride_in_1x1 ? "first 1x1 (MSRA)" : "3x3 (torchvision)")},
      {"base_width", std::to_string(c.base_width) + " (trunk out " + std::to_string(c.trunk_channels()) +
                         ", head out " + std::to_string(c.head_channels()) + ")"},
      {"batch_norm", "frozen everywhere (fixed affine, eps " + num(c.bn_eps) + "); statistics averaged over " +
                         std::to_string(c.calibration_images) +
                         " training images before training (no pretrained checkpoint)"},
      {"frozen_layers", c.freeze_at == 0   ? "none"
                        : c.freeze_at == 1 ? "conv1"
                                           : "conv1, layer1"},
      {"image_size", "shorter side " + std::to_string(c.short_side) + ", longer at most " + std::to_string(c.max_side) +
                         "; synthetic " + std::to_string(c.short_side) + "x" + std::to_string(c.synthetic_width)},
      {"anchors", std::to_string(c.num_anchors()) + ": sizes " + table_list(c.anchor_sizes) + " x ratios (h/w) " +
                      table_list(c.anchor_ratios) + ", stride " + std::to_string(c.feature_stride)},
      {"rpn_head", "3x3 conv " + std::to_string(c.trunk_channels()) + "->" + std::to_string(c.trunk_channels()) +
                       ", ReLU, 1x1 objectness (2 per anchor, softmax), 1x1 deltas (4 per anchor)"},
      {"rpn_targets", "IoU >= " + num(c.rpn_targets.positive_iou) + " positive (and each box's best anchor), < " +
                          num(c.rpn_targets.negative_iou) + " negative, border anchors ignored; " +
                          std::to_string(c.rpn_targets.batch) + " sampled per image, at most " +
                          num(c.rpn_targets.positive_fraction * 100) + "% positive"},
      {"proposals_train", "top " + std::to_string(tp.pre_nms_top_n) + " -> NMS " + num(tp.nms_threshold) + " -> top " +
                              std::to_string(tp.post_nms_top_n) + ", min side " + num(tp.min_size) + " px"},
      {"proposals_test", "top " + std::to_string(ep.pre_nms_top_n) + " -> NMS " + num(ep.nms_threshold) + " -> top " +
                             std::to_string(ep.post_nms_top_n) + ", min side " + num(ep.min_size) + " px"},
      {"roi_sampling", std::to_string(rs.batch) + " per image (proposals + ground truth), " +
                           num(rs.foreground_fraction * 100) + "% foreground at IoU >= " + num(rs.foreground_iou) +
                           ", background IoU in [" + num(rs.background_iou_lo) + ", " + num(rs.background_iou_hi) +
                           ")"},
      {"roi_pooler", std::string(c.roi_pool ? "RoIPool" : "RoIAlign") + " " + std::to_string(c.pooled_size) + "x" +
                         std::to_string(c.pooled_size) + ", scale 1/" + std::to_string(c.feature_stride) +
                         (c.roi_pool ? ""
                                     : ", sampling ratio " + std::to_string(c.sampling_ratio) +
                                           (c.aligned ? ", aligned" : ", aligned=False"))},
      {"roi_head", "layer4 -> global avg pool -> cls_score (" + std::to_string(c.num_classes) + ") and bbox_pred (" +
                       std::to_string(4 * c.num_classes) + ", class-specific)"},
      {"box_coder", "(dx, dy, dw, dh); RPN weights " + table_list(frcnn::BoxCoder{}.weights) + "; head weights " +
                        table_list(c.box_weights)},
      // The RPN's beta as Detectron writes it, 1/9.
      {"losses", "RPN: CE over sampled anchors + smooth-L1 (beta 1/" + num(1 / c.rpn_beta) +
                     ") / sampled; head: CE over RoIs + smooth-L1 (beta " + num(c.head_beta) + ") / RoIs"},
      {"test", "score > " + num(c.score_threshold) + ", per-class NMS " + num(c.test_nms) + ", at most " +
                   std::to_string(c.detections_per_image) + " per image; quality mAP@0.5 (VOC2010+ all-point)"},
      {"num_classes", std::to_string(c.num_classes) + " (background included)"},
      {"batch_size", std::to_string(c.default_batch) + " image(s)"},
      {"optimizer", "SGD momentum " + num(c.momentum) + ", weight decay " + num(c.weight_decay) +
                        " (biases too), frozen layers excluded"},
      {"learning_rate",
       num(c.base_lr) + " x batch/16 after a " + std::to_string(c.warmup) + "-iteration linear warm-up, constant"}};
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const FasterRcnnConfig&)) {
  const FasterRcnnConfig c = faster_rcnn_config(name);
  return {name, summary(c), c.default_batch, describe(c)};
}

std::string shorter_side(const FasterRcnnConfig& c) { return "shorter side " + std::to_string(c.short_side); }

}  // namespace

WorkloadSpec faster_rcnn_spec() {
  WorkloadSpec s;
  s.name = "faster_rcnn";
  s.domain = "object detection";
  s.units = {"images", "", "images", false};
  s.description = "Faster R-CNN, ResNet C4 backbone, RPN + RoIAlign head, VOC classes; quality mAP@0.5";
  s.presets = {make_preset("tiny",
                           [](const FasterRcnnConfig& c) {
                             return std::to_string(c.short_side) + "x" + std::to_string(c.synthetic_width) +
                                    " input, widths /8, 1 block per stage, " + std::to_string(c.num_classes - 1) +
                                    " synthetic classes: tests";
                           }),
               make_preset("small",
                           [](const FasterRcnnConfig& c) {
                             return c.backbone + " C4, " + shorter_side(c) + ", " +
                                    std::to_string(c.roi_samples.batch) + " RoIs per image: CPU benchmarking";
                           }),
               make_preset("full", [](const FasterRcnnConfig& c) {
                 return c.backbone + " C4, " + shorter_side(c) + " (max " + std::to_string(c.max_side) + "), " +
                        std::to_string(c.num_classes) + " classes, batch " + std::to_string(c.default_batch) +
                        ": the published model";
               })};
  s.check = [](const WorkloadConfig& wc) {
    faster_rcnn_config(wc.preset);
    data_shard(wc, "faster_rcnn");
    check_detection_source(wc.data);
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    FasterRcnnConfig cfg = faster_rcnn_config(wc.preset);
    const DataShard shard = data_shard(wc, "faster_rcnn");
    const int64_t batch = *wc.batch;
    SyntheticDetectionOptions so;
    so.height = cfg.short_side;
    so.width = cfg.synthetic_width;
    so.classes = cfg.num_classes - 1;
    so.min_object = cfg.min_object;
    so.max_object = cfg.max_object;
    VocOptions vo;
    vo.short_side = cfg.short_side;
    vo.max_side = cfg.max_side;
    std::unique_ptr<DetectionSource> data = make_detection_source(wc.data, so, vo, wc.seed, shard);
    cfg.num_classes = data->num_classes() + 1;
    auto model = std::make_shared<FasterRCNN>(cfg, wc.device, wc.seed);
    auto w = std::make_unique<FasterRcnnWorkload>(model, std::move(data), batch, wc.seed);
    // Calibrating is setting up, not training: done here, its calibration_images forwards
    // neither lengthen the first iteration nor count in its per-layer activation bytes.
    // With several ranks, every rank calibrates on the unsharded stream (the images world size 1
    // calibrates on): the frozen statistics are the same on every rank, like the parameters.
    if (!wc.device.is_meta()) {
      if (shard.whole()) {
        w->calibrate(w->next_batch());
      } else {
        const std::unique_ptr<DetectionSource> whole = make_detection_source(wc.data, so, vo, wc.seed);
        w->calibrate_on(*whole);
      }
    }
    return w;
  };
  return s;
}

}  // namespace ts::workloads
