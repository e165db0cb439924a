#include "engine/side_stream.h"

#include <cstring>

namespace ts::engine {

namespace {

// The CPU has one queue, the calling thread: work is done when the call returns, so there is
// nothing to order and nothing to wait for.
class InlineStream final : public SideStream {
 public:
  Device device() const override { return Device::cpu(); }
  std::unique_ptr<StreamMarker> make_marker() override { return std::make_unique<StreamMarker>(); }
  void mark_compute(StreamMarker&) override {}
  void wait(StreamMarker&) override {}
  void mark(StreamMarker&) override {}
  void compute_waits(StreamMarker&) override {}
  void host_waits(StreamMarker&) override {}
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  }
  void zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void scale(float* data, int64_t count, float factor) override {
    for (int64_t i = 0; i < count; ++i) data[i] *= factor;
  }
  void synchronize() override {}
  void* native() override { return nullptr; }
  std::unique_ptr<PinnedHost> pin(void*, size_t) override { return nullptr; }
};

}  // namespace

std::unique_ptr<SideStream> make_inline_stream() { return std::make_unique<InlineStream>(); }

}  // namespace ts::engine
