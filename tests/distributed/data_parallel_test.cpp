// Data parallelism on real ranks. Each test would fail if a gradient were dropped (a bucket not
// reduced), counted twice (reduced twice or not averaged), stale (last step's) or mis-scaled.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/error.h"
#include "distributed/mpi_communicator.h"
#include "engine/device_memory.h"
#include "engine/nn/layers.h"
#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "engine/random.h"
#include "profiler/tracer.h"
#include "tests/distributed/forwarding_communicator.h"
#include "tests/distributed/tiny_mlp.h"

namespace ts::distributed {
namespace {

using engine::Device;
using engine::Tensor;

// k steps of SGD on `batch(step)`; with `dp` the gradients are averaged across ranks.
std::vector<std::vector<float>> train(Mlp& m, int steps, DataParallel* dp,
                                      const std::function<std::pair<Tensor, Tensor>(int)>& batch) {
  auto sgd = make_sgd(m);
  for (int s = 0; s < steps; ++s) {
    const Tensor loss = m.loss(batch(s));
    if (dp) dp->begin_backward(0);
    loss.backward();
    if (dp) dp->end_backward();
    sgd.step();
    sgd.zero_grad();
  }
  return values(m.parameters());
}

struct Config {
  std::string name;
  DataParallelOptions options;
};

std::vector<Config> configs() {
  std::vector<Config> out;
  out.push_back({"default (arrival order, 25 MiB, overlap)", {}});
  DataParallelOptions o;
  o.overlap = false;
  out.push_back({"overlap off", o});
  o = {};
  o.bucket_mb = 1e-4;  // ~26 floats: every tensor its own bucket, the large ones alone
  out.push_back({"tiny buckets", o});
  o.order = BucketOrder::reverse_registration;
  out.push_back({"tiny buckets, reverse registration order", o});
  o = {};
  o.priority = true;
  o.partition_mb = 2e-4;  // ~52 floats: fc1.weight (256) and fc2.weight (128) are partitioned
  out.push_back({"priority with partitions", o});
  o.overlap = false;
  out.push_back({"priority, overlap off", o});
  return out;
}

TEST(DataParallel, IdenticalBatchesEndWithTheSingleProcessParameters) {
  MpiCommunicator comm, control;
  Mlp reference(7);
  const auto batch = [](int s) { return make_batch(1000 + static_cast<uint64_t>(s)); };
  const auto expected = train(reference, 4, nullptr, batch);
  for (const auto& c : configs()) {
    Mlp m(7);
    DataParallel dp(comm, control, {m.parameters()}, c.options);
    dp.broadcast_parameters();
    expect_near(train(m, 4, &dp, batch), expected, 1e-6, c.name);
    EXPECT_EQ(dp.parameters_without_gradient(), 0) << c.name;
  }
}

// Every rank's shard through a model on `device`; the averaged gradients must be the mean of the
// ranks' own, worked out by hand on one model on the same device.
void expect_the_mean_of_the_shards(Device device, double tolerance) {
  MpiCommunicator comm, control;
  const int n = comm.size();
  for (const auto& c : configs()) {
    // By hand: every rank's batch through one model, gradients averaged here.
    Mlp ref(11, device);
    std::vector<std::vector<float>> mean;
    for (int r = 0; r < n; ++r) {
      for (auto& p : ref.parameters()) p.zero_grad();
      ref.loss(make_batch(500 + static_cast<uint64_t>(r), device)).backward();
      const auto g = grads(ref.parameters());
      if (mean.empty()) mean.assign(g.size(), {});
      for (size_t i = 0; i < g.size(); ++i) {
        mean[i].resize(g[i].size(), 0.0f);
        for (size_t j = 0; j < g[i].size(); ++j) mean[i][j] += g[i][j] / static_cast<float>(n);
      }
    }
    Mlp m(11, device);
    DataParallel dp(comm, control, {m.parameters()}, c.options);
    EXPECT_EQ(dp.staged_through_host(), !device.is_cpu());
    for (int pass = 0; pass < 2; ++pass) {  // the second pass runs on the rebuilt buckets
      for (auto& p : m.parameters()) p.zero_grad();
      const Tensor loss = m.loss(make_batch(500 + static_cast<uint64_t>(comm.rank()), device));
      dp.begin_backward(0);
      loss.backward();
      dp.end_backward();
      expect_near(grads(m.parameters()), mean, tolerance, c.name + ", pass " + std::to_string(pass));
    }
    // Not every rank's gradient equals the mean: the shards really differ.
    Mlp own(11, device);
    own.loss(make_batch(500 + static_cast<uint64_t>(comm.rank()), device)).backward();
    EXPECT_NE(grads(own.parameters())[0], mean[0]) << c.name;
  }
}

TEST(DataParallel, DifferentShardsGiveTheMeanOfTheRanksGradients) {
  expect_the_mean_of_the_shards(Device::cpu(), 1e-5);
}

// The host-staged path (issue 40): ranks sharing one GPU (NCCL refuses "Duplicate GPU") average
// their GPU gradients through host buckets and MPI: the mean of their shards, and after k steps
// of identical batches the parameters of one process. On the CPU the same code copies with
// memcpy, which every test above runs; these need a GPU and skip elsewhere, saying so.
TEST(DataParallel, RanksSharingAGpuAverageItsGradientsThroughTheHost) {
  std::string why;
  const Device gpu{engine::DeviceType::cuda, 0};
  if (!engine::device_usable(gpu, &why)) GTEST_SKIP() << "needs a GPU that CUDA can use: " << why;
  expect_the_mean_of_the_shards(gpu, 1e-5);
  MpiCommunicator comm, control;
  const auto batch = [&](int s) { return make_batch(1000 + static_cast<uint64_t>(s), gpu); };
  Mlp reference(7, gpu);
  const auto expected = train(reference, 4, nullptr, batch);
  for (const auto& c : configs()) {
    Mlp m(7, gpu);
    DataParallel dp(comm, control, {m.parameters()}, c.options);
    dp.broadcast_parameters();
    expect_near(train(m, 4, &dp, batch), expected, 1e-5, c.name + " on the GPU");
  }
}

TEST(DataParallel, OnlyTheNamedGroupIsAveraged) {
  MpiCommunicator comm, control;
  Mlp m(3);
  const std::vector<Tensor> front = m.fc1->parameters(), back = m.fc2->parameters();
  DataParallel dp(comm, control, {front, back}, {});
  const auto batch = make_batch(900 + static_cast<uint64_t>(comm.rank()));
  Mlp local(3);
  local.loss(batch).backward();
  const Tensor loss = m.loss(batch);
  dp.begin_backward(1);
  loss.backward();
  dp.end_backward();
  // Group 0 (fc1) kept this rank's own gradients; group 1 (fc2) got the ranks' mean.
  expect_near(grads(front), grads(local.fc1->parameters()), 0, "fc1 untouched");
  std::vector<float> back_mean = m.fc2->parameters()[0].grad().to_vector();
  std::vector<float> sum = back_mean;
  comm.all_reduce(sum.data(), sum.size(), DataType::f32, ReduceOp::sum, "check");
  for (size_t j = 0; j < sum.size(); ++j) EXPECT_NEAR(sum[j], back_mean[j] * comm.size(), 1e-5);  // same on all ranks
  EXPECT_THROW(dp.begin_backward(2), DistError);
}

TEST(DataParallel, RanksWithDifferentModelsAreRefusedOnEveryRank) {
  MpiCommunicator comm, control;
  Mlp m(5);
  std::vector<Tensor> params = m.parameters();
  if (comm.rank() == comm.size() - 1) params.pop_back();
  EXPECT_THROW(DataParallel(comm, control, {params}, {}), DistError);
}

TEST(DataParallel, BroadcastMakesEveryRankStartFromRankZero) {
  MpiCommunicator comm, control;
  Mlp m(100 + static_cast<uint64_t>(comm.rank()));  // different on each rank
  DataParallel dp(comm, control, {m.parameters()}, {});
  dp.broadcast_parameters();
  const auto expected = values(Mlp(100).parameters());
  expect_near(values(m.parameters()), expected, 0, "broadcast");
}

TEST(DataParallel, AnyRankStopsEveryRank) {
  MpiCommunicator comm, control;
  Mlp m(1);
  DataParallel dp(comm, control, {m.parameters()}, {});
  EXPECT_FALSE(dp.any_rank(false, "stop flag"));
  EXPECT_TRUE(dp.any_rank(comm.rank() == comm.size() - 1, "stop flag"));
}

TEST(DataParallel, CollectivesAndTheWaitAreTraced) {
  MpiCommunicator comm, control;
  auto& tracer = profiler::Tracer::global();
  tracer.clear();
  tracer.set_enabled(true);
  Mlp m(2);
  DataParallelOptions o;
  o.bucket_mb = 1e-4;
  DataParallel dp(comm, control, {m.parameters()}, o);
  const Tensor loss = m.loss(make_batch(1));
  dp.begin_backward(0);
  loss.backward();
  dp.end_backward();
  tracer.set_enabled(false);
  int reduces = 0, waits = 0;
  for (const auto& e : tracer.drain()) {
    if (e.kind == profiler::EventKind::comm && tracer.str(e.name) == "all_reduce") ++reduces;
    if (e.kind == profiler::EventKind::wait) ++waits;
  }
  EXPECT_EQ(reduces, static_cast<int>(dp.buckets().size()));  // one all-reduce per bucket, none twice
  EXPECT_EQ(waits, 1);
  int64_t bytes = 0;
  for (const auto& b : dp.buckets()) bytes += b.bytes;
  EXPECT_EQ(bytes, 4 * (8 * 32 + 32 + 32 * 4 + 4));  // every gradient in exactly one bucket
}

// Cross-barrier (ByteScheduler): the optimizer step is cut per parameter and the next forward
// waits, and updates, layer by layer. `slow` delays every all-reduce so that the next
// forward really starts while updates are still pending.
class SlowCommunicator final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    ForwardingCommunicator::do_all_reduce(data, count, type, op);
  }
};

