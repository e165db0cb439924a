// A 2 GB PyTorch profiler trace imported and opened in the viewer (issue 42: "a 2 GB trace must
// import in bounded memory (under 1 GiB RSS) and open in the viewer"). A plain program, not
// Google Benchmark: each figure is one step as a user lives it.
//
//   trace_import_bench [--bytes N] [--gzip] [--dir DIR] [--keep] [--trainscope BIN]
//       writes a synthetic Kineto trace of N bytes of JSON (bench/synthetic_kineto_trace.h;
//       default 2 * 10^9, or $TS_TRACE_BENCH_BYTES) into a fresh folder under DIR ($TMPDIR or
//       /tmp), runs `trainscope import-trace` on it as a child process, then opens the run in the
//       viewer's timeline (offscreen) in a second child; reports the import's time, MB/s,
//       records/s and peak RSS, the viewer's time to its first drawn window and peak RSS, and
//       checks: both peaks under 1 GiB, the run's rows as many as the generator wrote. Removes its
//       files (--keep: leaves them). Refuses (exit 77) when DIR has under 3x N bytes free.
//   trace_import_bench --generate FILE [--bytes N] [--gzip] [--seed S]
//       writes the trace alone.
//   trace_import_bench --open DB RUN
//       the viewer step alone (what the benchmark runs as its child).
// Exit: 0 the checks held, 1 one failed, 2 bad arguments, 77 not enough disk space.
#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/synthetic_kineto_trace.h"
#include "viewer/timeline_view.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kDefaultBytes = 2'000'000'000;
constexpr int64_t kRssLimitKib = 1024 * 1024;  // 1 GiB

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

long own_memory_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  return -1;
}

// --- the viewer step (a child of its own, so its peak RSS is its own) ---------------------------

int open_in_viewer(const QString& db, qint64 run) {
  ts::viewer::TimelineView view;
  view.resize(1600, 900);
  view.show();
  QElapsedTimer timer;
  timer.start();
  QSignalSpy loaded(&view, &ts::viewer::TimelineView::loaded);
  view.show_run(db, run);
  if (!loaded.wait(600'000)) {
    std::printf("viewer: the run did not open in 10 minutes\n");
    return 1;
  }
  view.canvas()->repaint();
  const double open_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  if (view.window() == nullptr) {
    std::printf("viewer: opened, but no window was drawn\n");
    return 1;
  }
  std::printf("viewer_open_ms %.0f\nviewer_open_query_ms %lld\nviewer_open_paint_ms %lld\nviewer_events %lld\n"
              "viewer_open_drawn %zu summaries, %zu events, level %d\n",
              open_ms, static_cast<long long>(view.last_query_ms()),
              static_cast<long long>(view.canvas()->last_paint_ms()), static_cast<long long>(view.event_count()),
              view.window()->tiles.size(), view.window()->events.size(), view.window()->level);
  // Zoomed to 20 ms in the middle of the run (about a step): the events themselves.
  const int64_t mid = view.view_from() + (view.view_to() - view.view_from()) / 2;
  timer.restart();
  QSignalSpy ready(&view, &ts::viewer::TimelineView::window_ready);
  view.set_view(mid, mid + 20'000'000);
  if (!ready.wait(600'000)) {
    std::printf("viewer: the zoomed window did not come\n");
    return 1;
  }
  view.canvas()->repaint();
  std::printf("viewer_zoom_ms %.0f\nviewer_zoom_query_ms %lld\nviewer_zoom_drawn %zu summaries, %zu events, level %d\n",
              static_cast<double>(timer.nsecsElapsed()) / 1e6, static_cast<long long>(view.last_query_ms()),
              view.window()->tiles.size(), view.window()->events.size(), view.window()->level);
  std::printf("viewer_vmhwm_kib %ld\n", own_memory_kib("VmHWM:"));
  return view.window()->tiles.empty() && view.window()->events.empty() ? 1 : 0;
}

// --- children ------------------------------------------------------------------------------------

struct ChildResult {
  int exit_code = -1;
  double wall_s = 0;
  long max_rss_kib = 0;  // the child's own peak (wait4's rusage)
  std::string out;       // its stdout
};

// Runs argv[0] with stdout into `out_file` and stderr shared (its progress lines show).
ChildResult run_child(const std::vector<std::string>& argv, const fs::path& out_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ChildResult r;
  const auto start = Clock::now();
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    r.out = fmt::format("cannot start '{}': {}", argv[0], std::strerror(err));
    return r;
  }
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.wall_s = seconds_since(start);
  r.max_rss_kib = usage.ru_maxrss;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(out_file);
  std::stringstream text;
  text << in.rdbuf();
  r.out = text.str();
  return r;
}

// --- the db's own count of the run's rows ---------------------------------------------------------

std::optional<int64_t> count_rows(const fs::path& db, const char* table, int64_t run) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return std::nullopt;
  }
  std::optional<int64_t> n;
  sqlite3_stmt* st = nullptr;
  const std::string sql = fmt::format("SELECT COUNT(*) FROM {} WHERE run_id = ?", table);
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

