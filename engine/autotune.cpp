#include "engine/autotune.h"

#include <atomic>

namespace ts::engine {

namespace {
std::atomic<bool> g_autotune{true};
}  // namespace

void set_autotune(bool on) { g_autotune.store(on, std::memory_order_relaxed); }
bool autotune() { return g_autotune.load(std::memory_order_relaxed); }

}  // namespace ts::engine
