#include "workloads/deepspeech2/deepspeech2.h"

#include <algorithm>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/random.h"
#include "workloads/data/speech_data.h"

namespace ts::workloads {

using engine::Device;
using engine::Rng;
using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

DeepSpeech2Config deepspeech2_config(const std::string& preset) {
  DeepSpeech2Config c;
  if (preset == "full") return c;  // TBD's Deep Speech 2
  if (preset == "small") {
    // The same two convolutions (32 channels), seven bidirectional GRUs and fc; the GRUs at 512
    // units and 8 utterances a batch, for two cores.
    c.rnn_hidden = 512;
    c.batch = 8;
    return c;
  }
  if (preset == "tiny") {
    // Narrower everything, with shorter kernels (the convolutions dominate at this size) and a
    // constant, larger lr: the convergence test has seconds, not epochs.
    c.conv_channels = 8;
    c.conv0_kernel_t = 5;
    c.conv0_kernel_f = 21;
    c.conv1_kernel_t = 5;
    c.conv1_kernel_f = 11;
    c.rnn_layers = 2;
    c.rnn_hidden = 128;
    c.batch = 8;
    c.lr = 2e-3;
    c.lr_anneal = 1.0;
    return c;
  }
  throw std::invalid_argument("unknown deepspeech2 preset '" + preset + "' (tiny, small, full)");
}

int64_t deepspeech2_conv_out(int64_t n, int64_t stride) { return (n + stride - 1) / stride; }

int64_t deepspeech2_conv_bins(const DeepSpeech2Config& c) {
  return deepspeech2_conv_out(deepspeech2_conv_out(c.frequency_bins, c.conv0_stride_f), c.conv1_stride_f);
}

int64_t deepspeech2_output_frames(const DeepSpeech2Config& c, int64_t frames) {
  return deepspeech2_conv_out(deepspeech2_conv_out(frames, c.conv0_stride_t), c.conv1_stride_t);
}

int64_t deepspeech2_parameter_count(const DeepSpeech2Config& c) {
  const int64_t ch = c.conv_channels, h = c.rnn_hidden;
  const int64_t convs = ch * c.conv0_kernel_t * c.conv0_kernel_f + ch * ch * c.conv1_kernel_t * c.conv1_kernel_f;
  const int64_t conv_bn = 2 * 2 * ch;
  int64_t rnns = 0;
  for (int64_t l = 0; l < c.rnn_layers; ++l) {
    const int64_t in = l == 0 ? ch * deepspeech2_conv_bins(c) : h;
    rnns += 2 * (3 * h * (in + h) + 6 * h) + (l == 0 ? 0 : 2 * in);
  }
  return convs + conv_bn + rnns + h * c.classes + c.classes;
}

// ---------------------------------------------------------------- modules

BatchRnn::BatchRnn(int64_t input_size, int64_t hidden, bool batch_norm, Device device, Rng& rng) : Module(device) {
  if (batch_norm) bn_ = register_module("bn", std::make_shared<nn::BatchNorm2d>(input_size, device));
  nn::RnnOptions o;
  o.input_size = input_size;
  o.hidden_size = hidden;
  o.bidirectional = true;
  o.merge = nn::RnnOptions::Merge::sum;
  gru_ = register_module("gru", std::make_shared<nn::Gru>(o, device, rng));
}

Tensor BatchRnn::forward(const Tensor& x, const Tensor& lengths) const {
  auto s = scope();
  Tensor in = x;
  if (bn_) {
    const int64_t t = x.size(0), b = x.size(1), i = x.size(2);
    in = ops::reshape(bn_->forward(ops::reshape(x, {t * b, i})), {t, b, i});
  }
  return gru_->forward(in, lengths).y;
}

namespace {

nn::Conv2dOptions conv_options(int64_t in, int64_t out, int64_t kt, int64_t kf, int64_t st, int64_t sf) {
  nn::Conv2dOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel_h = kt;
  o.kernel_w = kf;
  o.params.stride_h = st;
  o.params.stride_w = sf;
  o.params.pad_h = (kt - 1) / 2;
  o.params.pad_w = (kf - 1) / 2;
  o.bias = false;  // batch norm follows
  return o;
}

}  // namespace

DeepSpeech2::DeepSpeech2(const DeepSpeech2Config& c, Device device, uint64_t seed) : Module(device), cfg_(c) {
  for (int64_t k : {c.conv0_kernel_t, c.conv0_kernel_f, c.conv1_kernel_t, c.conv1_kernel_f}) {
    // Even kernels would make the half-kernel padding asymmetric.
    if (k < 1 || k % 2 == 0) throw std::invalid_argument("deepspeech2: convolution kernels must be odd");
  }
  if (c.rnn_layers < 1) throw std::invalid_argument("deepspeech2: at least one recurrent layer");
  Rng rng(seed);
  const int64_t ch = c.conv_channels;
  conv0_ = register_module(
      "conv.0",
      std::make_shared<nn::Conv2d>(
          conv_options(1, ch, c.conv0_kernel_t, c.conv0_kernel_f, c.conv0_stride_t, c.conv0_stride_f), device, rng));
  bn0_ = register_module("bn.0", std::make_shared<nn::BatchNorm2d>(ch, device));
  conv1_ = register_module(
      "conv.1",
      std::make_shared<nn::Conv2d>(
          conv_options(ch, ch, c.conv1_kernel_t, c.conv1_kernel_f, c.conv1_stride_t, c.conv1_stride_f), device, rng));
  bn1_ = register_module("bn.1", std::make_shared<nn::BatchNorm2d>(ch, device));
  for (int64_t l = 0; l < c.rnn_layers; ++l) {
    const int64_t in = l == 0 ? ch * deepspeech2_conv_bins(c) : c.rnn_hidden;
    rnns_.push_back(
        register_module("rnns." + std::to_string(l), std::make_shared<BatchRnn>(in, c.rnn_hidden, l > 0, device, rng)));
  }
  fc_ = register_module("fc", std::make_shared<nn::Linear>(c.rnn_hidden, c.classes, device, rng));
}

Tensor DeepSpeech2::conv_block(const nn::Conv2d& conv, const nn::BatchNorm2d& bn, const Tensor& x,
                               const std::vector<int64_t>& lengths) const {
  Tensor y = ops::clipped_relu(bn.forward(conv.forward(x)), cfg_.relu_clip);
  const int64_t n = y.size(0), t = y.size(2);
  if (std::all_of(lengths.begin(), lengths.end(), [t](int64_t l) { return l >= t; })) return y;
  // The mask is 1 for t < length, 0 after; inputs, like the features it comes with.
  const int64_t per_step = y.size(3), per_sample = y.size(1) * t * per_step;
  std::vector<float> m(static_cast<size_t>(n * per_sample), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < y.size(1); ++c) {
      const auto begin = m.begin() + i * per_sample + c * t * per_step;
      std::fill(begin, begin + std::min(lengths[static_cast<size_t>(i)], t) * per_step, 1.0f);
    }
  }
  Tensor mask;
  {
    engine::CategoryScope category(vocabulary::Category::inputs);
    mask = Tensor::from_vector(y.shape(), m, y.device());
  }
  return ops::mul(y, mask);
}

