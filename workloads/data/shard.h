#pragma once
// Data parallelism's view of the data (WorkloadConfig::rank / world_size): each rank trains on
// its own shard, and evaluates on the same held-out data as every other rank. The model never
// depends on the shard (same seed, same parameters on every rank).
//
// - Synthetic, generated-on-the-fly sources (images, scenes, detection shapes, wgan's noise):
//   the training stream's generator is seeded with shard_seed(seed, shard) instead of seed;
//   what the data *is* (class templates, the language, held-out draws) stays on `seed`.
// - Finite training sets (Fashion-MNIST, Pascal VOC, speech manifests and the espeak-ng corpus,
//   parallel text, including the synthetic grammar's fixed training pairs): rank r keeps the
//   examples i with i % world_size == r (round-robin over the set's order, see shard_indices),
//   then shuffles / batches its shard as the whole set is at world_size 1.
// With world_size 1 both are the identity: the same batches, bit for bit, as without sharding.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace ts::workloads {

struct DataShard {
  int rank = 0;
  int world_size = 1;
  bool whole() const { return world_size == 1; }
};

// Throws std::invalid_argument unless world_size >= 1 and 0 <= rank < world_size. `who` (a
// workload's name) starts the message.
void check_shard(const DataShard& shard, const std::string& who = "workload");

// The config's shard (rank of world_size), checked as check_shard does: what every workload's
// WorkloadSpec::check and create call.
DataShard data_shard(const WorkloadConfig& wc, const std::string& who);

// The seed of a rank's training data stream: `seed` itself when world_size == 1; otherwise
// splitmix64(splitmix64(seed) ^ splitmix64(0x5a4d0000 + rank)), a 64-bit mix in which every
// rank (and world size 1) gets a stream unrelated to the others'. Depends on (seed, rank) only,
// not on world_size beyond "is it 1", so rank r's stream is the same in any world.
uint64_t shard_seed(uint64_t seed, const DataShard& shard);

// The indices i in [0, n) that rank keeps: i % world_size == rank, in increasing order (all of
// [0, n) when world_size == 1). With world_size > 1, throws std::invalid_argument naming `what`
// (e.g. "Fashion-MNIST training images") when the shard would be empty (rank >= n); at
// world_size 1 an empty set is left to the caller's own check.
std::vector<int64_t> shard_indices(int64_t n, const DataShard& shard, const std::string& what);

// A vector's shard: its elements at shard_indices(v.size(), ...), in order; v itself when whole.
template <typename T>
std::vector<T> take_shard(const std::vector<T>& v, const DataShard& shard, const std::string& what) {
  if (shard.whole()) return v;
  std::vector<T> out;
  for (int64_t i : shard_indices(static_cast<int64_t>(v.size()), shard, what)) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

}  // namespace ts::workloads
