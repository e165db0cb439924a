// Deep Speech 2: the parameter count from the configuration, module names, frame lengths
// through the convolutions, padding that changes nothing (eval mode), and convergence of the
// tiny preset on the espeak-ng corpus (held-out CER falls). espeak-ng is required, as in
// speech_data_test: scripts/setup installs it, and its absence fails.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "engine/context.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "env_override.h"
#include "workloads/data/speech_data.h"
#include "workloads/deepspeech2/deepspeech2.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;
using engine::Tensor;

namespace {

using ts::testing::EnvOverride;

Tensor random_features(int64_t n, int64_t t, const std::vector<int64_t>& lengths, uint64_t seed) {
  engine::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n * t * kSpectrogramBins), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < lengths[static_cast<size_t>(i)] * kSpectrogramBins; ++k) {
      v[static_cast<size_t>(i * t * kSpectrogramBins + k)] = static_cast<float>(rng.normal());
    }
  }
  return Tensor::from_vector({n, 1, t, kSpectrogramBins}, v);
}

}  // namespace

TEST(DeepSpeech2, ParameterCountFollowsFromTheConfiguration) {
  const DeepSpeech2Config full = deepspeech2_config("full");
  EXPECT_EQ(deepspeech2_conv_bins(full), 41);  // 161 -> 81 -> 41
  // Convolutions 32 x 11 x 41 + 32 x 32 x 11 x 21 = 250,976; their batch norms 128; rnns.0
  // (input 32 x 41 = 1312) 2 (3 x 1760 (1312 + 1760) + 6 x 1760) = 32,461,440; rnns.1-6
  // 2 (3 x 1760 x 3520 + 6 x 1760) + 2 x 1760 = 37,195,840 each; fc 1760 x 29 + 29 = 51,069.
  EXPECT_EQ(deepspeech2_parameter_count(full), 250'976 + 128 + 32'461'440 + 6LL * 37'195'840 + 51'069);
  EXPECT_EQ(deepspeech2_parameter_count(full), 255'938'653);
  for (const char* preset : {"tiny", "small", "full"}) {
    SCOPED_TRACE(preset);
    const DeepSpeech2Config c = deepspeech2_config(preset);
    DeepSpeech2 model(c, engine::Device::meta(), 1);
    EXPECT_EQ(model.parameter_count(), deepspeech2_parameter_count(c));
  }
  EXPECT_THROW(deepspeech2_config("large"), std::invalid_argument);
}

