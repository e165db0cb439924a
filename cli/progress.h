#pragma once
// Progress of a long run: a redrawn bar on a terminal, plain lines (every few seconds)
// otherwise, so logs stay readable.
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace ts::cli {

class Progress {
 public:
  // `rate_unit`: what update()'s rate counts ("images/s").
  Progress(std::string label, int64_t total, std::string rate_unit = "samples/s", FILE* out = stderr);
  // `done` iterations finished; `rate`, the last one's samples per second.
  void update(int64_t done, double rate, bool warmup);
  void finish(const std::string& status);

 private:
  std::string label_;
  int64_t total_;
  std::string rate_unit_;
  FILE* out_;
  bool tty_;
  int64_t start_ns_;
  int64_t last_print_ns_ = 0;
  bool drawn_ = false;
};

// Progress through a count of things (`export`'s events): a redrawn line on a terminal, a plain
// line every 5 s otherwise. finish() leaves the final count on a line of its own either way, so
// what comes next (the shell's prompt) starts on a fresh line.
class CountProgress {
 public:
  // Lines read "`label` done/total `noun`s".
  CountProgress(std::string label, std::string noun, FILE* out = stderr);
  void update(int64_t done, int64_t total);
  void finish();

 private:
  void print(const char* lead, const char* end);

  std::string label_;
  std::string noun_;
  FILE* out_;
  bool tty_;
  int64_t done_ = 0, total_ = 0;
  int64_t last_print_ns_ = 0;
  bool updated_ = false;
};

// A wait with no count to show (building the model, the held-out evaluation, the final write):
// silent when it ends within kStageQuietSeconds, else a line that says what is going on and how
// long it has taken (redrawn each second on a terminal, every 5 s otherwise), and how long it
// took at its end. A thread of its own keeps time, since the work itself cannot report.
inline constexpr double kStageQuietSeconds = 2.0;
class StageProgress {
 public:
  explicit StageProgress(std::string label, FILE* out = stderr);
  ~StageProgress();  // ends the stage in progress
  StageProgress(const StageProgress&) = delete;
  StageProgress& operator=(const StageProgress&) = delete;
  // Ends the stage in progress and starts `what` ("evaluating on 8 held-out batches"); "" only ends.
  void begin(const std::string& what);

 private:
  void keep_time();
  void end_locked(std::unique_lock<std::mutex>& lock);

  std::string label_;
  FILE* out_;
  bool tty_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string stage_;  // "" between stages
  int64_t stage_start_ns_ = 0, last_print_ns_ = 0;
  bool printed_ = false, stopping_ = false;
  std::thread clock_;
};

std::string format_duration(double seconds);

}  // namespace ts::cli
