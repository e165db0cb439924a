// GPU analyses on hand-made activity streams whose answers are worked out by hand: two
// compute streams and a communication stream overlapping, gaps, copies, iterations that
// interleave, warm-up filtering, the kernel and copy summaries, per-layer time, memory; and the
// launch context: which op, iteration and kind (communication or not) a launch gets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/gpu_analysis.h"
#include "profiler/launch_context.h"

using namespace ts::profiler;

namespace {

// Names by id for the hand-made streams.
const std::vector<std::string> kNames = {
    "",   "gemm",   "relu",  "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "memcpy HtoD", "memset", "layer1.conv1",
    "fc", "conv2d", "linear"};
std::string_view lookup(StringId id) { return kNames.at(id); }

GpuActivity act(GpuKind kind, int64_t start, int64_t end, StringId name, int32_t iteration, uint32_t stream = 7,
                int16_t device = 0) {
  GpuActivity a;
  a.kind = kind;
  a.start_ns = start;
  a.end_ns = end;
  a.name = name;
  a.iteration = iteration;
  a.stream = stream;
  a.device = device;
  return a;
}

}  // namespace

TEST(GpuAnalysis, KindsRoundTripThroughTheirNames) {
  for (GpuKind k : {GpuKind::kernel, GpuKind::comm, GpuKind::memcpy, GpuKind::memset, GpuKind::sync, GpuKind::api,
                    GpuKind::marker, GpuKind::memory, GpuKind::overhead}) {
    EXPECT_EQ(parse_gpu_kind(to_string(k)), k);
  }
  EXPECT_FALSE(parse_gpu_kind("cpu").has_value());
}

TEST(GpuAnalysis, BreakdownOverStreamsWithOverlapAndGaps) {
  // Iteration 0 on device 0, in ns:
  //   stream 7 (compute): [0,100) [150,250)
  //   stream 8 (compute): [50,120)                  -> U compute = [0,120) [150,250) = 220
  //   stream 9 (comm):    [100,200) [300,350)       -> comm 150; overlap with compute
  //                                                    [100,120) + [150,200) = 70
  //   stream 7 memcpy:    [380,400)                 -> memcpy 20
  // span [0,400) = 400; busy = U all = [0,250) [300,350) [380,400) = 320; idle 80.
  std::vector<GpuActivity> a = {
      act(GpuKind::kernel, 0, 100, 1, 0, 7),
      act(GpuKind::kernel, 150, 250, 2, 0, 7),
      act(GpuKind::kernel, 50, 120, 1, 0, 8),
      act(GpuKind::comm, 100, 200, 3, 0, 9),
      act(GpuKind::comm, 300, 350, 3, 0, 9),
      act(GpuKind::memcpy, 380, 400, 4, 0, 7),
      // Not device time: an API call and a memory record in the same iteration.
      act(GpuKind::api, -50, 500, 0, 0, 1234),
      act(GpuKind::memory, 10, 10, 0, 0),
  };
  const auto b = gpu_breakdown(a);
  ASSERT_EQ(b.size(), 1U);
  EXPECT_EQ(b[0].start_ns, 0);
  EXPECT_EQ(b[0].end_ns, 400);
  EXPECT_EQ(b[0].compute_ns, 220);
  EXPECT_EQ(b[0].comm_ns, 150);
  EXPECT_EQ(b[0].overlap_ns, 70);
  EXPECT_EQ(b[0].exposed_comm_ns, 80);
  EXPECT_EQ(b[0].memcpy_ns, 20);
  EXPECT_EQ(b[0].memset_ns, 0);
  EXPECT_EQ(b[0].busy_ns, 320);
  EXPECT_EQ(b[0].idle_ns, 80);
  EXPECT_DOUBLE_EQ(b[0].busy_fraction(), 0.8);
  EXPECT_DOUBLE_EQ(b[0].overlap_fraction(), 70.0 / 150.0);
  // The identity of the breakdown: compute + exposed comm + (copies, sets outside kernels) + idle = span.
  EXPECT_EQ(b[0].compute_ns + b[0].exposed_comm_ns + 20 + b[0].idle_ns, b[0].span_ns());
}

TEST(GpuAnalysis, StagingCopyIsCommunicationInTheBreakdown) {
  // A copy launched from a communication range: comm [0,40); a plain copy [50,60); a kernel [30,70).
  std::vector<GpuActivity> a = {act(GpuKind::comm, 0, 40, 4, 0), act(GpuKind::memcpy, 50, 60, 4, 0),
                                act(GpuKind::kernel, 30, 70, 1, 0)};
  a[0].comm_work = GpuKind::memcpy;
  const auto b = gpu_breakdown(a);
  ASSERT_EQ(b.size(), 1U);
  EXPECT_EQ(b[0].comm_ns, 40);
  EXPECT_EQ(b[0].memcpy_ns, 10);
  EXPECT_EQ(b[0].compute_ns, 40);
  EXPECT_EQ(b[0].overlap_ns, 10);
  EXPECT_EQ(b[0].exposed_comm_ns, 30);
  EXPECT_EQ(b[0].busy_ns, 70);
}

