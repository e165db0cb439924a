// faster_rcnn: the box machinery against answers worked out by hand, the VOC reader on a
// folder written here (JPEGs through libjpeg), the AP computation on hand-made cases, the
// parameter counts against a closed form, and a tiny model that learns.
#include <gtest/gtest.h>
#include <unistd.h>

// clang-format off
#include <cstdio>
#include <jpeglib.h>   // after cstdio: it uses FILE
// clang-format on

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engine/context.h"
#include "engine/ops.h"
#include "workloads/data/detection_data.h"
#include "workloads/faster_rcnn/boxes.h"
#include "workloads/faster_rcnn/evaluation.h"
#include "workloads/faster_rcnn/faster_rcnn.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;
using namespace ts::workloads::frcnn;
namespace fs = std::filesystem;

namespace {

constexpr float kTol = 1e-4f;

void expect_box(const Box& a, const Box& b, float tol = kTol) {
  EXPECT_NEAR(a.x1, b.x1, tol);
  EXPECT_NEAR(a.y1, b.y1, tol);
  EXPECT_NEAR(a.x2, b.x2, tol);
  EXPECT_NEAR(a.y2, b.y2, tol);
}

}  // namespace

// ---------------------------------------------------------------- anchors, IoU, coder

TEST(FasterRcnnBoxes, CellAnchorsHaveThePapersSizesAndRatios) {
  const auto a = cell_anchors({128, 256, 512}, {0.5f, 1.0f, 2.0f}, 16);
  ASSERT_EQ(a.size(), 9u);
  // Ratio-major: index = ratio * 3 + size.
  const float sizes[3] = {128, 256, 512}, ratios[3] = {0.5f, 1.0f, 2.0f};
  for (int r = 0; r < 3; ++r) {
    for (int s = 0; s < 3; ++s) {
      const Box& b = a[static_cast<size_t>(r * 3 + s)];
      EXPECT_NEAR(b.width() * b.height(), sizes[s] * sizes[s], 0.5f);
      EXPECT_NEAR(b.height() / b.width(), ratios[r], 1e-5f);
      EXPECT_NEAR(0.5f * (b.x1 + b.x2), 8.0f, kTol);  // centre of the first 16x16 cell
      EXPECT_NEAR(0.5f * (b.y1 + b.y2), 8.0f, kTol);
    }
  }
  expect_box(a[3], {-56, -56, 72, 72});  // ratio 1, size 128
  // Ratio 0.5, size 128: w = 128 sqrt(2), h = 128 / sqrt(2).
  expect_box(a[0],
             {8 - 64 * std::sqrt(2.0f), 8 - 32 * std::sqrt(2.0f), 8 + 64 * std::sqrt(2.0f), 8 + 32 * std::sqrt(2.0f)});
}

TEST(FasterRcnnBoxes, GridAnchorsFollowTheNhwcRowOrder) {
  const auto cell = cell_anchors({32}, {0.5f, 2.0f}, 16);
  const auto g = grid_anchors(cell, 2, 3, 16);
  ASSERT_EQ(g.size(), 2u * 3u * 2u);
  // (y, x, a) -> (y * 3 + x) * 2 + a, shifted by (16 x, 16 y).
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) {
      for (int k = 0; k < 2; ++k) {
        const Box& c = cell[static_cast<size_t>(k)];
        expect_box(g[static_cast<size_t>((y * 3 + x) * 2 + k)],
                   {c.x1 + 16.0f * x, c.y1 + 16.0f * y, c.x2 + 16.0f * x, c.y2 + 16.0f * y});
      }
    }
  }
}

TEST(FasterRcnnBoxes, IouKnownValues) {
  EXPECT_FLOAT_EQ(box_iou({0, 0, 10, 10}, {5, 0, 15, 10}), 50.0f / 150.0f);
  EXPECT_FLOAT_EQ(box_iou({0, 0, 10, 10}, {0, 0, 10, 10}), 1.0f);
  EXPECT_FLOAT_EQ(box_iou({0, 0, 10, 10}, {0, 0, 5, 5}), 0.25f);
  EXPECT_FLOAT_EQ(box_iou({0, 0, 10, 10}, {10, 0, 20, 10}), 0.0f);  // touching edges
  EXPECT_FLOAT_EQ(box_iou({0, 0, 10, 10}, {30, 30, 40, 40}), 0.0f);
  const auto m = iou_matrix({{0, 0, 10, 10}, {0, 0, 5, 5}}, {{0, 0, 10, 10}, {5, 0, 15, 10}, {50, 50, 60, 60}});
  const std::vector<float> want = {1.0f, 1.0f / 3, 0, 0.25f, 0, 0};
  ASSERT_EQ(m.size(), want.size());
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], want[i], 1e-6f) << i;
}

TEST(FasterRcnnBoxes, CoderEncodesCentresAndLogSizes) {
  const BoxCoder unit;
  // Centre (5, 5) -> (10, 10), size 10x10 -> 10x20.
  const auto d = unit.encode({0, 0, 10, 10}, {5, 0, 15, 20});
  EXPECT_NEAR(d[0], 0.5f, kTol);
  EXPECT_NEAR(d[1], 0.5f, kTol);
  EXPECT_NEAR(d[2], 0.0f, kTol);
  EXPECT_NEAR(d[3], std::log(2.0f), kTol);
  const BoxCoder head{{10, 10, 5, 5}};
  const auto h = head.encode({0, 0, 10, 10}, {5, 0, 15, 20});
  EXPECT_NEAR(h[0], 5.0f, kTol);
  EXPECT_NEAR(h[1], 5.0f, kTol);
  EXPECT_NEAR(h[3], 5 * std::log(2.0f), kTol);
  // Decode inverts encode, for both weightings.
  const Box ref{3, 4, 40, 25}, target{10, -2, 33, 60};
  for (const BoxCoder* c : {&unit, &head}) {
    const auto e = c->encode(ref, target);
    expect_box(c->decode(ref, e.data()), target, 1e-3f);
  }
  // Huge size deltas are clamped at log(1000/16): no overflow.
  const float big[4] = {0, 0, 100, 100};
  const Box b = unit.decode({0, 0, 16, 16}, big);
  EXPECT_NEAR(b.width(), 1000.0f, 0.1f);
  EXPECT_TRUE(std::isfinite(b.x1));
  EXPECT_THROW(unit.encode({0, 0, 0, 10}, {0, 0, 5, 5}), std::invalid_argument);
}

