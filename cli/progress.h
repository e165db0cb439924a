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

std::string format_duration(double seconds);

}  // namespace ts::cli
