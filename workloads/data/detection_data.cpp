#include "workloads/data/detection_data.h"

// libjpeg's header needs FILE and size_t declared first.
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/context.h"
#include "engine/cpu/host_allocator.h"

namespace ts::workloads {

using engine::Tensor;
namespace fs = std::filesystem;

namespace {

// torchvision's ImageNet normalisation, on [0, 1] RGB.
constexpr std::array<float, 3> kMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kStd = {0.229f, 0.224f, 0.225f};

float normalise(float v255, int c) {
  return (v255 / 255.0f - kMean[static_cast<size_t>(c)]) / kStd[static_cast<size_t>(c)];
}

const std::vector<float>& noise_bank() {
  static const std::vector<float> bank = [] {
    engine::Rng r(424242);
    std::vector<float> v(1 << 20);
    for (auto& x : v) x = static_cast<float>(r.normal());
    return v;
  }();
  return bank;
}

constexpr int kShapes = 4;  // rectangle, ellipse, triangle, ring
constexpr std::array<std::array<float, 3>, 5> kColours = {
    {{220, 40, 40}, {40, 190, 60}, {50, 80, 225}, {235, 210, 40}, {200, 60, 205}}};
const char* const kShapeNames[kShapes] = {"rectangle", "ellipse", "triangle", "ring"};
const char* const kColourNames[5] = {"red", "green", "blue", "yellow", "magenta"};

// Is the pixel centre at (u, v) in [0, 1]^2 of the box inside the shape?
bool inside(int shape, float u, float v) {
  const float du = u - 0.5f, dv = v - 0.5f, r2 = du * du + dv * dv;
  switch (shape) {
    case 0: return true;
    case 1: return r2 <= 0.25f;
    case 2: return std::abs(du) <= 0.5f * v;  // apex at the top centre, base at the bottom
    default: return r2 <= 0.25f && r2 >= 0.09f;
  }
}

float iou(const Box& a, const Box& b) {
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1), ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  if (iw <= 0 || ih <= 0) return 0.0f;
  const float inter = iw * ih;
  return inter / (a.area() + b.area() - inter);
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_ids(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::invalid_argument("cannot open " + p.string());
  std::vector<std::string> ids;
  std::string line;
  while (std::getline(in, line)) {
    // Per-class split files carry a second column (1 / -1); the id is the first word.
    std::istringstream ls(line);
    std::string id;
    if (ls >> id) ids.push_back(id);
  }
  return ids;
}

// ---------------------------------------------------------------- a small XML reader

struct XmlNode {
  std::string name, text;
  std::vector<XmlNode> children;
  const XmlNode* child(std::string_view n) const {
    for (const auto& c : children) {
      if (c.name == n) return &c;
    }
    return nullptr;
  }
};

class XmlParser {
 public:
  XmlParser(const std::string& s, std::string where) : s_(s), where_(std::move(where)) {}

