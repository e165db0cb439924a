// seq2seq: the parameter count from the configuration, module names, TF NMT's initialisation,
// source padding seen through the model, greedy decoding against teacher forcing, what a step
// reports, and convergence of the tiny preset (held-out BLEU rises).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "engine/context.h"
#include "engine/ops.h"
#include "workloads/data/text_data.h"
#include "workloads/seq2seq/seq2seq.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;
using engine::Tensor;

TEST(Seq2Seq, ParameterCountFollowsFromTheConfiguration) {
  const Seq2SeqConfig full = seq2seq_config("full");
  // Embeddings (17,191 + 7,709) x 512; encoder LSTMs 2,101,248 each; decoder layer 0 (input
  // 512 + 512) 3,149,824 and layer 1 2,101,248; attention 2 x 512^2 + 512; W_c 1,024 x 512;
  // output 512 x 7,709.
  EXPECT_EQ(seq2seq_parameter_count(full), (17191LL + 7709) * 512 + 2 * 2'101'248LL + 3'149'824 + 2'101'248 +
                                               (2 * 512 * 512 + 512) + 1024 * 512 + 512LL * 7709);
  EXPECT_EQ(seq2seq_parameter_count(full), 27'198'464);
  for (const char* preset : {"tiny", "small", "full"}) {
    SCOPED_TRACE(preset);
    const Seq2SeqConfig c = seq2seq_config(preset);
    Seq2Seq model(c, engine::Device::meta(), 1);
    EXPECT_EQ(model.parameter_count(), seq2seq_parameter_count(c));
  }
  // The formula follows the widths when they differ from each other, and other depths.
  Seq2SeqConfig odd = seq2seq_config("tiny");
  odd.embedding = 12;
  odd.hidden = 20;
  odd.attention = 7;
  odd.layers = 3;
  EXPECT_EQ(Seq2Seq(odd, engine::Device::meta(), 1).parameter_count(), seq2seq_parameter_count(odd));
  EXPECT_THROW(seq2seq_config("big"), std::invalid_argument);
}

TEST(Seq2Seq, NamesAreReadable) {
  Seq2Seq model(seq2seq_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.insert(name);
  for (const char* n : {"encoder.embedding.weight", "encoder.lstm.0.weight_ih", "encoder.lstm.1.bias_hh",
                        "decoder.embedding.weight", "decoder.lstm.0.weight_ih", "decoder.lstm.1.weight_hh",
                        "decoder.attention.query_proj.weight", "decoder.attention.key_proj.weight",
                        "decoder.attention.v", "decoder.attention_layer.weight", "decoder.output_proj.weight"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(names.size(), 2u + 4 * 4 + 3 + 1 + 1);  // no biases outside the LSTMs
}

TEST(Seq2Seq, InitialisedAsTfNmt) {
  const Seq2SeqConfig c = seq2seq_config("tiny");
  Seq2Seq model(c, engine::Device::cpu(), 2);
  const int64_t h = c.hidden;
  for (const auto& [name, t] : model.named_parameters()) {
    const auto v = t.to_vector();
    if (name.ends_with("bias_ih")) {
      for (int64_t k = 0; k < 4 * h; ++k) EXPECT_EQ(v[k], (k >= h && k < 2 * h) ? 1.0f : 0.0f) << name << k;
    } else if (name.ends_with("bias_hh")) {
      for (float x : v) EXPECT_EQ(x, 0.0f) << name;
    } else {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      EXPECT_GE(*lo, -0.1f) << name;
      EXPECT_LE(*hi, 0.1f) << name;
      EXPECT_GT(*hi - *lo, 0.05f) << name;  // drawn, not constant
    }
  }
}

namespace {

Seq2SeqConfig small_test_config() {
  Seq2SeqConfig c = seq2seq_config("tiny");
  c.dropout = 0.0f;
  return c;
}

}  // namespace

// A padded source position must change nothing: fill the pad slot with a word and compare.
TEST(Seq2Seq, PaddedSourceIsInvisible) {
  Seq2Seq model(small_test_config(), engine::Device::cpu(), 3);
  model.train(false);
  engine::NoGradScope no_grad;
  DropoutStream drop(1);
  const Tensor src = Tensor::from_vector({2, 5}, {7, 8, 9, 10, 0, 11, 12, 13, 14, 15});  // row 0: 4 real tokens
  const Tensor src_pad = Tensor::from_vector({2, 5}, {7, 8, 9, 10, 30, 11, 12, 13, 14, 15});
  const Tensor lens = Tensor::from_vector({2}, {4, 5});
  const Tensor tgt = Tensor::from_vector({2, 3}, {1, 5, 6, 1, 7, 8});
  const auto a = model.forward(src, lens, tgt, drop).to_vector();
  const auto p = model.forward(src_pad, lens, tgt, drop).to_vector();
  for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], p[k], 1e-6) << "a padded source token leaked at " << k;
  // The same token as a real one does change the output.
  const auto q = model.forward(src_pad, Tensor::from_vector({2}, {5, 5}), tgt, drop).to_vector();
  double diff = 0;
  for (size_t k = 0; k < a.size(); ++k) diff += std::abs(a[k] - q[k]);
  EXPECT_GT(diff, 1e-4);
}

// Greedy decoding steps the decoder one token at a time from its state; teacher forcing runs it
// over a given prefix. Fed its own greedy output, teacher forcing must pick the same tokens.
TEST(Seq2Seq, GreedyDecodingAgreesWithTeacherForcing) {
  const Seq2SeqConfig c = small_test_config();
  Seq2Seq model(c, engine::Device::cpu(), 4);
  model.train(false);
  const Tensor src = Tensor::from_vector({3, 4}, {5, 6, 7, 8, 9, 10, 0, 0, 11, 12, 13, 0});
  const Tensor lens = Tensor::from_vector({3}, {4, 2, 3});
  int64_t steps = 0;
  const std::vector<float> ids = model.greedy(src, lens, 6, &steps);
  ASSERT_GE(steps, 3);  // enough steps for the state to matter (6 when written: no early EOS)
  ASSERT_LE(steps, 6);
  // Rows that ended pad after their EOS; feed BOS + the tokens (pads after EOS do not matter
  // for the positions compared).
  std::vector<float> in(static_cast<size_t>(3 * steps));
  for (int64_t r = 0; r < 3; ++r) {
    in[static_cast<size_t>(r * steps)] = static_cast<float>(Vocabulary::kBos);
    for (int64_t t = 1; t < steps; ++t) {
      const float prev = ids[static_cast<size_t>(r * steps + t - 1)];
      in[static_cast<size_t>(r * steps + t)] = prev == 0.0f ? static_cast<float>(Vocabulary::kEos) : prev;
    }
  }
  engine::NoGradScope no_grad;
  DropoutStream drop(1);
  const auto logits = model.forward(src, lens, Tensor::from_vector({3, steps}, in), drop).to_vector();
  const int64_t v = c.tgt_vocab;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < steps; ++t) {
      const float want = ids[static_cast<size_t>(r * steps + t)];
      if (want == 0.0f) break;                             // after EOS
      const float* row = logits.data() + (t * 3 + r) * v;  // time-major rows
      // The decoder's steps and the whole sequence run different GEMM shapes (and kernels, by
      // ISA), so logits differ in the last bits: a token tied with the best within that rounding
      // is as right as the argmax (the untrained model's logits are close together).
      const float best = *std::max_element(row, row + v);
      const float chosen = row[static_cast<int64_t>(want)];
      EXPECT_GE(chosen, best - 1e-5f * std::max(1.0f, std::fabs(best)))
          << "row " << r << " step " << t << ": token " << want << " has " << chosen << ", the best " << best;
    }
  }
  model.train(true);  // dropout would make decoding random
  EXPECT_THROW(model.greedy(src, lens, 6, &steps), std::logic_error);
}