DataParallelOptions priority_options(bool overlap) {
  DataParallelOptions o;
  o.priority = true;
  o.partition_mb = 2e-4;  // fc1.weight and fc2.weight partitioned, as in configs()
  o.overlap = overlap;
  return o;
}

// As train(), with the step handed to `dp` (cross-barrier): forwards under its gate, the
// optimizer phase only begins the step.
std::vector<std::vector<float>> train_cross_barrier(
    Mlp& m, int steps, DataParallel& dp, const std::function<std::pair<Tensor, Tensor>(int)>& batch,
    const std::function<Tensor(const Mlp&, const std::pair<Tensor, Tensor>&)>& loss_of) {
  auto sgd = make_sgd(m);
  EXPECT_EQ(dp.take_split_step(sgd.split_step()), "");
  EXPECT_TRUE(dp.cross_barrier());
  for (int s = 0; s < steps; ++s) {
    Tensor loss;
    {
      engine::nn::ParameterGateScope gate(&dp);
      loss = loss_of(m, batch(s));
    }
    dp.begin_backward(0);
    loss.backward();
    dp.end_backward();
    dp.begin_updates();
  }
  dp.flush();
  return values(m.parameters());
}

Tensor plain_loss(const Mlp& m, const std::pair<Tensor, Tensor>& b) { return m.loss(b); }

