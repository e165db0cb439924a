#pragma once
// Object-detection data for faster_rcnn: a synthetic source (1-4 coloured shapes on a noisy
// background, class = shape x colour; seeded, generated on the fly, learnable) and a reader of
// Pascal VOC-style folders (JPEGImages/*.jpg, Annotations/*.xml, ImageSets/Main/{train,val}.txt).
// Images come out resized (shorter side to a target, longer side capped), normalised with the
// ImageNet mean/std, with their boxes in the resized image's pixels.
//
// Box coordinates are continuous pixels: a box covering pixel columns 0..9 is x1 = 0, x2 = 10,
// width x2 - x1 (no "+1"). VOC's 1-based inclusive xmin..xmax becomes xmin - 1 .. xmax.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/random.h"
#include "workloads/data/shard.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct Box {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float width() const { return x2 - x1; }
  float height() const { return y2 - y1; }
  float area() const { return (x2 > x1 && y2 > y1) ? (x2 - x1) * (y2 - y1) : 0.0f; }
  bool operator==(const Box&) const = default;
};

struct ObjectBox {
  Box box;
  int32_t label = 0;       // 1..classes; 0 is the background
  bool difficult = false;  // VOC's flag: ignored by training targets and by the AP
};

// One image, ready for the network.
struct DetectionImage {
  std::vector<float> pixels;  // [3, height, width], RGB, normalised
  int64_t height = 0, width = 0;
  float scale = 1.0f;  // resized / original
  std::vector<ObjectBox> objects;
  std::string id;
};

class DetectionSource {
 public:
  virtual ~DetectionSource() = default;
  virtual std::string name() const = 0;
  // Foreground classes (the background is not counted); names[k - 1] is label k.
  virtual const std::vector<std::string>& class_names() const = 0;
  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
  virtual DetectionImage next_train() = 0;
  // Held-out image `index` (deterministic); nullopt past the end of a finite set.
  virtual std::optional<DetectionImage> heldout(int64_t index) = 0;
  virtual int64_t heldout_size() const = 0;  // -1: unbounded
  virtual int64_t train_size() const = 0;    // -1: unbounded
};

struct SyntheticDetectionOptions {
  int64_t height = 600, width = 800;
  int64_t classes = 20;  // at most 20: 4 shapes x 5 colours
  int64_t min_objects = 1, max_objects = 4;
  float min_object = 0.15f, max_object = 0.6f;  // object side, as a fraction of the shorter image side
};

// Colours (red, green, blue, yellow, magenta) of shapes (rectangle, ellipse, triangle, ring):
// class k (1-based) is colour (k - 1) % 5 of shape (k - 1) / 5, so the first five classes
// differ in colour only and the rest need the shape too. Objects overlap at most
// IoU 0.3. The background is a random grey with a gradient and Gaussian noise; objects carry
// noise and a colour jitter too, so the detector must learn shape and colour, not a constant.
// Training images come from shard_seed(seed, shard) (shard.h), held-out ones from `seed`.
class SyntheticDetection : public DetectionSource {
 public:
  SyntheticDetection(const SyntheticDetectionOptions& options, uint64_t seed, DataShard shard = {});
  std::string name() const override { return "synthetic"; }
  const std::vector<std::string>& class_names() const override { return names_; }
  DetectionImage next_train() override { return generate(rng_, "train"); }
  std::optional<DetectionImage> heldout(int64_t index) override;
  int64_t heldout_size() const override { return -1; }
  int64_t train_size() const override { return -1; }

  static constexpr int64_t kMaxClasses = 20;

 private:
  DetectionImage generate(engine::Rng& rng, const std::string& id) const;
  SyntheticDetectionOptions o_;
  uint64_t seed_;
  std::vector<std::string> names_;
  engine::Rng rng_;
};

struct VocOptions {
  int64_t short_side = 600, max_side = 1000;
  bool flip = true;  // random horizontal flip of training images
  std::string train_split = "train", heldout_split = "val";
};

// A Pascal VOC-style folder. Training images are shuffled every epoch; difficult objects are
// kept (flagged) so that training can drop them and the AP can ignore them. Sharded (shard.h):
// rank r trains on the ids i with i % world_size == r of the training list (file order); the
// held-out list is the same on every rank.
class VocDetection : public DetectionSource {
 public:
  VocDetection(const std::string& directory, const VocOptions& options, uint64_t seed, DataShard shard = {});
  std::string name() const override { return "voc:" + dir_; }
  const std::vector<std::string>& class_names() const override;
  DetectionImage next_train() override;
  std::optional<DetectionImage> heldout(int64_t index) override;
  int64_t heldout_size() const override { return static_cast<int64_t>(heldout_ids_.size()); }
  int64_t train_size() const override { return static_cast<int64_t>(train_ids_.size()); }
  int64_t epoch() const { return epoch_; }
  DetectionImage load(const std::string& id, bool flip) const;

 private:
  std::string dir_;
  VocOptions o_;
  std::vector<std::string> train_ids_, heldout_ids_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t epoch_ = 0;
  engine::Rng rng_;
};

// The 20 Pascal VOC classes, in the devkit's order (label k is voc_classes()[k - 1]).
const std::vector<std::string>& voc_classes();

// --- pieces of the VOC reader, exposed for tests ---
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // interleaved, row-major
};
// Decodes a JPEG with libjpeg (grey images come out as RGB). Throws std::runtime_error.
RgbImage read_jpeg(const std::string& path);
// A VOC annotation (the XML text): objects with continuous-pixel boxes. Throws
// std::runtime_error for malformed XML, an unknown class or a box outside the image.
std::vector<ObjectBox> parse_voc_annotation(const std::string& xml, const std::string& where = "annotation");
// Scale that brings the shorter side to short_side unless the longer would pass max_side.
float resize_scale(int64_t height, int64_t width, int64_t short_side, int64_t max_side);
// Bilinear resize + normalisation into a DetectionImage (objects scaled, optionally flipped).
DetectionImage to_detection_image(const RgbImage& img, std::vector<ObjectBox> objects, int64_t short_side,
                                  int64_t max_side, bool flip);

// --- batches ---
// inputs [N, 3, Hmax, Wmax] (each image at the top left, zero padding), labels a flat fp32
// record per image: height, width, scale, count, then count x (x1, y1, x2, y2, label, difficult).
Batch make_detection_batch(const std::vector<DetectionImage>& images, engine::Device device);
struct ImageTargets {
  int64_t height = 0, width = 0;
  float scale = 1.0f;
  std::vector<ObjectBox> objects;
};
std::vector<ImageTargets> decode_detection_labels(const engine::Tensor& labels);

// "synthetic", "voc:DIR" or DIR (a VOC-style folder). check_detection_source throws
// std::invalid_argument for anything else, or a folder without the VOC layout, touching nothing.
void check_detection_source(const std::string& spec);
// `shard`: this rank's training data (shard.h).
std::unique_ptr<DetectionSource> make_detection_source(const std::string& spec,
                                                       const SyntheticDetectionOptions& synthetic,
                                                       const VocOptions& voc, uint64_t seed, DataShard shard = {});

}  // namespace ts::workloads