TEST(GpuAnalysis, IterationsByLaunchDevicesApartWarmupFiltered) {
  // Iteration 1's last kernel runs after iteration 2's first began (asynchronous launches):
  // each iteration keeps its own window, as HTA's per-iteration spans do.
  std::vector<GpuActivity> a = {
      act(GpuKind::kernel, 0, 10, 1, 0),  // warm-up
      act(GpuKind::kernel, 100, 150, 1, 1),       act(GpuKind::kernel, 200, 260, 1, 1),
      act(GpuKind::kernel, 250, 300, 2, 2),       act(GpuKind::memset, 310, 320, 5, 2),
      act(GpuKind::kernel, 100, 130, 1, 1, 7, 1),  // device 1
      act(GpuKind::kernel, 5, 6, 1, -1),           // before the first iteration: left out
  };
  const auto b = gpu_breakdown(a, [](int32_t i) { return i >= 1; });
  ASSERT_EQ(b.size(), 3U);
  EXPECT_EQ(b[0].device, 0);
  EXPECT_EQ(b[0].iteration, 1);
  EXPECT_EQ(b[0].span_ns(), 160);
  EXPECT_EQ(b[0].busy_ns, 110);
  EXPECT_EQ(b[0].idle_ns, 50);
  EXPECT_EQ(b[1].iteration, 2);
  EXPECT_EQ(b[1].span_ns(), 70);
  EXPECT_EQ(b[1].memset_ns, 10);
  EXPECT_EQ(b[1].idle_ns, 10);
  EXPECT_EQ(b[2].device, 1);
  EXPECT_EQ(b[2].busy_ns, 30);

  const std::vector<GpuBreakdown> dev0(b.begin(), b.begin() + 2);
  const GpuBreakdown t = total(dev0);
  EXPECT_EQ(t.iteration, -1);
  EXPECT_EQ(t.span_ns(), 230);
  EXPECT_EQ(t.busy_ns, 170);
  EXPECT_EQ(t.idle_ns, 60);
  EXPECT_EQ(t.compute_ns, 160);
}

