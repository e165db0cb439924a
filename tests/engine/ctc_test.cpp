// The ctc family (engine/ops/ctc.cpp): the CTC loss against a brute-force reference that
// enumerates every alignment of small cases, finite-difference gradient checks, and the greedy
// decoder and edit distance.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class CtcOps : public OnDevice {};

using Reduction = Backend::CtcReduction;

// B(path): merge repeats, then drop blanks.
std::vector<int64_t> collapse(const std::vector<int64_t>& path, int64_t blank) {
  std::vector<int64_t> out;
  int64_t prev = -1;
  for (int64_t k : path) {
    if (k != prev && k != blank) out.push_back(k);
    prev = k;
  }
  return out;
}

struct Reference {
  double nll;                // -log p(target), +inf when no path collapses to it
  std::vector<double> grad;  // [T, K]: d nll / d logits (frames >= len: 0)
};

// Sums over all K^len paths of one sample. logits [T, K] for that sample.
Reference brute_force(const std::vector<double>& logits, int64_t t_max, int64_t k_count, int64_t len,
                      const std::vector<int64_t>& target, int64_t blank) {
  std::vector<double> y(logits.size());
  for (int64_t t = 0; t < t_max; ++t) {
    double m = -1e300, s = 0;
    for (int64_t k = 0; k < k_count; ++k) m = std::max(m, logits[static_cast<size_t>(t * k_count + k)]);
    for (int64_t k = 0; k < k_count; ++k) s += std::exp(logits[static_cast<size_t>(t * k_count + k)] - m);
    for (int64_t k = 0; k < k_count; ++k) {
      y[static_cast<size_t>(t * k_count + k)] = std::exp(logits[static_cast<size_t>(t * k_count + k)] - m) / s;
    }
  }
  double p = 0;
  std::vector<double> mass(static_cast<size_t>(t_max * k_count), 0.0);  // sum of matching path probs with pi_t = k
  std::vector<int64_t> path(static_cast<size_t>(len), 0);
  int64_t paths = 1;
  for (int64_t t = 0; t < len; ++t) paths *= k_count;
  for (int64_t code = 0; code < paths; ++code) {
    int64_t c = code;
    for (int64_t t = 0; t < len; ++t) {
      path[static_cast<size_t>(t)] = c % k_count;
      c /= k_count;
    }
    if (collapse(path, blank) != target) continue;
    double prob = 1;
    for (int64_t t = 0; t < len; ++t) prob *= y[static_cast<size_t>(t * k_count + path[static_cast<size_t>(t)])];
    p += prob;
    for (int64_t t = 0; t < len; ++t) mass[static_cast<size_t>(t * k_count + path[static_cast<size_t>(t)])] += prob;
  }
  Reference r;
  r.nll = p > 0 ? -std::log(p) : std::numeric_limits<double>::infinity();
  r.grad.assign(static_cast<size_t>(t_max * k_count), 0.0);
  if (p > 0) {
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t k = 0; k < k_count; ++k) {
        const auto i = static_cast<size_t>(t * k_count + k);
        r.grad[i] = y[i] - mass[i] / p;
      }
    }
  }
  return r;
}

struct Case {
  int64_t t_max, k_count;
  std::vector<int64_t> input_lengths;
  std::vector<std::vector<int64_t>> targets;
};

struct Inputs {
  Tensor logits, targets, input_lengths, target_lengths;
};

Inputs make_inputs(const Case& c, uint64_t seed, float scale = 2.0f) {
  const auto n = static_cast<int64_t>(c.targets.size());
  Inputs in;
  in.logits = rand_tensor({c.t_max, n, c.k_count}, seed, true, -scale, scale);
  std::vector<float> flat, tl, il;
  for (size_t i = 0; i < c.targets.size(); ++i) {
    for (int64_t l : c.targets[i]) flat.push_back(static_cast<float>(l));
    tl.push_back(static_cast<float>(c.targets[i].size()));
    il.push_back(static_cast<float>(c.input_lengths[i]));
  }
  in.targets = Tensor::from_vector({static_cast<int64_t>(flat.size())}, flat);
  in.target_lengths = Tensor::from_vector({n}, tl);
  in.input_lengths = Tensor::from_vector({n}, il);
  return in;
}

