// The ctc family's ops (Deep Speech 2): the loss, and the host-side greedy decoder and edit
// distance its quality metric (character error rate) needs.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

// The backend computes d loss / d logits with the loss (one pass over alpha and beta), so
// backward only scales it by the incoming gradient.
struct CtcLossBackward : Node {
  Tensor grad;
  Tensor logits;  // only so that a second backward through this one fails loudly
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(grad).ctc_loss_backward(g[0], grad);
    add_op_work(memory_work({&grad, &dx}));
    mark_not_differentiable("ctc_loss_backward", {&g[0], &logits}, {&dx});
    return {dx};
  }
  void release_saved() override { grad = logits = Tensor(); }
  std::string name() const override { return "CtcLossBackward"; }
};

void check_data_arg(const Tensor& t, const Tensor& logits, const char* what) {
  check_defined(t, "ctc_loss", what);
  check_same_device(logits, t, "ctc_loss");
  if (t.dim() != 1) fail("ctc_loss", std::string(what) + " must be 1-D, got " + shape_str(t.shape()));
  if (t.requires_grad() && thread_context().grad_enabled) {
    fail("ctc_loss", std::string(what) + " hold integers and get no gradient; pass them detached");
  }
}

}  // namespace

Tensor ctc_loss(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths, const Tensor& target_lengths,
                const CtcLossOptions& options, Tensor* nll) {
  static const auto name = op_name("ctc_loss");
  check_defined(logits, "ctc_loss", "logits");
  if (logits.dim() != 3) fail("ctc_loss", "logits must be [T, N, K] (time-major), got " + shape_str(logits.shape()));
  check_data_arg(targets, logits, "targets");
  check_data_arg(input_lengths, logits, "input_lengths");
  check_data_arg(target_lengths, logits, "target_lengths");
  const int64_t n = logits.size(1);
  if (input_lengths.size(0) != n || target_lengths.size(0) != n) {
    fail("ctc_loss", "logits " + shape_str(logits.shape()) + " need input_lengths and target_lengths of [" +
                         std::to_string(n) + "], got " + detail::shapes({&input_lengths, &target_lengths}));
  }
  OpScope scope(name);
  const bool want_grad = needs_grad({&logits});
  Backend::CtcResult r =
      backend_of(logits).ctc_loss_forward(logits, targets, input_lengths, target_lengths, options.blank,
                                          options.reduction, options.zero_infinity, want_grad);
  scope.add_work(other_work(bytes_of({&logits, &targets, &r.grad, &r.loss})));
  if (want_grad) {
    auto node = std::make_shared<CtcLossBackward>();
    node->grad = r.grad;
    node->logits = logits;
    connect(node, {&logits}, {&r.loss});
  }
  if (nll) *nll = r.nll;
  return r.loss;
}

std::vector<std::vector<int64_t>> ctc_greedy_decode(const Tensor& logits, const Tensor& input_lengths, int64_t blank) {
  check_defined(logits, "ctc_greedy_decode", "logits");
  check_defined(input_lengths, "ctc_greedy_decode", "input_lengths");
  if (logits.dim() != 3 || input_lengths.dim() != 1 || input_lengths.size(0) != logits.size(1)) {
    fail("ctc_greedy_decode",
         "expected logits [T, N, K] and input_lengths [N], got " + detail::shapes({&logits, &input_lengths}));
  }
  const int64_t t_max = logits.size(0), n = logits.size(1), k_count = logits.size(2);
  const std::vector<float> z = logits.to_vector();
  const std::vector<float> len = input_lengths.to_vector();
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float lf = len[static_cast<size_t>(i)];
    if (!(lf >= 0.0f) || lf > static_cast<float>(t_max) || lf != static_cast<float>(static_cast<int64_t>(lf))) {
      fail("ctc_greedy_decode", "input_lengths[" + std::to_string(i) + "] = " + std::to_string(lf) +
                                    " is not a frame count in [0, " + std::to_string(t_max) + "]");
    }
    auto& seq = out[static_cast<size_t>(i)];
    int64_t prev = -1;
    for (int64_t t = 0; t < static_cast<int64_t>(lf); ++t) {
      const float* row = z.data() + (t * n + i) * k_count;
      const auto best = static_cast<int64_t>(std::max_element(row, row + k_count) - row);
      if (best != prev && best != blank) seq.push_back(best);
      prev = best;
    }
  }
  return out;
}

int64_t edit_distance(const std::vector<int64_t>& hypothesis, const std::vector<int64_t>& reference) {
  // One row of the Wagner-Fischer table.
  const size_t m = reference.size();
  std::vector<int64_t> row(m + 1);
  for (size_t j = 0; j <= m; ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= hypothesis.size(); ++i) {
    int64_t diag = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= m; ++j) {
      const int64_t up = row[j];
      const int64_t sub = diag + (hypothesis[i - 1] == reference[j - 1] ? 0 : 1);
      row[j] = std::min({sub, up + 1, row[j - 1] + 1});
      diag = up;
    }
  }
  return row[m];
}

double error_rate(const std::vector<std::vector<int64_t>>& hypotheses,
                  const std::vector<std::vector<int64_t>>& references) {
  if (hypotheses.size() != references.size()) {
    throw std::invalid_argument("error_rate: " + std::to_string(hypotheses.size()) + " hypotheses for " +
                                std::to_string(references.size()) + " references");
  }
  int64_t edits = 0, length = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    edits += edit_distance(hypotheses[i], references[i]);
    length += static_cast<int64_t>(references[i].size());
  }
  return static_cast<double>(edits) / static_cast<double>(std::max<int64_t>(length, 1));
}

}  // namespace ts::engine::ops
