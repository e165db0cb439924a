#include "session/run_session.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include "collectors/environment.h"
#include "collectors/process_sampler.h"
#include "distributed/data_parallel.h"
#include "distributed/mpi_communicator.h"
#include "distributed/ps/ps_job.h"
#include "distributed/rank_hosts.h"
#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/device_memory.h"
#endif
#include "engine/device.h"
#include "engine/peaks.h"
#include "fmt/format.h"
#include "memprof/ledger.h"
#include "nlohmann/json.hpp"
#include "profiler/gpu_tracer.h"
#include "profiler/tracer.h"
#include "session/quality_curve.h"
#include "session/rank_channel.h"
#include "session/rank_records.h"
#include "session/record.h"
#include "session/run_stream.h"
#include "session/utc_time.h"
#include "store/error.h"
#include "store/liveness.h"
#include "store/writer.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

namespace ts::session {

namespace {

// How long rank 0 waits, after its own loop, for the other ranks' final records.
constexpr std::chrono::seconds kFinalRecordsWait{120};

// The host allocator's cache over the run (CPU blocks of 64 KiB and more): a miss is a block
// fresh from the system, whose page faults make the op that first writes it slow.
void record_host_allocator(const engine::cpu::HostAllocatorStats& before, RunRecorder& recorder) {
  const auto s = engine::cpu::host_allocator_stats();
  recorder.add_metric({"host_cache_hits", static_cast<double>(s.hits - before.hits), "allocations", -1});
  recorder.add_metric({"host_cache_misses", static_cast<double>(s.misses - before.misses), "allocations", -1});
  recorder.add_metric(
      {"host_cache_evicted_bytes", static_cast<double>(s.evicted_bytes - before.evicted_bytes), "bytes", -1});
}

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

// The machine's limits the roofline sets the step against (--roofline): SGEMM and copy on one
// thread and on the run's threads, measured after the loop so that they take nothing from it.
void record_machine_peaks(int threads, bool quiet, RunRecorder& recorder) {
  if (!quiet) fmt::print(stderr, "trainscope: measuring the machine's SGEMM peak and copy bandwidth (--roofline)\n");
  const engine::MachinePeaks one = engine::measure_peaks(engine::Device::cpu(), 1);
  const engine::MachinePeaks all = threads > 1 ? engine::measure_peaks(engine::Device::cpu(), threads) : one;
  recorder.add_metric({"machine_sgemm_gflops_1t", one.sgemm_gflops, "GFLOP/s", -1});
  recorder.add_metric({"machine_copy_gbps_1t", one.copy_gbps, "GB/s", -1});
  recorder.add_metric({"machine_sgemm_gflops", all.sgemm_gflops, "GFLOP/s", -1});
  recorder.add_metric({"machine_copy_gbps", all.copy_gbps, "GB/s", -1});
  recorder.add_metric({"machine_peak_threads", static_cast<double>(all.threads), "threads", -1});
}

// Where a run's results go when its db stays locked (or fails) at the final write: a side
// file next to it, named for the run and the process, that `trainscope import` merges.
std::filesystem::path spill_path(const std::filesystem::path& db, int64_t run_id) {
  return std::filesystem::path(db.string() + fmt::format(".run{}-{}.spill", run_id, ::getpid()));
}

// The final write could not reach the db: the whole run, streamed parts included, into a side
// file. Returns its path, or throws when that fails too.
std::filesystem::path spill(const std::filesystem::path& db, const store::RunInfo& info, int64_t run_id,
                            const std::function<void(store::Writer&, RunRecorder&, int64_t)>& record_everything,
                            store::RunStatus status, const std::string& error) {
  const auto path = spill_path(db, run_id);
  store::Writer side(path);
  const int64_t id = side.begin_run(info);
  RunRecorder recorder(side, id);
  record_everything(side, recorder, id);
  side.finish_run(id, status, utc_now(), error);
  return path;
}

// What this rank adds about itself beyond its streamed rows: its communication breakdown per
// timed iteration, its collectives summarised, and the counts a reader checks the rows against.
struct RankSummary {
  std::vector<store::RankBreakdownRow> breakdown;
  std::vector<store::CommOpRow> comm_ops;
  std::vector<store::MetricRow> metrics;
  std::vector<store::PsStalenessRow> ps_staleness;   // what this rank's server applied
  std::vector<store::PsServerRow> ps_servers;
};

// A parameter server's figures on this rank: its worker's pushes, its server's work and the
// staleness of what that server applied (per worker and iteration), the layout's balance.
void summarise_ps(const distributed::ps::PsJob& job, int rank, RankSummary& s) {
  if (rank == 0) {
    s.metrics.push_back({"ps_keys", static_cast<double>(job.layout().keys.size()), "keys", -1});
    s.metrics.push_back({"ps_server_imbalance", job.layout().imbalance(), "max/mean bytes", -1});
  }
  if (const distributed::ps::PsWorker* w = job.worker()) {
    s.metrics.push_back({"ps_pushes", static_cast<double>(w->pushes()), "messages", -1});
    s.metrics.push_back({"ps_bytes_pushed", static_cast<double>(w->bytes_pushed()), "bytes", -1});
  }
  for (const auto& st : job.server_stats()) {
    s.ps_servers.push_back({st.server, st.rank, st.keys, st.bytes_held, st.bytes_in, st.bytes_out, st.pushes, st.pulls,
                            st.updates, st.busy_ns, st.queue_max, st.queue_mean});
  }
  for (const auto& [what, count] : job.staleness()) {
    const auto& [worker, iteration, clock_gap, staleness] = what;
    s.ps_staleness.push_back({worker, iteration, clock_gap ? "clock_gap" : "updates", staleness, count});
  }
}

RankSummary summarise_rank(const std::vector<profiler::Event>& events, const std::vector<distributed::CollectiveRecord>& calls,
                           const distributed::Communicator& comm, const distributed::DataParallel* dp, int64_t warmup) {
  RankSummary s;
  s.breakdown = rank_breakdown_rows(events, [warmup](int32_t i) { return i >= warmup; });
  s.comm_ops = comm_op_rows(calls, comm.backend(), comm.size());
  // Each rank's events are counted where they are made: a reader compares this with the rows.
  s.metrics.push_back({"events_recorded", static_cast<double>(events.size()), "events", -1});
  // Over the timed iterations (docs/formulas.md): how much of the time communication kept the
  // rank from computing, and how much of the communication backward hid.
  double span = 0, comm_ns = 0, overlap = 0, exposed = 0;
  for (const auto& b : s.breakdown) {
    span += static_cast<double>(b.end_ns - b.start_ns);
    comm_ns += static_cast<double>(b.comm_ns);
    overlap += static_cast<double>(b.overlap_ns);
    exposed += static_cast<double>(b.exposed_comm_ns);
  }
  if (span > 0) s.metrics.push_back({"exposed_comm_fraction", exposed / span, "fraction", -1});
  if (comm_ns > 0) s.metrics.push_back({"comm_hidden_fraction", overlap / comm_ns, "fraction", -1});
  if (dp) {
    s.metrics.push_back({"dp_buckets", static_cast<double>(dp->buckets().size()), "buckets", -1});
    s.metrics.push_back({"dp_cross_barrier", dp->cross_barrier() ? 1.0 : 0.0, "flag", -1});
    s.metrics.push_back(
        {"dp_parameters_without_gradient", static_cast<double>(dp->parameters_without_gradient()), "parameters", -1});
  }
  return s;
}

}  // namespace

int64_t online_cores() {
  // What std::thread::hardware_concurrency also counts on Linux.
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) return online;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

RunSession::RunSession(const RunConfig& config, SessionHooks hooks, const distributed::World* world)
    : config_(config), hooks_(std::move(hooks)), world_(world) {}

RunOutcome RunSession::run() {
  const RunConfig& c = config_;
  const auto& spec = *workloads::find_workload(c.workload);
  const auto& preset = *spec.preset(c.preset);
  const int rank = world_ ? world_->rank : 0;
  const int ranks = world_ ? world_->size : 1;
  const bool distributed = ranks > 1;
  const bool writes_db = rank == 0;
  // A parameter server: workers are ranks 0..W-1; dedicated servers, if any, the ranks after.
  const bool on_ps = distributed && c.strategy == RunConfig::Strategy::ps;
  distributed::ps::Topology topology;
  if (on_ps) {
    try {
      topology = distributed::ps::Topology::of(ranks, c.ps);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(std::string("parameter server: ") + e.what());
    }
  }
  const bool trains = !on_ps || topology.is_worker(rank);   // a dedicated server rank only serves
  const int workers = on_ps ? topology.workers : ranks;
  // A rank's share of its host's cores unless told.
  const int local = world_ ? std::max(1, world_->local_size) : 1;
  const int threads = static_cast<int>(c.threads > 0 ? c.threads : std::max<int64_t>(1, online_cores() / local));
  omp_set_num_threads(threads);

  // Two communicators: the gradients' (the communication thread) and the training thread's
  // control calls (stop flag, model check), which must not interleave with the gradients'.
  std::unique_ptr<distributed::MpiCommunicator> comm, control;
  std::unique_ptr<RankChannel> channel;
  if (distributed) {
    comm = std::make_unique<distributed::MpiCommunicator>(MPI_COMM_WORLD);
    control = std::make_unique<distributed::MpiCommunicator>(MPI_COMM_WORLD);
    channel = std::make_unique<RankChannel>(MPI_COMM_WORLD);
  }

  workloads::WorkloadConfig wc;
  wc.preset = c.preset;
  wc.device = engine::parse_device(c.device);
  wc.batch = c.batch.value_or(0);
  wc.learners = c.learners.value_or(0);
  wc.seed = c.seed;
  wc.data = c.data;
  wc.rank = trains ? rank : 0;   // a dedicated server builds worker 0's model: the same parameters
  wc.world_size = workers;

  store::RunInfo info;
  info.workload = c.workload;
  info.preset = c.preset;
  info.device = c.device;
  info.batch_size = c.batch.value_or(preset.default_batch);
  info.ranks = ranks;
  info.global_batch_size = info.batch_size * workers;
  info.iterations = c.iterations;
  info.warmup = c.warmup;
  info.threads = threads;
  info.seed = c.seed;
  info.trace = c.trace;
  info.started_at = utc_now();
  info.command_line = c.command_line;
  store::set_writer(info, store::current_process());
  info.heartbeat_interval_ms = c.flush_interval.count();
  nlohmann::json cfg = {{"workload", c.workload}, {"preset", c.preset}, {"device", c.device}, {"data", c.data},
                        {"batch", info.batch_size}, {"iterations", c.iterations}, {"warmup", c.warmup},
                        {"threads", threads}, {"seed", c.seed}, {"trace", c.trace}, {"roofline", c.roofline},
                        {"eval_batches", c.eval_batches},
                        {"units", {{"samples", spec.units.samples}, {"tokens", spec.units.tokens}, {"batch", spec.units.batch},
                                   {"headline", spec.units.tokens_headline ? "tokens" : "samples"}}}};
  nlohmann::json table = nlohmann::json::object();
  for (const auto& [k, v] : preset.table) table[k] = v;
  if (c.learners) cfg["learners"] = *c.learners;
  if (c.eval_every > 0) cfg["eval_every"] = c.eval_every;
  if (c.quality_target) cfg["quality_target"] = *c.quality_target;
  if (!c.suite.name.empty()) {
    cfg["suite"] = {{"name", c.suite.name}, {"entry", c.suite.entry}, {"repeat", c.suite.repeat}};
  }
  cfg["preset_table"] = table;
  if (on_ps) {
    const auto& o = c.ps;
    cfg["distributed"] = {{"ranks", ranks},
                          {"global_batch", info.global_batch_size},
                          {"strategy", "parameter_server"},
                          {"backend", "mpi"},
                          {"workers", topology.workers},
                          {"servers", topology.servers},
                          {"server_placement", topology.dedicated ? "dedicated ranks" : "co-located with workers 0..S-1"},
                          {"mode", std::string(distributed::ps::to_string(o.mode))},
                          {"staleness", o.staleness},
                          {"priority", o.priority},
                          {"chunk_mb", o.chunk_mb},
                          {"batch_norm_statistics", "per worker (not synchronised)"}};
    if (!o.server_hosts.empty()) cfg["distributed"]["server_hosts"] = o.server_hosts;
  } else if (distributed) {
    const auto& o = c.data_parallel;
    cfg["distributed"] = {{"ranks", ranks},
                          {"global_batch", info.global_batch_size},
                          {"strategy", "data_parallel_allreduce"},
                          {"backend", "mpi"},
                          {"bucket_mb", o.bucket_mb},
                          {"overlap", o.overlap},
                          {"bucket_order", std::string(distributed::to_string(o.order))},
                          {"priority", o.priority},
                          {"partition_mb", o.partition_mb},
                          {"cross_barrier", o.priority && o.cross_barrier},  // asked for; whether taken: metric dp_cross_barrier
                          {"batch_norm_statistics", "per rank (not synchronised), as PyTorch DDP's default"}};
  }
  std::vector<std::string> rank_hosts;
  if (distributed) {
    rank_hosts = distributed::gather_host_names(*comm);
    cfg["distributed"]["rank_hosts"] = rank_hosts;
  }
  info.config_json = cfg.dump();

  // The run has a row from the start (rank 0 writes it), so a crash or Ctrl-C later still
  // leaves a record. Other ranks never open the db.
  std::optional<store::Writer> writer;
  int64_t run_id = 0;
  if (writes_db) {
    writer.emplace(c.db, c.lock_wait);
    run_id = writer->begin_run(info);
    if (hooks_.run_created) hooks_.run_created(c.db, run_id);
    auto env = to_env_rows(collectors::snapshot());
    if (distributed) {
      env.push_back({"mpi_library", distributed::MpiRuntime::library_version()});
      env.push_back({"ranks", std::to_string(ranks)});
      env.push_back({"rank_hosts", distributed::describe_placement(rank_hosts)});
    }
    if (const char* token = std::getenv("TS_LAUNCH_TOKEN"); token && *token) env.push_back({"launch_token", token});
    writer->add_environment(run_id, env);
  }

  auto& tracer = profiler::Tracer::global();
  auto& ledger = memprof::Ledger::global();
  tracer.clear();
  ledger.clear();
  tracer.set_enabled(true);
  engine::set_op_tracing(c.trace);
  collectors::ProcessSampler sampler;
  sampler.start(std::chrono::milliseconds(200));
  std::optional<RunStream> stream;
  DbSink* db_sink = nullptr;
  try {
    std::unique_ptr<FlushSink> sink;
    if (writes_db) {
      auto s = std::make_unique<DbSink>(c.db, run_id, channel.get());
      db_sink = s.get();
      sink = std::move(s);
    } else {
      sink = std::make_unique<RankSink>(*channel);
    }
    stream.emplace(std::move(sink), sampler, RunStream::Options{.interval = c.flush_interval, .communicators = {comm.get(), control.get()}});
  } catch (const std::exception& e) {  // the run row exists: not "bad input, nothing written"
    sampler.stop();
    tracer.set_enabled(false);
    const std::string why = std::string("cannot write the run while it runs: ") + e.what();
    if (writer) writer->finish_run(run_id, store::RunStatus::failed, utc_now(), why);
    if (hooks_.run_stored) hooks_.run_stored();
    throw std::runtime_error(why);
  }

  std::optional<RunRecorder> recorder;
  if (writer) {
    recorder.emplace(*writer, run_id);
    recorder->set_units(spec.units);
  }
  // On a GPU with tracing on: CUPTI activity tracing and NVTX ranges (docs/cli.md, "GPU tracing").
  std::unique_ptr<profiler::GpuTracer> gpu;
  if (wc.device.type == engine::DeviceType::cuda && c.trace && writes_db) {
    gpu = profiler::GpuTracer::start(tracer);
    fmt::print(stderr, "trainscope: {}\n", gpu->status());
    const std::vector<store::EnvEntry> note = {{"gpu_tracing", gpu->status()}};
    writer->add_environment(run_id, note);
  }
  bool gpu_stopped = false;
  const auto host_before = engine::cpu::host_allocator_stats();
  const auto stop_gpu = [&] {  // once: after the loop, or after a failure
    if (gpu_stopped || !recorder) return;
    gpu_stopped = true;
    if (gpu) recorder->set_gpu_trace(gpu->stop());
    gpu.reset();
    record_device_memory(wc.device, *recorder);
    record_host_allocator(host_before, *recorder);
  };
  static const std::atomic<bool> never{false};
  const std::atomic<bool>& stop = hooks_.stop ? *hooks_.stop : never;
  workloads::LoopResult loop;
  std::unique_ptr<workloads::Workload> workload;
  std::unique_ptr<distributed::DataParallel> dp;
  std::unique_ptr<distributed::ps::PsJob> ps_job;
  std::string failure;
  bool cancelled = false;  // Ctrl-C while building or evaluating, which stop at their next op
  workloads::Quality quality;
  bool have_quality = false;
  int64_t rss_before_model = -1;
  try {
    {
      engine::CancelScope cancel(&stop);
      // The process's peak from here on is this run's (a suite runs many in one process).
      if (collectors::reset_peak_rss()) rss_before_model = collectors::rss_bytes();
      workload = spec.create(wc);
    }
    const int64_t params = workload->model().parameter_count();
    if (recorder) recorder->set_parameter_count(params);
    if (on_ps) {
      auto recipes = workload->optimizer_recipes();
      if (recipes.empty()) throw std::runtime_error(c.workload + " cannot train on a parameter server (it describes no optimizer for the servers)");
      ps_job = std::make_unique<distributed::ps::PsJob>(MPI_COMM_WORLD, c.ps, workload->gradient_groups(), std::move(recipes));
      ps_job->start_server();   // a dedicated server rank serves here until every worker is done
      if (ps_job->worker() != nullptr) ps_job->worker()->initialize();
    } else if (distributed) {
      // Its learners' gradients never reach the phases that average them (validate() refuses it).
      if (spec.has_learners) throw std::runtime_error(c.workload + "'s actor-learners cannot train data-parallel: --strategy ps");
      dp = std::make_unique<distributed::DataParallel>(*comm, *control, workload->gradient_groups(), c.data_parallel);
      if (c.data_parallel.priority && c.data_parallel.cross_barrier) {
        auto split = workload->split_step();
        const std::string why_not = split ? dp->take_split_step(std::move(*split))
                                          : "its optimizer step needs every gradient first (global-norm clipping) or "
                                            "an iteration has several steps";
        if (!why_not.empty() && rank == 0) {
          fmt::print(stderr, "trainscope: {}: no cross-barrier updates ({}); priority still orders the buckets\n",
                     c.workload, why_not);
        }
      }
      dp->broadcast_parameters();
    }
    if (hooks_.progress_start) hooks_.progress_start(c.warmup + c.iterations);
    workloads::LoopOptions lo;
    lo.iterations = c.iterations;
    lo.warmup = c.warmup;
    lo.device = wc.device;
    lo.stop = &stop;
    if (dp) lo.exchange = dp.get();   // the strategy; neither: one process (a dedicated server rank has no worker)
    if (ps_job) lo.exchange = ps_job->worker();
    QualityCurve curve(c.warmup, c.eval_every, c.quality_target);
    lo.on_iteration = [&](workloads::IterationResult& it) {
      if (curve.count(it)) {
        // The model as this rank trains it: updates still pending applied, the servers' newest values installed.
        if (dp) dp->flush();
        if (ps_job && ps_job->worker()) ps_job->worker()->refresh_model();
        const workloads::Quality q = workloads::run_evaluation(*workload, c.eval_batches);
        curve.add(q);
        it.metrics.push_back({q.metric, q.value, q.unit});
      }
      stream->add_iteration(it);
      const double secs = static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
      // The job's rate: every rank trains on its own batch of the same size.
      const double rate = secs > 0 ? static_cast<double>(it.samples) * ranks / secs : 0.0;
      if (hooks_.progress) hooks_.progress(it.index + 1, rate, it.warmup);
    };
    if (trains && (!stop.load() || distributed)) {  // distributed: the ranks decide together, in the loop
      profiler::Range run_range(tracer.intern(c.workload + "/" + c.preset), profiler::EventKind::run);
      loop = workloads::run_training(*workload, lo);
      // What the OS saw the training take at its peak, over the process before the model: the
      // figure to set beside a framework that keeps no allocator books (bench/pytorch).
      const int64_t peak = collectors::peak_rss_bytes();
      if (recorder && rss_before_model >= 0 && peak >= 0) {
        recorder->add_metric({"rss_peak_growth_bytes", static_cast<double>(peak - rss_before_model), "bytes", -1});
      }
      for (auto& m : curve.run_metrics()) loop.metrics.push_back(std::move(m));
    }
    // The servers' final model in every worker (evaluation reads it), this rank's server done.
    if (ps_job && !loop.failed) ps_job->finish();
    stop_gpu();  // evaluation is not traced on the GPU
    if (hooks_.progress_end) {
      hooks_.progress_end(loop.failed ? "failed" : (loop.interrupted || stop.load()) ? "interrupted" : "done");
    }
    // Evaluation is not a training iteration: its events must not count in the timed figures.
    tracer.set_iteration(-1);
    ledger.set_iteration(-1);
    if (writes_db && !loop.failed && !loop.interrupted && !stop.load() && c.eval_batches > 0) {
      engine::CancelScope cancel(&stop);
      quality = workloads::run_evaluation(*workload, c.eval_batches);
      have_quality = true;
    }
    if (writes_db && c.roofline && wc.device.is_cpu() && !loop.failed && !loop.interrupted && !stop.load()) {
      record_machine_peaks(threads, c.json, *recorder);
    }
  } catch (const engine::Cancelled&) {
    cancelled = true;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  stop_gpu();
  sampler.stop();
  tracer.set_enabled(false);

  if (distributed && (!failure.empty() || loop.failed || cancelled)) {
    // The other ranks wait for this one in their next collective: it cannot go on, and they
    // cannot finish without it. Say why, keep what can be kept, and end the job (mpirun then
    // stops every rank; rank 0's run is marked failed by whoever sees it first).
    const std::string why = !failure.empty() ? failure : cancelled ? "cancelled while building" : loop.error;
    fmt::print(stderr, "\ntrainscope: rank {} failed: {}\n", rank, why);
    if (writer) {
      try {
        stream->finish();
        writer->finish_if_running(run_id, store::RunStatus::failed, utc_now(), fmt::format("rank {} failed: {}", rank, why));
      } catch (const std::exception&) {
      }
    }
    std::fflush(nullptr);
    distributed::MpiRuntime::abort_job(1);
  }

  const std::vector<profiler::Event> events = stream->finish();
  const bool interrupted = cancelled || loop.interrupted || (stop.load() && failure.empty() && !loop.failed);
  store::RunStatus status = store::RunStatus::completed;
  std::string error = failure.empty() ? loop.error : failure;
  if (!error.empty()) status = store::RunStatus::failed;
  else if (interrupted) status = store::RunStatus::interrupted;

  // This rank's communication figures (distributed runs), from every call the stream saw.
  RankSummary mine;
  if (comm) mine = summarise_rank(events, stream->collectives(), *comm, dp.get(), c.warmup);
  if (ps_job) summarise_ps(*ps_job, rank, mine);

  if (!writes_db) {
    // This rank's last rows and its summaries, to rank 0, which writes them into the run.
    RankPayload last;
    last.rank = rank;
    last.final = true;
    last.flush = stream->take_unwritten();
    last.breakdown = std::move(mine.breakdown);
    last.comm_ops = std::move(mine.comm_ops);
    last.metrics = std::move(mine.metrics);
    last.ps_staleness = std::move(mine.ps_staleness);
    last.ps_servers = std::move(mine.ps_servers);
    last.memory_peak = memory_peak_rows(loop.memory_peak.t_ns > 0 ? loop.memory_peak : ledger.peak());
    // The ledger's change log with owners (the first kMaxStoredMemoryChanges), stored as this rank's.
    const size_t logged = ledger.change_count();
    memprof::Ledger::ChangeCursor from_start;
    last.memory_changes = memory_change_rows(ledger, from_start, kMaxStoredMemoryChanges);
    for (auto& m : memory_change_counts(logged, last.memory_changes.size())) last.metrics.push_back(std::move(m));
    last.error = error;
    channel->send(last);
    RunOutcome out;
    out.status = status;
    out.error = error;
    return out;
  }

  // Rank 0: the other ranks' records that have not been written yet, and their summaries.
  std::vector<RankPayload> remote;
  if (distributed) {
    remote = db_sink->take_remote();
    std::vector<int> missing;
    for (auto& p : channel->wait_finals(kFinalRecordsWait, missing)) remote.push_back(std::move(p));
    if (!missing.empty()) {
      std::string list;
      for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
      error += (error.empty() ? "" : "; ") +
               fmt::format("rank(s) {} sent no final records within {} s", list, kFinalRecordsWait.count());
      status = store::RunStatus::failed;
    }
    for (const auto& p : remote) {
      if (p.final && !p.error.empty()) {
        error += (error.empty() ? "" : "; ") + fmt::format("rank {}: {}", p.rank, p.error);
        status = store::RunStatus::failed;
      }
    }
  }
  const auto write_ranks = [&](store::Writer& w, int64_t id) {
    w.add_rank_breakdown(id, mine.breakdown);
    w.add_comm_ops(id, mine.comm_ops);
    w.add_metrics(id, mine.metrics);
    w.add_ps_staleness(id, mine.ps_staleness);
    w.add_ps_servers(id, mine.ps_servers);
    for (const auto& p : remote) {
      w.flush(id, p.flush);
      w.add_rank_breakdown(id, p.breakdown);
      w.add_comm_ops(id, p.comm_ops);
      w.add_metrics(id, p.metrics);
      w.add_memory_peak(id, p.memory_peak);
      w.add_memory_changes(id, p.memory_changes);
      w.add_ps_staleness(id, p.ps_staleness);
      w.add_ps_servers(id, p.ps_servers);
    }
  };

  // The final write, all or nothing: what the flushes could not write, the summaries, the
  // status. Whatever was measured is stored, whatever the status.
  const auto samples = sampler.samples();
  const engine::nn::Module* model = workload ? &workload->model() : nullptr;
  const workloads::Quality* measured_quality = have_quality ? &quality : nullptr;
  std::filesystem::path spilled;
  try {
    store::Writer::Transaction tx(*writer);
    store::RunFlush rest = stream->take_unwritten();
    rest.heartbeat_ms = store::unix_time_ms();
    writer->flush(run_id, rest);
    recorder->record(loop, events, model, samples, measured_quality, RecordScope::after_streaming);
    write_ranks(*writer, run_id);
    writer->finish_run(run_id, status, utc_now(), error);
    tx.commit();
  } catch (const std::exception& e) {
    const std::string why = e.what();
    fmt::print(stderr, "\ntrainscope: could not store run {} in '{}': {}\n", run_id, c.db.string(), why);
    try {
      spilled = spill(
          c.db, info, run_id,
          [&](store::Writer& side_writer, RunRecorder& side, int64_t side_id) {
            side.set_parameter_count(workload ? workload->model().parameter_count() : 0);
            side.set_units(spec.units);
            side.record(loop, events, model, samples, measured_quality, RecordScope::everything);
            store::RunFlush collectives;
            append_collective_rows(stream->collectives(), collectives.collectives);
            side_writer.flush(side_id, collectives);
            write_ranks(side_writer, side_id);
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
        writer->finish_run(run_id, status, utc_now(), error);
      } catch (const std::exception&) {
      }
    }
  }
  if (hooks_.run_stored) hooks_.run_stored();

  RunOutcome out;
  out.run_id = run_id;
  out.status = status;
  out.error = error;
  out.spill_file = spilled;
  return out;
}

}  // namespace ts::session
