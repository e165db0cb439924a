#include "distributed/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <string>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/tcp_ring.h"

namespace ts::distributed {

namespace {

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::f32: return MPI_FLOAT;
    case DataType::f64: return MPI_DOUBLE;
    case DataType::i32: return MPI_INT32_T;
    case DataType::i64: return MPI_INT64_T;
    case DataType::u8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

// MPI counts are ints: larger buffers go in pieces of at most this many elements.
constexpr size_t kMaxPiece = static_cast<size_t>(INT_MAX) / 2;

int as_count(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) {
    throw DistError(std::string(what) + ": " + std::to_string(n) + " elements per rank exceed MPI's int counts");
  }
  return static_cast<int>(n);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent) {
  TS_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  // A started call is part of every rank's sequence: it completes (the others started it too).
  if (started_ != MPI_REQUEST_NULL) MPI_Wait(&started_, MPI_STATUS_IGNORE);
  tcp_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) {
  if (large_ == AllReduceAlgorithm::ring && count * size_of(type) >= kRingMinBytes) {
    ring_all_reduce(comm_, data, count, type, op);
    return;
  }
  if (large_ == AllReduceAlgorithm::tcp && size_ > 1 && count * size_of(type) >= kRingMinBytes) {
    // Every rank reaches its first large all-reduce at the same point of its calls: the ring is
    // set up there, collectively, on this communicator.
    if (!tcp_) tcp_ = std::make_unique<TcpRing>(comm_);
    tcp_->all_reduce(data, count, type, op);
    return;
  }
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kMaxPiece, count - done);
    TS_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, p + done * size_of(type), static_cast<int>(n), mpi_type(type), mpi_op(op), comm_));
    done += n;
  }
}

void MpiCommunicator::do_broadcast(void* data, size_t count, DataType type, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kMaxPiece, count - done);
    TS_MPI_CHECK(MPI_Bcast(p + done * size_of(type), static_cast<int>(n), mpi_type(type), root, comm_));
    done += n;
  }
}

void MpiCommunicator::do_all_gather(const void* send, void* recv, size_t count, DataType type) {
  const int n = as_count(count, "all_gather");
  TS_MPI_CHECK(MPI_Allgather(send, n, mpi_type(type), recv, n, mpi_type(type), comm_));
}

void MpiCommunicator::do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  const int n = as_count(count, "reduce_scatter");
  TS_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, mpi_type(type), mpi_op(op), comm_));
}

void MpiCommunicator::do_barrier() { TS_MPI_CHECK(MPI_Barrier(comm_)); }

bool MpiCommunicator::do_start_all_reduce(void* data, size_t count, DataType type, ReduceOp op) {
  if (count > kMaxPiece) {  // one request per call: a buffer that needs pieces goes whole
    do_all_reduce(data, count, type, op);
    return false;
  }
  TS_MPI_CHECK(
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(type), mpi_op(op), comm_, &started_));
  return true;
}

void MpiCommunicator::do_finish_all_reduce() { TS_MPI_CHECK(MPI_Wait(&started_, MPI_STATUS_IGNORE)); }

}  // namespace ts::distributed
