// The presets tables the run record stores are read from the configurations the models are built
// from: for every workload and preset, the rows that state a configuration value must state what
// <name>_config(preset) holds. Expected texts are written here from the configuration, apart from
// the workloads' code, so a table row written by hand would fail as soon as its preset changed.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "workloads/a3c/a3c.h"
#include "workloads/deepspeech2/deepspeech2.h"
#include "workloads/faster_rcnn/faster_rcnn.h"
#include "workloads/inception_v3/inception_v3.h"
#include "workloads/resnet50/resnet50.h"
#include "workloads/seq2seq/seq2seq.h"
#include "workloads/transformer/transformer.h"
#include "workloads/wgan/wgan.h"
#include "workloads/workload.h"

using namespace ts::workloads;

namespace {

std::string n(int64_t v) { return std::to_string(v); }

// A number as the tables write it: ostream's default form (0.1, 1e-05, 64).
std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

template <class Range>
std::string join(const Range& values) {
  std::ostringstream o;
  bool first = true;
  for (const auto& v : values) {
    o << (first ? "" : ",") << v;
    first = false;
  }
  return o.str();
}

std::string row(const Preset& p, const std::string& key) {
  for (const auto& [k, v] : p.table) {
    if (k == key) return v;
  }
  ADD_FAILURE() << "no row '" << key << "'";
  return "";
}

void expect_row(const Preset& p, const std::string& key, const std::string& expected) {
  EXPECT_EQ(row(p, key), expected) << "row " << key;
}

// Prose rows: the configuration's values open the row, or sit inside it.
void expect_starts(const Preset& p, const std::string& key, const std::string& expected) {
  const std::string v = row(p, key);
  EXPECT_EQ(v.substr(0, expected.size()), expected) << "row " << key << ": " << v;
}

void expect_contains(const Preset& p, const std::string& key, const std::string& expected) {
  const std::string v = row(p, key);
  EXPECT_NE(v.find(expected), std::string::npos) << "row " << key << ": '" << v << "' lacks '" << expected << "'";
}

// `check(preset, config)` for every preset of `workload`, its config from `config(name)`.
template <class Config, class Check>
void for_each_preset(const std::string& workload, Config (*config)(const std::string&), Check check) {
  const WorkloadSpec* spec = find_workload(workload);
  ASSERT_NE(spec, nullptr) << workload;
  ASSERT_FALSE(spec->presets.empty());
  for (const Preset& p : spec->presets) {
    SCOPED_TRACE(workload + " preset " + p.name);
    check(p, config(p.name));
  }
}

}  // namespace

TEST(PresetTables, EveryWorkloadIsChecked) {
  // The tests below, one per workload: a new workload needs one.
  const std::set<std::string> checked = {"resnet50",    "inception_v3", "seq2seq", "transformer",
                                         "faster_rcnn", "deepspeech2",  "wgan",    "a3c"};
  const std::vector<std::string> names = workload_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), checked);
}

TEST(PresetTables, Resnet50) {
  for_each_preset("resnet50", resnet50_config, [](const Preset& p, const ResNetConfig& c) {
    expect_row(p, "image_size", n(c.image_size));
    expect_row(p, "in_channels", n(c.in_channels));
    expect_row(p, "base_width", n(c.base_width));
    expect_row(p, "blocks", join(c.blocks));
    expect_row(p, "bottleneck_expansion", n(ResNetConfig::expansion));
    expect_row(p, "num_classes", n(c.num_classes));
    expect_row(p, "batch_size", n(c.batch));
    EXPECT_EQ(p.default_batch, c.batch);
  });
}

TEST(PresetTables, InceptionV3) {
  for_each_preset("inception_v3", inception_v3_config, [](const Preset& p, const InceptionConfig& c) {
    expect_row(p, "image_size", n(c.image_size));
    expect_row(p, "in_channels", n(c.in_channels));
    expect_row(p, "width_multiplier", num(c.width));
    expect_starts(p, "stem_channels", n(inception_channels(32, c.width)) + ",");
    expect_starts(p, "aux_logits", c.aux_logits ? "on:" : "off");
    if (c.aux_logits) expect_starts(p, "loss", "CE(logits) + " + num(c.aux_weight) + " x CE(aux logits)");
    expect_row(p, "num_classes", n(c.num_classes));
    expect_row(p, "batch_size", n(c.batch));
    EXPECT_EQ(p.default_batch, c.batch);
  });
}