  XmlNode parse_document() {
    skip_misc();
    if (pos_ >= s_.size() || s_[pos_] != '<') fail("no root element");
    XmlNode root = parse_element();
    skip_misc();
    if (pos_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(where_ + ": malformed XML at byte " + std::to_string(pos_) + ": " + msg);
  }
  bool starts(std::string_view t) const { return s_.compare(pos_, t.size(), t) == 0; }
  void skip_to(std::string_view end) {
    const auto p = s_.find(end, pos_);
    if (p == std::string::npos) fail("unterminated '" + std::string(end) + "'");
    pos_ = p + end.size();
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  // Whitespace, the prolog, comments and DOCTYPE.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<?")) skip_to("?>");
      else if (starts("<!--")) skip_to("-->");
      else if (starts("<!")) skip_to(">");
      else return;
    }
  }
  std::string name() {
    const size_t b = pos_;
    while (pos_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[pos_])) && s_[pos_] != '>' &&
           s_[pos_] != '/')
      ++pos_;
    if (pos_ == b) fail("empty tag name");
    return s_.substr(b, pos_ - b);
  }
  static std::string unescape(const std::string& t) {
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] != '&') {
        out += t[i];
        continue;
      }
      static const std::pair<const char*, char> ents[] = {
          {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool done = false;
      for (const auto& [e, c] : ents) {
        if (t.compare(i, std::strlen(e), e) == 0) {
          out += c;
          i += std::strlen(e) - 1;
          done = true;
          break;
        }
      }
      if (!done) out += '&';
    }
    return out;
  }
  XmlNode parse_element() {
    ++pos_;  // '<'
    XmlNode node;
    node.name = name();
    // Attributes are skipped (VOC annotations carry none that matter), quotes respected.
    while (pos_ < s_.size() && s_[pos_] != '>' && !starts("/>")) {
      if (s_[pos_] == '"' || s_[pos_] == '\'') {
        const char q = s_[pos_++];
        const auto p = s_.find(q, pos_);
        if (p == std::string::npos) fail("unterminated attribute value");
        pos_ = p;
      }
      ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated tag <" + node.name + ">");
    if (starts("/>")) {
      pos_ += 2;
      return node;
    }
    ++pos_;  // '>'
    std::string text;
    for (;;) {
      if (pos_ >= s_.size()) fail("missing </" + node.name + ">");
      if (starts("</")) {
        pos_ += 2;
        const std::string end = name();
        if (end != node.name) fail("</" + end + "> closes <" + node.name + ">");
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("bad closing tag");
        ++pos_;
        break;
      }
      if (starts("<!--")) {
        skip_to("-->");
      } else if (starts("<![CDATA[")) {
        pos_ += 9;
        const auto p = s_.find("]]>", pos_);
        if (p == std::string::npos) fail("unterminated CDATA");
        text += s_.substr(pos_, p - pos_);
        pos_ = p + 3;
      } else if (s_[pos_] == '<') {
        node.children.push_back(parse_element());
      } else {
        const auto p = s_.find('<', pos_);
        text += unescape(s_.substr(pos_, (p == std::string::npos ? s_.size() : p) - pos_));
        pos_ = p == std::string::npos ? s_.size() : p;
      }
    }
    node.text = trim(text);
    return node;
  }

  const std::string& s_;
  std::string where_;
  size_t pos_ = 0;
};

float number(const XmlNode* n, const std::string& what, const std::string& where) {
  if (!n) throw std::runtime_error(where + ": missing <" + what + ">");
  try {
    size_t used = 0;
    const float v = std::stof(n->text, &used);
    if (used != n->text.size() || !std::isfinite(v)) throw std::invalid_argument(n->text);
    return v;
  } catch (const std::exception&) {
    throw std::runtime_error(where + ": <" + what + "> is not a number: '" + n->text + "'");
  }
}

