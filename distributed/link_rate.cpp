#include "distributed/link_rate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace ts::distributed {

namespace {

constexpr int kConnectTimeoutMs = 2000;  // per address
constexpr int kReadTimeoutMs = 5000;     // the longest the receiver waits for the next bytes
constexpr size_t kChunk = 1 << 20;       // bytes per send
constexpr size_t kMessage = 512;         // the fixed size of what the two ranks tell each other

// A socket closed on every path out.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string errno_text() { return std::strerror(errno); }

// This host's IPv4 addresses that are up, loopback last (ranks on one host reach it there).
std::vector<std::string> local_addresses() {
  std::vector<std::string> out, loopback;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    std::array<char, INET_ADDRSTRLEN> text{};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (!::inet_ntop(AF_INET, &in->sin_addr, text.data(), text.size())) continue;
    (std::string_view(text.data()).starts_with("127.") ? loopback : out).emplace_back(text.data());
  }
  ::freeifaddrs(list);
  out.insert(out.end(), loopback.begin(), loopback.end());
  return out;
}

// A fixed-size text from rank `root` to every rank.
std::string share(Communicator& comm, int root, const std::string& text) {
  std::array<char, kMessage> buffer{};
  if (comm.rank() == root) std::copy_n(text.begin(), std::min(text.size(), kMessage - 1), buffer.begin());
  comm.broadcast(buffer.data(), buffer.size(), DataType::u8, root, "tcp rate");
  return std::string(buffer.data());
}

// Connects to `ip`:`port` within kConnectTimeoutMs; -1 (errno kept) when it does not.
int connect_within(const std::string& ip, int port) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof error;
    if (::poll(&p, 1, kConnectTimeoutMs) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 ||
        error != 0) {
      ::close(fd);
      errno = error != 0 ? error : ETIMEDOUT;
      return -1;
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // blocking sends from here
  return fd;
}

// The sender: connects to one of `addresses` and sends for `duration`. "ok ADDRESS" or why not.
std::string send_stream(const std::vector<std::string>& addresses, int port, std::chrono::milliseconds duration) {
  Fd fd;
  std::string address, failures;
  for (const auto& ip : addresses) {
    fd.reset(connect_within(ip, port));
    if (fd.get() >= 0) {
      address = fmt::format("{}:{}", ip, port);
      break;
    }
    failures += fmt::format("{}{}: {}", failures.empty() ? "" : ", ", ip, errno_text());
  }
  if (fd.get() < 0) return "no connection to the receiving rank's host (" + failures + ")";
  const std::vector<char> chunk(kChunk, 'x');
  const int64_t end = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  timeval limit{kReadTimeoutMs / 1000, 0};  // a send that cannot go on gives up as a read would
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  while (now_ns() < end) {
    const ssize_t n = ::send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR) return "sending to " + address + ": " + errno_text();
  }
  ::shutdown(fd.get(), SHUT_WR);
  return "ok " + address;
}

}  // namespace

std::string LinkRate::describe() const {
  if (!measured) return fmt::format("rank {} -> rank {}: not measured ({})", from, to, why_not);
  return fmt::format("rank {} -> rank {} ({}): {:.1f} MB in {:.2f} s, {:.3f} GB/s", from, to, address,
                     static_cast<double>(bytes) / 1e6, static_cast<double>(ns) / 1e9, gbps);
}

LinkRate measure_tcp_rate(Communicator& comm, int from, int to, std::chrono::milliseconds duration) {
  if (from == to || from < 0 || to < 0 || from >= comm.size() || to >= comm.size())
    throw std::invalid_argument("measure_tcp_rate: two different ranks of the communicator");
  LinkRate r;
  r.from = from;
  r.to = to;
  const int me = comm.rank();

  // The receiver listens on a port of its own choosing and says where.
  Fd listener;
  std::string where;
  if (me == to) {
    listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof any;
    if (listener.get() < 0 || ::bind(listener.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0 ||
        ::listen(listener.get(), 1) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&any), &length) != 0) {
      where = "error cannot listen: " + errno_text();
    } else {
      where = std::to_string(ntohs(any.sin_port));
      for (const auto& ip : local_addresses()) where += " " + ip;
    }
  }
  where = share(comm, to, where);
  if (where.starts_with("error ")) {
    r.why_not = "the receiving rank " + where.substr(6);
    return r;
  }
  std::vector<std::string> words;
  for (size_t at = 0; at < where.size();) {
    const size_t space = std::min(where.find(' ', at), where.size());
    words.push_back(where.substr(at, space - at));
    at = space + 1;
  }
  const int port = std::stoi(words.at(0));
  const std::vector<std::string> addresses(words.begin() + 1, words.end());

  std::string sent, received;
  if (me == from) sent = send_stream(addresses, port, duration);
  if (me == to) {
    // Accept within every address's connect time, then read until the stream ends.
    const int accept_ms = kConnectTimeoutMs * static_cast<int>(std::max<size_t>(addresses.size(), 1)) + 1000;
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, accept_ms) != 1) {
      received = "error no connection came";
    } else {
      Fd stream(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      std::vector<char> buffer(kChunk);
      int64_t bytes = 0, first = 0, last = 0;
      std::string error;
      for (;;) {
        pollfd q{stream.get(), POLLIN, 0};
        if (::poll(&q, 1, kReadTimeoutMs) != 1) {
          error = "the stream stopped for 5 s";
          break;
        }
        const ssize_t n = ::recv(stream.get(), buffer.data(), buffer.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          error = "reading: " + errno_text();
          break;
        }
        if (n == 0) break;  // the end of the stream
        // The first read's bytes arrived before the clock starts: they are not counted.
        if (first == 0) {
          first = now_ns();
        } else {
          bytes += n;
        }
        last = now_ns();
      }
      received = error.empty() ? fmt::format("{} {}", bytes, last - first) : "error " + error;
    }
  }
  sent = share(comm, from, sent);
  received = share(comm, to, received);
  if (!sent.starts_with("ok ")) {
    r.why_not = sent;
    return r;
  }
  r.address = sent.substr(3);
  if (received.starts_with("error ")) {
    r.why_not = received.substr(6);
    return r;
  }
  int64_t bytes = 0, ns = 0;
  if (std::sscanf(received.c_str(), "%ld %ld", &bytes, &ns) != 2 || ns <= 0) {
    r.why_not = "too little data arrived to time";
    return r;
  }
  r.measured = true;
  r.bytes = bytes;
  r.ns = ns;
  r.gbps = static_cast<double>(bytes) / static_cast<double>(ns);
  return r;
}

}  // namespace ts::distributed
