// The CUPTI implementation of GpuTracer (builds with CUDA only; gpu_tracer_none.cpp otherwise).
//
// Records arrive in buffers we hand to CUPTI (buffer_requested) and come back filled on CUPTI's
// worker thread (buffer_completed), where they are converted at once and the buffer goes back to
// a pool: the pool grows as long as CUPTI asks, so no record is dropped for want of a buffer, and
// the device-side buffer is enlarged so that a burst of kernels between flushes fits. CUPTI's
// clock is our vocabulary::now_ns() (timestamp callback), so GPU and CPU events share one timeline.
//
// Stopping, in this order: no more external correlation ids are pushed (other threads pushing
// while CUPTI finalises is what Kineto crashed on), the devices finish their work (a forced flush
// returns unfinished records without an end), the buffers are flushed, the kinds disabled, CUPTI
// finalized. Records still without a time are left out and counted. start() after that registers
// everything again: CUPTI re-initialises on the first call after cuptiFinalize.
#include <cupti.h>
#include <cxxabi.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/cupti_kinds.h"
#include "profiler/device_sync.h"
#include "profiler/gpu_tracer.h"
#include "profiler/launch_context.h"
#include "profiler/range_observer.h"
#include "profiler/tracer.h"
#include "vocabulary/clock.h"

namespace ts::profiler {
namespace {

std::string cupti_error(CUptiResult rc) {
  const char* s = nullptr;
  if (cuptiGetResultString(rc, &s) != CUPTI_SUCCESS || s == nullptr) return "CUPTI error " + std::to_string(rc);
  return s;
}

// The project's one checking macro for CUPTI: a failed call throws naming the call.
#define TS_CUPTI_CHECK(expr)                                                           \
  do {                                                                                 \
    const CUptiResult ts_cupti_rc_ = (expr);                                           \
    if (ts_cupti_rc_ != CUPTI_SUCCESS)                                                 \
      throw std::runtime_error(std::string(#expr) + ": " + cupti_error(ts_cupti_rc_)); \
  } while (0)

uint64_t CUPTIAPI timestamp_now() { return static_cast<uint64_t>(vocabulary::now_ns()); }

constexpr size_t kBufferBytes = size_t{8} << 20;         // per host buffer
constexpr size_t kDeviceBufferBytes = size_t{32} << 20;  // per context, for records made on the GPU

// Which external correlation ids a range pushed (bits, one per CUPTI kind), so that its end pops
// exactly those.
enum Pushed : uint8_t { kPushedNone = 0, kPushedOpId = 1, kPushedIterationId = 2, kPushedCommId = 4 };
// Per thread, one entry per open op, iteration or communication range (they nest per thread).
thread_local std::vector<uint8_t> t_pushed;

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

const char* copy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy (array)";
  }
}

const char* sync_name(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return "synchronize";
  }
}

const char* memory_kind_name(CUpti_ActivityMemoryKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "device static";
    default: return "other";
  }
}

const char* overhead_name(CUpti_ActivityOverheadKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
    default: return "CUPTI overhead";
  }
}

class CuptiTracer final : public GpuTracer, public RangeObserver {
 public:
  explicit CuptiTracer(Tracer& tracer) : tracer_(tracer) {}
  ~CuptiTracer() override {
    if (!stopped_) (void)stop();
  }

