#include "distributed/ps/server.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "distributed/error.h"
#include "distributed/ps/wire.h"
#include "engine/context.h"
#include "profiler/tracer.h"
#include "vocabulary/clock.h"
#include "vocabulary/memory_category.h"

namespace ts::distributed::ps {

namespace {

struct Names {
  profiler::StringId aggregate, update, reply;
};
const Names& names() {
  static const Names n = [] {
    auto& t = profiler::Tracer::global();
    return Names{t.intern("ps aggregate"), t.intern("ps update"), t.intern("ps reply")};
  }();
  return n;
}

// A `comm` event of the serving thread, stamped with the iteration of the worker it serves (a
// dedicated server runs no iterations of its own).
void trace(profiler::StringId name, profiler::StringId layer, int64_t start_ns, int32_t iteration) {
  auto& tracer = profiler::Tracer::global();
  if (!tracer.enabled()) return;
  profiler::Event e{
      start_ns, vocabulary::now_ns(), name, layer, profiler::EventKind::comm, profiler::Pass::none, iteration, 0};
  tracer.record_raw(e);
}

}  // namespace

struct ParameterServer::KeyState {
  const Key* key = nullptr;
  profiler::StringId name = 0;
  engine::Tensor value;
  std::unique_ptr<engine::optim::ShardOptimizer> optimizer;
  bool initialized = false;
  int64_t version = 0;
  // sync: the round's gradients summed, how many workers have pushed, whether any had one.
  std::vector<float> sum;
  int contributions = 0;
  bool any_gradient = false;
  std::vector<int64_t> pushes;  // per worker, applied (or summed)
  struct Read {
    int worker = 0;
    int64_t clock = 0;
    int32_t iteration = -1;
    int32_t final_read = 0;
  };
  std::vector<Read> waiting;  // reads not answered yet
};

// The network side: messages in arrival order, taken by the serving thread.
struct ParameterServer::Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<int, Message>> queue;
  bool closed = false;
  std::exception_ptr error;
};

ParameterServer::ParameterServer(int server, int rank, const KeyLayout& layout,
                                 std::vector<engine::optim::OptimizerRecipe> recipes, const PsOptions& options,
                                 const Topology& topology, MPI_Comm to_servers, MPI_Comm to_workers)
    : server_(server),
      layout_(layout),
      recipes_(std::move(recipes)),
      options_(options),
      topology_(topology),
      to_servers_(to_servers),
      to_workers_(to_workers) {
  stats_.server = server;
  stats_.rank = rank;
  keys_.resize(layout.keys.size());
  done_workers_.assign(static_cast<size_t>(topology.workers), false);
  for (const Key& k : layout.keys) {
    if (k.server != server) continue;
    if (static_cast<size_t>(k.group) >= recipes_.size() || !recipes_[static_cast<size_t>(k.group)].build) {
      throw DistError("parameter server: no optimizer recipe for gradient group " + std::to_string(k.group));
    }
    auto s = std::make_unique<KeyState>();
    s->key = &k;
    s->name = profiler::Tracer::global().intern(k.name);
    s->pushes.assign(static_cast<size_t>(topology.workers), 0);
    {
      engine::CategoryScope category(vocabulary::Category::weights);
      s->value = engine::Tensor::zeros({k.count}, engine::Device::cpu());
    }
    s->optimizer = recipes_[static_cast<size_t>(k.group)].build({s->value});
    stats_.keys += 1;
    stats_.bytes_held += k.bytes();
    keys_[static_cast<size_t>(k.id)] = std::move(s);
  }
}

ParameterServer::~ParameterServer() = default;

