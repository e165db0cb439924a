#pragma once
// A test double: every collective goes to a real MpiCommunicator; a subclass changes the one
// it is about (a wrong all-reduce, a slow one).
#include <string_view>

#include "distributed/mpi_communicator.h"

namespace ts::distributed {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(MpiCommunicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return "test double"; }

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) override {
    inner_.all_reduce(data, count, type, op, "forwarded");
  }
  void do_broadcast(void* data, size_t count, DataType type, int root) override {
    inner_.broadcast(data, count, type, root, "forwarded");
  }
  void do_all_gather(const void* send, void* recv, size_t count, DataType type) override {
    inner_.all_gather(send, recv, count, type, "forwarded");
  }
  void do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    inner_.reduce_scatter(send, recv, count, type, op, "forwarded");
  }
  void do_barrier() override { inner_.barrier("forwarded"); }

  MpiCommunicator& inner_;
};

}  // namespace ts::distributed
