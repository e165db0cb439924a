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
  EXPECT_LE(worst, peak / 4 * 5 + (int64_t{64} << 20));
  EXPECT_GT(cpu::host_allocator_stats().evicted_bytes, 0);
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
