#include "distributed/collective_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>

#include "distributed/busy_thread.h"
#include "distributed/comm_figures.h"

namespace ts::distributed {

namespace {

class HostMemory final : public BenchMemory {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void upload(void* to, const void* host, size_t bytes) override { std::memcpy(to, host, bytes); }
  void download(void* host, const void* from, size_t bytes) override { std::memcpy(host, from, bytes); }
};

// One buffer of the benchmark, released on every path out.
class Buffer {
 public:
  Buffer(BenchMemory& memory, int64_t elements)
      : memory_(memory), bytes_(static_cast<size_t>(elements) * sizeof(float)), p_(memory.allocate(bytes_)) {}
  ~Buffer() { memory_.release(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }
  void fill(const std::vector<float>& host) { memory_.upload(p_, host.data(), host.size() * sizeof(float)); }
  std::vector<float> read() const {
    std::vector<float> host(bytes_ / sizeof(float));
    memory_.download(host.data(), p_, bytes_);
    return host;
  }

 private:
  BenchMemory& memory_;
  size_t bytes_;
  void* p_;
};

// How many elements one call of `c` moves for a requested size, and the size that makes: all-gather
// and reduce-scatter split the buffer into one block per rank, so their sizes round to n blocks.
struct Shape {
  int64_t count = 0;           // the `count` argument of the call
  int64_t send = 0, recv = 0;  // elements of each buffer (0 send: in place)
  int64_t bytes = 0;
};

Shape shape_of(Collective c, int64_t bytes, int ranks) {
  constexpr int64_t f = sizeof(float);
  Shape s;
  switch (c) {
    case Collective::all_reduce:
    case Collective::broadcast:
      s.count = std::max<int64_t>(1, bytes / f);
      s.recv = s.count;
      s.bytes = s.count * f;
      break;
    case Collective::all_gather:
      s.count = std::max<int64_t>(1, bytes / (f * ranks));
      s.send = s.count;
      s.recv = s.count * ranks;
      s.bytes = s.recv * f;
      break;
    case Collective::reduce_scatter:
      s.count = std::max<int64_t>(1, bytes / (f * ranks));
      s.send = s.count * ranks;
      s.recv = s.count;
      s.bytes = s.send * f;
      break;
    case Collective::barrier: break;
  }
  return s;
}

void call(Communicator& comm, Collective c, const Shape& s, void* send, void* recv) {
  const auto n = static_cast<size_t>(s.count);
  switch (c) {
    case Collective::all_reduce: comm.all_reduce(recv, n, DataType::f32, ReduceOp::sum, "bench"); break;
    case Collective::broadcast: comm.broadcast(recv, n, DataType::f32, 0, "bench"); break;
    case Collective::all_gather: comm.all_gather(send, recv, n, DataType::f32, "bench"); break;
    case Collective::reduce_scatter: comm.reduce_scatter(send, recv, n, DataType::f32, ReduceOp::sum, "bench"); break;
    case Collective::barrier: comm.barrier("bench"); break;
  }
}

// Check values: small whole numbers, so every sum over up to 4096 ranks is exact in float32.
float value(int rank, int64_t i) { return static_cast<float>((rank % 3 + 1) * (i % 5 + 1)); }
float rank_sum(int ranks) {
  int64_t s = 0;
  for (int r = 0; r < ranks; ++r) s += r % 3 + 1;
  return static_cast<float>(s);
}

// One call on known inputs; returns how many of this rank's result elements are wrong.
int64_t check(Communicator& comm, Collective c, const Shape& s, BenchMemory& memory) {
  if (c == Collective::barrier) return 0;
  const int rank = comm.rank(), n = comm.size();
  std::optional<Buffer> send;
  Buffer recv(memory, s.recv);
  std::vector<float> input(static_cast<size_t>(s.send ? s.send : s.recv));
  for (size_t i = 0; i < input.size(); ++i) input[i] = value(rank, static_cast<int64_t>(i));
  if (s.send) {
    send.emplace(memory, s.send);
    send->fill(input);
  } else {
    recv.fill(input);
  }
  call(comm, c, s, send ? send->get() : nullptr, recv.get());
  const std::vector<float> out = recv.read();
  const float sum = rank_sum(n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < s.recv; ++i) {
    float want = 0;
    switch (c) {
      case Collective::all_reduce: want = value(0, i) * sum; break;
      case Collective::broadcast: want = value(0, i); break;
      case Collective::all_gather: want = value(static_cast<int>(i / s.count), i % s.count); break;
      case Collective::reduce_scatter: want = value(0, rank * s.count + i) * sum; break;
      case Collective::barrier: break;
    }
    wrong += out[static_cast<size_t>(i)] != want;
  }
  return wrong;
}

// Whether any rank stops (1) or is past its deadline (2), agreed by every rank.
BenchEnd any_rank_stops(Communicator& host, const std::atomic<bool>* stop, const CollectiveBenchOptions& o) {
  int64_t flag = stop && stop->load() ? 1 : 0;
  if (o.deadline && std::chrono::steady_clock::now() >= *o.deadline) flag = 2;
  host.all_reduce(&flag, 1, DataType::i64, ReduceOp::max, "stop flag");
  return flag == 2 ? BenchEnd::timed_out : flag == 1 ? BenchEnd::stopped : BenchEnd::finished;
}

// Times one collective at one shape on every rank and combines the ranks' figures.
CollectiveBenchResult measure(Communicator& measured, Communicator& host, BenchMemory& memory, Collective c,
                              const Shape& s, const CollectiveBenchOptions& o) {
  std::optional<Buffer> send, recv;
  if (s.send) send.emplace(memory, s.send);
  if (s.recv) recv.emplace(memory, s.recv);
  void* send_p = send ? send->get() : nullptr;
  void* recv_p = recv ? recv->get() : nullptr;
  host.barrier("bench");
  for (int i = 0; i < o.warmup; ++i) call(measured, c, s, send_p, recv_p);
  host.barrier("bench");
  double total_ns = 0;
  int64_t min_ns = std::numeric_limits<int64_t>::max(), max_ns = 0;
  std::vector<int64_t> mine(static_cast<size_t>(o.iterations));
  for (int i = 0; i < o.iterations; ++i) {
    if (o.before_timed_call) o.before_timed_call(c, s.bytes, i);
    const auto t0 = std::chrono::steady_clock::now();
    call(measured, c, s, send_p, recv_p);
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    mine[static_cast<size_t>(i)] = ns;
    total_ns += static_cast<double>(ns);
    min_ns = std::min(min_ns, ns);
    max_ns = std::max(max_ns, ns);
  }
  // Beside: the busy thread alone on every rank (the ranks lined up), then beside more calls.
  double beside[2] = {-1, -1};  // rate kept, mean call time
  if (o.beside_calls > 0 && c != Collective::barrier) {
    host.barrier("bench");
    BusyThread busy;
    double alone_s = 0, beside_s = 0;
    const double alone = busy_rate(
        busy, [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, alone_s);
    host.barrier("bench");
    const double during = busy_rate(
        busy,
        [&] {
          for (int i = 0; i < o.beside_calls; ++i) call(measured, c, s, send_p, recv_p);
        },
        beside_s);
    beside[0] = alone > 0 ? during / alone : -1;
    beside[1] = beside_s * 1e9 / o.beside_calls;
  }
  send.reset();
  recv.reset();

  CollectiveBenchResult r;
  r.collective = c;
  r.bytes = s.bytes;
  r.count = s.count;
  r.ranks = host.size();
  r.iterations = o.iterations;
  double mean = total_ns / o.iterations;
  int64_t wrong = check(measured, c, s, memory);
  host.all_reduce(&mean, 1, DataType::f64, ReduceOp::sum, "bench time");
  host.all_reduce(beside, 2, DataType::f64, ReduceOp::sum, "bench time");
  host.all_reduce(&min_ns, 1, DataType::i64, ReduceOp::min, "bench time");
  host.all_reduce(&max_ns, 1, DataType::i64, ReduceOp::max, "bench time");
  host.all_reduce(&wrong, 1, DataType::i64, ReduceOp::sum, "bench check");
  r.samples_ns.resize(mine.size() * static_cast<size_t>(host.size()));
  host.all_gather(mine.data(), r.samples_ns.data(), mine.size(), DataType::i64, "bench samples");
  r.time_ns = mean / host.size();
  if (beside[0] >= 0) {
    r.beside_rate = beside[0] / host.size();
    r.beside_ns = beside[1] / host.size();
  }
  r.min_time_ns = min_ns;
  r.max_time_ns = max_ns;
  r.wrong = wrong;
  const auto whole_ns = static_cast<int64_t>(r.time_ns + 0.5);
  r.algbw_gbps = c == Collective::barrier ? 0 : algbw_gbps(r.bytes, whole_ns);
  r.busbw_gbps = c == Collective::barrier ? 0 : busbw_gbps(c, r.ranks, r.bytes, whole_ns);
  return r;
}

}  // namespace

std::unique_ptr<BenchMemory> host_memory() { return std::make_unique<HostMemory>(); }

std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  if (min_bytes < 1 || max_bytes < min_bytes || factor < 2) {
    throw std::invalid_argument("a sweep needs 1 <= min bytes <= max bytes and a factor of at least 2");
  }
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes;; b *= factor) {
    sizes.push_back(b);
    if (b > max_bytes / factor) break;  // the next step would pass max (or overflow)
  }
  return sizes;
}

BenchEnd run_collective_bench(Communicator& measured, Communicator& host, BenchMemory& memory,
                              const CollectiveBenchOptions& options, const std::atomic<bool>* stop,
                              const std::function<void(const CollectiveBenchResult&)>& on_result) {
  if (options.iterations < 1 || options.warmup < 0)
    throw std::invalid_argument("a sweep needs iterations >= 1 and warmup >= 0");
  // The benchmark times its calls itself; the profiler's records would only grow.
  measured.set_recording(false);
  host.set_recording(false);
  const std::vector<int64_t> sizes = sweep_sizes(options.min_bytes, options.max_bytes, options.factor);
  for (const Collective c : options.collectives) {
    if (c == Collective::barrier) {
      if (const BenchEnd end = any_rank_stops(host, stop, options); end != BenchEnd::finished) return end;
      on_result(measure(measured, host, memory, c, Shape{}, options));
      continue;
    }
    int64_t last_bytes = -1;
    for (const int64_t requested : sizes) {
      const Shape s = shape_of(c, requested, host.size());
      if (s.bytes == last_bytes) continue;  // small sizes that round to the same buffer
      last_bytes = s.bytes;
      if (const BenchEnd end = any_rank_stops(host, stop, options); end != BenchEnd::finished) return end;
      on_result(measure(measured, host, memory, c, s, options));
    }
  }
  return BenchEnd::finished;
}

}  // namespace ts::distributed
