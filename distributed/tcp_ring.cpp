#include "distributed/tcp_ring.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/ring_schedule.h"
#include "distributed/stall_watch.h"
#include "distributed/tcp_interfaces.h"

namespace ts::distributed {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kCard = 1024;           // the fixed size of what each rank tells the others at set-up
constexpr uint32_t kMagic = 0x54535247;  // "TSRG"
constexpr uint32_t kVersion = 1;

// What a connecting rank sends first, and what the accepting rank answers (from and to swapped):
// a connection that reached another process (an address that exists on more than one host, a
// port reused) is dropped on either side.
struct Hello {
  uint32_t magic = kMagic, version = kVersion;
  uint64_t ring = 0;  // the ring's number, rank 0's random pick
  int32_t from = -1, to = -1;
  bool answers(const Hello& h) const {
    return magic == kMagic && version == kVersion && ring == h.ring && from == h.to && to == h.from;
  }
};
static_assert(sizeof(Hello) == 24);

// A socket closed on every path out unless released.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string errno_text(int e) { return std::strerror(e); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Exactly `n` bytes read from or written to a non-blocking socket by `deadline`: "" or why not.
std::string transfer_exact(int fd, void* buffer, size_t n, bool write, Clock::time_point deadline) {
  auto* bytes = static_cast<char*>(buffer);
  size_t done = 0;
  while (done < n) {
    const ssize_t k = write ? ::send(fd, bytes + done, n - done, MSG_NOSIGNAL) : ::recv(fd, bytes + done, n - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return "the connection was closed";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno_text(errno);
    pollfd p{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int left = remaining_ms(deadline);
    if (left == 0 || ::poll(&p, 1, left) == 0) return "no answer in time";
  }
  return "";
}

size_t kernel_limit(const char* path) {
  std::ifstream in(path);
  size_t value = 0;
  in >> value;
  return value;
}

// No delay for small writes; the buffers asked for where the kernel allows as much (set before
// the connection exists, so that the window it offers is scaled for them).
void tune(int fd, const TcpRingOptions& o) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const size_t want = std::min<size_t>(o.socket_buffer_bytes, INT_MAX);
  if (want == 0) return;
  const int size = static_cast<int>(want);
  if (kernel_limit("/proc/sys/net/core/wmem_max") >= want) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  if (kernel_limit("/proc/sys/net/core/rmem_max") >= want) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

std::string address_text(const sockaddr_in& a) {
  std::array<char, INET_ADDRSTRLEN> ip{};
  ::inet_ntop(AF_INET, &a.sin_addr, ip.data(), ip.size());
  return fmt::format("{}:{}", ip.data(), ntohs(a.sin_port));
}

// What a rank tells the others at set-up: "PORT RING IP..." or "error WHY".
struct Card {
  int port = 0;
  uint64_t ring = 0;
  std::vector<std::string> addresses;
};

Card parse_card(const std::string& text) {
  Card c;
  std::istringstream in(text);
  in >> c.port >> c.ring;
  for (std::string ip; in >> ip;) c.addresses.push_back(ip);
  return c;
}

// Every rank's `text` (at most kCard - 1 bytes), by rank.
std::vector<std::string> gather_text(MPI_Comm comm, const std::string& text, int n) {
  std::vector<char> mine(kCard, 0), all(kCard * static_cast<size_t>(n));
  std::copy_n(text.begin(), std::min(text.size(), kCard - 1), mine.begin());
  TS_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(kCard), MPI_CHAR, all.data(), static_cast<int>(kCard),
                             MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    const char* at = all.data() + static_cast<size_t>(r) * kCard;
    out.emplace_back(at, ::strnlen(at, kCard));
  }
  return out;
}

// A connection to `ip`:`port` by `deadline`, or why not.
Socket connect_to(const std::string& ip, int port, Clock::time_point deadline, const TcpRingOptions& o,
                  std::string& why) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &to.sin_addr) != 1) {
    why = "not an IPv4 address";
    return Socket();
  }
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) {
    why = errno_text(errno);
    return s;
  }
  tune(s.get(), o);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    if (errno != EINPROGRESS) {
      why = errno_text(errno);
      return Socket();
    }
    pollfd p{s.get(), POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof error;
    const int left = remaining_ms(deadline);
    if (left == 0 || ::poll(&p, 1, left) != 1) {
      why = "no connection in time";
      return Socket();
    }
    if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      why = errno_text(error != 0 ? error : errno);
      return Socket();
    }
  }
  return s;
}

