#pragma once
// How data parallelism packs a gradient group into buckets: the one rule that
// distributed::DataParallel builds its buckets by and projection/ simulates them by.
#include <cstdint>
#include <vector>

namespace ts::vocabulary {

// A piece of one gradient in a bucket: a whole tensor, or a partition of it (priority).
struct BucketUnit {
  int slot = 0;               // the parameter's index in its group
  int64_t offset = 0;         // in the gradient's storage, floats
  int64_t count = 0;          // floats
  int64_t bucket_offset = 0;  // in the bucket's buffer, floats
};

struct PlannedBucket {
  std::vector<BucketUnit> units;
  int64_t count = 0;  // floats
  int priority = 0;   // the lowest slot in it: with priority, lower goes first
};

// A bucket size in MiB as a count of floats (at least one).
int64_t mib_to_floats(double mib);

// Packs the gradients of `counts` (floats per slot) in `order` into buckets of at most
// `capacity` floats (a gradient larger than that fills a bucket of its own), each gradient cut
// into pieces of at most `piece` floats first (priority's partitions; without priority, whole).
std::vector<PlannedBucket> plan_buckets(const std::vector<int64_t>& counts, const std::vector<int>& order,
                                        int64_t capacity, int64_t piece);

}  // namespace ts::vocabulary
