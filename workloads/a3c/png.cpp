#include "workloads/a3c/png.h"

#include <zlib.h>

#include <fstream>
#include <stdexcept>
#include <string>

namespace ts::workloads {

namespace {

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// length, type, data, CRC-32 of type + data (PNG spec, section 5.3).
void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), out.data() + start, static_cast<uInt>(out.size() - start));
  put32(out, static_cast<uint32_t>(crc));
}

}  // namespace

std::vector<uint8_t> encode_png_gray(int width, int height, const std::vector<uint8_t>& pixels) {
  if (width < 1 || height < 1 || pixels.size() != static_cast<size_t>(width) * static_cast<size_t>(height)) {
    throw std::invalid_argument("encode_png_gray: " + std::to_string(pixels.size()) + " pixels for " +
                                std::to_string(width) + "x" + std::to_string(height));
  }
  const auto w = static_cast<size_t>(width);
  std::vector<uint8_t> raw;  // each row: filter type 0 (none), then the row
  raw.reserve((w + 1) * static_cast<size_t>(height));
  for (size_t y = 0; y < static_cast<size_t>(height); ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + static_cast<std::ptrdiff_t>(y * w),
               pixels.begin() + static_cast<std::ptrdiff_t>((y + 1) * w));
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION) != Z_OK) {
    throw std::runtime_error("encode_png_gray: zlib compression failed");
  }
  packed.resize(packed_size);

  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, static_cast<uint32_t>(width));
  put32(ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // 8 bits, grayscale, deflate, filter set 0, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", packed);
  // Who made it (PNG's registered "Software" keyword): how trainscope knows a file it may replace.
  constexpr char kSoftware[] = "Software\0trainscope";  // keyword, NUL, text
  const std::string_view software(kSoftware, sizeof kSoftware - 1);
  chunk(out, "tEXt", std::vector<uint8_t>(software.begin(), software.end()));
  chunk(out, "IEND", {});
  return out;
}

void write_png_gray(const std::filesystem::path& path, int width, int height, const std::vector<uint8_t>& pixels) {
  const std::vector<uint8_t> bytes = encode_png_gray(width, height, pixels);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace ts::workloads