void ParameterServer::serve() {
  Inbox inbox;
  const int workers = topology_.workers;
  // Receives until every worker has said done; its own count, so that it never waits for a
  // message that will not come.
  std::thread receiver([&] {
    try {
      int done = 0;
      while (done < workers) {
        int source = 0;
        Message m = receive_message(to_servers_, source);
        if (m.header.kind == MessageKind::done) ++done;
        std::lock_guard lock(inbox.mutex);
        inbox.queue.emplace_back(source, std::move(m));
        inbox.cv.notify_one();
      }
    } catch (...) {
      std::lock_guard lock(inbox.mutex);
      inbox.error = std::current_exception();
    }
    std::lock_guard lock(inbox.mutex);
    inbox.closed = true;
    inbox.cv.notify_one();
  });
  int64_t taken = 0, queued_sum = 0;
  try {
    while (done_ < workers) {
      std::pair<int, Message> next;
      {
        std::unique_lock lock(inbox.mutex);
        inbox.cv.wait(lock, [&] { return !inbox.queue.empty() || inbox.closed; });
        if (inbox.queue.empty()) {
          if (inbox.error) std::rethrow_exception(inbox.error);
          throw DistError("parameter server " + std::to_string(server_) + ": the network side stopped early");
        }
        const auto waiting = static_cast<int64_t>(inbox.queue.size());
        queued_sum += waiting;
        stats_.queue_max = std::max(stats_.queue_max, waiting);
        next = std::move(inbox.queue.front());
        inbox.queue.pop_front();
      }
      ++taken;
      const int64_t start = vocabulary::now_ns();
      handle(next.first, next.second);
      stats_.busy_ns += vocabulary::now_ns() - start;
    }
  } catch (...) {
    receiver.detach();  // blocked in a receive that may never match; the job is ending
    throw;
  }
  receiver.join();
  stats_.queue_mean = taken > 0 ? static_cast<double>(queued_sum) / static_cast<double>(taken) : 0.0;
}

void ParameterServer::handle(int source, Message& m) {
  const MessageHeader& h = m.header;
  stats_.bytes_in += static_cast<int64_t>(sizeof(MessageHeader) + m.data.size() * sizeof(float));
  if (h.worker < 0 || h.worker >= topology_.workers || source != h.worker) {
    throw DistError("parameter server: a message from rank " + std::to_string(source) + " claims worker " +
                    std::to_string(h.worker));
  }
  if (h.kind == MessageKind::done) {
    ++done_;
    done_workers_[static_cast<size_t>(h.worker)] = true;
    send_message(to_workers_, h.worker, MessageHeader{MessageKind::bye, -1, h.worker, h.iteration, 0, 0}, nullptr, 0);
    // Reads bounded mode held back for this worker's sake may go now.
    for (auto& k : keys_) {
      if (k) answer_waiting(*k);
    }
    return;
  }
  if (h.key < 0 || static_cast<size_t>(h.key) >= keys_.size() || !keys_[static_cast<size_t>(h.key)]) {
    throw DistError("parameter server " + std::to_string(server_) + ": key " + std::to_string(h.key) +
                    " is not held here");
  }
  KeyState& k = *keys_[static_cast<size_t>(h.key)];
  const auto count = static_cast<size_t>(k.key->count);
  switch (h.kind) {
    case MessageKind::init:
      if (m.data.size() != count)
        throw DistError("parameter server: key '" + k.key->name + "' initialised with the wrong size");
      std::copy(m.data.begin(), m.data.end(), k.value.data());
      k.initialized = true;
      answer_waiting(k);
      return;
    case MessageKind::pull:
      stats_.pulls += 1;
      k.waiting.push_back({h.worker, h.clock, h.iteration, h.final_read});
      answer_waiting(k);
      return;
    case MessageKind::push:
      if (!k.initialized)
        throw DistError("parameter server: key '" + k.key->name + "' pushed before it was initialised");
      if (!m.data.empty() && m.data.size() != count) {
        throw DistError("parameter server: a gradient of the wrong size for key '" + k.key->name + "'");
      }
      if (h.clock != k.pushes[static_cast<size_t>(h.worker)] + 1) {
        throw DistError("parameter server: worker " + std::to_string(h.worker) + " pushed key '" + k.key->name +
                        "' out of order");
      }
      stats_.pushes += 1;
      apply(k, m);
      return;
    default: throw DistError("parameter server: unexpected message kind " + std::to_string(static_cast<int>(h.kind)));
  }
}