DeepSpeech2::Output DeepSpeech2::forward(const Tensor& features, const Tensor& input_lengths) const {
  if (features.dim() != 4 || features.size(1) != 1 || features.size(3) != cfg_.frequency_bins) {
    throw std::invalid_argument("deepspeech2: features must be [N, 1, T, " + std::to_string(cfg_.frequency_bins) +
                                "], got " + engine::shape_str(features.shape()));
  }
  const int64_t n = features.size(0);
  const std::vector<float> frames = input_lengths.to_vector();
  if (static_cast<int64_t>(frames.size()) != n)
    throw std::invalid_argument("deepspeech2: one input length per utterance");
  std::vector<int64_t> len0(static_cast<size_t>(n)), len1(static_cast<size_t>(n));
  std::vector<float> out_lengths(static_cast<size_t>(n));
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto f = static_cast<int64_t>(frames[i]);
    len0[i] = deepspeech2_conv_out(f, cfg_.conv0_stride_t);
    len1[i] = deepspeech2_conv_out(len0[i], cfg_.conv1_stride_t);
    out_lengths[i] = static_cast<float>(len1[i]);
  }
  Output out;
  {
    engine::CategoryScope category(vocabulary::Category::inputs);
    out.output_lengths = Tensor::from_vector({n}, out_lengths, features.device());
  }

  Tensor x = conv_block(*conv0_, *bn0_, features, len0);
  x = conv_block(*conv1_, *bn1_, x, len1);
  // [N, C, T', F'] -> time-major [T', N, C F'] (channel-major features, as deepspeech.pytorch).
  const int64_t c = x.size(1), t = x.size(2), f = x.size(3);
  x = ops::reshape(ops::permute(x, {2, 0, 1, 3}), {t, n, c * f});
  for (const auto& rnn : rnns_) x = rnn->forward(x, out.output_lengths);
  out.logits = ops::reshape(fc_->forward(ops::reshape(x, {t * n, cfg_.rnn_hidden})), {t, n, cfg_.classes});
  return out;
}

