#include "engine/ctc_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ts::engine::ctc {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("ctc_loss: " + msg); }

// fp32 values that must be integers in [lo, hi].
std::vector<int64_t> as_integers(const Tensor& t, const char* what, int64_t lo, int64_t hi) {
  const std::vector<float> v = t.to_vector();
  std::vector<int64_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (!(x == std::floor(x)) || x < static_cast<float>(lo) || x > static_cast<float>(hi)) {
      fail(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(x) + " is not an integer in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    r[i] = static_cast<int64_t>(x);
  }
  return r;
}

}  // namespace

double Plan::weight(int64_t i, Backend::CtcReduction reduction) const {
  if (reduction != Backend::CtcReduction::mean) return 1.0;
  return 1.0 / (static_cast<double>(n) * static_cast<double>(std::max<int64_t>(lengths[static_cast<size_t>(i)], 1)));
}

Plan plan(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths, const Tensor& target_lengths,
          int64_t blank) {
  if (logits.dim() != 3) fail("logits must be [T, N, K], got " + shape_str(logits.shape()));
  Plan p;
  p.t_max = logits.size(0);
  p.n = logits.size(1);
  p.k = logits.size(2);
  if (p.k < 1) fail("logits have no classes: " + shape_str(logits.shape()));
  if (blank < 0 || blank >= p.k) {
    fail("blank " + std::to_string(blank) + " is not a class in [0, " + std::to_string(p.k) + ")");
  }
  if (input_lengths.dim() != 1 || input_lengths.size(0) != p.n || target_lengths.dim() != 1 ||
      target_lengths.size(0) != p.n) {
    fail("input_lengths " + shape_str(input_lengths.shape()) + " and target_lengths " +
         shape_str(target_lengths.shape()) + " must both be [N] = [" + std::to_string(p.n) + "]");
  }
  if (targets.dim() != 1) {
    fail("targets must be 1-D (the label sequences concatenated), got " + shape_str(targets.shape()));
  }
  p.frames = as_integers(input_lengths, "input_lengths", 0, p.t_max);
  p.lengths = as_integers(target_lengths, "target_lengths", 0, std::numeric_limits<int32_t>::max());
  p.offsets.resize(p.lengths.size());
  int64_t total = 0;
  for (size_t i = 0; i < p.lengths.size(); ++i) {
    p.offsets[i] = total;
    total += p.lengths[i];
    p.max_length = std::max(p.max_length, p.lengths[i]);
  }
  if (total != targets.size(0)) {
    fail("target_lengths add up to " + std::to_string(total) + " but targets hold " + std::to_string(targets.size(0)));
  }
  p.labels = as_integers(targets, "targets", 0, p.k - 1);
  for (size_t i = 0; i < p.labels.size(); ++i) {
    if (p.labels[i] == blank) fail("targets[" + std::to_string(i) + "] is the blank label " + std::to_string(blank));
  }
  return p;
}

void check_backward(const Tensor& dloss, const Tensor& grad) {
  if (dloss.numel() != 1 || grad.dim() != 3) {
    fail("backward: dloss must be [1] and grad [T, N, K], got " + shape_str(dloss.shape()) + " and " +
         shape_str(grad.shape()));
  }
}

}  // namespace ts::engine::ctc
