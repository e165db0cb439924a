#include "session/run_options.h"

#include <charconv>

#include <cmath>
#include <stdexcept>

#include "distributed/data_parallel.h"
#include "distributed/ps/ps_options.h"

namespace ts::session {

namespace {

using json = nlohmann::json;
using Strategy = RunConfig::Strategy;

// Accessors for the common field shapes, so that each entry below names its field once.
template <class T>
auto field_get(T RunConfig::*f) {
  return [f](const RunConfig& c) { return json(c.*f); };
}
template <class T>
auto field_set(T RunConfig::*f) {
  return [f](RunConfig& c, const json& v) { c.*f = v.get<T>(); };
}
template <class T>
auto optional_get(std::optional<T> RunConfig::*f) {
  return [f](const RunConfig& c) { return (c.*f) ? json(*(c.*f)) : json(); };
}
template <class T>
auto optional_set(std::optional<T> RunConfig::*f) {
  return [f](RunConfig& c, const json& v) {
    if (v.is_null()) {
      (c.*f).reset();
    } else {
      c.*f = v.get<T>();
    }
  };
}
auto path_get(std::filesystem::path RunConfig::*f) {
  return [f](const RunConfig& c) { return json((c.*f).string()); };
}
auto path_set(std::filesystem::path RunConfig::*f) {
  return [f](RunConfig& c, const json& v) { c.*f = v.get<std::string>(); };
}
// Durations are written in seconds and kept in milliseconds.
auto seconds_get(std::chrono::milliseconds RunConfig::*f) {
  return [f](const RunConfig& c) { return json(static_cast<double>((c.*f).count()) / 1000.0); };
}
auto seconds_set(std::chrono::milliseconds RunConfig::*f) {
  return [f](RunConfig& c, const json& v) {
    c.*f = std::chrono::milliseconds(std::llround(v.get<double>() * 1000));  // 0.29 s is 290 ms, not 289
  };
}
template <class T>
auto dp_get(T distributed::DataParallelOptions::*f) {
  return [f](const RunConfig& c) { return json(c.data_parallel.*f); };
}
template <class T>
auto dp_set(T distributed::DataParallelOptions::*f) {
  return [f](RunConfig& c, const json& v) { c.data_parallel.*f = v.get<T>(); };
}
template <class T>
auto ps_get(T distributed::ps::PsOptions::*f) {
  return [f](const RunConfig& c) { return json(c.ps.*f); };
}
template <class T>
auto ps_set(T distributed::ps::PsOptions::*f) {
  return [f](RunConfig& c, const json& v) { c.ps.*f = v.get<T>(); };
}

distributed::BucketOrder bucket_order_of(const std::string& s) {
  if (s == "arrival") return distributed::BucketOrder::arrival;
  if (s == "reverse_registration") return distributed::BucketOrder::reverse_registration;
  throw std::invalid_argument("bucket order must be arrival or reverse_registration (got '" + s + "')");
}

std::vector<RunOption> make_table() {
  std::vector<RunOption> t;
  t.push_back({.name = "workload",
               .type = OptionType::text,
               .help = "Workload name (see `trainscope list`)",
               .suite_key = "workload",
               .stored = Stored::top,
               .stored_key = "workload",
               .get = field_get(&RunConfig::workload),
               .set = field_set(&RunConfig::workload)});
  t.push_back({.name = "preset",
               .type = OptionType::text,
               .help = "tiny | small | full",
               .suite_key = "preset",
               .stored = Stored::top,
               .stored_key = "preset",
               .get = field_get(&RunConfig::preset),
               .set = field_set(&RunConfig::preset)});
  t.push_back({.name = "framework",
               .type = OptionType::text,
               .help = "trainscope | pytorch: the workload's PyTorch reference (bench/pytorch) under PyTorch's "
                       "profiler, imported as a run (needs torch: pip install torch)",
               .suite_key = "framework",
               .choices = {"trainscope", "pytorch"},
               .get = field_get(&RunConfig::framework),
               .set = field_set(&RunConfig::framework)});
  t.push_back({.name = "device",
               .type = OptionType::text,
               .help = "cpu (cuda in CUDA builds)",
               .suite_key = "device",
               .stored = Stored::top,
               .stored_key = "device",
               .get = field_get(&RunConfig::device),
               .set = field_set(&RunConfig::device)});
  // A suite's batch may also be a list of sizes, each a run of its own (cli/suite.cpp).
  t.push_back({.name = "batch",
               .type = OptionType::integer,
               .help = "Batch size (default: the preset's)",
               .suite_key = "batch",
               .min = 1,
               .max = 2'147'483'647,  // 2^31 - 1: an int in every kernel's index math
               .stored = Stored::resolved,
               .stored_key = "batch",
               .get = optional_get(&RunConfig::batch),
               .set = optional_set(&RunConfig::batch)});
  t.push_back({.name = "learners",
               .type = OptionType::integer,
               .help = "Actor-learner threads, for workloads that have them (a3c; default: the preset's)",
               .suite_key = "learners",
               .min = 1,
               .max = 4096,
               .stored = Stored::top_if_set,
               .stored_key = "learners",
               .get = optional_get(&RunConfig::learners),
               .set = optional_set(&RunConfig::learners)});
  t.push_back({.name = "iters",
               .type = OptionType::integer,
               .help = "Timed iterations",
               .suite_key = "iterations",
               .min = 1,
               .max = 1'000'000'000,
               .stored = Stored::top,
               .stored_key = "iterations",
               .get = field_get(&RunConfig::iterations),
               .set = field_set(&RunConfig::iterations)});
  t.push_back({.name = "warmup",
               .type = OptionType::integer,
               .help = "Warm-up iterations, excluded from the figures",
               .suite_key = "warmup",
               .min = 0,
               .max = 1'000'000'000,
               .stored = Stored::top,
               .stored_key = "warmup",
               .get = field_get(&RunConfig::warmup),
               .set = field_set(&RunConfig::warmup)});
  // The machine's cores bound it further (cli/validate.cpp): more threads than cores never finish.
  t.push_back({.name = "threads",
               .type = OptionType::integer,
               .help = "CPU threads (default: all cores)",
               .suite_key = "threads",
               .min = 0,
               .max = 1024,
               .stored = Stored::resolved,
               .stored_key = "threads",
               .get = field_get(&RunConfig::threads),
               .set = field_set(&RunConfig::threads)});
  t.push_back({.name = "seed",
               .type = OptionType::count,
               .help = "Random seed",
               .suite_key = "seed",
               .stored = Stored::top,
               .stored_key = "seed",
               .get = field_get(&RunConfig::seed),
               .set = field_set(&RunConfig::seed)});
  t.push_back({.name = "data",
               .type = OptionType::text,
               .help = "synthetic | fashion-mnist[:DIR]",
               .suite_key = "data",
               .stored = Stored::top,
               .stored_key = "data",
               .get = field_get(&RunConfig::data),
               .set = field_set(&RunConfig::data)});
  t.push_back({.name = "shard",
               .type = OptionType::text,
               .help = "R/N: one process reads the data of rank R of N, as that rank of an N-rank job would (the "
                       "source of `trainscope project`)",
               .suite_key = "shard",
               .stored = Stored::top_if_set,
               .stored_key = "shard",
               .get = field_get(&RunConfig::shard),
               .set = field_set(&RunConfig::shard)});
  t.push_back({.name = "eval-batches",
               .type = OptionType::integer,
               .help = "Held-out batches for the quality metric (0: none)",
               .suite_key = "eval_batches",
               .min = 0,
               .max = 1'000'000,
               .stored = Stored::top,
               .stored_key = "eval_batches",
               .get = field_get(&RunConfig::eval_batches),
               .set = field_set(&RunConfig::eval_batches)});
  t.push_back({.name = "eval-every",
               .type = OptionType::integer,
               .help = "Also evaluate after every N timed iterations, outside the timed figures: the quality curve "
                       "(0: only at the end)",
               .suite_key = "eval_every",
               .min = 0,
               .max = 1'000'000'000,
               .stored = Stored::top_if_set,
               .stored_key = "eval_every",
               .get = field_get(&RunConfig::eval_every),
               .set = field_set(&RunConfig::eval_every)});
  t.push_back({.name = "quality-target",
               .type = OptionType::number,
               .help = "The quality (the workload's metric) whose first evaluation at or past it gives the run's time "
                       "to quality; needs --eval-every",
               .suite_key = "quality_target",
               .min = -1e9,
               .max = 1e9,
               .stored = Stored::top_if_set,
               .stored_key = "quality_target",
               .get = optional_get(&RunConfig::quality_target),
               .set = optional_set(&RunConfig::quality_target)});
  t.push_back({.name = "db",
               .type = OptionType::text,
               .help = "SQLite file to store into",
               .get = path_get(&RunConfig::db),
               .set = path_set(&RunConfig::db)});
  t.push_back({.name = "trace",
               .type = OptionType::flag,
               .help = "Do not record per-op events (phases are still timed)",
               .suite_key = "trace",
               .negated = true,
               .stored = Stored::top,
               .stored_key = "trace",
               .get = field_get(&RunConfig::trace),
               .set = field_set(&RunConfig::trace)});
  t.push_back({.name = "roofline",
               .type = OptionType::flag,
               .help = "After training, measure the machine's SGEMM peak and copy bandwidth (about 2 s) and store them "
                       "beside the step's roofline (docs/formulas.md)",
               .suite_key = "roofline",
               .stored = Stored::top,
               .stored_key = "roofline",
               .get = field_get(&RunConfig::roofline),
               .set = field_set(&RunConfig::roofline)});
  t.push_back({.name = "flush-interval",
               .type = OptionType::number,
               .help = "Seconds between writes while the run goes on: a run killed keeps all but the last interval",
               .min = 0.01,
               .max = 600.0,
               .get = seconds_get(&RunConfig::flush_interval),
               .set = seconds_set(&RunConfig::flush_interval)});
  t.push_back({.name = "lock-wait",
               .type = OptionType::number,
               .help = "Seconds the final write waits for a db another process has locked, before writing the run to "
                       "a side file to import",
               .min = 0.0,
               .max = 86400.0,
               .get = seconds_get(&RunConfig::lock_wait),
               .set = seconds_set(&RunConfig::lock_wait)});
  t.push_back({.name = "stall-timeout",
               .type = OptionType::number,
               .help = "Distributed runs: seconds a rank that answers but does not reach a collective may keep the "
                       "others waiting before the job stops, naming it (0: ten times the longest iteration, at least "
                       "20 s; a rank that stops answering stops the job within about 15 s whatever this says)",
               .min = 0.0,
               .max = 86400.0,
               .get = seconds_get(&RunConfig::stall_timeout),
               .set = seconds_set(&RunConfig::stall_timeout)});
  t.push_back({.name = "json",
               .type = OptionType::flag,
               .help = "Print the summary as JSON",
               .get = field_get(&RunConfig::json),
               .set = field_set(&RunConfig::json)});
  // Distribution (docs/distributed.md). With hosts and no --nproc: 0, one rank per slot (cli).
  t.push_back({.name = "nproc",
               .type = OptionType::integer,
               .help = "Ranks (processes) to train with, started through mpirun (with --hosts: one per slot); with "
                       "--strategy ps the workers, dedicated servers coming on top",
               .suite_key = "nproc",
               .min = 1,
               .max = 4096,
               .launch = true,
               .get = field_get(&RunConfig::nproc),
               .set = field_set(&RunConfig::nproc)});
  t.push_back({.name = "hosts",
               .type = OptionType::text,
               .help = "Hosts and their slots for the ranks, e.g. h1:2,h2:2 (default: this machine)",
               .suite_key = "hosts",
               .launch = true,
               .get = field_get(&RunConfig::hosts),
               .set = field_set(&RunConfig::hosts)});
  t.push_back({.name = "hostfile",
               .type = OptionType::text,
               .help = "File of hosts (`host slots=N` per line), instead of --hosts",
               .suite_key = "hostfile",
               .launch = true,
               .get = path_get(&RunConfig::hostfile),
               .set = path_set(&RunConfig::hostfile)});
  t.push_back({.name = "mca",
               .type = OptionType::pairs,
               .help = "NAME=VALUE passed to mpirun as --mca NAME VALUE (repeatable)",
               .suite_key = "mca",
               .launch = true,
               .get = field_get(&RunConfig::mca),
               .set = field_set(&RunConfig::mca)});
  // How the ranks share what they learn (docs/cli.md, "Strategies").
  t.push_back({.name = "strategy",
               .type = OptionType::text,
               .help = "allreduce (data parallel: gradients averaged by all-reduce) | ps (parameter server: workers "
                       "push gradients to server shards and pull parameters)",
               .suite_key = "strategy",
               .choices = {"allreduce", "ps"},
               .get = [](const RunConfig& c) { return json(c.strategy == Strategy::ps ? "ps" : "allreduce"); },
               .set =
                   [](RunConfig& c, const json& v) {
                     const auto s = v.get<std::string>();
                     if (s != "ps" && s != "allreduce") throw std::invalid_argument("unknown strategy '" + s + "'");
                     c.strategy = s == "ps" ? Strategy::ps : Strategy::allreduce;
                   }});
  t.push_back({.name = "bucket-mb",
               .type = OptionType::number,
               .help = "Gradient bucket size in MiB for the all-reduce",
               .suite_key = "bucket_mb",
               .min = 0.001,
               .max = 4096.0,
               .scope = OptionScope::allreduce,
               .stored = Stored::strategy,
               .stored_key = "bucket_mb",
               .get = dp_get(&distributed::DataParallelOptions::bucket_mb),
               .set = dp_set(&distributed::DataParallelOptions::bucket_mb)});
  t.push_back(
      {.name = "bucket-order",
       .type = OptionType::text,
       .help = "arrival (rebuilt from the first iteration's gradient order, as DDP) | reverse_registration",
       .suite_key = "bucket_order",
       .choices = {"arrival", "reverse_registration"},
       .scope = OptionScope::allreduce,
       .stored = Stored::strategy,
       .stored_key = "bucket_order",
       .get = [](const RunConfig& c) { return json(std::string(distributed::to_string(c.data_parallel.order))); },
       .set = [](RunConfig& c, const json& v) { c.data_parallel.order = bucket_order_of(v.get<std::string>()); }});
  t.push_back({.name = "overlap",
               .type = OptionType::flag,
               .help = "All-reduce the gradients after backward instead of during it",
               .suite_key = "overlap",
               .scope = OptionScope::allreduce,
               .negated = true,
               .stored = Stored::strategy,
               .stored_key = "overlap",
               .get = dp_get(&distributed::DataParallelOptions::overlap),
               .set = dp_set(&distributed::DataParallelOptions::overlap)});
  // Both strategies': with ps, the cli copies it to ps.priority (apply_strategy).
  t.push_back({.name = "priority",
               .type = OptionType::flag,
               .help = "Partition gradients and send the front layers' first (ByteScheduler/P3); with --strategy ps: "
                       "push and pull the front layers' keys first",
               .suite_key = "priority",
               .stored = Stored::strategy,
               .stored_key = "priority",
               .get = dp_get(&distributed::DataParallelOptions::priority),
               .set = dp_set(&distributed::DataParallelOptions::priority),
               .stored_value = [](const RunConfig& c) {
                 return json(c.strategy == Strategy::ps ? c.ps.priority : c.data_parallel.priority);
               }});
  t.push_back({.name = "cross-barrier",
               .type = OptionType::flag,
               .help = "With --priority: run the optimizer after every gradient is averaged, not per parameter as "
                       "each arrives (the next forward then waits for the whole step)",
               .suite_key = "cross_barrier",
               .scope = OptionScope::allreduce,
               .negated = true,
               .stored = Stored::strategy,
               .stored_key = "cross_barrier",
               .get = dp_get(&distributed::DataParallelOptions::cross_barrier),
               .set = dp_set(&distributed::DataParallelOptions::cross_barrier),
               // Asked for, and meaningful only with priority; whether taken: metric dp_cross_barrier.
               .stored_value = [](const RunConfig& c) {
                 return json(c.data_parallel.priority && c.data_parallel.cross_barrier);
               }});
  t.push_back({.name = "partition-mb",
               .type = OptionType::number,
               .help = "With --priority: partition size in MiB",
               .suite_key = "partition_mb",
               .min = 0.001,
               .max = 4096.0,
               .scope = OptionScope::allreduce,
               .stored = Stored::strategy,
               .stored_key = "partition_mb",
               .get = dp_get(&distributed::DataParallelOptions::partition_mb),
               .set = dp_set(&distributed::DataParallelOptions::partition_mb)});
  t.push_back({.name = "gpu-gradients",
               .type = OptionType::text,
               .help = "With --device cuda and several ranks: auto (NCCL where every rank has a GPU of its own, else "
                       "through the host) | nccl | host (GPU to pinned host buckets, MPI all-reduce, back)",
               .suite_key = "gpu_gradients",
               .choices = {"auto", "nccl", "host"},
               .scope = OptionScope::allreduce,
               .stored = Stored::strategy,
               .stored_key = "gpu_gradients",
               .get = [](const RunConfig& c) { return json(std::string(distributed::to_string(c.gpu_gradients))); },
               .set =
                   [](RunConfig& c, const json& v) {
                     const auto s = v.get<std::string>();
                     const auto g = distributed::parse_gpu_gradients(s);
                     if (!g) throw std::invalid_argument("unknown --gpu-gradients '" + s + "' (auto, nccl or host)");
                     c.gpu_gradients = *g;
                   },
               // Asked for, on a GPU model only; the route taken is in the environment (gpu_gradients).
               .stored_value =
                   [](const RunConfig& c) {
                     return c.device.starts_with("cuda") ? json(std::string(distributed::to_string(c.gpu_gradients)))
                                                         : json();
                   }});
  // The parameter server's (--strategy ps); their interplay is the cli's apply_strategy.
  t.push_back({.name = "servers",
               .type = OptionType::integer,
               .help = "With --strategy ps: server shards (1 to 4096); co-located servers run beside workers 0..S-1, "
                       "so there are at most as many as workers",
               .suite_key = "servers",
               .min = 1,
               .max = 4096,
               .scope = OptionScope::ps,
               .get = ps_get(&distributed::ps::PsOptions::servers),
               .set = ps_set(&distributed::ps::PsOptions::servers)});
  t.push_back({.name = "dedicated-servers",
               .type = OptionType::flag,
               .help = "With --strategy ps: the servers are ranks of their own, started after the --nproc workers",
               .suite_key = "dedicated_servers",
               .scope = OptionScope::ps,
               .get = ps_get(&distributed::ps::PsOptions::dedicated),
               .set = ps_set(&distributed::ps::PsOptions::dedicated)});
  t.push_back({.name = "server-hosts",
               .type = OptionType::text,
               .help = "With --strategy ps: the dedicated servers' hosts and their slots, e.g. s1:1,s2:1 (as --hosts; "
                       "implies --dedicated-servers)",
               .suite_key = "server_hosts",
               .scope = OptionScope::ps,
               .stored = Stored::strategy,
               .stored_key = "server_hosts",
               .get = ps_get(&distributed::ps::PsOptions::server_hosts),
               .set = ps_set(&distributed::ps::PsOptions::server_hosts),
               .stored_value = [](const RunConfig& c) {
                 return c.ps.server_hosts.empty() ? json() : json(c.ps.server_hosts);
               }});
  t.push_back({.name = "ps-mode",
               .type = OptionType::text,
               .help = "With --strategy ps: sync | async | bounded (at most --staleness steps ahead of the slowest "
                       "worker) | eager (servers push new values as they update)",
               .suite_key = "ps_mode",
               .choices = {"sync", "async", "bounded", "eager"},
               .scope = OptionScope::ps,
               .stored = Stored::strategy,
               .stored_key = "mode",
               .get = [](const RunConfig& c) { return json(std::string(distributed::ps::to_string(c.ps.mode))); },
               .set =
                   [](RunConfig& c, const json& v) {
                     const auto mode = distributed::ps::parse_ps_mode(v.get<std::string>());
                     if (!mode) throw std::invalid_argument("unknown ps mode '" + v.get<std::string>() + "'");
                     c.ps.mode = *mode;
                   }});
  t.push_back({.name = "staleness",
               .type = OptionType::integer,
               .help = "With --strategy ps: the most steps a worker may run ahead of the slowest, 0 to 1000000 "
                       "(implies --ps-mode bounded)",
               .suite_key = "staleness",
               .min = 0,
               .max = 1'000'000,
               .scope = OptionScope::ps,
               .stored = Stored::strategy,
               .stored_key = "staleness",
               .get = ps_get(&distributed::ps::PsOptions::staleness),
               .set = ps_set(&distributed::ps::PsOptions::staleness)});
  // The lower bound is exclusive: a chunk must hold something.
  t.push_back({.name = "chunk-mb",
               .type = OptionType::number,
               .help = "With --strategy ps: tensors larger than this are cut into keys of this size, MiB (more than "
                       "0.001, at most 4096)",
               .suite_key = "chunk_mb",
               .min = 0.001,
               .max = 4096.0,
               .min_exclusive = true,
               .scope = OptionScope::ps,
               .stored = Stored::strategy,
               .stored_key = "chunk_mb",
               .get = ps_get(&distributed::ps::PsOptions::chunk_mb),
               .set = ps_set(&distributed::ps::PsOptions::chunk_mb)});
  return t;
}

}  // namespace

const std::vector<RunOption>& run_options() {
  static const std::vector<RunOption> table = make_table();
  return table;
}

const RunOption& run_option(std::string_view name) {
  for (const auto& o : run_options()) {
    if (o.name == name) return o;
  }
  throw std::out_of_range("no run option '" + std::string(name) + "'");
}

std::optional<std::pair<int, int>> parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  int r = -1, n = 0;
  const auto a = std::from_chars(text.data(), text.data() + slash, r);
  const auto b = std::from_chars(text.data() + slash + 1, text.data() + text.size(), n);
  if (a.ec != std::errc() || a.ptr != text.data() + slash || b.ec != std::errc() ||
      b.ptr != text.data() + text.size() || n < 1 || n > 1'000'000 || r < 0 || r >= n)
    return std::nullopt;
  return std::pair{r, n};
}