// ---------------------------------------------------------------- the workload

namespace {

class DeepSpeech2Workload final : public Workload {
 public:
  // data may be null on the meta device (the model is built to be counted, never trained).
  DeepSpeech2Workload(const DeepSpeech2Config& cfg, std::unique_ptr<SpeechDataset> data, int64_t batch, uint64_t seed,
                      Device device)
      : cfg_(cfg),
        batch_(batch),
        model_(std::make_shared<DeepSpeech2>(cfg, device, seed)),
        data_(std::move(data)),
        sgd_(model_->parameters(), sgd_options(cfg, batch, data_ ? data_->train_size() : 1)) {}

  nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return batch_; }
  double learning_rate() const override { return sgd_.current_lr(); }
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::sgd_recipe(sgd_.options(), cfg_.max_grad_norm > 0 ? cfg_.max_grad_norm : 0.0)};
  }

  // The data phase's draw as a Batch (features, concatenated CTC targets): what step() draws next.
  Batch next_batch() override {
    SpeechBatch b = dataset().next_train(batch_);
    return Batch{b.features, b.targets, b.samples};
  }

  StepResult step(Phases& phases) override {
    SpeechBatch b;
    Tensor loss;
    int64_t frames = 0;
    phases.data([&] {
      b = dataset().next_train(batch_);
      for (float v : b.input_lengths.to_vector()) frames += static_cast<int64_t>(v);
    });
    phases.forward([&] { loss = ctc(b); });
    phases.backward([&] { loss.backward(); });
    phases.optimizer([&] {
      if (cfg_.max_grad_norm > 0) engine::optim::clip_grad_norm(model_->parameters(), cfg_.max_grad_norm);
      sgd_.step();
      sgd_.zero_grad();
    });
    return {static_cast<double>(loss.item()), b.samples, frames};
  }

  // Character error rate of greedy CTC decoding on the first `batches` held-out batches (all when < 0).
  Quality evaluate(int64_t batches) override {
    model_->train(false);
    engine::NoGradScope no_grad;
    std::vector<std::vector<int64_t>> hyps, refs;
    for (int64_t i = 0; batches < 0 || i < batches; ++i) {
      const SpeechBatch b = dataset().heldout(i, batch_);
      if (b.samples == 0) break;
      const DeepSpeech2::Output out = model_->forward(b.features, b.input_lengths);
      for (auto& h : ops::ctc_greedy_decode(out.logits, out.output_lengths, kSpeechBlank)) hyps.push_back(std::move(h));
      for (const auto& t : b.transcripts) refs.push_back(encode_transcript(t));
    }
    model_->train(true);
    return {"cer", refs.empty() ? 1.0 : ops::error_rate(hyps, refs), "fraction", false};
  }

 private:
  // The training loss of one batch: CTC summed per utterance, averaged over the batch.
  Tensor ctc(const SpeechBatch& b) const {
    const DeepSpeech2::Output out = model_->forward(b.features, b.input_lengths);
    static const std::string path = "loss";
    static const auto id = engine::op_name(path);
    engine::OwnerScope owner(&path, id);
    ops::CtcLossOptions o;
    o.blank = kSpeechBlank;
    o.reduction = engine::Backend::CtcReduction::sum;
    o.zero_infinity = true;  // an utterance too short for its transcript counts for nothing
    return ops::scale(ops::ctc_loss(out.logits, b.targets, out.output_lengths, b.target_lengths, o),
                      1.0f / static_cast<float>(b.samples));
  }

  SpeechDataset& dataset() {
    if (!data_) throw std::logic_error("deepspeech2: no data on the " + model_->device().str() + " device");
    return *data_;
  }
  static engine::optim::SgdOptions sgd_options(const DeepSpeech2Config& c, int64_t batch, int64_t train_size) {
    engine::optim::SgdOptions o;
    o.lr.kind = engine::optim::LrSchedule::Kind::step;
    o.lr.base_lr = c.lr;
    o.lr.step_size = std::max<int64_t>(1, (train_size + batch - 1) / batch);  // one epoch
    o.lr.gamma = 1.0 / c.lr_anneal;
    o.momentum = c.momentum;
    o.weight_decay = 0.0;
    return o;
  }

  DeepSpeech2Config cfg_;
  int64_t batch_;
  std::shared_ptr<DeepSpeech2> model_;
  std::unique_ptr<SpeechDataset> data_;
  engine::optim::Sgd sgd_;
};