int64_t dir_bytes(const fs::path& dir) {
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  return n;
}

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }
double mib(long kib) { return static_cast<double>(kib) / 1024; }

struct Options {
  int64_t bytes = kDefaultBytes;
  bool gzip = false, keep = false;
  uint64_t seed = 42;
  fs::path dir, trainscope = TRAINSCOPE_BIN;
};

int benchmark(const Options& o) {
  const fs::path work = o.dir / fmt::format("ts_trace_import_bench_{}", ::getpid());
  // The trace, the db (about as big) and SQLite's journal and temporary files while it writes.
  struct statvfs vfs {};
  if (::statvfs(o.dir.c_str(), &vfs) == 0) {
    const auto free_bytes = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
    if (free_bytes < 3 * o.bytes) {
      std::fprintf(stderr,
                   "trace_import_bench: refusing: %s has %.1f GB free; a %.1f GB trace needs %.1f GB (3x: the trace, "
                   "the db, SQLite's journal). Free some space or give --dir on a larger disk, or a smaller --bytes.\n",
                   o.dir.c_str(), mb(free_bytes) / 1e3, mb(o.bytes) / 1e3, mb(3 * o.bytes) / 1e3);
      return 77;
    }
  }
  fs::create_directories(work);
  const fs::path trace = work / (o.gzip ? "resnet50_synthetic.json.gz" : "resnet50_synthetic.json");
  const fs::path db = work / "imported.db";
  double load[3] = {0, 0, 0};
  ::getloadavg(load, 3);
  std::printf("trace_import_bench: %.2f GB of JSON%s in %s; load average %.2f %.2f %.2f, %ld CPUs\n", mb(o.bytes) / 1e3,
              o.gzip ? " (gzip)" : "", work.c_str(), load[0], load[1], load[2], ::sysconf(_SC_NPROCESSORS_ONLN));
  std::fflush(stdout);

  int failures = 0;
  const auto check = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::printf("FAIL: %s\n", what.c_str());
      ++failures;
    }
  };
  const auto finish = [&](int code) {
    if (o.keep) {
      std::printf("kept: %s\n", work.c_str());
    } else {
      std::error_code ec;
      fs::remove_all(work, ec);
    }
    return code;
  };

  // 1. The trace.
  auto t = Clock::now();
  int64_t next_report = 0;
  ts::bench::SyntheticTraceOptions gen;
  gen.target_bytes = o.bytes;
  gen.gzip = o.gzip;
  gen.seed = o.seed;
  gen.progress = [&](int64_t written) {
    if (written < next_report) return;
    std::fprintf(stderr, "generating: %.0f of %.0f MB (%.0f MB/s)\n", mb(written), mb(o.bytes),
                 mb(written) / std::max(1e-9, seconds_since(t)));
    next_report = written + std::max<int64_t>(o.bytes / 10, 1);
  };
  ts::bench::SyntheticTraceCounts c;
  try {
    c = ts::bench::write_synthetic_kineto_trace(trace, gen);
  } catch (const std::exception& e) {
    std::printf("FAIL: the trace could not be written: %s\n", e.what());
    return finish(1);
  }
  const double gen_s = seconds_since(t);
  std::printf("generated: %lld bytes of JSON (file %lld bytes) in %.1f s: %lld records: %lld steps, %lld CPU ranges, "
              "%lld GPU activities (%lld kernels, %lld of them NCCL, %lld copies, %lld sets, %lld runtime calls), "
              "%lld memory points, %lld left for the importer to leave out (%lld Python frames, %lld flows)\n",
              static_cast<long long>(c.json_bytes), static_cast<long long>(c.file_bytes), gen_s,
              static_cast<long long>(c.records), static_cast<long long>(c.steps), static_cast<long long>(c.cpu_ranges),
              static_cast<long long>(c.gpu_activities), static_cast<long long>(c.kernels),
              static_cast<long long>(c.nccl_kernels), static_cast<long long>(c.memcpys),
              static_cast<long long>(c.memsets), static_cast<long long>(c.runtime_calls),
              static_cast<long long>(c.memory_points), static_cast<long long>(c.left_out),
              static_cast<long long>(c.python_functions), static_cast<long long>(c.flows));
  std::fflush(stdout);

  // 2. The import, as a user runs it.
  std::fprintf(stderr, "importing: %s import-trace ... (two passes)\n", o.trainscope.c_str());
  const ChildResult imp = run_child({o.trainscope.string(), "import-trace", trace.string(), "--db", db.string(),
                                     "--workload", "resnet50_synthetic", "--preset", "bench", "--batch", "32"},
                                    work / "import.out");
  std::printf("%s", imp.out.c_str());
  if (imp.exit_code != 0) {
    std::printf("FAIL: import-trace exited with %d\n", imp.exit_code);
    return finish(1);
  }
  const double import_mb_s = mb(c.file_bytes) / imp.wall_s;
  std::printf("import: %.1f s wall, %.1f MB/s of file (%.1f MB/s of JSON), %.0f records/s; peak RSS %.1f MiB (bound "
              "1024 MiB)\n",
              imp.wall_s, import_mb_s, mb(c.json_bytes) / imp.wall_s, static_cast<double>(c.records) / imp.wall_s,
              mib(imp.max_rss_kib));
  std::fflush(stdout);
  check(imp.max_rss_kib < kRssLimitKib,
        fmt::format("import-trace's peak RSS {:.1f} MiB is not under 1 GiB", mib(imp.max_rss_kib)));

  // What it says it stored, and what the db holds, against what was written.
  std::smatch m;
  const std::regex said(
      R"(run (\d+) of .*: (\d+) iterations, (\d+) CPU events, (\d+) GPU activities, (\d+) memory points; (\d+) records)");
  if (!std::regex_search(imp.out, m, said)) {
    check(false, "import-trace's report was not understood: " + imp.out);
    return finish(1);
  }
  const int64_t run = std::stoll(m[1]);
  const auto expect = [&](const char* what, int64_t got, int64_t want) {
    check(got == want, fmt::format("{}: {} imported, {} written", what, got, want));
  };
  expect("iterations (said)", std::stoll(m[2]), c.steps);
  expect("CPU events (said)", std::stoll(m[3]), c.cpu_ranges);
  expect("GPU activities (said)", std::stoll(m[4]), c.gpu_activities);
  expect("memory points (said)", std::stoll(m[5]), c.memory_points);
  expect("records left out (said)", std::stoll(m[6]), c.left_out);
  expect("iterations (db)", count_rows(db, "iterations", run).value_or(-1), c.steps);
  expect("CPU events (db)", count_rows(db, "events", run).value_or(-1), c.cpu_ranges);
  expect("GPU activities (db)", count_rows(db, "gpu_activities", run).value_or(-1), c.gpu_activities);
  // Each [memory] point is two samples: the allocator's allocated and reserved totals.
  expect("memory samples (db)", count_rows(db, "samples", run).value_or(-1), 2 * c.memory_points);
  const int64_t db_bytes = dir_bytes(work) - c.file_bytes;
  std::printf("db: %.1f MB (with its journal files)\n", mb(db_bytes));

  // 3. The run in the viewer's timeline.
  std::fprintf(stderr, "opening run %lld in the viewer's timeline (offscreen)\n", static_cast<long long>(run));
  ::setenv("QT_QPA_PLATFORM", "offscreen", 0);
  const ChildResult view = run_child(
      {fs::read_symlink("/proc/self/exe").string(), "--open", db.string(), std::to_string(run)}, work / "viewer.out");
  std::printf("%s", view.out.c_str());
  check(view.exit_code == 0, fmt::format("the viewer step exited with {}", view.exit_code));
  check(view.max_rss_kib < kRssLimitKib,
        fmt::format("the viewer's peak RSS {:.1f} MiB is not under 1 GiB", mib(view.max_rss_kib)));
  std::printf("viewer: the whole step (start, open, first window drawn, one zoom) %.2f s, peak RSS %.1f MiB\n",
              view.wall_s, mib(view.max_rss_kib));

  std::printf(
      "\nsummary: %.2f GB trace (%lld records, %lld steps) generated in %.1f s; imported in %.1f s (%.1f MB/s of JSON, "
      "%.0f records/s, peak RSS %.1f MiB); db %.2f GB; viewer %.2f s to the first window (peak RSS %.1f MiB); "
      "%s\n",
      mb(c.file_bytes) / 1e3, static_cast<long long>(c.records), static_cast<long long>(c.steps), gen_s, imp.wall_s,
      mb(c.json_bytes) / imp.wall_s, static_cast<double>(c.records) / imp.wall_s, mib(imp.max_rss_kib),
      mb(db_bytes) / 1e3, view.wall_s, mib(view.max_rss_kib),
      failures == 0 ? "all checks held" : fmt::format("{} checks FAILED", failures).c_str());
  return finish(failures == 0 ? 0 : 1);
}