json stored_config(const RunConfig& c, const StoredFacts& facts) {
  const RunConfig defaults;
  json cfg = {{"units", facts.units}, {"preset_table", facts.preset_table}};
  if (!facts.distributed.is_null()) cfg["distributed"] = facts.distributed;
  for (const auto& o : run_options()) {
    const json value = o.stored_value ? o.stored_value(c) : o.get(c);
    const std::string key(o.stored_key);
    switch (o.stored) {
      case Stored::none: break;
      case Stored::top: cfg[key] = value; break;
      case Stored::top_if_set:
        if (!value.is_null() && value != o.get(defaults)) cfg[key] = value;
        break;
      case Stored::resolved: cfg[key] = o.name == "batch" ? facts.batch : facts.threads; break;
      case Stored::strategy: {
        if (facts.distributed.is_null() || value.is_null()) break;
        const bool applies =
            o.scope == OptionScope::any || (o.scope == OptionScope::ps) == (c.strategy == Strategy::ps);
        if (applies) cfg["distributed"][key] = value;
        break;
      }
    }
  }
  if (!c.suite.name.empty())
    cfg["suite"] = {{"name", c.suite.name}, {"entry", c.suite.entry}, {"repeat", c.suite.repeat}};
  return cfg;
}

json rank_document(const RunConfig& c) {
  json doc = json::object();
  json& options = doc["options"];
  for (const auto& o : run_options()) {
    if (!o.launch) options[std::string(o.name)] = o.get(c);
  }
  doc["command_line"] = c.command_line;
  if (!c.suite.name.empty())
    doc["suite"] = {{"name", c.suite.name}, {"entry", c.suite.entry}, {"repeat", c.suite.repeat}};
  return doc;
}

