// The viewer's timeline at scale (issue 17's speed targets): open a run of millions of events and
// draw the whole run (< 1 s), every zoom or pan step at any zoom (< 50 ms), the process's memory
// (< 1 GiB). A plain program, not Google Benchmark: each figure is one interaction timed as a user
// feels it, from the call to the window painted with the answer.
//
//   timeline_view_bench --make DB [--events N]   writes a synthetic traced run of N events (10M)
//   timeline_view_bench DB [RUN [SHOTS_DIR]]      measures the viewer on it (offscreen is fine),
//                                                 saving images of three zooms in SHOTS_DIR
#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "store/writer.h"
#include "viewer/timeline_view.h"

namespace {

// A data-parallel training trace: per rank a training thread (run > iteration > forward and
// backward > ops, a third of them with two nested kernels' worth of children) and a
// communication thread with all-reduces overlapping backward. Written in chunks, so memory
// stays flat whatever N is.
void make_run(const std::string& db, int64_t target_events) {
  QElapsedTimer timer;
  timer.start();
  ts::store::Writer w(db);
  ts::store::RunInfo info;
  info.workload = "synthetic";
  info.preset = "timeline-bench";
  info.device = "cpu";
  info.started_at = "2026-11-24T00:00:00Z";
  info.command_line = fmt::format("timeline_view_bench --make {} --events {}", db, target_events);
  const int64_t run = w.begin_run(info);
  std::mt19937_64 rng(42);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* ops[] = {"conv2d", "batch_norm", "relu", "matmul", "add", "max_pool", "softmax", "layer_norm"};
  constexpr int kRanks = 2;
  std::vector<int64_t> clock(kRanks, 1'000'000'000);
  std::vector<ts::store::EventRow> rows;
  std::vector<ts::store::IterationRow> iterations;
  std::vector<ts::store::PhaseRow> phases;
  int64_t written = 0;
  auto flush = [&] {
    w.add_events(run, rows);
    w.add_iterations(run, iterations);
    w.add_phases(run, phases);
    written += static_cast<int64_t>(rows.size());
    rows.clear();
    iterations.clear();
    phases.clear();
    std::fprintf(stderr, "\rwritten %lld of %lld events", static_cast<long long>(written),
                 static_cast<long long>(target_events));
  };
  std::vector<int64_t> run_start = clock;
  for (int64_t it = 0; written + static_cast<int64_t>(rows.size()) < target_events; ++it) {
    for (int rank = 0; rank < kRanks; ++rank) {
      int64_t& t = clock[rank];
      const int64_t it_start = t;
      for (const char* phase : {"forward", "backward"}) {
        const int64_t ph_start = t;
        for (int k = 0; k < 120; ++k) {
          t += between(0, 3'000);
          const int64_t d = between(5'000, 400'000);
          const std::string layer = fmt::format("block{}.layer{}", k / 10, k % 10);
          rows.push_back({t, t + d, ops[k % 8], layer, "op", phase, it, 0, rank});
          if (k % 3 == 0) {
            rows.push_back({t + d / 10, t + d / 2, "im2col", layer, "op", phase, it, 0, rank});
            rows.push_back({t + d / 2 + 1, t + d - d / 10, "gemm", layer, "op", phase, it, 0, rank});
          }
          t += d;
        }
        rows.push_back({ph_start, t, phase, "", "phase", "none", it, 0, rank});
        phases.push_back({it, phase, ph_start, t, rank});
      }
      // All-reduces of the gradient buckets during the last part of backward.
      int64_t c = t - (t - it_start) / 4;
      for (int b = 0; b < 12; ++b) {
        const int64_t d = between(50'000, 900'000);
        rows.push_back({c, c + d, "all_reduce", "", "comm", "none", it, 1, rank});
        c += d + between(0, 20'000);
      }
      t = std::max(t, c) + between(10'000, 50'000);
      rows.push_back({it_start, t, "iteration", "", "iteration", "none", it, 0, rank});
      iterations.push_back({it, it < 2, it_start, t, 32, 1.0, rank});
    }
    if (rows.size() >= 1'000'000) flush();
  }
  for (int rank = 0; rank < kRanks; ++rank)
    rows.push_back({run_start[rank], clock[rank], "synthetic/timeline-bench", "", "run", "none", -1, 0, rank});
  flush();
  std::fprintf(stderr, "\n");
  const double write_s = static_cast<double>(timer.elapsed()) / 1e3;
  timer.restart();
  w.finish_run(run, ts::store::RunStatus::completed, "2026-11-24T00:10:00Z", "");  // builds the index
  std::printf("run %lld: %lld events written in %.1f s; level-of-detail index built at the final write in %.1f s\n",
              static_cast<long long>(run), static_cast<long long>(written), write_s,
              static_cast<double>(timer.elapsed()) / 1e3);
}

long memory_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  return -1;
}

struct Steps {
  std::vector<double> ms;
  std::string slowest;  // where the slowest step was, and how it split
  void add(double v, const ts::viewer::TimelineView& view) {
    if (ms.empty() || v > *std::max_element(ms.begin(), ms.end()))
      slowest = fmt::format("level {}, {} summaries + {} events; query {} ms, paint {} ms", view.window()->level,
                            view.window()->tiles.size(), view.window()->events.size(), view.last_query_ms(),
                            view.canvas()->last_paint_ms());
    ms.push_back(v);
  }
  std::string summary() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return fmt::format("{} steps, median {:.1f} ms, max {:.1f} ms ({})", v.size(), v[v.size() / 2], v.back(), slowest);
  }
};

// One interaction: from the call to the new window answered and painted.
double timed_step(ts::viewer::TimelineView& view, const std::function<void()>& act) {
  QElapsedTimer timer;
  timer.start();
  QSignalSpy ready(&view, &ts::viewer::TimelineView::window_ready);
  act();
  if (!ready.wait(10'000)) return 1e9;
  view.canvas()->repaint();
  return static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

int measure(const QString& db, qint64 run, const QString& shots) {
  ts::viewer::TimelineView view;
  view.resize(1600, 900);
  view.show();
  QElapsedTimer timer;
  timer.start();
  QSignalSpy loaded(&view, &ts::viewer::TimelineView::loaded);
  view.show_run(db, run);
  if (!loaded.wait(60'000)) {
    std::fprintf(stderr, "the run did not open\n");
    return 1;
  }
  view.canvas()->repaint();
  const double open_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  std::printf("open and draw the whole run: %.0f ms (window query %lld ms, paint %lld ms; %zu summaries, %zu events "
              "drawn; level %d)\n",
              open_ms, static_cast<long long>(view.last_query_ms()),
              static_cast<long long>(view.canvas()->last_paint_ms()), view.window()->tiles.size(),
              view.window()->events.size(), view.window()->level);

  auto shot = [&](const char* name) {
    if (!shots.isEmpty()) view.grab().save(shots + "/" + name);
  };
  shot("timeline_10m_whole.png");
  Steps zoom_in, zoom_out, pans;
  const int64_t mid = view.view_from() + (view.view_to() - view.view_from()) / 3;
  int deepest_level = 99;
  while (view.view_to() - view.view_from() > 5'000) {  // to 5 us across
    zoom_in.add(timed_step(view, [&] { view.zoom(2, mid); }), view);
    deepest_level = std::min(deepest_level, view.window()->level);
    if (zoom_in.ms.size() == 12) shot("timeline_10m_iteration.png");
    if (zoom_in.ms.size() == 19) shot("timeline_10m_ops.png");
    if (zoom_in.ms.size() % 4 == 0)  // pan at this zoom, both ways
      for (double f : {0.3, -0.3, 0.3}) pans.add(timed_step(view, [&] { view.pan(f); }), view);
  }
  for (size_t i = 0; i < zoom_in.ms.size(); ++i) zoom_out.add(timed_step(view, [&] { view.zoom(0.5, mid); }), view);
  pans.add(timed_step(view, [&] { view.show_all(); }), view);
  std::printf("zoom in  (x2 a step, whole run to 5 us, down to level %d): %s\n", deepest_level,
              zoom_in.summary().c_str());
  std::printf("zoom out (x2 a step): %s\n", zoom_out.summary().c_str());
  std::printf("pan (30%% of the view a step, at every 4th zoom; and Home): %s\n", pans.summary().c_str());
  std::printf("memory: VmHWM %ld MiB (peak resident), VmRSS %ld MiB now\n", memory_kib("VmHWM:") / 1024,
              memory_kib("VmRSS:") / 1024);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--make" && args.size() >= 2) {
    int64_t events = 10'000'000;
    if (args.size() >= 4 && args[2] == "--events") events = std::stoll(args[3]);
    make_run(args[1], events);
    return 0;
  }
  if (args.empty() || args[0].starts_with("--")) {
    std::fprintf(stderr,
                 "usage: timeline_view_bench --make DB [--events N] | timeline_view_bench DB [RUN [SHOTS_DIR]]\n");
    return 2;
  }
  QApplication app(argc, argv);
  return measure(QString::fromStdString(args[0]), args.size() > 1 ? std::stoll(args[1]) : 1,
                 args.size() > 2 ? QString::fromStdString(args[2]) : QString());
}
