#pragma once
// What a parameter-server run is asked for (docs/distributed.md, "Parameter server"): how many
// server shards and where they run, how workers and servers keep step (the consistency mode),
// and the scheduling knobs.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ts::distributed::ps {

// How a server applies the workers' gradients and when a worker may read.
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
enum class PsMode { sync, async, bounded, eager };
std::string_view to_string(PsMode mode);
std::optional<PsMode> parse_ps_mode(std::string_view text);

struct PsOptions {
  int servers = 1;           // server shards
  bool dedicated = false;    // on ranks of their own (after the workers), not threads of workers 0..S-1
  std::string server_hosts;  // dedicated servers' hosts, as --hosts (h1:1,h2:1); empty: the launcher's order
  PsMode mode = PsMode::sync;
  int64_t staleness = 0;  // bounded: the most steps a worker may run ahead of the slowest
  bool priority = false;  // pushes and pulls of the front layers' keys first (P3)
  double chunk_mb = 1.0;  // tensors larger than this are cut into chunks (keys) of this size, MiB
};

}  // namespace ts::distributed::ps
