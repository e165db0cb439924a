#include "cli/pytorch_reference.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/progress.h"
#include "collectors/environment.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "importers/kineto_import.h"
#include "store/writer.h"
#include "vocabulary/rates.h"
#include "workloads/workload.h"

#ifndef TS_SOURCE_DIR
#error "TS_SOURCE_DIR must name the source tree (cli/CMakeLists.txt sets it)"
#endif

namespace ts::cli {

namespace {

namespace fs = std::filesystem;

// The reference of each workload, and the name its imported run takes: a3c's script times the
// learner's update alone (no environment), so its run must never pair with a3c's own runs.
struct Reference {
  const char* script;
  const char* run_name;
  const char* samples = nullptr;  // what a sample is, where not the workload's own noun
};
const std::map<std::string, Reference>& references() {
  static const std::map<std::string, Reference> table = {
      {"resnet50", {"resnet50_train.py", "resnet50"}},
      {"inception_v3", {"inception_v3_train.py", "inception_v3"}},
      {"seq2seq", {"seq2seq_train.py", "seq2seq"}},
      {"transformer", {"transformer_train.py", "transformer"}},
      {"faster_rcnn", {"faster_rcnn_train.py", "faster_rcnn"}},
      {"deepspeech2", {"deepspeech2_train.py", "deepspeech2"}},
      {"wgan", {"wgan_train.py", "wgan"}},
      {"a3c", {"a3c_update.py", "a3c_update", "rollout steps (learner update)"}},
  };
  return table;
}

std::string python() {
  const char* p = std::getenv("TS_PYTHON");
  return p && *p ? p : "python3";
}

// TS_PYTORCH_ARGS, split at spaces: more arguments for the reference script.
std::vector<std::string> reference_args() {
  std::vector<std::string> out;
  const char* a = std::getenv("TS_PYTORCH_ARGS");
  std::string word;
  for (const char* p = a ? a : "";; ++p) {
    if (*p == ' ' || *p == '\0') {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
      if (*p == '\0') break;
    } else {
      word += *p;
    }
  }
  return out;
}

// Runs argv (PATH searched), its stdout onto our stderr so that `--json` stays one document;
// `quiet` sends both to /dev/null. Polls the stop flag: a requested stop ends the child (SIGTERM,
// then SIGKILL after 5 s). Returns the exit status (128 + signal when killed), -1 when stopped.
int run_child(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(errno)));
  if (pid == 0) {
    if (quiet) {
      if (const int null = ::open("/dev/null", O_WRONLY); null >= 0)
        ::dup2(null, STDOUT_FILENO), ::dup2(null, STDERR_FILENO);
    } else {
      ::dup2(STDERR_FILENO, STDOUT_FILENO);
    }
    sigset_t all;  // the cli's interrupt thread has them blocked; the script must not
    sigemptyset(&all);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&all, s);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "trainscope: cannot run %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  bool stopping = false;
  auto stop_sent = std::chrono::steady_clock::now();
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (stopping) return -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (done < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("waiting for {}: {}", args[0], std::strerror(errno)));
    if (!stopping && interrupt_requested()) {
      stopping = true;
      stop_sent = std::chrono::steady_clock::now();
      ::kill(pid, SIGTERM);
    } else if (stopping && std::chrono::steady_clock::now() - stop_sent > std::chrono::seconds(5)) {
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void refuse_what_references_lack(const RunConfig& c) {
  const auto refuse = [](const std::string& what) {
    throw UsageError(fmt::format("--framework pytorch runs the PyTorch reference in one process: {} is trainscope's "
                                 "alone (bench/pytorch/ddp_hosts.sh compares data parallelism)",
                                 what));
  };
  if (c.nproc > 1 || !c.hosts.empty() || !c.hostfile.empty()) refuse("--nproc / --hosts");
  if (c.data != "synthetic") refuse("--data " + c.data);
  if (c.eval_every > 0 || c.quality_target) refuse("--eval-every / --quality-target");
  if (c.learners) refuse("--learners");
  if (!c.trace) refuse("--no-trace (the reference is always profiled)");
  if (c.roofline) refuse("--roofline");
}

// torch's build as `torch.__config__.show()` gives it, in the script's result: the BLAS and
// oneDNN lines, the figures a comparison of CPU speed needs beside the version.
std::vector<store::EnvEntry> environment_of(const nlohmann::json& r) {
  std::vector<store::EnvEntry> env;
  const auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const char* key : {"torch_version", "python", "python_version", "mkldnn_available", "mkldnn_enabled",
                          "mkl_available", "openmp_available", "threads", "interop_threads", "cpu", "host",
                          "torch_blas", "torch_onednn", "torch_mkl", "device_name", "cuda_version", "cudnn_version"}) {
    if (r.contains(key) && !r[key].is_null()) env.push_back({fmt::format("pytorch.{}", key), text(r[key])});
  }
  // The machine's, as trainscope's own runs keep them: a side-by-side result names the CPU kind
  // both sides ran on. Not trainscope's build (compiler, libraries): those were not PyTorch's.
  for (const auto& e : collectors::snapshot()) {
    const std::string_view k = e.key;
    if (k.starts_with("cpu.") || k.starts_with("memory.") || k.starts_with("os.") || k.starts_with("host."))
      env.push_back({e.key, e.value});
  }
  return env;
}

std::vector<store::MetricRow> metrics_of(const nlohmann::json& r, const vocabulary::RateUnits& units) {
  std::vector<store::MetricRow> m;
  // As trainscope's own (session/run_session.cpp): the process's peak RSS, and that peak over the
  // process before the model was built; the unprofiled pass's where there was one (the training's,
  // not PyTorch's profiler's), the profiled pass's beside it.
  const bool unprofiled = r.contains("unprofiled") && r["unprofiled"].is_object();
  const nlohmann::json& peaks = unprofiled ? r["unprofiled"] : r;
  if (peaks.contains("peak_rss_bytes"))
    m.push_back({"rss_peak_bytes", peaks["peak_rss_bytes"].get<double>(), "bytes", -1});
  if (peaks.contains("peak_rss_growth_bytes"))
    m.push_back({"rss_peak_growth_bytes", peaks["peak_rss_growth_bytes"].get<double>(), "bytes", -1});
  if (unprofiled && r.contains("peak_rss_growth_bytes"))
    m.push_back({"profiled_rss_peak_growth_bytes", r["peak_rss_growth_bytes"].get<double>(), "bytes", -1});
  if (unprofiled) {
    // The same timed iterations without the profiler: their rates, by the same formula, prefixed.
    const auto seconds = r["unprofiled"].value("iteration_s", nlohmann::json::array());
    const auto samples = r.value("samples_per_iteration", nlohmann::json::array());
    const auto tokens = r.value("tokens_per_iteration", nlohmann::json::array());
    std::vector<vocabulary::TimedIteration> timed;
    for (size_t k = 0; k < seconds.size() && k < samples.size(); ++k)
      timed.push_back(
          {seconds[k].get<double>(), samples[k].get<double>(), k < tokens.size() ? tokens[k].get<double>() : 0});
    for (auto& f : vocabulary::rate_figures(timed, units)) m.push_back({"unprofiled_" + f.name, f.value, f.unit, -1});
  }
  if (r.contains("losses") && !r["losses"].empty()) {
    m.push_back({"loss_first", r["losses"].front().get<double>(), "", -1});
    m.push_back({"loss_last", r["losses"].back().get<double>(), "", -1});
  }
  // The caching allocator's peaks, under the names of trainscope's own GPU runs.
  if (r.contains("device_memory") && r["device_memory"].is_object()) {
    const auto& d = r["device_memory"];
    m.push_back({"gpu0_allocator_used_peak_bytes", d.value("max_allocated_bytes", 0.0), "bytes", -1});
    m.push_back({"gpu0_allocator_reserved_peak_bytes", d.value("max_reserved_bytes", 0.0), "bytes", -1});
  }
  return m;
}

// Each step's facts: the warm-up steps' losses and batch, the timed steps' samples, tokens, losses.
std::vector<importers::StepFacts> steps_of(const nlohmann::json& r, int64_t batch) {
  std::vector<importers::StepFacts> steps;
  for (const auto& loss : r.value("warmup_losses", nlohmann::json::array()))
    steps.push_back({batch, 0, loss.is_number() ? std::optional(loss.get<double>()) : std::nullopt});
  const auto samples = r.value("samples_per_iteration", nlohmann::json::array());
  const auto tokens = r.value("tokens_per_iteration", nlohmann::json::array());
  const auto losses = r.value("losses", nlohmann::json::array());
  for (size_t k = 0; k < samples.size(); ++k) {
    importers::StepFacts f;
    f.samples = samples[k].get<int64_t>();
    f.tokens = k < tokens.size() ? tokens[k].get<int64_t>() : 0;
    if (k < losses.size() && losses[k].is_number()) f.loss = losses[k].get<double>();
    steps.push_back(f);
  }
  return steps;
}

}  // namespace