TEST(DataParallel, CrossBarrierEndsWithTheSingleProcessParameters) {
  MpiCommunicator comm, control, inner;
  SlowCommunicator slow(inner);
  auto& tracer = profiler::Tracer::global();
  const auto batch = [](int s) { return make_batch(1000 + static_cast<uint64_t>(s)); };
  Mlp reference(7);
  const auto expected = train(reference, 4, nullptr, batch);
  for (const bool overlap : {true, false}) {
    const std::string name = overlap ? "overlap" : "overlap off";
    {
      Mlp m(7);
      DataParallel dp(comm, control, {m.parameters()}, priority_options(overlap));
      dp.broadcast_parameters();
      expect_near(train_cross_barrier(m, 4, dp, batch, plain_loss), expected, 1e-6, name);
    }
    // Slow all-reduces: the next forward starts before the updates end, and its layers wait.
    tracer.clear();
    tracer.set_enabled(true);
    Mlp m(7);
    DataParallel dp(slow, control, {m.parameters()}, priority_options(overlap));
    dp.broadcast_parameters();
    const auto got = train_cross_barrier(m, 4, dp, batch, plain_loss);
    tracer.set_enabled(false);
    expect_near(got, expected, 1e-6, name + ", slow all-reduce");
    int parameter_waits = 0, updates = 0;
    for (const auto& e : tracer.drain()) {
      if (tracer.str(e.name) == "parameter wait") ++parameter_waits;
      if (e.kind == profiler::EventKind::phase && tracer.str(e.name) == "optimizer") ++updates;
    }
    EXPECT_GE(parameter_waits, 1) << name;  // a forward waited for a layer's gradients
    // Updates as phases, one per layer reached or left for the next backward: more than one per step.
    EXPECT_GT(updates, 4) << name;
  }
}

