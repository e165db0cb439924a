#include "workloads/data/image_data.h"

#include <utility>

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "engine/context.h"
#include "engine/cpu/host_allocator.h"

namespace ts::workloads {

using engine::Tensor;

namespace {

constexpr int64_t kNoiseBank = 1 << 20;  // normal samples reused at random offsets: cheap noise

// Batches are written on the host (meta: shapes only) and moved to their device by on_device().
Batch empty_batch(int64_t n, int64_t c, int64_t s, engine::Device device) {
  engine::CategoryScope category(vocabulary::Category::inputs);
  const engine::Device host = device.is_meta() ? device : engine::Device::cpu();
  Batch b;
  b.inputs = Tensor::empty({n, c, s, s}, host);
  b.labels = Tensor::empty({n}, host);
  b.samples = n;
  return b;
}

Batch on_device(Batch b, engine::Device device) {
  engine::CategoryScope category(vocabulary::Category::inputs);
  b.inputs = engine::to_device(b.inputs, device);
  b.labels = engine::to_device(b.labels, device);
  return b;
}

}  // namespace

SyntheticImages::SyntheticImages(int64_t image_size, int64_t channels, int64_t classes, uint64_t seed,
                                 engine::Device device, DataShard shard)
    : size_(image_size),
      channels_(channels),
      classes_(classes),
      seed_(seed),
      device_(device),
      rng_(shard_seed(seed, shard) ^ 0x5eed) {
  if (image_size <= 0 || channels <= 0 || classes <= 1) throw std::invalid_argument("SyntheticImages: bad shape");
  if (device.is_meta()) return;
  engine::Rng trng(seed * 7919 + 17);
  // Three random plane waves at low frequencies per class and channel: smooth, distinct per
  // class. Only their parameters are kept (full templates for 1000 classes at 299x299 were
  // 1 GiB); make() evaluates them, separably, for each sample.
  waves_.resize(static_cast<size_t>(classes * channels * 3));
  const double two_pi = 2 * M_PI;
  for (auto& w : waves_) {
    w.fx = trng.uniform(0.5, 3.0);
    w.fy = trng.uniform(0.5, 3.0);
    w.phase = trng.uniform(0, two_pi);
    w.amplitude = trng.uniform(0.5, 1.0);
  }
}

Batch SyntheticImages::make(engine::Rng& rng, int64_t batch) {
  Batch b = empty_batch(batch, channels_, size_, device_);
  if (device_.is_meta()) return b;
  static const std::vector<float> noise = [] {
    engine::Rng nrng(12345);
    std::vector<float> v(kNoiseBank);
    for (auto& x : v) x = static_cast<float>(nrng.normal());
    return v;
  }();
  float* in = b.inputs.data();
  float* lab = b.labels.data();
  const int64_t plane = size_ * size_;
  const double step = 2 * M_PI / static_cast<double>(size_);
  // The random draws are serial, in the order they always had (so a seed gives the same batch
  // on any number of threads); the pixels, most of the time, are computed in parallel: on a GPU
  // machine this batch is made on the host inside each timed iteration while the GPU waits.
  struct Draw {
    int64_t label, dx, dy;
    float brightness;
  };
  std::vector<Draw> draws(static_cast<size_t>(batch));
  std::vector<int64_t> noise_at(static_cast<size_t>(batch * channels_));
  for (int64_t i = 0; i < batch; ++i) {
    Draw& d = draws[static_cast<size_t>(i)];
    d.label = rng.integer(classes_);
    lab[i] = static_cast<float>(d.label);
    d.brightness = static_cast<float>(rng.uniform(0.7, 1.3));
    d.dx = rng.integer(5) - 2;
    d.dy = rng.integer(5) - 2;
    for (int64_t c = 0; c < channels_; ++c)
      noise_at[static_cast<size_t>(i * channels_ + c)] = rng.integer(kNoiseBank - plane);
  }
  const int64_t planes = batch * channels_;
#pragma omp parallel if (planes > 1 && plane * planes > (int64_t{1} << 16))
  {
    // sin(a x + b y + p) = sin(a x) cos(b y + p) + cos(a x) sin(b y + p): per-wave row and
    // column tables make a pixel six multiply-adds.
    std::vector<float> sx(static_cast<size_t>(3 * size_)), cx(sx.size()), sy(sx.size()), cy(sx.size());
#pragma omp for schedule(static)
    for (int64_t ic = 0; ic < planes; ++ic) {
      const int64_t i = ic / channels_, c = ic % channels_;
      const Draw& d = draws[static_cast<size_t>(i)];
      const Wave* w = &waves_[static_cast<size_t>((d.label * channels_ + c) * 3)];
      for (int64_t j = 0; j < 3; ++j) {
        for (int64_t t = 0; t < size_; ++t) {
          // The template is shifted by (dx, dy), wrapping around.
          const auto u = static_cast<double>((t + d.dx + size_) % size_),
                     v = static_cast<double>((t + d.dy + size_) % size_);
          const size_t at = static_cast<size_t>(j * size_ + t);
          sx[at] = static_cast<float>(w[j].amplitude * std::sin(step * w[j].fx * u));
          cx[at] = static_cast<float>(w[j].amplitude * std::cos(step * w[j].fx * u));
          sy[at] = static_cast<float>(std::sin(step * w[j].fy * v + w[j].phase));
          cy[at] = static_cast<float>(std::cos(step * w[j].fy * v + w[j].phase));
        }
      }
      float* o = in + ic * plane;
      const float* nz = noise.data() + noise_at[static_cast<size_t>(ic)];
      const float brightness = d.brightness;
      for (int64_t y = 0; y < size_; ++y) {
        const float a0 = cy[static_cast<size_t>(y)], b0 = sy[static_cast<size_t>(y)];
        const float a1 = cy[static_cast<size_t>(size_ + y)], b1 = sy[static_cast<size_t>(size_ + y)];
        const float a2 = cy[static_cast<size_t>(2 * size_ + y)], b2 = sy[static_cast<size_t>(2 * size_ + y)];
        const float* s0 = sx.data();
        const float* s1 = sx.data() + size_;
        const float* s2 = sx.data() + 2 * size_;
        const float* c0 = cx.data();
        const float* c1 = cx.data() + size_;
        const float* c2 = cx.data() + 2 * size_;
        for (int64_t x = 0; x < size_; ++x) {
          const float t = s0[x] * a0 + c0[x] * b0 + s1[x] * a1 + c1[x] * b1 + s2[x] * a2 + c2[x] * b2;
          o[y * size_ + x] = brightness * t + 0.8f * nz[y * size_ + x];
        }
      }
    }
  }
  return on_device(std::move(b), device_);
}

Batch SyntheticImages::next_train(int64_t batch) { return make(rng_, batch); }

Batch SyntheticImages::heldout(int64_t index, int64_t batch) {
  engine::Rng r(seed_ * 1000003 + 0xabcdef + static_cast<uint64_t>(index));  // disjoint from training draws
  return make(r, batch);
}

namespace {

std::vector<uint8_t> read_idx(const std::filesystem::path& path, uint32_t magic, std::vector<uint32_t>& dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path.string());
  auto read_exact = [&](void* dst, unsigned n) {
    if (gzread(f, dst, n) != static_cast<int>(n)) {
      gzclose(f);
      throw std::runtime_error("truncated idx file " + path.string());
    }
  };
  auto be32 = [&]() {
    unsigned char b[4];
    read_exact(b, 4);
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
  };
  const uint32_t m = be32();
  if (m != magic) {
    gzclose(f);
    throw std::runtime_error(path.string() + " is not an idx file of the expected kind");
  }
  const uint32_t ndim = magic & 0xff;
  dims.clear();
  size_t total = 1;
  bool too_large = false;  // the header's sizes come from the file: checked, then bounded by gzread's unsigned
  for (uint32_t i = 0; i < ndim; ++i) {
    dims.push_back(be32());
    too_large = too_large || __builtin_mul_overflow(total, size_t{dims.back()}, &total) || total > UINT_MAX;
  }
  if (too_large) {
    gzclose(f);
    throw std::runtime_error(path.string() + ": its idx header claims more than " + std::to_string(UINT_MAX) +
                             " bytes");
  }
  std::vector<uint8_t> data(total);
  read_exact(data.data(), static_cast<unsigned>(total));
  gzclose(f);
  return data;
}

}  // namespace

