#pragma once
// `trainscope play`: plays a3c's Breakout with uniformly random actions and writes what the
// agent sees (84x84 frames after frame skip) as a PNG strip, to look at the game.
#include <cstdint>
#include <filesystem>
#include <string>

namespace ts::cli {

struct PlayConfig {
  std::string preset = "full";  // whose game configuration (a3c's presets)
  uint64_t seed = 1;            // the game's seed (no-op start, serves)
  int64_t steps = 400;          // at most this many agent steps
  int64_t every = 4;            // keep every N-th frame
  int per_row = 10;             // frames per row of the strip
  std::filesystem::path out = "breakout.png";
  bool force = false;  // replace an existing file trainscope did not write
};

// Writes the strip; returns a one-line description. Bad input: UsageError.
std::string play_breakout(const PlayConfig& config);

}  // namespace ts::cli