TEST(DeepSpeech2, NamesReadLikeThePaper) {
  DeepSpeech2 model(deepspeech2_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.insert(name);
  for (const char* n : {"conv.0.weight", "bn.0.weight", "conv.1.weight", "bn.1.bias", "rnns.0.gru.weight_ih_l0",
                        "rnns.0.gru.weight_hh_l0_reverse", "rnns.3.bn.weight", "rnns.6.gru.bias_hh_l0_reverse",
                        "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_FALSE(names.count("rnns.0.bn.weight"));  // the first layer's input is the convolutions' (normalised)
  EXPECT_FALSE(names.count("conv.0.bias"));       // batch norm follows
  // The first GRU sees 32 channels x 41 bins; the later ones the summed directions (1760).
  for (const auto& [name, t] : model.named_parameters()) {
    if (name == "rnns.0.gru.weight_ih_l0") {
      EXPECT_EQ(t.shape(), (engine::Shape{3 * 1760, 32 * 41}));
    }
    if (name == "rnns.1.gru.weight_ih_l0") {
      EXPECT_EQ(t.shape(), (engine::Shape{3 * 1760, 1760}));
    }
  }
}

TEST(DeepSpeech2, CountingNeedsNoAudio) {
  // `trainscope list` builds every preset on the meta device: no corpus, no espeak-ng.
  const std::string empty_cache = (std::filesystem::temp_directory_path() / "ts_ds2_no_cache_here").string();
  std::filesystem::remove_all(empty_cache);
  EnvOverride cache("TS_SPEECH_CACHE", empty_cache.c_str());
  EnvOverride espeak("TS_ESPEAK_NG", "/nonexistent/espeak-ng");
  WorkloadConfig wc;
  wc.preset = "full";
  wc.device = engine::Device::meta();
  const auto w = find_workload("deepspeech2")->create(wc);
  EXPECT_EQ(w->model().parameter_count(), 255'938'653);
  EXPECT_EQ(w->batch_size(), 32);
  EXPECT_FALSE(std::filesystem::exists(empty_cache));
}

TEST(DeepSpeech2, FramesHalveThroughTheConvolutions) {
  const DeepSpeech2Config c = deepspeech2_config("tiny");
  EXPECT_EQ(deepspeech2_output_frames(c, 37), 19);
  EXPECT_EQ(deepspeech2_output_frames(c, 20), 10);
  EXPECT_EQ(deepspeech2_output_frames(c, 1), 1);
  DeepSpeech2 model(c, engine::Device::cpu(), 2);
  const auto out = model.forward(random_features(2, 37, {37, 20}, 5), Tensor::from_vector({2}, {37, 20}));
  EXPECT_EQ(out.logits.shape(), (engine::Shape{19, 2, 29}));
  EXPECT_EQ(out.output_lengths.to_vector(), (std::vector<float>{19, 10}));
  // The GRUs output zeros past a length, so the logits there are the fc bias alone.
  const auto l = out.logits.to_vector();
  for (int64_t k = 0; k < 29; ++k) {
    EXPECT_FLOAT_EQ(l[static_cast<size_t>((15 * 2 + 1) * 29 + k)], l[static_cast<size_t>((18 * 2 + 1) * 29 + k)]);
  }
}

// In eval mode an utterance's logits must not depend on what it is batched with: the padding
// after it is masked after every convolution (otherwise batch norm turns the zero padding into
// values the next convolution sees) and the GRUs stop at its length.
TEST(DeepSpeech2, PaddingChangesNothingInEvalMode) {
  DeepSpeech2Config c = deepspeech2_config("tiny");
  DeepSpeech2 model(c, engine::Device::cpu(), 4);
  {
    // A few training-mode passes move the running statistics away from (0, 1), so that batch
    // norm no longer maps the padding's zeros to zeros.
    engine::NoGradScope no_grad;
    for (uint64_t s = 0; s < 3; ++s) {
      model.forward(random_features(4, 40, {40, 40, 40, 40}, 10 + s), Tensor::from_vector({4}, {40, 40, 40, 40}));
    }
  }
  model.train(false);
  engine::NoGradScope no_grad;
  const Tensor alone_x = random_features(1, 23, {23}, 7);
  const auto alone = model.forward(alone_x, Tensor::from_vector({1}, {23})).logits.to_vector();  // [12, 1, 29]
  // The same utterance first in a batch padded to 50 frames, next to a 50-frame one.
  Tensor batch_x = random_features(2, 50, {23, 50}, 8);
  {
    std::vector<float> v = batch_x.to_vector();
    const auto a = alone_x.to_vector();
    std::copy(a.begin(), a.end(), v.begin());
    batch_x = Tensor::from_vector(batch_x.shape(), v);
  }
  const auto batched = model.forward(batch_x, Tensor::from_vector({2}, {23, 50})).logits.to_vector();  // [25, 2, 29]
  double worst = 0;
  for (int64_t t = 0; t < 12; ++t) {
    for (int64_t k = 0; k < 29; ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(alone[static_cast<size_t>(t * 29 + k)]) -
                                       batched[static_cast<size_t>((t * 2) * 29 + k)]));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(DeepSpeech2, TinyLearnsToRecognise) {
  const WorkloadSpec* spec = find_workload("deepspeech2");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 1;
  // The corpus: synthesised by espeak-ng on first use (cached under ~/.cache/trainscope/speech).
  const auto t0 = std::chrono::steady_clock::now();
  try {
    find_espeak_ng();
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n(scripts/setup installs espeak-ng; CI runs it)";
  }
  auto w = spec->create(wc);
  const auto t1 = std::chrono::steady_clock::now();
  const double start = w->evaluate(-1).value;
  LoopOptions o;
  o.iterations = 300;  // CER 0.35 when calibrated (seed 1; 0.53-0.61 after 200 steps); ~20 s on one thread
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  const double cer = w->evaluate(-1).value;
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("deepspeech2 tiny: corpus ready in %.1f s; held-out CER %.3f -> %.3f after %lld steps in %.1f s "
              "(loss %.2f -> %.2f)\n",
              std::chrono::duration<double>(t1 - t0).count(), start, cer, static_cast<long long>(o.iterations),
              std::chrono::duration<double>(t2 - t1).count(), r.iterations.front().loss, r.iterations.back().loss);
  EXPECT_GT(start, 0.9);
  EXPECT_LT(cer, 0.6);
  EXPECT_LT(r.iterations.back().loss, 0.5 * r.iterations.front().loss);
}
