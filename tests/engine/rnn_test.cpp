// The rnn family (engine/ops/rnn.cpp): ops::lstm, ops::gru, nn::Lstm, nn::Gru against a naive
// per-step reference written here in double precision (PyTorch's equations), finite differences
// for every input, length-1 steps chained through h0/c0 (seq2seq's decoder), and PyTorch's
// parameter counts and names.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/nn/recurrent.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class RnnOps : public OnDevice {};

struct Sizes {
  int64_t T, B, I, H;
};

// One layer, one direction, as torch.nn.LSTM / torch.nn.GRU define it, sequence by sequence.
struct Reference {
  std::vector<float> y, h, c;
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

Reference reference(bool lstm, const Sizes& s, const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                    const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const std::vector<int64_t>& lens,
                    bool reverse) {
  const int64_t G = lstm ? 4 : 3, H = s.H, I = s.I, B = s.B;
  const auto xv = x.to_vector(), wi = w_ih.to_vector(), wh = w_hh.to_vector();
  const auto bi = b_ih.defined() ? b_ih.to_vector() : std::vector<float>(static_cast<size_t>(G * H), 0.0f);
  const auto bh = b_hh.defined() ? b_hh.to_vector() : std::vector<float>(static_cast<size_t>(G * H), 0.0f);
  const auto hv = h0.defined() ? h0.to_vector() : std::vector<float>(static_cast<size_t>(B * H), 0.0f);
  const auto cv = c0.defined() ? c0.to_vector() : std::vector<float>(static_cast<size_t>(B * H), 0.0f);
  Reference r;
  r.y.assign(static_cast<size_t>(s.T * B * H), 0.0f);
  r.h.resize(static_cast<size_t>(B * H));
  r.c.resize(static_cast<size_t>(B * H));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
    for (int64_t k = 0; k < H; ++k) {
      h[static_cast<size_t>(k)] = hv[static_cast<size_t>(b * H + k)];
      c[static_cast<size_t>(k)] = cv[static_cast<size_t>(b * H + k)];
    }
    const int64_t len = lens[static_cast<size_t>(b)];
    for (int64_t step = 0; step < len; ++step) {
      const int64_t t = reverse ? len - 1 - step : step;
      std::vector<double> gi(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H));
      for (int64_t o = 0; o < G * H; ++o) {
        double a = bi[static_cast<size_t>(o)], e = bh[static_cast<size_t>(o)];
        for (int64_t i = 0; i < I; ++i)
          a += wi[static_cast<size_t>(o * I + i)] * xv[static_cast<size_t>((t * B + b) * I + i)];
        for (int64_t k = 0; k < H; ++k) e += wh[static_cast<size_t>(o * H + k)] * h[static_cast<size_t>(k)];
        gi[static_cast<size_t>(o)] = a;
        gh[static_cast<size_t>(o)] = e;
      }
      for (int64_t k = 0; k < H; ++k) {
        auto at = [&](const std::vector<double>& v, int64_t gate) { return v[static_cast<size_t>(gate * H + k)]; };
        double hn;
        if (lstm) {
          const double i = sigmoid(at(gi, 0) + at(gh, 0)), f = sigmoid(at(gi, 1) + at(gh, 1));
          const double g = std::tanh(at(gi, 2) + at(gh, 2)), o = sigmoid(at(gi, 3) + at(gh, 3));
          c[static_cast<size_t>(k)] = f * c[static_cast<size_t>(k)] + i * g;
          hn = o * std::tanh(c[static_cast<size_t>(k)]);
        } else {
          const double rr = sigmoid(at(gi, 0) + at(gh, 0)), z = sigmoid(at(gi, 1) + at(gh, 1));
          const double n = std::tanh(at(gi, 2) + rr * at(gh, 2));
          hn = (1 - z) * n + z * h[static_cast<size_t>(k)];
        }
        h[static_cast<size_t>(k)] = hn;  // k's new state depends only on the old h through gh (computed above)
        r.y[static_cast<size_t>((t * B + b) * H + k)] = static_cast<float>(hn);
      }
    }
    for (int64_t k = 0; k < H; ++k) {
      r.h[static_cast<size_t>(b * H + k)] = static_cast<float>(h[static_cast<size_t>(k)]);
      r.c[static_cast<size_t>(b * H + k)] = static_cast<float>(c[static_cast<size_t>(k)]);
    }
  }
  return r;
}

