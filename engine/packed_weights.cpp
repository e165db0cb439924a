#include "engine/packed_weights.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ts::engine {

namespace {

bool from_environment() {
  const char* v = std::getenv("TS_PACKED_WEIGHTS");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

std::atomic<bool>& flag() {
  static std::atomic<bool> on{from_environment()};
  return on;
}

}  // namespace

void set_packed_weights(bool on) { flag().store(on, std::memory_order_relaxed); }
bool packed_weights() { return flag().load(std::memory_order_relaxed); }

}  // namespace ts::engine
