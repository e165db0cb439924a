// Data parallelism on real ranks. Each test would fail if a gradient were dropped (a bucket not
// reduced), counted twice (reduced twice or not averaged), stale (last step's) or mis-scaled.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
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
#include "engine/side_stream.h"
#include "profiler/tracer.h"
#include "tests/distributed/forwarding_communicator.h"
#include "tests/distributed/tiny_mlp.h"
#ifdef TS_HAVE_CUDA
#include "distributed/nccl_communicator.h"
#include "distributed/nccl_rank.h"
#endif

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

// The NCCL path's logic with host memory standing in for a GPU's: a communicator that, as NCCL
// does, takes the model's device memory and queues on the side stream it is given (here MPI on
// the CPU's memory; the stream it was told is kept for the test to check).
class DeviceMemoryCommunicator final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  bool takes_device_memory() const override { return true; }
  void queue_on(void* stream) override { queued_on = stream; }
  void* queued_on = reinterpret_cast<void*>(1);  // never told: not a stream anyone has
};

// Every rank's shard through a model on `device`; the averaged gradients must be the mean of the
// ranks' own, worked out by hand on one model on the same device. `comm`: the gradients'.
void expect_the_mean_of_the_shards(Device device, double tolerance, Communicator& comm) {
  MpiCommunicator control;
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
    EXPECT_EQ(dp.staged_through_host(), !device.is_cpu() && !comm.takes_device_memory());
    EXPECT_EQ(dp.averages_on_device(), comm.takes_device_memory());
    for (int pass = 0; pass < 2; ++pass) {  // the second pass runs on the rebuilt buckets
      for (auto& p : m.parameters()) p.zero_grad();
      const Tensor loss = m.loss(make_batch(500 + static_cast<uint64_t>(comm.rank()), device));
      dp.begin_backward(0);
      loss.backward();
      dp.end_backward();
      expect_near(grads(m.parameters()), mean, tolerance, c.name + ", pass " + std::to_string(pass));
    }
    // Not every rank's gradient equals the mean: the shards really differ (with 2 ranks or more).
    if (n > 1) {
      Mlp own(11, device);
      own.loss(make_batch(500 + static_cast<uint64_t>(comm.rank()), device)).backward();
      EXPECT_NE(grads(own.parameters())[0], mean[0]) << c.name;
    }
  }
}

TEST(DataParallel, DifferentShardsGiveTheMeanOfTheRanksGradients) {
  MpiCommunicator comm;
  expect_the_mean_of_the_shards(Device::cpu(), 1e-5, comm);
}

// Buckets in the device's memory, averaged by a communicator that takes it (NCCL's path), with
// the CPU standing in for the GPU: the same means, the flags of priority's negotiation included.
TEST(DataParallel, BucketsInDeviceMemoryGiveTheMeanOfTheRanksGradients) {
  MpiCommunicator inner;
  DeviceMemoryCommunicator comm(inner);
  expect_the_mean_of_the_shards(Device::cpu(), 1e-5, comm);
}

