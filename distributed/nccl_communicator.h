#pragma once
// Collectives on GPU memory through NCCL (the CUDA toolkit's), on a stream of their own or the one
// queue_on names. The communicator's unique id is made by rank 0 and broadcast over MPI, as
// NCCL's docs describe.
// Built only with CUDA (TS_HAVE_CUDA); calls block until the collective has finished on the
// device, so a call's recorded time is the collective's.
#ifdef TS_HAVE_CUDA
#include <mpi.h>

#include <memory>

#include "distributed/communicator.h"

namespace ts::distributed {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over the ranks of `bootstrap`; this rank's GPU is `device`.
  NcclCommunicator(MPI_Comm bootstrap, int device);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "nccl"; }
  bool takes_device_memory() const override { return true; }
  // Data parallelism's communication stream (engine/side_stream.h), on this communicator's GPU.
  void queue_on(void* stream) override;

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override;
  void do_broadcast(void* data, size_t count, DataType type, int root) override;
  void do_all_gather(const void* send, void* recv, size_t count, DataType type) override;
  void do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override;
  void do_barrier() override;

 private:
  struct Handles;
  std::unique_ptr<Handles> h_;
  int rank_ = 0, size_ = 1, device_ = 0;
};

}  // namespace ts::distributed
#endif