Tensor lengths_tensor(const std::vector<int64_t>& lens) {
  std::vector<float> v;
  for (auto l : lens) v.push_back(static_cast<float>(l));
  return Tensor::from_vector({static_cast<int64_t>(lens.size())}, v);
}

// Inputs of one layer: x, h0, c0, w_ih, w_hh, b_ih, b_hh (c0 too for the GRU; it is not passed).
std::vector<Tensor> layer_inputs(bool lstm, const Sizes& s, uint64_t seed, float weight_scale = 0.5f) {
  const int64_t G = lstm ? 4 : 3;
  return {rand_tensor({s.T, s.B, s.I}, seed + 1),
          rand_tensor({s.B, s.H}, seed + 2),
          rand_tensor({s.B, s.H}, seed + 3),
          rand_tensor({G * s.H, s.I}, seed + 4, true, -weight_scale, weight_scale),
          rand_tensor({G * s.H, s.H}, seed + 5, true, -weight_scale, weight_scale),
          rand_tensor({G * s.H}, seed + 6, true, -weight_scale, weight_scale),
          rand_tensor({G * s.H}, seed + 7, true, -weight_scale, weight_scale)};
}

ops::RnnOutput run_layer(bool lstm, const std::vector<Tensor>& t, const Tensor& lengths, bool reverse) {
  return lstm ? ops::lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], lengths, reverse)
              : ops::gru(t[0], t[1], t[3], t[4], t[5], t[6], lengths, reverse);
}

// Every output in one vector, for the gradient checker (y, h_n, then c_n for the LSTM).
Tensor all_outputs(const ops::RnnOutput& r) {
  std::vector<Tensor> parts{ops::reshape(r.y, {r.y.numel()}), ops::reshape(r.h_n, {r.h_n.numel()})};
  if (r.c_n.defined()) parts.push_back(ops::reshape(r.c_n, {r.c_n.numel()}));
  return ops::concat(parts, 0);
}

// On `device`; the GPU's tolerance is its parity tolerance with the CPU (cuda/rnn_test.cpp): cuBLAS
// GEMMs and CUDA's expf/tanhf, compounded over the steps.
void expect_matches_reference(Device device, bool lstm, const Sizes& s, const std::vector<int64_t>& lens, bool reverse,
                              bool with_state, bool with_bias, float weight_scale, uint64_t seed) {
  SCOPED_TRACE(std::string(lstm ? "lstm" : "gru") + (reverse ? " reverse" : "") + (with_state ? " h0" : "") +
               (with_bias ? " bias" : ""));
  NoGradScope no_grad;
  std::vector<Tensor> t = layer_inputs(lstm, s, seed, weight_scale);
  if (!with_state) t[1] = t[2] = Tensor();
  if (!with_bias) t[5] = t[6] = Tensor();
  const ops::RnnOutput r =
      run_layer(lstm, transferred_each(t, device), transferred(lengths_tensor(lens), device), reverse);
  const double tol = device.is_cpu() ? 2e-6 : 1e-4;
  const Reference ref = reference(lstm, s, t[0], t[1], lstm ? t[2] : Tensor(), t[3], t[4], t[5], t[6], lens, reverse);
  ASSERT_EQ(r.y.shape(), (Shape{s.T, s.B, s.H}));
  ASSERT_EQ(r.h_n.shape(), (Shape{s.B, s.H}));
  EXPECT_LT(max_rel_diff(r.y.to_vector(), ref.y), tol);
  EXPECT_LT(max_rel_diff(r.h_n.to_vector(), ref.h), tol);
  if (lstm) {
    ASSERT_EQ(r.c_n.shape(), (Shape{s.B, s.H}));
    EXPECT_LT(max_rel_diff(r.c_n.to_vector(), ref.c), tol);
  } else {
    EXPECT_FALSE(r.c_n.defined());
  }
  // Padded steps output exact zeros.
  const auto y = r.y.to_vector();
  for (int64_t tt = 0; tt < s.T; ++tt) {
    for (int64_t b = 0; b < s.B; ++b) {
      if (tt < lens[static_cast<size_t>(b)]) continue;
      for (int64_t k = 0; k < s.H; ++k) ASSERT_EQ(y[static_cast<size_t>((tt * s.B + b) * s.H + k)], 0.0f);
    }
  }
}

