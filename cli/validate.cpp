// validate(): every check on a RunConfig that can be made before anything is written.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "cli/run_config.h"
#include "distributed/gpu_assignment.h"
#include "distributed/launch.h"
#include "distributed/mpi_runtime.h"
#include "distributed/nccl_rank.h"
#include "engine/device.h"
#include "engine/device_memory.h"
#include "fmt/format.h"
#include "store/error.h"
#include "store/writer.h"
#include "vocabulary/utf8.h"
#include "workloads/workload.h"

namespace ts::cli {

namespace {

// A whole decimal number of type T, an optional '+' (or '-' where T is signed) and digits only.
template <class T>
std::string check_integer_text(std::string& text) {
  std::string_view digits(text);
  const bool plus = digits.starts_with('+');
  if (plus) digits.remove_prefix(1);
  // from_chars takes a '-' for signed types and nothing else before the digits.
  const bool sign_ok = !digits.empty() && (std::isdigit(static_cast<unsigned char>(digits.front())) ||
                                           (std::is_signed_v<T> && digits.front() == '-' && !plus));
  T value{};
  const char* end = digits.data() + digits.size();
  const auto [at, error] = std::from_chars(digits.data(), end, value);
  if (sign_ok && error == std::errc::result_out_of_range) {
    return text + " is out of range (" + std::to_string(std::numeric_limits<T>::min()) + " to " +
           std::to_string(std::numeric_limits<T>::max()) + ")";
  }
  if (!sign_ok || error != std::errc() || at != end) {
    return "'" + text + "' is not a whole " + (std::is_signed_v<T> ? "" : "non-negative ") + "decimal number";
  }
  text = std::to_string(value);  // plain decimal, so that CLI11's base-0 conversion reads the same number
  return "";
}

using Strategy = RunConfig::Strategy;
using session::OptionScope;
using session::OptionType;
using session::run_option;
using session::RunOption;

// A number option within its declared range; NaN and infinities never are.
void check_declared_number(std::string_view name, const RunOption& o, double value) {
  if (!std::isfinite(value)) throw UsageError(fmt::format("{} must be a finite number", name));
  if (value >= o.min && value <= o.max) return;
  throw UsageError(fmt::format("{} must be from {} to {} (got {})", name, o.min, o.max, value));
}

// An integer option within its declared range: "--iters must be from 1 to ... (got 0)".
void check_declared_range(std::string_view name, const RunOption& o, int64_t value) {
  check_range(name, value, static_cast<int64_t>(o.min), static_cast<int64_t>(o.max));
}

// An option as the user wrote it: "--server-hosts", or in a suite "key 'server_hosts'".
std::string option_name(std::string_view flag, bool suite) {
  if (!suite) return "--" + std::string(flag);
  std::string key(flag);
  std::replace(key.begin(), key.end(), '-', '_');
  return "key '" + key + "'";
}

// An option with its value as the user wrote it: "--ps-mode sync", or ps_mode = "sync".
std::string setting(std::string_view flag, std::string_view value, bool suite) {
  if (!suite) return "--" + std::string(flag) + " " + std::string(value);
  std::string key(flag);
  std::replace(key.begin(), key.end(), '-', '_');
  return key + " = \"" + std::string(value) + "\"";
}

void check_chunk_mb(double mb, std::string_view name) {
  const RunOption& o = run_option("chunk-mb");  // its lower bound is exclusive
  if (std::isfinite(mb) && mb > o.min && mb <= o.max) return;
  throw UsageError(fmt::format("{} must be more than {} and at most {} MiB (got {})", name, o.min, o.max, mb));
}

std::vector<distributed::HostSlots> server_hosts_of(const std::string& spec, bool suite) {
  try {
    return distributed::parse_hosts(spec);
  } catch (const std::invalid_argument& e) {
    throw UsageError(option_name("server-hosts", suite) + ": " + e.what());
  }
}

// The workers a launch will start, where known before it: --nproc, or with hosts and --nproc 0
// their slots (less the dedicated servers that share them). Unknown inside a rank (its launcher
// checked) and when the hosts cannot be read (the launcher says why).
std::optional<int64_t> known_workers(const RunConfig& c) {
  if (distributed::launched_as_rank()) return std::nullopt;
  if (c.nproc > 0) return c.nproc;
  std::vector<distributed::HostSlots> hosts;
  try {
    if (!c.hosts.empty()) {
      hosts = distributed::parse_hosts(c.hosts);
    } else if (!c.hostfile.empty()) {
      hosts = distributed::read_hostfile(c.hostfile);
    } else {
      return std::nullopt;
    }
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  int64_t slots = 0;
  for (const auto& h : hosts) slots += h.slots;
  if (c.strategy == Strategy::ps && c.ps.dedicated && c.ps.server_hosts.empty()) slots -= c.ps.servers;
  return slots;
}

// The parameter-server checks on a whole config (whatever made it: the command line, a suite,
// a rank's own arguments).
void validate_ps(const RunConfig& c) {
  const distributed::ps::PsOptions defaults;
  const auto& ps = c.ps;
  if (c.strategy != Strategy::ps) {
    if (ps.servers != defaults.servers || ps.dedicated || !ps.server_hosts.empty() || ps.mode != defaults.mode ||
        ps.staleness != defaults.staleness || ps.priority || ps.chunk_mb != defaults.chunk_mb) {
      throw UsageError("the parameter-server options (--servers, --dedicated-servers, --server-hosts, --ps-mode, "
                       "--staleness, --chunk-mb) need --strategy ps");
    }
    return;
  }
  const distributed::DataParallelOptions dp_defaults;
  const auto& dp = c.data_parallel;
  if (dp.bucket_mb != dp_defaults.bucket_mb || dp.order != dp_defaults.order || dp.overlap != dp_defaults.overlap ||
      dp.partition_mb != dp_defaults.partition_mb || dp.cross_barrier != dp_defaults.cross_barrier) {
    throw UsageError("the all-reduce options (--bucket-mb, --bucket-order, --no-overlap, --partition-mb, "
                     "--no-cross-barrier) do not apply with --strategy ps");
  }
  check_chunk_mb(ps.chunk_mb, "--chunk-mb");
  if (ps.staleness != 0 && ps.mode != distributed::ps::PsMode::bounded) {
    throw UsageError(fmt::format("--staleness {} applies to --ps-mode bounded only (got --ps-mode {})", ps.staleness,
                                 distributed::ps::to_string(ps.mode)));
  }
  if (!ps.server_hosts.empty()) {
    if (!ps.dedicated) throw UsageError("--server-hosts places dedicated servers: it needs --dedicated-servers");
    server_hosts_of(ps.server_hosts, false);
  }
  const auto workers = known_workers(c);
  if (workers && !ps.dedicated) {
    if (*workers == 1) {
      throw UsageError("--strategy ps needs --nproc 2 or more, or --dedicated-servers: its workers and servers are "
                       "MPI ranks, and this run has a single rank");
    }
    if (ps.servers > *workers) {
      throw UsageError(
          fmt::format("--servers {} asks for more co-located servers than there are workers ({}{}): each "
                      "server runs beside one worker; use fewer servers, more workers or --dedicated-servers",
                      ps.servers, c.nproc > 0 ? "--nproc " : "host slots: ", *workers));
    }
  }
}

}  // namespace

bool launches_ranks(const RunConfig& c) {
  return c.nproc > 1 || !c.hosts.empty() || !c.hostfile.empty() || (c.strategy == Strategy::ps && c.ps.dedicated);
}

void apply_strategy(const StrategyInput& in, RunConfig& c, bool suite) {
  const std::string strategy_ps = suite ? "strategy = \"ps\"" : "--strategy ps";
  if (in.strategy) {
    if (*in.strategy == "allreduce") {
      c.strategy = Strategy::allreduce;
    } else if (*in.strategy == "ps") {
      c.strategy = Strategy::ps;
    } else {
      throw UsageError(option_name("strategy", suite) + " must be allreduce or ps (got '" + *in.strategy + "')");
    }
  }
  // Which option names the first problem: in the order the help lists them.
  const std::pair<const char*, bool> ps_given[] = {
      {"servers", in.servers.has_value()},           {"dedicated-servers", in.dedicated_servers.has_value()},
      {"server-hosts", in.server_hosts.has_value()}, {"ps-mode", in.ps_mode.has_value()},
      {"staleness", in.staleness.has_value()},       {"chunk-mb", in.chunk_mb.has_value()}};
  if (c.strategy != Strategy::ps) {
    for (const auto& [flag, given] : ps_given) {
      if (given) throw UsageError(option_name(flag, suite) + " needs " + strategy_ps);
    }
    return;
  }
  if (!in.allreduce_only.empty()) {
    const std::string& first = in.allreduce_only.front();
    throw UsageError((suite ? "key '" + first + "'" : first) + " is an all-reduce option: it does not apply with " +
                     strategy_ps);
  }
  auto& ps = c.ps;
  if (in.servers) {
    check_declared_range(option_name("servers", suite), run_option("servers"), *in.servers);
    ps.servers = static_cast<int>(*in.servers);
  }
  if (in.dedicated_servers) ps.dedicated = *in.dedicated_servers;
  if (in.server_hosts) {
    if (in.dedicated_servers == false) {
      throw UsageError(option_name("server-hosts", suite) + " places dedicated servers: it contradicts " +
                       (suite ? "dedicated_servers = false" : "--dedicated-servers=false"));
    }
    server_hosts_of(*in.server_hosts, suite);
    ps.server_hosts = *in.server_hosts;
    ps.dedicated = true;  // servers placed on hosts are ranks of their own
  }
  if (in.ps_mode) {
    const auto mode = distributed::ps::parse_ps_mode(*in.ps_mode);
    if (!mode) {
      throw UsageError(option_name("ps-mode", suite) + " must be sync, async, bounded or eager (got '" + *in.ps_mode +
                       "')");
    }
    ps.mode = *mode;
  }
  if (in.staleness) {
    check_declared_range(option_name("staleness", suite), run_option("staleness"), *in.staleness);
    if (!in.ps_mode) {
      ps.mode = distributed::ps::PsMode::bounded;  // a bound on staleness asks for bounded staleness
    } else if (ps.mode != distributed::ps::PsMode::bounded) {
      throw UsageError(fmt::format("{} {} applies to {} only (got {})", option_name("staleness", suite), *in.staleness,
                                   setting("ps-mode", "bounded", suite), setting("ps-mode", *in.ps_mode, suite)));
    }
    ps.staleness = *in.staleness;
  }
  if (in.chunk_mb) {
    check_chunk_mb(*in.chunk_mb, option_name("chunk-mb", suite));
    ps.chunk_mb = *in.chunk_mb;
  }
  ps.priority = c.data_parallel.priority;  // --priority: the front layers' keys first
}

bool set_by_strategy(const RunOption& o) { return o.name == "strategy" || o.scope == OptionScope::ps; }

void apply_options(const std::vector<GivenOption>& given, RunConfig& c, bool suite) {
  StrategyInput strategy;
  bool nproc_given = false;
  for (const auto& [o, value] : given) {
    nproc_given = nproc_given || o->name == "nproc";
    if (o->scope == OptionScope::allreduce) {
      strategy.allreduce_only.push_back(suite ? std::string(o->suite_key) : o->flag());
    }
    if (o->type == OptionType::number && o->has_range() && !o->min_exclusive) {
      check_declared_number(suite ? "key '" + std::string(o->suite_key) + "'" : o->flag(), *o, value.get<double>());
    }
    if (!set_by_strategy(*o)) {
      o->set(c, value);
      continue;
    }
    // The strategy's options interact (--staleness implies bounded, ...): apply_strategy sets them.
    const std::string_view n = o->name;
    if (n == "strategy") strategy.strategy = value.get<std::string>();
    if (n == "servers") strategy.servers = value.get<int64_t>();
    if (n == "dedicated-servers") strategy.dedicated_servers = value.get<bool>();
    if (n == "server-hosts") strategy.server_hosts = value.get<std::string>();
    if (n == "ps-mode") strategy.ps_mode = value.get<std::string>();
    if (n == "staleness") strategy.staleness = value.get<int64_t>();
    if (n == "chunk-mb") strategy.chunk_mb = value.get<double>();
  }
  if (!nproc_given && (!c.hosts.empty() || !c.hostfile.empty())) c.nproc = 0;  // one rank per slot
  apply_strategy(strategy, c, suite);
}

void check_range(std::string_view option, int64_t value, int64_t min, int64_t max, std::string_view note) {
  if (value >= min && value <= max) return;
  throw UsageError(std::string(option) + " must be from " + std::to_string(min) + " to " + std::to_string(max) +
                   std::string(note) + " (got " + std::to_string(value) + ")");
}

void validate_launch(int64_t nproc, const std::string& hosts, const std::filesystem::path& hostfile) {
  const bool hosts_given = !hosts.empty() || !hostfile.empty();
  check_range("--nproc", nproc, hosts_given ? 0 : 1, static_cast<int64_t>(run_option("nproc").max),
              hosts_given ? " (0: one rank per host slot)" : "");
  if (!hosts.empty() && !hostfile.empty()) throw UsageError("give --hosts or --hostfile, not both");
  if (const int tasks = distributed::srun_tasks_without_rank(); tasks > 1) {
    throw UsageError(fmt::format(
        "srun started this as one of {} tasks without giving it an MPI rank (no PMIx in its environment): each "
        "task would train alone and store a run of its own. Start the ranks with `srun --mpi=pmix` (Slurm's PMIx "
        "plugin; Debian's Open MPI has no PMI-2 support, so --mpi=pmi2 does not work with it): docs/distributed.md, "
        "\"Slurm\"",
        tasks));
  }
}

std::optional<std::pair<std::string, std::string>> split_mca(std::string_view option) {
  const auto eq = option.find('=');
  if (eq == std::string_view::npos || eq == 0) return std::nullopt;
  return std::make_pair(std::string(option.substr(0, eq)), std::string(option.substr(eq + 1)));
}

std::string check_int64_text(std::string& text) { return check_integer_text<int64_t>(text); }
std::string check_uint64_text(std::string& text) { return check_integer_text<uint64_t>(text); }

std::string check_run_id_text(std::string& text) {
  if (std::string why = check_int64_text(text); !why.empty()) return why;
  if (std::stoll(text) < 1) return "run ids start at 1 (got " + text + ")";
  return "";
}

std::string check_count_text(std::string& text) {
  if (std::string why = check_int64_text(text); !why.empty()) return why;
  if (std::stoll(text) < 0) return text + " is below 0";
  return "";
}

namespace {
// `text` with every byte outside printable ASCII as \xNN: safe to print whatever it holds.
std::string printable_bytes(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F) out += ch;
    else out += fmt::format("\\x{:02X}", c);
  }
  return out;
}
}  // namespace

