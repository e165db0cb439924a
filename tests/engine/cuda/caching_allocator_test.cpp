// The caching allocator's policy (engine/cuda/caching_allocator.h) over fake device memory:
// size classes, reuse per stream, statistics, emptying the cache, and the out-of-memory path
// (retry after emptying the cache, then an error that names the request and the breakdown).
// Needs no GPU.
#include "engine/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "memprof/ledger.h"

namespace ts::engine::cuda {
namespace {

// Host memory standing in for a device of `capacity` bytes.
struct FakeDevice {
  size_t capacity = size_t{1} << 40;
  size_t in_use = 0;
  int mallocs = 0, frees = 0;
  std::map<void*, size_t> blocks;

  CachingAllocator make(const std::string& label = "fake:0") {
    return CachingAllocator(
        label,
        [this](size_t bytes) -> void* {
          if (in_use + bytes > capacity) return nullptr;
          void* p = std::malloc(bytes);
          blocks[p] = bytes;
          in_use += bytes;
          ++mallocs;
          return p;
        },
        [this](void* p) {
          in_use -= blocks.at(p);
          blocks.erase(p);
          std::free(p);
          ++frees;
        },
        [] { return std::string("fake device info"); });
  }
};

constexpr auto kAct = vocabulary::Category::activations;
constexpr size_t MiB = size_t{1} << 20;

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::round_size(0), 0u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(MiB), MiB);
  EXPECT_EQ(CachingAllocator::round_size(MiB + 1), 2 * MiB);
  EXPECT_EQ(CachingAllocator::round_size(3 * MiB), 4 * MiB);
  EXPECT_EQ(CachingAllocator::round_size(100 * MiB + 5), 102 * MiB);
  // A cached block serves a request at most a quarter smaller than itself.
  EXPECT_TRUE(CachingAllocator::fits(4 * MiB, 4 * MiB));
  EXPECT_FALSE(CachingAllocator::fits(4 * MiB, 2 * MiB));
  EXPECT_TRUE(CachingAllocator::fits(12 * MiB, 10 * MiB));
  EXPECT_FALSE(CachingAllocator::fits(2 * MiB, 4 * MiB));
}

TEST(CachingAllocator, ReusesBlocksOfTheSameStream) {
  FakeDevice dev;
  auto a = dev.make();
  EXPECT_EQ(a.allocate(0, 1, kAct, ""), nullptr);
  void* p = a.allocate(1000, 1, kAct, "x");
  a.free(p);
  void* q = a.allocate(900, 1, kAct, "x");  // same 1024-byte class
  EXPECT_EQ(p, q);
  EXPECT_EQ(dev.mallocs, 1);
  void* r = a.allocate(900, 2, kAct, "x");  // another stream: its own block
  EXPECT_NE(r, q);
  EXPECT_EQ(dev.mallocs, 2);
  a.free(r);
  a.free(q);
  // Large blocks: a cached 10 MiB block serves 9 MiB (rounded to 10), not 2 MiB.
  void* big = a.allocate(10 * MiB, 1, kAct, "x");
  a.free(big);
  EXPECT_EQ(a.allocate(9 * MiB, 1, kAct, "x"), big);
  void* small = a.allocate(2 * MiB, 1, kAct, "x");
  EXPECT_NE(small, big);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocations, 6);
  EXPECT_EQ(s.cache_hits, 2);
  EXPECT_EQ(s.device_mallocs, 4);
  EXPECT_THROW(a.free(reinterpret_cast<void*>(0x1234)), std::logic_error);
  a.free(small);
  a.free(big);
}

TEST(CachingAllocator, StatisticsAndEmptyCache) {
  FakeDevice dev;
  auto a = dev.make();
  void* p = a.allocate(3 * MiB, 7, kAct, "");
  void* q = a.allocate(100, 7, kAct, "");
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(4 * MiB + 512));
  EXPECT_EQ(s.used_bytes, static_cast<int64_t>(4 * MiB + 512));
  EXPECT_EQ(s.requested_bytes, static_cast<int64_t>(3 * MiB + 100));
  a.free(p);
  s = a.stats();
  EXPECT_EQ(s.used_bytes, 512);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(4 * MiB + 512));  // cached, still reserved
  EXPECT_EQ(s.peak_used_bytes, static_cast<int64_t>(4 * MiB + 512));
  EXPECT_EQ(a.cached_bytes(), static_cast<int64_t>(4 * MiB));
  a.reset_peaks();
  EXPECT_EQ(a.stats().peak_used_bytes, 512);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 512);
  EXPECT_EQ(s.device_frees, 1);
  EXPECT_EQ(dev.in_use, 512u);
  a.free(q);
}

TEST(CachingAllocator, OutOfMemoryRetriesThenNamesTheRequest) {
  FakeDevice dev;
  dev.capacity = 8 * MiB;
  auto a = dev.make("fake:3");
  void* live = a.allocate(4 * MiB, 1, kAct, "");
  a.free(a.allocate(2 * MiB, 2, kAct, ""));  // cached on another stream
  // 4 live + 2 cached + 4 wanted > 8: the cache is emptied and the request retried.
  void* second = a.allocate(4 * MiB, 1, kAct, "");
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(a.stats().oom_retries, 1);
  EXPECT_EQ(a.cached_bytes(), 0);

  auto& ledger = memprof::Ledger::global();
  const uint64_t id = ledger.on_alloc(12345, vocabulary::Category::weights, "model");
  try {
    a.allocate(3 * MiB + 1, 1, kAct, "layer3.2.conv2");
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    for (const char* want : {"out of memory on fake:3", "3145729 bytes", "category activations", "layer3.2.conv2",
                             "weights", "reserved 8.00 MiB", "used 8.00 MiB", "fake device info"}) {
      EXPECT_NE(m.find(want), std::string::npos) << "missing '" << want << "' in: " << m;
    }
  }
  ledger.on_free(id);
  EXPECT_EQ(a.stats().oom_retries, 2);
  a.free(second);
  a.free(live);
}

}  // namespace
}  // namespace ts::engine::cuda
