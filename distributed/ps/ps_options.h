#pragma once
// What a parameter-server run is asked for (docs/distributed.md, "Parameter server"): how many
// server shards and where they run, how workers and servers keep step (the consistency mode),
// and the scheduling knobs.
#include <cstdint>
#include <string>

#include "vocabulary/ps_mode.h"

namespace ts::distributed::ps {

// The consistency mode (vocabulary/ps_mode.h: what each one means).
using vocabulary::parse_ps_mode;
using vocabulary::PsMode;
using vocabulary::to_string;

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
