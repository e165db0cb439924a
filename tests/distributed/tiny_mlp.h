#pragma once
// A two-layer perceptron, its batches and the comparisons the distributed tests share: data
// parallelism and the parameter server are each checked against training by hand on it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "engine/random.h"

namespace ts::distributed {

using engine::Device;
using engine::Tensor;

class Mlp : public engine::nn::Module {
 public:
  explicit Mlp(uint64_t seed, Device device = Device::cpu()) : Module(device) {
    engine::Rng rng(seed);
    fc1 = register_module("fc1", std::make_shared<engine::nn::Linear>(8, 32, device, rng));
    fc2 = register_module("fc2", std::make_shared<engine::nn::Linear>(32, 4, device, rng));
  }
  Tensor loss(const std::pair<Tensor, Tensor>& batch) const {
    const Tensor y = fc2->forward(engine::ops::relu(fc1->forward(batch.first)));
    const Tensor d = engine::ops::add(y, engine::ops::scale(batch.second, -1.0f));
    return engine::ops::mean(engine::ops::mul(d, d));
  }
  std::shared_ptr<engine::nn::Linear> fc1, fc2;
};

inline std::pair<Tensor, Tensor> make_batch(uint64_t seed, Device device = Device::cpu()) {
  engine::Rng rng(seed);
  std::vector<float> x(16 * 8), t(16 * 4);
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  for (auto& v : t) v = static_cast<float>(rng.uniform(-1, 1));
  Tensor xs = Tensor::from_vector({16, 8}, x), ts = Tensor::from_vector({16, 4}, t);
  if (device.is_cpu()) return {xs, ts};
  return {engine::to_device(xs, device), engine::to_device(ts, device)};
}

inline engine::optim::SgdOptions sgd_options() {
  engine::optim::SgdOptions o;
  o.lr.base_lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 0;
  return o;
}

inline engine::optim::Sgd make_sgd(const Mlp& m) { return engine::optim::Sgd(m.parameters(), sgd_options()); }

inline std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const auto& t : ts) out.push_back(t.to_vector());
  return out;
}

inline std::vector<std::vector<float>> grads(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const auto& t : ts) out.push_back(t.grad().to_vector());
  return out;
}

inline void expect_near(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, double tol,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what;
    for (size_t j = 0; j < a[i].size(); ++j) {
      ASSERT_NEAR(a[i][j], b[i][j], tol * (1.0 + std::fabs(b[i][j]))) << what << ": tensor " << i << " element " << j;
    }
  }
}

}  // namespace ts::distributed
