#include "profiler/event.h"

namespace ts::profiler {

bool trace_order(const Event& a, const Event& b) {
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
  return a.thread < b.thread;
}

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::run: return "run";
    case EventKind::iteration: return "iteration";
    case EventKind::phase: return "phase";
    case EventKind::op: return "op";
    case EventKind::marker: return "marker";
    case EventKind::comm: return "comm";
    case EventKind::wait: return "wait";
  }
  return "unknown";
}

std::string_view to_string(Pass pass) {
  switch (pass) {
    case Pass::none: return "none";
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
  }
  return "unknown";
}

std::string_view to_string(WorkClass work) {
  switch (work) {
    case WorkClass::none: return "none";
    case WorkClass::compute: return "compute";
    case WorkClass::memory: return "memory";
    case WorkClass::reorder: return "reorder";
    case WorkClass::other: return "other";
  }
  return "unknown";
}

}  // namespace ts::profiler
