#include "session/run_session.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "collectors/process_sampler.h"
#include "distributed/clock_sync.h"
#include "distributed/data_parallel.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_rank.h"
#include "distributed/ps/ps_job.h"
#include "distributed/rank_hosts.h"
#include "distributed/stall_watch.h"
#include "engine/context.h"
#include "engine/device.h"
#include "engine/peaks.h"
#include "fmt/format.h"
#include "memprof/ledger.h"
#include "nlohmann/json.hpp"
#include "profiler/tracer.h"
#include "session/instruments.h"
#include "session/quality_curve.h"
#include "session/rank_channel.h"
#include "session/rank_records.h"
#include "session/record.h"
#include "session/run_plan.h"
#include "session/run_record.h"
#include "session/run_stream.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

namespace ts::session {

namespace {

// How long rank 0 waits, after its own loop, for the other ranks' final records.
constexpr std::chrono::seconds kFinalRecordsWait{120};
// Ping-pongs per rank for its clock's offset to rank 0's, at the start and at the end: the bound
// narrows with every ping whose round trip was quick, and 32 cost milliseconds even on a slow link.
constexpr int kClockPings = 32;

// What every stage after the plan reads.
struct Stage {
  const RunConfig& config;
  const RunPlan& plan;
  const SessionHooks& hooks;
  const std::atomic<bool>& stop;
};

// A distributed run's links: the stall watch (first made, last gone: every call below registers
// with it), the gradients' communicator (the communication thread: MPI, or NCCL for a GPU model
// whose ranks each have a GPU), the training thread's control calls (stop flag, model check,
// always MPI over host memory), which must not interleave with the gradients', and the channel
// that carries the other ranks' records to rank 0.
struct Links {
  std::unique_ptr<distributed::StallWatch> watch;
  std::unique_ptr<distributed::Communicator> comm;
  std::unique_ptr<distributed::MpiCommunicator> control;
  std::unique_ptr<RankChannel> channel;
  std::optional<distributed::GradientRoute> gpu_route;  // a GPU model's, with all-reduce
};

Links connect(const RunConfig& c, const RunPlan& plan, const distributed::World* world) {
  Links l;
  if (!plan.distributed) return l;
  l.watch =
      std::make_unique<distributed::StallWatch>(MPI_COMM_WORLD, distributed::StallOptions{.deadline = c.stall_timeout});
  if (plan.workload.device.type == engine::DeviceType::cuda && !plan.on_ps && world) {
    // cuda:N names one GPU for every rank; plain cuda spreads the ranks (run_plan.cpp).
    const int pinned = c.device == "cuda" ? -1 : plan.workload.device.index;
    auto link =
        distributed::gradient_link(MPI_COMM_WORLD, c.gpu_gradients, world->local_rank, world->local_size, pinned);
    l.comm = std::move(link.communicator);
    l.gpu_route = std::move(link.route);
  } else {
    l.comm = std::make_unique<distributed::MpiCommunicator>(MPI_COMM_WORLD);
  }
  l.comm->set_channel("gradients");
  l.control = std::make_unique<distributed::MpiCommunicator>(MPI_COMM_WORLD);
  l.control->set_channel("control");
  l.channel = std::make_unique<RankChannel>(MPI_COMM_WORLD);
  return l;
}

// The ranks end together, once rank 0 has written the run: a rank that stops meanwhile is found
// by the others' stall watch, not waited for in MPI's finalisation.
void end_together(const Links& links) {
  distributed::StallWatch::set_phase(distributed::RunPhase::ending);
  if (links.control) links.control->barrier("end of run");
}

// The run has a row from the start (rank 0 writes it), so a crash or Ctrl-C later still
// leaves a record. Other ranks never open the db.
std::unique_ptr<RunRecord> begin_record(const Stage& s, const std::vector<std::string>& rank_hosts) {
  if (!s.plan.writes_db) return nullptr;
  auto record = std::make_unique<RunRecord>(s.config.db, s.config.lock_wait, s.plan.info);
  if (s.hooks.run_created) s.hooks.run_created(s.config.db, record->id());
  record->add_environment(run_environment(s.plan.distributed ? &rank_hosts : nullptr));
  return record;
}

// The stream that writes the run while it runs: rank 0 to the db, the others to rank 0.
std::unique_ptr<RunStream> start_stream(const Stage& s, RunRecord* record, const Links& links,
                                        Instruments& instruments) {
  try {
    std::unique_ptr<FlushSink> sink;
    if (record) {
      sink = std::make_unique<DbSink>(s.config.db, record->id(), links.channel.get());
    } else {
      sink = std::make_unique<RankSink>(*links.channel);
    }
    return std::make_unique<RunStream>(std::move(sink), instruments.sampler(),
                                       RunStream::Options{.interval = s.config.flush_interval,
                                                          .communicators = {links.comm.get(), links.control.get()},
                                                          .notice = s.hooks.notice});
  } catch (const std::exception& e) {  // the run row exists: not "bad input, nothing written"
    instruments.stop();
    const std::string why = std::string("cannot write the run while it runs: ") + e.what();
    if (record) record->finish(store::RunStatus::failed, why);
    if (s.hooks.run_stored) s.hooks.run_stored();
    throw std::runtime_error(why);
  }
}

// The machine's limits the roofline sets the step against (--roofline): SGEMM and copy on one
// thread and on the run's threads, measured after the loop so that they take nothing from it.
void record_machine_peaks(const Stage& s, RunRecorder& recorder) {
  if (!s.config.json)
    tell(s.hooks.notice, "trainscope: measuring the machine's SGEMM peak and copy bandwidth (--roofline)\n");
  const int threads = s.plan.threads;
  const engine::MachinePeaks one = engine::measure_peaks(engine::Device::cpu(), 1);
  const engine::MachinePeaks all = threads > 1 ? engine::measure_peaks(engine::Device::cpu(), threads) : one;
  recorder.add_metric({"machine_sgemm_gflops_1t", one.sgemm_gflops, "GFLOP/s", -1});
  recorder.add_metric({"machine_copy_gbps_1t", one.copy_gbps, "GB/s", -1});
  recorder.add_metric({"machine_sgemm_gflops", all.sgemm_gflops, "GFLOP/s", -1});
  recorder.add_metric({"machine_copy_gbps", all.copy_gbps, "GB/s", -1});
  recorder.add_metric({"machine_peak_threads", static_cast<double>(all.threads), "threads", -1});
}

// What the training stage made and measured, and how it ended.
struct Training {
  std::unique_ptr<workloads::Workload> workload;
  std::unique_ptr<distributed::DataParallel> dp;
  std::unique_ptr<distributed::ps::PsJob> ps_job;
  workloads::LoopResult loop;
  std::optional<workloads::Quality> quality;  // the final evaluation (rank 0)
  int64_t rss_before_model = -1;
  std::string failure;
  bool cancelled = false;  // Ctrl-C while building or evaluating, which stop at their next op

