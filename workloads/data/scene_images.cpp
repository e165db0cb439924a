#include "workloads/data/scene_images.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/cpu/host_allocator.h"

namespace ts::workloads {

using engine::Tensor;

namespace {

struct Colour {
  float r, g, b;
};
constexpr Colour kSkyTop{0.15f, 0.25f, 0.75f}, kSkyBottom{0.9f, 0.8f, 0.55f};
constexpr Colour kPalette[] = {{0.9f, 0.15f, 0.1f}, {0.1f, 0.75f, 0.2f}, {0.95f, 0.9f, 0.1f}};

// Training and held-out data: different streams from one user seed.
constexpr uint64_t kTrainStream = 0x5ce9e11aULL, kHeldoutStream = 0x4e1d07ULL;

}  // namespace

SceneImages::SceneImages(int64_t image_size, uint64_t seed, engine::Device device, DataShard shard)
    : size_(image_size), seed_(seed), device_(device), rng_(shard_seed(seed, shard) ^ kTrainStream) {
  if (image_size < 4)
    throw std::invalid_argument("scene images need a side of at least 4, got " + std::to_string(image_size));
}

Tensor SceneImages::make(engine::Rng& rng, int64_t batch) {
  if (batch <= 0) throw std::invalid_argument("batch size must be positive");
  const int64_t s = size_, plane = s * s;
  // Sized from the user's batch: checked, and refused with the bytes when larger than the machine.
  std::vector<float> v = engine::cpu::host_buffer<float>({batch, kChannels, plane}, "scene image batch");
  const auto sf = static_cast<double>(s);
  for (int64_t n = 0; n < batch; ++n) {
    const double cx = rng.uniform(0.25, 0.75) * sf, cy = rng.uniform(0.25, 0.75) * sf;
    const double radius = rng.uniform(0.12, 0.25) * sf;
    const Colour& disc = kPalette[rng.integer(3)];
    float* img = v.data() + n * kChannels * plane;
    for (int64_t y = 0; y < s; ++y) {
      const float t = static_cast<float>((static_cast<double>(y) + 0.5) / sf);
      const Colour sky{kSkyTop.r + t * (kSkyBottom.r - kSkyTop.r), kSkyTop.g + t * (kSkyBottom.g - kSkyTop.g),
                       kSkyTop.b + t * (kSkyBottom.b - kSkyTop.b)};
      for (int64_t x = 0; x < s; ++x) {
        const double d = std::hypot(static_cast<double>(x) + 0.5 - cx, static_cast<double>(y) + 0.5 - cy);
        // One pixel of anti-aliasing at the rim.
        const auto a = static_cast<float>(std::clamp(radius + 0.5 - d, 0.0, 1.0));
        const float c[3] = {sky.r + a * (disc.r - sky.r), sky.g + a * (disc.g - sky.g), sky.b + a * (disc.b - sky.b)};
        for (int64_t ch = 0; ch < kChannels; ++ch) {
          const double value = 2.0 * c[ch] - 1.0 + 0.02 * rng.normal();
          img[ch * plane + y * s + x] = static_cast<float>(std::clamp(value, -1.0, 1.0));
        }
      }
    }
  }
  engine::CategoryScope category(vocabulary::Category::inputs);
  return Tensor::from_vector({batch, kChannels, s, s}, v, device_);
}

Tensor SceneImages::next_train(int64_t batch) { return make(rng_, batch); }

Tensor SceneImages::heldout(int64_t index, int64_t batch) {
  engine::Rng rng((seed_ ^ kHeldoutStream) + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL);
  return make(rng, batch);
}

ImageStatistics image_statistics(const std::vector<float>& images, int64_t n, int64_t size) {
  const int64_t c = SceneImages::kChannels;
  if (n < 1 || size < 1 || static_cast<int64_t>(images.size()) != n * c * size * size) {
    throw std::invalid_argument("image_statistics: " + std::to_string(images.size()) + " values for " +
                                std::to_string(n) + " images of " + std::to_string(size) + "x" + std::to_string(size));
  }
  ImageStatistics st;
  st.grid = std::min<int64_t>(8, size);
  const int64_t g = st.grid, cells = c * g * g;
  std::vector<double> sum(static_cast<size_t>(cells), 0.0), sq(static_cast<size_t>(cells), 0.0);
  std::vector<double> cell(static_cast<size_t>(cells));
  std::vector<int64_t> count(static_cast<size_t>(g * g), 0);
  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) ++count[static_cast<size_t>((y * g / size) * g + x * g / size)];
  }
  for (int64_t i = 0; i < n; ++i) {
    std::fill(cell.begin(), cell.end(), 0.0);
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* p = images.data() + (i * c + ch) * size * size;
      for (int64_t y = 0; y < size; ++y) {
        for (int64_t x = 0; x < size; ++x)
          cell[static_cast<size_t>(ch * g * g + (y * g / size) * g + x * g / size)] += p[y * size + x];
      }
    }
    for (int64_t k = 0; k < cells; ++k) {
      const double m = cell[static_cast<size_t>(k)] / static_cast<double>(count[static_cast<size_t>(k % (g * g))]);
      sum[static_cast<size_t>(k)] += m;
      sq[static_cast<size_t>(k)] += m * m;
    }
  }
  st.mean.resize(static_cast<size_t>(cells));
  st.stddev.resize(static_cast<size_t>(cells));
  for (size_t k = 0; k < static_cast<size_t>(cells); ++k) {
    const double m = sum[k] / static_cast<double>(n);
    st.mean[k] = m;
    st.stddev[k] = std::sqrt(std::max(0.0, sq[k] / static_cast<double>(n) - m * m));
  }
  return st;
}

double statistics_distance(const ImageStatistics& a, const ImageStatistics& b) {
  if (a.grid != b.grid || a.mean.size() != b.mean.size()) {
    throw std::invalid_argument("statistics_distance: grids differ (" + std::to_string(a.grid) + " vs " +
                                std::to_string(b.grid) + ")");
  }
  double total = 0.0;
  for (size_t k = 0; k < a.mean.size(); ++k) {
    total +=
        (a.mean[k] - b.mean[k]) * (a.mean[k] - b.mean[k]) + (a.stddev[k] - b.stddev[k]) * (a.stddev[k] - b.stddev[k]);
  }
  return std::sqrt(total / static_cast<double>(a.mean.size()));
}

}  // namespace ts::workloads