TEST(FasterRcnnBoxes, ClipKeepsBoxesInTheImage) {
  expect_box(clip_box({-5, -3, 120, 50}, 40, 100), {0, 0, 100, 40});
  expect_box(clip_box({10, 10, 20, 20}, 40, 100), {10, 10, 20, 20});
}

// ---------------------------------------------------------------- NMS and sampling

TEST(FasterRcnnBoxes, NmsKnownAnswers) {
  // D overlaps A by 0.905 and B by 0.747; A and B overlap by 0.68; C is apart.
  const std::vector<Box> boxes = {{0, 0, 10, 10}, {1, 1, 11, 11}, {20, 20, 30, 30}, {0.5f, 0, 10.5f, 10}};
  const std::vector<float> scores = {0.9f, 0.8f, 0.7f, 0.95f};
  EXPECT_EQ(nms(boxes, scores, 0.7f), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(nms(boxes, scores, 0.8f), (std::vector<int64_t>{3, 1, 2}));  // a suppressed box suppresses nothing
  EXPECT_EQ(nms(boxes, scores, 0.95f), (std::vector<int64_t>{3, 0, 1, 2}));
  EXPECT_EQ(nms(boxes, scores, 0.7f, 1), (std::vector<int64_t>{3}));
  // Equal scores: the lower index first.
  EXPECT_EQ(nms({{0, 0, 10, 10}, {0, 0, 10, 10}}, {0.5f, 0.5f}, 0.5f), (std::vector<int64_t>{0}));
  EXPECT_THROW(nms(boxes, {0.1f, NAN, 0.3f, 0.4f}, 0.5f), std::invalid_argument);
}

TEST(FasterRcnnBoxes, NmsMatchesTheDefinitionOnRandomBoxes) {
  engine::Rng rng(3);
  std::vector<Box> boxes;
  std::vector<float> scores;
  for (int i = 0; i < 300; ++i) {
    const auto x = static_cast<float>(rng.uniform(0, 100)), y = static_cast<float>(rng.uniform(0, 100));
    const auto w = static_cast<float>(rng.uniform(5, 40)), h = static_cast<float>(rng.uniform(5, 40));
    boxes.push_back({x, y, x + w, y + h});
    scores.push_back(static_cast<float>(rng.uniform()));
  }
  for (float thr : {0.3f, 0.5f, 0.7f}) {
    // The definition: visit by score; keep a box when it overlaps no kept box by more than thr.
    std::vector<int64_t> order(boxes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)]; });
    std::vector<int64_t> want;
    for (int64_t i : order) {
      bool ok = true;
      for (int64_t k : want) ok = ok && box_iou(boxes[static_cast<size_t>(i)], boxes[static_cast<size_t>(k)]) <= thr;
      if (ok) want.push_back(i);
    }
    EXPECT_EQ(nms(boxes, scores, thr), want) << thr;
    const std::vector<int64_t> head(want.begin(), want.begin() + 10);
    EXPECT_EQ(nms(boxes, scores, thr, 10), head) << thr;
  }
}

TEST(FasterRcnnBoxes, SamplingWithoutReplacement) {
  std::vector<int64_t> pool(50);
  for (int i = 0; i < 50; ++i) pool[static_cast<size_t>(i)] = 100 + i;
  engine::Rng a(7), b(7);
  const auto s = sample_without_replacement(pool, 20, a);
  EXPECT_EQ(s.size(), 20u);
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 20u);
  for (int64_t v : s) EXPECT_TRUE(v >= 100 && v < 150);
  EXPECT_EQ(sample_without_replacement(pool, 20, b), s);  // seeded: reproducible
  EXPECT_EQ(sample_without_replacement(pool, 80, a), pool);
  EXPECT_TRUE(sample_without_replacement(pool, 0, a).empty());
}

// ---------------------------------------------------------------- proposals and targets

TEST(FasterRcnnTargets, ProposalsDecodeClipFilterAndSuppress) {
  const std::vector<Box> anchors = {{0, 0, 20, 20}, {2, 0, 22, 20}, {50, 50, 70, 70}, {-10, -10, 5, 5}, {80, 0, 82, 2}};
  const std::vector<float> scores = {0.9f, 0.8f, 0.7f, 0.95f, 0.99f};
  std::vector<float> deltas(anchors.size() * 4, 0.0f);
  ProposalOptions o{10, 10, 0.7f, 4};
  std::vector<float> kept_scores;
  const auto p = generate_proposals(anchors, scores.data(), deltas.data(), 60, 100, o, &kept_scores);
  // anchor 4 is 2x2 (too small); anchor 3 clips to 5x5; 1 overlaps 0 by 0.82 and is suppressed;
  // 2 clips to 10x10.
  ASSERT_EQ(p.size(), 3u);
  expect_box(p[0], {0, 0, 5, 5});
  expect_box(p[1], {0, 0, 20, 20});
  expect_box(p[2], {50, 50, 70, 60});
  EXPECT_EQ(kept_scores, (std::vector<float>{0.95f, 0.9f, 0.7f}));
  // Non-finite scores and deltas are dropped, not sorted.
  std::vector<float> bad_scores = scores, bad_deltas = deltas;
  bad_scores[0] = NAN;
  bad_deltas[4 * 2] = INFINITY;
  const auto q = generate_proposals(anchors, bad_scores.data(), bad_deltas.data(), 60, 100, o);
  ASSERT_EQ(q.size(), 2u);
  expect_box(q[0], {0, 0, 5, 5});
  expect_box(q[1], {2, 0, 22, 20});
  // Top-k before and after NMS.
  ProposalOptions top1{1, 10, 0.7f, 4};
  EXPECT_EQ(generate_proposals(anchors, scores.data(), deltas.data(), 60, 100, top1).size(), 1u);
}