// ---------------------------------------------------------------- libjpeg

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// The C part: no C++ object is created between setjmp and a longjmp back to it.
bool decode_jpeg(std::FILE* f, RgbImage* out, char* message) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  if (setjmp(err.jump)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;  // grey and YCbCr alike come out as RGB
  jpeg_start_decompress(&cinfo);
  out->width = cinfo.output_width;
  out->height = cinfo.output_height;
  out->rgb.resize(static_cast<size_t>(out->width * out->height * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->rgb.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(out->width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

// ---------------------------------------------------------------- classes

const std::vector<std::string>& voc_classes() {
  static const std::vector<std::string> names = {
      "aeroplane",   "bicycle", "bird",  "boat",      "bottle", "bus",         "car",   "cat",  "chair", "cow",
      "diningtable", "dog",     "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor"};
  return names;
}

// ---------------------------------------------------------------- synthetic

SyntheticDetection::SyntheticDetection(const SyntheticDetectionOptions& o, uint64_t seed, DataShard shard)
    : o_(o), seed_(seed), rng_(shard_seed(seed, shard) ^ 0xde7ec7) {
  if (o.height < 8 || o.width < 8) throw std::invalid_argument("SyntheticDetection: image too small");
  if (o.classes < 1 || o.classes > kMaxClasses) {
    throw std::invalid_argument("SyntheticDetection: 1 to " + std::to_string(kMaxClasses) + " classes, got " +
                                std::to_string(o.classes));
  }
  if (o.min_objects < 1 || o.max_objects < o.min_objects)
    throw std::invalid_argument("SyntheticDetection: object counts");
  if (!(o.min_object > 0) || o.max_object < o.min_object || o.max_object > 1) {
    throw std::invalid_argument("SyntheticDetection: object sizes");
  }
  for (int64_t k = 0; k < o.classes; ++k) {
    names_.push_back(std::string(kColourNames[k % kColours.size()]) + "_" + kShapeNames[k / kColours.size()]);
  }
}

std::optional<DetectionImage> SyntheticDetection::heldout(int64_t index) {
  // Its own stream per index: the same held-out images whatever training has drawn.
  engine::Rng r((seed_ + 0x9e3779b97f4a7c15ULL) * 1000003ULL + static_cast<uint64_t>(index));
  return generate(r, "heldout_" + std::to_string(index));
}

DetectionImage SyntheticDetection::generate(engine::Rng& rng, const std::string& id) const {
  const int64_t h = o_.height, w = o_.width;
  const auto& noise = noise_bank();
  DetectionImage img;
  img.height = h;
  img.width = w;
  img.id = id;
  // Background: grey level, a linear gradient, noise (in 0..255 units).
  const float grey = static_cast<float>(rng.uniform(60, 190));
  const float gx = static_cast<float>(rng.uniform(-40, 40)), gy = static_cast<float>(rng.uniform(-40, 40));
  std::vector<float> rgb(static_cast<size_t>(3 * h * w));
  // The bank is 2^20 values; larger images wrap around it.
  const size_t mask = noise.size() - 1;
  size_t off = static_cast<size_t>(rng.integer(static_cast<int64_t>(noise.size())));
  for (int64_t c = 0; c < 3; ++c) {
    const float tint = static_cast<float>(rng.uniform(-10, 10));
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        rgb[static_cast<size_t>((c * h + y) * w + x)] =
            grey + tint + gx * (static_cast<float>(x) / static_cast<float>(w) - 0.5f) +
            gy * (static_cast<float>(y) / static_cast<float>(h) - 0.5f) + 14.0f * noise[off++ & mask];
      }
    }
  }
  // Objects, placed so that no two overlap by more than IoU 0.3.
  const int64_t n = o_.min_objects + rng.integer(o_.max_objects - o_.min_objects + 1);
  const float short_side = static_cast<float>(std::min(h, w));
  for (int64_t i = 0; i < n; ++i) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const float side = short_side * static_cast<float>(rng.uniform(o_.min_object, o_.max_object));
      const float aspect = static_cast<float>(std::exp(rng.uniform(std::log(0.6), std::log(1.6))));
      const float bw = std::min(static_cast<float>(w), std::round(side * std::sqrt(aspect)));
      const float bh = std::min(static_cast<float>(h), std::round(side / std::sqrt(aspect)));
      const float x1 = std::floor(static_cast<float>(rng.uniform(0, static_cast<double>(w) - bw + 1)));
      const float y1 = std::floor(static_cast<float>(rng.uniform(0, static_cast<double>(h) - bh + 1)));
      const Box b{x1, y1, std::min(x1 + bw, static_cast<float>(w)), std::min(y1 + bh, static_cast<float>(h))};
      if (b.width() < 2 || b.height() < 2) continue;
      bool clear = true;
      for (const auto& o : img.objects) clear = clear && iou(o.box, b) <= 0.3f;
      if (!clear) continue;
      const auto cls = static_cast<int32_t>(rng.integer(o_.classes));
      img.objects.push_back({b, cls + 1, false});
      break;
    }
  }
  for (const auto& o : img.objects) {
    const int shape = (o.label - 1) / static_cast<int>(kColours.size());
    std::array<float, 3> colour = kColours[static_cast<size_t>(o.label - 1) % kColours.size()];
    for (auto& v : colour) v += static_cast<float>(rng.uniform(-15, 15));
    const auto bx1 = static_cast<int64_t>(o.box.x1), by1 = static_cast<int64_t>(o.box.y1);
    const auto bx2 = static_cast<int64_t>(o.box.x2), by2 = static_cast<int64_t>(o.box.y2);
    for (int64_t y = by1; y < by2; ++y) {
      const float v = (static_cast<float>(y - by1) + 0.5f) / static_cast<float>(by2 - by1);
      for (int64_t x = bx1; x < bx2; ++x) {
        const float u = (static_cast<float>(x - bx1) + 0.5f) / static_cast<float>(bx2 - bx1);
        if (!inside(shape, u, v)) continue;
        for (int64_t c = 0; c < 3; ++c) {
          rgb[static_cast<size_t>((c * h + y) * w + x)] = colour[static_cast<size_t>(c)] + 10.0f * noise[off++ & mask];
        }
      }
    }
  }
  img.pixels.resize(rgb.size());
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < h * w; ++i) {
      const auto k = static_cast<size_t>(c * h * w + i);
      img.pixels[k] = normalise(std::clamp(rgb[k], 0.0f, 255.0f), static_cast<int>(c));
    }
  }
  return img;
}

// ---------------------------------------------------------------- JPEG, XML, resize

RgbImage read_jpeg(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  RgbImage img;
  char message[JMSG_LENGTH_MAX] = {0};
  const bool ok = decode_jpeg(f, &img, message);
  std::fclose(f);
  if (!ok) throw std::runtime_error(path + ": not a readable JPEG (" + message + ")");
  return img;
}

