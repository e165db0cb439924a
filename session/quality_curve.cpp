#include "session/quality_curve.h"

namespace ts::session {

QualityCurve::QualityCurve(int64_t warmup, int64_t eval_every, std::optional<double> target)
    : warmup_(warmup), eval_every_(eval_every), target_(target) {}

bool QualityCurve::count(const workloads::IterationResult& it) {
  iterations_ += 1;
  training_ns_ += it.end_ns - it.start_ns;
  return eval_every_ > 0 && !it.warmup && (it.index - warmup_ + 1) % eval_every_ == 0;
}

void QualityCurve::add(const workloads::Quality& q) {
  higher_is_better_ = q.higher_is_better;
  unit_ = q.unit;
  points_.push_back({iterations_, static_cast<double>(training_ns_) * 1e-9, q.value});
}

std::optional<QualityPoint> QualityCurve::reached() const {
  if (!target_) return std::nullopt;
  for (const QualityPoint& p : points_) {
    if (higher_is_better_ ? p.value >= *target_ : p.value <= *target_) return p;
  }
  return std::nullopt;
}

std::vector<workloads::Metric> QualityCurve::run_metrics() const {
  std::vector<workloads::Metric> m;
  if (!target_) return m;
  m.push_back({"quality_target", *target_, unit_});
  if (const auto p = reached()) {
    m.push_back({"time_to_quality_s", p->training_s, "s"});
    m.push_back({"iterations_to_quality", static_cast<double>(p->iterations), "iterations"});
  }
  return m;
}

}  // namespace ts::session