TEST(FasterRcnnTargets, AnchorLabelsFollowThePaper) {
  // A 100x100 image; two objects.
  const std::vector<Box> gt = {{10, 10, 30, 30}, {60, 60, 90, 80}};
  const std::vector<Box> anchors = {
      {10, 10, 30, 30},    // 0: IoU 1 with gt 0 -> positive
      {15, 10, 35, 30},    // 1: IoU 0.6 -> ignored (between 0.3 and 0.7)
      {50, 0, 60, 10},     // 2: no overlap -> negative
      {-5, 10, 25, 30},    // 3: crosses the border -> ignored whatever its overlap
      {60, 60, 100, 100},  // 4: gt 1's best anchor (IoU 0.375) -> positive
      {50, 40, 90, 80},    // 5: IoU 0.375 as well: a tie, also positive
      {40, 40, 60, 60},    // 6: no overlap -> negative
  };
  engine::Rng rng(1);
  AnchorTargetOptions o;
  const AnchorTargets t = assign_anchor_targets(anchors, gt, 100, 100, o, rng);
  std::map<int64_t, float> label;
  for (size_t i = 0; i < t.sampled.size(); ++i) label[t.sampled[i]] = t.labels[i];
  EXPECT_EQ(label, (std::map<int64_t, float>{{0, 1}, {2, 0}, {4, 1}, {5, 1}, {6, 0}}));
  ASSERT_EQ(t.positives.size(), 3u);
  ASSERT_EQ(t.box_targets.size(), 12u);
  // Positives first in `sampled`; anchor 0 regresses to gt 0 exactly: zero deltas.
  for (size_t i = 0; i < t.positives.size(); ++i) {
    EXPECT_EQ(t.sampled[i], t.positives[i]);
    if (t.positives[i] == 0) {
      for (int k = 0; k < 4; ++k) EXPECT_NEAR(t.box_targets[i * 4 + static_cast<size_t>(k)], 0.0f, 1e-6f);
    }
  }
  // No objects: every inside anchor is a negative candidate.
  const AnchorTargets none = assign_anchor_targets(anchors, {}, 100, 100, o, rng);
  EXPECT_EQ(none.sampled.size(), 6u);
  EXPECT_TRUE(none.positives.empty());
}

TEST(FasterRcnnTargets, AnchorSamplingCounts) {
  // 40 anchors on the object (positive), 200 far away (negative).
  const std::vector<Box> gt = {{100, 100, 200, 200}};
  std::vector<Box> anchors;
  for (int i = 0; i < 40; ++i) anchors.push_back({100.0f + 0.1f * static_cast<float>(i), 100, 200, 200});
  for (int i = 0; i < 200; ++i) anchors.push_back({300, 300, 320.0f + static_cast<float>(i % 10), 330});
  engine::Rng rng(2);
  AnchorTargetOptions o;
  o.batch = 32;
  const AnchorTargets t = assign_anchor_targets(anchors, gt, 400, 400, o, rng);
  EXPECT_EQ(t.positives.size(), 16u);  // at most half of 32
  EXPECT_EQ(t.sampled.size(), 32u);
  EXPECT_EQ(std::set<int64_t>(t.sampled.begin(), t.sampled.end()).size(), 32u);
  EXPECT_EQ(std::count(t.labels.begin(), t.labels.end(), 1.0f), 16);
  // Few positives: the rest of the batch is negatives.
  o.batch = 256;
  const AnchorTargets u = assign_anchor_targets(anchors, gt, 400, 400, o, rng);
  EXPECT_EQ(u.positives.size(), 40u);
  EXPECT_EQ(u.sampled.size(), 240u);  // 40 positives + all 200 negatives (fewer than 216)
}

TEST(FasterRcnnTargets, RoiSamplingCountsLabelsAndTargets) {
  const std::vector<ObjectBox> gt = {{{100, 100, 200, 200}, 3, false}, {{300, 100, 350, 200}, 7, false}};
  std::vector<Box> proposals;
  for (int i = 0; i < 50; ++i)
    proposals.push_back({100.0f + static_cast<float>(i % 10), 100, 200, 200});  // fg of class 3
  for (int i = 0; i < 100; ++i) proposals.push_back({400.0f + 0.5f * static_cast<float>(i), 300, 460, 350});  // bg
  const BoxCoder coder{{10, 10, 5, 5}};
  engine::Rng rng(4);
  RoiSampleOptions o;  // 128 per image, 25% foreground
  const RoiSamples s = sample_rois(proposals, gt, o, coder, rng);
  EXPECT_EQ(s.foreground, 32);
  EXPECT_EQ(s.rois.size(), 128u);
  EXPECT_EQ(s.box_targets.size(), 32u * 4u);
  for (int64_t i = 0; i < 32; ++i) {
    const float l = s.labels[static_cast<size_t>(i)];
    EXPECT_TRUE(l == 3.0f || l == 7.0f);  // the gt boxes themselves are candidates too
  }
  for (size_t i = 32; i < s.labels.size(); ++i) EXPECT_EQ(s.labels[i], 0.0f);
  // Few candidates: both ground-truth boxes are foreground with zero targets, nothing else.
  const RoiSamples g = sample_rois({}, gt, o, coder, rng);
  EXPECT_EQ(g.foreground, 2);
  EXPECT_EQ(g.rois.size(), 2u);
  for (float v : g.box_targets) EXPECT_NEAR(v, 0.0f, 1e-5f);
  // The background band: [0.1, 0.5) leaves out the far proposals (IoU 0).
  RoiSampleOptions band = o;
  band.background_iou_lo = 0.1f;
  const RoiSamples b = sample_rois(proposals, gt, band, coder, rng);
  EXPECT_EQ(b.rois.size(), 32u);
}

// ---------------------------------------------------------------- AP

TEST(FasterRcnnEval, AveragePrecisionAllPointInterpolation) {
  // Precision envelope 1 up to recall 0.5, 2/3 up to 1.
  EXPECT_NEAR(average_precision({0.5, 0.5, 1.0}, {1.0, 0.5, 2.0 / 3}), 0.5 + 0.5 * 2.0 / 3, 1e-12);
  EXPECT_NEAR(average_precision({0.25, 0.5, 0.75, 1.0}, {1, 1, 1, 1}), 1.0, 1e-12);
  // Recall stops at 0.5: the rest of the axis has precision 0.
  EXPECT_NEAR(average_precision({0.5}, {1.0}), 0.5, 1e-12);
  EXPECT_NEAR(average_precision({}, {}), 0.0, 1e-12);
}