TEST_P(RnnOps, LstmMatchesReference) {
  const Sizes s{6, 4, 5, 7};
  for (bool reverse : {false, true}) {
    expect_matches_reference(device(), true, s, {6, 3, 0, 5}, reverse, true, true, 0.5f, 10);
    expect_matches_reference(device(), true, s, {6, 6, 6, 6}, reverse, false, false, 0.5f, 20);
    expect_matches_reference(device(), true, s, {1, 6, 2, 4}, reverse, true, false, 0.5f, 30);
  }
}

TEST_P(RnnOps, GruMatchesReference) {
  const Sizes s{6, 4, 5, 7};
  for (bool reverse : {false, true}) {
    expect_matches_reference(device(), false, s, {6, 3, 0, 5}, reverse, true, true, 0.5f, 40);
    expect_matches_reference(device(), false, s, {6, 6, 6, 6}, reverse, false, false, 0.5f, 50);
    expect_matches_reference(device(), false, s, {1, 6, 2, 4}, reverse, true, false, 0.5f, 60);
  }
}

// Wider than a vector (tails of the gate loops), and saturating pre-activations (weights up to
// +-3 over 13 inputs, pre-activations up to ~40): the gate functions' approximations hold across
// their whole range. Few steps there: large recurrent weights amplify fp32 rounding step by step.
TEST_P(RnnOps, WideAndSaturatedMatchReference) {
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      expect_matches_reference(device(), lstm, {9, 5, 13, 37}, {9, 4, 7, 1, 9}, reverse, true, true, 0.3f, 70);
      expect_matches_reference(device(), lstm, {2, 5, 13, 37}, {2, 1, 2, 0, 1}, reverse, true, true, 3.0f, 80);
    }
  }
}

// Big enough for the gate kernels' parallel loops, run on 4 threads whatever the machine's core
// count or OMP_NUM_THREADS (ctest sets 1).
TEST_P(RnnOps, LargeBatchMatchesReference) {
  OpThreadsScope threads(4);
  std::vector<int64_t> lens;
  for (int64_t b = 0; b < 48; ++b) lens.push_back(1 + (b * 7) % 5);
  for (bool lstm : {true, false}) {
    expect_matches_reference(device(), lstm, {5, 48, 16, 128}, lens, true, true, true, 0.2f, 85);
  }
}

// W_hh above 16 MB (H = 1200): the forward steps read it from a transposed copy, backward as
// stored (smaller ones the other way round; every other test covers those).
TEST_P(RnnOps, LargeHiddenMatchesReference) {
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      expect_matches_reference(device(), lstm, {3, 2, 4, 1200}, {3, 2}, reverse, true, true, 0.05f, 87);
    }
  }
}

TEST_P(RnnOps, FinalStatesAtEachSequencesOwnLastStep) {
  const Sizes s{5, 4, 3, 4};
  const std::vector<int64_t> lens{5, 2, 0, 4};
  NoGradScope no_grad;
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(lstm ? "lstm" : "gru") + (reverse ? " reverse" : ""));
      const std::vector<Tensor> t = layer_inputs(lstm, s, 90);
      const ops::RnnOutput r = run_layer(lstm, on_each(t), on(lengths_tensor(lens)), reverse);
      const auto y = r.y.to_vector(), h = r.h_n.to_vector(), h0 = t[1].to_vector(), c0 = t[2].to_vector();
      for (int64_t b = 0; b < s.B; ++b) {
        const int64_t len = lens[static_cast<size_t>(b)];
        for (int64_t k = 0; k < s.H; ++k) {
          const auto i = static_cast<size_t>(b * s.H + k);
          if (len == 0) {  // nothing ran: the initial state comes back
            EXPECT_EQ(h[i], h0[i]);
            if (lstm) {
              EXPECT_EQ(r.c_n.to_vector()[i], c0[i]);
            }
          } else {  // the output of the last step processed: t = len - 1, or 0 reversed
            const int64_t last = reverse ? 0 : len - 1;
            EXPECT_EQ(h[i], y[static_cast<size_t>((last * s.B + b) * s.H + k)]);
          }
        }
      }
      // Padding is ignored: the same sequences alone, cut to their length, give the same states.
      for (int64_t b : {0, 1, 3}) {
        const int64_t len = lens[static_cast<size_t>(b)];
        std::vector<Tensor> one = on_each(t);  // on the device under test, sliced there
        one[0] = ops::slice(ops::slice(one[0], 1, b, 1), 0, 0, len);
        one[1] = ops::slice(one[1], 0, b, 1);
        one[2] = ops::slice(one[2], 0, b, 1);
        const ops::RnnOutput alone = run_layer(lstm, one, Tensor(), reverse);
        const auto ha = alone.h_n.to_vector();
        for (int64_t k = 0; k < s.H; ++k)
          EXPECT_NEAR(ha[static_cast<size_t>(k)], h[static_cast<size_t>(b * s.H + k)], 1e-6);
      }
    }
  }
}