  bool failed() const { return !failure.empty() || loop.failed || cancelled; }
};

// The strategy around the model (docs/design.md, "How a run flows", 5): a parameter server, or
// all-reduce data parallelism across the ranks; nothing for a single process.
void attach_strategy(const Stage& s, const Links& links, Training& t) {
  const RunConfig& c = s.config;
  if (s.plan.on_ps) {
    auto recipes = t.workload->optimizer_recipes();
    if (recipes.empty())
      throw std::runtime_error(c.workload +
                               " cannot train on a parameter server (it describes no optimizer for the servers)");
    t.ps_job = std::make_unique<distributed::ps::PsJob>(MPI_COMM_WORLD, c.ps, t.workload->gradient_groups(),
                                                        std::move(recipes));
    t.ps_job->start_server();  // a dedicated server rank serves here until every worker is done
    if (t.ps_job->worker() != nullptr) t.ps_job->worker()->initialize();
  } else if (s.plan.distributed) {
    // Its learners' gradients never reach the phases that average them (validate() refuses it).
    if (workloads::find_workload(c.workload)->has_learners) {
      throw std::runtime_error(c.workload + "'s actor-learners cannot train data-parallel: --strategy ps");
    }
    t.dp = std::make_unique<distributed::DataParallel>(*links.comm, *links.control, t.workload->gradient_groups(),
                                                       c.data_parallel);
    if (links.gpu_route && s.plan.rank == 0) {
      tell(s.hooks.notice,
           fmt::format("trainscope: the {} ranks' GPU gradients go {}\n", s.plan.ranks, links.gpu_route->why));
    }
    if (c.data_parallel.priority && c.data_parallel.cross_barrier) {
      auto split = t.workload->split_step();
      const std::string why_not = split ? t.dp->take_split_step(std::move(*split))
                                        : "its optimizer step needs every gradient first (global-norm clipping) or "
                                          "an iteration has several steps";
      if (!why_not.empty() && s.plan.rank == 0) {
        tell(s.hooks.notice,
             fmt::format("trainscope: {}: no cross-barrier updates ({}); priority still orders the buckets\n",
                         c.workload, why_not));
      }
    }
    t.dp->broadcast_parameters();
  }
}

// What the training loop is told: its sizes and device, the stop flag and the strategy.
workloads::LoopOptions loop_options(const Stage& s, const Training& t) {
  workloads::LoopOptions lo;
  lo.iterations = s.config.iterations;
  lo.warmup = s.config.warmup;
  lo.device = s.plan.workload.device;
  lo.stop = &s.stop;
  if (t.dp) lo.exchange = t.dp.get();  // the strategy; neither: one process (a dedicated server rank has no worker)
  if (t.ps_job) lo.exchange = t.ps_job->worker();
  return lo;
}

// After each iteration, outside its span: evaluations during training (--eval-every), the
// stream, the progress display.
std::function<void(workloads::IterationResult&)> after_iteration(const Stage& s, Training& t, QualityCurve& curve,
                                                                 RunStream& stream, Instruments& instruments) {
  return [&s, &t, &curve, &stream, &instruments](workloads::IterationResult& it) {
    if (curve.count(it)) {
      // The model as this rank trains it: updates still pending applied, the servers' newest values installed.
      if (t.dp) t.dp->flush();
      if (t.ps_job && t.ps_job->worker()) t.ps_job->worker()->refresh_model();
      distributed::StallWatch::set_phase(distributed::RunPhase::evaluating);
      const workloads::Quality q = workloads::run_evaluation(*t.workload, s.config.eval_batches);
      distributed::StallWatch::set_phase(distributed::RunPhase::training);
      curve.add(q);
      it.metrics.push_back({q.metric, q.value, q.unit});
    }
    stream.add_iteration(it);
    const double secs = static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
    // The job's rate in the headline's unit: every rank trains on its own batch of the same size.
    const double work = static_cast<double>(s.plan.units.headline_count(it.samples, it.tokens));
    const double rate = secs > 0 ? work * s.plan.ranks / secs : 0.0;
    if (s.hooks.progress) s.hooks.progress(it.index + 1, rate, it.warmup);
    if (it.warmup && it.index + 1 == s.config.warmup) instruments.mark_timed_start();  // the timed ones follow
  };
}

// The job's processes on this host (rank 0's): its other ranks there count among the other
// processes. From the ranks' hosts in the stored config (add_rank_hosts).
int processes_on_host(const Stage& s) {
  if (!s.plan.distributed) return 1;
  const auto cfg = nlohmann::json::parse(s.plan.info.config_json, nullptr, false);
  const auto rank = static_cast<size_t>(s.plan.rank);
  if (!cfg.is_object() || !cfg.contains("distributed") || !cfg["distributed"].contains("rank_hosts")) {
    return s.plan.ranks;
  }
  const auto& hosts = cfg["distributed"]["rank_hosts"];
  if (!hosts.is_array() || hosts.size() <= rank) return s.plan.ranks;
  return static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[rank]));
}

