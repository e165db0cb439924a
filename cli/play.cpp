#include "cli/play.h"

#include "cli/run_config.h"
#include "fmt/format.h"
#include "reports/number_format.h"
#include "reports/output_file.h"
#include "workloads/a3c/a3c.h"
#include "workloads/a3c/png.h"

namespace ts::cli {

std::string play_breakout(const PlayConfig& c) {
  if (c.steps < 1 || c.every < 1 || c.per_row < 1) throw UsageError("--steps, --every and --per-row must be positive");
  workloads::BreakoutConfig game;
  try {
    game = workloads::a3c_config(c.preset).game;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  // A harmful --out is refused before the game is played.
  reports::OutputFile out(c.out, {}, c.force ? reports::Replace::anything : reports::Replace::ours_only);
  const workloads::EpisodeFrames e =
      workloads::play_random_episode(game, c.seed, c.seed ^ 0x9e3779b9ULL, c.steps, c.every);
  int width = 0, height = 0;
  const auto image = workloads::frame_grid(e.frames, c.per_row, &width, &height);
  out.write(workloads::encode_png_gray(width, height, image));
  out.commit();
  return fmt::format("{}: {} ({}x{} pixels) of {}, score {} ({} game, seed {})", c.out.string(),
                     reports::counted(static_cast<int64_t>(e.frames.size()), "frame"), width, height,
                     reports::counted(e.steps, "step"), e.score, c.preset, c.seed);
}

}  // namespace ts::cli
