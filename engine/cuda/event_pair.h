#pragma once
// engine::DeviceEventPair on a GPU: two CUDA events with timing on (no cudaEventDisableTiming),
// recorded on the device context's stream, the one all of the engine's work on the device is
// queued on, so that they bracket that work. No CUDA header here: backend_registry.cpp makes them.
#include <cstdint>

#include "engine/device_timeline.h"

struct CUevent_st;  // cudaEvent_t is a CUevent_st*

namespace ts::engine::cuda {

class EventPair final : public DeviceEventPair {
 public:
  // std::runtime_error when cuda:`device` is not usable.
  explicit EventPair(int device);
  ~EventPair() override;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  void begin() override;
  void end() override;
  int64_t elapsed_ns() const override;

 private:
  void record(CUevent_st* event);

  int device_;
  CUevent_st* begin_ = nullptr;
  CUevent_st* end_ = nullptr;
  bool begun_ = false, ended_ = false;  // recorded at least once: CUDA refuses to time an unrecorded event
};

}  // namespace ts::engine::cuda