PresetTable describe(const DeepSpeech2Config& c) {
  const int64_t bins = deepspeech2_conv_bins(c);
  const auto conv = [](int64_t kt, int64_t kf, int64_t st, int64_t sf) {
    return std::to_string(kt) + "x" + std::to_string(kf) + " stride " + std::to_string(st) + "x" + std::to_string(sf) +
           " pad " + std::to_string((kt - 1) / 2) + "x" + std::to_string((kf - 1) / 2);
  };
  return {
      {"architecture", "Deep Speech 2 (Amodei et al. 2016): 2 conv + bidirectional GRUs + fc, CTC"},
      {"input", std::to_string(c.frequency_bins) + "-bin log spectrograms (20 ms windows, 10 ms hop), [N, 1, T, " +
                    std::to_string(c.frequency_bins) + "]"},
      {"conv.0", std::to_string(c.conv_channels) + " channels, " +
                     conv(c.conv0_kernel_t, c.conv0_kernel_f, c.conv0_stride_t, c.conv0_stride_f) +
                     " (time x frequency), no bias; batch norm; clipped ReLU"},
      {"conv.1", std::to_string(c.conv_channels) + " channels, " +
                     conv(c.conv1_kernel_t, c.conv1_kernel_f, c.conv1_stride_t, c.conv1_stride_f) +
                     ", no bias; batch norm; clipped ReLU"},
      {"clipped_relu", "min(max(x, 0), " + table_number(c.relu_clip) + ")"},
      {"frames", "T' = ceil(T / " + std::to_string(c.conv0_stride_t * c.conv1_stride_t) +
                     "); conv outputs zeroed past each utterance's length"},
      {"rnns", std::to_string(c.rnn_layers) + " bidirectional GRU layers of " + std::to_string(c.rnn_hidden) +
                   " (torch.nn.GRU cell), directions summed; first input " + std::to_string(c.conv_channels) + " x " +
                   std::to_string(bins) + " = " + std::to_string(c.conv_channels * bins)},
      {"sequence_batch_norm",
       c.rnn_layers < 2 ? std::string("none (one recurrent layer)")
                        : "on the input of rnns.1" +
                              (c.rnn_layers > 2 ? " .. rnns." + std::to_string(c.rnn_layers - 1) : std::string()) +
                              ", statistics over all T' x N frames"},
      {"fc", std::to_string(c.rnn_hidden) + " -> " + std::to_string(c.classes) + ", with bias"},
      {"loss", "CTC over " + std::to_string(c.classes) +
                   " symbols (blank, space, apostrophe, a-z), summed per utterance, mean over the batch"},
      {"optimizer", "SGD momentum " + table_number(c.momentum) + ", no weight decay, gradient norm clipped at " +
                        table_number(c.max_grad_norm)},
      {"learning_rate",
       table_number(c.lr) + (c.lr_anneal == 1.0 ? std::string(", constant")
                                                : ", divided by " + table_number(c.lr_anneal) + " after every epoch")},
      {"init", "conv Kaiming normal (fan_out); GRU and fc PyTorch's uniform +-1/sqrt(fan); batch norm 1/0"},
      {"data", "espeak-ng synthesised phrases (workloads/data/speech_data.h), SortaGrad; quality: held-out character "
               "error rate of greedy CTC decoding"},
      {"tokens", "spectrogram frames (10 ms each, unpadded)"},
      {"batch_size", std::to_string(c.batch) + " utterances"}};
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const DeepSpeech2Config&)) {
  const DeepSpeech2Config c = deepspeech2_config(name);
  return {name, summary(c), c.batch, describe(c)};
}

