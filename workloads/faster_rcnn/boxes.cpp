#include "workloads/faster_rcnn/boxes.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace ts::workloads::frcnn {

std::vector<Box> cell_anchors(const std::vector<float>& sizes, const std::vector<float>& ratios, float stride) {
  if (sizes.empty() || ratios.empty() || !(stride > 0))
    throw std::invalid_argument("cell_anchors: empty sizes or ratios");
  std::vector<Box> out;
  const float c = stride / 2;
  for (float r : ratios) {
    if (!(r > 0)) throw std::invalid_argument("cell_anchors: ratios must be positive");
    for (float s : sizes) {
      if (!(s > 0)) throw std::invalid_argument("cell_anchors: sizes must be positive");
      // w h = s^2 and h / w = r.
      const float w = s / std::sqrt(r), h = s * std::sqrt(r);
      out.push_back({c - w / 2, c - h / 2, c + w / 2, c + h / 2});
    }
  }
  return out;
}

std::vector<Box> grid_anchors(const std::vector<Box>& cell, int64_t feat_h, int64_t feat_w, float stride) {
  std::vector<Box> out;
  out.reserve(static_cast<size_t>(feat_h * feat_w) * cell.size());
  for (int64_t y = 0; y < feat_h; ++y) {
    for (int64_t x = 0; x < feat_w; ++x) {
      const float sx = static_cast<float>(x) * stride, sy = static_cast<float>(y) * stride;
      for (const Box& a : cell) out.push_back({a.x1 + sx, a.y1 + sy, a.x2 + sx, a.y2 + sy});
    }
  }
  return out;
}

float box_iou(const Box& a, const Box& b) {
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  if (!(iw > 0) || !(ih > 0)) return 0.0f;
  const float inter = iw * ih;
  const float uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

std::vector<float> iou_matrix(const std::vector<Box>& a, const std::vector<Box>& b) {
  std::vector<float> m(a.size() * b.size());
  const auto na = static_cast<int64_t>(a.size());
  for (int64_t i = 0; i < na; ++i) {
    for (size_t j = 0; j < b.size(); ++j)
      m[static_cast<size_t>(i) * b.size() + j] = box_iou(a[static_cast<size_t>(i)], b[j]);
  }
  return m;
}

std::array<float, 4> BoxCoder::encode(const Box& ref, const Box& t) const {
  const float rw = ref.width(), rh = ref.height(), tw = t.width(), th = t.height();
  if (!(rw > 0) || !(rh > 0) || !(tw > 0) || !(th > 0)) throw std::invalid_argument("BoxCoder::encode: empty box");
  const float rx = ref.x1 + 0.5f * rw, ry = ref.y1 + 0.5f * rh, tx = t.x1 + 0.5f * tw, ty = t.y1 + 0.5f * th;
  return {weights[0] * (tx - rx) / rw, weights[1] * (ty - ry) / rh, weights[2] * std::log(tw / rw),
          weights[3] * std::log(th / rh)};
}

Box BoxCoder::decode(const Box& ref, const float* d) const {
  const float rw = ref.width(), rh = ref.height();
  const float rx = ref.x1 + 0.5f * rw, ry = ref.y1 + 0.5f * rh;
  const float dx = d[0] / weights[0], dy = d[1] / weights[1];
  const float dw = std::min(d[2] / weights[2], clip), dh = std::min(d[3] / weights[3], clip);
  const float cx = rx + dx * rw, cy = ry + dy * rh, w = rw * std::exp(dw), h = rh * std::exp(dh);
  return {cx - 0.5f * w, cy - 0.5f * h, cx + 0.5f * w, cy + 0.5f * h};
}

Box clip_box(const Box& b, float height, float width) {
  return {std::clamp(b.x1, 0.0f, width), std::clamp(b.y1, 0.0f, height), std::clamp(b.x2, 0.0f, width),
          std::clamp(b.y2, 0.0f, height)};
}

namespace {
// Indices by descending score, ties by index; scores must be finite (callers filter NaN).
std::vector<int64_t> by_score(const std::vector<float>& scores, int64_t top_k) {
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [&](int64_t a, int64_t b) {
    const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  };
  if (top_k >= 0 && top_k < static_cast<int64_t>(idx.size())) {
    std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(), better);
    idx.resize(static_cast<size_t>(top_k));
  } else {
    std::sort(idx.begin(), idx.end(), better);
  }
  return idx;
}
}  // namespace

