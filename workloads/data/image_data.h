#pragma once
// Image data for the classification workloads: a synthetic ImageNet-shaped source with a
// learnable signal (generated on the fly, seeded), and Fashion-MNIST from Debian's
// dataset-fashion-mnist package (or any folder holding the four idx files).
#include <memory>
#include <string>
#include <vector>

#include "engine/random.h"
#include "workloads/data/shard.h"
#include "workloads/workload.h"

namespace ts::workloads {

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual int64_t channels() const = 0;
  virtual int64_t classes() const = 0;
  virtual int64_t image_size() const = 0;
  virtual std::string name() const = 0;
  // Next training batch (inputs [N, C, S, S] plain, labels [N]), in the `inputs` category.
  virtual Batch next_train(int64_t batch) = 0;
  // Held-out batch `index` (deterministic); returns samples == 0 past the end of a finite set.
  virtual Batch heldout(int64_t index, int64_t batch) = 0;
  virtual int64_t heldout_size() const = 0;  // -1: unbounded (synthetic)
  virtual int64_t train_size() const = 0;    // -1: unbounded
};

// Class-conditional images: each class has a fixed smooth template; a sample is its template
// at a random brightness, plus a random shift and Gaussian noise. A network can learn it, so
// loss falls and accuracy rises, while the input looks like ImageNet's in shape and scale.
// The templates and held-out draws come from `seed` alone; the training stream from
// shard_seed(seed, shard) (shard.h): each rank draws its own samples of the same task.
class SyntheticImages : public ImageSource {
 public:
  SyntheticImages(int64_t image_size, int64_t channels, int64_t classes, uint64_t seed, engine::Device device,
                  DataShard shard = {});
  int64_t channels() const override { return channels_; }
  int64_t classes() const override { return classes_; }
  int64_t image_size() const override { return size_; }
  std::string name() const override { return "synthetic"; }
  Batch next_train(int64_t batch) override;
  Batch heldout(int64_t index, int64_t batch) override;
  int64_t heldout_size() const override { return -1; }
  int64_t train_size() const override { return -1; }

 private:
  Batch make(engine::Rng& rng, int64_t batch);
  int64_t size_, channels_, classes_;
  uint64_t seed_;
  engine::Device device_;
  struct Wave {
    double fx, fy, phase, amplitude;
  };
  std::vector<Wave> waves_;  // [classes, channels, 3]: each template is a sum of three waves
  engine::Rng rng_;
};

// Fashion-MNIST (28x28 grey, 10 classes), centred in image_size x image_size (padded, or
// scaled up by an integer factor then padded), normalised with the training set's mean/std.
// Sharded (shard.h): rank r trains on the training images i with i % world_size == r (file
// order), shuffled each epoch; the test images are the same on every rank.
class FashionMnist : public ImageSource {
 public:
  FashionMnist(const std::string& directory, int64_t image_size, uint64_t seed, engine::Device device,
               DataShard shard = {});
  int64_t channels() const override { return 1; }
  int64_t classes() const override { return 10; }
  int64_t image_size() const override { return size_; }
  std::string name() const override { return "fashion-mnist"; }
  Batch next_train(int64_t batch) override;              // shuffled each epoch
  Batch heldout(int64_t index, int64_t batch) override;  // the 10,000 test images
  int64_t heldout_size() const override { return static_cast<int64_t>(test_labels_.size()); }
  int64_t train_size() const override { return static_cast<int64_t>(order_.size()); }  // this rank's shard
  int64_t epoch() const { return epoch_; }

  static constexpr const char* kDebianDirectory = "/usr/share/datasets/fashion-mnist";

 private:
  Batch gather(const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels, const std::vector<int64_t>& idx);
  int64_t size_;
  engine::Device device_;
  std::vector<uint8_t> train_images_, train_labels_, test_images_, test_labels_;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
  int64_t epoch_ = 0;
  engine::Rng rng_;
};

// Checks a data spec without loading anything; throws std::invalid_argument.
void check_image_source(const std::string& spec, int64_t classes);

// "synthetic" or "fashion-mnist" (Debian's copy) or "fashion-mnist:/path/to/dir"; `shard`: this
// rank's training data (shard.h).
std::unique_ptr<ImageSource> make_image_source(const std::string& spec, int64_t image_size, int64_t channels,
                                               int64_t classes, uint64_t seed, engine::Device device,
                                               DataShard shard = {});

}  // namespace ts::workloads