TEST(FasterRcnnEval, MeanAveragePrecisionOnHandMadeCases) {
  // Image 0: two cats (label 1), a dog (2); image 1: a cat and a difficult dog.
  const std::vector<std::vector<ObjectBox>> gt = {
      {{{0, 0, 10, 10}, 1, false}, {{20, 20, 30, 30}, 1, false}, {{50, 50, 60, 60}, 2, false}},
      {{{0, 0, 10, 10}, 1, false}, {{40, 40, 50, 50}, 2, true}}};
  // Cats: hit (0.9), duplicate of the same cat (0.85, false positive), miss (0.8), hit in image
  // 1 (0.7), hit (0.6): precisions 1, 1/2, 1/3, 2/4, 3/5 at recalls 1/3, 1/3, 1/3, 2/3, 1.
  std::vector<Detection> d = {{0, 1, 0.9f, {0, 0, 10, 10}},
                              {0, 1, 0.85f, {1, 0, 10, 10}},
                              {0, 1, 0.8f, {70, 70, 80, 80}},
                              {1, 1, 0.7f, {0, 0, 10, 11}},
                              {0, 1, 0.6f, {20, 20, 30, 30}},
                              // Dogs: the difficult one found (ignored), the real one found.
                              {1, 2, 0.95f, {40, 40, 50, 50}},
                              {0, 2, 0.5f, {50, 50, 60, 61}}};
  const MapResult r = mean_average_precision(d, gt, 3);
  const double cat = 1.0 / 3 * 1.0 + 1.0 / 3 * 0.6 + 1.0 / 3 * 0.6;  // envelope 1, 3/5, 3/5
  EXPECT_NEAR(r.ap[0], cat, 1e-9);
  EXPECT_NEAR(r.ap[1], 1.0, 1e-9);
  EXPECT_EQ(r.ap[2], -1.0);  // class 3: no positives, not counted
  EXPECT_EQ(r.classes_present, 2);
  EXPECT_NEAR(r.map, (cat + 1.0) / 2, 1e-9);
  // A detection below IoU 0.5 is a false positive: the dog's AP halves when a bad box ranks first.
  d.push_back({0, 2, 0.99f, {50, 50, 70, 70}});  // IoU 0.25
  EXPECT_NEAR(mean_average_precision(d, gt, 3).ap[1], 0.5, 1e-9);
  // No detections: AP 0 for every present class.
  EXPECT_NEAR(mean_average_precision({}, gt, 3).map, 0.0, 1e-12);
}

// ---------------------------------------------------------------- data

TEST(DetectionData, SyntheticImagesAreSeededAndConsistent) {
  SyntheticDetectionOptions o;
  o.height = 72;
  o.width = 96;
  o.classes = 6;
  SyntheticDetection a(o, 5), b(o, 5);
  for (int i = 0; i < 20; ++i) {
    const DetectionImage x = a.next_train(), y = b.next_train();
    EXPECT_EQ(x.pixels, y.pixels);
    ASSERT_EQ(x.pixels.size(), 3u * 72u * 96u);
    ASSERT_GE(x.objects.size(), 1u);
    ASSERT_LE(x.objects.size(), 4u);
    for (const auto& obj : x.objects) {
      EXPECT_GE(obj.label, 1);
      EXPECT_LE(obj.label, 6);
      EXPECT_GE(obj.box.x1, 0);
      EXPECT_GE(obj.box.y1, 0);
      EXPECT_LE(obj.box.x2, 96);
      EXPECT_LE(obj.box.y2, 72);
      EXPECT_GT(obj.box.area(), 0);
    }
    for (size_t p = 0; p < x.objects.size(); ++p)
      for (size_t q = p + 1; q < x.objects.size(); ++q) EXPECT_LE(box_iou(x.objects[p].box, x.objects[q].box), 0.3f);
  }
  // Held-out images do not depend on what training drew.
  EXPECT_EQ(a.heldout(3)->pixels, SyntheticDetection(o, 5).heldout(3)->pixels);
  EXPECT_NE(a.heldout(3)->pixels, a.heldout(4)->pixels);
  EXPECT_EQ(a.class_names()[0], "red_rectangle");
  EXPECT_EQ(a.class_names()[5], "red_ellipse");
  o.classes = 21;
  EXPECT_THROW(SyntheticDetection(o, 1), std::invalid_argument);
}

TEST(DetectionData, SyntheticObjectsShowTheirColour) {
  // The centre pixel of a rectangle (class 1 red, 3 blue) carries its colour: R - B has the sign.
  SyntheticDetectionOptions o;
  o.height = 64;
  o.width = 64;
  o.classes = 3;
  o.min_objects = o.max_objects = 1;
  o.min_object = 0.3f;
  SyntheticDetection s(o, 9);
  int checked = 0;
  for (int i = 0; i < 40; ++i) {
    const DetectionImage im = s.next_train();
    const auto& obj = im.objects[0];
    const auto cx = static_cast<int64_t>(0.5f * (obj.box.x1 + obj.box.x2)),
               cy = static_cast<int64_t>(0.5f * (obj.box.y1 + obj.box.y2));
    const float r = im.pixels[static_cast<size_t>(cy * 64 + cx)],
                b = im.pixels[static_cast<size_t>((2 * 64 + cy) * 64 + cx)];
    if (obj.label == 1) {
      EXPECT_GT(r, b);
    }
    if (obj.label == 3) {
      EXPECT_LT(r, b);
    }
    checked += obj.label != 2;
  }
  EXPECT_GT(checked, 10);
}

TEST(DetectionData, BatchesRoundTripTheirTargets) {
  DetectionImage a, b;
  a.height = 4;
  a.width = 6;
  a.pixels.assign(3 * 4 * 6, 1.0f);
  a.objects = {{{0, 0, 3, 2}, 2, false}};
  b.height = 5;
  b.width = 3;
  b.scale = 0.5f;
  b.pixels.assign(3 * 5 * 3, 2.0f);
  b.objects = {{{1, 1, 2, 4}, 1, true}, {{0, 0, 3, 5}, 4, false}};
  const Batch batch = make_detection_batch({a, b}, engine::Device::cpu());
  EXPECT_EQ(batch.inputs.shape(), (engine::Shape{2, 3, 5, 6}));  // padded to the largest
  EXPECT_EQ(batch.samples, 2);
  const auto v = batch.inputs.to_vector();
  EXPECT_EQ(v[static_cast<size_t>(4 * 6)], 0.0f);       // image 0, row 4: padding
  EXPECT_EQ(v[static_cast<size_t>(3 * 30 + 3)], 0.0f);  // image 1, column 3: padding
  EXPECT_EQ(v[static_cast<size_t>(3 * 30 + 2)], 2.0f);
  const auto t = decode_detection_labels(batch.labels);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].height, 4);
  EXPECT_EQ(t[1].width, 3);
  EXPECT_EQ(t[1].scale, 0.5f);
  ASSERT_EQ(t[1].objects.size(), 2u);
  EXPECT_EQ(t[1].objects[0].box, (Box{1, 1, 2, 4}));
  EXPECT_TRUE(t[1].objects[0].difficult);
  EXPECT_EQ(t[1].objects[1].label, 4);
}

