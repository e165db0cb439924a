#include "importers/nsys_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "importers/imported_steps.h"
#include "importers/nsys_export_reader.h"
#include "profiler/gpu_analysis.h"
#include "store/writer.h"

namespace ts::importers {

namespace {

namespace fs = std::filesystem;

constexpr size_t kRowsPerWrite = 50'000;  // rows buffered before they are written
constexpr int64_t kPidShift = 0x1000000;  // globalTid = ... | pid << 24 | tid (nsys's serialized ids)

// A step's number from an NVTX range's text (the rule in nsys_import.h); -1 for any other text.
int64_t step_number(std::string_view text) {
  std::string lower(text.size(), ' ');
  std::transform(text.begin(), text.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const std::string_view word : {"profilerstep", "iteration", "iter", "step"}) {
    if (!lower.starts_with(word)) continue;
    size_t i = word.size();
    while (i < lower.size() && std::string_view(" #_:-").find(lower[i]) != std::string_view::npos) ++i;
    if (i == lower.size()) continue;
    int64_t n = 0;
    for (; i < lower.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(lower[i])) || n > (std::numeric_limits<int64_t>::max() - 9) / 10)
        break;
      n = n * 10 + (lower[i] - '0');
    }
    if (i == lower.size()) return n;
  }
  return -1;
}

