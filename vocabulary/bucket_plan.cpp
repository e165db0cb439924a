#include "vocabulary/bucket_plan.h"

#include <algorithm>
#include <stdexcept>

namespace ts::vocabulary {

int64_t mib_to_floats(double mib) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return std::max<int64_t>(1, static_cast<int64_t>(mib * kMiB / sizeof(float)));
}

std::vector<PlannedBucket> plan_buckets(const std::vector<int64_t>& counts, const std::vector<int>& order,
                                        int64_t capacity, int64_t piece) {
  if (capacity < 1 || piece < 1) throw std::invalid_argument("bucket capacity and piece must be positive");
  std::vector<PlannedBucket> buckets;
  for (int s : order) {
    if (s < 0 || static_cast<size_t>(s) >= counts.size()) throw std::out_of_range("bucket order names no slot");
    const int64_t count = counts[static_cast<size_t>(s)];
    for (int64_t off = 0; off < count; off += piece) {
      const int64_t n = std::min(piece, count - off);
      if (buckets.empty() || (buckets.back().count > 0 && buckets.back().count + n > capacity)) {
        buckets.emplace_back();
        buckets.back().priority = s;
      }
      PlannedBucket& b = buckets.back();
      b.units.push_back({s, off, n, b.count});
      b.count += n;
      b.priority = std::min(b.priority, s);
    }
  }
  return buckets;
}

}  // namespace ts::vocabulary