// The loop itself; what the OS saw it take at its peak; the machine's conditions over its timed
// iterations; the servers' final model.
void run_loop(const Stage& s, Training& t, RunStream& stream, RunRecorder* recorder, Instruments& instruments) {
  const RunConfig& c = s.config;
  if (s.hooks.progress_start) s.hooks.progress_start(c.warmup + c.iterations);
  workloads::LoopOptions lo = loop_options(s, t);
  QualityCurve curve(c.warmup, c.eval_every, c.quality_target);
  lo.on_iteration = after_iteration(s, t, curve, stream, instruments);
  if (s.plan.trains && (!s.stop.load() || s.plan.distributed)) {  // distributed: the ranks decide together, in the loop
    auto& tracer = profiler::Tracer::global();
    profiler::Range run_range(tracer.intern(c.workload + "/" + c.preset), profiler::EventKind::run);
    if (c.warmup == 0) instruments.mark_timed_start();
    distributed::StallWatch::set_phase(distributed::RunPhase::training);
    t.loop = workloads::run_training(*t.workload, lo);
    instruments.mark_timed_end();
    if (const auto conditions = instruments.conditions(s.plan.threads); recorder && conditions) {
      for (auto& m : condition_metrics(*conditions, processes_on_host(s))) recorder->add_metric(std::move(m));
    }
    // What the OS saw the training take at its peak, over the process before the model: the
    // figure to set beside a framework that keeps no allocator books (bench/pytorch).
    const int64_t peak = collectors::peak_rss_bytes();
    if (recorder && t.rss_before_model >= 0 && peak >= 0) {
      recorder->add_metric({"rss_peak_growth_bytes", static_cast<double>(peak - t.rss_before_model), "bytes", -1});
    }
    for (auto& m : curve.run_metrics()) t.loop.metrics.push_back(std::move(m));
  }
  // The servers' final model in every worker (evaluation reads it), this rank's server done.
  if (t.ps_job && !t.loop.failed) t.ps_job->finish();
}

