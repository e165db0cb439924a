#pragma once
// Progress of a long run: a redrawn bar on a terminal, plain lines (every few seconds)
// otherwise, so logs stay readable.
#include <cstdint>
#include <cstdio>
#include <string>

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

std::string format_duration(double seconds);

}  // namespace ts::cli