FashionMnist::FashionMnist(const std::string& directory, int64_t image_size, uint64_t seed, engine::Device device,
                           DataShard shard)
    : size_(image_size), device_(device), rng_(seed) {
  check_shard(shard, "Fashion-MNIST");
  if (image_size < 28) throw std::invalid_argument("Fashion-MNIST needs an image size of at least 28");
  const std::filesystem::path dir(directory);
  std::vector<uint32_t> dims;
  train_images_ = read_idx(dir / "train-images-idx3-ubyte.gz", 0x00000803, dims);
  train_labels_ = read_idx(dir / "train-labels-idx1-ubyte.gz", 0x00000801, dims);
  test_images_ = read_idx(dir / "t10k-images-idx3-ubyte.gz", 0x00000803, dims);
  test_labels_ = read_idx(dir / "t10k-labels-idx1-ubyte.gz", 0x00000801, dims);
  if (train_images_.size() != train_labels_.size() * 784 || test_images_.size() != test_labels_.size() * 784) {
    throw std::runtime_error("Fashion-MNIST files in " + directory + " disagree on their sizes");
  }
  // This rank's training images: i % world_size == rank (all of them at world size 1).
  order_ =
      shard_indices(static_cast<int64_t>(train_labels_.size()), shard, "Fashion-MNIST training images in " + directory);
}

