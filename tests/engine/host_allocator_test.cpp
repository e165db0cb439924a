#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "engine/cpu/host_allocator.h"
#include "engine/tensor.h"

using namespace ts::engine;

TEST(HostAllocator, SizeClassesBoundTheWaste) {
  EXPECT_EQ(cpu::host_size_class(1), 64u);
  EXPECT_EQ(cpu::host_size_class(1000), 1024u);
  for (size_t b : {size_t{1} << 20, (size_t{1} << 20) + 1, size_t{50'000'000}, size_t{123'456'789}}) {
    const size_t c = cpu::host_size_class(b);
    EXPECT_GE(c, b);
    EXPECT_LE(c, b + b / 4 + 64) << b;
    EXPECT_EQ(c % 64, 0u);
  }
}

TEST(HostAllocator, LargeBlocksAreReused) {
  cpu::host_empty_cache();
  const auto before = cpu::host_allocator_stats();
  void* a = cpu::host_allocate(8 << 20);
  cpu::host_free(a, 8 << 20);
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, static_cast<int64_t>(cpu::host_size_class(8 << 20)));
  void* b = cpu::host_allocate((8 << 20) - 100);  // same class
  EXPECT_EQ(a, b);
  const auto after = cpu::host_allocator_stats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.cached_bytes, 0);
  cpu::host_free(b, (8 << 20) - 100);
  cpu::host_empty_cache();
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, 0);
}

// From 64 KiB up blocks are cached too (glibc's heap kept those it was given back, which added
// a third to the transformer's resident memory), each a mapping of its own.
TEST(HostAllocator, BlocksFrom64KiBAreCachedAndReused) {
  cpu::host_empty_cache();
  const auto before = cpu::host_allocator_stats();
  void* a = cpu::host_allocate(200 << 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  cpu::host_free(a, 200 << 10);
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, static_cast<int64_t>(cpu::host_size_class(200 << 10)));
  void* b = cpu::host_allocate(200 << 10);
  EXPECT_EQ(a, b);
  EXPECT_EQ(cpu::host_allocator_stats().hits - before.hits, 1);
  cpu::host_free(b, 200 << 10);
  void* small = cpu::host_allocate(32 << 10);  // below the cached range: malloc's
  cpu::host_free(small, 32 << 10);
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, static_cast<int64_t>(cpu::host_size_class(200 << 10)));
  cpu::host_empty_cache();
}

// One block at a time, each of another size class: without a bound every class would keep
// its block (about 340 MiB here); with it, handed-out + cached stays near the real peak.
TEST(HostAllocator, CachedBytesStayBounded) {
  cpu::host_empty_cache();
  const int64_t peak_before = cpu::host_allocator_stats().peak_allocated_bytes;
  int64_t largest = 0, worst = 0;
  for (size_t mib = 1; mib <= 64; mib += mib < 8 ? 1 : mib / 4) {
    const size_t bytes = mib << 20;
    largest = std::max<int64_t>(largest, static_cast<int64_t>(cpu::host_size_class(bytes)));
    void* p = cpu::host_allocate(bytes);
    const auto st = cpu::host_allocator_stats();
    worst = std::max(worst, st.allocated_bytes + st.cached_bytes);
    cpu::host_free(p, bytes);
  }
  const int64_t peak = std::max(peak_before, largest);
  EXPECT_LE(worst, cpu::host_cache_bound(peak));
  EXPECT_GT(cpu::host_allocator_stats().evicted_bytes, 0);
  cpu::host_empty_cache();
}