TEST(GpuAnalysis, KernelSummaryLikeNsysStats) {
  std::vector<GpuActivity> a = {
      act(GpuKind::kernel, 0, 10, 1, 1),   act(GpuKind::kernel, 20, 50, 1, 1), act(GpuKind::kernel, 60, 80, 1, 2),
      act(GpuKind::kernel, 0, 5, 2, 1),    act(GpuKind::comm, 0, 100, 3, 1),   act(GpuKind::kernel, 0, 1000, 2, 0),
      act(GpuKind::memcpy, 0, 1000, 4, 1), act(GpuKind::comm, 0, 2000, 4, 1),
  };
  a.back().comm_work = GpuKind::memcpy;  // a staging copy: communication, but no kernel
  const auto s = kernel_summary(a, lookup, [](int32_t i) { return i >= 1; });
  ASSERT_EQ(s.size(), 3U);
  EXPECT_EQ(s[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(s[0].total_ns, 100);
  EXPECT_EQ(s[1].name, "gemm");
  EXPECT_EQ(s[1].count, 3);
  EXPECT_EQ(s[1].total_ns, 60);
  EXPECT_EQ(s[1].median_ns, 20);
  EXPECT_EQ(s[1].min_ns, 10);
  EXPECT_EQ(s[1].max_ns, 30);
  EXPECT_EQ(s[2].name, "relu");
  EXPECT_EQ(s[2].count, 1);  // the warm-up one left out
}

TEST(GpuAnalysis, CopySummaryBytesAndBandwidth) {
  std::vector<GpuActivity> a = {act(GpuKind::memcpy, 0, 1000, 4, 1), act(GpuKind::memcpy, 0, 3000, 4, 1),
                                act(GpuKind::memset, 0, 100, 5, 1),  act(GpuKind::kernel, 0, 5, 1, 1),
                                act(GpuKind::comm, 0, 1000, 4, 1),   act(GpuKind::comm, 0, 7, 3, 1)};
  a[0].bytes = 10'000;
  a[1].bytes = 30'000;
  a[2].bytes = 4096;
  a[4].bytes = 20'000, a[4].comm_work = GpuKind::memcpy;  // a staging copy is a copy all the same
  const auto s = copy_summary(a, lookup);                 // the communication kernel (a[5]) is not
  ASSERT_EQ(s.size(), 2U);
  EXPECT_EQ(s[0].name, "memcpy HtoD");
  EXPECT_EQ(s[0].count, 3);
  EXPECT_EQ(s[0].bytes, 60'000);
  EXPECT_DOUBLE_EQ(s[0].gb_per_s(), 12.0);  // 60,000 bytes in 5,000 ns
  EXPECT_EQ(s[1].bytes, 4096);
}

TEST(GpuAnalysis, LayerTimesFromLaunchAttribution) {
  std::vector<GpuActivity> a = {act(GpuKind::kernel, 0, 10, 1, 1),  act(GpuKind::kernel, 20, 25, 2, 1),
                                act(GpuKind::kernel, 30, 60, 1, 1), act(GpuKind::kernel, 5, 7, 1, 1),
                                act(GpuKind::kernel, 70, 90, 1, 1), act(GpuKind::api, 0, 100, 9, 1)};
  a[0].layer = 6, a[0].pass = Pass::forward;
  a[1].layer = 6, a[1].pass = Pass::forward;
  a[2].layer = 6, a[2].pass = Pass::backward;
  a[3].layer = 7, a[3].pass = Pass::forward;  // starts earlier than fc's... but after layer1's first
  a[4].layer = 0;                             // launched outside any layer: left out
  a[5].layer = 6;                             // an API call is not device time
  const auto l = gpu_layer_times(a, lookup);
  ASSERT_EQ(l.size(), 2U);
  EXPECT_EQ(l[0].name, "layer1.conv1");
  EXPECT_EQ(l[0].forward_ns, 15);
  EXPECT_EQ(l[0].backward_ns, 30);
  EXPECT_EQ(l[0].activities, 3);
  EXPECT_EQ(l[1].name, "fc");
  EXPECT_EQ(l[1].forward_ns, 2);
}

TEST(GpuAnalysis, MemoryPeakFromAllocationRecords) {
  auto mem = [](int64_t t, int64_t bytes, int16_t device = 0) {
    GpuActivity a = act(GpuKind::memory, t, t, 0, 0, 0, device);
    a.bytes = bytes;
    return a;
  };
  // 0: +100, 5: +50 (150), 10: -100 and +80 at once (free first: 130, never 230), 20: -50.
  std::vector<GpuActivity> a = {mem(10, 80), mem(0, 100), mem(5, 50), mem(10, -100), mem(20, -50), mem(3, 7, 1)};
  const auto m = gpu_memory(a);
  ASSERT_EQ(m.size(), 2U);
  EXPECT_EQ(m[0].device, 0);
  EXPECT_EQ(m[0].peak_bytes, 150);
  EXPECT_EQ(m[0].peak_ns, 5);
  EXPECT_EQ(m[0].final_bytes, 80);
  EXPECT_EQ(m[0].allocations, 3);
  EXPECT_EQ(m[0].frees, 2);
  EXPECT_EQ(m[1].peak_bytes, 7);
}

TEST(LaunchContext, ExternalIdsPackAndAttribute) {
  EXPECT_EQ(unpack_layer(pack_op(0xfffffff0U, 17)), 0xfffffff0U);
  EXPECT_EQ(unpack_op(pack_op(0xfffffff0U, 17)), 17U);
  EXPECT_EQ(unpack_iteration(pack_iteration(123456, Pass::backward)), 123456);
  EXPECT_EQ(unpack_pass(pack_iteration(123456, Pass::backward)), Pass::backward);
  EXPECT_EQ(unpack_iteration(pack_iteration(-1, Pass::none)), -1);

  // Correlation 1: a kernel launched by conv2d in layer1.conv1, backward, iteration 4;
  // 2: a copy in iteration 4 outside any op; 3: an API call with no ids; 0: CUPTI overhead.
  std::vector<GpuActivity> a = {act(GpuKind::kernel, 0, 1, 1, -1), act(GpuKind::memcpy, 0, 1, 4, -1),
                                act(GpuKind::api, 0, 1, 0, -1), act(GpuKind::overhead, 0, 1, 0, -1),
                                act(GpuKind::api, 0, 1, 0, -1)};
  a[0].correlation = 1, a[1].correlation = 2, a[2].correlation = 3, a[4].correlation = 1;
  const ExternalIds ops = {{1, pack_op(6, 8)}};
  const ExternalIds iterations = {{1, pack_iteration(4, Pass::backward)}, {2, pack_iteration(4, Pass::none)}};
  EXPECT_EQ(attribute_launches(a, {ops, iterations, {}}), 1U);  // the copy
  EXPECT_EQ(a[0].layer, 6U);
  EXPECT_EQ(a[0].op, 8U);
  EXPECT_EQ(a[0].pass, Pass::backward);
  EXPECT_EQ(a[0].iteration, 4);
  EXPECT_EQ(a[4].layer, 6U);  // the API call that launched it carries the same context
  EXPECT_EQ(a[1].layer, 0U);
  EXPECT_EQ(a[1].iteration, 4);
  EXPECT_EQ(a[2].iteration, -1);
  EXPECT_EQ(a[3].iteration, -1);
}

TEST(LaunchContext, CommunicationIsWhereALaunchWasIssuedNotWhatItIsCalled) {
  // Correlation 1: a kernel named like NCCL's, launched by an op in iteration 2 outside any
  // communication range; 2: a compute-named kernel, 3: a copy, 4: a set, each launched from a
  // communication range in iteration 5 on a thread with no iteration of its own; 5: a kernel
  // with no ids at all. The API calls and the synchronisation that share 2 and 3 are no device work.
  std::vector<GpuActivity> a = {act(GpuKind::kernel, 0, 1, 3, -1), act(GpuKind::kernel, 0, 1, 1, -1),
                                act(GpuKind::memcpy, 0, 1, 4, -1), act(GpuKind::memset, 0, 1, 5, -1),
                                act(GpuKind::kernel, 0, 1, 2, -1), act(GpuKind::api, 0, 1, 0, -1),
                                act(GpuKind::sync, 0, 1, 0, -1)};
  for (uint32_t c : {1U, 2U, 3U, 4U, 5U}) a[c - 1].correlation = c;
  a[5].correlation = 2, a[6].correlation = 3;
  a[2].bytes = 4096;
  const ExternalIds ops = {{1, pack_op(6, 8)}};
  const ExternalIds iterations = {{1, pack_iteration(2, Pass::forward)},
                                  {2, pack_iteration(5, Pass::none)},
                                  {3, pack_iteration(5, Pass::none)},
                                  {4, pack_iteration(5, Pass::none)}};
  const ExternalIds comm = {{2, pack_op(7, 9)}, {3, pack_op(7, 9)}, {4, pack_op(7, 9)}};
  EXPECT_EQ(attribute_launches(a, {ops, iterations, comm}), 4U);  // all but the op's kernel

  EXPECT_EQ(a[0].kind, GpuKind::kernel);  // its name does not make it communication
  EXPECT_EQ(a[0].op, 8U);
  EXPECT_EQ(a[0].iteration, 2);
  EXPECT_EQ(a[0].pass, Pass::forward);
  const GpuKind was[] = {GpuKind::kernel, GpuKind::memcpy, GpuKind::memset};
  for (size_t i = 1; i <= 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].kind, GpuKind::comm);
    EXPECT_EQ(a[i].comm_work, was[i - 1]);
    EXPECT_EQ(device_work(a[i]), was[i - 1]);
    EXPECT_EQ(a[i].iteration, 5);  // from the communication range
    EXPECT_EQ(a[i].pass, Pass::none);
    EXPECT_EQ(a[i].op, 0U);  // a communication range is no op: layers and ops stay as they were
    EXPECT_EQ(a[i].layer, 0U);
  }
  EXPECT_EQ(a[2].bytes, 4096);
  EXPECT_EQ(a[4].kind, GpuKind::kernel);  // in no map: untouched
  EXPECT_EQ(a[4].iteration, -1);
  EXPECT_EQ(a[4].op, 0U);
  EXPECT_EQ(a[5].kind, GpuKind::api);
  EXPECT_EQ(a[5].iteration, 5);
  EXPECT_EQ(a[6].kind, GpuKind::sync);

  // Attributing again changes nothing: what the device did is not lost.
  EXPECT_EQ(attribute_launches(a, {ops, iterations, comm}), 4U);
  EXPECT_EQ(a[2].kind, GpuKind::comm);
  EXPECT_EQ(a[2].comm_work, GpuKind::memcpy);

  // In the breakdown the three are communication, none of them compute or a copy.
  const auto b = gpu_breakdown(a);
  ASSERT_EQ(b.size(), 2U);  // iterations 2 and 5
  EXPECT_EQ(b[0].iteration, 2);
  EXPECT_EQ(b[0].compute_ns, 1);
  EXPECT_EQ(b[0].comm_ns, 0);
  EXPECT_EQ(b[1].iteration, 5);
  EXPECT_EQ(b[1].compute_ns, 0);
  EXPECT_EQ(b[1].memcpy_ns, 0);
  EXPECT_EQ(b[1].memset_ns, 0);
  EXPECT_EQ(b[1].comm_ns, 1);
}
