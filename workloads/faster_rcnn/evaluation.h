#pragma once
// Detection quality: mean average precision at IoU 0.5 as the Pascal VOC devkit computes it
// from 2010 on (all-point interpolation: the area under the precision envelope), with VOC's
// rules: a detection matches the unmatched ground truth of its class it overlaps most (IoU >=
// threshold); a second detection of a matched box is a false positive; detections matching a
// "difficult" box count neither way, and difficult boxes are not among the positives.
#include <cstdint>
#include <vector>

#include "workloads/data/detection_data.h"

namespace ts::workloads::frcnn {

struct Detection {
  int64_t image = 0;  // index into the ground-truth list
  int32_t label = 0;  // 1..classes
  float score = 0;
  Box box;
};

// Area under the precision envelope: recall and precision per ranked detection (recall
// non-decreasing), as VOC2010+'s devkit (the envelope at recall r is the best precision at any
// recall >= r).
double average_precision(const std::vector<double>& recall, const std::vector<double>& precision);

struct MapResult {
  double map = 0;          // mean over the classes with at least one non-difficult box
  std::vector<double> ap;  // per label 1..classes at [label - 1]; -1 where a class has no positives
  int64_t classes_present = 0;
};

MapResult mean_average_precision(const std::vector<Detection>& detections,
                                 const std::vector<std::vector<ObjectBox>>& ground_truth, int64_t classes,
                                 float iou_threshold = 0.5f);

}  // namespace ts::workloads::frcnn
