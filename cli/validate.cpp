// validate(): every check on a RunConfig that can be made before anything is written.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "cli/run_config.h"
#include "dist/mpi_runtime.h"
#include "engine/device.h"
#include "engine/device.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/device_memory.h"
#endif
#include "store/error.h"
#include "store/writer.h"
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
  text = std::to_string(value);   // plain decimal, so that CLI11's base-0 conversion reads the same number
  return "";
}

}  // namespace

void check_range(std::string_view option, int64_t value, int64_t min, int64_t max, std::string_view note) {
  if (value >= min && value <= max) return;
  throw UsageError(std::string(option) + " must be from " + std::to_string(min) + " to " + std::to_string(max) +
                   std::string(note) + " (got " + std::to_string(value) + ")");
}

void validate_launch(int64_t nproc, const std::string& hosts, const std::filesystem::path& hostfile) {
  const bool hosts_given = !hosts.empty() || !hostfile.empty();
  check_range("--nproc", nproc, hosts_given ? 0 : 1, kMaxRanks, hosts_given ? " (0: one rank per host slot)" : "");
  if (!hosts.empty() && !hostfile.empty()) throw UsageError("give --hosts or --hostfile, not both");
}

std::optional<std::pair<std::string, std::string>> split_mca(std::string_view option) {
  const auto eq = option.find('=');
  if (eq == std::string_view::npos || eq == 0) return std::nullopt;
  return std::make_pair(std::string(option.substr(0, eq)), std::string(option.substr(eq + 1)));
}

std::string check_int64_text(std::string& text) { return check_integer_text<int64_t>(text); }
std::string check_uint64_text(std::string& text) { return check_integer_text<uint64_t>(text); }

void validate(const RunConfig& c) {
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
  if (c.batch) check_range("--batch", *c.batch, 1, kMaxBatch);
  if (c.learners) {
    check_range("--learners", *c.learners, 1, kMaxLearners);
    if (!spec->has_learners) {
      throw UsageError("workload " + c.workload + " has no actor-learner threads: --learners applies to a3c");
    }
  }
  validate_launch(c.nproc, c.hosts, c.hostfile);
  const bool hosts_given = !c.hosts.empty() || !c.hostfile.empty();
  const bool several_ranks = c.nproc > 1 || hosts_given || dist::launched_as_rank();
  if (several_ranks && spec->has_learners) {
    throw UsageError("workload " + c.workload +
                     "'s actor-learners are asynchronous by design: across processes they belong with a parameter "
                     "server, which trainscope does not have yet; run it with --nproc 1 (threads: --learners)");
  }
  if (several_ranks && engine::parse_device(c.device).type != engine::DeviceType::cpu) {
    throw UsageError("data parallelism runs on the CPU for now (--device cpu); GPU ranks over NCCL are not built yet");
  }
  check_range("--iters", c.iterations, 1, kMaxIterations);
  check_range("--warmup", c.warmup, 0, kMaxWarmup);
  check_range("--eval-batches", c.eval_batches, 0, kMaxEvalBatches);
  // More threads than cores are refused, not capped with a warning: the threads are OpenMP's,
  // whose barriers spin, so 1000 threads on 2 cores never finished; and a capped run would store
  // a thread count other than the one asked for.
  const int64_t cores = online_cores();
  check_range("--threads", c.threads, 0, cores,
              " (0: all cores; this machine has " + std::to_string(cores) + " CPU cores online)");
  engine::Device device;
  try {
    device = engine::parse_device(c.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (device.type == engine::DeviceType::cuda) {
#ifdef TS_HAVE_CUDA
    std::string why;
    if (!engine::cuda::device_usable(device.index, &why)) {
      throw UsageError("device '" + c.device + "' is not usable: " + why);
    }
#else
    throw UsageError("device '" + c.device +
                     "' is not available: this build has no CUDA (configure with -DTS_CUDA=ON where nvcc, cuDNN, "
                     "CUPTI and NCCL are installed; see docs/gpu-machine.md)");
#endif
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
