#include "workloads/faster_rcnn/evaluation.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "workloads/faster_rcnn/boxes.h"

namespace ts::workloads::frcnn {

double average_precision(const std::vector<double>& recall, const std::vector<double>& precision) {
  if (recall.size() != precision.size()) throw std::invalid_argument("average_precision: lengths differ");
  // Sentinels (0, 0) and (1, 0), then the envelope from the right.
  std::vector<double> r{0.0}, p{0.0};
  r.insert(r.end(), recall.begin(), recall.end());
  p.insert(p.end(), precision.begin(), precision.end());
  r.push_back(1.0);
  p.push_back(0.0);
  for (size_t i = p.size() - 1; i > 0; --i) p[i - 1] = std::max(p[i - 1], p[i]);
  double ap = 0;
  for (size_t i = 1; i < r.size(); ++i) {
    if (r[i] != r[i - 1]) ap += (r[i] - r[i - 1]) * p[i];
  }
  return ap;
}

MapResult mean_average_precision(const std::vector<Detection>& detections,
                                 const std::vector<std::vector<ObjectBox>>& gt, int64_t classes, float iou_threshold) {
  MapResult res;
  res.ap.assign(static_cast<size_t>(classes), -1.0);
  double total = 0;
  for (int32_t c = 1; c <= classes; ++c) {
    int64_t positives = 0;
    std::vector<std::vector<char>> used(gt.size());
    for (size_t i = 0; i < gt.size(); ++i) {
      used[i].assign(gt[i].size(), 0);
      for (const auto& g : gt[i]) positives += g.label == c && !g.difficult;
    }
    if (positives == 0) continue;
    std::vector<const Detection*> dets;
    for (const auto& d : detections) {
      if (d.label != c) continue;
      if (d.image < 0 || d.image >= static_cast<int64_t>(gt.size()))
        throw std::invalid_argument("mAP: detection of an unknown image");
      dets.push_back(&d);
    }
    // Highest score first; ties keep their input order.
    std::stable_sort(dets.begin(), dets.end(),
                     [](const Detection* a, const Detection* b) { return a->score > b->score; });
    std::vector<double> recall, precision;
    int64_t tp = 0, fp = 0;
    for (const Detection* d : dets) {
      const auto& boxes = gt[static_cast<size_t>(d->image)];
      float best = -1;
      int64_t arg = -1;
      for (size_t k = 0; k < boxes.size(); ++k) {
        if (boxes[k].label != c) continue;
        const float v = box_iou(d->box, boxes[k].box);
        if (v > best) {
          best = v;
          arg = static_cast<int64_t>(k);
        }
      }
      if (arg >= 0 && best >= iou_threshold) {
        if (boxes[static_cast<size_t>(arg)].difficult) continue;  // neither true nor false
        char& u = used[static_cast<size_t>(d->image)][static_cast<size_t>(arg)];
        if (!u) {
          u = 1;
          ++tp;
        } else {
          ++fp;
        }
      } else {
        ++fp;
      }
      recall.push_back(static_cast<double>(tp) / static_cast<double>(positives));
      precision.push_back(static_cast<double>(tp) / static_cast<double>(tp + fp));
    }
    const double ap = average_precision(recall, precision);
    res.ap[static_cast<size_t>(c - 1)] = ap;
    total += ap;
    ++res.classes_present;
  }
  res.map = res.classes_present ? total / static_cast<double>(res.classes_present) : 0.0;
  return res;
}

}  // namespace ts::workloads::frcnn
