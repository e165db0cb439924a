// GpuTracer in a build without CUDA: nothing to trace, and the reason is said, not hidden.
#include "profiler/gpu_tracer.h"

namespace ts::profiler {
namespace {

class NoGpuTracer final : public GpuTracer {
 public:
  bool tracing() const override { return false; }
  const std::string& status() const override { return status_; }
  GpuTrace stop() override { return {}; }

 private:
  std::string status_ = "no GPU tracing: this trainscope was built without CUDA and CUPTI";
};

}  // namespace

std::unique_ptr<GpuTracer> GpuTracer::start(Tracer& /*tracer*/) { return std::make_unique<NoGpuTracer>(); }

}  // namespace ts::profiler
