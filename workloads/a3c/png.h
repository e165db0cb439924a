#pragma once
// A minimal PNG writer (8-bit grayscale, no interlacing, filter 0 on every row), with zlib for
// the compressed stream and the CRCs: enough to look at Breakout episodes.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace ts::workloads {

// The PNG file's bytes for a width x height row-major grayscale image.
std::vector<uint8_t> encode_png_gray(int width, int height, const std::vector<uint8_t>& pixels);
// Writes it to `path`; throws std::runtime_error naming the path when that fails.
void write_png_gray(const std::filesystem::path& path, int width, int height, const std::vector<uint8_t>& pixels);

}  // namespace ts::workloads
