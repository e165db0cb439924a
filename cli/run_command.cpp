#include "cli/run_command.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <functional>
#include <optional>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/progress.h"
#include "cli/record.h"
#include "cli/run_stream.h"
#include "cli/summary.h"
#include "cli/utc_time.h"
#include "collectors/environment.h"
#include "collectors/process_sampler.h"
#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/device_memory.h"
#endif
#include "engine/device.h"
#include "fmt/format.h"
#include "memprof/ledger.h"
#include "nlohmann/json.hpp"
#include "profiler/gpu_tracer.h"
#include "profiler/tracer.h"
#include "store/error.h"
#include "store/liveness.h"
#include "store/writer.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

namespace ts::cli {

namespace {

// The host allocator's cache over the run (CPU blocks of 1 MiB and more): a miss is a block
// fresh from the system, whose page faults make the op that first writes it slow.
void record_host_allocator(const engine::cpu::HostAllocatorStats& before, RunRecorder& recorder) {
  const auto s = engine::cpu::host_allocator_stats();
  recorder.add_metric({"host_cache_hits", static_cast<double>(s.hits - before.hits), "allocations", -1});
  recorder.add_metric({"host_cache_misses", static_cast<double>(s.misses - before.misses), "allocations", -1});
  recorder.add_metric(
      {"host_cache_evicted_bytes", static_cast<double>(s.evicted_bytes - before.evicted_bytes), "bytes", -1});
}

}  // namespace

namespace {

// The device allocator's books and the driver's view, side by side (GPU runs): what CUPTI's
// memory records add to them is stored by the recorder. And whether TF32 was allowed.
void record_device_memory(const engine::Device& device, RunRecorder& recorder) {
#ifdef TS_HAVE_CUDA
  if (device.type != engine::DeviceType::cuda) return;
  const int d = device.index;
  const std::string p = fmt::format("gpu{}_", d);
  const auto s = engine::cuda::device_allocator(d).stats();
  recorder.add_metric({p + "allocator_reserved_peak_bytes", static_cast<double>(s.peak_reserved_bytes), "bytes", -1});
  recorder.add_metric({p + "allocator_used_peak_bytes", static_cast<double>(s.peak_used_bytes), "bytes", -1});
  recorder.add_metric({p + "allocator_reserved_bytes", static_cast<double>(s.reserved_bytes), "bytes", -1});
  const auto info = engine::cuda::device_memory_info(d);
  if (info.ok) {
    recorder.add_metric({p + "driver_used_bytes", static_cast<double>(info.total_bytes - info.free_bytes), "bytes", -1});
    recorder.add_metric({p + "driver_total_bytes", static_cast<double>(info.total_bytes), "bytes", -1});
  }
  recorder.add_metric({"tf32_allowed", engine::cuda::tf32_allowed() ? 1.0 : 0.0, "", -1});
#else
  (void)device;
  (void)recorder;
#endif
}

// Where a run's results go when its db stays locked (or fails) at the final write: a side
// file next to it, named for the run and the process, that `trainscope import` merges.
std::filesystem::path spill_path(const std::filesystem::path& db, int64_t run_id) {
  return std::filesystem::path(db.string() + fmt::format(".run{}-{}.spill", run_id, ::getpid()));
}

// The final write could not reach the db: the whole run, streamed parts included, into a side
// file. Returns its path, or throws when that fails too.
std::filesystem::path spill(const std::filesystem::path& db, const store::RunInfo& info, int64_t run_id,
                            const std::function<void(RunRecorder&)>& record_everything, store::RunStatus status,
                            const std::string& error) {
  const auto path = spill_path(db, run_id);
  store::Writer side(path);
  const int64_t id = side.begin_run(info);
  RunRecorder recorder(side, id);
  record_everything(recorder);
  side.finish_run(id, status, utc_now(), error);
  return path;
}

}  // namespace

RunOutcome execute_run(const RunConfig& c, const std::string& progress_label) {
  validate(c);
  const auto& spec = *workloads::find_workload(c.workload);
  const auto& preset = *spec.preset(c.preset);
  const int threads = static_cast<int>(c.threads > 0 ? c.threads : online_cores());  // validate() bounds it
  omp_set_num_threads(threads);

  // The run has a row from the start, so a crash or Ctrl-C later still leaves a record.
  store::Writer writer(c.db, c.lock_wait);
  workloads::WorkloadConfig wc;
  wc.preset = c.preset;
  wc.device = engine::parse_device(c.device);
  wc.batch = c.batch.value_or(0);
  wc.learners = c.learners.value_or(0);
  wc.seed = c.seed;
  wc.data = c.data;

  store::RunInfo info;
  info.workload = c.workload;
  info.preset = c.preset;
  info.device = c.device;
  info.batch_size = c.batch.value_or(preset.default_batch);
  info.iterations = c.iterations;
  info.warmup = c.warmup;
  info.threads = threads;
  info.seed = c.seed;
  info.trace = c.trace;
  info.started_at = utc_now();
  info.command_line = c.command_line;
  const store::ProcessIdentity me = store::current_process();
  info.host = me.host;
  info.boot_id = me.boot_id;
  info.pid = me.pid;
  info.pid_start = me.pid_start;
  info.heartbeat_interval_ms = c.flush_interval.count();
  nlohmann::json cfg = {{"workload", c.workload}, {"preset", c.preset}, {"device", c.device}, {"data", c.data},
                        {"batch", info.batch_size}, {"iterations", c.iterations}, {"warmup", c.warmup},
                        {"threads", threads}, {"seed", c.seed}, {"trace", c.trace}, {"eval_batches", c.eval_batches}};
  nlohmann::json table = nlohmann::json::object();
  for (const auto& [k, v] : preset.table) table[k] = v;
  if (c.learners) cfg["learners"] = *c.learners;
  cfg["preset_table"] = table;
  info.config_json = cfg.dump();
  const int64_t run_id = writer.begin_run(info);
  set_current_run(c.db, run_id);  // what a second Ctrl-C marks
  writer.add_environment(run_id, to_env_rows(collectors::snapshot()));

  auto& tracer = profiler::Tracer::global();
  auto& ledger = memprof::Ledger::global();
  tracer.clear();
  ledger.clear();
  tracer.set_enabled(true);
  engine::set_op_tracing(c.trace);
  collectors::ProcessSampler sampler;
  sampler.start(std::chrono::milliseconds(200));
  std::optional<RunStream> stream;
  try {
    stream.emplace(c.db, run_id, sampler, RunStream::Options{.interval = c.flush_interval});
  } catch (const std::exception& e) {  // the run row exists: not "bad input, nothing written"
    sampler.stop();
    tracer.set_enabled(false);
    const std::string why = std::string("cannot write the run while it runs: ") + e.what();
    writer.finish_run(run_id, store::RunStatus::failed, utc_now(), why);
    clear_current_run();
    throw std::runtime_error(why);
  }

  RunRecorder recorder(writer, run_id);
  // On a GPU with tracing on: CUPTI activity tracing and NVTX ranges (docs/cli.md, "GPU tracing").
  std::unique_ptr<profiler::GpuTracer> gpu;
  if (wc.device.type == engine::DeviceType::cuda && c.trace) {
    gpu = profiler::GpuTracer::start(tracer);
    fmt::print(stderr, "trainscope: {}\n", gpu->status());
    const std::vector<store::EnvEntry> note = {{"gpu_tracing", gpu->status()}};
    writer.add_environment(run_id, note);
  }
  bool gpu_stopped = false;
  const auto host_before = engine::cpu::host_allocator_stats();
  const auto stop_gpu = [&] {  // once: after the loop, or after a failure
    if (gpu_stopped) return;
    gpu_stopped = true;
    if (gpu) recorder.set_gpu_trace(gpu->stop());
    gpu.reset();
    record_device_memory(wc.device, recorder);
    record_host_allocator(host_before, recorder);
  };
  const std::atomic<bool>& stop = stop_flag();
  workloads::LoopResult loop;
  std::unique_ptr<workloads::Workload> workload;
  std::string failure;
  bool cancelled = false;  // Ctrl-C while building or evaluating, which stop at their next op
  workloads::Quality quality;
  bool have_quality = false;
  try {
    {
      engine::CancelScope cancel(&stop);
      workload = spec.create(wc);
    }
    const int64_t params = workload->model().parameter_count();
    recorder.set_parameter_count(params);
    const std::string label = progress_label.empty() ? c.workload + "/" + c.preset : progress_label;
    Progress progress(label, c.warmup + c.iterations);
    workloads::LoopOptions lo;
    lo.iterations = c.iterations;
    lo.warmup = c.warmup;
    lo.stop = &stop;
    lo.on_iteration = [&](const workloads::IterationResult& it) {
      stream->add_iteration(it);
      const double secs = static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
      progress.update(it.index + 1, secs > 0 ? static_cast<double>(it.samples) / secs : 0.0, it.warmup);
    };
    if (!stop.load()) {
      profiler::Range run_range(tracer.intern(c.workload + "/" + c.preset), profiler::EventKind::run);
      loop = workloads::run_training(*workload, lo);
    }
    stop_gpu();  // evaluation is not traced on the GPU
    progress.finish(loop.failed ? "failed" : (loop.interrupted || stop.load()) ? "interrupted" : "done");
    // Evaluation is not a training iteration: its events must not count in the timed figures.
    tracer.set_iteration(-1);
    ledger.set_iteration(-1);
    if (!loop.failed && !loop.interrupted && !stop.load() && c.eval_batches > 0) {
      engine::CancelScope cancel(&stop);
      quality = workloads::run_evaluation(*workload, c.eval_batches);
      have_quality = true;
    }
  } catch (const engine::Cancelled&) {
    cancelled = true;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  stop_gpu();
  sampler.stop();
  tracer.set_enabled(false);
  const std::vector<profiler::Event> events = stream->finish();

  const bool interrupted = cancelled || loop.interrupted || (stop.load() && failure.empty() && !loop.failed);
  store::RunStatus status = store::RunStatus::completed;
  std::string error = failure.empty() ? loop.error : failure;
  if (!error.empty()) status = store::RunStatus::failed;
  else if (interrupted) status = store::RunStatus::interrupted;

  // The final write, all or nothing: what the flushes could not write, the summaries, the
  // status. Whatever was measured is stored, whatever the status.
  const auto samples = sampler.samples();
  const engine::nn::Module* model = workload ? &workload->model() : nullptr;
  const workloads::Quality* measured_quality = have_quality ? &quality : nullptr;
  std::filesystem::path spilled;
  try {
    store::Writer::Transaction tx(writer);
    store::RunFlush rest = stream->take_unwritten();
    rest.heartbeat_ms = store::unix_time_ms();
    writer.flush(run_id, rest);
    recorder.record(loop, events, model, samples, measured_quality, RecordScope::after_streaming);
    writer.finish_run(run_id, status, utc_now(), error);
    tx.commit();
  } catch (const std::exception& e) {
    const std::string why = e.what();
    fmt::print(stderr, "\ntrainscope: could not store run {} in '{}': {}\n", run_id, c.db.string(), why);
    try {
      spilled = spill(
          c.db, info, run_id,
          [&](RunRecorder& side) {
            side.set_parameter_count(workload ? workload->model().parameter_count() : 0);
            side.record(loop, events, model, samples, measured_quality, RecordScope::everything);
          },
          status, error);
      fmt::print(stderr,
                 "trainscope: run {}'s results are kept whole in '{}'; merge them into the db with\n"
                 "  trainscope import '{}' --db '{}'\n",
                 run_id, spilled.string(), spilled.string(), c.db.string());
    } catch (const std::exception& spill_error) {
      error += (error.empty() ? "" : "; ") + std::string("storing results: ") + why;
      fmt::print(stderr, "trainscope: and could not write them to '{}' either: {}\n", spill_path(c.db, run_id).string(),
                 spill_error.what());
      status = store::RunStatus::failed;
      try {  // at least the verdict, if the db takes it now
        writer.finish_run(run_id, status, utc_now(), error);
      } catch (const std::exception&) {
      }
    }
  }
  clear_current_run();

  RunOutcome out;
  out.run_id = run_id;
  out.spill_file = spilled;
  out.exit_code = !spilled.empty()                             ? kExitSpilled
                  : status == store::RunStatus::completed      ? kExitOk
                  : status == store::RunStatus::interrupted    ? kExitInterrupted
                                                               : kExitRunFailed;
  if (!error.empty()) fmt::print(stderr, "trainscope: run {} failed: {}\n", run_id, error);
  return out;
}

}  // namespace ts::cli