std::vector<ObjectBox> parse_voc_annotation(const std::string& xml, const std::string& where) {
  const XmlNode root = XmlParser(xml, where).parse_document();
  if (root.name != "annotation")
    throw std::runtime_error(where + ": root element is <" + root.name + ">, not <annotation>");
  float width = 0, height = 0;
  if (const XmlNode* size = root.child("size")) {
    width = number(size->child("width"), "width", where);
    height = number(size->child("height"), "height", where);
  }
  const auto& names = voc_classes();
  std::vector<ObjectBox> out;
  for (const auto& obj : root.children) {
    if (obj.name != "object") continue;
    const XmlNode* name = obj.child("name");
    if (!name) throw std::runtime_error(where + ": <object> without <name>");
    const auto it = std::find(names.begin(), names.end(), name->text);
    if (it == names.end())
      throw std::runtime_error(where + ": unknown class '" + name->text + "' (not one of VOC's 20)");
    const XmlNode* bb = obj.child("bndbox");
    if (!bb) throw std::runtime_error(where + ": object '" + name->text + "' without <bndbox>");
    ObjectBox o;
    o.label = static_cast<int32_t>(it - names.begin()) + 1;
    const XmlNode* diff = obj.child("difficult");
    o.difficult = diff && !diff->text.empty() && diff->text != "0";
    // 1-based inclusive pixel indices -> continuous coordinates.
    o.box = {number(bb->child("xmin"), "xmin", where) - 1.0f, number(bb->child("ymin"), "ymin", where) - 1.0f,
             number(bb->child("xmax"), "xmax", where), number(bb->child("ymax"), "ymax", where)};
    if (width > 0 && height > 0) {
      o.box.x1 = std::clamp(o.box.x1, 0.0f, width);
      o.box.x2 = std::clamp(o.box.x2, 0.0f, width);
      o.box.y1 = std::clamp(o.box.y1, 0.0f, height);
      o.box.y2 = std::clamp(o.box.y2, 0.0f, height);
    }
    if (!(o.box.x2 > o.box.x1) || !(o.box.y2 > o.box.y1)) {
      throw std::runtime_error(where + ": empty box for '" + name->text + "'");
    }
    out.push_back(o);
  }
  return out;
}

float resize_scale(int64_t height, int64_t width, int64_t short_side, int64_t max_side) {
  const auto s = static_cast<float>(std::min(height, width)), l = static_cast<float>(std::max(height, width));
  float scale = static_cast<float>(short_side) / s;
  if (std::round(scale * l) > static_cast<float>(max_side)) scale = static_cast<float>(max_side) / l;
  return scale;
}

DetectionImage to_detection_image(const RgbImage& img, std::vector<ObjectBox> objects, int64_t short_side,
                                  int64_t max_side, bool flip) {
  if (img.width <= 0 || img.height <= 0) throw std::invalid_argument("to_detection_image: empty image");
  const float scale = resize_scale(img.height, img.width, short_side, max_side);
  DetectionImage out;
  out.scale = scale;
  out.height = std::max<int64_t>(1, std::llround(static_cast<double>(img.height) * scale));
  out.width = std::max<int64_t>(1, std::llround(static_cast<double>(img.width) * scale));
  const int64_t h = out.height, w = out.width;
  out.pixels.resize(static_cast<size_t>(3 * h * w));
  const float sy = static_cast<float>(img.height) / static_cast<float>(h);
  const float sx = static_cast<float>(img.width) / static_cast<float>(w);
  for (int64_t y = 0; y < h; ++y) {
    // Pixel centres map onto pixel centres (half-pixel convention).
    const float fy = std::clamp((static_cast<float>(y) + 0.5f) * sy - 0.5f, 0.0f, static_cast<float>(img.height - 1));
    const auto y0 = static_cast<int64_t>(fy);
    const int64_t y1 = std::min(y0 + 1, img.height - 1);
    const float ly = fy - static_cast<float>(y0);
    for (int64_t x = 0; x < w; ++x) {
      const float fx = std::clamp((static_cast<float>(x) + 0.5f) * sx - 0.5f, 0.0f, static_cast<float>(img.width - 1));
      const auto x0 = static_cast<int64_t>(fx);
      const int64_t x1 = std::min(x0 + 1, img.width - 1);
      const float lx = fx - static_cast<float>(x0);
      const int64_t ox = flip ? w - 1 - x : x;
      for (int c = 0; c < 3; ++c) {
        auto px = [&](int64_t yy, int64_t xx) {
          return static_cast<float>(img.rgb[static_cast<size_t>((yy * img.width + xx) * 3 + c)]);
        };
        const float v =
            (1 - ly) * ((1 - lx) * px(y0, x0) + lx * px(y0, x1)) + ly * ((1 - lx) * px(y1, x0) + lx * px(y1, x1));
        out.pixels[static_cast<size_t>((c * h + y) * w + ox)] = normalise(v, c);
      }
    }
  }
  for (auto& o : objects) {
    Box b{o.box.x1 * scale, o.box.y1 * scale, o.box.x2 * scale, o.box.y2 * scale};
    if (flip) b = {static_cast<float>(w) - b.x2, b.y1, static_cast<float>(w) - b.x1, b.y2};
    o.box = b;
  }
  out.objects = std::move(objects);
  return out;
}

