#pragma once
// engine::SideStream on a GPU: a stream of its own, ordered against the device context's stream
// (the compute queue, device_context.h) by CUDA events. No CUDA header here: backend_registry.cpp
// makes it.
#include <memory>

#include "engine/side_stream.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*

namespace ts::engine::cuda {

class CudaSideStream final : public SideStream {
 public:
  // std::runtime_error when cuda:`device` is not usable.
  explicit CudaSideStream(int device);
  ~CudaSideStream() override;
  CudaSideStream(const CudaSideStream&) = delete;
  CudaSideStream& operator=(const CudaSideStream&) = delete;

  Device device() const override { return {DeviceType::cuda, device_}; }
  std::unique_ptr<StreamMarker> make_marker() override;
  void mark_compute(StreamMarker& m) override;
  void wait(StreamMarker& m) override;
  void mark(StreamMarker& m) override;
  void compute_waits(StreamMarker& m) override;
  void host_waits(StreamMarker& m) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void scale(float* data, int64_t count, float factor) override;
  void synchronize() override;
  void* native() override;
  std::unique_ptr<PinnedHost> pin(void* data, size_t bytes) override;

 private:
  int device_;
  CUstream_st* stream_ = nullptr;
};

}  // namespace ts::engine::cuda