// One step reports the pairs and the real source + target tokens (target + EOS) of the batch it
// trained on: the first batch of a batcher with the workload's options and seed.
TEST(Seq2Seq, StepReportsPairsAndTokens) {
  const WorkloadSpec* spec = find_workload("seq2seq");
  ASSERT_NE(spec, nullptr);
  const Seq2SeqConfig c = seq2seq_config("tiny");
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 5;
  auto w = spec->create(wc);
  LoopOptions o;
  o.iterations = 1;
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 1u);
  const IterationResult& it = r.iterations[0];

  SyntheticTextOptions text;
  text.src_vocab = c.src_vocab;
  text.tgt_vocab = c.tgt_vocab;
  text.max_length = c.max_length;
  text.train_pairs = c.train_pairs;
  text.dev_pairs = c.dev_pairs;
  text.test_pairs = c.test_pairs;
  BatchingOptions batching;
  batching.pairs = c.batch;
  batching.buckets = c.buckets;
  TextBatcher batcher(std::make_shared<ParallelCorpus>(SyntheticTranslation(text).corpus()), batching, wc.seed,
                      engine::Device::cpu());
  const TokenBatch first = batcher.next_train();
  int64_t tokens = 0;
  for (int64_t i : first.indices) {
    const SentencePair& p = batcher.corpus().train[static_cast<size_t>(i)];
    tokens += static_cast<int64_t>(p.src.size() + p.tgt.size() + 1);  // no source EOS; target + EOS
  }
  EXPECT_EQ(it.samples, first.pairs);
  EXPECT_EQ(it.tokens, tokens);
  EXPECT_NEAR(it.loss, std::log(static_cast<double>(c.tgt_vocab)), 0.1);  // TF NMT's small init: near uniform
  EXPECT_DOUBLE_EQ(it.learning_rate, c.learning_rate);
}

TEST(Seq2Seq, TinyLearnsToTranslate) {
  const WorkloadSpec* spec = find_workload("seq2seq");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 3;
  auto w = spec->create(wc);
  const double start = w->evaluate(-1).value;
  LoopOptions o;
  o.iterations = 800;  // BLEU 90 by 800 when calibrated (seed 3; seeds 1, 2, 5, 7: 63 to 93); a few seconds
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  const double bleu = w->evaluate(-1).value;
  std::printf("seq2seq tiny: held-out BLEU %.2f -> %.2f after %lld steps (loss %.3f -> %.3f)\n", start, bleu,
              static_cast<long long>(o.iterations), r.iterations.front().loss, r.iterations.back().loss);
  EXPECT_LT(start, 5.0);
  EXPECT_GT(bleu, 50.0);
}