std::vector<int64_t> nms(const std::vector<Box>& boxes, const std::vector<float>& scores, float threshold,
                         int64_t max_keep) {
  if (boxes.size() != scores.size()) throw std::invalid_argument("nms: boxes and scores differ in length");
  for (float s : scores) {
    if (std::isnan(s)) throw std::invalid_argument("nms: NaN score");
  }
  const std::vector<int64_t> order = by_score(scores, -1);
  std::vector<char> suppressed(order.size(), 0);
  std::vector<int64_t> keep;
  for (size_t i = 0; i < order.size(); ++i) {
    if (suppressed[i]) continue;
    const Box& a = boxes[static_cast<size_t>(order[i])];
    keep.push_back(order[i]);
    if (max_keep >= 0 && static_cast<int64_t>(keep.size()) >= max_keep) break;
    for (size_t j = i + 1; j < order.size(); ++j) {
      if (!suppressed[j] && box_iou(a, boxes[static_cast<size_t>(order[j])]) > threshold) suppressed[j] = 1;
    }
  }
  return keep;
}

std::vector<int64_t> sample_without_replacement(std::vector<int64_t> pool, int64_t k, engine::Rng& rng) {
  const auto n = static_cast<int64_t>(pool.size());
  if (k >= n) return pool;
  if (k <= 0) return {};
  // Partial Fisher-Yates: the first k slots end up a uniform sample.
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + rng.integer(n - i);
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(j)]);
  }
  pool.resize(static_cast<size_t>(k));
  return pool;
}

std::vector<Box> generate_proposals(const std::vector<Box>& anchors, const float* fg_scores, const float* deltas,
                                    float image_h, float image_w, const ProposalOptions& o,
                                    std::vector<float>* scores_out) {
  const BoxCoder coder;  // weights 1: the RPN's deltas
  std::vector<Box> boxes;
  std::vector<float> scores;
  boxes.reserve(anchors.size());
  scores.reserve(anchors.size());
  for (size_t i = 0; i < anchors.size(); ++i) {
    const float s = fg_scores[i];
    if (!std::isfinite(s)) continue;  // a diverged network must not break the sort
    const Box b = clip_box(coder.decode(anchors[i], deltas + 4 * i), image_h, image_w);
    if (!std::isfinite(b.x1) || !std::isfinite(b.y1) || !std::isfinite(b.x2) || !std::isfinite(b.y2)) continue;
    if (b.width() < o.min_size || b.height() < o.min_size) continue;
    boxes.push_back(b);
    scores.push_back(s);
  }
  const std::vector<int64_t> top = by_score(scores, o.pre_nms_top_n);
  std::vector<Box> tb;
  std::vector<float> ts;
  tb.reserve(top.size());
  ts.reserve(top.size());
  for (int64_t i : top) {
    tb.push_back(boxes[static_cast<size_t>(i)]);
    ts.push_back(scores[static_cast<size_t>(i)]);
  }
  const std::vector<int64_t> keep = nms(tb, ts, o.nms_threshold, o.post_nms_top_n);
  std::vector<Box> out;
  out.reserve(keep.size());
  if (scores_out) scores_out->clear();
  for (int64_t i : keep) {
    out.push_back(tb[static_cast<size_t>(i)]);
    if (scores_out) scores_out->push_back(ts[static_cast<size_t>(i)]);
  }
  return out;
}

