#pragma once
// Evaluation during training (`--eval-every N`, docs/cli.md "Time to quality"): which iterations
// are followed by an evaluation, and when the quality first reached the target. Asynchronous
// training trades quality per step for steps per second, so throughput alone cannot rank the
// parameter server's modes; the time to a stated quality can.
// Training time counts every iteration, warm-up included (it trains the model too), and no
// evaluation (which runs between iterations, outside their spans).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workloads/training_loop.h"
#include "workloads/workload.h"

namespace ts::session {

struct QualityPoint {
  int64_t iterations = 0;  // trained so far, warm-up included
  double training_s = 0;   // their time
  double value = 0;
};

class QualityCurve {
 public:
  // `eval_every` 0: none during training. `target`: in the workload's direction (higher or lower
  // is better, as its Quality says).
  QualityCurve(int64_t warmup, int64_t eval_every, std::optional<double> target);

  // Counts a finished iteration's time; says whether an evaluation follows it (every
  // `eval_every`-th timed iteration).
  bool count(const workloads::IterationResult& it);
  // The quality measured after the last counted iteration.
  void add(const workloads::Quality& q);

  const std::vector<QualityPoint>& points() const { return points_; }
  // The first point at or past the target, if any.
  std::optional<QualityPoint> reached() const;
  // For the run: quality_target; time_to_quality_s and iterations_to_quality once reached.
  std::vector<workloads::Metric> run_metrics() const;

 private:
  int64_t warmup_, eval_every_;
  std::optional<double> target_;
  bool higher_is_better_ = true;
  std::string unit_;
  int64_t iterations_ = 0;
  int64_t training_ns_ = 0;
  std::vector<QualityPoint> points_;
};

}  // namespace ts::session
