// The CUPTI tracer on a GPU (label gpu; skips with the reason where no device is usable): two
// traced sessions one after the other in one process, as a suite runs them (start() after
// cuptiFinalize must register everything again), each with a few ops in two iterations. Each
// trace must hold kernels, no dropped or incomplete records, every kernel attributed to the op
// that launched it (the innermost op event around its launch on the CPU timeline) and to that
// iteration, and no kernel starting before the API call that launched it (one clock).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/device_memory.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "profiler/gpu_tracer.h"
#include "profiler/tracer.h"

using namespace ts;
using namespace ts::profiler;

namespace {

// The innermost op event containing t, or null.
const Event* innermost_op_at(const std::vector<Event>& events, int64_t t) {
  const Event* found = nullptr;
  for (const Event& e : events) {
    if (e.kind != EventKind::op || t < e.start_ns || t > e.end_ns) continue;
    if (found == nullptr || e.end_ns - e.start_ns < found->end_ns - found->start_ns) found = &e;
  }
  return found;
}

}  // namespace

TEST(CuptiTracer, TwoSessionsInOneProcessEachAttributeEveryKernelToItsOp) {
  const engine::Device gpu{engine::DeviceType::cuda, 0};
  std::string why;
  if (!engine::device_usable(gpu, &why)) GTEST_SKIP() << why << ": GPU test skipped";
  // Made before tracing: their fills are nobody's op.
  const engine::Tensor x = engine::Tensor::full({64, 128}, 0.5f, gpu);
  const engine::Tensor w = engine::Tensor::full({32, 128}, 0.25f, gpu);
  const engine::Tensor b = engine::Tensor::full({32}, -1.0f, gpu);

  auto& tracer = Tracer::global();
  for (int session = 0; session < 2; ++session) {
    SCOPED_TRACE("session " + std::to_string(session));
    tracer.clear();
    tracer.set_enabled(true);
    auto gpu_tracer = GpuTracer::start(tracer);
    ASSERT_TRUE(gpu_tracer->tracing()) << gpu_tracer->status();
    for (int32_t i = 0; i < 2; ++i) {
      tracer.set_iteration(i);
      Range iteration(tracer.intern("iteration"), EventKind::iteration);
      const engine::Tensor y = engine::ops::relu(engine::ops::linear(x, w, b));
      (void)engine::ops::add(y, y);
    }
    tracer.set_iteration(-1);
    const GpuTrace trace = gpu_tracer->stop();
    tracer.set_enabled(false);
    const std::vector<Event> events = tracer.drain();

    EXPECT_EQ(trace.dropped_records, 0U);
    EXPECT_EQ(trace.incomplete_records, 0U);
    EXPECT_EQ(trace.unattributed_launches, 0U);
    std::map<uint32_t, const GpuActivity*> api;  // by correlation id: the earliest call
    for (const GpuActivity& a : trace.activities) {
      if (a.kind != GpuKind::api || a.correlation == 0) continue;
      auto [it, fresh] = api.try_emplace(a.correlation, &a);
      if (!fresh && a.start_ns < it->second->start_ns) it->second = &a;
    }
    size_t kernels = 0;
    for (const GpuActivity& k : trace.activities) {
      if (k.kind != GpuKind::kernel) continue;
      ++kernels;
      const std::string name(tracer.str(k.name));
      SCOPED_TRACE(name);
      const auto launch = api.find(k.correlation);
      ASSERT_NE(launch, api.end()) << "no API record with correlation " << k.correlation;
      EXPECT_GE(k.start_ns, launch->second->start_ns);
      const Event* op = innermost_op_at(events, launch->second->start_ns);
      ASSERT_NE(op, nullptr) << "launched outside every op event";
      EXPECT_EQ(tracer.str(k.op), tracer.str(op->name));
      EXPECT_EQ(k.layer, op->layer);
      EXPECT_EQ(k.iteration, op->iteration);
    }
    EXPECT_GE(kernels, 6U);  // linear, relu and add launch at least one kernel each, twice
  }
}