int usage() {
  std::fprintf(stderr, "usage: trace_import_bench [--bytes N] [--gzip] [--dir DIR] [--keep] [--trainscope BIN]\n"
                       "       trace_import_bench --generate FILE [--bytes N] [--gzip] [--seed S]\n"
                       "       trace_import_bench --open DB RUN\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // results and progress lines in the order they happen
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "--open") {
    QApplication app(argc, argv);
    return open_in_viewer(QString::fromStdString(args[1]), std::stoll(args[2]));
  }
  Options o;
  if (const char* env = std::getenv("TS_TRACE_BENCH_BYTES")) o.bytes = std::stoll(env);
  const char* tmp = std::getenv("TMPDIR");
  o.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::optional<fs::path> generate;
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
        return args[++i];
      };
      if (args[i] == "--bytes") o.bytes = std::stoll(value());
      else if (args[i] == "--gzip") o.gzip = true;
      else if (args[i] == "--keep") o.keep = true;
      else if (args[i] == "--dir") o.dir = value();
      else if (args[i] == "--seed") o.seed = std::stoull(value());
      else if (args[i] == "--trainscope") o.trainscope = value();
      else if (args[i] == "--generate") generate = value();
      else return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_import_bench: %s\n", e.what());
    return usage();
  }
  if (o.bytes <= 0) return usage();
  if (generate) {
    ts::bench::SyntheticTraceOptions gen;
    gen.target_bytes = o.bytes;
    gen.gzip = o.gzip;
    gen.seed = o.seed;
    const auto c = ts::bench::write_synthetic_kineto_trace(*generate, gen);
    std::printf("%s: %lld bytes of JSON, %lld records: %lld steps, %lld CPU ranges, %lld GPU activities, %lld memory "
                "points, %lld to leave out\n",
                generate->c_str(), static_cast<long long>(c.json_bytes), static_cast<long long>(c.records),
                static_cast<long long>(c.steps), static_cast<long long>(c.cpu_ranges),
                static_cast<long long>(c.gpu_activities), static_cast<long long>(c.memory_points),
                static_cast<long long>(c.left_out));
    return 0;
  }
  return benchmark(o);
}
