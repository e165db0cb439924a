#include "engine/context.h"

#include <omp.h>

#include <atomic>
#include <stdexcept>

#include "profiler/clock.h"
#include "profiler/tracer.h"

namespace ts::engine {

ThreadContext& thread_context() {
  thread_local ThreadContext ctx;
  return ctx;
}

namespace {
std::atomic<bool> g_op_tracing{true};
std::atomic<const std::atomic<bool>*> g_cancel{nullptr};

// One relaxed load per op when no CancelScope is alive. Never thrown inside a parallel
// region: an exception may not leave one.
void throw_if_cancelled() {
  const std::atomic<bool>* flag = g_cancel.load(std::memory_order_relaxed);
  if (flag != nullptr && flag->load(std::memory_order_relaxed) && !omp_in_parallel()) throw Cancelled();
}
}  // namespace

CancelScope::CancelScope(const std::atomic<bool>* flag) : previous_(g_cancel.exchange(flag)) {}
CancelScope::~CancelScope() { g_cancel.store(previous_); }

void set_op_tracing(bool on) { g_op_tracing.store(on, std::memory_order_relaxed); }
bool op_tracing() { return g_op_tracing.load(std::memory_order_relaxed); }

OwnerScope::OwnerScope(const std::string* path, profiler::StringId id)
    : saved_path_(thread_context().owner), saved_id_(thread_context().owner_id) {
  thread_context().owner = path;
  thread_context().owner_id = id;
}

OwnerScope::~OwnerScope() {
  thread_context().owner = saved_path_;
  thread_context().owner_id = saved_id_;
}

OpScope::OpScope(profiler::StringId name) : name_(name) {
  throw_if_cancelled();
  auto& ctx = thread_context();
  ++ctx.op_depth;
  auto& tracer = profiler::Tracer::global();
  active_ = g_op_tracing.load(std::memory_order_relaxed) && tracer.enabled();
  if (active_) {
    observer_ = profiler::range_observer();
    if (observer_ != nullptr) observer_->begin(profiler::EventKind::op, name_, ctx.owner_id, ctx.pass, tracer.iteration());
    start_ns_ = profiler::now_ns();
  }
}

OpScope::~OpScope() {
  auto& ctx = thread_context();
  --ctx.op_depth;
  if (!active_) return;
  auto& tracer = profiler::Tracer::global();
  profiler::Event e{};
  e.start_ns = start_ns_;
  e.end_ns = profiler::now_ns();
  e.name = name_;
  e.layer = ctx.owner_id;
  e.kind = profiler::EventKind::op;
  e.pass = ctx.pass;
  e.iteration = tracer.iteration();
  tracer.record(e);
  if (observer_ != nullptr) observer_->end(profiler::EventKind::op);
}

profiler::StringId op_name(std::string_view name) { return profiler::Tracer::global().intern(name); }

int set_op_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_op_threads: needs at least one thread, got " + std::to_string(n));
  const int previous = omp_get_max_threads();
  omp_set_num_threads(n);
  return previous;
}

}  // namespace ts::engine
