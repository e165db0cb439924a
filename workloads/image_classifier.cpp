#include "workloads/image_classifier.h"

#include "engine/context.h"
#include "engine/ops.h"

namespace ts::workloads {

using engine::Tensor;

namespace {
constexpr int64_t kReferenceBatch = 256;  // the batch the base learning rate is given for

engine::optim::SgdOptions sgd_options(const engine::optim::LrSchedule& lr) {
  engine::optim::SgdOptions o;
  o.lr = lr;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  return o;
}
}  // namespace

engine::optim::LrSchedule default_lr_schedule(int64_t batch) {
  engine::optim::LrSchedule lr;
  lr.base_lr = 0.1 * static_cast<double>(batch) / static_cast<double>(kReferenceBatch);
  lr.warmup_steps = 5;
  return lr;
}

PresetTable default_optimizer_rows() {
  // Read from the options the classifier builds, so that the rows state what runs.
  const engine::optim::SgdOptions o = sgd_options(default_lr_schedule(kReferenceBatch));
  return {{"optimizer", "SGD momentum " + table_number(o.momentum) + ", weight decay " +
                            table_exponent(o.weight_decay) + ", nesterov " + (o.nesterov ? "on" : "off")},
          {"learning_rate", table_number(o.lr.base_lr) + " x batch/" + std::to_string(kReferenceBatch) + ", " +
                                std::to_string(o.lr.warmup_steps) + "-iteration linear warm-up, constant"}};
}

ImageClassifier::ImageClassifier(std::shared_ptr<engine::nn::Module> model, Forward forward,
                                 std::unique_ptr<ImageSource> data, int64_t batch, const engine::optim::LrSchedule& lr,
                                 TrainForward train_forward, float aux_weight)
    : model_(std::move(model)),
      forward_(std::move(forward)),
      train_forward_(std::move(train_forward)),
      aux_weight_(aux_weight),
      data_(std::move(data)),
      batch_(batch),
      sgd_(model_->parameters(), sgd_options(lr)) {
  if (batch <= 0) throw std::invalid_argument("batch size must be positive");
}

Tensor ImageClassifier::forward_loss(const Batch& batch) {
  TrainOutputs out;
  if (train_forward_) {
    out = train_forward_(batch.inputs);
  } else {
    out.logits = forward_(batch.inputs);
  }
  static const std::string loss_path = "loss";
  static const auto loss_id = engine::op_name(loss_path);
  engine::OwnerScope owner(&loss_path, loss_id);
  Tensor loss = engine::ops::softmax_cross_entropy(out.logits, batch.labels);
  if (out.aux_logits.defined()) {
    loss = engine::ops::add(
        loss, engine::ops::scale(engine::ops::softmax_cross_entropy(out.aux_logits, batch.labels), aux_weight_));
  }
  return loss;
}

Quality ImageClassifier::evaluate(int64_t batches) {
  model_->train(false);
  engine::NoGradScope no_grad;
  int64_t correct = 0, total = 0;
  const int64_t limit = batches < 0 ? INT64_MAX : batches;
  for (int64_t i = 0; i < limit; ++i) {
    Batch b = data_->heldout(i, batch_);
    if (b.samples == 0) break;
    const std::vector<float> logits = forward_(b.inputs).to_vector();
    const std::vector<float> labels = b.labels.to_vector();
    const int64_t k = static_cast<int64_t>(logits.size()) / b.samples;
    for (int64_t n = 0; n < b.samples; ++n) {
      int64_t best = 0;
      for (int64_t j = 1; j < k; ++j) {
        if (logits[static_cast<size_t>(n * k + j)] > logits[static_cast<size_t>(n * k + best)]) best = j;
      }
      correct += best == static_cast<int64_t>(labels[static_cast<size_t>(n)]);
      ++total;
    }
  }
  model_->train(true);
  return Quality{"accuracy", total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0, "fraction", true};
}

}  // namespace ts::workloads
