#include "engine/context.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "profiler/tracer.h"
#include "vocabulary/clock.h"

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

// TS_TEST_SLOW_OP=NAME:FRACTION (NAME `*`: every op): after each outermost call of that op, spin
// for FRACTION times the call's duration. A planted slowdown, proportional so that it shows the
// same on any machine, for testing the regression gate (`compare --fail-on-regression`,
// docs/ci.md). It burns the CPU as a real regression would: a sleep (as it was first done) is
// absorbed when other processes share the cores (the sleeper runs sooner after it wakes), and a
// 35% plant then measured as nothing.
struct PlantedSlowdown {
  bool on = false, every_op = false;
  profiler::StringId name{};
  double fraction = 0;
};

PlantedSlowdown read_planted_slowdown() {
  PlantedSlowdown p;
  const char* spec = std::getenv("TS_TEST_SLOW_OP");
  if (spec == nullptr || *spec == '\0') return p;
  const std::string text(spec);
  const auto colon = text.rfind(':');
  size_t used = 0;
  try {
    if (colon != std::string::npos && colon > 0) p.fraction = std::stod(text.substr(colon + 1), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (colon == std::string::npos || colon == 0 || used == 0 || used != text.size() - colon - 1 || !(p.fraction > 0) ||
      p.fraction > 100) {
    throw std::invalid_argument("TS_TEST_SLOW_OP must be NAME:FRACTION with 0 < FRACTION <= 100 (got \"" + text +
                                "\")");
  }
  const std::string name = text.substr(0, colon);
  p.on = true;
  p.every_op = name == "*";
  if (!p.every_op) p.name = profiler::Tracer::global().intern(name);
  return p;
}

const PlantedSlowdown& planted_slowdown() {
  static const PlantedSlowdown p = read_planted_slowdown();
  return p;
}

thread_local int64_t t_planted_start_ns = -1;  // the outermost op being slowed on this thread
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

OpScope::OpScope(profiler::StringId name, OpWork work) : name_(name), work_(work) {
  throw_if_cancelled();
  const PlantedSlowdown& slow = planted_slowdown();  // throws on a bad TS_TEST_SLOW_OP, before any change
  auto& ctx = thread_context();
  ++ctx.op_depth;
  if (slow.on && ctx.op_depth == 1 && (slow.every_op || slow.name == name)) {
    t_planted_start_ns = vocabulary::now_ns();
  }
  auto& tracer = profiler::Tracer::global();
  active_ = g_op_tracing.load(std::memory_order_relaxed) && tracer.enabled();
  if (active_) {
    observer_ = profiler::range_observer();
    if (observer_ != nullptr)
      observer_->begin(profiler::EventKind::op, name_, ctx.owner_id, ctx.pass, tracer.iteration());
    parent_ = ctx.traced_op;
    ctx.traced_op = this;
    start_ns_ = vocabulary::now_ns();
  }
}

void OpScope::add_work(const OpWork& w) {
  if (work_.work == profiler::WorkClass::none || w.work == profiler::WorkClass::compute) work_.work = w.work;
  work_.flops += w.flops;
  work_.bytes += w.bytes;
}

void add_op_work(const OpWork& w) {
  if (OpScope* op = thread_context().traced_op) op->add_work(w);
}

OpScope::~OpScope() {
  auto& ctx = thread_context();
  if (ctx.op_depth == 1 && t_planted_start_ns >= 0) {
    const int64_t now = vocabulary::now_ns();
    const auto until =
        now + static_cast<int64_t>(static_cast<double>(now - t_planted_start_ns) * planted_slowdown().fraction);
    t_planted_start_ns = -1;
    while (vocabulary::now_ns() < until) {
    }
  }
  --ctx.op_depth;
  if (!active_) return;
  ctx.traced_op = parent_;
  auto& tracer = profiler::Tracer::global();
  profiler::Event e{};
  e.start_ns = start_ns_;
  e.end_ns = vocabulary::now_ns();
  e.name = name_;
  e.layer = ctx.owner_id;
  e.kind = profiler::EventKind::op;
  e.pass = ctx.pass;
  e.iteration = tracer.iteration();
  e.work = work_.work;
  e.flops = work_.flops;
  e.bytes = work_.bytes;
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