// A wait outside the iterations, for the progress display ("" ends it).
void begin_stage(const Stage& s, const std::string& what) {
  if (s.hooks.stage) s.hooks.stage(what);
}

// After the loop (rank 0, a run that ended well): the final evaluation, the machine's peaks.
void evaluate(const Stage& s, Training& t, RunRecorder* recorder) {
  // Evaluation is not a training iteration: its events must not count in the timed figures.
  profiler::Tracer::global().set_iteration(-1);
  memprof::Ledger::global().set_iteration(-1);
  const bool ended_well = !t.loop.failed && !t.loop.interrupted && !s.stop.load();
  distributed::StallWatch::set_phase(distributed::RunPhase::evaluating);
  if (!s.plan.writes_db || !ended_well) return;
  if (s.config.eval_batches > 0) {
    engine::CancelScope cancel(&s.stop);
    begin_stage(s, fmt::format("evaluating on {} held-out batches", s.config.eval_batches));
    t.quality = workloads::run_evaluation(*t.workload, s.config.eval_batches);
    begin_stage(s, "");
  }
  if (s.config.roofline && s.plan.workload.device.is_cpu()) record_machine_peaks(s, *recorder);
}

// Build, train, evaluate (docs/design.md, "How a run flows", 5-6): a failure is kept, not thrown.
Training train(const Stage& s, const Links& links, RunStream& stream, RunRecorder* recorder, Instruments& instruments) {
  Training t;
  try {
    {
      engine::CancelScope cancel(&s.stop);
      // The process's peak from here on is this run's (a suite runs many in one process).
      if (collectors::reset_peak_rss()) t.rss_before_model = collectors::rss_bytes();
      begin_stage(s, "building the model and its data");
      t.workload = workloads::find_workload(s.config.workload)->create(s.plan.workload);
      begin_stage(s, "");
    }
    if (recorder) recorder->set_parameter_count(t.workload->model().parameter_count());
    attach_strategy(s, links, t);
    run_loop(s, t, stream, recorder, instruments);
    instruments.stop_device(recorder);  // evaluation is not traced on the GPU
    if (s.hooks.progress_end) {
      s.hooks.progress_end(t.loop.failed ? "failed" : (t.loop.interrupted || s.stop.load()) ? "interrupted" : "done");
    }
    evaluate(s, t, recorder);
  } catch (const engine::Cancelled&) {
    t.cancelled = true;
  } catch (const std::exception& e) {
    t.failure = e.what();
  }
  return t;
}

