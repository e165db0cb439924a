#include "profiler/event.h"

namespace ts::profiler {

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::run: return "run";
    case EventKind::iteration: return "iteration";
    case EventKind::phase: return "phase";
    case EventKind::op: return "op";
    case EventKind::marker: return "marker";
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

}  // namespace ts::profiler
