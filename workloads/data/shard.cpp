#include "workloads/data/shard.h"

#include <stdexcept>

namespace ts::workloads {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void check_shard(const DataShard& shard, const std::string& who) {
  if (shard.world_size < 1) {
    throw std::invalid_argument(who + ": world size must be at least 1, got " + std::to_string(shard.world_size));
  }
  if (shard.rank < 0 || shard.rank >= shard.world_size) {
    throw std::invalid_argument(who + ": rank " + std::to_string(shard.rank) + " outside 0.." +
                                std::to_string(shard.world_size - 1) + " (world size " +
                                std::to_string(shard.world_size) + ")");
  }
}

DataShard data_shard(const WorkloadConfig& wc, const std::string& who) {
  const DataShard shard{wc.rank, wc.world_size};
  check_shard(shard, who);
  return shard;
}

uint64_t shard_seed(uint64_t seed, const DataShard& shard) {
  check_shard(shard, "shard_seed");
  if (shard.whole()) return seed;
  return splitmix64(splitmix64(seed) ^ splitmix64(0x5a4d0000ULL + static_cast<uint64_t>(shard.rank)));
}

std::vector<int64_t> shard_indices(int64_t n, const DataShard& shard, const std::string& what) {
  check_shard(shard, what);
  std::vector<int64_t> out;
  if (n <= 0 && shard.whole()) return out;
  if (shard.rank >= n) {
    throw std::invalid_argument(what + ": " + std::to_string(n) + " examples cannot give rank " +
                                std::to_string(shard.rank) + " of " + std::to_string(shard.world_size) +
                                " a shard (rank r reads examples i with i % world_size == r); use fewer ranks");
  }
  out.reserve(static_cast<size_t>((n - shard.rank + shard.world_size - 1) / shard.world_size));
  for (int64_t i = shard.rank; i < n; i += shard.world_size) out.push_back(i);
  return out;
}

}  // namespace ts::workloads
