#include "importers/pytorch_memory_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "importers/trace_records.h"

namespace ts::importers {

namespace {

constexpr size_t kCategories = std::size(kPytorchCategories);

[[noreturn]] void malformed(const std::filesystem::path& path, const std::string& why) {
  throw TraceError(
      TraceError::Kind::malformed,
      fmt::format("{}: not PyTorch's memory timeline ([times, sizes by category]): {}", path.string(), why));
}

}  // namespace

MemoryTimeline read_memory_timeline(const std::filesystem::path& path, double origin_us, size_t max_points) {
  std::ifstream in(path);
  if (!in) throw TraceError(TraceError::Kind::io, fmt::format("{}: cannot be read", path.string()));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_array() || j.size() != 2 || !j[0].is_array() || !j[1].is_array() || j[0].size() != j[1].size())
    malformed(path, "expected two arrays of the same length");
  const auto& times = j[0];
  const auto& sizes = j[1];
  MemoryTimeline out;
  out.times = static_cast<int64_t>(times.size());
  // Each time's live bytes per category (sizes' first entry is unused: PyTorch indexes from 1).
  const auto bytes_at = [&](size_t i) {
    const auto& s = sizes[i];
    if (!s.is_array() || s.size() != kCategories + 1)
      malformed(path, fmt::format("entry {} has no {} sizes", i, kCategories + 1));
    std::array<int64_t, kCategories> b{};
    for (size_t c = 0; c < kCategories; ++c) {
      if (!s[c + 1].is_number()) malformed(path, fmt::format("entry {} holds a size that is no number", i));
      b[c] = s[c + 1].get<int64_t>();
    }
    return b;
  };
  const auto total = [](const std::array<int64_t, kCategories>& b) {
    int64_t t = 0;
    for (const int64_t v : b) t += v;
    return t;
  };
  const auto t_ns = [&](size_t i) {
    if (!times[i].is_number()) malformed(path, fmt::format("time {} is no number", i));
    return static_cast<int64_t>(std::llround((times[i].get<double>() - origin_us) * 1000.0));
  };
  const size_t n = times.size();
  const size_t most = std::max<size_t>(max_points, 1);
  const size_t stretch = std::max<size_t>(1, (n + most - 1) / most);  // times per point kept
  for (size_t begin = 0; begin < n; begin += stretch) {
    size_t kept = begin;
    int64_t kept_total = -1;
    for (size_t i = begin; i < std::min(n, begin + stretch); ++i) {
      const int64_t t = total(bytes_at(i));
      if (t > kept_total) kept = i, kept_total = t;
      if (t > out.peak_bytes || out.peak.empty()) {
        out.peak_bytes = t;
        out.peak.clear();
        const auto b = bytes_at(i);
        for (size_t c = 0; c < kCategories; ++c)
          out.peak.push_back({kPytorchCategories[c].trainscope, b[c], t_ns(i), 0});
      }
    }
    const auto b = bytes_at(kept);
    for (size_t c = 0; c < kCategories; ++c)
      out.points.push_back({t_ns(kept), kPytorchCategories[c].trainscope, b[c], 0});
  }
  return out;
}

std::string category_mapping_text() {
  std::string s;
  for (const auto& m : kPytorchCategories)
    s += fmt::format("{}{} -> {}", s.empty() ? "" : ", ", m.pytorch, m.trainscope);
  return s + "; none -> comm";
}

}  // namespace ts::importers