TEST_P(RnnOps, LstmGradients) {
  const Sizes s{4, 3, 3, 4};
  const Tensor lens = lengths_tensor({4, 2, 3});
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    EXPECT_GRADCHECK(
        gradcheck([&](const std::vector<Tensor>& t) { return all_outputs(run_layer(true, t, on(lens), reverse)); },
                  layer_inputs(true, s, 100)));
  }
  // Without lengths, h0/c0 or biases.
  std::vector<Tensor> t = layer_inputs(true, s, 110);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return all_outputs(ops::lstm(in[0], Tensor(), Tensor(), in[1], in[2], Tensor(), Tensor(), Tensor(), true));
      },
      {t[0], t[3], t[4]}));
}

TEST_P(RnnOps, GruGradients) {
  const Sizes s{4, 3, 3, 4};
  const Tensor lens = lengths_tensor({4, 2, 3});
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    std::vector<Tensor> t = layer_inputs(false, s, 120);
    t.erase(t.begin() + 2);  // no c0
    EXPECT_GRADCHECK(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return all_outputs(ops::gru(in[0], in[1], in[2], in[3], in[4], in[5], on(lens), reverse));
        },
        t));
  }
  std::vector<Tensor> t = layer_inputs(false, s, 130);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return all_outputs(ops::gru(in[0], Tensor(), in[1], in[2], Tensor(), Tensor(), Tensor(), false));
      },
      {t[0], t[3], t[4]}));
}

// A zero-length sequence passes its initial state (and that state's gradient) straight through.
TEST_P(RnnOps, GradientsWithAnEmptySequence) {
  const Sizes s{3, 3, 2, 3};
  const Tensor lens = lengths_tensor({3, 0, 1});
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(lstm ? "lstm" : "gru") + (reverse ? " reverse" : ""));
      std::vector<Tensor> t = layer_inputs(lstm, s, 140);
      if (!lstm) t[2] = Tensor();
      EXPECT_GRADCHECK(gradcheck(
          [&](const std::vector<Tensor>& in) { return all_outputs(run_layer(lstm, in, on(lens), reverse)); }, t));
    }
  }
}

// Every sequence empty: the states pass through untouched, forward and backward.
TEST_P(RnnOps, AllSequencesEmpty) {
  const Sizes s{3, 2, 2, 3};
  for (bool lstm : {true, false}) {
    SCOPED_TRACE(lstm);
    const std::vector<Tensor> t = layer_inputs(lstm, s, 145);
    const ops::RnnOutput r = run_layer(lstm, on_each(t), on(lengths_tensor({0, 0})), false);
    EXPECT_EQ(r.h_n.to_vector(), t[1].to_vector());
    for (float v : r.y.to_vector()) ASSERT_EQ(v, 0.0f);
    const Tensor seed = rand_tensor({s.B, s.H}, 146, false);
    const std::vector<Tensor> g = grad({r.h_n}, {t[1], t[3], t[4]}, {on(seed)});
    EXPECT_EQ(g[0].to_vector(), seed.to_vector());
    for (float v : g[1].to_vector()) ASSERT_EQ(v, 0.0f);
    for (float v : g[2].to_vector()) ASSERT_EQ(v, 0.0f);
  }
}

// Asking for some inputs only (engine::grad tells the node) gives the same values.
TEST_P(RnnOps, PartialGradientsAgree) {
  const Sizes s{4, 3, 3, 4};
  const Tensor lens = lengths_tensor({4, 1, 3});
  for (bool lstm : {true, false}) {
    SCOPED_TRACE(lstm);
    const std::vector<Tensor> t = layer_inputs(lstm, s, 150);
    const Tensor out = ops::sum(all_outputs(run_layer(lstm, on_each(t), on(lens), true)));
    std::vector<Tensor> wrt{t[0], t[1], t[3], t[4], t[5], t[6]};
    if (lstm) wrt.push_back(t[2]);
    const std::vector<Tensor> all = grad({out}, wrt);
    for (size_t i = 0; i < wrt.size(); ++i) {
      const Tensor again = ops::sum(all_outputs(run_layer(lstm, on_each(t), on(lens), true)));
      const std::vector<Tensor> one = grad({again}, {wrt[i]});
      ASSERT_TRUE(one[0].defined());
      EXPECT_EQ(one[0].to_vector(), all[i].to_vector()) << i;
    }
  }
}