TEST(PresetTables, Seq2Seq) {
  for_each_preset("seq2seq", seq2seq_config, [](const Preset& p, const Seq2SeqConfig& c) {
    expect_starts(p, "layers",
                  n(c.layers) + " encoder + " + n(c.layers) + " decoder LSTM layers, " + n(c.hidden) + " units");
    expect_starts(p, "embedding", n(c.embedding) + ",");
    expect_row(p, "vocabulary", n(c.src_vocab) + " source, " + n(c.tgt_vocab) + " target");
    expect_starts(p, "attention", "additive, " + n(c.attention) + " units");
    expect_starts(p, "output", "linear " + n(c.hidden) + " ->");
    expect_starts(p, "dropout", num(c.dropout) + " ");
    expect_starts(p, "init", "U(-" + num(c.init_range) + ", " + num(c.init_range) + ")");
    expect_starts(p, "optimizer", "Adam " + num(c.learning_rate) + " ");
    expect_contains(p, "optimizer", "clipped at " + num(c.max_gradient_norm));
    expect_row(p, "batch", n(c.batch) + " sentence pairs, " + n(c.buckets) + " length buckets");
    expect_starts(p, "max_length", n(c.max_length) + " tokens");
    expect_row(p, "batch_size", n(c.batch) + " pairs");
    EXPECT_EQ(p.default_batch, c.batch);
  });
}

TEST(PresetTables, Transformer) {
  for_each_preset("transformer", transformer_config, [](const Preset& p, const TransformerConfig& c) {
    expect_row(p, "layers", n(c.encoder_layers) + " encoder + " + n(c.decoder_layers) + " decoder");
    expect_row(p, "d_model", n(c.d_model));
    expect_row(p, "heads", n(c.heads));
    expect_starts(p, "ffn", n(c.ffn) + ",");
    expect_starts(p, "vocabulary", n(c.vocab) + " ");
    expect_starts(p, "dropout", num(c.dropout) + " ");
    expect_starts(p, "label_smoothing", num(c.label_smoothing) + ",");
    expect_row(p, "learning_rate", num(c.lr_factor) + " x d^-0.5 x min(s^-0.5, s x " + n(c.warmup) + "^-1.5)");
    expect_starts(p, "batch", n(c.max_tokens) + " tokens");
    expect_starts(p, "max_length", n(c.max_length) + " tokens");
    expect_row(p, "batch_size", n(c.max_tokens) + " tokens");
    EXPECT_EQ(p.default_batch, c.max_tokens);
  });
}

TEST(PresetTables, FasterRcnn) {
  for_each_preset("faster_rcnn", faster_rcnn_config, [](const Preset& p, const FasterRcnnConfig& c) {
    expect_starts(
        p, "backbone",
        c.backbone + ": bottlenecks " + join(c.blocks) + " (layer1..3) + " + n(c.head_blocks) + " (layer4 on RoIs)");
    expect_starts(p, "base_width", n(c.base_width) + " ");
    expect_contains(p, "batch_norm", "eps " + num(c.bn_eps) + ")");
    expect_contains(p, "batch_norm", "averaged over " + n(c.calibration_images) + " training images");
    expect_row(p, "image_size",
               "shorter side " + n(c.short_side) + ", longer at most " + n(c.max_side) + "; synthetic " +
                   n(c.short_side) + "x" + n(c.synthetic_width));
    expect_row(p, "anchors",
               n(c.num_anchors()) + ": sizes " + join(c.anchor_sizes) + " x ratios (h/w) " + join(c.anchor_ratios) +
                   ", stride " + n(c.feature_stride));
    expect_contains(p, "rpn_targets", n(c.rpn_targets.batch) + " sampled per image");
    const auto& tp = c.train_proposals;
    expect_starts(p, "proposals_train",
                  "top " + n(tp.pre_nms_top_n) + " -> NMS " + num(tp.nms_threshold) + " -> top " +
                      n(tp.post_nms_top_n) + ", min side " + num(tp.min_size));
    const auto& ep = c.test_proposals;
    expect_starts(p, "proposals_test",
                  "top " + n(ep.pre_nms_top_n) + " -> NMS " + num(ep.nms_threshold) + " -> top " +
                      n(ep.post_nms_top_n) + ", min side " + num(ep.min_size));
    expect_starts(p, "roi_sampling", n(c.roi_samples.batch) + " per image");
    expect_contains(p, "roi_pooler",
                    " " + n(c.pooled_size) + "x" + n(c.pooled_size) + ", scale 1/" + n(c.feature_stride));
    expect_contains(p, "box_coder", "head weights " + join(c.box_weights));
    expect_contains(p, "losses", "smooth-L1 (beta " + num(c.head_beta) + ") / RoIs");
    expect_starts(p, "test",
                  "score > " + num(c.score_threshold) + ", per-class NMS " + num(c.test_nms) + ", at most " +
                      n(c.detections_per_image) + " per image");
    expect_starts(p, "num_classes", n(c.num_classes) + " ");
    expect_starts(p, "batch_size", n(c.default_batch) + " ");
    expect_starts(p, "optimizer", "SGD momentum " + num(c.momentum) + ", weight decay " + num(c.weight_decay) + " ");
    expect_starts(p, "learning_rate", num(c.base_lr) + " x batch/16 after a " + n(c.warmup) + "-iteration");
    EXPECT_EQ(p.default_batch, c.default_batch);
  });
}

