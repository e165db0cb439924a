#include "distributed/launch.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "distributed/stall_watch.h"
#include "vocabulary/input_file.h"

namespace ts::distributed {

namespace {

int parse_slots(std::string_view text, std::string_view host) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n < 1 || n > 4096) {
    throw std::invalid_argument("host '" + std::string(host) + "': slots must be a whole number from 1 to 4096, not '" +
                                std::string(text) + "'");
  }
  return n;
}

void check_name(std::string_view host) {
  if (host.empty()) throw std::invalid_argument("an empty host name");
  if (host.size() > 253) throw std::invalid_argument("host name longer than 253 characters");
  for (char c : host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
    if (!ok)
      throw std::invalid_argument("host '" + std::string(host) +
                                  "': only letters, digits, '-', '_' and '.' are allowed");
  }
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

// `count` ranks filling the hosts' slots in order: one entry (the host) per rank, appended to `out`.
void fill_slots(const std::vector<HostSlots>& hosts, int count, std::vector<std::string>& out) {
  for (const auto& h : hosts) {
    for (int i = 0; i < h.slots && count > 0; ++i, --count) out.push_back(h.host);
  }
}

// This machine under any of its names (localhost, a loopback address, its host name) is one host.
std::string host_key(const std::string& host) {
  static const std::string self = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return std::string();
    return std::string(name);
  }();
  const bool loopback = host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "ip6-localhost";
  const bool self_name =
      !self.empty() && (host == self || self.rfind(host + ".", 0) == 0 || host.rfind(self + ".", 0) == 0);
  return loopback || self_name ? std::string("\0self", 5) : host;
}

int most_ranks_on_one_host(const std::vector<std::string>& rank_hosts) {
  std::map<std::string, int> per_host;
  int most = 0;
  for (const auto& h : rank_hosts) most = std::max(most, ++per_host[host_key(h)]);
  return most;
}

// A hostfile larger than this is not one (a device, a log named by mistake).
constexpr size_t kMaxHostfileBytes = 1 << 20;

// The longest --host argument given to mpirun: Linux refuses a single argument over 128 KiB.
constexpr size_t kMaxHostArgument = 120'000;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<HostSlots> parse_hosts(std::string_view spec) {
  std::vector<HostSlots> out;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view item = trim(spec.substr(start, comma - start));
    const size_t colon = item.find(':');
    HostSlots h;
    h.host = std::string(item.substr(0, colon));
    check_name(h.host);
    if (colon != std::string_view::npos) h.slots = parse_slots(item.substr(colon + 1), h.host);
    const auto same = std::find_if(out.begin(), out.end(), [&](const HostSlots& o) { return o.host == h.host; });
    if (same != out.end()) throw std::invalid_argument("host '" + h.host + "' is listed twice");
    out.push_back(std::move(h));
    start = comma + 1;
  }
  return out;
}

