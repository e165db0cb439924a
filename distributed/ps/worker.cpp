#include "distributed/ps/worker.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/ps/wire.h"
#include "distributed/stall_watch.h"
#include "engine/context.h"
#include "engine/device_memory.h"
#include "engine/optim/clip.h"
#include "engine/side_stream.h"
#include "fmt/format.h"
#include "profiler/tracer.h"

namespace ts::distributed::ps {

namespace {

struct Names {
  profiler::StringId push, pull, pull_wait, push_wait, init;
};
const Names& names() {
  static const Names n = [] {
    auto& t = profiler::Tracer::global();
    return Names{t.intern("ps push"), t.intern("ps pull"), t.intern("pull wait"), t.intern("push wait"),
                 t.intern("ps init")};
  }();
  return n;
}

}  // namespace

struct PsWorker::State {
  int worker = 0;
  KeyLayout layout;
  std::vector<std::vector<engine::Tensor>> groups;
  std::vector<double> clip_norms;
  PsOptions options;
  Topology topology;
  MPI_Comm to_servers = MPI_COMM_NULL, to_workers = MPI_COMM_NULL, workers = MPI_COMM_NULL;

  struct KeyState {
    int64_t pushed = 0;            // pushes made (the clock)
    int64_t answered = -1;         // the clock the newest arrived value answers (-1: none yet)
    int64_t arrived_version = -1;  // the newest arrived value's version
    int64_t installed_version = -1;
    bool final_arrived = false;
    std::vector<float> arrived;
  };
  std::vector<KeyState> keys;
  std::unordered_map<const engine::TensorImpl*, std::pair<int, int>> where;  // parameter -> (group, tensor)
  std::vector<std::vector<bool>> gated, ungated, hooked;                     // [group][tensor]

  // Outgoing messages; `order` decides which goes first (priority, then arrival). A GPU
  // gradient's values are read by the send thread from its tensor's host mirror once the side
  // stream's copy there (`copied`) is done: the training thread never waits for it.
  struct Outgoing {
    MessageHeader header;
    std::vector<float> data;
    int dest = 0;
    const float* source = nullptr;  // the mirror's values, `floats` of them, once `copied` is reached
    int64_t floats = 0;
    engine::StreamMarker* copied = nullptr;
  };
  std::multimap<std::pair<int64_t, int64_t>, Outgoing> outbox;
  int64_t sequence = 0;
  int64_t in_flight = 0;           // queued or being sent
  int64_t queued_push_floats = 0;  // gradient values queued or being sent
  int64_t reading_mirrors = 0;     // pushes the send thread is reading from a host mirror
  bool closing = false;
  int byes = 0;
  bool finished = false;
  int active = -1;         // the group whose backward is running
  bool gate_open = false;  // inside a forward phase
  int64_t pushes = 0, bytes_pushed = 0;
  std::exception_ptr error;

  // A model on a GPU: each tensor's gradient goes to the servers through a pinned host mirror,
  // copied on a side stream once the compute queue has reached the tensor's ready marker (the
  // backward never waits on the host); the next compute work on the gradient (its zeroing) waits
  // for the copy. The values pulled back go the other way through a second pinned mirror: copied
  // on the side stream after the compute work queued so far (which may still read the old
  // values), and the compute queue waits for them before the layer's kernels. Declared before the
  // stream, which is destroyed first, waiting for its copies.
  struct Mirror {
    engine::Tensor host;  // the gradient's way out; memory category comm
    std::unique_ptr<engine::PinnedHost> pinned;
    std::unique_ptr<engine::StreamMarker> ready, copied;
    bool pending = false;   // copied in this backward: the zeroing waits for it
    engine::Tensor values;  // the values' way in; memory category comm
    std::unique_ptr<engine::PinnedHost> values_pinned;
    std::unique_ptr<engine::StreamMarker> before_install, installed;
    bool installing = false;  // a copy from `values` was queued: it is done before `values` is written again
  };
  std::vector<std::vector<Mirror>> mirrors;  // [group][tensor]; empty on the CPU
  std::unique_ptr<engine::SideStream> stream;