// The side stream's calls in order, each with its marker's number (markers are numbered as made),
// beside what the test itself logs. On the CPU's stream underneath: the work is done as called.
class RecordingStream final : public engine::SideStream {
 public:
  struct Marker final : engine::StreamMarker {
    explicit Marker(int i) : id(i) {}
    int id;
  };
  void log(std::string entry) {
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  engine::Device device() const override { return Device::cpu(); }
  std::unique_ptr<engine::StreamMarker> make_marker() override { return std::make_unique<Marker>(made_++); }
  void mark_compute(engine::StreamMarker& m) override { log("mark_compute " + id(m)); }
  void wait(engine::StreamMarker& m) override { log("wait " + id(m)); }
  void mark(engine::StreamMarker& m) override { log("mark " + id(m)); }
  void compute_waits(engine::StreamMarker& m) override { log("compute_waits " + id(m)); }
  void host_waits(engine::StreamMarker& m) override { log("host_waits " + id(m)); }
  void copy(void* dst, const void* src, size_t bytes) override {
    inner_->copy(dst, src, bytes);
    log("copy");
  }
  void zero(void* dst, size_t bytes) override {
    inner_->zero(dst, bytes);
    log("zero");
  }
  void scale(float* data, int64_t count, float factor) override {
    inner_->scale(data, count, factor);
    log("scale " + std::to_string(count));
  }
  void synchronize() override { log("synchronize"); }
  void* native() override { return this; }
  std::unique_ptr<engine::PinnedHost> pin(void*, size_t) override { return nullptr; }

 private:
  static std::string id(engine::StreamMarker& m) { return std::to_string(static_cast<Marker&>(m).id); }
  std::unique_ptr<engine::SideStream> inner_ = engine::make_inline_stream();
  std::mutex mutex_;
  std::vector<std::string> entries_;
  int made_ = 0;
};

// A communicator that logs each all-reduce's label into the stream's log, in order with its calls.
class LoggingCommunicator final : public ForwardingCommunicator {
 public:
  LoggingCommunicator(MpiCommunicator& inner, RecordingStream& log) : ForwardingCommunicator(inner), log_(log) {}
  bool takes_device_memory() const override { return true; }
  void queue_on(void* stream) override { queued_on = stream; }
  void* queued_on = nullptr;

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override {
    log_.log("all_reduce " + std::to_string(count));
    ForwardingCommunicator::do_all_reduce(data, count, type, op);
  }