RunConfig config_from_document(const json& doc) {
  RunConfig c;
  try {
    const json& options = doc.at("options");
    for (const auto& o : run_options()) {
      if (!o.launch) o.set(c, options.at(std::string(o.name)));
    }
    // Derived, as the cli's apply_strategy derives it: the priority of the strategy chosen.
    if (c.strategy == Strategy::ps) c.ps.priority = c.data_parallel.priority;
    c.command_line = doc.at("command_line").get<std::string>();
    if (doc.contains("suite")) {
      const json& s = doc["suite"];
      c.suite = {s.at("name").get<std::string>(), s.at("entry").get<int64_t>(), s.at("repeat").get<int64_t>()};
    }
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("the ranks' configuration cannot be read: ") + e.what());
  }
  return c;
}

std::string encode_document(const json& document) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string text = document.dump();
  std::string word;
  word.reserve(text.size() * 2);
  for (const unsigned char ch : text) {
    word += kHex[ch >> 4];
    word += kHex[ch & 0xf];
  }
  return word;
}

json decode_document(std::string_view word) {
  const auto nibble = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
  };
  if (word.size() % 2 != 0) throw std::invalid_argument("the ranks' configuration is not hex (odd length)");
  std::string text;
  text.reserve(word.size() / 2);
  for (size_t i = 0; i < word.size(); i += 2) {
    const int hi = nibble(word[i]), lo = nibble(word[i + 1]);
    if (hi < 0 || lo < 0) throw std::invalid_argument("the ranks' configuration is not hex");
    text += static_cast<char>(hi << 4 | lo);
  }
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw std::invalid_argument("the ranks' configuration is not JSON");
  return doc;
}

}  // namespace ts::session