// A forward that reads a parameter without passing its module's gate (here the root module's
// own parameter, read outside any scope()) would race with its update: the step fails.
class LeakyMlp : public Mlp {
 public:
  LeakyMlp() : Mlp(5) { offset = register_parameter("offset", Tensor::from_vector({1}, {0.5f})); }
  Tensor leaky_loss(const std::pair<Tensor, Tensor>& b) const {
    return engine::ops::add(loss(b), engine::ops::mean(engine::ops::mul(offset, offset)));
  }
  Tensor offset;
};

TEST(DataParallel, CrossBarrierRefusesAForwardThatSkipsItsGate) {
  MpiCommunicator comm, control;
  LeakyMlp m;
  DataParallel dp(comm, control, {m.parameters()}, priority_options(true));
  auto sgd = make_sgd(m);
  ASSERT_EQ(dp.take_split_step(sgd.split_step()), "");
  for (int s = 0; s < 2; ++s) {
    Tensor loss;
    {
      engine::nn::ParameterGateScope gate(&dp);
      loss = m.leaky_loss(make_batch(40 + static_cast<uint64_t>(s)));
    }
    dp.begin_backward(0);
    loss.backward();
    dp.end_backward();
    if (s == 0) {
      dp.begin_updates();  // the first forward ran with nothing pending: nothing to check
    } else {
      try {
        dp.begin_updates();
        ADD_FAILURE() << "the ungated read of 'offset' was not caught";
      } catch (const DistError& e) {
        EXPECT_NE(std::string(e.what()).find("'offset'"), std::string::npos) << e.what();
      }
    }
  }
  dp.flush();  // returns: the abandoned step's updates never run
}

TEST(DataParallel, CrossBarrierIsTakenOnlyWhereItCanWork) {
  MpiCommunicator comm, control;
  Mlp m(9);
  auto sgd = make_sgd(m);
  {
    DataParallel dp(comm, control, {m.parameters()}, {});  // no priority
    EXPECT_NE(dp.take_split_step(sgd.split_step()), "");
    EXPECT_FALSE(dp.cross_barrier());
  }
  {
    DataParallelOptions o = priority_options(true);
    o.cross_barrier = false;
    DataParallel dp(comm, control, {m.parameters()}, o);
    EXPECT_NE(dp.take_split_step(sgd.split_step()), "");
  }
  {
    DataParallel dp(comm, control, {m.fc1->parameters(), m.fc2->parameters()}, priority_options(true));
    EXPECT_NE(dp.take_split_step(sgd.split_step()), "");  // two gradient groups
  }
  {
    DataParallel dp(comm, control, {m.fc2->parameters()}, priority_options(true));
    EXPECT_NE(dp.take_split_step(sgd.split_step()), "");  // the optimizer updates fc1, not averaged
  }
  EXPECT_THROW(DataParallel(comm, comm, {m.parameters()}, {}), DistError);
}

}  // namespace
}  // namespace ts::distributed
