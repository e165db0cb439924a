#pragma once
// Collectives on host memory through MPI; with TS_ALLREDUCE=ring a large all-reduce goes round
// our ring over MPI's messages instead (ring_all_reduce.h), with TS_ALLREDUCE=tcp round our ring
// over plain TCP sockets (tcp_ring.h: connected at the first such call, kept until the
// communicator goes). Owns a duplicate of the communicator it is given, so
// its calls never match another component's calls on the same ranks (the record stream to rank
// 0 has a duplicate of its own).
#include <mpi.h>

#include <memory>

#include "distributed/communicator.h"
#include "distributed/ring_all_reduce.h"

namespace ts::distributed {

class TcpRing;

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm parent = MPI_COMM_WORLD);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }
  // The TCP ring its large all-reduces go round (TS_ALLREDUCE=tcp), once the first has made it.
  const TcpRing* tcp_ring() const { return tcp_.get(); }

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override;
  void do_broadcast(void* data, size_t count, DataType type, int root) override;
  void do_all_gather(const void* send, void* recv, size_t count, DataType type) override;
  void do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override;
  void do_barrier() override;
  bool do_start_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override;
  void do_finish_all_reduce() override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  MPI_Request started_ = MPI_REQUEST_NULL;  // do_start_all_reduce's call
  AllReduceAlgorithm large_ = all_reduce_algorithm();
  std::unique_ptr<TcpRing> tcp_;  // TS_ALLREDUCE=tcp: made by the first large all-reduce
};

}  // namespace ts::distributed