// The connection to the successor: its addresses in order, each connect and hello bounded by
// the connect timeout. "" or why not.
std::string connect_successor(const Card& card, int me, int successor, uint64_t ring, const TcpRingOptions& o,
                              Socket& out, std::string& address) {
  std::string failures;
  for (const auto& ip : card.addresses) {
    const auto deadline = Clock::now() + o.connect_timeout;
    std::string why;
    Socket s = connect_to(ip, card.port, deadline, o, why);
    if (s.get() >= 0) {
      Hello hello;
      hello.ring = ring;
      hello.from = me;
      hello.to = successor;
      Hello answer;
      why = transfer_exact(s.get(), &hello, sizeof hello, true, deadline);
      if (why.empty()) why = transfer_exact(s.get(), &answer, sizeof answer, false, deadline);
      if (why.empty() && !answer.answers(hello)) why = "another process answered";
      if (why.empty()) {
        out = std::move(s);
        address = fmt::format("{}:{}", ip, card.port);
        return "";
      }
    }
    failures += fmt::format("{}{}:{}: {}", failures.empty() ? "" : ", ", ip, card.port, why);
  }
  return fmt::format("cannot reach rank {} (its successor) at {}", successor, failures);
}

// The connection from the predecessor, accepted on `listener` by `deadline` (connections that
// do not say hello as the predecessor are dropped). "" or why not.
std::string accept_predecessor(int listener, int me, int predecessor, uint64_t ring, Clock::time_point deadline,
                               const TcpRingOptions& o, Socket& out, std::string& address) {
  for (;;) {
    const int left = remaining_ms(deadline);
    if (left == 0) return fmt::format("rank {} (its predecessor) did not connect in time", predecessor);
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, left) != 1) continue;
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    Socket s(::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (s.get() < 0) continue;
    const auto hello_deadline = std::min(deadline, Clock::now() + o.connect_timeout);
    Hello hello;
    if (!transfer_exact(s.get(), &hello, sizeof hello, false, hello_deadline).empty()) continue;
    if (hello.magic != kMagic || hello.version != kVersion || hello.ring != ring || hello.from != predecessor ||
        hello.to != me)
      continue;
    Hello answer;
    answer.ring = ring;
    answer.from = me;
    answer.to = predecessor;
    if (!transfer_exact(s.get(), &answer, sizeof answer, true, hello_deadline).empty()) continue;
    tune(s.get(), o);
    out = std::move(s);
    address = address_text(peer);
    return "";
  }
}

}  // namespace

TcpRingOptions TcpRingOptions::from_environment() {
  TcpRingOptions o;
  if (const char* spec = std::getenv("TS_TCP_IF"); spec && *spec) {
    check_interface_spec(spec);
    o.interfaces = spec;
  }
  return o;
}

TcpRing::TcpRing(MPI_Comm comm, TcpRingOptions options) : options_(std::move(options)) {
  TS_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm, &size_));
  if (size_ == 1) return;
  const int successor = (rank_ + 1) % size_, predecessor = (rank_ + size_ - 1) % size_;

  // Each rank listens on a port of its own and tells every rank where (its card).
  const std::vector<HostAddress> host = host_addresses();
  const std::vector<std::string> mine = select_addresses(host, options_.interfaces);
  Socket listener;
  std::string card;
  if (mine.empty()) {
    card = fmt::format("error no address of this host ({}) matches TS_TCP_IF={}", describe(host), options_.interfaces);
  } else {
    listener = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof any;
    if (listener.get() >= 0) tune(listener.get(), options_);
    if (listener.get() < 0 || ::bind(listener.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0 ||
        ::listen(listener.get(), 16) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&any), &length) != 0) {
      card = "error cannot listen: " + errno_text(errno);
    } else {
      std::random_device random;
      card = fmt::format("{} {}", ntohs(any.sin_port), (uint64_t{random()} << 32) | random());
      for (const auto& ip : mine) {
        if (card.size() + 1 + ip.size() >= kCard) break;  // a host with that many addresses: the first ones
        card += " " + ip;
      }
    }
  }
  const std::vector<std::string> cards = gather_text(comm, card, size_);
  std::string failures;
  for (int r = 0; r < size_; ++r) {
    const auto& c = cards[static_cast<size_t>(r)];
    if (c.starts_with("error ")) failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", r, c.substr(6));
  }
  if (!failures.empty()) throw DistError("TCP ring: " + failures);
  const uint64_t ring = parse_card(cards[0]).ring;
  const Card to = parse_card(cards[static_cast<size_t>(successor)]);
  const Card from = parse_card(cards[static_cast<size_t>(predecessor)]);

  // Accept the predecessor while connecting to the successor (every rank does both at once: one
  // after the other could wait round the ring). The predecessor has tried all its addresses by
  // the accept's deadline.
  Socket accepted, connected;
  std::string accept_error, connect_error;
  {
    const auto accept_deadline =
        Clock::now() + options_.connect_timeout * static_cast<int64_t>(from.addresses.size() + 1);
    std::jthread acceptor([&] {
      try {
        accept_error = accept_predecessor(listener.get(), rank_, predecessor, ring, accept_deadline, options_, accepted,
                                          predecessor_address_);
      } catch (const std::exception& e) {
        accept_error = e.what();
      }
    });
    try {
      connect_error = connect_successor(to, rank_, successor, ring, options_, connected, successor_address_);
    } catch (const std::exception& e) {
      connect_error = e.what();
    }
  }
  std::string outcome = connect_error;
  if (!accept_error.empty()) outcome += (outcome.empty() ? "" : "; ") + accept_error;
  const std::vector<std::string> outcomes = gather_text(comm, outcome.empty() ? "ok" : outcome, size_);
  for (int r = 0; r < size_; ++r) {
    const auto& o = outcomes[static_cast<size_t>(r)];
    if (o != "ok") failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", r, o);
  }
  if (!failures.empty()) {
    throw DistError("TCP ring: cannot connect the ring (" + failures +
                    "); TS_TCP_IF chooses the interfaces or subnets to use");
  }
  to_successor_ = connected.release();
  from_predecessor_ = accepted.release();
}

