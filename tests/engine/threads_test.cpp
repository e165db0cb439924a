// Several threads running forward and backward at once (a3c's learners): every thread gets the
// results it gets alone, the memory ledger balances, and the tracer tells the threads apart.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "engine/context.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "memprof/ledger.h"
#include "profiler/tracer.h"
#include "test_util.h"

using namespace ts;
using namespace ts::engine;
using namespace ts::engine::testing;

namespace {

// A small conv net (conv, relu, conv, relu, linear, log-softmax) and one step's results.
struct Result {
  std::vector<float> loss, grad_conv1, grad_fc, grad_input;
};

Result forward_backward(uint64_t seed) {
  Rng rng(42);  // the same weights in every thread
  nn::Conv2d conv1(nn::conv_options(4, 8, 8, 4, 0, true), Device::cpu(), rng);
  nn::Conv2d conv2(nn::conv_options(8, 8, 4, 2, 0, true), Device::cpu(), rng);
  nn::Linear fc(8 * 3 * 3, 4, Device::cpu(), rng);
  Tensor x = rand_tensor({3, 4, 36, 36}, seed, true, 0.0f, 1.0f);  // its own input
  Tensor h = ops::relu(conv2.forward(ops::relu(conv1.forward(x))));
  Tensor loss = ops::sum(
      ops::mul(ops::log_softmax(fc.forward(ops::flatten(h))), Tensor::from_vector({3, 4}, uniform(12, seed + 1))));
  loss.backward();
  return {loss.to_vector(), conv1.weight().grad().to_vector(), fc.parameters()[0].grad().to_vector(),
          x.grad().to_vector()};
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(max_rel_diff(a, b), 1e-5);
}

}  // namespace

TEST(Threads, ConcurrentForwardBackwardGiveEachThreadItsOwnResults) {
  constexpr int kThreads = 4, kRounds = 20;
  auto& ledger = memprof::Ledger::global();
  auto& tracer = profiler::Tracer::global();
  std::vector<Result> alone(kThreads);
  // One at a time first, each on a thread of its own running ops on one thread (as learners do).
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&, t] {
      set_op_threads(1);
      alone[static_cast<size_t>(t)] = forward_backward(1000 + static_cast<uint64_t>(t));
    }).join();
  }
  const int64_t live_before = ledger.current().total;
  tracer.clear();
  tracer.set_enabled(true);
  std::vector<std::vector<Result>> together(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      set_op_threads(1);
      for (int r = 0; r < kRounds; ++r)
        together[static_cast<size_t>(t)].push_back(forward_backward(1000 + static_cast<uint64_t>(t)));
    });
  }
  for (auto& th : threads) th.join();
  tracer.set_enabled(false);
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE(t);
    for (const Result& r : together[static_cast<size_t>(t)]) {
      expect_near(r.loss, alone[static_cast<size_t>(t)].loss);
      expect_near(r.grad_conv1, alone[static_cast<size_t>(t)].grad_conv1);
      expect_near(r.grad_fc, alone[static_cast<size_t>(t)].grad_fc);
      expect_near(r.grad_input, alone[static_cast<size_t>(t)].grad_input);
    }
  }
  // Whatever the threads allocated (their scratchpads included) was freed and booked as freed.
  EXPECT_EQ(ledger.current().total, live_before);
  std::set<uint32_t> op_threads;
  for (const auto& e : tracer.drain()) {
    if (e.kind == profiler::EventKind::op) op_threads.insert(e.thread);
  }
  EXPECT_GE(op_threads.size(), static_cast<size_t>(kThreads));
}

TEST(Threads, SetOpThreadsIsPerThreadAndChecked) {
  EXPECT_THROW(set_op_threads(0), std::invalid_argument);
  const int main_threads = set_op_threads(3);
  int seen_in_thread = 0;
  std::thread([&] { seen_in_thread = set_op_threads(1); }).join();
  EXPECT_EQ(set_op_threads(main_threads), 3);  // the other thread's setting did not leak here
  EXPECT_GE(seen_in_thread, 1);
}