Batch FashionMnist::gather(const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels,
                           const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  Batch b = empty_batch(n, 1, size_, device_);
  if (device_.is_meta()) return b;
  // Mean and standard deviation of the Fashion-MNIST training pixels (scaled to [0, 1]).
  constexpr float kMean = 0.2860f, kStd = 0.3530f;
  const int64_t scale = size_ / 28;
  const int64_t pad = (size_ - 28 * scale) / 2;
  float* in = b.inputs.data();
  const float background = (0.0f - kMean) / kStd;
  std::fill(in, in + n * size_ * size_, background);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = &images[static_cast<size_t>(idx[static_cast<size_t>(i)] * 784)];
    float* o = in + i * size_ * size_;
    for (int64_t y = 0; y < 28 * scale; ++y) {
      for (int64_t x = 0; x < 28 * scale; ++x) {
        o[(y + pad) * size_ + x + pad] =
            (static_cast<float>(src[(y / scale) * 28 + x / scale]) / 255.0f - kMean) / kStd;
      }
    }
    b.labels.data()[i] = static_cast<float>(labels[static_cast<size_t>(idx[static_cast<size_t>(i)])]);
  }
  return on_device(std::move(b), device_);
}

Batch FashionMnist::next_train(int64_t batch) {
  // The batch is checked before its index list is built, which would otherwise be filled first.
  engine::cpu::check_host_buffer({batch, size_, size_}, sizeof(float), "Fashion-MNIST batch");
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(batch));
  while (static_cast<int64_t>(idx.size()) < batch) {
    if (cursor_ == 0) {
      // Fisher-Yates with our own generator: the same order on every machine.
      for (size_t i = order_.size() - 1; i > 0; --i) {
        std::swap(order_[i], order_[static_cast<size_t>(rng_.integer(static_cast<int64_t>(i) + 1))]);
      }
    }
    idx.push_back(order_[cursor_]);
    if (++cursor_ == order_.size()) {
      cursor_ = 0;
      ++epoch_;
    }
  }
  return gather(train_images_, train_labels_, idx);
}

Batch FashionMnist::heldout(int64_t index, int64_t batch) {
  std::vector<int64_t> idx;
  const int64_t total = heldout_size();
  for (int64_t i = index * batch; i < std::min(total, (index + 1) * batch); ++i) idx.push_back(i);
  if (idx.empty()) return Batch{};
  return gather(test_images_, test_labels_, idx);
}

void check_image_source(const std::string& spec, int64_t classes) {
  if (spec == "synthetic") return;
  if (spec == "fashion-mnist" || spec.starts_with("fashion-mnist:")) {
    if (classes != 10) throw std::invalid_argument("Fashion-MNIST has 10 classes; use a preset with 10 (tiny)");
    const std::string dir = spec == "fashion-mnist" ? FashionMnist::kDebianDirectory : spec.substr(14);
    if (!std::filesystem::exists(dir)) {
      throw std::invalid_argument("Fashion-MNIST not found in " + dir + " (install Debian's dataset-fashion-mnist)");
    }
    return;
  }
  throw std::invalid_argument("unknown data source '" + spec + "' (synthetic, fashion-mnist[:DIR])");
}

std::unique_ptr<ImageSource> make_image_source(const std::string& spec, int64_t image_size, int64_t channels,
                                               int64_t classes, uint64_t seed, engine::Device device, DataShard shard) {
  check_image_source(spec, classes);
  if (spec == "synthetic") return std::make_unique<SyntheticImages>(image_size, channels, classes, seed, device, shard);
  const std::string dir = spec == "fashion-mnist" ? FashionMnist::kDebianDirectory : spec.substr(14);
  return std::make_unique<FashionMnist>(dir, image_size, seed, device, shard);
}

}  // namespace ts::workloads
