// The CUPTI tracer on a GPU (label gpu; skips with the reason where no device is usable): two
// traced sessions one after the other in one process, as a suite runs them (start() after
// cuptiFinalize must register everything again), each with a few ops in two iterations. Each
// trace must hold kernels, no dropped or incomplete records, every kernel attributed to the op
// that launched it (the innermost op event around its launch on the CPU timeline) and to that
// iteration, and no kernel starting before the API call that launched it (one clock). A third
// session: copies issued from a communication range on another thread are communication, in the
// iteration that was running.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/device_memory.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "profiler/gpu_analysis.h"
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

TEST(CuptiTracer, WhatACommunicationRangeLaunchesIsCommunicationInTheRunningIteration) {
  const engine::Device gpu{engine::DeviceType::cuda, 0};
  std::string why;
  if (!engine::device_usable(gpu, &why)) GTEST_SKIP() << why << ": GPU test skipped";
  const engine::Tensor x = engine::Tensor::full({256, 256}, 0.5f, gpu);
  std::vector<float> host(static_cast<size_t>(x.numel()));
  const size_t bytes = host.size() * sizeof(float);

  auto& tracer = Tracer::global();
  tracer.clear();
  tracer.set_enabled(true);
  auto gpu_tracer = GpuTracer::start(tracer);
  ASSERT_TRUE(gpu_tracer->tracing()) << gpu_tracer->status();
  tracer.set_iteration(3);
  {
    Range iteration(tracer.intern("iteration"), EventKind::iteration);
    (void)engine::ops::add(x, x);  // compute, on the training thread
    // A communication thread, as data parallelism's: it never opens an iteration.
    std::thread comm([&] {
      {
        Range staging(tracer.intern("stage to host"), EventKind::comm, Pass::none, tracer.intern("bucket 0.0"));
        engine::memory_for(gpu).copy_to_host(host.data(), x.data(), bytes);
        engine::memory_for(gpu).copy_from_host(x.data(), host.data(), bytes);
      }
      engine::memory_for(gpu).copy_to_host(host.data(), x.data(), bytes);  // outside: a plain copy
    });
    comm.join();
  }
  tracer.set_iteration(-1);
  const GpuTrace trace = gpu_tracer->stop();
  tracer.set_enabled(false);
  (void)tracer.drain();

  // Bytes rather than records: how many records one pageable copy makes is CUPTI's business.
  int64_t comm_bytes = 0, plain_bytes = 0;
  size_t kernels = 0;
  for (const GpuActivity& a : trace.activities) {
    if (a.kind == GpuKind::comm) {
      comm_bytes += a.bytes;
      EXPECT_EQ(a.comm_work, GpuKind::memcpy);
      EXPECT_EQ(a.iteration, 3);  // pushed by the communication range
      EXPECT_EQ(a.op, 0U);
    } else if (a.kind == GpuKind::memcpy) {
      plain_bytes += a.bytes;
      EXPECT_EQ(a.iteration, -1);  // the communication thread has no iteration of its own
    } else if (a.kind == GpuKind::kernel) {
      ++kernels;
      EXPECT_EQ(a.iteration, 3);
      EXPECT_NE(a.op, 0U);
    }
  }
  EXPECT_EQ(comm_bytes, 2 * static_cast<int64_t>(bytes));
  EXPECT_EQ(plain_bytes, static_cast<int64_t>(bytes));
  EXPECT_GE(kernels, 1U);
  bool iteration_3 = false;
  for (const GpuBreakdown& b : gpu_breakdown(trace.activities)) {
    if (b.iteration != 3) continue;
    iteration_3 = true;
    EXPECT_GT(b.comm_ns, 0);
    EXPECT_EQ(b.memcpy_ns, 0);
  }
  EXPECT_TRUE(iteration_3);
}
