// Sizes computed from user input (a batch) in checked arithmetic, and host memory that cannot be
// had reported with the bytes and what they were for (issue 14). A batch of 2^62 once wrapped an
// element count around to a tiny buffer that the data maker then wrote far past.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#include "engine/tensor.h"
#include "profiler/tracer.h"

using namespace ts::engine;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// `f` throws E whose message holds every one of `parts`.
template <class E, class F>
void expect_throw_naming(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' missing from: " << what;
  }
}

// Lowers the host allocator's limit for one test and puts it back.
class MemoryLimit {
 public:
  explicit MemoryLimit(size_t bytes) { cpu::host_set_memory_limit(bytes); }
  ~MemoryLimit() { cpu::host_set_memory_limit(0); }
  MemoryLimit(const MemoryLimit&) = delete;
  MemoryLimit& operator=(const MemoryLimit&) = delete;
};

}  // namespace

TEST(TensorSize, OrdinaryShapesCountAsBefore) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(storage_bytes({2, 3, 4}, Layout::plain()), 96);
  // Channels padded to whole blocks: 5 -> 8.
  EXPECT_EQ(storage_numel({2, 5, 3, 3}, Layout::blocked(8)), 2 * 8 * 3 * 3);
  EXPECT_EQ(Tensor::empty({2, 5, 3, 3}, Device::cpu(), Layout::blocked(8)).nbytes(), 2 * 8 * 3 * 3 * 4);
}

// A zero dimension means no elements, whatever the others: no overflow on the way to 0.
TEST(TensorSize, ZeroDimensionHasNoElementsWhateverTheOthers) {
  EXPECT_EQ(shape_numel({kInt64Max, kInt64Max, 0}), 0);
  EXPECT_EQ(storage_numel({kInt64Max, kInt64Max, 0, 2}, Layout::blocked(16)), 0);
  EXPECT_EQ(Tensor::empty({0, kInt64Max}, Device::cpu()).numel(), 0);
}

TEST(TensorSize, NegativeDimensionsAreRefused) {
  expect_throw_naming<std::invalid_argument>([] { shape_numel({2, -3}); }, {"negative", "[2, -3]"});
  expect_throw_naming<std::invalid_argument>(
      [] {
        storage_numel({2, -3, 1, 1}, Layout::blocked(8));
      },
      {"[2, -3, 1, 1]"});
  expect_throw_naming<std::invalid_argument>([] { Tensor::empty({4, -1}, Device::cpu()); }, {"[4, -1]"});
  // Two negatives multiply to a positive count: a view of 4 elements as [-1, -4] once passed.
  const Tensor t = Tensor::zeros({4}, Device::cpu());
  expect_throw_naming<std::invalid_argument>([&] { (void)t.view({-1, -4}); }, {"[-1, -4]"});
}

// The crash of issue 14: resnet50 --batch 4611686018427387904.
TEST(TensorSize, ElementCountBeyondInt64IsRefusedNamingTheShape) {
  const Shape batch_of_2_62{4611686018427387904, 3, 224, 224};
  expect_throw_naming<std::length_error>([&] { shape_numel(batch_of_2_62); },
                                         {"[4611686018427387904, 3, 224, 224]", "element count", "overflows"});
  // Refused before any allocation, on every device (meta tensors have shapes only).
  for (const Device d : {Device::cpu(), Device::meta()}) {
    expect_throw_naming<std::length_error>([&] { Tensor::empty(batch_of_2_62, d); },
                                           {"[4611686018427387904, 3, 224, 224]"});
  }
  expect_throw_naming<std::length_error>([] { shape_numel({kInt64Max, 2}); }, {"overflows"});
}

// Elements that fit int64 whose bytes do not.
TEST(TensorSize, ByteCountBeyondInt64IsRefused) {
  const Shape shape{kInt64Max / 4 + 1};
  EXPECT_EQ(shape_numel(shape), kInt64Max / 4 + 1);
  expect_throw_naming<std::length_error>([&] { storage_bytes(shape, Layout::plain()); },
                                         {shape_str(shape), "byte count"});
  expect_throw_naming<std::length_error>([&] { Tensor::empty(shape, Device::meta()); }, {"byte count"});
}

// ceil(C / block) * block was computed as (C + block - 1) / block * block, which wrapped.
TEST(TensorSize, BlockedPaddingBeyondInt64IsRefused) {
  expect_throw_naming<std::length_error>(
      [] {
        storage_numel({1, kInt64Max, 1, 1}, Layout::blocked(8));
      },
      {"padded", "overflows"});
  expect_throw_naming<std::length_error>(
      [] {
        storage_numel({kInt64Max / 4, 5, 1, 1}, Layout::blocked(8));
      },
      {"channel-blocked", "overflows"});
}

