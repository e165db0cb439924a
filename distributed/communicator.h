#pragma once
// One interface for the collectives data parallelism and the parameter server need, with an
// MPI implementation for host memory (mpi_communicator.h) and an NCCL one for GPU memory
// (nccl_communicator.h). Every call is timed and recorded: a `comm` event on the calling
// thread's track of the profiler, and a CollectiveRecord (what, how many bytes, when) that the
// run session stores and summarises as nccl-tests does (comm_figures.h).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ts::distributed {

enum class DataType { f32, f64, i32, i64, u8 };
enum class ReduceOp { sum, max, min };
enum class Collective { all_reduce, broadcast, all_gather, reduce_scatter, barrier };

size_t size_of(DataType type);
std::string_view to_string(Collective c);

// One collective call as this rank saw it. `bytes` is the size nccl-tests reports for the call:
// the buffer for all-reduce and broadcast, the whole gathered (all-gather) or scattered
// (reduce-scatter) buffer of all ranks, 0 for a barrier.
struct CollectiveRecord {
  Collective collective = Collective::barrier;
  std::string label;  // what it carried: "bucket 3", "parameters", "stop flag", ...
  int64_t bytes = 0;
  int64_t start_ns = 0, end_ns = 0;  // profiler clock
  int32_t iteration = -1;            // the training iteration it ran in (-1: none)
  uint32_t thread = 0;               // the profiler's id of the calling thread
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;  // "mpi" | "nccl"
  // Where the buffers of its calls live: host memory (MPI), or the memory of the GPU it was made
  // for (NCCL).
  virtual bool takes_device_memory() const { return false; }
  // A communicator that queues its collectives on a device stream does so on `stream` (a
  // cudaStream_t: an engine::SideStream's native()) from now on, still returning once each has
  // finished; nullptr goes back to its own stream. Host collectives have no stream: a no-op.
  virtual void queue_on(void* stream) { (void)stream; }

  // In place on `count` elements; every rank passes the same count, type and op.
  void all_reduce(void* data, size_t count, DataType type, ReduceOp op, std::string_view label);
  // `count` elements of rank `root`'s `data` to every rank's `data`.
  void broadcast(void* data, size_t count, DataType type, int root, std::string_view label);
  // Each rank's `count` elements of `send` into `recv` (size() * count elements), rank order.
  void all_gather(const void* send, void* recv, size_t count, DataType type, std::string_view label);
  // Reduces `send` (size() * count elements) and leaves block rank() (count elements) in `recv`.
  void reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op, std::string_view label);
  void barrier(std::string_view label);

  // An all-reduce started now and completed by finish_all_reduce, so that the caller goes on
  // meanwhile (the stop flag: decided an iteration later, off the iteration's critical path).
  // `data` stays untouched until then; one at a time per communicator; every rank starts it at
  // the same point in its sequence of collectives. Recorded as the finish's wait, the part that
  // held the caller up. Where the backend has no such call, start does the whole all-reduce (and
  // records it) and finish returns at once.
  void start_all_reduce(void* data, size_t count, DataType type, ReduceOp op, std::string_view label);
  void finish_all_reduce();
  bool all_reduce_started() const { return started_.has_value(); }

  // The calls recorded since the last take (thread-safe), in the order they finished.
  std::vector<CollectiveRecord> take_records();
  // Whether calls are recorded (on by default; the collectives benchmark times on its own).
  void set_recording(bool on) { recording_ = on; }
  // What its calls are for, as the stall watch numbers and names them: "gradients", "control".
  void set_channel(std::string channel) { channel_ = std::move(channel); }

 protected:
  virtual void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) = 0;
  virtual void do_broadcast(void* data, size_t count, DataType type, int root) = 0;
  virtual void do_all_gather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual void do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) = 0;
  virtual void do_barrier() = 0;
  // Starts the all-reduce; false when it has finished already (the default: the blocking call).
  virtual bool do_start_all_reduce(void* data, size_t count, DataType type, ReduceOp op) {
    do_all_reduce(data, count, type, op);
    return false;
  }
  // Waits for the all-reduce that do_start_all_reduce left running.
  virtual void do_finish_all_reduce() {}

 private:
  class Timed;
  void record(Collective c, std::string_view label, int64_t bytes, int64_t start_ns, int64_t end_ns);

  bool recording_ = true;
  std::string channel_ = "collectives";
  std::mutex mutex_;
  std::vector<CollectiveRecord> records_;
  struct Started {
    std::string label;
    int64_t bytes = 0;
  };
  std::optional<Started> started_;  // an all-reduce left running by start_all_reduce
};

}  // namespace ts::distributed