fs::path pytorch_reference(const std::string& workload) {
  const auto it = references().find(workload);
  if (it == references().end())
    throw UsageError(fmt::format("--framework pytorch: no PyTorch reference for '{}'", workload));
  const char* dir = std::getenv("TS_PYTORCH_REFERENCES");
  return fs::path(dir && *dir ? dir : TS_SOURCE_DIR "/bench/pytorch") / it->second.script;
}

RunOutcome run_pytorch_reference(const RunConfig& c) {
  refuse_what_references_lack(c);
  const workloads::WorkloadSpec* spec = workloads::find_workload(c.workload);
  if (!spec) throw UsageError(fmt::format("unknown workload '{}' (trainscope list)", c.workload));
  const fs::path script = pytorch_reference(c.workload);
  if (!fs::is_regular_file(script))
    throw UsageError(fmt::format("--framework pytorch: the reference {} is not there (TS_PYTORCH_REFERENCES names "
                                 "the folder of bench/pytorch)",
                                 script.string()));
  if (run_child({python(), "-c", "import torch"}, true) != 0)
    throw UsageError(fmt::format("--framework pytorch: {} cannot import torch. PyTorch is an outside dependency: "
                                 "`pip install torch` (CPU wheels: --index-url https://download.pytorch.org/whl/cpu), "
                                 "or set TS_PYTHON to a Python that has it",
                                 python()));
  store::Writer::check_target(c.db);
  const int64_t batch = spec->batch_of(c.preset, c.batch);
  const Reference& reference = references().at(c.workload);
  const std::string run_name = reference.run_name;

  // The trace stays beside the db: the run names it, and Perfetto or HTA can open it too.
  const fs::path traces = fs::path(c.db.string() + ".traces");
  fs::create_directories(traces);
  const auto stamp =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const fs::path trace = traces / fmt::format("pytorch-{}-{}-{}.json.gz", run_name, c.preset, stamp);
  const fs::path result = traces / fmt::format("pytorch-{}-{}-{}.result.json", run_name, c.preset, stamp);
  const fs::path memory = traces / fmt::format("pytorch-{}-{}-{}.memory.json", run_name, c.preset, stamp);

  std::vector<std::string> args = {python(),    script.string(),
                                   "--preset",  c.preset,
                                   "--iters",   std::to_string(c.iterations),
                                   "--warmup",  std::to_string(c.warmup),
                                   "--seed",    std::to_string(c.seed),
                                   "--batch",   std::to_string(batch),
                                   "--profile", trace.string(),
                                   "--json",    result.string()};
  // PyTorch's memory categories need shapes and Python stacks recorded, which cost its steps 2-3% on
  // the small presets (docs/import.md): on unless TS_PYTORCH_MEMORY_CATEGORIES=0 (side_by_side.sh's
  // rate pairs, PyTorch at its best).
  const char* categories = std::getenv("TS_PYTORCH_MEMORY_CATEGORIES");
  const bool memory_categories = !(categories && std::string_view(categories) == "0");
  if (memory_categories) args.insert(args.end(), {"--memory-timeline", memory.string()});
  // PyTorch's profiler slows steps of tiny ops 2-3x (deepspeech2's recurrences, 877 against 380 frames/s:
  // docs/import.md): the same iterations run first without it, for rates it does not touch; off
  // with TS_PYTORCH_UNPROFILED=0 (half the time).
  const char* unprofiled = std::getenv("TS_PYTORCH_UNPROFILED");
  if (!(unprofiled && std::string_view(unprofiled) == "0")) args.push_back("--unprofiled-first");
  // trainscope's default is every core (0): the reference gets the same, never PyTorch's own choice.
  const int64_t threads = c.threads > 0 ? c.threads : online_cores();
  args.insert(args.end(), {"--threads", std::to_string(threads)});
  if (c.device != "cpu") args.insert(args.end(), {"--device", c.device});
  // A variant of the reference (--channels-last, --no-mkldnn, --compile): what side_by_side.sh
  // probes to find the best PyTorch; stored in the run's config.
  const std::vector<std::string> variant = reference_args();
  args.insert(args.end(), variant.begin(), variant.end());
  say(stderr, "trainscope: {}/{} with PyTorch: {} (profiled; its own lines follow)\n", c.workload, c.preset,
      fmt::format("{}", fmt::join(args, " ")));
  const int status = run_child(args, false);
  if (status < 0) {
    say(stderr, "trainscope: stopped: the PyTorch reference was ended before its trace was written; nothing stored\n");
    for (const auto& f : {result, trace, memory}) fs::remove(f);
    return {0, kExitInterrupted, {}};
  }
  if (status != 0) {
    for (const auto& f : {result, trace, memory}) fs::remove(f);
    throw UsageError(fmt::format("--framework pytorch: {} exited with status {} (its messages are above); nothing "
                                 "stored",
                                 script.filename().string(), status));
  }
  nlohmann::json r;
  try {
    r = nlohmann::json::parse(std::ifstream(result));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("the reference's result {} is not JSON: {}", result.string(), e.what()));
  }
  fs::remove(result);

  importers::ImportOptions o;
  o.workload = run_name;
  o.preset = c.preset;
  o.batch_size = batch;
  o.warmup_steps = c.warmup;
  o.steps = steps_of(r, batch);
  o.units = {reference.samples ? reference.samples : spec->units.samples, spec->units.tokens,
             spec->units.tokens_headline};
  o.threads = r.value("threads", c.threads);
  o.seed = c.seed;
  o.parameter_count = r.contains("config") ? r["config"].value("parameters", int64_t{0}) : 0;
  o.config = r.value("config", nlohmann::json::object());
  // The keys trainscope's own runs store, so that `compare` sets the two side by side.
  o.config["preset"] = c.preset;
  o.config["batch"] = batch;
  o.config["device"] = c.device;
  o.config["data"] = c.data;
  o.config["iterations"] = c.iterations;
  o.config["warmup"] = c.warmup;
  o.config["threads"] = o.threads;
  o.config["seed"] = c.seed;
  o.config["framework"] = "pytorch";
  o.config["reference_args"] = fmt::format("{}", fmt::join(variant, " "));
  o.config["reference"] = script.string();
  o.config["units"] = {{"samples", o.units.samples}, {"tokens", spec->units.tokens}, {"batch", spec->units.batch}};
  o.environment = environment_of(r);
  o.metrics = metrics_of(r, o.units);
  if (memory_categories) o.memory_timeline = memory;
  o.command_line = c.command_line;
  CountProgress rows("trainscope: imported", "record");
  o.progress = [&](int pass, int64_t records) {
    if (pass == 2) rows.update(records, records);
  };
  const importers::ImportedRun run = importers::import_kineto_trace(trace, c.db, o);
  rows.finish();
  say(stderr, "trainscope: run {}: {} iterations, {} CPU events, {} layers, {} op names; the trace: {}\n", run.run_id,
      run.iterations, run.cpu_events, run.layers, run.ops, trace.string());
  return {run.run_id, kExitOk, {}};
}

}  // namespace ts::cli