AnchorTargets assign_anchor_targets(const std::vector<Box>& anchors, const std::vector<Box>& gt, float image_h,
                                    float image_w, const AnchorTargetOptions& o, engine::Rng& rng) {
  const float b = o.allowed_border;
  std::vector<int64_t> inside;
  for (size_t i = 0; i < anchors.size(); ++i) {
    const Box& a = anchors[i];
    if (a.x1 >= -b && a.y1 >= -b && a.x2 <= image_w + b && a.y2 <= image_h + b)
      inside.push_back(static_cast<int64_t>(i));
  }
  // -1 ignore, 0 negative, 1 positive; per inside anchor.
  std::vector<int> label(inside.size(), -1);
  std::vector<int64_t> match(inside.size(), -1);
  if (gt.empty()) {
    std::fill(label.begin(), label.end(), 0);
  } else {
    std::vector<Box> in_boxes;
    in_boxes.reserve(inside.size());
    for (int64_t i : inside) in_boxes.push_back(anchors[static_cast<size_t>(i)]);
    const std::vector<float> iou = iou_matrix(in_boxes, gt);
    const size_t ng = gt.size();
    std::vector<float> best(inside.size(), 0.0f), gt_best(ng, 0.0f);
    for (size_t i = 0; i < inside.size(); ++i) {
      int64_t arg = 0;
      for (size_t g = 0; g < ng; ++g) {
        const float v = iou[i * ng + g];
        if (v > iou[i * ng + static_cast<size_t>(arg)]) arg = static_cast<int64_t>(g);
        gt_best[g] = std::max(gt_best[g], v);
      }
      best[i] = iou[i * ng + static_cast<size_t>(arg)];
      match[i] = arg;
    }
    for (size_t i = 0; i < inside.size(); ++i) {
      if (best[i] < o.negative_iou) label[i] = 0;
    }
    // Each ground truth's best anchors (ties included) are positive, so no box goes unmatched.
    // Every positive regresses to its own best-overlapping box (the paper's code does the same).
    for (size_t i = 0; i < inside.size(); ++i) {
      for (size_t g = 0; g < ng; ++g) {
        if (gt_best[g] > 0 && iou[i * ng + g] == gt_best[g]) label[i] = 1;
      }
      if (best[i] >= o.positive_iou) label[i] = 1;
    }
  }
  std::vector<int64_t> pos, neg;  // positions in `inside`
  for (size_t i = 0; i < inside.size(); ++i) {
    if (label[i] == 1) pos.push_back(static_cast<int64_t>(i));
    else if (label[i] == 0) neg.push_back(static_cast<int64_t>(i));
  }
  const auto max_pos = static_cast<int64_t>(static_cast<float>(o.batch) * o.positive_fraction);
  pos = sample_without_replacement(std::move(pos), max_pos, rng);
  neg = sample_without_replacement(std::move(neg), o.batch - static_cast<int64_t>(pos.size()), rng);
  AnchorTargets t;
  const BoxCoder coder;
  for (int64_t i : pos) {
    const int64_t a = inside[static_cast<size_t>(i)];
    t.sampled.push_back(a);
    t.labels.push_back(1.0f);
    t.positives.push_back(a);
    const auto d =
        coder.encode(anchors[static_cast<size_t>(a)], gt[static_cast<size_t>(match[static_cast<size_t>(i)])]);
    t.box_targets.insert(t.box_targets.end(), d.begin(), d.end());
  }
  for (int64_t i : neg) {
    t.sampled.push_back(inside[static_cast<size_t>(i)]);
    t.labels.push_back(0.0f);
  }
  return t;
}

RoiSamples sample_rois(const std::vector<Box>& proposals, const std::vector<ObjectBox>& gt, const RoiSampleOptions& o,
                       const BoxCoder& coder, engine::Rng& rng) {
  std::vector<Box> cand = proposals;
  std::vector<Box> gt_boxes;
  for (const auto& g : gt) {
    cand.push_back(g.box);
    gt_boxes.push_back(g.box);
  }
  std::vector<float> best(cand.size(), 0.0f);
  std::vector<int64_t> match(cand.size(), -1);
  if (!gt_boxes.empty()) {
    const std::vector<float> iou = iou_matrix(cand, gt_boxes);
    const size_t ng = gt_boxes.size();
    for (size_t i = 0; i < cand.size(); ++i) {
      size_t arg = 0;
      for (size_t g = 1; g < ng; ++g) {
        if (iou[i * ng + g] > iou[i * ng + arg]) arg = g;
      }
      best[i] = iou[i * ng + arg];
      match[i] = static_cast<int64_t>(arg);
    }
  }
  std::vector<int64_t> fg, bg;
  for (size_t i = 0; i < cand.size(); ++i) {
    if (best[i] >= o.foreground_iou && match[i] >= 0) {
      fg.push_back(static_cast<int64_t>(i));
    } else if (best[i] < o.background_iou_hi && best[i] >= o.background_iou_lo && cand[i].area() > 0) {
      bg.push_back(static_cast<int64_t>(i));
    }
  }
  const auto max_fg = static_cast<int64_t>(std::round(static_cast<float>(o.batch) * o.foreground_fraction));
  fg = sample_without_replacement(std::move(fg), max_fg, rng);
  bg = sample_without_replacement(std::move(bg), o.batch - static_cast<int64_t>(fg.size()), rng);
  RoiSamples s;
  s.foreground = static_cast<int64_t>(fg.size());
  for (int64_t i : fg) {
    const auto& g = gt[static_cast<size_t>(match[static_cast<size_t>(i)])];
    s.rois.push_back(cand[static_cast<size_t>(i)]);
    s.labels.push_back(static_cast<float>(g.label));
    const auto d = coder.encode(cand[static_cast<size_t>(i)], g.box);
    s.box_targets.insert(s.box_targets.end(), d.begin(), d.end());
  }
  for (int64_t i : bg) {
    s.rois.push_back(cand[static_cast<size_t>(i)]);
    s.labels.push_back(0.0f);
  }
  return s;
}

}  // namespace ts::workloads::frcnn