TEST(PresetTables, DeepSpeech2) {
  for_each_preset("deepspeech2", deepspeech2_config, [](const Preset& p, const DeepSpeech2Config& c) {
    expect_starts(p, "input", n(c.frequency_bins) + "-bin log spectrograms");
    expect_starts(p, "conv.0",
                  n(c.conv_channels) + " channels, " + n(c.conv0_kernel_t) + "x" + n(c.conv0_kernel_f) + " stride " +
                      n(c.conv0_stride_t) + "x" + n(c.conv0_stride_f) + " ");
    expect_starts(p, "conv.1",
                  n(c.conv_channels) + " channels, " + n(c.conv1_kernel_t) + "x" + n(c.conv1_kernel_f) + " stride " +
                      n(c.conv1_stride_t) + "x" + n(c.conv1_stride_f) + " ");
    expect_row(p, "clipped_relu", "min(max(x, 0), " + num(c.relu_clip) + ")");
    expect_starts(p, "rnns", n(c.rnn_layers) + " bidirectional GRU layers of " + n(c.rnn_hidden) + " ");
    expect_starts(p, "fc", n(c.rnn_hidden) + " -> " + n(c.classes) + ",");
    expect_starts(p, "loss", "CTC over " + n(c.classes) + " symbols");
    expect_starts(p, "optimizer", "SGD momentum " + num(c.momentum) + ",");
    expect_contains(p, "optimizer", "clipped at " + num(c.max_grad_norm));
    expect_starts(p, "learning_rate", num(c.lr) + ",");
    if (c.lr_anneal != 1.0) expect_contains(p, "learning_rate", "divided by " + num(c.lr_anneal));
    expect_row(p, "batch_size", n(c.batch) + " utterances");
    EXPECT_EQ(p.default_batch, c.batch);
  });
}

TEST(PresetTables, Wgan) {
  for_each_preset("wgan", wgan_config, [](const Preset& p, const WganConfig& c) {
    const std::string side = n(c.image_size());
    expect_starts(p, "image_size", side + "x" + side + "x3,");
    expect_row(p, "dim", n(c.dim));
    expect_starts(p, "noise", n(c.noise) + " ");
    std::vector<int64_t> generator;
    for (const int64_t w : c.widths) generator.push_back(w * c.dim);
    expect_starts(p, "generator_channels", "linear -> 4x4x" + n(generator.front()) + ", blocks to " + join(generator));
    const std::vector<int64_t> critic(generator.rbegin(), generator.rend());
    expect_starts(p, "critic_channels", "conv3x3 3 -> " + n(critic.front()) + ", blocks to " + join(critic));
    expect_row(p, "lambda", num(c.lambda));
    expect_starts(p, "critic_steps", n(c.critic_steps) + " per generator step");
    expect_starts(p, "optimizer", "Adam lr " + num(c.lr) + ", betas " + num(c.beta1) + "/" + num(c.beta2) + ",");
    expect_row(p, "batch_size", n(c.batch));
    EXPECT_EQ(p.default_batch, c.batch);
  });
}