std::vector<double> sample_logits(const Tensor& logits, int64_t i) {
  const auto v = logits.to_vector();
  const int64_t t_max = logits.size(0), n = logits.size(1), k = logits.size(2);
  std::vector<double> out(static_cast<size_t>(t_max * k));
  for (int64_t t = 0; t < t_max; ++t)
    for (int64_t j = 0; j < k; ++j) out[static_cast<size_t>(t * k + j)] = v[static_cast<size_t>((t * n + i) * k + j)];
  return out;
}

ops::CtcLossOptions options(Reduction r, bool zero_infinity = false, int64_t blank = 0) {
  ops::CtcLossOptions o;
  o.reduction = r;
  o.zero_infinity = zero_infinity;
  o.blank = blank;
  return o;
}

// The loss of `in` on `device`: its tensors are transferred there, differentiably.
Tensor ctc_on(Device device, const Inputs& in, const ops::CtcLossOptions& o = {}, Tensor* nll = nullptr) {
  return ops::ctc_loss(transferred(in.logits, device), transferred(in.targets, device),
                       transferred(in.input_lengths, device), transferred(in.target_lengths, device), o, nll);
}

// Loss, per-sample nll and gradient of the op against the brute-force sums, both reductions.
void expect_matches_reference(Device device, const Case& c, uint64_t seed, int64_t blank = 0,
                              bool zero_infinity = false) {
  const Inputs in = make_inputs(c, seed);
  const auto n = static_cast<int64_t>(c.targets.size());
  std::vector<Reference> ref;
  for (int64_t i = 0; i < n; ++i) {
    ref.push_back(brute_force(sample_logits(in.logits, i), c.t_max, c.k_count, c.input_lengths[static_cast<size_t>(i)],
                              c.targets[static_cast<size_t>(i)], blank));
  }
  for (Reduction red : {Reduction::mean, Reduction::sum}) {
    SCOPED_TRACE(red == Reduction::mean ? "mean" : "sum");
    Tensor nll;
    const Tensor loss = ctc_on(device, in, options(red, zero_infinity, blank), &nll);
    const Tensor g = grad({loss}, {in.logits})[0];
    ASSERT_TRUE(g.defined());
    const auto nv = nll.to_vector();
    const auto gv = g.to_vector();
    double expect_loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto& r = ref[static_cast<size_t>(i)];
      const double len = static_cast<double>(c.targets[static_cast<size_t>(i)].size());
      const double w = red == Reduction::mean ? 1.0 / (static_cast<double>(n) * std::max(len, 1.0)) : 1.0;
      const bool inf = std::isinf(r.nll);
      const double nll_i = inf && zero_infinity ? 0.0 : r.nll;
      expect_loss += w * nll_i;
      if (std::isinf(nll_i)) {
        EXPECT_TRUE(std::isinf(nv[static_cast<size_t>(i)]) && nv[static_cast<size_t>(i)] > 0) << "sample " << i;
      } else {
        EXPECT_NEAR(nv[static_cast<size_t>(i)], nll_i, 1e-5 * (1 + std::abs(nll_i))) << "sample " << i;
      }
      for (int64_t t = 0; t < c.t_max; ++t) {
        for (int64_t k = 0; k < c.k_count; ++k) {
          const float got = gv[static_cast<size_t>((t * n + i) * c.k_count + k)];
          if (inf && !zero_infinity && t < c.input_lengths[static_cast<size_t>(i)]) {
            EXPECT_TRUE(std::isnan(got));
            continue;
          }
          const double want = inf ? 0.0 : w * r.grad[static_cast<size_t>(t * c.k_count + k)];
          EXPECT_NEAR(got, want, 1e-5) << "sample " << i << " t " << t << " k " << k;
        }
      }
    }
    if (std::isinf(expect_loss)) {
      EXPECT_TRUE(std::isinf(loss.item()));
    } else {
      EXPECT_NEAR(loss.item(), expect_loss, 1e-5 * (1 + std::abs(expect_loss)));
    }
  }
}

TEST_P(CtcOps, MatchesBruteForceOnRandomCases) {
  // T = 5, K = 4: distinct labels, a repeat (needs a blank between), a target that needs every
  // frame (L + repeats = T), a single label, and shorter inputs than T.
  const Case c{5, 4, {5, 5, 5, 4, 3, 5}, {{1, 2}, {1, 1}, {2, 2, 3, 3}, {3}, {1, 2, 3}, {3, 1, 3}}};
  expect_matches_reference(device(), c, 11);
}

