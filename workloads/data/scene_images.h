#pragma once
// Images for the generative workload (wgan): a simple, seeded distribution with structure a
// generator can learn and statistics a test can check. Each image is a fixed vertical colour
// gradient (the "sky") with one soft-edged disc of a random palette colour, position and
// radius, plus faint noise; values in [-1, 1] like the generator's tanh output.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "workloads/data/shard.h"

namespace ts::workloads {

class SceneImages {
 public:
  // Training images from shard_seed(seed, shard) (shard.h), held-out ones from `seed`.
  SceneImages(int64_t image_size, uint64_t seed, engine::Device device, DataShard shard = {});
  int64_t image_size() const { return size_; }
  static constexpr int64_t kChannels = 3;
  // Next training batch [N, 3, S, S] (plain, `inputs` category).
  engine::Tensor next_train(int64_t batch);
  // Held-out batch `index` (deterministic, disjoint from training by seed).
  engine::Tensor heldout(int64_t index, int64_t batch);

 private:
  engine::Tensor make(engine::Rng& rng, int64_t batch);
  int64_t size_;
  uint64_t seed_;
  engine::Device device_;
  engine::Rng rng_;
};

// Per-cell statistics of a set of images [N, 3, S, S] (row-major values): the image is split
// into a g x g grid of cells (g = min(8, S)); for each channel and cell, the mean over images
// of the cell's average, and its standard deviation across images. 2 x 3 x g x g values.
struct ImageStatistics {
  int64_t grid = 0;
  std::vector<double> mean, stddev;  // [3, g, g] each
};
ImageStatistics image_statistics(const std::vector<float>& images, int64_t n, int64_t size);
// sqrt(mean((mean_a - mean_b)^2) + mean((std_a - std_b)^2)) over channels and cells: 0 for the
// same distribution; what the wgan convergence test and its quality metric track.
double statistics_distance(const ImageStatistics& a, const ImageStatistics& b);

}  // namespace ts::workloads
