#pragma once
// The event model: one flat, 56-byte record per traced range. Strings are interned ids.
#include <cstdint>
#include <string_view>

namespace ts::profiler {

// comm: a collective (distributed/), on the thread that ran it; wait: a thread blocked on
// communication it needs (the wait for the gradients at the end of backward).
enum class EventKind : uint8_t { run, iteration, phase, op, marker, comm, wait };
enum class Pass : uint8_t { none, forward, backward };
// What limits an op, for the roofline (docs/formulas.md, "Roofline"): `compute` (convolutions
// and matrix products, counted in FLOPs against the machine's SGEMM peak), `memory` (element-wise,
// normalisation, pooling, softmax and loss, optimizer steps: counted in bytes against its copy
// bandwidth), `reorder` (layout conversions and copies: bytes moved), `other` (real work that is
// not modelled: CTC, RoI pooling). `none`: the op declared no work of its own, as an autograd
// node whose work is in the ops nested in it; its self time is the framework's overhead.
enum class WorkClass : uint8_t { none, compute, memory, reorder, other };
inline constexpr size_t kWorkClassCount = 5;

std::string_view to_string(EventKind kind);
std::string_view to_string(Pass pass);
std::string_view to_string(WorkClass work);

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
  // Op events: the work the op did itself (not the ops nested in it), as the op declared it.
  WorkClass work = WorkClass::none;
  int64_t flops = 0;
  int64_t bytes = 0;  // the least traffic: each input read once, each output written once
};

}  // namespace ts::profiler