// A rank of a distributed run that cannot go on: the other ranks wait for it in their next
// collective and cannot finish without it. Say why, keep what can be kept, and end the job
// (mpirun then stops every rank; rank 0's run is marked failed by whoever sees it first).
[[noreturn]] void abort_rank(const Stage& s, const Training& t, RunStream& stream, RunRecord* record) {
  const std::string why = !t.failure.empty() ? t.failure : t.cancelled ? "cancelled while building" : t.loop.error;
  tell(s.hooks.notice, fmt::format("\ntrainscope: rank {} failed: {}\n", s.plan.rank, why));
  if (record) {
    try {
      stream.finish();
      record->finish_if_running(store::RunStatus::failed, fmt::format("rank {} failed: {}", s.plan.rank, why));
    } catch (const std::exception&) {
    }
  }
  std::fflush(nullptr);
  distributed::MpiRuntime::abort_job(1);
}

RunOutcome verdict(const Stage& s, const Training& t) {
  RunOutcome out;
  const bool interrupted = t.cancelled || t.loop.interrupted || (s.stop.load() && t.failure.empty() && !t.loop.failed);
  out.error = t.failure.empty() ? t.loop.error : t.failure;
  if (!out.error.empty()) out.status = store::RunStatus::failed;
  else if (interrupted) out.status = store::RunStatus::interrupted;
  return out;
}