std::string grus(const DeepSpeech2Config& c) {
  return std::to_string(c.rnn_layers) + " bidirectional GRUs of " + std::to_string(c.rnn_hidden);
}
std::string utterances(const DeepSpeech2Config& c) { return std::to_string(c.batch) + " utterances"; }

}  // namespace

WorkloadSpec deepspeech2_spec() {
  WorkloadSpec s;
  s.name = "deepspeech2";
  s.domain = "speech recognition";
  s.units = {"utterances", "frames", "utterances", true};
  const DeepSpeech2Config full = deepspeech2_config("full");
  s.description = "Deep Speech 2: 2 conv (" + std::to_string(full.conv_channels) + " ch) + " +
                  std::to_string(full.rnn_layers) + " bidirectional GRU x " + std::to_string(full.rnn_hidden) +
                  " (summed) + fc, CTC over " + std::to_string(full.classes) + " characters, SGD with momentum";
  s.presets = {make_preset("tiny",
                           [](const DeepSpeech2Config& c) {
                             return "2 conv at " + std::to_string(c.conv_channels) + " channels (" +
                                    std::to_string(c.conv0_kernel_t) + "x" + std::to_string(c.conv0_kernel_f) + ", " +
                                    std::to_string(c.conv1_kernel_t) + "x" + std::to_string(c.conv1_kernel_f) + "), " +
                                    grus(c) + ", " + utterances(c) + ": tests";
                           }),
               make_preset("small",
                           [](const DeepSpeech2Config& c) {
                             return "full's 2 conv, " + grus(c) + ", " + utterances(c) + ": CPU benchmarking";
                           }),
               make_preset("full", [](const DeepSpeech2Config& c) {
                 return "TBD's model: 2 conv at " + std::to_string(c.conv_channels) + " channels, " + grus(c) + ", " +
                        utterances(c);
               })};
  s.check = [](const WorkloadConfig& wc) {
    deepspeech2_config(wc.preset);
    data_shard(wc, "deepspeech2");
    check_speech_source(wc.data);
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    const DeepSpeech2Config cfg = deepspeech2_config(wc.preset);
    const DataShard shard = data_shard(wc, "deepspeech2");
    const int64_t batch = *wc.batch;
    std::unique_ptr<SpeechDataset> data;
    if (!wc.device.is_meta()) {  // counting parameters needs no audio (and no espeak-ng)
      SpeechDataOptions o;
      o.seed = wc.seed;  // later epochs' shuffling; the corpus itself is fixed
      o.shard = shard;   // this rank's training utterances
      data = std::make_unique<SpeechDataset>(load_speech_corpus(wc.data), o, wc.device);
    }
    return std::make_unique<DeepSpeech2Workload>(cfg, std::move(data), batch, wc.seed, wc.device);
  };
  return s;
}

}  // namespace ts::workloads
