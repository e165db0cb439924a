#pragma once
// The messages between a parameter server's workers and servers, over MPI point-to-point: one
// message each, a fixed header and the key's floats. Workers send on one communicator and
// servers answer on another, so that a rank that is both (a co-located server) never takes a
// message meant for its other half. All of a sender's messages to one receiver go on one tag and
// from one thread, so MPI delivers them in the order they were sent.
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace ts::distributed::ps {

enum class MessageKind : int32_t {
  init = 1,   // worker 0 -> server: a key's first value
  push = 2,   // worker -> server: a gradient (no floats: the worker had none for the key)
  pull = 3,   // worker -> server: the key's value, once the server may answer (`clock`)
  done = 4,   // worker -> server: no more messages from this worker
  value = 5,  // server -> worker: a key's value (`version`), answering the worker's `clock`
  bye = 6,    // server -> worker: nothing more from this server
};

struct MessageHeader {
  MessageKind kind = MessageKind::push;
  int32_t key = -1;
  int32_t worker = 0;
  int32_t iteration = -1;  // the worker's training iteration when it sent (profiling)
  // push: the worker's pushes of this key so far, this one included; pull: the pushes it has
  // made (the read must reflect the rounds bounded mode requires); value: the pushes answered.
  int64_t clock = 0;
  // push: the version of the value the gradient was computed from; value: the value's version.
  int64_t version = 0;
  // pull and its answer: the worker's last read, after every worker has finished (the final
  // model, which every worker then holds alike).
  int32_t final_read = 0;
  int32_t unused = 0;
};

struct Message {
  MessageHeader header;
  std::vector<float> data;
};

inline constexpr int kTag = 7;

// Sends one message to `dest` (blocking until MPI has taken the buffer). Throws DistError.
void send_message(MPI_Comm comm, int dest, const MessageHeader& header, const float* data, int64_t count);
// Waits for the next message from anyone; `source` gets the sender's rank. Throws DistError on
// a malformed message.
Message receive_message(MPI_Comm comm, int& source);

}  // namespace ts::distributed::ps