std::vector<HostSlots> read_hostfile(const std::filesystem::path& path) {
  std::istringstream in(vocabulary::read_input_file(path, "hostfile", kMaxHostfileBytes));
  std::vector<HostSlots> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string_view l = line;
    l = trim(l.substr(0, l.find('#')));
    if (l.empty()) continue;
    try {
      std::istringstream words{std::string(l)};
      std::string host, extra;
      words >> host;
      HostSlots h;
      if (const size_t colon = host.find(':'); colon != std::string::npos) {
        h.slots = parse_slots(std::string_view(host).substr(colon + 1), host.substr(0, colon));
        host.resize(colon);
      }
      check_name(host);
      h.host = host;
      while (words >> extra) {
        if (extra.rfind("slots=", 0) == 0) h.slots = parse_slots(std::string_view(extra).substr(6), host);
        else if (extra.rfind("max_slots=", 0) != 0) throw std::invalid_argument("unknown field '" + extra + "'");
      }
      for (const auto& o : out) {
        if (o.host == h.host) throw std::invalid_argument("host '" + h.host + "' is listed twice");
      }
      out.push_back(std::move(h));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(path.string() + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  if (out.empty()) throw std::invalid_argument("hostfile '" + path.string() + "' names no host");
  return out;
}

void check_hosts_resolve(const std::vector<HostSlots>& hosts) {
  for (const auto& h : hosts) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(h.host.c_str(), nullptr, &hints, &res);
    if (res) ::freeaddrinfo(res);
    if (rc != 0) throw std::invalid_argument("unknown host '" + h.host + "': " + ::gai_strerror(rc));
  }
}

namespace {

// The executable `name` in a folder of PATH; empty when there is none.
std::filesystem::path on_path(const char* name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (!dirs.empty()) {
    const size_t colon = std::min(dirs.find(':'), dirs.size());
    const std::filesystem::path candidate = std::filesystem::path(std::string(dirs.substr(0, colon))) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    dirs.remove_prefix(std::min(colon + 1, dirs.size()));
  }
  return {};
}

// Whether `host` names this machine.
bool is_this_machine(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 && host == name;
}

}  // namespace

std::filesystem::path find_mpirun() {
  if (const char* forced = std::getenv("TS_MPIRUN"); forced && *forced) {
    if (::access(forced, X_OK) == 0) return forced;
    throw std::invalid_argument(std::string("TS_MPIRUN='") + forced + "' is not an executable");
  }
  if (auto found = on_path("mpirun"); !found.empty()) return found;
  throw std::invalid_argument(
      "--nproc needs OpenMPI's mpirun, which is not on PATH (Debian: apt-get install openmpi-bin libopenmpi-dev; "
      "scripts/setup installs it)");
}

std::vector<std::pair<std::string, std::string>> default_mca() {
  return {
      // When a rank dies, mpirun sends the others SIGCONT, waits this long, sends SIGTERM, waits
      // this long again and sends SIGKILL: the survivors, stuck in a collective, get SIGTERM
      // 5 s after the death and give up 4 s later (cli/interrupts.h), marking the run failed.
      {"odls_base_sigkill_timeout", "5"},
      // TCP between processes (and hosts); shared memory between local ranks.
      {"btl", "self,vader,tcp"},
      // Two sockets per peer: with one, OpenMPI's TCP path moves half the rate each way when
      // both ways are busy, as in every all-reduce (busbw ~50% of the link; with two, >90%).
      {"btl_tcp_links", "2"},
      // Waiting ranks yield the core: on few cores their polling starved the kernel's network work.
      {"mpi_yield_when_idle", "1"},
  };
}

LaunchPlan plan_launch(const LaunchRequest& r) {
  LaunchPlan plan;
  if (r.servers < 0) throw std::invalid_argument("--servers must be at least 1");
  if (!r.server_hosts.empty() && !(r.dedicated_servers && r.servers > 0)) {
    throw std::invalid_argument("--server-hosts places dedicated parameter servers: it needs --strategy ps");
  }
  const int slots = total_slots(r.hosts);
  const int dedicated = r.dedicated_servers ? r.servers : 0;
  // Dedicated servers without hosts of their own take the hosts' slots after the workers.
  const bool servers_share_slots = dedicated > 0 && r.server_hosts.empty();
  if (r.nproc > 0) {
    plan.workers = r.nproc;
  } else if (!r.hosts.empty()) {
    plan.workers = slots - (servers_share_slots ? dedicated : 0);
    if (plan.workers < 1) {
      throw std::invalid_argument("the hosts' " + std::to_string(slots) + " slots leave no worker beside the " +
                                  std::to_string(dedicated) + " dedicated server" + (dedicated == 1 ? "" : "s") +
                                  " (give the servers --server-hosts, or the hosts more slots)");
    }
  }
  if (plan.workers < 1) throw std::invalid_argument("--nproc must be at least 1");
  if (r.servers > 0 && !r.dedicated_servers && r.servers > plan.workers) {
    throw std::invalid_argument("--servers " + std::to_string(r.servers) +
                                " asks for more co-located servers than there are workers (" +
                                std::to_string(plan.workers) +
                                "): each server runs beside one worker; use fewer servers, more workers or "
                                "--dedicated-servers");
  }
  plan.servers = dedicated;
  plan.nproc = plan.workers + plan.servers;
  if (!r.hosts.empty()) {
    if (servers_share_slots && plan.nproc > slots) {
      throw std::invalid_argument("--nproc " + std::to_string(plan.workers) + " and " + std::to_string(dedicated) +
                                  " dedicated server" + (dedicated == 1 ? "" : "s") + " ask for " +
                                  std::to_string(plan.nproc) + " ranks, more than the hosts offer (" +
                                  std::to_string(slots) + " slots; --server-hosts places the servers elsewhere)");
    }
    if (plan.workers > slots) {
      throw std::invalid_argument("--nproc " + std::to_string(plan.workers) +
                                  " asks for more ranks than the hosts offer (" + std::to_string(slots) + " slots)");
    }
  }
  if (!r.server_hosts.empty() && dedicated > total_slots(r.server_hosts)) {
    throw std::invalid_argument("--servers " + std::to_string(dedicated) +
                                " asks for more servers than --server-hosts offer (" +
                                std::to_string(total_slots(r.server_hosts)) + " slots)");
  }
  if (!r.server_hosts.empty()) {
    // Every rank's host, in rank order: the workers fill the hosts' slots (this machine without
    // hosts), the servers the server hosts'. A host in both lists holds both.
    if (r.hosts.empty()) {
      plan.rank_hosts.assign(static_cast<size_t>(plan.workers), "localhost");
    } else {
      fill_slots(r.hosts, plan.workers, plan.rank_hosts);
    }
    fill_slots(r.server_hosts, plan.servers, plan.rank_hosts);
    plan.ranks_per_host = most_ranks_on_one_host(plan.rank_hosts);
  } else if (r.hosts.empty()) {
    plan.ranks_per_host = plan.nproc;
  } else {  // mpirun fills each host's slots in order
    std::vector<std::string> placed;
    fill_slots(r.hosts, plan.nproc, placed);
    plan.ranks_per_host = most_ranks_on_one_host(placed);
  }
  plan.argv.push_back(find_mpirun().string());
  plan.argv.insert(plan.argv.end(), {"-np", std::to_string(plan.nproc)});
  if (::geteuid() == 0) plan.argv.push_back("--allow-run-as-root");  // OpenMPI refuses root otherwise
  // OpenMPI binds each rank to one core when np <= 2: a rank's OpenMP threads would share it.
  plan.argv.insert(plan.argv.end(), {"--bind-to", "none"});
  if (!plan.rank_hosts.empty()) {
    // Exact placement: OpenMPI's sequential mapper puts rank i on the i-th host of the --host
    // list, whose repeats are that host's slots (its by-slot mapper would start with mpirun's own
    // host and merge a host named twice). In this form (not a hostfile) it also knows localhost.
    std::string spec;
    for (const auto& h : plan.rank_hosts) spec += (spec.empty() ? "" : ",") + h;
    if (spec.size() > kMaxHostArgument) {
      throw std::invalid_argument(
          "the placement of " + std::to_string(plan.nproc) + " ranks on their hosts is longer (" +
          std::to_string(spec.size()) +
          " characters) than one mpirun argument may be: use fewer ranks or shorter host names");
    }
    plan.argv.insert(plan.argv.end(), {"--map-by", "seq", "--host", spec});
  } else if (r.hosts.empty()) {
    plan.argv.push_back("--oversubscribe");  // more local ranks than cores is the user's call
  } else {
    std::string spec;
    for (const auto& h : r.hosts) spec += (spec.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
    plan.argv.insert(plan.argv.end(), {"--host", spec});
  }
  auto mca = default_mca();
  if (!r.rsh_agent.empty()) mca.emplace_back("plm_rsh_agent", r.rsh_agent);
  // OpenMPI picks its ssh/rsh launcher even when every rank runs here, and that launcher stops
  // the job when neither ssh nor rsh is installed (containers, the lent GPU machine): ranks on
  // this machine alone are started by its single-machine launcher instead.
  const auto here = [](const HostSlots& h) { return is_this_machine(h.host); };
  const bool this_machine_only = std::all_of(r.hosts.begin(), r.hosts.end(), here) &&
                                 std::all_of(r.server_hosts.begin(), r.server_hosts.end(), here);
  if (this_machine_only && r.rsh_agent.empty() && on_path("ssh").empty() && on_path("rsh").empty()) {
    mca.emplace_back("plm", "isolated");
  }
  if (!r.network.empty()) {
    mca.emplace_back("oob_tcp_if_include", r.network);
    mca.emplace_back("btl_tcp_if_include", r.network);
  }
  for (const auto& m : r.mca) {
    const auto same = std::find_if(mca.begin(), mca.end(), [&](const auto& o) { return o.first == m.first; });
    if (same != mca.end()) same->second = m.second;
    else mca.push_back(m);
  }
  for (const auto& [k, v] : mca) plan.argv.insert(plan.argv.end(), {"--mca", k, v});
  for (const auto& [k, v] : r.env) plan.argv.insert(plan.argv.end(), {"-x", k + "=" + v});
  plan.argv.push_back(r.executable.string());
  plan.argv.insert(plan.argv.end(), r.rank_args.begin(), r.rank_args.end());
  return plan;
}

namespace {

// What the sentinel does once the launcher is gone: the relayed stop every rank takes after its
// step (mpirun passes SIGUSR1 on); past a rank's own deadline after such a stop
// (kRankStopDeadlines.requested, 60 s) and some, mpirun's SIGTERM, on which it ends the ranks;
// 10 s later, SIGKILL to mpirun's whole process group.
constexpr int kSentinelStopGraceSeconds = 75;
constexpr int kSentinelTermGraceSeconds = 10;

// Whether `pid` is still there, polled every 100 ms for up to `seconds`.
bool still_there_after(pid_t pid, int seconds) {
  const timespec tick{0, 100'000'000};
  for (int i = 0; i < seconds * 10; ++i) {
    if (::kill(pid, 0) != 0) return false;
    ::nanosleep(&tick, nullptr);
  }
  return ::kill(pid, 0) == 0;
}

// The sentinel: a forked process that holds the read end of a pipe whose only write end is the
// launcher's. The launcher writes a byte once mpirun has ended; end of file without it means the
// launcher died (kill -9, a CI runner's cancel), and the job must not outlive it (issue 39).
// After fork in a threaded process: only async-signal-safe calls.
[[noreturn]] void watch_launcher(int read_end, pid_t mpirun) {
  char byte = 0;
  ssize_t n = 0;
  while ((n = ::read(read_end, &byte, 1)) < 0 && errno == EINTR) {
  }
  if (n == 1) ::_exit(0);
  ::kill(mpirun, SIGUSR1);
  if (still_there_after(mpirun, kSentinelStopGraceSeconds)) {
    ::kill(mpirun, SIGTERM);
    if (still_there_after(mpirun, kSentinelTermGraceSeconds)) ::kill(-mpirun, SIGKILL);
  }
  ::_exit(0);
}

// After a rank's stall verdict, mpirun has this long to end the job (MPI_Abort: about 8 s, its
// kill sequence included), then SIGKILL to its process group: a link that is down can keep it
// waiting for the far host's daemon (a SIGTERM then only crashes it: it is already aborting).
constexpr int64_t kVerdictGraceMs = 15'000;

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Copies mpirun's stderr to ours as it comes (a terminal, a log that fails: the copy goes on, so
// mpirun never blocks on it), picking out a rank's stall verdict, until mpirun has ended
// (`ended`) and nothing more comes.
void relay_stderr(int from, pid_t mpirun, const std::atomic<bool>& ended, std::string& stall_line) {
  std::string line;
  int64_t verdict_at = -1;
  bool killed = false;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    pollfd p{from, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (ready > 0) {
      const ssize_t n = ::read(from, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(STDERR_FILENO, buffer.data() + done, static_cast<size_t>(n - done));
        if (w <= 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
      for (ssize_t i = 0; i < n; ++i) {
        const char c = buffer[static_cast<size_t>(i)];
        if (c != '\n') {
          if (line.size() < 65'536) line.push_back(c);
          continue;
        }
        if (stall_line.empty() && line.starts_with(kStallLinePrefix)) {
          stall_line = line.substr(kStallLinePrefix.size());
          verdict_at = steady_ms();
        }
        line.clear();
      }
    } else if (ended.load()) {
      break;
    }
    if (verdict_at >= 0 && !killed && !ended.load() && steady_ms() - verdict_at > kVerdictGraceMs) {
      ::kill(-mpirun, SIGKILL);
      killed = true;
    }
  }
}

}  // namespace

LaunchEnd run_launch(const LaunchPlan& plan, const std::function<void(pid_t)>& running) {
  std::vector<char*> argv;
  for (const auto& a : plan.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The sentinel's pipe: close-on-exec, so mpirun and the ranks never hold the write end.
  int pipe_ends[2] = {-1, -1}, err_ends[2] = {-1, -1};
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot start mpirun's sentinel: ") + std::strerror(errno));
  }
  if (::pipe2(err_ends, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(pipe_ends[0]);
    ::close(pipe_ends[1]);
    throw std::runtime_error(std::string("cannot relay mpirun's messages: ") + std::strerror(error));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    for (int fd : {pipe_ends[0], pipe_ends[1], err_ends[0], err_ends[1]}) ::close(fd);
    throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(error));
  }
  if (pid == 0) {
    ::dup2(err_ends[1], STDERR_FILENO);  // the copy is not close-on-exec
    // Its own process group: a terminal's Ctrl-C reaches the launcher alone, which relays it
    // (mpirun's own answer to SIGINT is to kill the ranks). No stdin: mpirun would forward the
    // terminal to rank 0, and a background group reading the terminal is stopped.
    ::setpgid(0, 0);
    if (const int null = ::open("/dev/null", O_RDONLY); null >= 0) ::dup2(null, STDIN_FILENO);
    // The caller may have SIGINT/SIGTERM blocked (the cli's interrupt thread): mpirun must not.
    sigset_t all;
    sigemptyset(&all);
    sigaddset(&all, SIGINT);
    sigaddset(&all, SIGTERM);
    sigaddset(&all, SIGUSR1);
    sigaddset(&all, SIGHUP);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "trainscope: cannot run %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists for the sentinel
  ::close(err_ends[1]);
  // The job follows its launcher: a sentinel in mpirun's process group (so a signal to the
  // launcher's group spares it) stops the job if the launcher dies.
  const pid_t sentinel = ::fork();
  if (sentinel == 0) {
    ::close(pipe_ends[1]);
    ::close(err_ends[0]);
    ::setpgid(0, pid);
    watch_launcher(pipe_ends[0], pid);
  }
  ::close(pipe_ends[0]);
  LaunchEnd end;
  std::atomic<bool> mpirun_ended{false};
  std::thread relay([&] { relay_stderr(err_ends[0], pid, mpirun_ended, end.stall_line); });
  if (running) running(pid);
  // mpirun's end, seen without reaping it (WNOWAIT): until it is reaped its pid cannot name
  // another process, so neither the sentinel nor the relay ever signals a stranger.
  siginfo_t ended{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  mpirun_ended.store(true);
  relay.join();
  ::close(err_ends[0]);
  if (running) running(0);
  // The sentinel's byte (it ends), then mpirun is reaped.
  const char done = 1;
  while (::write(pipe_ends[1], &done, 1) < 0 && errno == EINTR) {
  }
  ::close(pipe_ends[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (sentinel > 0) {
    while (::waitpid(sentinel, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  end.status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  return end;
}

}  // namespace ts::distributed
