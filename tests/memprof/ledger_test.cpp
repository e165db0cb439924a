#include "memprof/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

namespace ts::memprof {
namespace {

int64_t at(const Bytes& b, vocabulary::Category c) { return b[static_cast<size_t>(c)]; }
int64_t sum(const Bytes& b) { return std::accumulate(b.begin(), b.end(), int64_t{0}); }

TEST(Category, NamesRoundTripAndTbdClasses) {
  for (vocabulary::Category c : vocabulary::kAllCategories) EXPECT_EQ(vocabulary::parse_category(to_string(c)), c);
  EXPECT_EQ(vocabulary::parse_category("bogus"), std::nullopt);
  EXPECT_EQ(to_string(vocabulary::Category::optimizer_state), "optimizer_state");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::weights), "Weights");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::weight_grads), "Gradients");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::activations), "Feature maps");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::workspace), "Workspace");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::optimizer_state), "Dynamic");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::activation_grads), "Dynamic");
  EXPECT_EQ(vocabulary::tbd_class(vocabulary::Category::other), "Dynamic");
}

TEST(Ledger, CategoriesSumToTotal) {
  Ledger l;
  const uint64_t w = l.on_alloc(1000, vocabulary::Category::weights, "fc1");
  l.on_alloc(300, vocabulary::Category::activations, "fc1");
  l.on_alloc(200, vocabulary::Category::activations, "relu");
  l.on_alloc(50, vocabulary::Category::workspace, "fc1");
  EXPECT_NE(w, 0u);
  const Snapshot s = l.current();
  EXPECT_EQ(s.total, 1550);
  EXPECT_EQ(sum(s.bytes), s.total);
  EXPECT_EQ(at(s.bytes, vocabulary::Category::activations), 500);
  EXPECT_EQ(l.live_count(), 4);
  l.on_free(w);
  EXPECT_EQ(l.current().total, 550);
  EXPECT_EQ(l.live_count(), 3);
}

TEST(Ledger, PeakHasItsBreakdown) {
  Ledger l;
  const uint64_t w = l.on_alloc(100, vocabulary::Category::weights, "m");
  const uint64_t a1 = l.on_alloc(400, vocabulary::Category::activations, "m");
  const uint64_t ws = l.on_alloc(300, vocabulary::Category::workspace, "m");  // peak: 800
  l.on_free(ws);
  l.on_free(a1);
  const uint64_t g = l.on_alloc(500, vocabulary::Category::weight_grads, "m");  // 600 < 800
  const Snapshot p = l.peak();
  EXPECT_EQ(p.total, 800);
  EXPECT_EQ(at(p.bytes, vocabulary::Category::weights), 100);
  EXPECT_EQ(at(p.bytes, vocabulary::Category::activations), 400);
  EXPECT_EQ(at(p.bytes, vocabulary::Category::workspace), 300);
  EXPECT_EQ(at(p.bytes, vocabulary::Category::weight_grads), 0);
  l.reset_peak();
  EXPECT_EQ(l.peak().total, 600);
  l.on_free(g);
  l.on_free(w);
  EXPECT_EQ(l.current().total, 0);
  EXPECT_EQ(l.peak().total, 600);
}

TEST(Ledger, PerOwnerBytesPerIterationAndAtPeak) {
  Ledger l;
  l.on_alloc(1000, vocabulary::Category::weights, "conv1");
  for (int it = 0; it < 3; ++it) {
    l.set_iteration(it);
    std::vector<uint64_t> ids;
    // conv1 allocates 64 + 64 activations per iteration, relu 32 (iteration 1: 96)
    ids.push_back(l.on_alloc(64, vocabulary::Category::activations, "conv1"));
    ids.push_back(l.on_alloc(64, vocabulary::Category::activations, "conv1"));
    ids.push_back(l.on_alloc(it == 1 ? 96 : 32, vocabulary::Category::activations, "relu"));
    for (uint64_t id : ids) l.on_free(id);
  }
  // the total peak is reached in iteration 1: weights 1000 + 64 + 64 + 96
  EXPECT_EQ(l.peak().total, 1224);
  const auto acts = l.per_owner(vocabulary::Category::activations);
  ASSERT_EQ(acts.size(), 2u);
  EXPECT_EQ(acts[0].owner, "conv1");
  EXPECT_EQ(acts[0].bytes_allocated_per_iteration, 128);
  EXPECT_EQ(acts[0].live_at_peak, 128);
  EXPECT_EQ(acts[1].owner, "relu");
  EXPECT_EQ(acts[1].bytes_allocated_per_iteration, 96);
  EXPECT_EQ(acts[1].live_at_peak, 96);
  const auto weights = l.per_owner(vocabulary::Category::weights);
  ASSERT_EQ(weights.size(), 1u);
  EXPECT_EQ(weights[0].live_at_peak, 1000);
  EXPECT_TRUE(l.per_owner(vocabulary::Category::comm).empty());
}

