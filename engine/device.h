#pragma once
// Where a tensor lives. `meta` carries shapes only and allocates nothing, so the full presets
// can be built and counted on any machine.
#include <cstdint>
#include <string>
#include <string_view>

namespace ts::engine {

enum class DeviceType : uint8_t { cpu, meta, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device meta() { return {DeviceType::meta, 0}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_meta() const { return type == DeviceType::meta; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

// Parses "cpu", "meta", "cuda", "cuda:1"; throws std::invalid_argument otherwise.
Device parse_device(std::string_view);

}  // namespace ts::engine