// ---------------------------------------------------------------- VOC

namespace {

// What a VOC-style folder must hold; empty when it does.
std::string voc_layout_problem(const fs::path& dir, const VocOptions& o) {
  if (!fs::is_directory(dir)) return "no such folder";
  for (const char* sub : {"JPEGImages", "Annotations"}) {
    if (!fs::is_directory(dir / sub)) return std::string("missing ") + sub + "/";
  }
  for (const auto& split : {o.train_split, o.heldout_split}) {
    if (!fs::is_regular_file(dir / "ImageSets" / "Main" / (split + ".txt")))
      return "missing ImageSets/Main/" + split + ".txt";
  }
  return "";
}

std::string voc_problem_message(const std::string& dir, const std::string& problem) {
  std::string msg = "'" + dir + "' is not a Pascal VOC folder (" + problem +
                    "; expected JPEGImages/, Annotations/ and ImageSets/Main/train.txt, val.txt)";
  for (const char* year : {"VOC2007", "VOC2012"}) {
    if (fs::is_directory(fs::path(dir) / year)) msg += "; did you mean " + (fs::path(dir) / year).string() + "?";
  }
  return msg;
}

}  // namespace

VocDetection::VocDetection(const std::string& directory, const VocOptions& o, uint64_t seed, DataShard shard)
    : dir_(directory), o_(o), rng_(seed ^ 0x0c0ffee) {
  check_shard(shard, "Pascal VOC");
  const std::string problem = voc_layout_problem(dir_, o_);
  if (!problem.empty()) throw std::invalid_argument(voc_problem_message(dir_, problem));
  const fs::path sets = fs::path(dir_) / "ImageSets" / "Main";
  train_ids_ = read_ids(sets / (o_.train_split + ".txt"));
  heldout_ids_ = read_ids(sets / (o_.heldout_split + ".txt"));
  if (train_ids_.empty())
    throw std::invalid_argument(dir_ + ": ImageSets/Main/" + o_.train_split + ".txt lists no images");
  // This rank's images: i % world_size == rank of the list (all of it at world size 1).
  train_ids_ = take_shard(train_ids_, shard, dir_ + ": the images of ImageSets/Main/" + o_.train_split + ".txt");
  order_.resize(train_ids_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
}

const std::vector<std::string>& VocDetection::class_names() const { return voc_classes(); }

DetectionImage VocDetection::load(const std::string& id, bool flip) const {
  const fs::path dir(dir_);
  const fs::path xml = dir / "Annotations" / (id + ".xml");
  std::vector<ObjectBox> objects = parse_voc_annotation(read_text(xml), xml.string());
  const RgbImage rgb = read_jpeg((dir / "JPEGImages" / (id + ".jpg")).string());
  DetectionImage img = to_detection_image(rgb, std::move(objects), o_.short_side, o_.max_side, flip);
  img.id = id;
  return img;
}

DetectionImage VocDetection::next_train() {
  if (cursor_ == 0) {
    // Fisher-Yates with our generator: the same order on every machine.
    for (size_t i = order_.size(); i > 1; --i)
      std::swap(order_[i - 1], order_[static_cast<size_t>(rng_.integer(static_cast<int64_t>(i)))]);
  }
  const std::string& id = train_ids_[order_[cursor_]];
  const bool flip = o_.flip && rng_.uniform() < 0.5;
  if (++cursor_ == order_.size()) {
    cursor_ = 0;
    ++epoch_;
  }
  return load(id, flip);
}

std::optional<DetectionImage> VocDetection::heldout(int64_t index) {
  if (index < 0 || index >= heldout_size()) return std::nullopt;
  return load(heldout_ids_[static_cast<size_t>(index)], false);
}

// ---------------------------------------------------------------- batches

Batch make_detection_batch(const std::vector<DetectionImage>& images, engine::Device device) {
  if (images.empty()) throw std::invalid_argument("make_detection_batch: no images");
  int64_t h = 0, w = 0;
  std::vector<float> labels;
  for (const auto& im : images) {
    h = std::max(h, im.height);
    w = std::max(w, im.width);
    labels.insert(labels.end(), {static_cast<float>(im.height), static_cast<float>(im.width), im.scale,
                                 static_cast<float>(im.objects.size())});
    for (const auto& o : im.objects) {
      labels.insert(labels.end(),
                    {o.box.x1, o.box.y1, o.box.x2, o.box.y2, static_cast<float>(o.label), o.difficult ? 1.0f : 0.0f});
    }
  }
  const auto n = static_cast<int64_t>(images.size());
  engine::CategoryScope category(vocabulary::Category::inputs);
  Batch b;
  b.samples = n;
  const engine::Shape shape{n, 3, h, w};
  if (device.is_meta()) {
    b.inputs = Tensor::empty(shape, device);
    b.labels = Tensor::empty({static_cast<int64_t>(labels.size())}, device);
    return b;
  }
  // Assembled on the host, then handed over (a copy to the device where there is one).
  // Sized from the user's batch: checked, and refused with the bytes when larger than the machine.
  std::vector<float> in = engine::cpu::host_buffer<float>({n, 3, h, w}, "detection image batch");
  for (int64_t i = 0; i < n; ++i) {
    const auto& im = images[static_cast<size_t>(i)];
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < im.height; ++y) {
        const float* src = im.pixels.data() + (c * im.height + y) * im.width;
        std::copy(src, src + im.width, in.begin() + ((i * 3 + c) * h + y) * w);
      }
    }
  }
  b.inputs = Tensor::from_vector(shape, in, device);
  b.labels = Tensor::from_vector({static_cast<int64_t>(labels.size())}, labels, device);
  return b;
}

