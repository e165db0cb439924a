#include "distributed/data_parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "distributed/error.h"
#include "engine/context.h"
#include "engine/device_memory.h"
#include "engine/device_timeline.h"
#include "engine/nn/module.h"
#include "engine/side_stream.h"
#include "profiler/tracer.h"
#include "vocabulary/bucket_plan.h"

namespace ts::distributed {

std::string_view to_string(BucketOrder order) {
  return order == BucketOrder::arrival ? "arrival" : "reverse_registration";
}

namespace {

// A GPU parameter through the host (the broadcast over MPI): its storage to and from host
// memory, on the device's compute queue. On the CPU: memcpy.
void copy_out(const engine::Tensor& t, float* host) {
  const size_t bytes = static_cast<size_t>(t.storage_numel()) * sizeof(float);
  if (t.device().is_cpu()) std::memcpy(host, t.data(), bytes);
  else engine::memory_for(t.device()).copy_to_host(host, t.data(), bytes);
}

void copy_in(const engine::Tensor& t, const float* host) {
  const size_t bytes = static_cast<size_t>(t.storage_numel()) * sizeof(float);
  if (t.device().is_cpu()) std::memcpy(t.data(), host, bytes);
  else engine::memory_for(t.device()).copy_from_host(t.data(), host, bytes);
}

}  // namespace

struct DataParallel::State {
  // A piece of one parameter's gradient in a bucket: a whole tensor, or a partition of it.
  using Unit = vocabulary::BucketUnit;
  struct Bucket {
    std::vector<Unit> units;
    int64_t count = 0;
    int priority = 0;
    engine::Tensor buffer;  // memory category comm: on the model's GPU with NCCL, else in host memory
    std::unique_ptr<engine::PinnedHost> pinned;  // a host buffer of a GPU model; released before the buffer
    // On the device's queues: `ready` on the compute queue once the bucket's gradients are queued
    // there; `done` on the side stream after the averages are copied back into the gradients.
    std::unique_ptr<engine::StreamMarker> ready, done;
    int pending = 0;  // units whose gradient is not final yet
    bool done_this_pass = false;
  };
  struct Slot {
    engine::Tensor param;
    int64_t count = 0;         // storage floats (a blocked layout's padding included)
    std::vector<int> buckets;  // the buckets holding its units
    bool ready = false;
    // Cross-barrier:
    int update_index = -1;  // its index in the split step (-1: the optimizer does not update it)
    int units = 0;          // its pieces in buckets
    int unreduced = 0;      // of which not averaged yet in this pass
    bool updated = true;    // this pass's update applied (or none to apply)
    bool gated = false;     // the forward since the last begin_updates() passed its gate
  };
  struct Group {
    std::vector<Slot> slots;
    std::vector<Bucket> buckets;
    std::unordered_map<const engine::TensorImpl*, int> slot_of;
    std::vector<int> arrival;  // slots in the order their hooks fired in the first backward
    int passes = 0;
    engine::Tensor flags;  // device buckets: the priority negotiation's flags on the GPU (NCCL takes no host memory)
  };

  std::optional<engine::Device> device;  // the model's: the CPU or one GPU
  // The device's communication stream (on the CPU, calls that do their work at once). Made
  // before the groups and destroyed after them: their buffers and markers are its work's.
  std::unique_ptr<engine::SideStream> stream;
  bool device_buckets = false;  // the data communicator averages device memory (NCCL)
  std::vector<Group> groups;
  mutable std::mutex mutex;
  std::condition_variable cv;
  int active = -1;        // the armed group
  bool ended = false;     // end_backward() called for the armed group
  bool finished = true;   // the armed group's buckets are all averaged
  uint64_t pass = 0;      // incremented by begin_backward
  uint64_t served = 0;    // the last pass the communication thread took up
  int ready_changes = 0;  // bumps whenever a bucket becomes ready (priority mode waits on it)
  bool quit = false;
  std::exception_ptr error;
  int64_t without_gradient = 0;
  std::thread thread;

