#pragma once
// Physical layout of a tensor's storage. Shapes are always logical (N, C, H, W for images);
// the layout says how those elements sit in memory. Keeping activations in the layout the
// CPU primitives want (channel-blocked, e.g. oneDNN's nChw8c) from op to op avoids a reorder
// at every op, which is where framework CPU training loses time.
#include <cstdint>
#include <string>

namespace ts::engine {

struct Layout {
  enum class Kind : uint8_t {
    plain,            // row-major in the logical dimension order
    channels_last,    // 4-D only: N, H, W, C
    channel_blocked,  // 4-D only: N, ceil(C/b), H, W, b  (channels padded with zeros to b)
    // 4-D convolution weights [O, I, kh, kw] only, O and I whole multiples of b: O/b, I/b, kh, kw,
    // b (i), b (o); oneDNN's OIhw16i16o / OIhw8i8o. What the CPU convolutions read and write
    // their weights in: parameters kept so need no reorder per call (engine/cpu/conv.cpp).
    weights_blocked,
  };
  Kind kind = Kind::plain;
  int block = 0;  // channel block for channel_blocked and weights_blocked (8 on AVX2, 16 on AVX-512)

  static Layout plain() { return {}; }
  static Layout channels_last() { return {Kind::channels_last, 0}; }
  static Layout blocked(int b) { return {Kind::channel_blocked, b}; }
  static Layout weights_blocked(int b) { return {Kind::weights_blocked, b}; }
  bool is_plain() const { return kind == Kind::plain; }
  bool operator==(const Layout&) const = default;
  std::string str() const;
};

}  // namespace ts::engine
