#include "engine/cuda/side_stream.h"

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "engine/cuda/device_context.h"
#include "engine/cuda/pointwise_kernels.h"

namespace ts::engine::cuda {

namespace {

// Timing off: these only order work, and an event without timing costs less to record and wait on.
class EventMarker final : public StreamMarker {
 public:
  explicit EventMarker(int device) {
    DeviceGuard guard(device);
    TS_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  ~EventMarker() override { cudaEventDestroy(event); }  // errors ignored: a destructor must not throw
  EventMarker(const EventMarker&) = delete;
  EventMarker& operator=(const EventMarker&) = delete;
  cudaEvent_t event = nullptr;
};

cudaEvent_t event_of(StreamMarker& m) { return static_cast<EventMarker&>(m).event; }

class HostRegistration final : public PinnedHost {
 public:
  explicit HostRegistration(void* data) : data_(data) {}
  ~HostRegistration() override { cudaHostUnregister(data_); }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

 private:
  void* data_;
};

}  // namespace

CudaSideStream::CudaSideStream(int device) : device_(device) {
  DeviceContext::get(device);  // throws, with the reason, when the device is not usable
  DeviceGuard guard(device);
  // The highest priority the device has: a collective the other ranks wait for should not queue
  // behind this rank's compute kernels. Non-blocking as the compute stream is.
  int least = 0, greatest = 0;
  TS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  TS_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  stream_ = s;
}

CudaSideStream::~CudaSideStream() {
  // Work still queued here may write memory its owners free next: wait for it first. Errors are
  // ignored: a destructor must not throw.
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

std::unique_ptr<StreamMarker> CudaSideStream::make_marker() { return std::make_unique<EventMarker>(device_); }

void CudaSideStream::mark_compute(StreamMarker& m) {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaEventRecord(event_of(m), DeviceContext::get(device_).stream()));
}

void CudaSideStream::wait(StreamMarker& m) {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaStreamWaitEvent(stream_, event_of(m), 0));
}

void CudaSideStream::mark(StreamMarker& m) {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaEventRecord(event_of(m), stream_));
}

void CudaSideStream::compute_waits(StreamMarker& m) {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaStreamWaitEvent(DeviceContext::get(device_).stream(), event_of(m), 0));
}

void CudaSideStream::host_waits(StreamMarker& m) {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaEventSynchronize(event_of(m)));
}

void CudaSideStream::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  DeviceGuard guard(device_);
  // cudaMemcpyDefault: unified addressing tells device from host memory, either way round.
  TS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
}

void CudaSideStream::zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaSideStream::scale(float* data, int64_t count, float factor) {
  if (count == 0) return;
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(kernels::scale(data, factor, data, count, stream_));
}

void CudaSideStream::synchronize() {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaSideStream::native() { return stream_; }

std::unique_ptr<PinnedHost> CudaSideStream::pin(void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return nullptr;
  DeviceGuard guard(device_);
  // Pages already pinned (a neighbour's small allocation in the same page was registered) or a
  // driver that refuses: the copies still run, staged by the driver through its own pinned memory.
  if (cudaHostRegister(data, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // not left as this thread's last error for the next check to find
    return nullptr;
  }
  return std::make_unique<HostRegistration>(data);
}

}  // namespace ts::engine::cuda