// Rank 0's final write, all or nothing: what the flushes could not write, the summaries, the
// other ranks' records, the status. Whatever was measured is stored, whatever the status.
RunOutcome store_run(const Stage& s, RunOutcome out, Training& t, const std::vector<profiler::Event>& events,
                     RunStream& stream, RunRecord& record, RunRecorder& recorder, const Instruments& instruments,
                     const RankSummary& mine, const std::vector<RankPayload>& remote) {
  const auto samples = instruments.sampler().samples();
  const engine::nn::Module* model = t.workload ? &t.workload->model() : nullptr;
  const workloads::Quality* quality = t.quality ? &*t.quality : nullptr;
  const auto to_db = [&](store::Writer& w, int64_t id) {
    record.heartbeat(stream.take_unwritten());
    recorder.record(t.loop, events, model, samples, quality, RecordScope::after_streaming);
    write_ranks(w, id, mine, remote);
  };
  const auto to_spill = [&](store::Writer& w, int64_t id) {
    RunRecorder side(w, id);
    side.set_parameter_count(model ? model->parameter_count() : 0);
    side.set_units(s.plan.units);
    side.record(t.loop, events, model, samples, quality, RecordScope::everything);
    store::RunFlush collectives;
    append_collective_rows(stream.collectives(), collectives.collectives);
    w.flush(id, collectives);
    write_ranks(w, id, mine, remote);
  };
  const RunRecord::Stored stored = record.store_final(to_db, to_spill, out.status, out.error, s.hooks.notice);
  out.run_id = record.id();
  out.status = stored.status;
  out.error = stored.error;
  out.spill_file = stored.spill_file;
  return out;
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

// The stages in the order of docs/design.md's "How a run flows".
RunOutcome RunSession::run() {
  static const std::atomic<bool> never{false};
  // A GPU run of several ranks spreads them over this host's GPUs (asked only then: it wakes CUDA).
  const bool gpu_ranks = world_ && world_->size > 1 && config_.device.starts_with("cuda");
  RunPlan plan = plan_run(config_, world_, online_cores(), gpu_ranks ? distributed::local_gpu_count() : 0);
  const Stage s{config_, plan, hooks_, hooks_.stop ? *hooks_.stop : never};
  omp_set_num_threads(plan.threads);
  const Links links = connect(config_, plan, world_);
  std::vector<std::string> rank_hosts;
  int ranks_per_machine = 1;
  if (plan.distributed) {
    rank_hosts = distributed::gather_host_names(*links.control);  // host memory, whichever carries the gradients
    add_rank_hosts(plan, rank_hosts);
    // Ranks that share a machine share its cores (namespace hosts too): what a projection needs.
    ranks_per_machine = distributed::most_ranks_per_machine(distributed::gather_machine_ids(*links.control));
  }
  // Every rank's clock against rank 0's, before anything is timed (docs/distributed.md, "Clocks").
  const std::vector<distributed::ClockOffset> clocks_at_start =
      plan.distributed ? distributed::measure_clock_offsets(MPI_COMM_WORLD, kClockPings)
                       : std::vector<distributed::ClockOffset>{};
  const std::unique_ptr<RunRecord> record = begin_record(s, rank_hosts);
  RunRecord* const row = record.get();
  if (plan.distributed && row) {
    const std::vector<store::EnvEntry> machines = {{"ranks_per_machine", std::to_string(ranks_per_machine)}};
    row->add_environment(machines);
  }
  if (links.gpu_route && row) {  // how the gradients travelled, beside the environment they travelled in
    const std::vector<store::EnvEntry> route = {{"gpu_gradients", links.gpu_route->nccl ? "nccl" : "host"},
                                                {"gpu_gradients_why", links.gpu_route->why}};
    row->add_environment(route);
  }
  if (links.watch && row) {
    // Rank 0 stopping a stalled job marks its run with why (a launcher other than ours may not).
    links.watch->set_on_stop([db = config_.db, id = row->id()](const std::string& why) {
      RunRecord::finish_elsewhere(db, id, store::RunStatus::failed, distributed::stall_reason(why),
                                  std::chrono::seconds(5));
    });
  }

  Instruments instruments(config_.trace);
  const std::unique_ptr<RunStream> stream = start_stream(s, row, links, instruments);
  std::optional<RunRecorder> recorder;
  if (row) {
    recorder.emplace(row->writer(), row->id());
    recorder->set_units(plan.units);
  }
  RunRecorder* const rec = recorder ? &*recorder : nullptr;
  // On a GPU with tracing on: CUPTI activity tracing and NVTX ranges (docs/cli.md, "GPU tracing"),
  // on every rank: each rank's GPU breakdown is stored (rank 0 says how it traces).
  const bool gpu_tracing = plan.workload.device.type == engine::DeviceType::cuda && config_.trace;
  const std::string gpu_status = instruments.start_device(plan.workload.device, gpu_tracing);
  if (gpu_tracing && row) {
    tell(hooks_.notice, fmt::format("trainscope: {}\n", gpu_status));
    const std::vector<store::EnvEntry> note = {{"gpu_tracing", gpu_status}};
    row->add_environment(note);
  }

  Training t = train(s, links, *stream, rec, instruments);
  instruments.stop_device(rec);
  instruments.stop();
  if (plan.distributed && t.failed()) abort_rank(s, t, *stream, row);
  // ... and again after the loop: the two give the drift between the clocks.
  const std::vector<distributed::ClockOffset> clocks_at_end =
      plan.distributed ? distributed::measure_clock_offsets(MPI_COMM_WORLD, kClockPings)
                       : std::vector<distributed::ClockOffset>{};

  const std::vector<profiler::Event> events = stream->finish();
  RunOutcome out = verdict(s, t);
  // This rank's communication figures (distributed runs), from every call the stream saw.
  RankSummary mine;
  if (links.comm) mine = summarise_rank(events, stream->collectives(), *links.comm, t.dp.get(), config_.warmup);
  mine.clocks = clock_rows(clocks_at_start, clocks_at_end);  // rank 0's measurements; empty elsewhere
  if (t.ps_job) summarise_ps(*t.ps_job, plan.rank, mine);
  if (!row) {  // this rank's last rows and its summaries, to rank 0, which writes them into the run
    links.channel->send(final_payload(plan.rank, std::move(mine), stream->take_unwritten(), t.loop, out.error,
                                      instruments.take_gpu_trace()));
    end_together(links);
    return out;
  }
  std::vector<RankPayload> remote;
  if (plan.distributed) {
    begin_stage(s, "gathering the other ranks' records");
    remote =
        gather_finals(static_cast<DbSink&>(stream->sink()), *links.channel, kFinalRecordsWait, out.status, out.error);
  }
  begin_stage(s, fmt::format("writing the results into {}", config_.db.string()));
  out = store_run(s, std::move(out), t, events, *stream, *row, *rec, instruments, mine, remote);
  begin_stage(s, "");
  end_together(links);
  if (hooks_.run_stored) hooks_.run_stored();
  return out;
}

}  // namespace ts::session
