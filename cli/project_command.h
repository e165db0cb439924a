#pragma once
// `trainscope project RUN --ranks N --link RATE | --sweep RUN [knobs]`: what N ranks would make of
// a stored one-rank run (projection/; docs/projection.md), stored as a projection; and
// `trainscope projections`: the error ledger, every projection set against the run it projects.
#include <cstdint>
#include <filesystem>
#include <string>

namespace ts::cli {

struct ProjectRequest {
  std::filesystem::path db = "results/trainscope.db";
  int64_t run = 0;
  int64_t ranks = 2;
  std::string link;   // a rate ("1gbit"): the newest sweep measured at about it, else nominal
  int64_t sweep = 0;  // a collectives benchmark run to fit the link to
  std::string strategy = "allreduce";
  double bucket_mb = 25;
  bool no_overlap = false;
  std::string bucket_order = "arrival";
  bool priority = false;
  double partition_mb = 4;
  bool no_cross_barrier = false;  // with priority: the backward's end waits for every bucket
  double chunk_mb = 1;
  std::string ps_mode;     // sync | async | bounded | eager (vocabulary/ps_mode.h); "": sync, or bounded with staleness
  int64_t staleness = -1;  // bounded: pushes ahead of the slowest; -1: not given (0)
  double cores_per_rank = 0;  // 0: the source's threads and one more
  int64_t against = 0;        // a measured multi-rank run: the projection's error against it is stored
  bool json = false;
  std::string command_line;
};
// Prints the projection; returns the exit code. UsageError (exit 2, nothing written) for a run that
// cannot be projected, a link that cannot be had, knobs out of range.
int execute_project(const ProjectRequest& request);

// The ledger as a table (or JSON) with the median and 90th percentile of |error|.
int execute_projections(const std::filesystem::path& db, bool json);

// Rank 0 of a multi-rank run, once it is stored: its own projection and error, where the db holds
// a matching one-rank run and sweep (projection::project_measured). One line on stderr where it
// failed; nothing where no inputs match (show says why).
void store_own_projection(const std::filesystem::path& db, int64_t run, const std::string& command_line);

}  // namespace ts::cli