namespace {

// Writes an RGB JPEG with libjpeg (quality 95).
void write_jpeg(const fs::path& path, int64_t w, int64_t h, const std::vector<uint8_t>& rgb) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + static_cast<size_t>(c.next_scanline) * static_cast<size_t>(w) * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

std::string annotation(int64_t w, int64_t h, const std::string& objects) {
  return "<?xml version=\"1.0\"?>\n<!-- written by the test -->\n<annotation verified=\"yes\">\n"
         "  <folder>VOC2007</folder>\n  <size><width>" +
         std::to_string(w) + "</width><height>" + std::to_string(h) + "</height><depth>3</depth></size>\n" + objects +
         "</annotation>\n";
}

std::string object(const std::string& name, int x1, int y1, int x2, int y2, bool difficult = false) {
  return "  <object><name>" + name + "</name><pose>Unspecified</pose><difficult>" + (difficult ? "1" : "0") +
         "</difficult><bndbox><xmin>" + std::to_string(x1) + "</xmin><ymin>" + std::to_string(y1) + "</ymin><xmax>" +
         std::to_string(x2) + "</xmax><ymax>" + std::to_string(y2) + "</ymax></bndbox></object>\n";
}

// A VOC-style folder: three images (left half red, right half blue), two for train, one for val.
fs::path make_voc_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("trainscope_voc_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "JPEGImages");
  fs::create_directories(dir / "Annotations");
  fs::create_directories(dir / "ImageSets" / "Main");
  const int64_t w = 80, h = 60;
  std::vector<uint8_t> rgb(static_cast<size_t>(w * h * 3));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      uint8_t* p = &rgb[static_cast<size_t>((y * w + x) * 3)];
      p[0] = x < w / 2 ? 230 : 20;
      p[1] = 30;
      p[2] = x < w / 2 ? 20 : 230;
    }
  for (const char* id : {"000001", "000002", "000003"})
    write_jpeg(dir / "JPEGImages" / (std::string(id) + ".jpg"), w, h, rgb);
  write_file(dir / "Annotations" / "000001.xml",
             annotation(w, h, object("dog", 1, 1, 40, 30) + object("person", 41, 11, 80, 60, true)));
  write_file(dir / "Annotations" / "000002.xml", annotation(w, h, object("cat", 11, 21, 30, 40)));
  write_file(dir / "Annotations" / "000003.xml", annotation(w, h, object("tvmonitor", 5, 5, 60, 50)));
  write_file(dir / "ImageSets" / "Main" / "train.txt", "000001\n000002\n");
  write_file(dir / "ImageSets" / "Main" / "val.txt", "000003\n");
  return dir;
}

}  // namespace

TEST(DetectionData, VocAnnotationParser) {
  const auto objs =
      parse_voc_annotation(annotation(80, 60, object("dog", 1, 1, 40, 30) + object("person", 41, 11, 80, 60, true)));
  ASSERT_EQ(objs.size(), 2u);
  EXPECT_EQ(objs[0].label, 12);                 // dog: the 12th VOC class
  EXPECT_EQ(objs[0].box, (Box{0, 0, 40, 30}));  // 1-based inclusive -> continuous
  EXPECT_FALSE(objs[0].difficult);
  EXPECT_EQ(objs[1].label, 15);  // person
  EXPECT_TRUE(objs[1].difficult);
  // Entities, CDATA, self-closing tags and attributes are fine; a broken file is an error.
  EXPECT_EQ(
      parse_voc_annotation("<annotation><source a='x&gt;'/><object><name><![CDATA[cat]]></name><bndbox><xmin>2</xmin>"
                           "<ymin>3</ymin><xmax>4</xmax><ymax>5</ymax></bndbox></object></annotation>")[0]
          .label,
      8);
  EXPECT_THROW(parse_voc_annotation("<annotation><object></annotation>"), std::runtime_error);
  EXPECT_THROW(parse_voc_annotation(annotation(80, 60, object("unicorn", 1, 1, 5, 5))), std::runtime_error);
  EXPECT_THROW(parse_voc_annotation(annotation(80, 60, object("dog", 10, 1, 5, 5))), std::runtime_error);
  EXPECT_THROW(parse_voc_annotation("<notvoc/>"), std::runtime_error);
}

TEST(DetectionData, VocFolderIsReadResizedAndFlipped) {
  const fs::path dir = make_voc_folder("read");
  const RgbImage raw = read_jpeg((dir / "JPEGImages" / "000001.jpg").string());
  EXPECT_EQ(raw.width, 80);
  EXPECT_EQ(raw.height, 60);
  EXPECT_NEAR(raw.rgb[static_cast<size_t>((30 * 80 + 10) * 3)], 230, 8);      // red half
  EXPECT_NEAR(raw.rgb[static_cast<size_t>((30 * 80 + 70) * 3 + 2)], 230, 8);  // blue half

  VocOptions o;
  o.short_side = 120;  // x2
  o.max_side = 1000;
  o.flip = false;
  VocDetection voc(dir.string(), o, 1);
  EXPECT_EQ(voc.train_size(), 2);
  EXPECT_EQ(voc.heldout_size(), 1);
  EXPECT_EQ(voc.num_classes(), 20);
  const DetectionImage im = voc.load("000001", false);
  EXPECT_EQ(im.height, 120);
  EXPECT_EQ(im.width, 160);
  EXPECT_FLOAT_EQ(im.scale, 2.0f);
  ASSERT_EQ(im.objects.size(), 2u);
  EXPECT_EQ(im.objects[0].box, (Box{0, 0, 80, 60}));
  // Normalised red on the left: R channel high, B low.
  EXPECT_GT(im.pixels[static_cast<size_t>(60 * 160 + 20)], 1.0f);
  EXPECT_LT(im.pixels[static_cast<size_t>((2 * 120 + 60) * 160 + 20)], -1.0f);
  // Flipped: blue on the left, boxes mirrored.
  const DetectionImage f = voc.load("000001", true);
  EXPECT_LT(f.pixels[static_cast<size_t>(60 * 160 + 20)], -1.0f);
  EXPECT_EQ(f.objects[0].box, (Box{80, 0, 160, 60}));
  // The longer side is capped.
  EXPECT_FLOAT_EQ(resize_scale(60, 80, 600, 100), 1.25f);
  EXPECT_FLOAT_EQ(resize_scale(60, 80, 30, 1000), 0.5f);
  // Held-out and an epoch of training images.
  EXPECT_EQ(voc.heldout(0)->objects[0].label, 20);
  EXPECT_FALSE(voc.heldout(1).has_value());
  std::multiset<size_t> counts;
  for (int i = 0; i < 4; ++i) counts.insert(voc.next_train().objects.size());
  EXPECT_EQ(counts, (std::multiset<size_t>{1, 1, 2, 2}));
  EXPECT_EQ(voc.epoch(), 2);
  fs::remove_all(dir);
}

