#include "cli/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include "cli/console.h"
#include "fmt/format.h"
#include "reports/number_format.h"
#include "vocabulary/clock.h"

namespace ts::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(std::string label, int64_t total, std::string rate_unit, FILE* out)
    : label_(std::move(label)),
      total_(total),
      rate_unit_(std::move(rate_unit)),
      out_(out),
      tty_(isatty(fileno(out)) != 0),
      start_ns_(vocabulary::now_ns()) {}

void Progress::update(int64_t done, double rate, bool warmup) {
  const int64_t now = vocabulary::now_ns();
  const double elapsed = static_cast<double>(now - start_ns_) * 1e-9;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : NAN;
  const char* phase = warmup ? " (warm-up)" : "";
  if (tty_) {
    constexpr int kWidth = 28;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : 0;
    say(out_, "\r{} [{}{}] {}/{} it  {:.1f} {}  ETA {}{}\x1b[K", label_, std::string(static_cast<size_t>(filled), '#'),
        std::string(static_cast<size_t>(kWidth - filled), '.'), done, total_, rate, rate_unit_, format_duration(eta),
        phase);
    std::fflush(out_);
    drawn_ = true;
    return;
  }
  // Not a terminal: one line every 5 s, and the last iteration.
  if (done == total_ || now - last_print_ns_ >= 5'000'000'000LL || last_print_ns_ == 0) {
    say(out_, "{}: {}/{} {}, {:.1f} {}, ETA {}{}\n", label_, done, total_, reports::plural(total_, "iteration"), rate,
        rate_unit_, format_duration(eta), phase);
    std::fflush(out_);
    last_print_ns_ = now;
  }
}

void Progress::finish(const std::string& status) {
  const double elapsed = static_cast<double>(vocabulary::now_ns() - start_ns_) * 1e-9;
  if (tty_ && drawn_) say(out_, "\r\x1b[K");
  say(out_, "{}: {} in {}\n", label_, status, format_duration(elapsed));
  std::fflush(out_);
}

CountProgress::CountProgress(std::string label, std::string noun, FILE* out)
    : label_(std::move(label)), noun_(std::move(noun)), out_(out), tty_(isatty(fileno(out)) != 0) {}

void CountProgress::update(int64_t done, int64_t total) {
  done_ = done;
  total_ = total;
  updated_ = true;
  const int64_t now = vocabulary::now_ns();
  if (tty_) {
    print("\r", "\x1b[K");
  } else if (now - last_print_ns_ >= 5'000'000'000LL && done < total) {  // the last count is finish()'s
    print("", "\n");
    last_print_ns_ = now;
  }
}

void CountProgress::finish() {
  if (updated_) print(tty_ ? "\r" : "", tty_ ? "\x1b[K\n" : "\n");
}

void CountProgress::print(const char* lead, const char* end) {
  say(out_, "{}{} {}/{} {}{}", lead, label_, reports::with_commas(done_), reports::with_commas(total_),
      reports::plural(total_, noun_), end);
  std::fflush(out_);
}

StageProgress::StageProgress(std::string label, FILE* out)
    : label_(std::move(label)), out_(out), tty_(isatty(fileno(out)) != 0), clock_([this] { keep_time(); }) {}

StageProgress::~StageProgress() {
  {
    std::unique_lock lock(mutex_);
    end_locked(lock);
    stopping_ = true;
  }
  wake_.notify_all();
  clock_.join();
}

void StageProgress::begin(const std::string& what) {
  {
    std::unique_lock lock(mutex_);
    end_locked(lock);
    stage_ = what;
    stage_start_ns_ = vocabulary::now_ns();
  }
  wake_.notify_all();
}

void StageProgress::end_locked(std::unique_lock<std::mutex>&) {
  if (stage_.empty()) return;
  if (printed_) {
    const double took = static_cast<double>(vocabulary::now_ns() - stage_start_ns_) * 1e-9;
    say(out_, "{}{}: {}: took {}\n", tty_ ? "\r\x1b[K" : "", label_, stage_, format_duration(took));
    std::fflush(out_);
  }
  stage_.clear();
  printed_ = false;
}

void StageProgress::keep_time() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Asleep between stages (through the iterations: nothing wakes beside the measured work).
    if (stage_.empty()) {
      wake_.wait(lock, [this] { return stopping_ || !stage_.empty(); });
      continue;
    }
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (stage_.empty()) continue;
    const int64_t now = vocabulary::now_ns();
    const double elapsed = static_cast<double>(now - stage_start_ns_) * 1e-9;
    if (elapsed < kStageQuietSeconds) continue;
    const int64_t every = tty_ ? 1'000'000'000LL : 5'000'000'000LL;
    if (printed_ && now - last_print_ns_ < every) continue;
    say(out_, "{}{}: {} ({}){}", tty_ ? "\r" : "", label_, stage_, format_duration(elapsed), tty_ ? "\x1b[K" : "\n");
    std::fflush(out_);
    printed_ = true;
    last_print_ns_ = now;
  }
}

}  // namespace ts::cli