void ParameterServer::apply(KeyState& k, const Message& m) {
  const MessageHeader& h = m.header;
  const int workers = topology_.workers;
  const auto w = static_cast<size_t>(h.worker);
  const auto count = static_cast<size_t>(k.key->count);
  const int64_t staleness = k.version - h.version;
  if (options_.mode == PsMode::sync) {
    // The round's mean: summed as pushes arrive, applied once every worker's is in.
    const int64_t start = vocabulary::now_ns();
    if (k.contributions == 0) k.sum.assign(count, 0.0f);
    if (!m.data.empty()) {
      for (size_t i = 0; i < count; ++i) k.sum[i] += m.data[i];
      k.any_gradient = true;
    }
    k.contributions += 1;
    k.pushes[w] = h.clock;
    k.waiting.push_back({h.worker, h.clock, h.iteration});
    staleness_[{h.worker, h.iteration, false, staleness}] += 1;
    trace(names().aggregate, k.name, start, h.iteration);
    if (k.contributions < workers) return;
    const int64_t update_start = vocabulary::now_ns();
    if (k.any_gradient) {
      const float scale = 1.0f / static_cast<float>(workers);
      for (float& v : k.sum) v *= scale;
      engine::CategoryScope category(vocabulary::Category::weight_grads);
      k.optimizer->step({engine::Tensor::from_vector({k.key->count}, k.sum)});
      stats_.updates += 1;
    }
    k.version += 1;
    k.contributions = 0;
    k.any_gradient = false;
    trace(names().update, k.name, update_start, h.iteration);
    answer_waiting(k);
    return;
  }
  // async, bounded, eager: every push is an update of its own.
  const int64_t start = vocabulary::now_ns();
  if (!m.data.empty()) {
    // eager: the learning rate scaled down by the gradient's staleness (Zhang et al. 2016).
    const double lr_scale =
        options_.mode == PsMode::eager ? 1.0 / (1.0 + static_cast<double>(std::max<int64_t>(0, staleness))) : 1.0;
    engine::CategoryScope category(vocabulary::Category::weight_grads);
    k.optimizer->step({engine::Tensor::from_vector({k.key->count}, m.data)}, lr_scale);
    stats_.updates += 1;
  }
  k.version += 1;
  k.pushes[w] = h.clock;
  staleness_[{h.worker, h.iteration, false, staleness}] += 1;
  trace(names().update, k.name, start, h.iteration);
  if (options_.mode == PsMode::eager) {
    // The new value to every worker still listening, at once: their pulls are the server's.
    for (int other = 0; other < workers; ++other) {
      if (!done_workers_[static_cast<size_t>(other)])
        reply(k, other, k.pushes[static_cast<size_t>(other)], h.iteration);
    }
    return;
  }
  k.waiting.push_back({h.worker, h.clock, h.iteration});
  answer_waiting(k);
}

bool ParameterServer::may_answer(const KeyState& k, int64_t clock, int64_t* gap) const {
  if (!k.initialized) return false;
  // The slowest worker still training: one that is done no longer holds the others back.
  int64_t slowest = clock;
  for (size_t w = 0; w < k.pushes.size(); ++w) {
    if (!done_workers_[w]) slowest = std::min(slowest, k.pushes[w]);
  }
  *gap = clock - slowest;
  switch (options_.mode) {
    case PsMode::sync: return k.version >= clock;  // one version per round
    case PsMode::bounded: return *gap <= options_.staleness;
    case PsMode::async:
    case PsMode::eager: return true;
  }
  return true;
}

void ParameterServer::answer_waiting(KeyState& k) {
  auto it = k.waiting.begin();
  while (it != k.waiting.end()) {
    int64_t gap = 0;
    if (!may_answer(k, it->clock, &gap)) {
      ++it;
      continue;
    }
    if (options_.mode == PsMode::bounded) {
      if (gap > options_.staleness) throw DistError("parameter server: the staleness bound was about to be broken");
      staleness_[{it->worker, it->iteration, true, std::max<int64_t>(0, gap)}] += 1;
    }
    reply(k, it->worker, it->clock, it->iteration, it->final_read);
    it = k.waiting.erase(it);
  }
}

void ParameterServer::reply(KeyState& k, int worker, int64_t clock, int32_t iteration, int32_t final_read) {
  const int64_t start = vocabulary::now_ns();
  MessageHeader h{MessageKind::value, k.key->id, worker, -1, clock, k.version, final_read, 0};
  send_message(to_workers_, worker, h, k.value.data(), k.key->count);
  stats_.bytes_out += static_cast<int64_t>(sizeof(MessageHeader)) + k.key->bytes();
  trace(names().reply, k.name, start, iteration);
}

}  // namespace ts::distributed::ps