  // Cross-barrier (group 0 only: it needs a workload with one gradient group).
  std::optional<engine::optim::SplitStep> split;
  bool step_begun = false;           // begin_updates() ran for the armed pass
  bool check_gating = false;         // the forward before this backward ran while updates were pending
  std::atomic<bool> window{false};   // between begin_updates() and the next backward: gates wait
  std::vector<std::string> ungated;  // parameters read by a forward without passing their gate

  void mark_ready(Group& g, int s) {  // under the mutex
    Slot& slot = g.slots[static_cast<size_t>(s)];
    if (slot.ready) return;
    slot.ready = true;
    for (int b : slot.buckets) {
      Bucket& bucket = g.buckets[static_cast<size_t>(b)];
      for (const Unit& u : bucket.units) {
        if (u.slot == s) --bucket.pending;
      }
      // On the training thread, after the kernels that made the gradients final were queued: the
      // side stream's copies wait for this point on the device, not for the rest of backward.
      if (bucket.pending == 0) stream->mark_compute(*bucket.ready);
    }
    ++ready_changes;
  }
};

DataParallel::DataParallel(Communicator& data, Communicator& control, std::vector<std::vector<engine::Tensor>> groups,
                           const DataParallelOptions& options, std::unique_ptr<engine::SideStream> stream)
    : comm_(data), control_(control), options_(options), state_(std::make_shared<State>()) {
  if (&data == &control) throw DistError("data parallelism needs two communicators (data and control), not one twice");
  if (data.size() != control.size() || data.rank() != control.rank()) {
    throw DistError("the data and control communicators span different ranks");
  }
  if (!(options.bucket_mb > 0) || !(options.partition_mb > 0)) {
    throw DistError("bucket and partition sizes must be positive");
  }
  State& st = *state_;
  // What every rank must agree on: the groups, their parameters and their storage sizes.
  std::vector<int64_t> signature = {static_cast<int64_t>(groups.size())};
  for (auto& params : groups) {
    State::Group g;
    for (auto& p : params) {
      if (!p.defined()) throw DistError("data parallelism got a parameter without storage");
      // One device for the whole model: the CPU, or one GPU whose gradients go through the host.
      if (!st.device) st.device = p.device();
      if (p.device() != *st.device || (!p.device().is_cpu() && p.device().type != engine::DeviceType::cuda)) {
        throw DistError("data parallelism averages a model on one device (the CPU or one GPU); parameter '" + p.name() +
                        "' is on " + p.device().str() + ", the first on " + st.device->str());
      }
      if (g.slot_of.count(p.impl())) continue;  // listed twice in one group: once is enough
      g.slot_of[p.impl()] = static_cast<int>(g.slots.size());
      g.slots.push_back({p, p.storage_numel(), {}, false});
    }
    signature.push_back(static_cast<int64_t>(g.slots.size()));
    int64_t total = 0;
    for (const auto& s : g.slots) total += s.count;
    signature.push_back(total);
    // Raw storage is averaged, so the layouts (packed weights: engine/packed_weights.h) must
    // agree too: folded into one number per group, as the signature's length must not vary.
    uint64_t layouts = 0;
    for (const auto& s : g.slots) {
      layouts = layouts * 1000003u + static_cast<uint64_t>(s.param.layout().kind) * 1000u +
                static_cast<uint64_t>(s.param.layout().block);
    }
    signature.push_back(static_cast<int64_t>(layouts >> 1));
    st.groups.push_back(std::move(g));
  }
  // Buckets in the model's device memory (on the CPU that is host memory: how the tests run this path).
  st.device_buckets = data.takes_device_memory();
  st.stream = stream ? std::move(stream) : engine::make_side_stream(st.device.value_or(engine::Device::cpu()));
  if (st.device_buckets) data.queue_on(st.stream->native());  // its collectives join the copies' stream
  std::vector<int64_t> all(signature.size() * static_cast<size_t>(control.size()));
  control.all_gather(signature.data(), all.data(), signature.size(), DataType::i64, "model check");
  for (int r = 0; r < control.size(); ++r) {
    if (!std::equal(signature.begin(), signature.end(),
                    all.begin() + static_cast<std::ptrdiff_t>(signature.size() * r))) {
      throw DistError("rank " + std::to_string(r) + " built a different model than rank " +
                      std::to_string(control.rank()) +
                      " (parameter groups, counts, sizes or layouts differ): every rank must run the same workload, "
                      "preset and build, on CPUs that pack weights alike (TS_PACKED_WEIGHTS=0 on every rank keeps "
                      "them plain)");
    }
  }

  // Initial buckets: reverse registration order (backward reaches the last layers first), or
  // front-first partitions with priority.
  for (size_t gi = 0; gi < st.groups.size(); ++gi) {
    std::vector<int> order(st.groups[gi].slots.size());
    std::iota(order.begin(), order.end(), 0);
    if (!options_.priority) std::reverse(order.begin(), order.end());
    build_buckets(static_cast<int>(gi), order);
  }

  // The hooks: a gradient is final -> its buckets may start.
  for (size_t gi = 0; gi < st.groups.size(); ++gi) {
    for (size_t s = 0; s < st.groups[gi].slots.size(); ++s) {
      std::weak_ptr<State> weak = state_;
      const bool record_arrival = options_.order == BucketOrder::arrival && !options_.priority;
      st.groups[gi].slots[s].param.add_grad_ready_hook([weak, gi, s, record_arrival](engine::Tensor&) {
        auto shared = weak.lock();
        if (!shared) return;
        std::lock_guard lock(shared->mutex);
        if (shared->active != static_cast<int>(gi) || shared->ended) return;  // another group's backward
        State::Group& g = shared->groups[gi];
        if (record_arrival && g.passes == 0 && !g.slots[s].ready) g.arrival.push_back(static_cast<int>(s));
        // A gradient means the forward read the parameter: it must have passed its gate.
        State::Slot& slot = g.slots[s];
        if (shared->check_gating && slot.update_index >= 0 && !slot.gated && !slot.ready) {
          shared->ungated.push_back(slot.param.name());
        }
        shared->mark_ready(g, static_cast<int>(s));
        shared->cv.notify_all();
      });
    }
  }
  st.thread = std::thread([this] { run_communication_thread(); });
}

void DataParallel::build_buckets(int group, const std::vector<int>& order) {
  State::Group& g = state_->groups[static_cast<size_t>(group)];
  g.buckets.clear();
  for (auto& s : g.slots) {
    s.buckets.clear();
    s.units = 0;
  }
  using vocabulary::mib_to_floats;
  const int64_t cap = mib_to_floats(options_.priority ? options_.partition_mb : options_.bucket_mb);
  const int64_t piece = options_.priority ? cap : std::numeric_limits<int64_t>::max();
  std::vector<int64_t> counts;
  for (const auto& slot : g.slots) counts.push_back(slot.count);
  for (vocabulary::PlannedBucket& planned : vocabulary::plan_buckets(counts, order, cap, piece)) {
    State::Bucket& b = g.buckets.emplace_back();
    b.units = std::move(planned.units);
    b.count = planned.count;
    b.priority = planned.priority;
    const int index = static_cast<int>(g.buckets.size() - 1);
    for (const vocabulary::BucketUnit& u : b.units) {
      State::Slot& slot = g.slots[static_cast<size_t>(u.slot)];
      ++slot.units;
      if (slot.buckets.empty() || slot.buckets.back() != index) slot.buckets.push_back(index);
    }
  }
  State& st = *state_;
  const engine::Device where = st.device_buckets ? *st.device : engine::Device::cpu();
  const bool pin = !st.device_buckets && st.device && !st.device->is_cpu();  // a GPU model's host buckets
  engine::CategoryScope category(vocabulary::Category::comm);
  for (auto& b : g.buckets) {
    b.buffer = engine::Tensor::empty({b.count}, where);
    if (pin) b.pinned = st.stream->pin(b.buffer.data(), static_cast<size_t>(b.count) * sizeof(float));
    b.ready = st.stream->make_marker();
    b.done = st.stream->make_marker();
  }
  // The negotiation's flags, one int64 per bucket (two floats of storage each).
  if (st.device_buckets && options_.priority) {
    g.flags = engine::Tensor::empty({static_cast<int64_t>(g.buckets.size()) * 2}, where);
  }
}

DataParallel::~DataParallel() {
  {
    std::lock_guard lock(state_->mutex);
    state_->quit = true;
  }
  state_->cv.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  try {
    // The buffers go with the state: nothing may still be copying into them.
    state_->stream->synchronize();
  } catch (const std::exception&) {  // a device that failed: its memory goes anyway
  }
  if (state_->device_buckets) comm_.queue_on(nullptr);  // the stream goes with the state
}

void DataParallel::broadcast_parameters() {
  if (state_->device_buckets) {
    engine::synchronize(*state_->device);  // the parameters' initialisation, queued on the compute queue, is done
    for (auto& g : state_->groups) {
      for (auto& s : g.slots)
        comm_.broadcast(s.param.data(), static_cast<size_t>(s.count), DataType::f32, 0, "parameters");
    }
    return;  // each broadcast returned once finished on the device
  }
  std::vector<float> staged;  // a GPU parameter goes through the host (MPI takes host memory)
  for (auto& g : state_->groups) {
    for (auto& s : g.slots) {
      if (s.param.device().is_cpu()) {
        comm_.broadcast(s.param.data(), static_cast<size_t>(s.count), DataType::f32, 0, "parameters");
        continue;
      }
      staged.resize(static_cast<size_t>(s.count));
      copy_out(s.param, staged.data());
      comm_.broadcast(staged.data(), staged.size(), DataType::f32, 0, "parameters");
      copy_in(s.param, staged.data());
    }
  }
}

bool DataParallel::staged_through_host() const {
  return state_->device && !state_->device->is_cpu() && !state_->device_buckets;
}

bool DataParallel::averages_on_device() const { return state_->device_buckets; }

void DataParallel::begin_backward(int group) {
  State& st = *state_;
  std::unique_lock lock(st.mutex);
  if (group < 0 || group >= static_cast<int>(st.groups.size())) {
    throw DistError("backward of gradient group " + std::to_string(group) + ", but the workload has " +
                    std::to_string(st.groups.size()));
  }
  const bool forward_was_gated = st.window.load();  // the forward before this backward ran with updates pending
  if (st.active >= 0) {
    // Cross-barrier: the last step's updates the forward did not reach are applied first; this
    // backward writes gradients anew.
    if (!st.split || !st.ended) throw DistError("a backward began before the previous one ended");
    if (!st.step_begun) throw DistError("a backward began before the optimizer phase of the previous step");
    finish_pending_step(lock, true);
  }
  st.check_gating = forward_was_gated;
  st.window = false;
  State::Group& g = st.groups[static_cast<size_t>(group)];
  for (auto& s : g.slots) {
    s.ready = false;
    s.unreduced = s.units;
    s.updated = s.update_index < 0 || s.units == 0;
  }
  for (auto& b : g.buckets) {
    b.pending = static_cast<int>(b.units.size());
    b.done_this_pass = false;
  }
  st.ungated.clear();
  st.step_begun = false;
  st.active = group;
  st.ended = false;
  st.finished = false;
  ++st.pass;
  st.cv.notify_all();
}

// On the training thread only (it alone reads and writes `updated` while a step is pending).
void DataParallel::apply_update(int slot) {
  static const profiler::StringId optimizer_name = profiler::Tracer::global().intern("optimizer");
  State& st = *state_;
  State::Slot& s = st.groups[0].slots[static_cast<size_t>(slot)];
  if (s.updated) return;
  // The update's kernels run after the averages were copied back into the gradients.
  for (int b : s.buckets) st.stream->compute_waits(*st.groups[0].buckets[static_cast<size_t>(b)].done);
  {
    profiler::Range range(optimizer_name, profiler::EventKind::phase);
    engine::CategoryScope category(vocabulary::Category::optimizer_state);
    st.split->update(static_cast<size_t>(s.update_index));
  }
  s.updated = true;
}

void DataParallel::finish_pending_step(std::unique_lock<std::mutex>& lock, bool apply) {
  static const profiler::StringId wait_name = profiler::Tracer::global().intern("update wait");
  State& st = *state_;
  if (!st.finished) {
    profiler::Range wait(wait_name, profiler::EventKind::wait);
    st.cv.wait(lock, [&] { return st.finished; });
  }
  // The communication thread is done with this pass: its gradients are this thread's again.
  if (apply && !st.error) {
    for (size_t s = 0; s < st.groups[0].slots.size(); ++s) apply_update(static_cast<int>(s));
  }
  close_pass(lock);
}

void DataParallel::close_pass(std::unique_lock<std::mutex>& lock) {
  (void)lock;  // held by the caller
  State& st = *state_;
  st.groups[static_cast<size_t>(st.active)].passes++;
  st.active = -1;
  st.window = false;
  if (st.error) std::rethrow_exception(std::exchange(st.error, nullptr));
}

void DataParallel::end_backward() {
  State& st = *state_;
  static const profiler::StringId wait_name = profiler::Tracer::global().intern("gradient wait");
  int group = -1;
  {
    std::unique_lock lock(st.mutex);
    if (st.active < 0 || st.ended) throw DistError("end_backward without begin_backward");
    group = st.active;
    State::Group& g = st.groups[static_cast<size_t>(group)];
    st.ended = true;
    for (size_t s = 0; s < g.slots.size(); ++s) {
      if (!g.slots[s].ready) {
        if (!g.slots[s].param.grad().defined()) ++st.without_gradient;
        st.mark_ready(g, static_cast<int>(s));
      }
    }
    st.cv.notify_all();
    if (st.split) return;  // cross-barrier: the next forward's gates and backward wait instead
    profiler::Range wait(wait_name, profiler::EventKind::wait);
    st.cv.wait(lock, [&] { return st.finished; });
    // The optimizer's kernels, queued next, run after each bucket's copies back.
    for (auto& b : g.buckets) st.stream->compute_waits(*b.done);
    close_pass(lock);
  }
  State::Group& g = st.groups[static_cast<size_t>(group)];
  if (g.passes == 1 && options_.order == BucketOrder::arrival && !options_.priority) {
    // DDP's rebuild: rank 0's arrival order, so that every rank builds the same buckets.
    std::vector<int64_t> order(g.slots.size(), -1);
    std::vector<char> seen(g.slots.size(), 0);
    size_t n = 0;
    for (int s : g.arrival) {
      if (!seen[static_cast<size_t>(s)]) {
        seen[static_cast<size_t>(s)] = 1;
        order[n++] = s;
      }
    }
    for (size_t s = g.slots.size(); s-- > 0;) {
      if (!seen[s]) order[n++] = static_cast<int64_t>(s);
    }
    control_.broadcast(order.data(), order.size(), DataType::i64, 0, "bucket order");
    std::vector<int> as_int(order.begin(), order.end());
    std::lock_guard lock(st.mutex);
    build_buckets(group, as_int);
  }
}

std::string DataParallel::take_split_step(engine::optim::SplitStep step) {
  State& st = *state_;
  if (!options_.priority)
    return "cross-barrier goes with --priority (the schedule that averages the front layers first)";
  if (!options_.cross_barrier) return "cross-barrier is turned off (--no-cross-barrier)";
  if (st.groups.size() != 1) return "the workload's iteration has several gradient groups, each with its own step";
  if (!step.begin || !step.update) throw DistError("a split optimizer step without its begin or update");
  std::lock_guard lock(st.mutex);
  if (st.active >= 0 || st.groups[0].passes > 0) throw DistError("the split step is taken before the first backward");
  State::Group& g = st.groups[0];
  std::vector<int> index(g.slots.size(), -1);
  for (size_t i = 0; i < step.parameters.size(); ++i) {
    const auto it = g.slot_of.find(step.parameters[i].impl());
    if (it == g.slot_of.end()) {
      return "the optimizer updates '" + step.parameters[i].name() +
             "', whose gradient data parallelism does not average";
    }
    if (index[static_cast<size_t>(it->second)] >= 0)
      return "the optimizer lists '" + step.parameters[i].name() + "' twice";
    index[static_cast<size_t>(it->second)] = static_cast<int>(i);
  }
  for (size_t s = 0; s < g.slots.size(); ++s) g.slots[s].update_index = index[s];
  st.split = std::move(step);
  split_taken_ = true;
  return "";
}

bool DataParallel::cross_barrier() const {
  std::lock_guard lock(state_->mutex);
  return state_->split.has_value();
}

void DataParallel::begin_updates() {
  State& st = *state_;
  std::unique_lock lock(st.mutex);
  if (!st.split) throw DistError("begin_updates without a split step (cross-barrier is off)");
  if (st.active < 0 || !st.ended || st.step_begun) throw DistError("begin_updates outside the optimizer phase");
  if (!st.ungated.empty()) {
    std::string names;
    for (size_t i = 0; i < st.ungated.size() && i < 3; ++i) names += (i ? ", '" : "'") + st.ungated[i] + "'";
    if (st.ungated.size() > 3) names += " and " + std::to_string(st.ungated.size() - 3) + " more";
    throw DistError("cross-barrier: the forward read " + names +
                    " before waiting for its update (outside its module's scope()): the update would race with "
                    "the forward; run without --priority or with --no-cross-barrier");
  }
  st.split->begin();
  st.step_begun = true;
  for (auto& s : st.groups[0].slots) s.gated = false;
  st.window = true;
}

void DataParallel::flush() {
  control_.finish_all_reduce();  // the last stop flag: nothing of the loop's is left running
  State& st = *state_;
  std::unique_lock lock(st.mutex);
  if (st.active < 0) return;
  if (!st.ended) throw DistError("flush during a backward");
  finish_pending_step(lock, st.step_begun);  // without an optimizer phase the gradients stay as averaged
}

void DataParallel::before_forward(const engine::nn::Module& module) {
  State& st = *state_;
  if (!st.window.load()) return;
  static const profiler::StringId wait_name = profiler::Tracer::global().intern("parameter wait");
  std::unique_lock lock(st.mutex);
  if (!st.window.load()) return;
  State::Group& g = st.groups[0];
  bool all_reduced = true;
  std::vector<int> mine;  // its parameters not updated yet
  for (const auto& [_, p] : module.own_parameters()) {
    const auto it = g.slot_of.find(p.impl());
    if (it == g.slot_of.end()) continue;
    State::Slot& slot = g.slots[static_cast<size_t>(it->second)];
    slot.gated = true;
    if (slot.updated) continue;
    mine.push_back(it->second);
    all_reduced = all_reduced && slot.unreduced == 0;
  }
  if (mine.empty()) return;
  if (!all_reduced) {
    profiler::Range wait(wait_name, profiler::EventKind::wait);
    st.cv.wait(lock, [&] {
      if (st.error || st.quit || st.finished) return true;
      return std::all_of(mine.begin(), mine.end(),
                         [&](int s) { return g.slots[static_cast<size_t>(s)].unreduced == 0; });
    });
  }
  if (st.error) std::rethrow_exception(std::exchange(st.error, nullptr));
  // Averaged: the communication thread is done with these gradients. The update runs here, on
  // the training thread, so that the communication thread only communicates; without the lock,
  // which that thread takes after every bucket.
  lock.unlock();
  for (int s : mine) apply_update(s);
}

bool DataParallel::any_rank(bool local, std::string_view label) {
  int64_t flag = local ? 1 : 0;
  control_.all_reduce(&flag, 1, DataType::i64, ReduceOp::max, label);
  return flag != 0;
}

bool DataParallel::agree_stop(bool local) {
  // Blocking only before the first iteration: a stop asked before training ends it at once.
  // After that the exchange started before the previous iteration has had a whole iteration to
  // finish, and every rank reads the same flag from it.
  bool stop = false;
  if (!stop_asked_once_) {
    stop_asked_once_ = true;
    stop = any_rank(local, "stop flag");
  } else {
    control_.finish_all_reduce();
    stop = stop_flag_ != 0;
  }
  if (stop) return true;
  stop_flag_ = local ? 1 : 0;
  control_.start_all_reduce(&stop_flag_, 1, DataType::i64, ReduceOp::max, "stop flag");
  return false;
}

engine::nn::ParameterGate* DataParallel::forward_gate() { return split_taken_ ? this : nullptr; }

bool DataParallel::begin_update() {
  if (!split_taken_) return true;
  begin_updates();  // the split step (Workload::split_step) does the workload's step, parameter by parameter
  return false;
}

std::vector<BucketLayout> DataParallel::buckets() const {
  std::lock_guard lock(state_->mutex);
  std::vector<BucketLayout> out;
  for (size_t gi = 0; gi < state_->groups.size(); ++gi) {
    const auto& g = state_->groups[gi];
    for (size_t b = 0; b < g.buckets.size(); ++b) {
      BucketLayout l{static_cast<int>(gi),
                     static_cast<int>(b),
                     g.buckets[b].count * static_cast<int64_t>(sizeof(float)),
                     g.buckets[b].priority,
                     {}};
      for (const auto& u : g.buckets[b].units)
        l.parameters.push_back(g.slots[static_cast<size_t>(u.slot)].param.name());
      out.push_back(std::move(l));
    }
  }
  return out;
}

int64_t DataParallel::parameters_without_gradient() const {
  std::lock_guard lock(state_->mutex);
  return state_->without_gradient;
}

void DataParallel::run_communication_thread() {
  State& st = *state_;
  engine::SideStream& side = *st.stream;
  const float scale = 1.0f / static_cast<float>(comm_.size());
  const bool on_gpu = st.device && !st.device->is_cpu();
  auto& tracer = profiler::Tracer::global();
  // The copies into and out of the buckets (and the averaging) are communication in the rank's
  // breakdown, a `comm` event each beside the all-reduce's: data parallelism's own work, which on
  // a CPU also takes cores from the compute it overlaps (reports/interference.h reads them).
  const bool staged = on_gpu && !st.device_buckets;  // a GPU model's gradients through host buckets
  const profiler::StringId copy_in_name = tracer.intern(staged ? "stage to host" : "copy into bucket"),
                           copy_out_name = tracer.intern(staged ? "stage from host" : "copy out of bucket");
  // Copies the bucket's gradients in, averages them across ranks, copies the means back: on the
  // side stream, after the device has reached the bucket's ready marker. The host waits for each
  // step here, on this thread only, so that each recorded time is that step's own.
  const auto reduce = [&](State::Group& g, int gi, int b) {
    State::Bucket& bucket = g.buckets[static_cast<size_t>(b)];
    float* buf = bucket.buffer.data();
    const std::string label = "bucket " + std::to_string(gi) + "." + std::to_string(b);
    side.host_waits(*bucket.ready);  // the gradients are computed: what follows is the exchange's time
    std::optional<profiler::Range> copying;
    copying.emplace(copy_in_name, profiler::EventKind::comm, profiler::Pass::none, tracer.intern(label));
    side.wait(*bucket.ready);
    for (const auto& u : bucket.units) {
      const engine::Tensor grad = g.slots[static_cast<size_t>(u.slot)].param.grad();
      const size_t bytes = static_cast<size_t>(u.count) * sizeof(float);
      if (grad.defined()) side.copy(buf + u.bucket_offset, grad.data() + u.offset, bytes);
      else side.zero(buf + u.bucket_offset, bytes);
    }
    side.synchronize();
    copying.reset();
    comm_.all_reduce(buf, static_cast<size_t>(bucket.count), DataType::f32, ReduceOp::sum, label);
    copying.emplace(copy_out_name, profiler::EventKind::comm, profiler::Pass::none, tracer.intern(label));
    if (st.device_buckets) {
      side.scale(buf, bucket.count, scale);  // the mean, then back into each gradient
    } else {
      for (int64_t i = 0; i < bucket.count; ++i) buf[i] *= scale;
    }
    for (const auto& u : bucket.units) {
      const engine::Tensor grad = g.slots[static_cast<size_t>(u.slot)].param.grad();
      if (grad.defined())
        side.copy(grad.data() + u.offset, buf + u.bucket_offset, static_cast<size_t>(u.count) * sizeof(float));
    }
    side.mark(*bucket.done);
    side.synchronize();  // a host buffer is written again in the next pass
  };
  // Priority: the ranks' ready sets intersected (a minimum over 0/1 flags), so that all pick the
  // same bucket. NCCL takes device memory only: the flags go through the GPU there.
  const auto negotiate = [&](State::Group& g, std::vector<int64_t>& mask) {
    if (!st.device_buckets) {
      comm_.all_reduce(mask.data(), mask.size(), DataType::i64, ReduceOp::min, "priority negotiation");
      return;
    }
    void* flags = g.flags.data();
    const size_t bytes = mask.size() * sizeof(int64_t);
    side.copy(flags, mask.data(), bytes);
    comm_.all_reduce(flags, mask.size(), DataType::i64, ReduceOp::min, "priority negotiation");
    side.copy(mask.data(), flags, bytes);
    side.synchronize();
  };
  // Cross-barrier: a parameter whose buckets are all averaged may be updated (by the training
  // thread, in the next forward's gate or at the next backward).
  const auto after_reduce = [&](State::Group& g, int b) {
    if (!st.split) return;  // taken before the first pass and never changed after
    {
      std::lock_guard lock(st.mutex);
      for (const auto& u : g.buckets[static_cast<size_t>(b)].units) --g.slots[static_cast<size_t>(u.slot)].unreduced;
    }
    st.cv.notify_all();
  };

  for (;;) {
    int gi = -1;
    {
      std::unique_lock lock(st.mutex);
      st.cv.wait(lock, [&] { return st.quit || (st.active >= 0 && st.served != st.pass); });
      if (st.quit) return;
      st.served = st.pass;
      gi = st.active;
    }
    State::Group& g = st.groups[static_cast<size_t>(gi)];
    try {
      if (!options_.priority) {
        for (size_t b = 0; b < g.buckets.size(); ++b) {
          {
            std::unique_lock lock(st.mutex);
            st.cv.wait(lock, [&] { return st.quit || ((options_.overlap || st.ended) && g.buckets[b].pending == 0); });
            if (st.quit) return;
          }
          reduce(g, gi, static_cast<int>(b));
          after_reduce(g, static_cast<int>(b));
        }
      } else {
        const size_t n = g.buckets.size();
        std::vector<int64_t> mask(n);
        size_t left = n;
        while (left > 0) {
          int seen_changes = 0;
          bool all_mine_ready = true;
          {
            std::unique_lock lock(st.mutex);
            st.cv.wait(lock, [&] {
              if (st.quit) return true;
              if (!options_.overlap && !st.ended) return false;
              for (const auto& b : g.buckets) {
                if (!b.done_this_pass && b.pending == 0) return true;
              }
              return false;
            });
            if (st.quit) return;
            seen_changes = st.ready_changes;
            for (size_t b = 0; b < n; ++b) {
              const bool ready = !g.buckets[b].done_this_pass && g.buckets[b].pending == 0;
              mask[b] = ready ? 1 : 0;
              if (!g.buckets[b].done_this_pass && !ready) all_mine_ready = false;
            }
          }
          negotiate(g, mask);
          int pick = -1;
          for (size_t b = 0; b < n; ++b) {
            if (mask[b] && (pick < 0 || g.buckets[b].priority < g.buckets[static_cast<size_t>(pick)].priority)) {
              pick = static_cast<int>(b);
            }
          }
          if (pick >= 0) {
            reduce(g, gi, pick);
            {
              std::lock_guard lock(st.mutex);
              g.buckets[static_cast<size_t>(pick)].done_this_pass = true;
              --left;
            }
            after_reduce(g, pick);
          } else if (!all_mine_ready) {
            // Nothing ready everywhere yet: wait until more is ready here, then ask again.
            std::unique_lock lock(st.mutex);
            st.cv.wait(lock, [&] { return st.quit || st.ready_changes != seen_changes; });
            if (st.quit) return;
          }
        }
      }
    } catch (...) {
      std::lock_guard lock(st.mutex);
      st.error = std::current_exception();
    }
    {
      std::lock_guard lock(st.mutex);
      st.finished = true;
    }
    st.cv.notify_all();
  }
}

}  // namespace ts::distributed