void check_utf8(std::string_view text, std::string_view what) {
  const auto bad = vocabulary::first_invalid_utf8(text);
  if (!bad) return;
  throw UsageError(fmt::format("{} '{}' is not valid UTF-8 (byte {} is 0x{:02X}): trainscope stores it as JSON text, "
                               "which must be UTF-8; rename it, or give another",
                               what, printable_bytes(text), *bad, static_cast<unsigned char>(text[*bad])));
}

void validate(const RunConfig& c) {
  // Paths are stored absolute (the ranks' configuration, the run's config): the working
  // directory's name counts too.
  check_utf8(std::filesystem::absolute(c.db).string(), "the db path");
  if (!c.hostfile.empty()) check_utf8(std::filesystem::absolute(c.hostfile).string(), "the hostfile path");
  const auto* spec = workloads::find_workload(c.workload);
  if (!spec) {
    std::string names;
    for (const auto& n : workloads::workload_names()) names += (names.empty() ? "" : ", ") + n;
    throw UsageError("unknown workload '" + c.workload + "' (available: " + names + ")");
  }
  if (!spec->preset(c.preset)) {
    std::string names;
    for (const auto& p : spec->presets) names += (names.empty() ? "" : ", ") + p.name;
    throw UsageError("workload " + c.workload + " has no preset '" + c.preset + "' (available: " + names + ")");
  }
  // Ranges first, so that no size is ever computed from an absurd number. A batch in range may
  // still not fit the machine: what one sample takes is only known once the workload builds its
  // data, so that limit is the engine's (checked sizes, an out-of-memory error naming the bytes
  // and the tensor), and such a run ends as failed rather than being refused here.
  // More threads than cores are refused, not capped with a warning: the threads are OpenMP's,
  // whose barriers spin, so 1000 threads on 2 cores never finished; and a capped run would store
  // a thread count other than the one asked for. The machine's bound comes before the table's.
  const int64_t cores = online_cores();
  check_range("--threads", c.threads, 0, cores,
              " (0: all cores; this machine has " + std::to_string(cores) + " CPU cores online)");
  // Every integer option in its declared range (--nproc: validate_launch, 0 with hosts).
  for (const auto& o : session::run_options()) {
    if (o.type != OptionType::integer || !o.has_range() || o.launch) continue;
    if (const auto value = o.get(c); !value.is_null()) check_declared_range(o.flag(), o, value.get<int64_t>());
  }
  if (c.learners && !spec->has_learners) {
    throw UsageError("workload " + c.workload + " has no actor-learner threads: --learners applies to a3c");
  }
  validate_launch(c.nproc, c.hosts, c.hostfile);
  if (!c.shard.empty()) {
    if (!session::parse_shard(c.shard))
      throw UsageError("--shard " + c.shard + ": give R/N, rank R (from 0) of N ranks, e.g. 0/2");
    if (c.nproc > 1 || !c.hosts.empty() || !c.hostfile.empty())
      throw UsageError("--shard is for one process: the ranks of a job read their shards themselves");
    if (spec->has_learners) throw UsageError("--shard: " + c.workload + " trains on one process only");
  }
  engine::Device device;
  try {
    device = engine::parse_device(c.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const bool hosts_given = !c.hosts.empty() || !c.hostfile.empty();
  const bool several_ranks =
      c.nproc > 1 || hosts_given || distributed::launched_as_rank() || (c.strategy == Strategy::ps && c.ps.dedicated);
  if (several_ranks && spec->has_learners && c.strategy == Strategy::allreduce) {
    throw UsageError(c.workload + "'s actor-learners are asynchronous: run it across ranks with --strategy ps "
                                  "(or on one rank, with threads: --learners)");
  }
  if (spec->has_learners && c.strategy == Strategy::ps &&
      (c.ps.mode == distributed::ps::PsMode::sync || c.ps.mode == distributed::ps::PsMode::bounded)) {
    // Each learner pushes when its rollout is done and reads whatever the servers hold then:
    // there are no steps for all workers to agree on or to bound.
    throw UsageError(fmt::format("{}'s actor-learners push to the parameter server asynchronously: use --ps-mode async "
                                 "or eager (got {})",
                                 c.workload, distributed::ps::to_string(c.ps.mode)));
  }
  if (spec->has_learners && c.strategy == Strategy::ps && device.type == engine::DeviceType::cuda) {
    // Its learners read and push through the parameter service with host copies of the network.
    throw UsageError(c.workload +
                     "'s actor-learners train on the parameter server from the CPU: --device cpu (got "
                     "--device " +
                     c.device + ")");
  }
  validate_ps(c);
  if (c.roofline) {
    if (!c.trace)
      throw UsageError("--roofline sets the ops' work against the machine: it needs per-op events (drop --no-trace)");
    if (!device.is_cpu()) {
      throw UsageError("--roofline measures the CPU's peaks; a GPU run's kernels are timed by CUPTI (got --device " +
                       c.device + ")");
    }
  }
  if (c.eval_every > 0 && c.eval_batches == 0)
    throw UsageError("--eval-every needs held-out batches: --eval-batches 1 or more");
  if (c.quality_target) {
    check_declared_number("--quality-target", run_option("quality-target"), *c.quality_target);
    if (c.eval_every == 0)
      throw UsageError("--quality-target needs --eval-every: the quality is measured during training");
  }
  if (c.gpu_gradients != distributed::GpuGradients::automatic && device.type != engine::DeviceType::cuda) {
    throw UsageError(fmt::format("--gpu-gradients {} chooses how a GPU model's gradients travel between ranks: it "
                                 "needs --device cuda (got --device {})",
                                 distributed::to_string(c.gpu_gradients), c.device));
  }
  if (device.type == engine::DeviceType::cuda) {
    std::string why;
    if (!engine::device_usable(device, &why)) throw UsageError("device '" + c.device + "' is not usable: " + why);
    // All ranks on this host, NCCL asked for: refused here, before mpirun starts any (a host
    // given with --hosts is checked by its ranks, which say so on every rank).
    if (c.gpu_gradients == distributed::GpuGradients::nccl && c.nproc > 1 && !hosts_given &&
        !distributed::launched_as_rank()) {
      const int ranks = static_cast<int>(c.nproc);
      const std::string too_few = c.device == "cuda" ? distributed::gpus_too_few(ranks, distributed::local_gpu_count())
                                                     : "cuda:N puts every rank on one GPU, which NCCL refuses";
      if (!too_few.empty()) {
        throw UsageError("--gpu-gradients nccl with --nproc " + std::to_string(ranks) + ": " + too_few +
                         "; --gpu-gradients host (or auto) averages the gradients through the host instead");
      }
    }
  } else if (!device.is_cpu()) {
    throw UsageError("device '" + c.device + "' cannot run a workload (use cpu, cuda or cuda:N)");
  }
  if (spec->check) {
    workloads::WorkloadConfig wc;
    wc.preset = c.preset;
    wc.data = c.data;
    try {
      spec->check(wc);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  try {
    store::Writer::check_target(c.db);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace ts::cli