  std::mutex mutex;
  std::condition_variable cv;
  std::thread sender, receiver;

  void enqueue(int key, MessageHeader header, std::vector<float> data, int dest) {
    Outgoing out{header, std::move(data), dest};
    out.floats = static_cast<int64_t>(out.data.size());
    enqueue(key, std::move(out));
  }
  void enqueue(int key, Outgoing out) {
    const int64_t order = options.priority && key >= 0 ? layout.keys[static_cast<size_t>(key)].priority : 0;
    if (out.header.kind == MessageKind::push) queued_push_floats += out.floats;
    outbox.emplace(std::make_pair(order, sequence++), std::move(out));
    ++in_flight;
    cv.notify_all();
  }
  void check() {
    if (error) std::rethrow_exception(error);
  }
  // Under the lock: key `id`'s part of `grad` (undefined: a push without a gradient), computed
  // on the key's value of version `version`, as this worker's next push of that key.
  void enqueue_push(int id, const engine::Tensor& grad, int64_t version) {
    const Key& spec = layout.keys[static_cast<size_t>(id)];
    KeyState& k = keys[static_cast<size_t>(id)];
    k.pushed += 1;
    Outgoing out{MessageHeader{MessageKind::push, id, worker, profiler::Tracer::global().iteration(), k.pushed,
                               std::max<int64_t>(0, version)},
                 {},
                 topology.server_rank(spec.server)};
    if (grad.defined() && !grad.device().is_cpu()) {  // push_tensor queued its copy into the mirror
      const Mirror& m = mirrors[static_cast<size_t>(spec.group)][static_cast<size_t>(spec.tensor)];
      out.source = m.host.data() + spec.offset;
      out.floats = spec.count;
      out.copied = m.copied.get();
    } else {
      if (grad.defined()) out.data.assign(grad.data() + spec.offset, grad.data() + spec.offset + spec.count);
      out.floats = static_cast<int64_t>(out.data.size());
    }
    enqueue(id, std::move(out));
  }
  // Group `group`'s parameters, once `tensors` are shown to match them (a learner's copy of the
  // network, or its gradients, where `may_be_undefined`).
  const std::vector<engine::Tensor>& checked_group(int group, const std::vector<engine::Tensor>& tensors,
                                                   const char* what, bool may_be_undefined = false) const {
    if (group < 0 || static_cast<size_t>(group) >= groups.size()) {
      throw DistError(std::string("parameter server: ") + what + " of gradient group " + std::to_string(group) +
                      ", which does not exist");
    }
    const auto& params = groups[static_cast<size_t>(group)];
    if (tensors.size() != params.size()) {
      throw DistError(std::string("parameter server: ") + what + " of " + std::to_string(tensors.size()) +
                      " tensors for gradient group " + std::to_string(group) + " of " + std::to_string(params.size()));
    }
    for (size_t t = 0; t < params.size(); ++t) {
      if (may_be_undefined && !tensors[t].defined()) continue;
      if (!tensors[t].defined() || tensors[t].layout() != params[t].layout() ||
          tensors[t].device().type != engine::DeviceType::cpu) {
        throw DistError(std::string("parameter server: ") + what + ": tensor " + std::to_string(t) +
                        " is not laid out as '" + params[t].name() + "' on the CPU");
      }
    }
    return params;
  }
};

PsWorker::PsWorker(int worker, const KeyLayout& layout, std::vector<std::vector<engine::Tensor>> groups,
                   std::vector<double> clip_norms, const PsOptions& options, const Topology& topology,
                   MPI_Comm to_servers, MPI_Comm to_workers, MPI_Comm workers)
    : state_(std::make_shared<State>()) {
  State& st = *state_;
  st.worker = worker;
  st.layout = layout;
  st.groups = std::move(groups);
  st.clip_norms = std::move(clip_norms);
  st.clip_norms.resize(st.groups.size(), 0.0);
  st.options = options;
  st.topology = topology;
  st.to_servers = to_servers;
  st.to_workers = to_workers;
  st.workers = workers;
  st.keys.resize(layout.keys.size());
  // One device for the whole model: the CPU, or one GPU whose gradients and values go through host memory.
  std::optional<engine::Device> device;
  for (const auto& group : st.groups) {
    for (const auto& p : group) {
      if (!device) device = p.device();
      if (p.device() != *device || (!p.device().is_cpu() && p.device().type != engine::DeviceType::cuda)) {
        throw DistError("the parameter server's worker trains a model on one device (the CPU or one GPU); '" +
                        p.name() + "' is on " + p.device().str() + ", the first parameter on " + device->str());
      }
    }
  }
  if (device && !device->is_cpu()) {
    st.stream = engine::make_side_stream(*device);
    engine::CategoryScope category(vocabulary::Category::comm);
    for (const auto& group : st.groups) {
      auto& mirrors = st.mirrors.emplace_back();
      for (const auto& p : group) {
        State::Mirror& m = mirrors.emplace_back();
        m.host = engine::Tensor::empty({p.storage_numel()}, engine::Device::cpu());
        m.pinned = st.stream->pin(m.host.data(), static_cast<size_t>(p.storage_numel()) * sizeof(float));
        m.ready = st.stream->make_marker();
        m.copied = st.stream->make_marker();
        m.values = engine::Tensor::empty({p.storage_numel()}, engine::Device::cpu());
        m.values_pinned = st.stream->pin(m.values.data(), static_cast<size_t>(p.storage_numel()) * sizeof(float));
        m.before_install = st.stream->make_marker();
        m.installed = st.stream->make_marker();
      }
    }
  }
  if (layout.of_tensor.size() != st.groups.size())
    throw DistError("parameter server: the key layout does not match the model's groups");
  for (size_t g = 0; g < st.groups.size(); ++g) {
    if (layout.of_tensor[g].size() != st.groups[g].size())
      throw DistError("parameter server: the key layout does not match the model");
    st.gated.emplace_back(st.groups[g].size(), false);
    st.ungated.emplace_back(st.groups[g].size(), false);
    st.hooked.emplace_back(st.groups[g].size(), false);
    for (size_t t = 0; t < st.groups[g].size(); ++t) {
      engine::Tensor& p = st.groups[g][t];
      st.where[p.impl()] = {static_cast<int>(g), static_cast<int>(t)};
      std::weak_ptr<State> weak = state_;
      const bool clipped = st.clip_norms[g] > 0;
      if (clipped) continue;  // pushed after backward, once the group's norm is known
      p.add_grad_ready_hook([this, weak, g, t](engine::Tensor&) {
        auto shared = weak.lock();
        if (!shared) return;
        {
          std::lock_guard lock(shared->mutex);
          if (shared->active != static_cast<int>(g) || shared->hooked[g][t]) return;
          shared->hooked[g][t] = true;
        }
        push_tensor(static_cast<int>(g), static_cast<int>(t), true);
      });
    }
  }
  st.sender = std::thread([s = state_] { send_thread(s); });
  st.receiver = std::thread([s = state_] { receive_thread(s); });
}

PsWorker::~PsWorker() {
  // finish() joined them; otherwise the job is failing, and finish()'s collective would hang.
  State& st = *state_;
  if (st.sender.joinable()) st.sender.detach();
  if (st.receiver.joinable()) st.receiver.detach();
}

const KeyLayout& PsWorker::layout() const { return state_->layout; }
int64_t PsWorker::pushes() const {
  std::lock_guard lock(state_->mutex);
  return state_->pushes;
}
int64_t PsWorker::bytes_pushed() const {
  std::lock_guard lock(state_->mutex);
  return state_->bytes_pushed;
}

void PsWorker::send_thread(const std::shared_ptr<State>& state) {
  State& st = *state;
  auto& tracer = profiler::Tracer::global();
  try {
    for (;;) {
      State::Outgoing out;
      {
        std::unique_lock lock(st.mutex);
        st.cv.wait(lock, [&] { return !st.outbox.empty() || (st.closing && st.in_flight == 0); });
        if (st.outbox.empty()) return;
        out = std::move(st.outbox.begin()->second);
        st.outbox.erase(st.outbox.begin());
        if (out.copied) ++st.reading_mirrors;
      }
      if (out.copied) {  // a GPU gradient: its copy into the host mirror must be done before it is read
        st.stream->host_waits(*out.copied);
        out.data.assign(out.source, out.source + out.floats);
        std::lock_guard lock(st.mutex);
        --st.reading_mirrors;
        st.cv.notify_all();
      }
      const bool is_push = out.header.kind == MessageKind::push;
      {
        profiler::Range r(tracer,
                          is_push                                ? names().push
                          : out.header.kind == MessageKind::init ? names().init
                                                                 : names().pull,
                          profiler::EventKind::comm);
        send_message(st.to_servers, out.dest, out.header, out.data.data(), static_cast<int64_t>(out.data.size()));
      }
      std::lock_guard lock(st.mutex);
      --st.in_flight;
      if (is_push) {
        st.queued_push_floats -= out.floats;
        st.pushes += 1;
        st.bytes_pushed += static_cast<int64_t>(sizeof(MessageHeader) + out.data.size() * sizeof(float));
      }
      st.cv.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(st.mutex);
    st.error = std::current_exception();
    st.cv.notify_all();
  }
}

void PsWorker::receive_thread(const std::shared_ptr<State>& state) {
  State& st = *state;
  try {
    while (true) {
      {
        std::lock_guard lock(st.mutex);
        if (st.byes == st.topology.servers) return;
      }
      int source = 0;
      Message m = receive_message(st.to_workers, source);
      std::lock_guard lock(st.mutex);
      if (m.header.kind == MessageKind::bye) {
        st.byes += 1;
        st.cv.notify_all();
        continue;
      }
      if (m.header.kind != MessageKind::value || m.header.key < 0 ||
          static_cast<size_t>(m.header.key) >= st.keys.size() ||
          m.data.size() != static_cast<size_t>(st.layout.keys[static_cast<size_t>(m.header.key)].count)) {
        throw DistError("parameter server: a malformed answer from rank " + std::to_string(source));
      }
      State::KeyState& k = st.keys[static_cast<size_t>(m.header.key)];
      // Answers may cross (eager mode sends every update): keep the newest.
      if (m.header.version >= k.arrived_version) {
        k.arrived_version = m.header.version;
        k.arrived = std::move(m.data);
      }
      k.answered = std::max(k.answered, m.header.clock);
      if (m.header.final_read != 0) k.final_arrived = true;
      st.cv.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(st.mutex);
    st.error = std::current_exception();
    st.cv.notify_all();
  }
}

void PsWorker::initialize() {
  State& st = *state_;
  std::unique_lock lock(st.mutex);
  std::vector<float> values;  // a GPU tensor's, read through the host once
  for (const Key& k : st.layout.keys) {
    const engine::Tensor& p = st.groups[static_cast<size_t>(k.group)][static_cast<size_t>(k.tensor)];
    const int dest = st.topology.server_rank(k.server);
    if (st.worker == 0) {
      values.resize(static_cast<size_t>(k.count));
      if (p.device().is_cpu()) {
        std::copy(p.data() + k.offset, p.data() + k.offset + k.count, values.begin());
      } else {  // waits for the parameters' initialisation queued on the device
        engine::memory_for(p.device()).copy_to_host(values.data(), p.data() + k.offset, values.size() * sizeof(float));
      }
      st.enqueue(k.id, MessageHeader{MessageKind::init, k.id, 0, -1, 0, 0}, values, dest);
    }
    st.enqueue(k.id, MessageHeader{MessageKind::pull, k.id, st.worker, -1, 0, 0}, {}, dest);
  }
  lock.unlock();
  for (const Key& k : st.layout.keys) install(k.id, true);
}

void PsWorker::install(int key, bool wait, bool even_eager) {
  State& st = *state_;
  const Key& spec = st.layout.keys[static_cast<size_t>(key)];
  std::unique_lock lock(st.mutex);
  State::KeyState& k = st.keys[static_cast<size_t>(key)];
  // Eager: the value may lag by this worker's last push (whose update and answer overlap with
  // the next step's compute), never by more; the other modes wait for the answer to it.
  const int64_t lag = st.options.mode == PsMode::eager && !even_eager ? 1 : 0;
  const auto answered = [&] { return (k.arrived_version >= 0 && k.answered >= k.pushed - lag) || st.error; };
  const bool must_wait = k.installed_version < 0 || wait;
  if (must_wait && !answered()) {
    profiler::Range r(names().pull_wait, profiler::EventKind::wait);
    const StallWatch::Call watched("ps", "pull wait", fmt::format("key {}", key), st.topology.server_rank(spec.server));
    st.cv.wait(lock, answered);
  }
  st.check();
  if (k.arrived_version <= k.installed_version || k.arrived.empty()) return;
  const engine::Tensor& p = st.groups[static_cast<size_t>(spec.group)][static_cast<size_t>(spec.tensor)];
  float* dst = p.data() + spec.offset;
  const size_t bytes = static_cast<size_t>(spec.count) * sizeof(float);
  if (p.device().is_cpu()) {
    std::memcpy(dst, k.arrived.data(), bytes);
  } else {  // through the tensor's pinned values mirror, on the side stream (State::Mirror)
    State::Mirror& m = st.mirrors[static_cast<size_t>(spec.group)][static_cast<size_t>(spec.tensor)];
    if (m.installing) st.stream->host_waits(*m.installed);  // the mirror's last values are on the device
    float* staged = m.values.data() + spec.offset;
    std::memcpy(staged, k.arrived.data(), bytes);
    st.stream->mark_compute(*m.before_install);
    st.stream->wait(*m.before_install);
    st.stream->copy(dst, staged, bytes);
    st.stream->mark(*m.installed);
    st.stream->compute_waits(*m.installed);  // the layer's kernels, queued next, read the new values
    m.installing = true;
  }
  k.installed_version = k.arrived_version;
}

void PsWorker::begin_forward() {
  State& st = *state_;
  std::vector<int> keys;
  {
    std::lock_guard lock(st.mutex);
    st.check();
    st.gate_open = true;
    for (size_t g = 0; g < st.groups.size(); ++g) {
      std::fill(st.gated[g].begin(), st.gated[g].end(), false);
      for (size_t t = 0; t < st.groups[g].size(); ++t) {
        if (st.ungated[g][t])
          keys.insert(keys.end(), st.layout.of_tensor[g][t].begin(), st.layout.of_tensor[g][t].end());
      }
    }
  }
  for (int k : keys) install(k, true);
}

void PsWorker::before_forward(const engine::nn::Module& module) {
  State& st = *state_;
  std::vector<int> keys;
  {
    std::lock_guard lock(st.mutex);
    if (!st.gate_open) return;
    for (const auto& [_, p] : module.own_parameters()) {
      const auto it = st.where.find(p.impl());
      if (it == st.where.end()) continue;
      const auto [g, t] = it->second;
      if (st.gated[static_cast<size_t>(g)][static_cast<size_t>(t)]) continue;
      st.gated[static_cast<size_t>(g)][static_cast<size_t>(t)] = true;
      const auto& ks = st.layout.of_tensor[static_cast<size_t>(g)][static_cast<size_t>(t)];
      keys.insert(keys.end(), ks.begin(), ks.end());
    }
  }
  for (int k : keys) install(k, true);
}

void PsWorker::begin_backward(int group) {
  State& st = *state_;
  std::unique_lock lock(st.mutex);
  st.check();
  if (group < 0 || static_cast<size_t>(group) >= st.groups.size())
    throw DistError("parameter server: no gradient group " + std::to_string(group));
  st.gate_open = false;
  // ... and read from the host mirrors, which this backward's copies overwrite.
  const auto pushed = [&] {
    return st.error || (st.reading_mirrors == 0 && std::none_of(st.outbox.begin(), st.outbox.end(), [](const auto& o) {
                          return o.second.header.kind == MessageKind::push;
                        }));
  };
  if (!pushed()) {
    profiler::Range r(names().push_wait, profiler::EventKind::wait);
    const StallWatch::Call watched("ps", "push wait", fmt::format("group {}", group), kSomeRank);
    st.cv.wait(lock, pushed);
  }
  st.check();
  st.active = group;
  std::fill(st.hooked[static_cast<size_t>(group)].begin(), st.hooked[static_cast<size_t>(group)].end(), false);
}

void PsWorker::end_backward() {
  State& st = *state_;
  int group = -1;
  {
    std::lock_guard lock(st.mutex);
    st.check();
    group = st.active;
    st.active = -1;
  }
  if (group < 0) throw DistError("parameter server: end_backward without begin_backward");
  auto& params = st.groups[static_cast<size_t>(group)];
  if (st.clip_norms[static_cast<size_t>(group)] > 0)
    engine::optim::clip_grad_norm(params, st.clip_norms[static_cast<size_t>(group)]);
  for (size_t t = 0; t < params.size(); ++t) {
    bool hooked = false;
    {
      std::lock_guard lock(st.mutex);
      hooked = st.hooked[static_cast<size_t>(group)][t];
      st.hooked[static_cast<size_t>(group)][t] = true;
      // A gradient for a parameter no gate saw: the forward read it outside its layer's scope,
      // so from the next step on its value is installed before the forward begins.
      if (params[t].grad().defined() && !st.gated[static_cast<size_t>(group)][t])
        st.ungated[static_cast<size_t>(group)][t] = true;
    }
    if (!hooked) push_tensor(group, static_cast<int>(t), params[t].grad().defined());
    if (!st.mirrors.empty()) {  // the zeroing, queued next, waits for the copy into the mirror
      State::Mirror& m = st.mirrors[static_cast<size_t>(group)][t];
      if (m.pending) st.stream->compute_waits(*m.copied);
      m.pending = false;
    }
    params[t].zero_grad();
  }
}

void PsWorker::push_tensor(int group, int tensor, bool has_gradient) {
  State& st = *state_;
  const engine::Tensor& p = st.groups[static_cast<size_t>(group)][static_cast<size_t>(tensor)];
  const engine::Tensor grad = has_gradient ? p.grad() : engine::Tensor();
  if (grad.defined() && grad.layout() != p.layout()) {
    throw DistError("parameter server: the gradient of '" + p.name() + "' has another layout than the parameter");
  }
  if (grad.defined() && !grad.device().is_cpu()) {
    // After the kernels that made it final, on the side stream: into the host mirror, which the
    // send thread reads once the copy is done.
    State::Mirror& m = st.mirrors[static_cast<size_t>(group)][static_cast<size_t>(tensor)];
    st.stream->mark_compute(*m.ready);
    st.stream->wait(*m.ready);
    st.stream->copy(m.host.data(), grad.data(), static_cast<size_t>(grad.storage_numel()) * sizeof(float));
    st.stream->mark(*m.copied);
    m.pending = true;
  }
  std::lock_guard lock(st.mutex);
  for (int id : st.layout.of_tensor[static_cast<size_t>(group)][static_cast<size_t>(tensor)]) {
    st.enqueue_push(id, grad, st.keys[static_cast<size_t>(id)].installed_version);
  }
}

engine::optim::ParameterService::Versions PsWorker::read(int group, const std::vector<engine::Tensor>& into) {
  State& st = *state_;
  const auto& params = st.checked_group(group, into, "read");
  std::unique_lock lock(st.mutex);
  const auto arrived = [&] {
    if (st.error) return true;
    for (size_t t = 0; t < params.size(); ++t) {
      for (int id : st.layout.of_tensor[static_cast<size_t>(group)][t]) {
        if (st.keys[static_cast<size_t>(id)].arrived_version < 0) return false;
      }
    }
    return true;
  };
  if (!arrived()) {
    profiler::Range r(names().pull_wait, profiler::EventKind::wait);
    const StallWatch::Call watched("ps", "pull wait", fmt::format("group {}", group), kSomeRank);
    st.cv.wait(lock, arrived);
  }
  st.check();
  Versions versions;
  for (size_t t = 0; t < params.size(); ++t) {
    for (int id : st.layout.of_tensor[static_cast<size_t>(group)][t]) {
      const Key& spec = st.layout.keys[static_cast<size_t>(id)];
      const State::KeyState& k = st.keys[static_cast<size_t>(id)];
      std::memcpy(into[t].data() + spec.offset, k.arrived.data(), static_cast<size_t>(spec.count) * sizeof(float));
      versions.push_back(k.arrived_version);
    }
  }
  return versions;
}

void PsWorker::push(int group, const std::vector<engine::Tensor>& gradients, const Versions& versions) {
  State& st = *state_;
  const auto& params = st.checked_group(group, gradients, "push", true);
  int64_t keys = 0, floats = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    keys += static_cast<int64_t>(st.layout.of_tensor[static_cast<size_t>(group)][t].size());
    floats += params[t].numel();
  }
  if (static_cast<int64_t>(versions.size()) != keys) {
    throw DistError("parameter server: a push of group " + std::to_string(group) + " with " +
                    std::to_string(versions.size()) + " versions for its " + std::to_string(keys) + " keys");
  }
  std::unique_lock lock(st.mutex);
  const auto room = [&] { return st.error || st.queued_push_floats < 2 * floats; };
  if (!room()) {
    profiler::Range r(names().push_wait, profiler::EventKind::wait);
    const StallWatch::Call watched("ps", "push wait", fmt::format("group {}", group), kSomeRank);
    st.cv.wait(lock, room);
  }
  st.check();
  size_t v = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    for (int id : st.layout.of_tensor[static_cast<size_t>(group)][t]) st.enqueue_push(id, gradients[t], versions[v++]);
  }
}

void PsWorker::refresh_model() {
  for (const Key& k : state_->layout.keys) install(k.id, true, true);
}

bool PsWorker::stop_requested(bool local) {
  State& st = *state_;
  if (st.options.mode != PsMode::sync) return local;
  int64_t flag = local ? 1 : 0;
  const StallWatch::Call watched("ps workers", "all_reduce", "stop flag", kSomeRank);
  TS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT64_T, MPI_MAX, st.workers));
  return flag != 0;
}

