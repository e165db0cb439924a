#pragma once
// Which ranks of a parameter-server job are workers and which hold server shards: workers are
// ranks 0..W-1; server s is a thread of worker s (co-located) or rank W + s (dedicated, started
// after the workers by the launcher).
#include <stdexcept>
#include <string>

#include "distributed/ps/ps_options.h"

namespace ts::distributed::ps {

struct Topology {
  int workers = 1;
  int servers = 1;
  bool dedicated = false;

  // Throws std::invalid_argument when the job's ranks cannot hold this placement.
  static Topology of(int world_size, const PsOptions& o) {
    Topology t;
    t.servers = o.servers;
    t.dedicated = o.dedicated;
    t.workers = o.dedicated ? world_size - o.servers : world_size;
    if (o.servers < 1) throw std::invalid_argument("a parameter server needs at least one server");
    if (t.workers < 1) {
      throw std::invalid_argument(std::to_string(world_size) + " ranks cannot hold " + std::to_string(o.servers) +
                                  " dedicated servers and a worker");
    }
    if (!o.dedicated && o.servers > t.workers) {
      throw std::invalid_argument(std::to_string(o.servers) + " co-located servers need as many workers (there are " +
                                  std::to_string(t.workers) + ")");
    }
    return t;
  }
  int server_rank(int server) const { return dedicated ? workers + server : server; }
  bool is_worker(int rank) const { return rank < workers; }
  // The server shard `rank` holds, or -1.
  int server_of(int rank) const {
    if (dedicated) return rank >= workers ? rank - workers : -1;
    return rank < servers ? rank : -1;
  }
};

}  // namespace ts::distributed::ps
