// validate(): every check on a RunConfig that can be made before anything is written.
#include <stdexcept>
#include <string>

#include "cli/run_config.h"
#include "engine/device.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/device_memory.h"
#endif
#include "store/error.h"
#include "store/writer.h"
#include "workloads/workload.h"

namespace ts::cli {

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
  if (c.batch && *c.batch <= 0) throw UsageError("--batch must be positive (got " + std::to_string(*c.batch) + ")");
  if (c.learners) {
    if (*c.learners <= 0) throw UsageError("--learners must be positive (got " + std::to_string(*c.learners) + ")");
    if (!spec->has_learners) {
      throw UsageError("workload " + c.workload + " has no actor-learner threads: --learners applies to a3c");
    }
  }
  if (c.iterations <= 0) throw UsageError("--iters must be positive (got " + std::to_string(c.iterations) + ")");
  if (c.warmup < 0) throw UsageError("--warmup must not be negative");
  if (c.threads < 0) throw UsageError("--threads must be positive");
  if (c.eval_batches < 0) throw UsageError("--eval-batches must not be negative");
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
