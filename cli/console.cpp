#include "cli/console.h"

#include <csignal>

#include <atomic>

namespace ts::cli {

namespace {
std::atomic<bool> g_stdout_gone{false}, g_stderr_gone{false};

std::atomic<bool>* gone_flag(std::FILE* out) {
  if (out == stdout) return &g_stdout_gone;
  if (out == stderr) return &g_stderr_gone;
  return nullptr;
}
}  // namespace

bool say_text(std::FILE* out, std::string_view text) noexcept {
  std::atomic<bool>* gone = gone_flag(out);
  if (gone && gone->load()) return false;
  const bool ok =
      std::fwrite(text.data(), 1, text.size(), out) == text.size() && (out != stderr || std::fflush(out) == 0);
  if (!ok) {
    if (gone) gone->store(true);
    std::clearerr(out);
  }
  return ok;
}

bool console_gone(std::FILE* out) noexcept {
  const std::atomic<bool>* gone = gone_flag(out);
  return gone && gone->load();
}

void detach_from_console_signals() { std::signal(SIGPIPE, SIG_IGN); }

}  // namespace ts::cli
