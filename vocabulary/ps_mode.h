#pragma once
// How a parameter server's workers and servers keep step (docs/distributed.md, "Parameter
// server"): the servers run it (distributed/ps/) and a projection models it (projection/), so it
// is defined here, once.
// - sync: a key's update waits for every worker's gradient of that step (their mean), and a
//   worker's next forward reads the new value (as all-reduce data parallelism does);
// - async: every push is applied as it arrives; the worker reads the newest value after its push;
// - bounded: async, but no worker runs more than `staleness` steps ahead of the slowest
//   (stale synchronous parallel, Ho et al. 2013): a read waits while it would be;
// - eager: async, and the servers send each key's new value to every worker as soon as it is
//   updated, without being asked; a worker's forward takes the newest value that has arrived,
//   waiting only if it does not yet reflect the worker's push before last (so the update and
//   pull of one step overlap with the next step's compute); a gradient's learning rate is scaled
//   down by its observed staleness, 1 / (1 + s).
#include <optional>
#include <string_view>

namespace ts::vocabulary {

enum class PsMode { sync, async, bounded, eager };

constexpr std::string_view to_string(PsMode mode) {
  switch (mode) {
    case PsMode::sync: return "sync";
    case PsMode::async: return "async";
    case PsMode::bounded: return "bounded";
    case PsMode::eager: return "eager";
  }
  return "sync";
}

constexpr std::optional<PsMode> parse_ps_mode(std::string_view text) {
  for (const PsMode m : {PsMode::sync, PsMode::async, PsMode::bounded, PsMode::eager}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace ts::vocabulary