TEST_P(RnnOps, SecondBackwardThrows) {
  const Sizes s{3, 2, 2, 3};
  for (bool lstm : {true, false}) {
    const std::vector<Tensor> t = layer_inputs(lstm, s, 160);
    const Tensor out = ops::sum(all_outputs(run_layer(lstm, on_each(t), Tensor(), false)));
    const std::vector<Tensor> g = grad({out}, {t[0], t[4]}, {}, /*create_graph=*/true);
    ASSERT_TRUE(g[0].requires_grad());
    EXPECT_THROW(ops::sum(ops::mul(g[0], g[0])).backward(), std::logic_error);
  }
}

// A NaN in the input reaches the outputs (the gate functions' bit tricks must not hide divergence).
TEST_P(RnnOps, NanPropagates) {
  const Sizes s{2, 2, 3, 4};
  NoGradScope no_grad;
  for (bool lstm : {true, false}) {
    std::vector<Tensor> t = layer_inputs(lstm, s, 175);
    t[0].data()[0] = std::numeric_limits<float>::quiet_NaN();  // x[0, 0, 0]
    const ops::RnnOutput r = run_layer(lstm, on_each(t), Tensor(), false);
    EXPECT_TRUE(std::isnan(r.h_n.to_vector()[0])) << lstm;
    EXPECT_FALSE(std::isnan(r.h_n.to_vector()[s.H])) << lstm;  // the other sequence is untouched
  }
}

TEST_P(RnnOps, BadArguments) {
  const Sizes s{3, 2, 2, 3};
  const std::vector<Tensor> t = on_each(layer_inputs(true, s, 170));
  NoGradScope no_grad;
  EXPECT_THROW(ops::lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], on(lengths_tensor({4, 1})), false),
               std::invalid_argument);  // longer than T
  EXPECT_THROW(ops::lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], on(Tensor::from_vector({2}, {1.5f, 1.0f})), false),
               std::invalid_argument);  // not an integer
  EXPECT_THROW(ops::lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], on(lengths_tensor({3})), false),
               std::invalid_argument);
  EXPECT_THROW(ops::gru(t[0], t[1], t[3], t[4], t[5], t[6], Tensor(), false), std::invalid_argument);  // 4H weights
  EXPECT_THROW(ops::lstm(t[0], t[2], t[1], t[3], t[4], on(rand_tensor({5}, 1)), t[6], Tensor(), false),
               std::invalid_argument);
  EXPECT_THROW(ops::lstm(on(rand_tensor({3, 2, 5}, 2)), t[1], t[2], t[3], t[4], t[5], t[6], Tensor(), false),
               std::invalid_argument);
}

TEST(RnnModules, PyTorchParameterCounts) {
  Rng rng(1);
  // nn.LSTM(512, 512, 2): per layer 4 * 512 * (512 + 512) + 2 * 4 * 512.
  nn::Lstm seq2seq({512, 512, 2}, Device::meta(), rng);
  EXPECT_EQ(seq2seq.parameter_count(), 4202496);
  // nn.GRU(1760, 1760, bidirectional=True): 2 directions x 3 gates x (1760 x 1760 x 2 + 2 x 1760).
  nn::RnnOptions ds2{1760, 1760, 1};
  ds2.bidirectional = true;
  EXPECT_EQ(nn::Gru(ds2, Device::meta(), rng).parameter_count(), 2 * 3 * (1760 * 1760 * 2 + 2 * 1760));
  EXPECT_EQ(nn::Gru(ds2, Device::meta(), rng).parameter_count(), 37192320);
  // Deep Speech 2's 7 layers with the directions summed: every layer's input stays 1760.
  ds2.num_layers = 7;
  ds2.merge = nn::RnnOptions::Merge::sum;
  EXPECT_EQ(nn::Gru(ds2, Device::meta(), rng).parameter_count(), 7 * 37192320);
  // Concatenated, layers after the first read 2H: nn.GRU(1760, 1760, 2, bidirectional=True).
  ds2.num_layers = 2;
  ds2.merge = nn::RnnOptions::Merge::concat;
  EXPECT_EQ(nn::Gru(ds2, Device::meta(), rng).parameter_count(),
            37192320 + 2 * 3 * (1760 * 3520 + 1760 * 1760 + 2 * 1760));
  nn::RnnOptions no_bias{10, 20, 1};
  no_bias.bias = false;
  EXPECT_EQ(nn::Lstm(no_bias, Device::meta(), rng).parameter_count(), 4 * 20 * 30);
}