// A tensor larger than the machine is refused before anything is allocated or written, with the
// bytes and what they were for; a refused request leaves the allocator's books unchanged.
TEST(TensorSize, TensorLargerThanMemorySaysHowMuchAndForWhat) {
  const size_t limit = cpu::host_memory_limit();
  if (limit > static_cast<size_t>(kInt64Max) / 2) GTEST_SKIP() << "physical memory unknown";
  const int64_t rows = static_cast<int64_t>(limit / 4096) + 1;  // rows x 1024 floats: just over the limit
  const Shape shape{rows, 1024};
  const auto bytes = static_cast<size_t>(rows) * 4096;
  const std::string owner = "layer3.2.conv2";
  const auto before = cpu::host_allocator_stats();
  try {
    OwnerScope scope(&owner, ts::profiler::Tracer::global().intern(owner));
    Tensor::empty(shape, Device::cpu(), Layout::plain(), ts::vocabulary::Category::activations);
    ADD_FAILURE() << "a tensor larger than physical memory was allocated";
  } catch (const cpu::OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), bytes);
    const std::string what = e.what();
    for (const std::string& part :
         {shape_str(shape), std::string("activations"), owner, std::to_string(bytes), std::string("physical memory")}) {
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' missing from: " << what;
    }
  }
  const auto after = cpu::host_allocator_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.misses, before.misses);
}

// Blocks that fit one by one but not together: refused with what is already in use, instead of
// being "allocated" by an overcommitting kernel and killed while being written.
TEST(TensorSize, BlocksBeyondTheLimitTogetherAreRefused) {
  cpu::host_empty_cache();
  const auto in_use = static_cast<size_t>(cpu::host_allocator_stats().allocated_bytes);
  constexpr int64_t k24MiB = int64_t{24} << 20;  // a size class of its own
  MemoryLimit limit(in_use + (size_t{64} << 20));
  Tensor a = Tensor::empty({k24MiB / 4}, Device::cpu());
  Tensor b = Tensor::empty({k24MiB / 4}, Device::cpu());
  const auto before = cpu::host_allocator_stats();
  expect_throw_naming<cpu::OutOfMemoryError>([&] { Tensor::empty({k24MiB / 4}, Device::cpu()); },
                                             {"[6291456]", "25165824 bytes", "already in use", "limit"});
  EXPECT_EQ(cpu::host_allocator_stats().allocated_bytes, before.allocated_bytes);
  b = Tensor();  // freed and cached: the same request fits again
  EXPECT_EQ(Tensor::empty({k24MiB / 4}, Device::cpu()).nbytes(), k24MiB);
  cpu::host_empty_cache();
}

TEST(HostAllocatorSize, RequestsNoObjectCanHaveAreRefused) {
  for (size_t bytes :
       {std::numeric_limits<size_t>::max(), static_cast<size_t>(PTRDIFF_MAX) + 1, static_cast<size_t>(PTRDIFF_MAX)}) {
    expect_throw_naming<cpu::OutOfMemoryError>([&] { cpu::host_allocate(bytes); }, {std::to_string(bytes)});
    try {
      cpu::host_allocate(bytes);
    } catch (const cpu::OutOfMemoryError& e) {
      EXPECT_EQ(e.requested_bytes(), bytes);
    }
  }
}

TEST(HostAllocatorSize, HostBuffersAreCheckedLikeTensors) {
  EXPECT_EQ(cpu::check_host_buffer({3, 4}, sizeof(float), "t"), 12u);
  EXPECT_EQ(cpu::check_host_buffer({kInt64Max, 0}, sizeof(float), "t"), 0u);
  expect_throw_naming<std::invalid_argument>(
      [] {
        cpu::check_host_buffer({3, -4}, 4, "speech batch");
      },
      {"speech batch", "3 x -4"});
  expect_throw_naming<cpu::OutOfMemoryError>(
      [] {
        cpu::check_host_buffer({kInt64Max, kInt64Max}, 4, "scene batch");
      },
      {"scene batch", "overflow"});
  expect_throw_naming<cpu::OutOfMemoryError>([] { cpu::check_host_buffer({kInt64Max}, 4, "scene batch"); },
                                             {"scene batch", "overflow", "byte count"});
  {
    MemoryLimit limit(size_t{1} << 20);
    expect_throw_naming<cpu::OutOfMemoryError>(
        [] {
          cpu::host_buffer<float>({1024, 257}, "detection batch");
        },
        {"detection batch", "1024 x 257", "1052672 bytes", "limit"});
    EXPECT_EQ(cpu::host_buffer<float>({1024, 256}, "detection batch").size(), 1024u * 256u);
  }
}

TEST(HostAllocatorSize, BytesReadAsPeopleWriteThem) {
  EXPECT_EQ(cpu::format_host_bytes(512), "512 B");
  EXPECT_EQ(cpu::format_host_bytes(size_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(cpu::format_host_bytes(size_t{24} << 40), "24.00 TiB");
}