TcpRing::~TcpRing() {
  if (to_successor_ >= 0) ::close(to_successor_);
  if (from_predecessor_ >= 0) ::close(from_predecessor_);
}

std::chrono::milliseconds TcpRing::idle_limit() const {
  if (options_.idle_timeout.count() > 0) return options_.idle_timeout;
  if (const StallWatch* watch = StallWatch::active()) {
    const int64_t deadline = watch->deadline_ms(watch->phase());
    if (deadline > 0) return std::chrono::milliseconds(2 * deadline);
  }
  return TcpRingOptions::kDefaultIdleTimeout;
}

void TcpRing::all_reduce(void* data, size_t count, DataType type, ReduceOp op) {
  if (size_ == 1 || count == 0) return;
  if (!broken_.empty()) throw DistError("TCP ring: broken by an earlier call (" + broken_ + ")");
  try {
    run(static_cast<char*>(data), count, type, op);
  } catch (const DistError& e) {
    broken_ = e.what();
    throw;
  }
}

void TcpRing::run(char* data, size_t count, DataType type, ReduceOp op) {
  const int n = size_;
  const int successor = (rank_ + 1) % n, predecessor = (rank_ + n - 1) % n;
  const size_t elem = size_of(type);
  const size_t piece = std::max<size_t>(1, options_.piece_bytes / elem) * elem;
  const std::vector<RingStep> steps = ring_steps(n, rank_);
  const size_t last = steps.size();
  auto begin_of = [&](int segment) { return segment_begin(count, n, segment) * elem; };
  auto length_of = [&](int segment) { return begin_of(segment + 1) - begin_of(segment); };
  scratch_.resize(std::max(scratch_.size(), std::min(piece, (count / static_cast<size_t>(n) + 1) * elem)));

  // The receiving side: its step, the bytes of it done (received, and in a reduce-scatter step
  // reduced), the bytes of the piece being received into scratch_. The sending side: its step
  // and the bytes of it sent. The segment sent in step t is the one received in step t - 1: it
  // may go as far as that step has been done.
  size_t rt = 0, rdone = 0, rfill = 0, st = 0, sdone = 0;
  auto settle = [&] {  // on to the next step (past empty segments too)
    for (; rt < last && rdone == length_of(steps[rt].recv_segment); ++rt) rdone = 0;
    for (; st < last && sdone == length_of(steps[st].send_segment); ++st) sdone = 0;
  };
  auto sendable = [&]() -> size_t {
    if (st >= last) return 0;
    if (st == 0 || rt >= st) return length_of(steps[st].send_segment);
    return rt + 1 == st ? rdone : 0;
  };
  auto from_text = [&] { return fmt::format("rank {} ({})", predecessor, predecessor_address_); };
  auto to_text = [&] { return fmt::format("rank {} ({})", successor, successor_address_); };

  // A neighbour's connection closed mid-call (`predecessor`: the one from the predecessor, else
  // the one to the successor), naming the other neighbour too when its connection has closed as
  // well: a failure goes round the ring, so a rank between two closed connections cannot tell
  // which neighbour stopped first (seen under a loaded ctest, 4 ranks).
  auto lost_neighbours = [&](bool from_predecessor) {
    std::array<pollfd, 2> q{};
    q[0] = {from_predecessor_, static_cast<short>(POLLRDHUP), 0};
    q[1] = {to_successor_, static_cast<short>(POLLRDHUP), 0};
    ::poll(q.data(), q.size(), 0);
    const bool before = from_predecessor || (q[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    const bool after = !from_predecessor || (q[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    int error = 0;
    socklen_t length = sizeof error;
    if (after) ::getsockopt(to_successor_, SOL_SOCKET, SO_ERROR, &error, &length);
    const std::string why = error != 0 ? " (" + errno_text(error) + ")" : "";
    if (before && after && predecessor != successor) {
      return fmt::format(
          "TCP all-reduce: the connections from {}, the predecessor of rank {}, and to {}, its successor, were "
          "closed mid-call{}: rank {} or rank {} stopped or failed (the other's connection closed after it)",
          from_text(), rank_, to_text(), why, predecessor, successor);
    }
    if (before) {
      return fmt::format(
          "TCP all-reduce: the connection from {}, the predecessor of rank {}, was closed mid-call: rank {} stopped "
          "or failed",
          from_text(), rank_, predecessor);
    }
    return fmt::format(
        "TCP all-reduce: the connection to {}, the successor of rank {}, was closed mid-call{}: rank {} stopped or "
        "failed",
        to_text(), rank_, why, successor);
  };

  const std::chrono::milliseconds idle = idle_limit();
  auto moved_at = Clock::now();
  settle();
  while (rt < last || st < last) {
    bool moved = false;
    if (rt < last) {
      const RingStep& step = steps[rt];
      const size_t at = begin_of(step.recv_segment) + rdone;
      const size_t this_piece = std::min(piece, length_of(step.recv_segment) - rdone);
      char* into = step.reduce ? scratch_.data() + rfill : data + at;
      const size_t want = step.reduce ? this_piece - rfill : length_of(step.recv_segment) - rdone;
      const ssize_t got = ::recv(from_predecessor_, into, want, MSG_DONTWAIT);
      if (got > 0) {
        moved = true;
        if (!step.reduce) {
          rdone += static_cast<size_t>(got);
        } else if ((rfill += static_cast<size_t>(got)) == this_piece) {
          reduce_into(data + at, scratch_.data(), this_piece / elem, type, op);
          rdone += this_piece;
          rfill = 0;
        }
      } else if (got == 0) {
        throw DistError(lost_neighbours(true));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw DistError(fmt::format("TCP all-reduce: receiving from {}, the predecessor of rank {}: {}", from_text(),
                                    rank_, errno_text(errno)));
      }
    }
    if (const size_t can = sendable(); can > sdone) {
      const size_t at = begin_of(steps[st].send_segment) + sdone;
      const ssize_t put = ::send(to_successor_, data + at, can - sdone, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (put > 0) {
        moved = true;
        sdone += static_cast<size_t>(put);
      } else if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        const int error = errno;
        throw DistError(fmt::format("TCP all-reduce: sending to {}, the successor of rank {}: {}{}", to_text(), rank_,
                                    errno_text(error),
                                    error == EPIPE || error == ECONNRESET ? " (it stopped or failed)" : ""));
      }
    }
    settle();
    if (moved) {
      moved_at = Clock::now();
      continue;
    }
    if (rt >= last && st >= last) break;

    // Nothing can move now: sleep in the kernel until something can. The successor never
    // writes: its socket turning readable means it closed or failed.
    std::array<pollfd, 2> p{};
    p[0] = {rt < last ? from_predecessor_ : -1, POLLIN, 0};
    p[1] = {st < last ? to_successor_ : -1, static_cast<short>(POLLRDHUP | (sendable() > sdone ? POLLOUT : 0)), 0};
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - moved_at);
    if (waited >= idle) {
      std::string waits;
      if (rt < last) waits = "data from " + from_text();
      if (sendable() > sdone) waits += (waits.empty() ? "" : " and ") + ("room to send to " + to_text());
      throw DistError(fmt::format("TCP all-reduce: nothing moved for {:.1f} s on rank {}, waiting for {}",
                                  static_cast<double>(waited.count()) / 1e3, rank_, waits));
    }
    if (::poll(p.data(), p.size(), static_cast<int>((idle - waited).count())) < 0 && errno != EINTR) {
      throw DistError("TCP all-reduce: poll: " + errno_text(errno));
    }
    if (p[1].fd >= 0 && (p[1].revents & (POLLRDHUP | POLLIN | POLLHUP | POLLERR)))
      throw DistError(lost_neighbours(false));
  }
}

}  // namespace ts::distributed