 private:
  RecordingStream& log_;
};

// NCCL's path, with the CPU standing in for the GPU: each bucket's ready marker is recorded on
// the compute queue only once every gradient in it is final (the backward never waits on the
// host), the side stream waits for it before copying, the collective follows the copies in, the
// done marker follows the copies back, and before end_backward returns the compute queue waits
// for every bucket's done marker (the optimizer's kernels are queued after it).
TEST(DataParallel, TheSideStreamOrdersEveryBucketBetweenItsGradientsAndTheOptimizer) {
  MpiCommunicator inner, control;
  auto owned = std::make_unique<RecordingStream>();
  RecordingStream& rec = *owned;
  LoggingCommunicator comm(inner, rec);
  Mlp m(5);
  // Logged before the data parallelism's own hooks, which were registered after these.
  for (auto& p : m.parameters()) {
    const std::string name = p.name();
    p.add_grad_ready_hook([&rec, name](Tensor&) { rec.log("gradient " + name); });
  }
  DataParallelOptions o;
  o.bucket_mb = 1e-4;                           // a bucket per tensor or two
  o.order = BucketOrder::reverse_registration;  // no rebuild: markers 2b and 2b + 1 are bucket b's
  DataParallel dp(comm, control, {m.parameters()}, o, std::move(owned));
  EXPECT_EQ(comm.queued_on, static_cast<void*>(&rec)) << "the collectives queue on the side stream";
  const auto buckets = dp.buckets();
  ASSERT_GE(buckets.size(), 2U);
  const Tensor loss = m.loss(make_batch(77));
  rec.log("begin");
  dp.begin_backward(0);
  loss.backward();
  dp.end_backward();
  rec.log("end_backward returned");

  const auto log = rec.entries();
  const auto at = [&](const std::string& entry) {
    const auto it = std::find(log.begin(), log.end(), entry);
    EXPECT_NE(it, log.end()) << "no '" << entry << "' in the log";
    return it - log.begin();
  };
  const auto returned = at("end_backward returned");
  for (size_t b = 0; b < buckets.size(); ++b) {
    const std::string ready = std::to_string(2 * b), done = std::to_string(2 * b + 1);
    const auto marked = at("mark_compute " + ready);
    for (const auto& name : buckets[b].parameters) EXPECT_LT(at("gradient " + name), marked) << "bucket " << b;
    const auto waited = at("wait " + ready);
    EXPECT_LT(marked, at("host_waits " + ready)) << "bucket " << b;
    EXPECT_LT(at("host_waits " + ready), waited) << "bucket " << b;
    // The bucket's collective: the first all-reduce after its wait, with copies between.
    const auto reduce = std::find_if(log.begin() + waited, log.end(),
                                     [](const std::string& e) { return e.starts_with("all_reduce"); }) -
                        log.begin();
    ASSERT_LT(reduce, static_cast<std::ptrdiff_t>(log.size())) << "bucket " << b;
    EXPECT_EQ(log[static_cast<size_t>(reduce)], "all_reduce " + std::to_string(buckets[b].bytes / 4)) << "bucket " << b;
    EXPECT_NE(std::find(log.begin() + waited, log.begin() + reduce, "copy"), log.begin() + reduce) << "bucket " << b;
    const auto mark_done = at("mark " + done);
    EXPECT_LT(reduce, mark_done) << "bucket " << b;
    // The mean is taken on the device, before the copies back (the training thread logs meanwhile).
    const auto scaled = std::find_if(log.begin() + reduce, log.end(),
                                     [](const std::string& e) { return e.starts_with("scale") || e == "copy"; }) -
                        log.begin();
    ASSERT_LT(scaled, static_cast<std::ptrdiff_t>(log.size())) << "bucket " << b;
    EXPECT_EQ(log[static_cast<size_t>(scaled)], "scale " + std::to_string(buckets[b].bytes / 4)) << "bucket " << b;
    EXPECT_LT(scaled, mark_done) << "bucket " << b;
    EXPECT_LT(mark_done, at("compute_waits " + done)) << "bucket " << b;
    EXPECT_LT(at("compute_waits " + done), returned) << "bucket " << b;
  }
}

// The host-staged path (issue 40): ranks sharing one GPU (NCCL refuses "Duplicate GPU") average
// their GPU gradients through host buckets and MPI: the mean of their shards, and after k steps
// of identical batches the parameters of one process. On the CPU the same code copies with
// memcpy, which every test above runs; these need a GPU and skip elsewhere, saying so.
TEST(DataParallel, RanksSharingAGpuAverageItsGradientsThroughTheHost) {
  std::string why;
  const Device gpu{engine::DeviceType::cuda, 0};
  if (!engine::device_usable(gpu, &why)) GTEST_SKIP() << "needs a GPU that CUDA can use: " << why;
  MpiCommunicator comm, control;
  expect_the_mean_of_the_shards(gpu, 1e-5, comm);
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

// The loop's stop flag (agree_stop): asked before the first iteration, it stops every rank at
// once; asked later on one rank, every rank stops together one iteration later (the flag's
// all-reduce runs beside that iteration), whatever else the control communicator carries.
TEST(DataParallel, AStopAskedOnOneRankEndsEveryRanksLoopAtTheSameIteration) {
  MpiCommunicator comm, control;
  const bool asking = comm.rank() == comm.size() - 1;
  {
    Mlp m(1);
    DataParallel dp(comm, control, {m.parameters()}, {});
    EXPECT_TRUE(dp.agree_stop(asking)) << "asked before the first iteration";
  }
  Mlp m(1);
  DataParallel dp(comm, control, {m.parameters()}, {});
  control.take_records();
  int stopped_before = -1;
  for (int i = 0; i < 8 && stopped_before < 0; ++i) {
    if (dp.agree_stop(asking && i == 3)) stopped_before = i;
    int64_t other = comm.rank();  // the control communicator's other traffic, between start and finish
    control.all_reduce(&other, 1, DataType::i64, ReduceOp::sum, "other");
    EXPECT_EQ(other, int64_t{comm.size()} * (comm.size() - 1) / 2);
  }
  EXPECT_EQ(stopped_before, 4) << "seen before iteration 3 (asked during 2): iteration 3 runs, the loop ends before 4";
  std::vector<int> agreed(static_cast<size_t>(comm.size()));
  comm.all_gather(&stopped_before, agreed.data(), 1, DataType::i32, "check");
  for (int r : agreed) EXPECT_EQ(r, stopped_before) << "every rank stops at the same iteration";
  dp.flush();  // nothing left running, also when the loop ends by its count
  EXPECT_FALSE(control.all_reduce_started());
  int flags = 0;
  for (const auto& rec : control.take_records()) flags += rec.label == "stop flag" ? 1 : 0;
  EXPECT_EQ(flags, 1 + 4) << "the blocking first one, then one finished before each later iteration";
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
  // Per bucket (the event's layer is its label): the copy in, its all-reduce, the copy out, in
  // that order on the communication thread, each a comm event of the rank's breakdown.
  std::map<std::string, std::map<std::string, profiler::Event>> by_bucket;
  for (const auto& e : tracer.drain()) {
    if (e.kind == profiler::EventKind::comm && tracer.str(e.name) == "all_reduce") ++reduces;
    if (e.kind == profiler::EventKind::wait) ++waits;
    const std::string name(tracer.str(e.name));
    if (e.kind == profiler::EventKind::comm &&
        (name == "copy into bucket" || name == "all_reduce" || name == "copy out of bucket"))
      by_bucket[std::string(tracer.str(e.layer))][name] = e;
  }
  EXPECT_EQ(reduces, static_cast<int>(dp.buckets().size()));  // one all-reduce per bucket, none twice
  EXPECT_EQ(waits, 1);
  ASSERT_EQ(by_bucket.size(), dp.buckets().size());
  for (const auto& [label, steps] : by_bucket) {
    ASSERT_TRUE(steps.contains("copy into bucket") && steps.contains("all_reduce") &&
                steps.contains("copy out of bucket"))
        << label << ": " << steps.size() << " comm events";
    const auto &in = steps.at("copy into bucket"), &reduce = steps.at("all_reduce"),
               &out = steps.at("copy out of bucket");
    EXPECT_LE(in.end_ns, reduce.start_ns) << label;
    EXPECT_LE(reduce.end_ns, out.start_ns) << label;
    EXPECT_TRUE(in.thread == reduce.thread && out.thread == reduce.thread) << label;
  }
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

// NCCL's path on a GPU (issue 40): buckets in GPU memory, copies and collectives on the side
// stream, ordered by events; the mean of the shards, and after k steps of identical batches the
// parameters of one process, cross-barrier included. Needs a GPU per rank (NCCL refuses two ranks
// on one): on the one-GPU machine it runs with one rank; elsewhere it skips, saying why.
TEST(DataParallel, RanksWithAGpuEachAverageItsGradientsThroughNccl) {
#ifdef TS_HAVE_CUDA
  std::string why;
  const Device gpu{engine::DeviceType::cuda, 0};
  if (!engine::device_usable(gpu, &why)) GTEST_SKIP() << "needs a GPU that CUDA can use: " << why;
  MpiCommunicator control;
  if (local_gpu_count() < control.size()) {
    GTEST_SKIP() << "needs a GPU per rank (" << control.size() << " ranks, " << local_gpu_count() << " GPUs)";
  }
  const Device mine{engine::DeviceType::cuda, control.rank()};
  NcclCommunicator nccl(MPI_COMM_WORLD, mine.index);
  expect_the_mean_of_the_shards(mine, 1e-5, nccl);
  const auto batch = [&](int s) { return make_batch(1000 + static_cast<uint64_t>(s), mine); };
  Mlp reference(7, mine);
  const auto expected = train(reference, 4, nullptr, batch);
  for (const auto& c : configs()) {
    Mlp m(7, mine);
    DataParallel dp(nccl, control, {m.parameters()}, c.options);
    ASSERT_TRUE(dp.averages_on_device());
    dp.broadcast_parameters();
    expect_near(train(m, 4, &dp, batch), expected, 1e-5, c.name + " through NCCL");
  }
  for (const bool overlap : {true, false}) {  // the update per parameter waits on its buckets' done markers
    Mlp m(7, mine);
    DataParallel dp(nccl, control, {m.parameters()}, priority_options(overlap));
    dp.broadcast_parameters();
    expect_near(train_cross_barrier(m, 4, dp, batch, plain_loss), expected, 1e-5,
                std::string("cross-barrier through NCCL, ") + (overlap ? "overlap" : "overlap off"));
  }
#else
  GTEST_SKIP() << "needs a CUDA build (NCCL)";
#endif
}

}  // namespace
}  // namespace ts::distributed
