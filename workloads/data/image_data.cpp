#include "workloads/data/image_data.h"

#include <utility>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "engine/context.h"

namespace ts::workloads {

using engine::Tensor;

namespace {

constexpr int64_t kNoiseBank = 1 << 20;   // normal samples reused at random offsets: cheap noise

// Batches are written on the host (meta: shapes only) and moved to their device by on_device().
Batch empty_batch(int64_t n, int64_t c, int64_t s, engine::Device device) {
  engine::CategoryScope category(memprof::Category::inputs);
  const engine::Device host = device.is_meta() ? device : engine::Device::cpu();
  Batch b;
  b.inputs = Tensor::empty({n, c, s, s}, host);
  b.labels = Tensor::empty({n}, host);
  b.samples = n;
  return b;
}

Batch on_device(Batch b, engine::Device device) {
  engine::CategoryScope category(memprof::Category::inputs);
  b.inputs = engine::to_device(b.inputs, device);
  b.labels = engine::to_device(b.labels, device);
  return b;
}

}  // namespace

SyntheticImages::SyntheticImages(int64_t image_size, int64_t channels, int64_t classes, uint64_t seed,
                                 engine::Device device)
    : size_(image_size), channels_(channels), classes_(classes), seed_(seed), device_(device), rng_(seed ^ 0x5eed) {
  if (image_size <= 0 || channels <= 0 || classes <= 1) throw std::invalid_argument("SyntheticImages: bad shape");
  if (device.is_meta()) return;
  engine::Rng trng(seed * 7919 + 17);
  templates_.resize(static_cast<size_t>(classes * channels * size_ * size_));
  const double two_pi = 2 * M_PI;
  for (int64_t k = 0; k < classes; ++k) {
    for (int64_t c = 0; c < channels; ++c) {
      // Three random plane waves at low frequencies: smooth, distinct per class.
      double fx[3], fy[3], ph[3], amp[3];
      for (int w = 0; w < 3; ++w) {
        fx[w] = trng.uniform(0.5, 3.0);
        fy[w] = trng.uniform(0.5, 3.0);
        ph[w] = trng.uniform(0, two_pi);
        amp[w] = trng.uniform(0.5, 1.0);
      }
      float* t = &templates_[static_cast<size_t>(((k * channels) + c) * size_ * size_)];
      for (int64_t y = 0; y < size_; ++y) {
        for (int64_t x = 0; x < size_; ++x) {
          double v = 0;
          for (int w = 0; w < 3; ++w) {
            v += amp[w] * std::sin(two_pi * (fx[w] * x + fy[w] * y) / static_cast<double>(size_) + ph[w]);
          }
          t[y * size_ + x] = static_cast<float>(v);
        }
      }
    }
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
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t k = rng.integer(classes_);
    lab[i] = static_cast<float>(k);
    const float brightness = static_cast<float>(rng.uniform(0.7, 1.3));
    const int64_t dx = rng.integer(5) - 2, dy = rng.integer(5) - 2;
    for (int64_t c = 0; c < channels_; ++c) {
      const float* t = &templates_[static_cast<size_t>((k * channels_ + c) * plane)];
      float* o = in + (i * channels_ + c) * plane;
      const int64_t off = rng.integer(kNoiseBank - plane);
      const float* nz = noise.data() + off;
      for (int64_t y = 0; y < size_; ++y) {
        const int64_t sy = (y + dy + size_) % size_;
        for (int64_t x = 0; x < size_; ++x) {
          const int64_t sx = (x + dx + size_) % size_;
          o[y * size_ + x] = brightness * t[sy * size_ + sx] + 0.8f * nz[y * size_ + x];
        }
      }
    }
  }
  return on_device(std::move(b), device_);
}

Batch SyntheticImages::next_train(int64_t batch) { return make(rng_, batch); }

Batch SyntheticImages::heldout(int64_t index, int64_t batch) {
  engine::Rng r(seed_ * 1000003 + 0xabcdef + static_cast<uint64_t>(index));   // disjoint from training draws
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
  for (uint32_t i = 0; i < ndim; ++i) {
    dims.push_back(be32());
    total *= dims.back();
  }
  std::vector<uint8_t> data(total);
  read_exact(data.data(), static_cast<unsigned>(total));
  gzclose(f);
  return data;
}

}  // namespace

FashionMnist::FashionMnist(const std::string& directory, int64_t image_size, uint64_t seed, engine::Device device)
    : size_(image_size), device_(device), rng_(seed) {
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
  order_.resize(train_labels_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
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
        o[(y + pad) * size_ + x + pad] = (static_cast<float>(src[(y / scale) * 28 + x / scale]) / 255.0f - kMean) / kStd;
      }
    }
    b.labels.data()[i] = static_cast<float>(labels[static_cast<size_t>(idx[static_cast<size_t>(i)])]);
  }
  return on_device(std::move(b), device_);
}

Batch FashionMnist::next_train(int64_t batch) {
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
                                               int64_t classes, uint64_t seed, engine::Device device) {
  check_image_source(spec, classes);
  if (spec == "synthetic") return std::make_unique<SyntheticImages>(image_size, channels, classes, seed, device);
  const std::string dir = spec == "fashion-mnist" ? FashionMnist::kDebianDirectory : spec.substr(14);
  return std::make_unique<FashionMnist>(dir, image_size, seed, device);
}

}  // namespace ts::workloads
