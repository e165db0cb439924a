#pragma once
// The event model: one flat, 40-byte record per traced range. Strings are interned ids.
#include <cstdint>
#include <string_view>

namespace ts::profiler {

// comm: a collective (dist/), on the thread that ran it; wait: a thread blocked on
// communication it needs (the wait for the gradients at the end of backward).
enum class EventKind : uint8_t { run, iteration, phase, op, marker, comm, wait };
enum class Pass : uint8_t { none, forward, backward };

std::string_view to_string(EventKind kind);
std::string_view to_string(Pass pass);

using StringId = uint32_t;  // 0 = the empty string

struct Event;
// The tracer's order: by start, then the longer first (an enclosing range before what it
// contains), then by thread.
bool trace_order(const Event& a, const Event& b);

struct Event {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  StringId name = 0;
  StringId layer = 0;  // owner (layer path) of an op event; 0 = none
  EventKind kind = EventKind::marker;
  Pass pass = Pass::none;
  int32_t iteration = -1;  // -1 = before the first iteration
  uint32_t thread = 0;     // small sequential id given by the tracer
};

}  // namespace ts::profiler