TEST(Ledger, AllocationsOutsideIterationsAreNotPerIteration) {
  Ledger l;
  l.set_iteration(0);
  l.on_free(l.on_alloc(64, vocabulary::Category::activations, "conv1"));
  // Evaluation after the loop (iteration -1) allocates more in the same layer.
  l.set_iteration(-1);
  l.on_free(l.on_alloc(4096, vocabulary::Category::activations, "conv1"));
  l.on_free(l.on_alloc(512, vocabulary::Category::activations, "postprocess"));
  const auto acts = l.per_owner(vocabulary::Category::activations);
  ASSERT_EQ(acts.size(), 2u);
  EXPECT_EQ(acts[0].owner, "conv1");
  EXPECT_EQ(acts[0].bytes_allocated_per_iteration, 64);
  EXPECT_EQ(acts[1].owner, "postprocess");
  EXPECT_EQ(acts[1].bytes_allocated_per_iteration, 0);
}

TEST(Ledger, TimelineKeepsEverythingWhenSmall) {
  Ledger l;
  const uint64_t a = l.on_alloc(10, vocabulary::Category::inputs, "data");
  l.on_alloc(20, vocabulary::Category::activations, "x");
  l.on_free(a);
  const auto tl = l.timeline(100);
  ASSERT_EQ(tl.size(), 3u);
  EXPECT_EQ(tl[0].total, 10);
  EXPECT_EQ(tl[1].total, 30);
  EXPECT_EQ(at(tl[2].bytes, vocabulary::Category::inputs), 0);
  EXPECT_EQ(tl[2].total, 20);
  for (size_t i = 1; i < tl.size(); ++i) EXPECT_LE(tl[i - 1].t_ns, tl[i].t_ns);
}

TEST(Ledger, TimelineDownsamplingKeepsPeakFirstLast) {
  Ledger l;
  // A saw-tooth of 2000 changes with one spike in the middle.
  for (int i = 0; i < 1000; ++i) {
    const int64_t bytes = i == 537 ? 1'000'000 : 100 + i % 7;
    l.on_free(l.on_alloc(bytes, vocabulary::Category::activations, "x"));
  }
  ASSERT_EQ(l.change_count(), 2000u);
  const auto tl = l.timeline(50);
  ASSERT_LE(tl.size(), 50u);
  ASSERT_GE(tl.size(), 40u);
  const auto top = std::max_element(tl.begin(), tl.end(), [](auto& a, auto& b) { return a.total < b.total; });
  EXPECT_EQ(top->total, 1'000'000);
  EXPECT_EQ(top->total, l.peak().total);
  EXPECT_EQ(tl.front().total, 100);  // first change
  EXPECT_EQ(tl.back().total, 0);     // last change
  for (const auto& s : tl) EXPECT_EQ(sum(s.bytes), s.total);
  for (size_t i = 1; i < tl.size(); ++i) EXPECT_LE(tl[i - 1].t_ns, tl[i].t_ns);
  // troughs survive too
  EXPECT_GT(std::count_if(tl.begin(), tl.end(), [](auto& s) { return s.total == 0; }), 5);
  EXPECT_EQ(l.timeline(1).size(), 1u);
  EXPECT_EQ(l.timeline(1)[0].total, 1'000'000);
  EXPECT_TRUE(l.timeline(0).empty());
}

TEST(Ledger, DoubleFreeThrows) {
  Ledger l;
  const uint64_t id = l.on_alloc(8, vocabulary::Category::other, "");
  l.on_free(id);
  EXPECT_THROW(l.on_free(id), std::logic_error);
  EXPECT_THROW(l.on_free(12345), std::logic_error);
  EXPECT_THROW(l.on_alloc(-1, vocabulary::Category::other, ""), std::invalid_argument);
}

TEST(Ledger, ClearForgetsAndIgnoresStaleFrees) {
  Ledger l;
  const uint64_t old = l.on_alloc(64, vocabulary::Category::weights, "w");
  l.clear();
  EXPECT_EQ(l.current().total, 0);
  EXPECT_EQ(l.peak().total, 0);
  EXPECT_EQ(l.live_count(), 0);
  EXPECT_TRUE(l.timeline(10).empty());
  EXPECT_TRUE(l.per_owner(vocabulary::Category::weights).empty());
  const uint64_t fresh = l.on_alloc(16, vocabulary::Category::weights, "w");
  EXPECT_NE(fresh, old);
  EXPECT_NO_THROW(l.on_free(old));  // made before clear: ignored
  EXPECT_EQ(l.current().total, 16);
  l.on_free(fresh);
  EXPECT_EQ(l.current().total, 0);
}

TEST(Ledger, ConcurrentAllocFreeBalances) {
  Ledger l;
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&l, k] {
      std::vector<uint64_t> ids;
      for (int i = 0; i < 2000; ++i) {
        ids.push_back(l.on_alloc(1 + (i % 13), static_cast<vocabulary::Category>(i % vocabulary::kCategoryCount),
                                 "t" + std::to_string(k)));
        if (i % 3 == 2) {
          l.on_free(ids.front());
          ids.erase(ids.begin());
        }
      }
      for (uint64_t id : ids) l.on_free(id);
    });
  }
  for (auto& t : threads) t.join();
  const Snapshot s = l.current();
  EXPECT_EQ(s.total, 0);
  for (int64_t b : s.bytes) EXPECT_EQ(b, 0);
  EXPECT_EQ(l.live_count(), 0);
  EXPECT_EQ(l.change_count(), 8u * 2000u * 2u);
  EXPECT_GT(l.peak().total, 0);
  EXPECT_EQ(sum(l.peak().bytes), l.peak().total);
}

TEST(Ledger, GlobalIsOneInstance) { EXPECT_EQ(&Ledger::global(), &Ledger::global()); }

}  // namespace
}  // namespace ts::memprof