  void start() {
    CuptiTracer* expected = nullptr;
    if (!active_.compare_exchange_strong(expected, this)) {
      // The running one keeps the range observer: taking it would cut that tracer's attribution.
      status_ = "CUPTI tracing off: another GPU tracer of this process is running";
      refused_ = true;
      return;
    }
    try {
      TS_CUPTI_CHECK(cuptiActivityRegisterTimestampCallback(&timestamp_now));
      TS_CUPTI_CHECK(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed));
      // CUPTI's dropped count for records of no context is read (and so reset) only when such a
      // buffer completes; one left from before this session is not this session's loss.
      size_t before = 0;
      if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &before) == CUPTI_SUCCESS) dropped_before_start_ = before;
      size_t device_buffer = kDeviceBufferBytes;
      size_t value_size = sizeof(device_buffer);
      TS_CUPTI_CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &value_size, &device_buffer));
      const char* leave_out = std::getenv("TS_CUPTI_LEAVE_OUT");  // measuring what each kind costs
      const std::vector<CUpti_ActivityKind> kinds = cupti_activity_kinds_without(leave_out ? leave_out : "");
      for (CUpti_ActivityKind k : kinds) {
        TS_CUPTI_CHECK(cuptiActivityEnable(k));
        enabled_.push_back(k);
      }
      tracing_ = true;
      status_ = "CUPTI activity tracing: kernels (concurrent), copies, sets, synchronisation, runtime and driver "
                "API, device memory, overhead; NVTX ranges for Nsight only (ours are on the CPU timeline)";
      if (kinds.size() < cupti_activity_kinds().size()) {
        std::string left;
        for (CUpti_ActivityKind k : cupti_activity_kinds()) {
          if (std::find(kinds.begin(), kinds.end(), k) == kinds.end())
            left += (left.empty() ? "" : ", ") + cupti_kind_name(k);
        }
        status_ += "; left out (TS_CUPTI_LEAVE_OUT), so this trace is incomplete: " + left;
      }
      if (dropped_before_start_ > 0) {
        status_ += "; " + std::to_string(dropped_before_start_) +
                   " record(s) CUPTI dropped before this session began were left out of its count";
      }
    } catch (const std::exception& e) {
      for (CUpti_ActivityKind k : enabled_) (void)cuptiActivityDisable(k);
      enabled_.clear();
      active_.store(nullptr);
      status_ = std::string("CUPTI unavailable (") + e.what() +
                "); another profiler such as nsys or ncu may hold it. Tracing the CPU side and NVTX ranges only";
    }
    set_range_observer(this);
  }

  bool tracing() const override { return tracing_; }
  const std::string& status() const override { return status_; }

  GpuTrace stop() override {
    if (stopped_) return {};
    stopped_ = true;
    if (refused_) return {};
    set_range_observer(nullptr);
    if (!tracing_) return {};
    // No push from here on, and none under way: CUPTI must not take external ids while it flushes
    // and finalises. Ranges still open keep what they pushed; cuptiFinalize discards CUPTI's state.
    tracing_.store(false);
    while (pushing_.load() != 0) std::this_thread::yield();
    synchronize_devices_in_use();
    (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : enabled_) (void)cuptiActivityDisable(k);
    (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    // Records of no context that CUPTI dropped after that queue's last completed buffer: this
    // session's, which would otherwise be reported, if ever, in a later one (issue 36's suspect
    // for the second session's one dropped record; not yet seen on a GPU).
    if (size_t late = 0; cuptiActivityGetNumDroppedRecords(nullptr, 0, &late) == CUPTI_SUCCESS && late > 0) {
      std::lock_guard lock(mutex_);
      dropped_ += late;
    }
    // Detaches CUPTI from the process: launches after profiling pay nothing for it.
    (void)cuptiFinalize();
    active_.store(nullptr);

    std::lock_guard lock(mutex_);
    GpuTrace t;
    t.unattributed_launches = attribute_launches(activities_, {op_ids_, iteration_ids_, comm_ids_});
    for (GpuActivity& a : activities_) {
      if (a.kind == GpuKind::sync) {
        if (auto it = context_device_.find(a.device); it != context_device_.end()) a.device = it->second;
      }
    }
    std::stable_sort(activities_.begin(), activities_.end(),
                     [](const GpuActivity& x, const GpuActivity& y) { return x.start_ns < y.start_ns; });
    t.activities = std::move(activities_);
    t.dropped_records = dropped_;
    t.incomplete_records = incomplete_;
    t.records = records_;
    t.buffers = buffers_completed_;
    t.buffer_bytes_peak = buffers_made_ * kBufferBytes;
    return t;
  }

  // RangeObserver: launch contexts for ops, iterations and communication; NVTX ranges for the run,
  // iterations, phases and communication, which reach Nsight Systems (it injects its NVTX
  // handler), not CUPTI's activity records.
  void begin(EventKind kind, StringId name, StringId layer, Pass pass, int32_t iteration) override {
    switch (kind) {
      case EventKind::op: {
        uint8_t pushed = kPushedNone;
        if (PushGuard guard(*this); guard) {
          (void)cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, pack_op(layer, name));
          (void)cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                                                       pack_iteration(iteration, pass));
          pushed = kPushedOpId | kPushedIterationId;
        }
        t_pushed.push_back(pushed);
        break;
      }
      case EventKind::iteration: {
        uint8_t pushed = kPushedNone;
        if (PushGuard guard(*this); guard) {
          (void)cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                                                       pack_iteration(iteration, Pass::none));
          pushed = kPushedIterationId;
        }
        t_pushed.push_back(pushed);
        nvtxRangePushA(("iteration " + std::to_string(iteration)).c_str());
        break;
      }
      case EventKind::comm: {
        // What this range launches is communication: CUSTOM2 says so (its value, the label and
        // name packed as an op's, is only for a reader of the raw records). The iteration too: a
        // communication thread never opens one, and its launches would fall outside every
        // iteration's breakdown.
        uint8_t pushed = kPushedNone;
        if (PushGuard guard(*this); guard) {
          (void)cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, pack_op(layer, name));
          (void)cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                                                       pack_iteration(iteration, pass));
          pushed = kPushedCommId | kPushedIterationId;
        }
        t_pushed.push_back(pushed);
        nvtxRangePushA(std::string(tracer_.str(name)).c_str());
        break;
      }
      case EventKind::run:
      case EventKind::phase:
      case EventKind::wait: nvtxRangePushA(std::string(tracer_.str(name)).c_str()); break;
      case EventKind::marker: break;
    }
  }

  void end(EventKind kind) override {
    switch (kind) {
      case EventKind::op: pop_pushed(); break;
      case EventKind::iteration:
      case EventKind::comm:
        pop_pushed();
        nvtxRangePop();
        break;
      case EventKind::run:
      case EventKind::phase:
      case EventKind::wait: nvtxRangePop(); break;
      case EventKind::marker: break;
    }
  }

 private:
  // Lets a thread push or pop only while tracing, and lets stop() wait until none is doing so. The
  // count goes up before tracing_ is read and stop() clears tracing_ before it reads the count
  // (both sequentially consistent), so a thread that stop() does not wait for sees tracing_ off.
  class PushGuard {
   public:
    explicit PushGuard(CuptiTracer& t) : t_(t) {
      if (!t_.tracing_.load(std::memory_order_relaxed)) return;  // off: no shared write
      t_.pushing_.fetch_add(1);
      entered_ = true;
      ok_ = t_.tracing_.load();
    }
    ~PushGuard() {
      if (entered_) t_.pushing_.fetch_sub(1);
    }
    PushGuard(const PushGuard&) = delete;
    PushGuard& operator=(const PushGuard&) = delete;
    explicit operator bool() const { return ok_; }

   private:
    CuptiTracer& t_;
    bool entered_ = false, ok_ = false;
  };

  // Pops what the matching begin() pushed. After stop() has begun nothing is popped: CUPTI is
  // flushing or finalized, and finalizing discards its correlation stacks.
  void pop_pushed() {
    if (t_pushed.empty()) return;  // begin() and end() pair up per thread: only an unpaired end gets here
    const uint8_t pushed = t_pushed.back();
    t_pushed.pop_back();
    if (pushed == kPushedNone) return;
    PushGuard guard(*this);
    if (!guard) return;
    if ((pushed & kPushedOpId) != 0)
      (void)cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr);
    if ((pushed & kPushedCommId) != 0)
      (void)cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, nullptr);
    if ((pushed & kPushedIterationId) != 0)
      (void)cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, nullptr);
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    CuptiTracer* self = active_.load();
    *max_records = 0;  // as many as fit
    if (self == nullptr) {
      *buffer = nullptr;  // CUPTI counts what it cannot store as dropped
      *size = 0;
      return;
    }
    std::lock_guard lock(self->pool_mutex_);
    if (self->pool_.empty()) {
      // 8-byte alignment is what CUPTI requires; operator new[] of this size gives 16.
      self->pool_.emplace_back(new uint8_t[kBufferBytes]);
      ++self->buffers_made_;
    }
    *buffer = self->pool_.back().release();
    self->pool_.pop_back();
    *size = kBufferBytes;
  }

  static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/,
                                        size_t valid) {
    std::unique_ptr<uint8_t[]> owned(buffer);
    CuptiTracer* self = active_.load();
    if (self == nullptr || buffer == nullptr) return;
    self->parse(buffer, valid);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
      std::lock_guard lock(self->mutex_);
      self->dropped_ += dropped;
    }
    std::lock_guard lock(self->pool_mutex_);
    self->pool_.push_back(std::move(owned));
  }

  StringId intern_kernel(const char* mangled) {
    auto [it, fresh] = kernel_names_.try_emplace(mangled, 0);
    if (fresh) it->second = tracer_.intern(demangle(mangled));
    return it->second;
  }

  StringId api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
    const uint64_t key = (static_cast<uint64_t>(kind) << 32) | cbid;
    auto [it, fresh] = api_names_.try_emplace(key, 0);
    if (fresh) {
      const char* name = nullptr;
      const auto domain =
          kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) name = "CUDA API";
      it->second = tracer_.intern(name);
    }
    return it->second;
  }

  void parse(uint8_t* buffer, size_t valid) {
    std::lock_guard lock(mutex_);
    CUpti_Activity* record = nullptr;
    CUptiResult next = CUPTI_SUCCESS;
    while ((next = cuptiActivityGetNextRecord(buffer, valid, &record)) == CUPTI_SUCCESS) {
      ++records_;
      GpuActivity a;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          a.name = intern_kernel(k->name);
          a.kind = GpuKind::kernel;  // communication if a communication range launched it (attribute_launches)
          a.start_ns = static_cast<int64_t>(k->start);
          a.end_ns = static_cast<int64_t>(k->end);
          a.device = static_cast<int16_t>(k->deviceId);
          a.stream = k->streamId;
          a.correlation = k->correlationId;
          a.detail = tracer_.intern("grid " + std::to_string(k->gridX) + "x" + std::to_string(k->gridY) + "x" +
                                    std::to_string(k->gridZ) + " block " + std::to_string(k->blockX) + "x" +
                                    std::to_string(k->blockY) + "x" + std::to_string(k->blockZ) + " regs " +
                                    std::to_string(k->registersPerThread));
          context_device_[static_cast<int16_t>(k->contextId)] = a.device;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          a.kind = GpuKind::memcpy;
          a.name = tracer_.intern(copy_kind_name(m->copyKind));
          a.start_ns = static_cast<int64_t>(m->start);
          a.end_ns = static_cast<int64_t>(m->end);
          a.device = static_cast<int16_t>(m->deviceId);
          a.stream = m->streamId;
          a.correlation = m->correlationId;
          a.bytes = static_cast<int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          a.kind = GpuKind::memset;
          a.name = tracer_.intern("Memset");
          a.start_ns = static_cast<int64_t>(m->start);
          a.end_ns = static_cast<int64_t>(m->end);
          a.device = static_cast<int16_t>(m->deviceId);
          a.stream = m->streamId;
          a.correlation = m->correlationId;
          a.bytes = static_cast<int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
          const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
          a.kind = GpuKind::sync;
          a.name = tracer_.intern(sync_name(s->type));
          a.start_ns = static_cast<int64_t>(s->start);
          a.end_ns = static_cast<int64_t>(s->end);
          a.device = static_cast<int16_t>(s->contextId);  // mapped to the device in stop()
          a.stream = s->streamId;
          a.correlation = s->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
          a.kind = GpuKind::api;
          a.name = api_name(record->kind, api->cbid);
          a.start_ns = static_cast<int64_t>(api->start);
          a.end_ns = static_cast<int64_t>(api->end);
          a.device = -1;
          a.stream = api->threadId;
          a.correlation = api->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) op_ids_[x->correlationId] = x->externalId;
          if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1)
            iteration_ids_[x->correlationId] = x->externalId;
          if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) comm_ids_[x->correlationId] = x->externalId;
          continue;
        }
        case CUPTI_ACTIVITY_KIND_MEMORY2: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
          const bool alloc = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
          if (!alloc && m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) continue;
          a.kind = GpuKind::memory;
          a.name = tracer_.intern(alloc ? "allocate" : "free");
          a.detail = tracer_.intern(memory_kind_name(m->memoryKind));
          a.start_ns = a.end_ns = static_cast<int64_t>(m->timestamp);
          a.device = static_cast<int16_t>(m->deviceId);
          a.stream = m->streamId;
          a.correlation = m->correlationId;
          a.bytes = alloc ? static_cast<int64_t>(m->bytes) : -static_cast<int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_OVERHEAD: {
          const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
          a.kind = GpuKind::overhead;
          a.name = tracer_.intern(overhead_name(o->overheadKind));
          a.start_ns = static_cast<int64_t>(o->start);
          a.end_ns = static_cast<int64_t>(o->end);
          a.device = -1;
          break;
        }
        default: continue;
      }
      if (is_incomplete(a)) {
        ++incomplete_;
        continue;
      }
      activities_.push_back(a);
    }
    // CUPTI_ERROR_INVALID_KIND: a record CUPTI calls incomplete or invalid, past which the buffer
    // cannot be read; counted as one, though what followed it in the buffer is lost too.
    if (next != CUPTI_ERROR_MAX_LIMIT_REACHED) ++incomplete_;
    ++buffers_completed_;
  }

  inline static std::atomic<CuptiTracer*> active_{nullptr};

  Tracer& tracer_;
  std::atomic<bool> tracing_{false};  // read by every thread that opens ranges
  std::atomic<int> pushing_{0};       // threads between PushGuard's construction and destruction
  bool refused_ = false;              // another tracer was running: this one touches nothing
  bool stopped_ = false;
  std::string status_ = "CUPTI tracing not started";
  std::vector<CUpti_ActivityKind> enabled_;

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<uint8_t[]>> pool_;
  uint64_t buffers_made_ = 0;

  std::mutex mutex_;  // everything below: filled on CUPTI's worker thread
  std::vector<GpuActivity> activities_;
  ExternalIds op_ids_, iteration_ids_, comm_ids_;  // CUSTOM0, CUSTOM1, CUSTOM2
  std::unordered_map<std::string, StringId> kernel_names_;
  std::unordered_map<uint64_t, StringId> api_names_;
  std::map<int16_t, int16_t> context_device_;
  uint64_t dropped_ = 0, incomplete_ = 0, records_ = 0, buffers_completed_ = 0;
  uint64_t dropped_before_start_ = 0;  // CUPTI's count at start(): an earlier session's, not counted
};

}  // namespace

std::unique_ptr<GpuTracer> GpuTracer::start(Tracer& tracer) {
  auto t = std::make_unique<CuptiTracer>(tracer);
  t->start();
  return t;
}

}  // namespace ts::profiler