TEST_P(CtcOps, MatchesBruteForceAtSixFramesThreeClasses) {
  const Case c{6, 3, {6, 6, 6, 2}, {{1, 1, 1}, {2, 1, 2, 1}, {1, 2, 2}, {2, 2}}};
  expect_matches_reference(device(), c, 12);
}

TEST_P(CtcOps, EmptyTargetsAreAllBlank) {
  // p(empty) = prod_t y_t(blank); mean divides by max(L, 1) = 1.
  const Case c{4, 3, {4, 2, 0}, {{}, {}, {}}};
  expect_matches_reference(device(), c, 13);
  const Inputs in = make_inputs(c, 13);
  Tensor nll;
  ctc_on(device(), in, {}, &nll);
  EXPECT_FLOAT_EQ(nll.to_vector()[2], 0.0f);  // no frames, nothing to emit: p = 1
}

TEST_P(CtcOps, NonZeroBlankIndex) {
  const Case c{5, 4, {5, 5, 4}, {{0, 1}, {2, 2}, {1, 0, 2}}};
  expect_matches_reference(device(), c, 14, /*blank=*/3);
}

TEST_P(CtcOps, InfeasibleLengthsGiveInfinityOrZero) {
  // [1, 1, 2] needs 4 frames (a blank between the repeats); 3 are given. [2] with 0 frames.
  const Case c{4, 3, {3, 4, 0}, {{1, 1, 2}, {1, 2}, {2}}};
  expect_matches_reference(device(), c, 15, 0, /*zero_infinity=*/false);
  expect_matches_reference(device(), c, 15, 0, /*zero_infinity=*/true);
  const Inputs in = make_inputs(c, 15);
  Tensor nll;
  const Tensor loss = ctc_on(device(), in, {}, &nll);
  EXPECT_TRUE(std::isinf(loss.item()));
  const auto v = nll.to_vector();
  EXPECT_TRUE(std::isinf(v[0]));
  EXPECT_TRUE(std::isfinite(v[1]));
  EXPECT_TRUE(std::isinf(v[2]));
}

TEST_P(CtcOps, NanLogitsAreNotMistakenForInfeasible) {
  // zero_infinity zeroes impossible alignments, never a NaN from the input.
  const Case c{4, 3, {4}, {{1, 2}}};
  Inputs in = make_inputs(c, 18);
  {
    NoGradScope no_grad;
    in.logits.data()[5] = std::numeric_limits<float>::quiet_NaN();
  }
  const Tensor loss = ctc_on(device(), in, options(Reduction::mean, true));
  EXPECT_TRUE(std::isnan(loss.item()));
}

TEST_P(CtcOps, PaddedFramesDoNotMatter) {
  const Case c{6, 4, {3, 6}, {{1, 2}, {3, 3}}};
  Inputs a = make_inputs(c, 16);
  Inputs b = make_inputs(c, 16);
  {
    // Change sample 0's frames 3..5 wildly: its loss must not move.
    NoGradScope no_grad;
    float* p = b.logits.data();
    for (int64_t t = 3; t < 6; ++t)
      for (int64_t k = 0; k < 4; ++k) p[(t * 2 + 0) * 4 + k] = 50.0f * static_cast<float>(k + t);
  }
  Tensor na, nb;
  ctc_on(device(), a, {}, &na);
  ctc_on(device(), b, {}, &nb);
  EXPECT_FLOAT_EQ(na.to_vector()[0], nb.to_vector()[0]);
}

TEST_P(CtcOps, MeanIsSumOverTargetLengthAndBatch) {
  const Case c{6, 4, {6, 5, 6}, {{1, 2, 3}, {2}, {3, 1}}};
  const Inputs in = make_inputs(c, 17);
  NoGradScope no_grad;
  Tensor nll;
  const float mean = ctc_on(device(), in, options(Reduction::mean), &nll).item();
  const float sum = ctc_on(device(), in, options(Reduction::sum)).item();
  const auto v = nll.to_vector();
  EXPECT_NEAR(sum, v[0] + v[1] + v[2], 1e-5);
  EXPECT_NEAR(mean, (v[0] / 3 + v[1] / 1 + v[2] / 2) / 3, 1e-5);
}