TEST(DetectionData, BadDataSpecsAreClearErrors) {
  const fs::path dir = make_voc_folder("check");
  EXPECT_NO_THROW(check_detection_source("synthetic"));
  EXPECT_NO_THROW(check_detection_source("voc:" + dir.string()));
  EXPECT_NO_THROW(check_detection_source(dir.string()));
  EXPECT_THROW(check_detection_source("imagenet"), std::invalid_argument);
  EXPECT_THROW(check_detection_source("voc:"), std::invalid_argument);
  EXPECT_THROW(check_detection_source("voc:/no/such/folder"), std::invalid_argument);
  fs::remove(dir / "ImageSets" / "Main" / "val.txt");
  try {
    check_detection_source("voc:" + dir.string());
    ADD_FAILURE() << "no error for a folder without val.txt";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("val.txt"), std::string::npos) << e.what();
  }
  // The spec's check says the same before anything is built.
  const auto* spec = find_workload("faster_rcnn");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.data = "voc:" + dir.string();
  EXPECT_THROW(spec->check(wc), std::invalid_argument);
  wc.data = "synthetic";
  wc.preset = "huge";
  EXPECT_THROW(spec->check(wc), std::invalid_argument);
  fs::remove_all(dir);
}

TEST(DetectionData, TinyTrainsAndEvaluatesOnAVocFolder) {
  const fs::path dir = make_voc_folder("train");
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.data = "voc:" + dir.string();
  auto w = find_workload("faster_rcnn")->create(wc);
  // VOC's 20 classes + background, whatever the preset's synthetic count.
  EXPECT_EQ(dynamic_cast<FasterRCNN&>(w->model()).config().num_classes, 21);
  LoopOptions lo;
  lo.warmup = 0;
  lo.iterations = 2;
  const LoopResult r = run_training(*w, lo);
  ASSERT_FALSE(r.failed) << r.error;
  const Quality q = w->evaluate(-1);
  EXPECT_EQ(q.metric, "mAP@0.5");
  EXPECT_GE(q.value, 0.0);
  EXPECT_LE(q.value, 1.0);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- the model

namespace {

// Parameters in closed form, independent of the model code: a ResNet C4 trunk, the RPN, layer4
// and the two linear layers (frozen batch norm holds buffers only).
int64_t faster_rcnn_formula(int64_t w, const std::array<int64_t, 3>& blocks, int64_t head_blocks, int64_t classes) {
  auto bottleneck = [](int64_t in, int64_t width, bool down) {
    return in * width + 9 * width * width + width * 4 * width + (down ? in * 4 * width : 0);
  };
  int64_t n = 3 * w * 49;  // conv1 7x7
  int64_t in = w;
  for (int s = 0; s < 3; ++s) {
    for (int64_t b = 0; b < blocks[static_cast<size_t>(s)]; ++b) {
      n += bottleneck(in, w << s, b == 0);
      in = 4 * (w << s);
    }
  }
  const int64_t trunk = in, anchors = 9;
  n += trunk * trunk * 9 + trunk;          // rpn.conv 3x3 + bias
  n += trunk * 2 * anchors + 2 * anchors;  // rpn.cls_logits
  n += trunk * 4 * anchors + 4 * anchors;  // rpn.bbox_pred
  for (int64_t b = 0; b < head_blocks; ++b) {
    n += bottleneck(in, 8 * w, b == 0);
    in = 32 * w;
  }
  return n + in * classes + classes + in * 4 * classes + 4 * classes;  // cls_score, bbox_pred
}

int64_t count(const std::string& preset) {
  return FasterRCNN(faster_rcnn_config(preset), engine::Device::meta(), 1).parameter_count();
}

}  // namespace

TEST(FasterRcnn, FullPresetParameterCount) {
  // ResNet-101 conv1..layer4 convolutions (42,394,816), RPN 9,493,558, heads 215,145.
  EXPECT_EQ(faster_rcnn_formula(64, {3, 4, 23}, 3, 21), 52'103'519);
  EXPECT_EQ(count("full"), 52'103'519);
  EXPECT_EQ(count("small"), faster_rcnn_formula(64, {3, 4, 6}, 3, 21));
  EXPECT_EQ(count("tiny"), faster_rcnn_formula(8, {1, 1, 1}, 1, 7));
  // What `trainscope list` shows: built through the registry on the meta device.
  const auto* spec = find_workload("faster_rcnn");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "full";
  wc.device = engine::Device::meta();
  EXPECT_EQ(spec->create(wc)->model().parameter_count(), 52'103'519);
  for (const char* p : {"tiny", "small", "full"}) {
    ASSERT_NE(spec->preset(p), nullptr) << p;
    EXPECT_FALSE(spec->preset(p)->table.empty());
  }
  EXPECT_EQ(spec->preset("full")->default_batch, 1);
}

TEST(FasterRcnn, RegisteredInTbdOrder) {
  // TBD's order; the workloads not built yet are simply absent.
  const std::vector<std::string> tbd = {"resnet50",    "inception_v3", "seq2seq", "transformer",
                                        "faster_rcnn", "deepspeech2",  "wgan",    "a3c"};
  std::vector<std::string> expected;
  const auto names = workload_names();
  for (const auto& n : tbd) {
    if (std::find(names.begin(), names.end(), n) != names.end()) expected.push_back(n);
  }
  EXPECT_EQ(names, expected);
  EXPECT_NE(std::find(names.begin(), names.end(), "faster_rcnn"), names.end());
}

TEST(FasterRcnn, ModulesAreNamedForPerLayerTables) {
  FasterRCNN m(faster_rcnn_config("full"), engine::Device::meta(), 1);
  std::map<std::string, engine::Tensor> params;
  for (const auto& [name, t] : m.named_parameters()) params[name] = t;
  for (const char* n :
       {"backbone.conv1.weight", "backbone.layer1.0.downsample.0.weight", "backbone.layer3.5.conv2.weight",
        "backbone.layer3.22.conv3.weight", "rpn.conv.weight", "rpn.conv.bias", "rpn.cls_logits.weight",
        "rpn.bbox_pred.bias", "roi_head.layer4.0.conv1.weight", "roi_head.layer4.2.conv3.weight",
        "roi_head.cls_score.weight", "roi_head.bbox_pred.bias"}) {
    EXPECT_TRUE(params.contains(n)) << n;
  }
  EXPECT_FALSE(params.contains("backbone.layer3.23.conv1.weight"));
  EXPECT_FALSE(params.contains("backbone.layer4.0.conv1.weight"));
  EXPECT_FALSE(params.contains("backbone.bn1.weight"));  // frozen batch norm: buffers
  std::set<std::string> buffers;
  for (const auto& [name, t] : m.named_buffers()) buffers.insert(name);
  EXPECT_TRUE(buffers.contains("backbone.bn1.running_var"));
  EXPECT_TRUE(buffers.contains("roi_head.layer4.0.downsample.1.weight"));
  EXPECT_EQ(params["rpn.cls_logits.weight"].shape(), (engine::Shape{18, 1024, 1, 1}));
  EXPECT_EQ(params["rpn.bbox_pred.weight"].shape(), (engine::Shape{36, 1024, 1, 1}));
  EXPECT_EQ(params["roi_head.bbox_pred.weight"].shape(), (engine::Shape{84, 2048}));
  // Detectron's FREEZE_AT 2: conv1 and layer1 do not train.
  EXPECT_FALSE(params["backbone.conv1.weight"].requires_grad());
  EXPECT_FALSE(params["backbone.layer1.2.conv3.weight"].requires_grad());
  EXPECT_TRUE(params["backbone.layer2.0.conv1.weight"].requires_grad());
  // MSRA ResNet: the stride-2 in the first 1x1 of a stage.
  for (const auto* mod : m.modules()) {
    if (mod->path() == "backbone.layer2.0.conv1" || mod->path() == "roi_head.layer4.0.conv1") {
      EXPECT_EQ(static_cast<const engine::nn::Conv2d*>(mod)->options().params.stride_h, 2) << mod->path();
    }
    if (mod->path() == "backbone.layer2.0.conv2") {
      EXPECT_EQ(static_cast<const engine::nn::Conv2d*>(mod)->options().params.stride_h, 1);
    }
  }
}

namespace {

std::unique_ptr<FasterRcnnWorkload> tiny_workload(FasterRcnnConfig cfg, uint64_t seed, int64_t batch) {
  SyntheticDetectionOptions so;
  so.height = cfg.short_side;
  so.width = cfg.synthetic_width;
  so.classes = cfg.num_classes - 1;
  so.min_object = cfg.min_object;
  so.max_object = cfg.max_object;
  auto model = std::make_shared<FasterRCNN>(cfg, engine::Device::cpu(), seed);
  return std::make_unique<FasterRcnnWorkload>(model, std::make_unique<SyntheticDetection>(so, seed), batch, seed);
}

}  // namespace

TEST(FasterRcnn, OneStepGivesEveryTrainableParameterAGradient) {
  for (bool roi_pool : {false, true}) {
    SCOPED_TRACE(roi_pool ? "RoIPool" : "RoIAlign");
    FasterRcnnConfig cfg = faster_rcnn_config("tiny");
    cfg.roi_pool = roi_pool;
    auto w = tiny_workload(cfg, 3, 2);
    const Batch b = w->next_batch();
    EXPECT_EQ(b.inputs.shape(), (engine::Shape{2, 3, 72, 96}));
    engine::Tensor loss = w->forward_loss(b);
    EXPECT_TRUE(w->calibrated());
    const auto& l = w->last_losses();
    for (const engine::Tensor* t : {&l.rpn_objectness, &l.rpn_box, &l.roi_class, &l.roi_box}) {
      EXPECT_TRUE(std::isfinite(t->item()));
      EXPECT_GE(t->item(), 0.0f);
    }
    EXPECT_NEAR(loss.item(), l.rpn_objectness.item() + l.rpn_box.item() + l.roi_class.item() + l.roi_box.item(), 1e-4);
    // Untrained objectness is near chance: -log(1/2).
    EXPECT_NEAR(l.rpn_objectness.item(), std::log(2.0f), 0.1f);
    EXPECT_EQ(l.rpn_sampled, 2 * cfg.rpn_targets.batch);
    EXPECT_GT(l.rpn_positives, 0);
    EXPECT_EQ(l.rois, 2 * cfg.roi_samples.batch);
    EXPECT_GT(l.roi_foreground, 0);
    EXPECT_LE(l.roi_foreground, 2 * 8);  // 25% of 32 per image
    loss.backward();
    for (const auto& [name, p] : w->model().named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_EQ(p.grad().shape(), p.shape()) << name;
    }
    w->zero_grad();
  }
}

TEST(FasterRcnn, FrozenBatchNormTakesItsStatisticsOnceAndNeverTrains) {
  auto w = tiny_workload(faster_rcnn_config("tiny"), 4, 2);
  const auto& model = dynamic_cast<FasterRCNN&>(w->model());
  auto buffer = [&](const std::string& name) {
    for (const auto& [n, t] : model.named_buffers()) {
      if (n == name) return t.to_vector();
    }
    ADD_FAILURE() << name;
    return std::vector<float>{};
  };
  EXPECT_EQ(buffer("backbone.bn1.running_var"), std::vector<float>(8, 1.0f));
  LoopOptions lo;
  lo.warmup = 0;
  lo.iterations = 3;
  ASSERT_FALSE(run_training(*w, lo).failed);
  const auto var = buffer("backbone.bn1.running_var"), head_mean = buffer("roi_head.layer4.0.bn3.running_mean");
  EXPECT_NE(var, std::vector<float>(8, 1.0f));
  EXPECT_NE(head_mean, std::vector<float>(head_mean.size(), 0.0f));
  for (float v : var) EXPECT_GT(v, 0.0f);
  ASSERT_FALSE(run_training(*w, lo).failed);
  EXPECT_EQ(buffer("backbone.bn1.running_var"), var);  // set once, then fixed
  EXPECT_EQ(buffer("backbone.bn1.weight"), std::vector<float>(8, 1.0f));
}

TEST(FasterRcnn, DetectionsAreBoundedClippedAndScored) {
  FasterRcnnConfig cfg = faster_rcnn_config("tiny");
  cfg.detections_per_image = 5;
  cfg.score_threshold = 0.0f;  // untrained scores are near 1/7: keep them all
  auto w = tiny_workload(cfg, 5, 2);
  w->calibrate(w->next_batch());
  const auto& model = dynamic_cast<FasterRCNN&>(w->model());
  std::vector<DetectionImage> ims = {*w->data().heldout(0), *w->data().heldout(1)};
  const Batch b = make_detection_batch(ims, engine::Device::cpu());
  engine::NoGradScope no_grad;
  const auto dets = model.detect(b.inputs, decode_detection_labels(b.labels));
  ASSERT_EQ(dets.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(dets[i].size(), 5u);
    for (size_t k = 0; k < dets[i].size(); ++k) {
      const auto& d = dets[i][k];
      EXPECT_EQ(d.image, static_cast<int64_t>(i));
      EXPECT_GE(d.label, 1);
      EXPECT_LT(d.label, 7);
      EXPECT_GE(d.box.x1, 0);
      EXPECT_LE(d.box.x2, 96);
      EXPECT_LE(d.box.y2, 72);
      if (k > 0) {
        EXPECT_LE(d.score, dets[i][k - 1].score);
      }
    }
  }
}

// Memory lands in its categories. At the training peak, activations (forward) and their
// gradients (backward) dominate and `other` is next to nothing; per-layer activation bytes are
// one iteration's (the calibration forwards run at creation, outside the iterations); and
// evaluation tags its feature maps activations, counts in no iteration, and leaves the training
// peak alone. Regression: evaluation allocated as `other` and, its test-time RoIs outnumbering
// the training ones, set the run's peak (small: 231 MiB `other`, 20 B activations).
TEST(FasterRcnn, MemoryLandsInItsCategories) {
  using vocabulary::Category;
  // One op thread, whatever the machine: oneDNN's scratchpad (workspace, kept for the run) grows
  // with the thread count, and on many cores would crowd the tiny preset's activations.
  engine::OpThreadsScope threads(1);
  auto& ledger = memprof::Ledger::global();
  ledger.clear();
  WorkloadConfig wc;
  wc.preset = "tiny";
  auto w = find_workload("faster_rcnn")->create(wc);
  auto& fw = dynamic_cast<FasterRcnnWorkload&>(*w);
  EXPECT_TRUE(fw.calibrated());
  LoopOptions lo;
  lo.warmup = 0;
  lo.iterations = 2;
  const LoopResult r = run_training(*w, lo);
  ASSERT_FALSE(r.failed) << r.error;
  auto at = [](const memprof::Snapshot& s, Category c) { return s.bytes[static_cast<size_t>(c)]; };
  auto share = [&](const memprof::Snapshot& s, Category c) {
    return static_cast<double>(at(s, c)) / static_cast<double>(s.total);
  };
  const memprof::Snapshot& train = r.memory_peak;
  std::fprintf(stderr, "training peak %lld B: activations %.2f, activation_grads %.2f, workspace %.2f, other %.4f\n",
               static_cast<long long>(train.total), share(train, Category::activations),
               share(train, Category::activation_grads), share(train, Category::workspace),
               share(train, Category::other));
  EXPECT_EQ(at(train, Category::weights), 4 * w->model().parameter_count());
  EXPECT_GT(share(train, Category::activations), 0.25);
  EXPECT_GT(share(train, Category::activations) + share(train, Category::activation_grads), 0.5);
  EXPECT_LT(share(train, Category::other), 0.01);

  // The pooler's activations per iteration: its [R, C, P, P] output, plus the plain copy of the
  // [N, C, h, w] features RoIAlign takes, at most; calibration's forwards would add 4x as much.
  const FasterRcnnConfig& cfg = dynamic_cast<FasterRCNN&>(w->model()).config();
  const int64_t rois = 2 * cfg.roi_samples.batch, c = cfg.trunk_channels();
  ASSERT_EQ(fw.last_losses().rois, rois);
  const int64_t pooled = 4 * rois * c * cfg.pooled_size * cfg.pooled_size;
  const int64_t features = 4 * 2 * c * ((cfg.short_side + 15) / 16) * ((cfg.synthetic_width + 15) / 16);
  auto pooler_bytes = [&] {
    for (const auto& o : ledger.per_owner(Category::activations)) {
      if (o.owner == "roi_head.pooler") return o.bytes_allocated_per_iteration;
    }
    return int64_t{-1};
  };
  const int64_t pooler_training = pooler_bytes();
  EXPECT_GE(pooler_training, pooled);
  EXPECT_LE(pooler_training, pooled + features);

  // Evaluation: what it adds at its peak is feature maps, not `other`.
  ledger.reset_peak();
  const memprof::Snapshot before = ledger.current();
  const Quality q = run_evaluation(*w, 4);
  EXPECT_EQ(q.metric, "mAP@0.5");
  const memprof::Snapshot eval = ledger.peak();
  const auto added = static_cast<double>(eval.total - before.total);
  ASSERT_GT(added, 0);
  EXPECT_GT(static_cast<double>(at(eval, Category::activations) - at(before, Category::activations)), 0.5 * added);
  EXPECT_LT(static_cast<double>(at(eval, Category::other) - at(before, Category::other)), 0.01 * added);
  EXPECT_EQ(ledger.iteration(), -1);
  // 4 images x 50 test proposals: more than training's RoIs, yet no iteration's.
  EXPECT_EQ(pooler_bytes(), pooler_training);
}

// The tiny detector learns the synthetic shapes: the loss falls and held-out mAP@0.5 rises well
// above what the untrained model scores.
TEST(FasterRcnn, TinyConvergesOnSyntheticShapes) {
  constexpr int64_t kSteps = 800;
  constexpr double kMapThreshold = 0.2;
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 1;
  auto w = find_workload("faster_rcnn")->create(wc);
  const double before = w->evaluate(32).value;
  LoopOptions lo;
  lo.warmup = 0;
  lo.iterations = kSteps;
  const LoopResult r = run_training(*w, lo);
  ASSERT_FALSE(r.failed) << r.error;
  auto mean_loss = [&](int64_t from, int64_t n) {
    double s = 0;
    for (int64_t i = from; i < from + n; ++i) s += r.iterations[static_cast<size_t>(i)].loss;
    return s / static_cast<double>(n);
  };
  const double first = mean_loss(0, 10), last = mean_loss(kSteps - 100, 100);
  const double after = w->evaluate(32).value;
  std::fprintf(stderr, "faster_rcnn tiny: loss %.3f -> %.3f, held-out mAP@0.5 %.3f -> %.3f after %lld steps\n", first,
               last, before, after, static_cast<long long>(kSteps));
  EXPECT_LT(last, 0.6 * first);
  EXPECT_GT(after, kMapThreshold);
  EXPECT_GT(after, before + 0.15);
}
