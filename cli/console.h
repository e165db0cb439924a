#pragma once
// The command's own output (summaries, progress, notices) on stdout and stderr, which a run never
// depends on: a terminal that closed, a pipe whose reader left (`| head -1`) or a log on a full
// disk stops the output, not the run (issue 39). main() ignores SIGPIPE, so such a write fails
// with an error instead of killing the process; say() takes the failure, remembers that the
// stream is gone and writes nothing more to it, and never throws.
#include <cstdio>
#include <string_view>
#include <utility>

#include "fmt/format.h"

namespace ts::cli {

// Writes `text` to `out` (stdout or stderr) unless an earlier write there failed; flushes
// stderr. Returns whether it was written.
bool say_text(std::FILE* out, std::string_view text) noexcept;

template <typename... Args>
bool say(std::FILE* out, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    return say_text(out, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // formatting itself (memory): the output is what is lost, never the run
    return false;
  }
}

template <typename... Args>
bool say(fmt::format_string<Args...> format, Args&&... args) noexcept {
  return say(stdout, format, std::forward<Args>(args)...);
}

// Whether a write to `out` has failed (the reader left, the disk is full): no more is written.
bool console_gone(std::FILE* out) noexcept;

// For main(), before any thread starts: SIGPIPE ignored (a write to a pipe without a reader
// then fails with EPIPE, which say() takes, instead of ending the process).
void detach_from_console_signals();

}  // namespace ts::cli
