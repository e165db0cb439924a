#pragma once

namespace ts::cli {

// Exit codes of the trainscope command (docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitSpilled = 3;        // the run's results are whole, but in a side file: import it
inline constexpr int kExitInconclusive = 4;   // compare's gate could not judge (too few samples): not a pass
inline constexpr int kExitTimedOut = 5;       // bench collectives --timeout passed: the run failed, timed out
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

}  // namespace ts::cli