// A request whose class has nothing cached takes a cached block of a larger class, up to twice
// its own, and the block goes back to its own class when freed; further up, a fresh block.
TEST(HostAllocator, AMissTakesACachedBlockUpToTwiceItsSize) {
  cpu::host_empty_cache();
  const size_t big = size_t{12} << 20, asked = size_t{10} << 20, too_small = size_t{5} << 20;
  ASSERT_NE(cpu::host_size_class(big), cpu::host_size_class(asked));
  void* a = cpu::host_allocate(big);
  cpu::host_free(a, big);
  const auto before = cpu::host_allocator_stats();
  void* b = cpu::host_allocate(asked);
  EXPECT_EQ(b, a);
  EXPECT_EQ(cpu::host_allocator_stats().hits - before.hits, 1);
  EXPECT_EQ(cpu::host_allocator_stats().allocated_bytes - before.allocated_bytes,
            static_cast<int64_t>(cpu::host_size_class(big)));
  cpu::host_free(b, asked);
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, static_cast<int64_t>(cpu::host_size_class(big)));
  void* c = cpu::host_allocate(big);  // back in its own class
  EXPECT_EQ(c, a);
  cpu::host_free(c, big);
  const auto misses = cpu::host_allocator_stats().misses;
  void* d = cpu::host_allocate(too_small);  // 12 MiB is more than twice 5 MiB
  EXPECT_NE(d, a);
  EXPECT_EQ(cpu::host_allocator_stats().misses - misses, 1);
  cpu::host_free(d, too_small);
  cpu::host_empty_cache();
}

// Over the bound, the least recently freed blocks go first, whatever their size: here the two
// small ones freed before the large one, which the next step may want again.
TEST(HostAllocator, TheLeastRecentlyFreedBlocksAreEvictedFirst) {
  cpu::host_empty_cache();
  cpu::host_reset_peak();
  const size_t large = size_t{40} << 20, small1 = size_t{4} << 20, small2 = size_t{6} << 20;
  const size_t incoming = size_t{48} << 20;  // larger than anything cached: a fresh block
  void* l = cpu::host_allocate(large);
  void* s1 = cpu::host_allocate(small1);
  void* s2 = cpu::host_allocate(small2);
  cpu::host_free(s1, small1);
  cpu::host_free(s2, small2);
  cpu::host_free(l, large);
  const auto st = cpu::host_allocator_stats();
  const int64_t cached = st.cached_bytes, peak = st.peak_allocated_bytes;
  const auto cls = [](size_t b) { return static_cast<int64_t>(cpu::host_size_class(b)); };
  ASSERT_EQ(cached, cls(large) + cls(small1) + cls(small2));
  // The bound with the incoming block: it forces out the two small blocks and no more.
  const int64_t bound = cpu::host_cache_bound(std::max(peak, st.allocated_bytes + cls(incoming)));
  ASSERT_GT(st.allocated_bytes + cls(incoming) + cached, bound);
  ASSERT_LE(st.allocated_bytes + cls(incoming) + cls(large), bound);
  void* in = cpu::host_allocate(incoming);
  EXPECT_EQ(cpu::host_allocator_stats().cached_bytes, cls(large));
  EXPECT_EQ(cpu::host_allocator_stats().evicted_bytes - st.evicted_bytes, cls(small1) + cls(small2));
  void* again = cpu::host_allocate(large);
  EXPECT_EQ(again, l);
  cpu::host_free(again, large);
  cpu::host_free(in, incoming);
  cpu::host_empty_cache();
}

TEST(HostAllocator, TensorsAreAligned) {
  for (int64_t n : {1, 3, 1000, 1 << 20}) {
    Tensor t = Tensor::empty({n}, Device::cpu());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << n;
  }
}

// Blocks of the cached range do not all start at the same offset within a page: an op's inputs
// and output at one offset alias in the caches. Every block stays writable to its last byte.
TEST(HostAllocator, CachedBlocksStartAtDifferentPageOffsets) {
  cpu::host_empty_cache();
  constexpr size_t kBytes = 256 << 10;
  std::vector<void*> blocks;
  std::set<uintptr_t> offsets;
  for (int i = 0; i < 8; ++i) {
    auto* p = static_cast<unsigned char*>(cpu::host_allocate(kBytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    p[0] = 1;
    p[kBytes - 1] = 2;
    offsets.insert(reinterpret_cast<uintptr_t>(p) % 4096);
    blocks.push_back(p);
  }
  EXPECT_GE(offsets.size(), 8u);
  for (void* p : blocks) cpu::host_free(p, kBytes);
  cpu::host_empty_cache();
}