TEST_P(CtcOps, Gradcheck) {
  const Case c{6, 4, {6, 5, 6, 4}, {{1, 2}, {1, 1}, {3}, {}}};
  for (Reduction red : {Reduction::mean, Reduction::sum}) {
    SCOPED_TRACE(red == Reduction::mean ? "mean" : "sum");
    const Inputs in = make_inputs(c, 21);
    const ops::CtcLossOptions o = options(red);
    GradcheckOptions go;
    go.max_elements_per_input = 96;  // every element
    EXPECT_GRADCHECK(gradcheck(
        [&](const std::vector<Tensor>& t) {
          return ops::ctc_loss(t[0], on(in.targets), on(in.input_lengths), on(in.target_lengths), o);
        },
        {in.logits}, go));
  }
}

TEST_P(CtcOps, GradcheckThroughAScale) {
  // The incoming gradient scales d loss / d logits (backward is more than returning `grad`).
  const Case c{5, 3, {5, 5}, {{1, 2}, {2, 2}}};
  const Inputs in = make_inputs(c, 22);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) {
        return ops::scale(ops::ctc_loss(t[0], on(in.targets), on(in.input_lengths), on(in.target_lengths)), -3.0f);
      },
      {in.logits}));
}

TEST_P(CtcOps, LongSequencesStayFiniteAndGradientsSumToZero) {
  // T = 300, L = 80 with large logits: probabilities of order exp(-1000) that only log space
  // keeps; per frame the gradient (softmax - occupancy) sums to zero over the classes.
  const int64_t t_max = 300, n = 3, k = 29;
  std::vector<std::vector<int64_t>> targets(n);
  std::vector<int64_t> lens{300, 250, 161};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 80; ++j) targets[static_cast<size_t>(i)].push_back(1 + (j * 7 + i) % 28);
  const Case c{t_max, k, lens, targets};
  const Inputs in = make_inputs(c, 23, 20.0f);
  Tensor nll;
  const Tensor loss = ctc_on(device(), in, {}, &nll);
  const auto nv = nll.to_vector();
  for (float v : nv) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 100.0f);  // far below fp32's smallest probability
  }
  const auto g = grad({loss}, {in.logits})[0].to_vector();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < t_max; ++t) {
      double s = 0, a = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float v = g[static_cast<size_t>((t * n + i) * k + j)];
        ASSERT_TRUE(std::isfinite(v));
        s += v;
        a += std::abs(v);
      }
      EXPECT_NEAR(s, 0.0, 1e-6);
      if (t >= lens[static_cast<size_t>(i)]) {
        EXPECT_EQ(a, 0.0);
      }
    }
  }
}

TEST_P(CtcOps, DeterministicAcrossCalls) {
  const Case c{6, 4, {6, 6, 5, 6}, {{1, 2}, {3, 3}, {2}, {1, 2, 3}}};
  const Inputs in = make_inputs(c, 24);
  NoGradScope no_grad;
  const float a = ctc_on(device(), in).item();
  const float b = ctc_on(device(), in).item();
  EXPECT_EQ(a, b);
}

