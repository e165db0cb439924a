#include "distributed/communicator.h"

#include <utility>

#include "distributed/error.h"
#include "distributed/stall_watch.h"
#include "profiler/tracer.h"
#include "vocabulary/clock.h"

namespace ts::distributed {

size_t size_of(DataType type) {
  switch (type) {
    case DataType::f32: return 4;
    case DataType::f64: return 8;
    case DataType::i32: return 4;
    case DataType::i64: return 8;
    case DataType::u8: return 1;
  }
  return 1;
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::barrier: return "barrier";
  }
  return "unknown";
}

// Times one call; records it only when it returns (a call that throws is no measurement). While
// it lasts the stall watch knows of it, and the range observer sees a communication range, as
// profiler::Range would show it, so that the GPU profiler counts what the call launches (NCCL's
// kernels and copies) as communication. Not a profiler::Range itself: that would record a
// second event, and one for a call that threw.
class Communicator::Timed {
 public:
  Timed(Communicator& comm, Collective c, std::string_view label, int64_t bytes)
      : watched_(comm.channel_, to_string(c), label), comm_(comm), c_(c), label_(label), bytes_(bytes) {
    auto& tracer = profiler::Tracer::global();
    if (tracer.enabled()) {
      observer_ = profiler::range_observer();  // the one told of the begin is told of the end
      if (observer_ != nullptr) {
        observer_->begin(profiler::EventKind::comm, tracer.intern(to_string(c)), tracer.intern(label),
                         profiler::Pass::none, tracer.iteration());
      }
    }
    start_ = vocabulary::now_ns();
  }
  ~Timed() {
    if (observer_ != nullptr) observer_->end(profiler::EventKind::comm);
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;
  void done() { comm_.record(c_, label_, bytes_, start_, vocabulary::now_ns()); }

 private:
  StallWatch::Call watched_;
  Communicator& comm_;
  Collective c_;
  std::string_view label_;
  int64_t bytes_;
  profiler::RangeObserver* observer_ = nullptr;
  int64_t start_ = 0;
};

void Communicator::record(Collective c, std::string_view label, int64_t bytes, int64_t start_ns, int64_t end_ns) {
  if (!recording_) return;
  auto& tracer = profiler::Tracer::global();
  CollectiveRecord r;
  r.collective = c;
  r.label = std::string(label);
  r.bytes = bytes;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.iteration = tracer.iteration();
  r.thread = tracer.current_thread();
  if (tracer.enabled()) {
    profiler::Event e;
    e.start_ns = start_ns;
    e.end_ns = end_ns;
    e.name = tracer.intern(to_string(c));
    e.layer = tracer.intern(label);
    e.kind = profiler::EventKind::comm;
    tracer.record(e);
  }
  std::lock_guard lock(mutex_);
  records_.push_back(std::move(r));
}

std::vector<CollectiveRecord> Communicator::take_records() {
  std::lock_guard lock(mutex_);
  return std::exchange(records_, {});
}

void Communicator::all_reduce(void* data, size_t count, DataType type, ReduceOp op, std::string_view label) {
  Timed t(*this, Collective::all_reduce, label, static_cast<int64_t>(count * size_of(type)));
  do_all_reduce(data, count, type, op);
  t.done();
}

void Communicator::broadcast(void* data, size_t count, DataType type, int root, std::string_view label) {
  Timed t(*this, Collective::broadcast, label, static_cast<int64_t>(count * size_of(type)));
  do_broadcast(data, count, type, root);
  t.done();
}

void Communicator::all_gather(const void* send, void* recv, size_t count, DataType type, std::string_view label) {
  Timed t(*this, Collective::all_gather, label, static_cast<int64_t>(count * size_of(type)) * size());
  do_all_gather(send, recv, count, type);
  t.done();
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                  std::string_view label) {
  Timed t(*this, Collective::reduce_scatter, label, static_cast<int64_t>(count * size_of(type)) * size());
  do_reduce_scatter(send, recv, count, type, op);
  t.done();
}

void Communicator::barrier(std::string_view label) {
  Timed t(*this, Collective::barrier, label, 0);
  do_barrier();
  t.done();
}

void Communicator::start_all_reduce(void* data, size_t count, DataType type, ReduceOp op, std::string_view label) {
  if (started_) throw DistError("start_all_reduce '" + std::string(label) + "' while '" + started_->label + "' runs");
  const auto bytes = static_cast<int64_t>(count * size_of(type));
  Timed t(*this, Collective::all_reduce, label, bytes);
  if (!do_start_all_reduce(data, count, type, op)) {
    t.done();  // the backend did the whole call
    return;
  }
  started_ = Started{std::string(label), bytes};
}

void Communicator::finish_all_reduce() {
  if (!started_) return;
  const Started s = std::move(*started_);
  started_.reset();
  Timed t(*this, Collective::all_reduce, s.label, s.bytes);
  do_finish_all_reduce();
  t.done();
}

}  // namespace ts::distributed