TEST(PresetTables, A3c) {
  for_each_preset("a3c", a3c_config, [](const Preset& p, const A3cConfig& c) {
    expect_starts(p, "conv1", n(c.conv1_channels) + " filters");
    expect_starts(p, "conv2", n(c.conv2_channels) + " filters");
    expect_starts(p, "fc", n(c.hidden) + ",");
    expect_contains(p, "heads", "linear -> " + n(c.actions) + " logits");
    expect_starts(p, "learners", n(c.learners) + " actor-learner threads");
    expect_starts(p, "t_max", n(c.t_max) + " steps per rollout");
    expect_starts(p, "iteration", n(c.updates_per_iteration) + " updates");
    expect_row(p, "gamma", num(c.gamma));
    expect_contains(p, "loss", " - " + num(c.entropy_beta) + " H(pi(s_t))] + " + num(c.value_coef) + " sum_t");
    expect_contains(p, "optimizer",
                    "lr " + num(c.lr) + " constant, decay " + num(c.rms_alpha) + ", eps " + num(c.rms_eps) + " ");
    expect_row(p, "gradient_clipping", "global norm " + num(c.max_grad_norm) + " per update");
    expect_starts(p, "rewards", c.clip_rewards ? "clipped" : "unclipped");
    const BreakoutConfig& g = c.game;
    expect_starts(p, "game",
                  "Breakout (workloads/a3c/breakout.h): " + n(g.brick_rows) + "x" + n(g.brick_columns) +
                      " bricks from y " + n(g.wall_top) + ", paddle " + n(g.paddle_width));
    expect_contains(p, "game", ", ball " + num(g.ball_speed) + " px/frame");
    expect_contains(p, "game", ", " + n(g.lives) + " lives, " + n(g.walls) + " wall(s)");
    expect_row(p, "frames",
               "frame skip " + n(g.frame_skip) + ", " + n(Breakout::kStack) + " stacked, up to " + n(g.noop_max) +
                   " no-op steps at the start, episodes cut at " + n(g.max_frames) + " frames");
    expect_starts(p, "batch_size", n(c.t_max) + " ");
    EXPECT_EQ(p.default_batch, c.t_max);
  });
}

TEST(PresetTables, NumberForms) {
  EXPECT_EQ(table_exponent(1e-4), "1e-4");
  EXPECT_EQ(table_exponent(1e-9), "1e-9");
  EXPECT_EQ(table_exponent(2.5e-4), "2.5e-4");
  EXPECT_EQ(table_exponent(400), "4e2");
  const std::vector<int64_t> blocks = {3, 4, 6, 3};
  EXPECT_EQ(table_list(blocks), "3,4,6,3");
  const std::vector<float> ratios = {0.5f, 1.0f, 2.0f};
  EXPECT_EQ(table_list(ratios), "0.5,1,2");
  EXPECT_EQ(grouped_count(0), "0");
  EXPECT_EQ(grouped_count(999), "999");
  EXPECT_EQ(grouped_count(8000), "8,000");
  EXPECT_EQ(grouped_count(677429), "677,429");
  EXPECT_EQ(grouped_count(25557032), "25,557,032");
  EXPECT_EQ(grouped_count(-1234), "-1,234");
}

// `trainscope list` counts the translation workloads' parameters from their configurations
// (WorkloadSpec::count_parameters) rather than making their corpora: every such count must be
// that of the model a run builds.
TEST(PresetTables, CountedParametersAreTheBuiltModels) {
  int counted = 0;
  for (const auto& spec : registry()) {
    if (!spec.count_parameters) continue;
    for (const auto& p : spec.presets) {
      WorkloadConfig wc;
      wc.preset = p.name;
      wc.device = ts::engine::Device::meta();
      EXPECT_EQ(spec.parameter_count(p.name), spec.create(wc)->model().parameter_count()) << spec.name << " " << p.name;
      ++counted;
    }
  }
  EXPECT_GE(counted, 6);  // seq2seq's and transformer's presets
}