TEST(RnnModules, PyTorchParameterNames) {
  Rng rng(2);
  nn::RnnOptions o{3, 4, 2};
  o.bidirectional = true;
  nn::Lstm m(o, Device::cpu(), rng);
  const auto params = m.named_parameters();
  const std::vector<std::string> expect{
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  ASSERT_EQ(params.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(params[i].first, expect[i]);
  EXPECT_EQ(params[0].second.shape(), (Shape{16, 3}));
  EXPECT_EQ(params[8].second.shape(), (Shape{16, 8}));  // layer 1 reads both directions
  EXPECT_EQ(params[1].second.shape(), (Shape{16, 4}));
  // uniform(-1/sqrt(H), 1/sqrt(H)) everywhere.
  for (const auto& [name, p] : params) {
    for (float v : p.to_vector()) {
      ASSERT_LE(std::abs(v), 0.5f) << name;
    }
  }
}

TEST(RnnModules, BidirectionalStackComposesTheLayerOps) {
  Rng rng(3);
  nn::RnnOptions o{3, 4, 2};
  o.bidirectional = true;
  nn::Lstm m(o, Device::cpu(), rng);
  const Tensor x = rand_tensor({5, 3, 3}, 4, false);
  const Tensor lens = lengths_tensor({5, 2, 4});
  const auto out = m.forward(x, lens);
  ASSERT_EQ(out.y.shape(), (Shape{5, 3, 8}));
  ASSERT_EQ(out.final.h.size(), 4u);
  ASSERT_EQ(out.final.c.size(), 4u);
  // By hand: layer 0 both ways, concatenated, then layer 1 both ways.
  {
    NoGradScope no_grad;
    auto layer = [&](const Tensor& in, int64_t l) {
      std::vector<Tensor> ys;
      for (int64_t dir = 0; dir < 2; ++dir) {
        const auto& w = m.weights(l, dir);
        ys.push_back(ops::lstm(in, Tensor(), Tensor(), w.w_ih, w.w_hh, w.b_ih, w.b_hh, lens, dir == 1).y);
      }
      return ops::concat(ys, 2);
    };
    EXPECT_EQ(out.y.to_vector(), layer(layer(x, 0), 1).to_vector());
  }
  // Every parameter gets a gradient.
  ops::sum(ops::mul(out.y, out.y)).backward();
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    double norm = 0;
    for (float v : p.grad().to_vector()) norm += std::abs(v);
    EXPECT_GT(norm, 0.0) << name;
  }
}

TEST(RnnModules, GruSumMergeAndInitialStates) {
  Rng rng(5);
  nn::RnnOptions o{6, 6, 2};
  o.bidirectional = true;
  o.merge = nn::RnnOptions::Merge::sum;
  nn::Gru m(o, Device::cpu(), rng);
  const Tensor x = rand_tensor({4, 2, 6}, 6, false);
  nn::RnnStates init;
  for (int k = 0; k < 4; ++k) init.h.push_back(rand_tensor({2, 6}, 7 + static_cast<uint64_t>(k), false));
  const auto out = m.forward(x, Tensor(), init);
  EXPECT_EQ(out.y.shape(), (Shape{4, 2, 6}));
  EXPECT_EQ(out.final.h.size(), 4u);
  EXPECT_TRUE(out.final.c.empty());
  NoGradScope no_grad;
  const auto& w = m.weights(0, 1);
  const auto rev = ops::gru(x, init.h[1], w.w_ih, w.w_hh, w.b_ih, w.b_hh, Tensor(), true);
  EXPECT_EQ(out.final.h[1].to_vector(), rev.h_n.to_vector());
  nn::RnnStates bad = init;
  bad.c = init.h;
  EXPECT_THROW(m.forward(x, Tensor(), bad), std::invalid_argument);
  EXPECT_THROW(m.forward(rand_tensor({4, 2, 5}, 8, false)), std::invalid_argument);
}

TEST(RnnModules, DropoutBetweenLayersInTrainingOnly) {
  Rng rng(9);
  nn::RnnOptions o{4, 4, 2};
  o.dropout = 0.5f;
  nn::Lstm m(o, Device::cpu(), rng);
  const Tensor x = rand_tensor({3, 2, 4}, 10, false);
  NoGradScope no_grad;
  const auto a = m.forward(x, Tensor(), {}, 1).y.to_vector();
  EXPECT_EQ(a, m.forward(x, Tensor(), {}, 1).y.to_vector());  // the seed fixes the masks
  EXPECT_NE(a, m.forward(x, Tensor(), {}, 2).y.to_vector());
  m.train(false);
  const auto e = m.forward(x, Tensor(), {}, 1).y.to_vector();
  EXPECT_EQ(e, m.forward(x, Tensor(), {}, 2).y.to_vector());
  EXPECT_NE(a, e);
}

// seq2seq's decoder runs ops::lstm one step at a time, carrying h and c from step to step: the
// gradient must reach the first step's h0/c0 and the shared weights through every step.
TEST_P(RnnOps, LstmStepsChainThroughInitialStates) {
  const int64_t B = 2, I = 3, H = 4, steps = 3;
  Tensor x = rand_tensor({steps, B, I}, 41), h0 = rand_tensor({B, H}, 42), c0 = rand_tensor({B, H}, 43),
         w_ih = rand_tensor({4 * H, I}, 44, true, -0.5f, 0.5f), w_hh = rand_tensor({4 * H, H}, 45, true, -0.5f, 0.5f),
         b = rand_tensor({4 * H}, 46);
  auto stepwise = [&](const std::vector<Tensor>& t) {
    const auto xs = ops::split(t[0], 0, std::vector<int64_t>(steps, 1));
    Tensor h = t[1], c = t[2];
    std::vector<Tensor> ys;
    for (int64_t s = 0; s < steps; ++s) {
      const ops::RnnOutput r = ops::lstm(xs[static_cast<size_t>(s)], h, c, t[3], t[4], t[5], Tensor(), Tensor());
      h = r.h_n;
      c = r.c_n;
      ys.push_back(r.y);
    }
    ys.push_back(ops::reshape(c, {1, B, H}));
    return ops::concat(ys, 0);
  };
  EXPECT_GRADCHECK(gradcheck(stepwise, {x, h0, c0, w_ih, w_hh, b}));
  // And it is the same function as one call over the whole sequence.
  NoGradScope no_grad;
  const std::vector<Tensor> in = on_each({x, h0, c0, w_ih, w_hh, b});
  const auto whole = ops::lstm(in[0], in[1], in[2], in[3], in[4], in[5], Tensor(), Tensor());
  const auto y = stepwise(in).to_vector(), yw = whole.y.to_vector(), cw = whole.c_n.to_vector();
  for (size_t i = 0; i < yw.size(); ++i) EXPECT_NEAR(y[i], yw[i], 1e-6);
  for (size_t i = 0; i < cw.size(); ++i) EXPECT_NEAR(y[yw.size() + i], cw[i], 1e-6);
}

TEST_P(RnnOps, GradientsWithLengthsBothDirections) {
  const int64_t T = 4, B = 3, I = 3, H = 4;
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(lstm ? "lstm" : "gru") + (reverse ? " reverse" : ""));
      const int64_t G = lstm ? 4 : 3;
      const std::vector<Tensor> in{rand_tensor({T, B, I}, 201),
                                   rand_tensor({B, H}, 202),
                                   rand_tensor({B, H}, 203),
                                   rand_tensor({G * H, I}, 204, true, -0.5f, 0.5f),
                                   rand_tensor({G * H, H}, 205, true, -0.5f, 0.5f),
                                   rand_tensor({G * H}, 206),
                                   rand_tensor({G * H}, 207),
                                   Tensor::from_vector({B}, {4, 2, 3})};
      EXPECT_GRADCHECK(gradcheck(
          [lstm, reverse](const std::vector<Tensor>& t) {
            return all_outputs(lstm ? ops::lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], reverse)
                                    : ops::gru(t[0], t[1], t[3], t[4], t[5], t[6], t[7], reverse));
          },
          in));
    }
  }
}

TS_ON_EVERY_DEVICE(RnnOps);

}  // namespace
}  // namespace ts::engine
