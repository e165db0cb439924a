#pragma once
// Thread-local scopes that tag what the engine does: the memory category new allocations
// get, the owner (layer path) they and the op events belong to, and whether autograd records.
#include <atomic>
#include <stdexcept>
#include <string>
#include <string_view>

#include "memprof/ledger.h"
#include "profiler/event.h"
#include "profiler/range_observer.h"

namespace ts::engine {

struct ThreadContext {
  vocabulary::Category category = vocabulary::Category::other;
  const std::string* owner = nullptr;  // layer path; nullptr = top level
  profiler::StringId owner_id = 0;     // the same path interned in the tracer
  profiler::Pass pass = profiler::Pass::none;
  bool grad_enabled = true;
  int op_depth = 0;                    // >0 while inside an op (nested ops are not separate layer time)
  class OpScope* traced_op = nullptr;  // the innermost op being traced on this thread
};

ThreadContext& thread_context();

class CategoryScope {
 public:
  explicit CategoryScope(vocabulary::Category c) : saved_(thread_context().category) { thread_context().category = c; }
  ~CategoryScope() { thread_context().category = saved_; }
  CategoryScope(const CategoryScope&) = delete;
  CategoryScope& operator=(const CategoryScope&) = delete;

 private:
  vocabulary::Category saved_;
};

// The owner path must outlive the scope (modules own theirs).
class OwnerScope {
 public:
  OwnerScope(const std::string* path, profiler::StringId id);
  ~OwnerScope();
  OwnerScope(const OwnerScope&) = delete;
  OwnerScope& operator=(const OwnerScope&) = delete;

 private:
  const std::string* saved_path_;
  profiler::StringId saved_id_;
};

class PassScope {
 public:
  explicit PassScope(profiler::Pass p) : saved_(thread_context().pass) { thread_context().pass = p; }
  ~PassScope() { thread_context().pass = saved_; }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  profiler::Pass saved_;
};

class NoGradScope {
 public:
  NoGradScope() : saved_(thread_context().grad_enabled) { thread_context().grad_enabled = false; }
  ~NoGradScope() { thread_context().grad_enabled = saved_; }
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool saved_;
};

class EnableGradScope {
 public:
  explicit EnableGradScope(bool on) : saved_(thread_context().grad_enabled) { thread_context().grad_enabled = on; }
  ~EnableGradScope() { thread_context().grad_enabled = saved_; }
  EnableGradScope(const EnableGradScope&) = delete;
  EnableGradScope& operator=(const EnableGradScope&) = delete;

 private:
  bool saved_;
};

// The work an op does itself, for the roofline (profiler::WorkClass, docs/formulas.md): its
// FLOPs, and the least bytes it moves (each input read once, each output written once).
struct OpWork {
  profiler::WorkClass work = profiler::WorkClass::none;
  int64_t flops = 0;
  int64_t bytes = 0;
};

// One op call: a profiler event with the op name, the layer in scope, the pass and the work the
// op declared; nested op calls (an op built from other ops) are traced too, and the analyses
// count only the outermost as layer time and each one's self time as its own.
class OpScope {
 public:
  explicit OpScope(profiler::StringId name, OpWork work = {});
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // Work found while the op runs: FLOPs and bytes add up; the class is compute once any
  // compute was added, else the first class given.
  void add_work(const OpWork& w);

 private:
  int64_t start_ns_ = 0;
  profiler::StringId name_;
  profiler::RangeObserver* observer_ = nullptr;
  OpScope* parent_ = nullptr;
  OpWork work_;
  bool active_ = false;
};

// Adds to the innermost op traced on this thread (an autograd node's backward, whose scope the
// backward pass opens, declares its work here); nothing when no op is traced.
void add_op_work(const OpWork& w);

// Per-op events can be switched off (--no-trace) while the loop's phase ranges stay on.
void set_op_tracing(bool on);
bool op_tracing();

// Cooperative cancellation for work that need not finish (evaluation, building a model and its
// data): while a CancelScope is alive, every op entered on any thread outside an OpenMP
// parallel region throws Cancelled once *flag is set. Training steps are not cancelled: the loop
// stops between iterations, so no half-applied update is measured.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled by an interrupt") {}
};
class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// Interns an op name once per call site: `static const auto id = op_name("conv2d");`.
profiler::StringId op_name(std::string_view name);

// How many threads the CPU ops of the calling thread may use (OpenMP's per-thread setting;
// threads started later begin with the process default). a3c's learners set 1: each runs its
// ops on its own thread. Returns the previous value; n < 1 throws std::invalid_argument.
int set_op_threads(int n);

// set_op_threads for a scope; the previous value is put back at its end.
class OpThreadsScope {
 public:
  explicit OpThreadsScope(int n) : previous_(set_op_threads(n)) {}
  ~OpThreadsScope() { set_op_threads(previous_); }
  OpThreadsScope(const OpThreadsScope&) = delete;
  OpThreadsScope& operator=(const OpThreadsScope&) = delete;

 private:
  int previous_;
};

}  // namespace ts::engine
