#pragma once
// Faster R-CNN's host-side box machinery (no gradients): anchors, IoU, the (dx, dy, dw, dh)
// box coder, clipping, greedy NMS, proposal generation, anchor targets and RoI sampling.
// Boxes are continuous pixel coordinates (width = x2 - x1), see workloads/data/detection_data.h.
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/random.h"
#include "workloads/data/detection_data.h"

namespace ts::workloads::frcnn {

// --- anchors ---
// One anchor per (ratio, size), ratio-major as in the paper's code: ratio = height / width,
// area = size^2, centred on the first stride x stride cell (stride / 2, stride / 2).
std::vector<Box> cell_anchors(const std::vector<float>& sizes, const std::vector<float>& ratios, float stride);
// The cell anchors shifted to every feature-map cell, ordered (y, x, anchor): index
// (y * feat_w + x) * A + a, which is the row order of the RPN outputs permuted to NHWC.
std::vector<Box> grid_anchors(const std::vector<Box>& cell, int64_t feat_h, int64_t feat_w, float stride);

// --- overlaps ---
float box_iou(const Box& a, const Box& b);
// [a.size(), b.size()] row-major.
std::vector<float> iou_matrix(const std::vector<Box>& a, const std::vector<Box>& b);

// --- the box coder: deltas of a box relative to a reference, scaled by weights ---
// dx = wx (gx - rx) / rw, dy = wy (gy - ry) / rh, dw = ww log(gw / rw), dh = wh log(gh / rh)
// (centres and sizes). decode clamps dw, dh at log(1000 / 16) so exp() cannot overflow.
struct BoxCoder {
  std::array<float, 4> weights{1, 1, 1, 1};
  float clip = std::log(1000.0f / 16.0f);
  std::array<float, 4> encode(const Box& ref, const Box& target) const;
  Box decode(const Box& ref, const float* deltas) const;
};

Box clip_box(const Box& b, float height, float width);

// Greedy NMS, exact: boxes in descending score order (ties: lower index first); a box is kept
// unless it overlaps a kept one by IoU > threshold. Stops after max_keep (< 0: all), which
// gives the same boxes as running to the end and truncating. Returns indices.
std::vector<int64_t> nms(const std::vector<Box>& boxes, const std::vector<float>& scores, float threshold,
                         int64_t max_keep = -1);

// k elements of `pool` drawn without replacement (all of them when k >= pool size), in the
// order drawn; deterministic for a given generator state.
std::vector<int64_t> sample_without_replacement(std::vector<int64_t> pool, int64_t k, engine::Rng& rng);

// --- proposals (the RPN's output) ---
struct ProposalOptions {
  int64_t pre_nms_top_n = 12000, post_nms_top_n = 2000;
  float nms_threshold = 0.7f;
  float min_size = 16;  // boxes narrower or lower than this (input pixels) are dropped
};
// anchors [A], fg_scores [A], deltas [A * 4] (coder weights 1): decode, clip to the image, drop
// tiny and non-finite boxes, keep the pre_nms_top_n best, NMS, keep post_nms_top_n.
std::vector<Box> generate_proposals(const std::vector<Box>& anchors, const float* fg_scores, const float* deltas,
                                    float image_h, float image_w, const ProposalOptions& o,
                                    std::vector<float>* scores = nullptr);

// --- RPN training targets ---
struct AnchorTargetOptions {
  float positive_iou = 0.7f, negative_iou = 0.3f;
  int64_t batch = 256;  // anchors sampled per image
  float positive_fraction = 0.5f;
  float allowed_border = 0.0f;  // anchors crossing the image border by more are ignored
};
struct AnchorTargets {
  std::vector<int64_t> sampled;    // anchor indices for the objectness loss: positives first
  std::vector<float> labels;       // 1 / 0 per sampled anchor
  std::vector<int64_t> positives;  // the positive anchors (a prefix of sampled)
  std::vector<float> box_targets;  // 4 per positive (coder weights 1)
};
// Positive: IoU >= positive_iou with some ground truth, or the best anchor (ties included) of
// a ground-truth box; negative: max IoU < negative_iou; others ignored. Then at most
// batch * positive_fraction positives and batch minus those negatives, drawn at random.
AnchorTargets assign_anchor_targets(const std::vector<Box>& anchors, const std::vector<Box>& gt, float image_h,
                                    float image_w, const AnchorTargetOptions& o, engine::Rng& rng);

// --- RoI head training samples ---
struct RoiSampleOptions {
  int64_t batch = 128;  // RoIs per image
  float foreground_fraction = 0.25f;
  float foreground_iou = 0.5f;     // foreground: IoU >= this
  float background_iou_hi = 0.5f;  // background: IoU in [lo, hi)
  float background_iou_lo = 0.0f;
};
struct RoiSamples {
  std::vector<Box> rois;           // foreground first
  std::vector<float> labels;       // class per RoI, 0 = background
  std::vector<float> box_targets;  // 4 per foreground RoI, encoded with the head's coder
  int64_t foreground = 0;
};
// Candidates are the proposals plus the ground-truth boxes themselves (as in the paper's code).
RoiSamples sample_rois(const std::vector<Box>& proposals, const std::vector<ObjectBox>& gt, const RoiSampleOptions& o,
                       const BoxCoder& coder, engine::Rng& rng);

}  // namespace ts::workloads::frcnn