// HTA's rule for imported traces: NCCL's kernels are communication, told by name.
bool is_nccl(const std::string& name) {
  std::string lower(name.size(), ' ');
  std::transform(name.begin(), name.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("nccl") != std::string::npos;
}

// CUPTI's CUpti_ActivityMemcpyKind, named as Kineto and trainscope name copies.
std::string copy_name(int64_t copy_kind) {
  constexpr std::string_view kNames[] = {"",     "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                         "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  if (copy_kind <= 0 || copy_kind >= static_cast<int64_t>(std::size(kNames))) return "Memcpy";
  return fmt::format("Memcpy {}", kNames[copy_kind]);
}

std::string quoted_end(std::string_view alias) { return fmt::format("{}.\"end\"", alias); }  // END is an SQL keyword

// The closed NVTX ranges (push/pop 59, start/end 60) in time order: start, end, text, globalTid.
// The text is inline, or a StringIds id where the program registered it (textId).
std::string nvtx_ranges_sql(const NsysExport& x) {
  const bool ids = x.has_table("StringIds") && x.has_column("NVTX_EVENTS", "textId");
  return fmt::format("SELECT n.start, {}, {}, n.globalTid FROM NVTX_EVENTS n {} "
                     "WHERE n.eventType IN (59, 60) AND {} IS NOT NULL ORDER BY n.start",
                     quoted_end("n"), ids ? "COALESCE(n.text, s.value, '')" : "COALESCE(n.text, '')",
                     ids ? "LEFT JOIN StringIds s ON s.id = n.textId" : "", quoted_end("n"));
}

constexpr std::string_view kRuntimeSql =
    "SELECT r.start, r.\"end\", r.globalTid, r.correlationId, COALESCE(s.value, '') "
    "FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId ORDER BY r.start";

// The device's work in time order: type (0 kernel, 1 copy, 2 set), start, end, device, stream,
// correlation, name, bytes, copy kind, and the start of the runtime call that launched it (NULL:
// none found). The launches are matched by correlation id within a process (ids are a process's
// own), grouped so that a row finds at most one, through an index SQLite builds for the query.
std::string device_work_sql(const NsysExport& x) {
  const bool runtime = x.has_table("CUPTI_ACTIVITY_KIND_RUNTIME");
  const std::string_view gpu_tables[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                         "CUPTI_ACTIVITY_KIND_MEMSET"};
  bool by_process = runtime && x.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid");
  for (const auto table : gpu_tables)
    if (x.has_table(table)) by_process = by_process && x.has_column(table, "globalPid");
  const auto launch_join = [&](std::string_view alias) {
    return runtime ? fmt::format(" LEFT JOIN launch l ON l.c = {0}.correlationId AND l.p = {1}", alias,
                                 by_process ? fmt::format("{}.globalPid / {}", alias, kPidShift) : "0")
                   : std::string();
  };
  const std::string launch_at = runtime ? "l.at" : "NULL";
  std::vector<std::string> arms;
  if (x.has_table(gpu_tables[0]))
    arms.push_back(fmt::format("SELECT 0, k.start, {}, k.deviceId, k.streamId, k.correlationId, "
                               "COALESCE(d.value, b.value, ''), 0, 0, {} FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                               "LEFT JOIN StringIds d ON d.id = k.demangledName "
                               "LEFT JOIN StringIds b ON b.id = k.shortName{}",
                               quoted_end("k"), launch_at, launch_join("k")));
  if (x.has_table(gpu_tables[1]))
    arms.push_back(fmt::format("SELECT 1, c.start, {}, c.deviceId, c.streamId, c.correlationId, '', c.bytes, "
                               "c.copyKind, {} FROM CUPTI_ACTIVITY_KIND_MEMCPY c{}",
                               quoted_end("c"), launch_at, launch_join("c")));
  if (x.has_table(gpu_tables[2]))
    arms.push_back(fmt::format("SELECT 2, m.start, {}, m.deviceId, m.streamId, m.correlationId, '', m.bytes, 0, {} "
                               "FROM CUPTI_ACTIVITY_KIND_MEMSET m{}",
                               quoted_end("m"), launch_at, launch_join("m")));
  if (arms.empty()) return "";
  const std::string with =
      runtime ? fmt::format("WITH launch AS MATERIALIZED (SELECT correlationId AS c, {} AS p, min(start) AS at "
                            "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IS NOT NULL GROUP BY 1, 2) ",
                            by_process ? fmt::format("globalTid / {}", kPidShift) : "0")
              : "";
  return with + fmt::format("{} ORDER BY 2", fmt::join(arms, " UNION ALL "));
}

struct Step {
  int64_t index = 0, start_ns = 0, end_ns = 0;
};

// What the first pass learns: the steps and their thread, where time begins, the threads, how
// many rows the second pass reads and how many it leaves out, and the export's own facts.
struct Survey {
  std::vector<Step> steps;  // in order of start
  std::optional<int64_t> step_thread;
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  std::map<int64_t, int64_t> threads;  // globalTid -> small id, in order of their first range
  std::map<int64_t, std::string> thread_names;
  int64_t ranges = 0, runtime = 0, gpu = 0, left_out = 0;
  std::string schema_version, product_version;
  std::optional<int64_t> session_start_utc_ns;
  std::vector<std::pair<int64_t, std::string>> gpus;  // TARGET_INFO_GPU: id, name

  // The step whose CPU range holds `t_ns` (-1: none).
  int64_t step_at(int64_t t_ns) const {
    auto it =
        std::upper_bound(steps.begin(), steps.end(), t_ns, [](int64_t t, const Step& s) { return t < s.start_ns; });
    if (it == steps.begin()) return -1;
    --it;
    return t_ns <= it->end_ns ? it->index : -1;
  }
  bool is_step(const std::string& text, int64_t thread) const {
    return step_thread && *step_thread == thread && step_number(text) >= 0;
  }
};

Survey survey(const NsysExport& x, const fs::path& file, const ImportOptions& o) {
  Survey s;
  if (!x.has_table("StringIds")) {
    for (const std::string_view named : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"})
      if (x.has_table(named))
        throw TraceError(TraceError::Kind::malformed,
                         fmt::format("'{}' has {} but no StringIds table, where its names are", file.string(), named));
  }
  int64_t records = 0;
  const auto report = [&] {
    if (o.progress) o.progress(1, records);
  };
  if (x.has_table("NVTX_EVENTS")) {
    x.each_row(nvtx_ranges_sql(x), [&](const NsysExport::Row& row) {
      const int64_t start = row.integer(0), thread = row.integer(3);
      s.origin_ns = std::min(s.origin_ns, start);
      s.threads.emplace(thread, static_cast<int64_t>(s.threads.size()));
      const std::string text = row.text(2);
      if (const int64_t n = step_number(text); n >= 0) {
        if (!s.step_thread) s.step_thread = thread;  // the first step's thread holds the steps
        if (*s.step_thread == thread) s.steps.push_back({n, start, std::max(start, row.integer(1))});
      }
      ++s.ranges;
      if (++records % static_cast<int64_t>(std::max<size_t>(o.batch, 1)) == 0) report();
    });
    s.left_out +=
        x.integer("SELECT count(*) FROM NVTX_EVENTS WHERE NOT (eventType IN (59, 60) AND \"end\" IS NOT NULL)");
  }
  // Counting every table's rows reads all their pages: a damaged file fails here, before a run
  // is begun.
  const auto count = [&](std::string_view table, int64_t& into) {
    if (!x.has_table(table)) return;
    x.each_row(fmt::format("SELECT count(*), min(start) FROM {}", table), [&](const NsysExport::Row& row) {
      into += row.integer(0);
      records += row.integer(0);
      if (!row.null(1)) s.origin_ns = std::min(s.origin_ns, row.integer(1));
    });
    report();
  };
  count("CUPTI_ACTIVITY_KIND_RUNTIME", s.runtime);
  for (const std::string_view table :
       {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"})
    count(table, s.gpu);
  for (const std::string_view table : {"OSRT_API", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"})
    if (x.has_table(table)) s.left_out += x.integer(fmt::format("SELECT count(*) FROM {}", table));
  report();
  if (s.origin_ns == std::numeric_limits<int64_t>::max()) s.origin_ns = 0;

  if (x.has_table("ThreadNames") && x.has_table("StringIds"))
    x.each_row("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId",
               [&](const NsysExport::Row& row) { s.thread_names[row.integer(0)] = row.text(1); });
  // The export's version: META_DATA_EXPORT (name, value); a table EXPORT_META_DATA read alike,
  // the name some exports are said to use (not seen in the sources followed: docs/import.md).
  for (const std::string_view table : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
    if (!x.has_column(table, "name") || !x.has_column(table, "value")) continue;
    x.each_row(fmt::format("SELECT name, value FROM {}", table), [&](const NsysExport::Row& row) {
      const std::string name = row.text(0);
      if (name == "EXPORT_SCHEMA_VERSION") s.schema_version = row.text(1);
      if (name == "EXPORT_PRODUCT_VERSION" || name == "NSIGHT_SYSTEMS_VERSION") s.product_version = row.text(1);
    });
  }
  if (x.has_column("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"))
    x.each_row("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", [&](const NsysExport::Row& row) {
      if (!row.null(0)) s.session_start_utc_ns = row.integer(0);
    });
  if (x.has_column("TARGET_INFO_GPU", "id") && x.has_column("TARGET_INFO_GPU", "name"))
    x.each_row("SELECT id, name FROM TARGET_INFO_GPU ORDER BY id",
               [&](const NsysExport::Row& row) { s.gpus.emplace_back(row.integer(0), row.text(1)); });
  std::sort(s.steps.begin(), s.steps.end(), [](const Step& a, const Step& b) { return a.start_ns < b.start_ns; });
  return s;
}

std::string format_of(const Survey& s) {
  std::string format = "nsys sqlite export";
  if (!s.schema_version.empty()) format += ", schema " + s.schema_version;
  if (!s.product_version.empty()) format += ", Nsight Systems " + s.product_version;
  return format;
}

}  // namespace

ImportedRun import_nsys_export(const fs::path& sqlite, const fs::path& db, const ImportOptions& o) {
  const NsysExport x(sqlite);
  const Survey s = survey(x, sqlite, o);
  ImportedRun out;
  out.device = s.gpu > 0 ? "cuda" : "cpu";
  out.left_out = s.left_out;
  const auto ns = [&](int64_t t) { return t - s.origin_ns; };  // time 0: the first record stored

  store::RunInfo info;
  info.workload = run_name(sqlite, o, {".sqlite", ".db"});
  info.preset = o.preset;
  info.device = out.device;
  info.batch_size = o.batch_size;
  info.warmup = std::clamp<int64_t>(o.warmup_steps, 0, static_cast<int64_t>(s.steps.size()));
  info.iterations = static_cast<int64_t>(s.steps.size()) - info.warmup;
  info.trace = true;
  info.framework = "nsys";
  info.command_line = o.command_line;
  info.config_json = nlohmann::json{
      {"imported_from", fs::absolute(sqlite).string()},
      {"format", format_of(s)},
      {"batch_size",
       o.batch_size}}.dump();
  std::error_code ec;
  const auto written = fs::last_write_time(sqlite, ec);
  info.started_at = s.session_start_utc_ns
                        ? iso_time(static_cast<std::time_t>((*s.session_start_utc_ns + s.origin_ns) / 1'000'000'000))
                        : iso_time(ec ? std::time(nullptr)
                                      : std::chrono::system_clock::to_time_t(std::chrono::file_clock::to_sys(written)));

  if (s.steps.empty())
    out.absent.push_back("iterations (no NVTX range named like a step: ProfilerStep#N, step N, iteration N)");
  if (s.ranges == 0) out.absent.push_back("CPU ranges (no NVTX ranges: NVTX not traced, or none emitted)");
  out.absent.push_back("CPU ops (an nsys export has no framework ops; its NVTX ranges are phases)");
  if (s.gpu == 0) out.absent.push_back("GPU activities (no CUDA kernels, copies or sets: a CPU-only report)");
  if (s.runtime == 0) out.absent.push_back("CUDA API calls (no CUDA runtime trace: launches are unknown)");
  out.absent.push_back("memory (not read from an nsys export)");
  out.absent.push_back("loss (a trace does not hold it)");
  out.absent.push_back("layers and memory categories (not in an nsys export)");

  store::Writer w(db);
  const int64_t run = w.begin_run(info);
  out.run_id = run;
  try {
    std::vector<store::EventRow> events;
    std::vector<store::GpuActivityRow> gpu;
    std::vector<profiler::GpuActivity> device_work;  // for the breakdown
    int64_t records = 0;
    const auto write = [&](bool all) {
      if (all || events.size() >= kRowsPerWrite) w.add_events(run, events), events.clear();
      if (all || gpu.size() >= kRowsPerWrite) w.add_gpu_activities(run, gpu), gpu.clear();
    };
    const auto next_record = [&] {
      if (++records % static_cast<int64_t>(std::max<size_t>(o.batch, 1)) != 0) return;
      write(false);
      if (o.progress) o.progress(2, records);
    };

    if (x.has_table("NVTX_EVENTS")) {
      x.each_row(nvtx_ranges_sql(x), [&](const NsysExport::Row& row) {
        const int64_t start = row.integer(0), thread = row.integer(3);
        const std::string text = row.text(2);
        const auto id = s.threads.find(thread);
        events.push_back({ns(start), ns(std::max(start, row.integer(1))), text, "",
                          s.is_step(text, thread) ? "iteration" : "phase", "none", s.step_at(start),
                          id == s.threads.end() ? 0 : id->second, 0});
        ++out.cpu_events;
        next_record();
      });
    }
    if (x.has_table("CUPTI_ACTIVITY_KIND_RUNTIME")) {
      x.each_row(std::string(kRuntimeSql), [&](const NsysExport::Row& row) {
        store::GpuActivityRow a;
        a.start_ns = ns(row.integer(0));
        a.end_ns = ns(std::max(row.integer(0), row.integer(1)));
        a.kind = "api";
        a.name = row.text(4);
        a.device = -1;
        a.stream = row.integer(2) % kPidShift;  // the OS thread
        a.correlation = row.integer(3);
        a.iteration = s.step_at(row.integer(0));
        gpu.push_back(std::move(a));
        ++out.gpu_activities;
        next_record();
      });
    }
    if (const std::string sql = device_work_sql(x); !sql.empty()) {
      x.each_row(sql, [&](const NsysExport::Row& row) {
        const int64_t type = row.integer(0), start = row.integer(1);
        store::GpuActivityRow a;
        a.start_ns = ns(start);
        a.end_ns = ns(std::max(start, row.integer(2)));
        a.device = row.integer(3);
        a.stream = row.integer(4);
        a.correlation = row.integer(5);
        a.name = type == 0 ? row.text(6) : type == 1 ? copy_name(row.integer(8)) : "Memset";
        a.kind = type == 0 ? (is_nccl(a.name) ? "comm" : "kernel") : type == 1 ? "memcpy" : "memset";
        a.bytes = row.integer(7);
        // The iteration of the runtime call that launched it, else of its own start.
        a.iteration = s.step_at(row.null(9) ? start : row.integer(9));
        profiler::GpuActivity g;
        g.start_ns = a.start_ns;
        g.end_ns = a.end_ns;
        g.kind = a.kind == "kernel"   ? profiler::GpuKind::kernel
                 : a.kind == "comm"   ? profiler::GpuKind::comm
                 : a.kind == "memcpy" ? profiler::GpuKind::memcpy
                                      : profiler::GpuKind::memset;
        g.device = static_cast<int16_t>(a.device);
        g.iteration = static_cast<int32_t>(a.iteration);
        device_work.push_back(g);
        gpu.push_back(std::move(a));
        ++out.gpu_activities;
        next_record();
      });
    }
    write(true);
    if (o.progress) o.progress(2, records);

    std::vector<ImportedStep> step_rows;
    for (const Step& step : s.steps) step_rows.push_back({step.index, ns(step.start_ns), ns(step.end_ns)});
    write_steps(w, run, step_rows, o);
    out.iterations = static_cast<int64_t>(step_rows.size());
    write_gpu_breakdown(w, run, device_work);

    std::vector<store::EnvEntry> env = {{"imported_from", fs::absolute(sqlite).string()},
                                        {"trace_format", format_of(s)},
                                        {"framework", "nsys"},
                                        {"absent", fmt::format("{}", fmt::join(out.absent, "; "))},
                                        {"left_out_records", std::to_string(out.left_out)},
                                        {"trace_origin_ns", std::to_string(s.origin_ns)}};
    if (s.session_start_utc_ns) env.push_back({"session_start_utc_ns", std::to_string(*s.session_start_utc_ns)});
    for (const auto& [global_tid, id] : s.threads) {
      const std::string key = fmt::format("{}/{}", global_tid / kPidShift % kPidShift, global_tid % kPidShift);
      const auto name = s.thread_names.find(global_tid);
      env.push_back({fmt::format("thread_{}", id), name == s.thread_names.end() ? key : key + " " + name->second});
    }
    for (const auto& [id, name] : s.gpus) env.push_back({fmt::format("gpu_{}", id), name});
    w.add_environment(run, env);
    w.finish_run(run, store::RunStatus::completed, iso_time(std::time(nullptr)), "");
  } catch (...) {
    w.delete_run(run);  // nothing of an export that could not be read
    throw;
  }
  return out;
}

}  // namespace ts::importers