void PsWorker::finish() {
  State& st = *state_;
  {
    std::lock_guard lock(st.mutex);
    if (st.finished) return;
    st.finished = true;
  }
  std::exception_ptr failure;
  try {
    for (const Key& k : st.layout.keys) install(k.id, true, true);  // the answers to this worker's last pushes
    // Once every worker is through, one last read of every key: asynchronous workers end at
    // different times, and each should hold the servers' final model, not its last read of it.
    {
      const StallWatch::Call watched("ps workers", "barrier", "end", kSomeRank);
      TS_MPI_CHECK(MPI_Barrier(st.workers));
    }
    std::unique_lock lock(st.mutex);
    for (const Key& k : st.layout.keys) {
      MessageHeader h{MessageKind::pull, k.id, st.worker, -1, st.keys[static_cast<size_t>(k.id)].pushed, 0, 1, 0};
      st.enqueue(k.id, h, {}, st.topology.server_rank(k.server));
    }
    const auto all_final = [&] {
      return st.error ||
             std::all_of(st.keys.begin(), st.keys.end(), [](const State::KeyState& k) { return k.final_arrived; });
    };
    if (!all_final()) {
      profiler::Range r(names().pull_wait, profiler::EventKind::wait);
      const StallWatch::Call watched("ps", "pull wait", "the final model", kSomeRank);
      st.cv.wait(lock, all_final);
    }
    st.check();
    lock.unlock();
    for (const Key& k : st.layout.keys) install(k.id, false);
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::unique_lock lock(st.mutex);
    if (!st.error) {
      for (int s = 0; s < st.topology.servers; ++s) {
        st.enqueue(-1, MessageHeader{MessageKind::done, -1, st.worker, profiler::Tracer::global().iteration(), 0, 0},
                   {}, st.topology.server_rank(s));
      }
      st.closing = true;
      st.cv.notify_all();
      const StallWatch::Call watched("ps", "wait", "the servers' goodbyes", kSomeRank);
      st.cv.wait(lock, [&] { return st.error || (st.in_flight == 0 && st.byes == st.topology.servers); });
    }
    if (!failure && st.error) failure = st.error;
  }
  if (!failure) {
    st.sender.join();
    st.receiver.join();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ts::distributed::ps