std::vector<ImageTargets> decode_detection_labels(const Tensor& labels) {
  const std::vector<float> v = labels.to_vector();
  std::vector<ImageTargets> out;
  size_t i = 0;
  while (i < v.size()) {
    if (i + 4 > v.size()) throw std::invalid_argument("detection labels: truncated image header");
    ImageTargets t;
    t.height = static_cast<int64_t>(v[i]);
    t.width = static_cast<int64_t>(v[i + 1]);
    t.scale = v[i + 2];
    const auto count = static_cast<size_t>(v[i + 3]);
    i += 4;
    if (i + 6 * count > v.size()) throw std::invalid_argument("detection labels: truncated object list");
    for (size_t k = 0; k < count; ++k, i += 6) {
      t.objects.push_back({{v[i], v[i + 1], v[i + 2], v[i + 3]}, static_cast<int32_t>(v[i + 4]), v[i + 5] != 0.0f});
    }
    out.push_back(std::move(t));
  }
  return out;
}

// ---------------------------------------------------------------- sources

namespace {
// The folder a spec names; empty for "synthetic".
std::string voc_dir_of(const std::string& spec) { return spec.starts_with("voc:") ? spec.substr(4) : spec; }
}  // namespace

void check_detection_source(const std::string& spec) {
  if (spec == "synthetic") return;
  const std::string dir = voc_dir_of(spec);
  if (dir.empty()) throw std::invalid_argument("--data voc: needs a folder (voc:DIR)");
  if (!spec.starts_with("voc:") && !fs::is_directory(dir)) {
    throw std::invalid_argument("unknown data source '" + spec + "' (synthetic, voc:DIR or a Pascal VOC folder)");
  }
  const std::string problem = voc_layout_problem(dir, VocOptions{});
  if (!problem.empty()) throw std::invalid_argument(voc_problem_message(dir, problem));
}

std::unique_ptr<DetectionSource> make_detection_source(const std::string& spec,
                                                       const SyntheticDetectionOptions& synthetic,
                                                       const VocOptions& voc, uint64_t seed, DataShard shard) {
  check_detection_source(spec);
  if (spec == "synthetic") return std::make_unique<SyntheticDetection>(synthetic, seed, shard);
  return std::make_unique<VocDetection>(voc_dir_of(spec), voc, seed, shard);
}

}  // namespace ts::workloads