TEST_P(CtcOps, RejectsBadArguments) {
  const Case c{4, 3, {4, 4}, {{1, 2}, {2}}};
  const Inputs in = make_inputs(c, 25);
  auto run = [&](const Tensor& logits, const Tensor& targets, const Tensor& il, const Tensor& tl,
                 ops::CtcLossOptions o = {}) { return ops::ctc_loss(on(logits), on(targets), on(il), on(tl), o); };
  // A blank label in the targets, a label out of range, a non-integer.
  EXPECT_THROW(run(in.logits, Tensor::from_vector({3}, {1, 0, 2}), in.input_lengths, in.target_lengths),
               std::invalid_argument);
  EXPECT_THROW(run(in.logits, Tensor::from_vector({3}, {1, 3, 2}), in.input_lengths, in.target_lengths),
               std::invalid_argument);
  EXPECT_THROW(run(in.logits, Tensor::from_vector({3}, {1, 1.5f, 2}), in.input_lengths, in.target_lengths),
               std::invalid_argument);
  // Lengths that do not add up, an input longer than T, negative, wrong count.
  EXPECT_THROW(run(in.logits, in.targets, in.input_lengths, Tensor::from_vector({2}, {2, 2})), std::invalid_argument);
  EXPECT_THROW(run(in.logits, in.targets, Tensor::from_vector({2}, {5, 4}), in.target_lengths), std::invalid_argument);
  EXPECT_THROW(run(in.logits, in.targets, Tensor::from_vector({2}, {-1, 4}), in.target_lengths), std::invalid_argument);
  EXPECT_THROW(run(in.logits, in.targets, Tensor::from_vector({3}, {4, 4, 4}), in.target_lengths),
               std::invalid_argument);
  // Not time-major 3-D, a bad blank, targets that want a gradient.
  EXPECT_THROW(run(Tensor::zeros({4, 6}, Device::cpu()), in.targets, in.input_lengths, in.target_lengths),
               std::invalid_argument);
  EXPECT_THROW(run(in.logits, in.targets, in.input_lengths, in.target_lengths, options(Reduction::mean, false, 3)),
               std::invalid_argument);
  Tensor t = Tensor::from_vector({3}, {1, 2, 2});
  t.set_requires_grad(true);
  EXPECT_THROW(run(in.logits, t, in.input_lengths, in.target_lengths), std::invalid_argument);
}

TEST_P(CtcOps, SecondBackwardFailsLoudly) {
  const Case c{4, 3, {4}, {{1, 2}}};
  const Inputs in = make_inputs(c, 26);
  const Tensor loss = ctc_on(device(), in);
  const Tensor g = grad({loss}, {in.logits}, {}, /*create_graph=*/true)[0];
  EXPECT_THROW(grad({ops::sum(g)}, {in.logits}), std::logic_error);
}

TEST(CtcCpu, GreedyDecodeCollapsesRepeatsAndDropsBlanks) {
  // Frame argmaxes: sample 0: 1 1 0 1 2 2 -> [1, 1, 2]; sample 1 (4 frames): 0 2 2 0 -> [2].
  const std::vector<std::vector<int64_t>> best{{1, 1, 0, 1, 2, 2}, {0, 2, 2, 0, 1, 1}};
  const int64_t t_max = 6, n = 2, k = 3;
  std::vector<float> v(static_cast<size_t>(t_max * n * k), 0.0f);
  for (int64_t t = 0; t < t_max; ++t)
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>((t * n + i) * k + best[static_cast<size_t>(i)][static_cast<size_t>(t)])] = 1.0f;
  const Tensor logits = Tensor::from_vector({t_max, n, k}, v);
  const auto d = ops::ctc_greedy_decode(logits, Tensor::from_vector({2}, {6, 4}));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(d[1], (std::vector<int64_t>{2}));
  // Blank 2 instead: sample 0 -> 1 1 0 1 -> [1, 0, 1].
  EXPECT_EQ(ops::ctc_greedy_decode(logits, Tensor::from_vector({2}, {6, 4}), 2)[0], (std::vector<int64_t>{1, 0, 1}));
  EXPECT_THROW(ops::ctc_greedy_decode(logits, Tensor::from_vector({2}, {7, 4})), std::invalid_argument);
}

TEST(CtcCpu, EditDistanceAndErrorRate) {
  auto seq = [](const std::string& s) { return std::vector<int64_t>(s.begin(), s.end()); };
  EXPECT_EQ(ops::edit_distance(seq("kitten"), seq("sitting")), 3);
  EXPECT_EQ(ops::edit_distance(seq(""), seq("abc")), 3);
  EXPECT_EQ(ops::edit_distance(seq("abc"), seq("")), 3);
  EXPECT_EQ(ops::edit_distance(seq("flaw"), seq("lawn")), 2);
  EXPECT_EQ(ops::edit_distance(seq("same"), seq("same")), 0);
  // (3 + 0) edits over (7 + 4) reference characters.
  EXPECT_DOUBLE_EQ(ops::error_rate({seq("kitten"), seq("same")}, {seq("sitting"), seq("same")}), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(ops::error_rate({seq("ab")}, {seq("")}), 2.0);
  EXPECT_THROW(ops::error_rate({seq("a")}, {}), std::invalid_argument);
}

TS_ON_EVERY_DEVICE(CtcOps);

}  // namespace
}  // namespace ts::engine
