#include "distributed/stall_watch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "distributed/mpi_check.h"
#include "profiler/tracer.h"

namespace ts::distributed {

namespace {

std::atomic<StallWatch*> g_active{nullptr};

constexpr int kQueryTag = 1;
constexpr int kReplyTag = 2;
constexpr int64_t kTickMs = 100;
// The longest answer (a rank's state with its flight record); longer ones lose their oldest calls.
constexpr size_t kMaxAnswer = 16384;
constexpr size_t kFlightRecord = 8;  // finished calls a rank keeps and tells
// The deadline's rule: ten times the longest iteration seen, at least 20 s; before the first
// iteration (building the model, loading data, the first step's allocations), at least 120 s.
constexpr int64_t kIterationFactor = 10;
constexpr int64_t kTrainingFloorMs = 20'000;
constexpr int64_t kStartingFloorMs = 120'000;
// A wait that goes on without a verdict is told (by the lowest rank that waits) this often.
constexpr int64_t kNoticeEveryMs = 30'000;
// After a verdict that nobody answered: how long the daemon that started this rank has to end
// before this rank's helper ends it.
constexpr time_t kDaemonGraceSeconds = 10;
// After the verdict: if MPI_Abort has not ended this rank (it can wait on a link that is down).
constexpr int kAbortGraceSeconds = 15;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string this_host() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

}  // namespace

// A question this rank asked every other rank, and their answers as they come.
struct StallWatch::Probe {
  int id = 0;
  uint64_t call = 0;  // the in-flight call it is about
  int64_t started_ms = 0;
  std::vector<MPI_Request> receives;  // by rank (this rank's: null)
  std::vector<std::array<char, kMaxAnswer>> buffers;
  std::vector<std::optional<RankState>> answers;
};

// A question or an answer on its way: its bytes stay until MPI has sent them.
struct StallWatch::Outgoing {
  std::string text;
  MPI_Request request = MPI_REQUEST_NULL;
};

StallWatch::StallWatch(MPI_Comm world, StallOptions options) : options_(std::move(options)) {
  TS_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  std::array<char, 64> mine{};
  const std::string host = this_host();
  std::copy_n(host.begin(), std::min(host.size(), mine.size() - 1), mine.begin());
  std::vector<char> all(mine.size() * static_cast<size_t>(size_));
  TS_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                             static_cast<int>(mine.size()), MPI_CHAR, comm_));
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(all.data() + static_cast<size_t>(r) * mine.size());
  last_iteration_change_ms_ = now_ms();
  TS_MPI_CHECK(MPI_Irecv(query_, sizeof query_, MPI_CHAR, MPI_ANY_SOURCE, kQueryTag, comm_, &query_request_));
  g_active.store(this);
  thread_ = std::thread([this] { loop(); });
}

StallWatch::~StallWatch() {
  g_active.store(nullptr);
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
  // The question nobody asked is cancelled; messages still on their way (to a rank that
  // stopped, say) get a second to go, then are left to MPI with their bytes, never freed under it.
  if (query_request_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_request_);
    MPI_Wait(&query_request_, MPI_STATUS_IGNORE);
  }
  if (probe_) {
    for (auto& r : probe_->receives) {
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
    }
  }
  for (int i = 0; i < 10 && !outgoing_.empty(); ++i) {
    send_progress();
    if (!outgoing_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(kTickMs));
  }
  for (auto& o : outgoing_) {
    MPI_Request_free(&o->request);
    (void)o.release();
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

StallWatch* StallWatch::active() { return g_active.load(); }

void StallWatch::set_phase(RunPhase phase) {
  if (StallWatch* w = active()) w->phase_.store(phase);
}

void StallWatch::set_on_stop(std::function<void(const std::string&)> on_stop) {
  std::lock_guard lock(mutex_);
  options_.on_stop = std::move(on_stop);
}

StallWatch::Call::Call(std::string_view channel, std::string_view what, std::string_view label, int peer)
    : watch_(active()) {
  if (watch_) id_ = watch_->begin_call(channel, what, label, peer);
}

StallWatch::Call::~Call() {
  if (watch_) watch_->end_call(id_);
}

uint64_t StallWatch::begin_call(std::string_view channel, std::string_view what, std::string_view label, int peer) {
  std::lock_guard lock(mutex_);
  Entry e;
  e.id = ++next_id_;
  e.call.channel = channel;
  e.call.what = what;
  e.call.label = label;
  e.call.seq = ++started_[e.call.channel];
  e.call.peer = peer;
  e.call.iteration = profiler::Tracer::global().iteration();
  e.start_ms = now_ms();
  in_flight_.push_back(std::move(e));
  return in_flight_.back().id;
}

void StallWatch::end_call(uint64_t id) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [&](const Entry& e) { return e.id == id; });
  if (it == in_flight_.end()) return;
  CallState done = std::move(it->call);
  done.waited_ms = now_ms() - it->start_ms;
  in_flight_.erase(it);
  int64_t& last = completed_[done.channel];
  last = std::max(last, done.seq);
  recent_.push_back(std::move(done));
  if (recent_.size() > kFlightRecord) recent_.pop_front();
}

RankState StallWatch::state() const {
  RankState s;
  s.rank = rank_;
  s.host = hosts_[static_cast<size_t>(rank_)];
  s.phase = phase_.load();
  s.iteration = profiler::Tracer::global().iteration();
  const int64_t now = now_ms();
  std::lock_guard lock(mutex_);
  for (const auto& e : in_flight_) {
    CallState c = e.call;
    c.waited_ms = now - e.start_ms;
    s.in_flight.push_back(std::move(c));
  }
  s.completed = completed_;
  s.recent.assign(recent_.begin(), recent_.end());
  return s;
}

int64_t StallWatch::probe_interval_ms(RunPhase phase) const {
  const int64_t deadline = deadline_ms(phase);
  return deadline > 0 ? std::clamp<int64_t>(deadline / 4, 1000, 5000) : 5000;
}

int64_t StallWatch::deadline_ms(RunPhase phase) const {
  if (options_.silence_only) return 0;
  if (options_.deadline.count() > 0) return options_.deadline.count();
  const int64_t measured = kIterationFactor * longest_iteration_ms_.load();
  const bool before_first = longest_iteration_ms_.load() == 0 || phase == RunPhase::starting;
  return std::max(measured, before_first ? kStartingFloorMs : kTrainingFloorMs);
}

void StallWatch::loop() {
  bool said = false;
  while (!quit_.load()) {
    try {
      answer_queries();
      track_iterations();
      watch_own_calls();
    } catch (const std::exception& e) {
      // The watch must not end the run it watches: it says so once and goes on.
      if (!said) fmt::print(stderr, "trainscope: rank {}: the stall watch: {}\n", rank_, e.what());
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kTickMs));
  }
}

void StallWatch::answer_queries() {
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    TS_MPI_CHECK(MPI_Test(&query_request_, &arrived, &status));
    if (!arrived) break;
    // The question's text is its number; the asker is the message's source.
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    const std::string number(query_, static_cast<size_t>(std::clamp(length, 0, static_cast<int>(sizeof query_))));
    RankState s = state();
    std::string text = number + "\n" + s.encode();
    while (text.size() > kMaxAnswer && !s.recent.empty()) {
      s.recent.erase(s.recent.begin());
      text = number + "\n" + s.encode();
    }
    text.resize(std::min(text.size(), kMaxAnswer));
    send(status.MPI_SOURCE, kReplyTag, std::move(text));
    TS_MPI_CHECK(MPI_Irecv(query_, sizeof query_, MPI_CHAR, MPI_ANY_SOURCE, kQueryTag, comm_, &query_request_));
  }
  send_progress();
}

void StallWatch::send(int to, int tag, std::string text) {
  auto o = std::make_unique<Outgoing>();
  o->text = std::move(text);
  TS_MPI_CHECK(MPI_Isend(o->text.data(), static_cast<int>(o->text.size()), MPI_CHAR, to, tag, comm_, &o->request));
  outgoing_.push_back(std::move(o));
}

void StallWatch::send_progress() {
  std::erase_if(outgoing_, [](const std::unique_ptr<Outgoing>& o) {
    int done = 0;
    MPI_Test(&o->request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

void StallWatch::track_iterations() {
  const int32_t it = profiler::Tracer::global().iteration();
  if (it == last_iteration_) return;
  const int64_t now = now_ms();
  if (last_iteration_ >= 0) {
    longest_iteration_ms_.store(std::max(longest_iteration_ms_.load(), now - last_iteration_change_ms_));
  }
  last_iteration_ = it;
  last_iteration_change_ms_ = now;
}

void StallWatch::watch_own_calls() {
  if (probe_) {
    conclude_probe();
    return;
  }
  Entry oldest;
  {
    std::lock_guard lock(mutex_);
    if (in_flight_.empty()) return;
    oldest = *std::min_element(in_flight_.begin(), in_flight_.end(),
                               [](const Entry& a, const Entry& b) { return a.start_ms < b.start_ms; });
  }
  if (oldest.id != probed_call_) {
    // A new wait: first asked about a quarter of the deadline in, at least 1 s, at most 5 s.
    probed_call_ = oldest.id;
    deferred_ = false;
    limit_probed_ = false;
    next_notice_at_ms_ = kNoticeEveryMs;
    next_probe_at_ms_ = probe_interval_ms(phase_.load());
  }
  // Past the job's time limit a call is asked about at once (then as any other).
  const bool limit_now = !limit_probed_ && past_limit();
  if (limit_now || now_ms() - oldest.start_ms >= next_probe_at_ms_) {
    limit_probed_ = limit_probed_ || limit_now;
    start_probe(oldest);
  }
}

bool StallWatch::past_limit() const {
  // Ending (the sweep over, rank 0 writing while the others wait for it), the limit has no say.
  return options_.limit_at && phase_.load() != RunPhase::ending &&
         std::chrono::steady_clock::now() >= *options_.limit_at;
}

void StallWatch::start_probe(const Entry& oldest) {
  auto p = std::make_unique<Probe>();
  p->id = ++next_probe_id_;
  p->call = oldest.id;
  p->started_ms = now_ms();
  const auto n = static_cast<size_t>(size_);
  p->receives.assign(n, MPI_REQUEST_NULL);
  p->buffers.resize(n);
  p->answers.resize(n);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto i = static_cast<size_t>(r);
    TS_MPI_CHECK(
        MPI_Irecv(p->buffers[i].data(), static_cast<int>(kMaxAnswer), MPI_CHAR, r, kReplyTag, comm_, &p->receives[i]));
    send(r, kQueryTag, std::to_string(p->id));
  }
  probe_ = std::move(p);
}

void StallWatch::conclude_probe() {
  Probe& p = *probe_;
  bool all = true;
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    if (r == rank_ || p.answers[i]) continue;
    int done = 0;
    MPI_Status status;
    // A link that failed makes the test fail: that rank cannot answer, as one that is silent.
    if (MPI_Test(&p.receives[i], &done, &status) != MPI_SUCCESS) done = 0;
    if (!done) {
      all = false;
      continue;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    const std::string_view text(p.buffers[i].data(), static_cast<size_t>(std::max(length, 0)));
    const size_t nl = text.find('\n');
    auto answer = RankState::decode(nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1));
    if (text.substr(0, nl) != std::to_string(p.id) || !answer) {
      // An answer to an earlier question (or garbled): wait for this one's.
      TS_MPI_CHECK(
          MPI_Irecv(p.buffers[i].data(), static_cast<int>(kMaxAnswer), MPI_CHAR, r, kReplyTag, comm_, &p.receives[i]));
      all = false;
      continue;
    }
    p.answers[i] = std::move(answer);
  }
  if (!all && now_ms() - p.started_ms < kAnswerWindowMs) return;

  std::vector<RankState> answered;
  std::vector<int> silent;
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    if (r == rank_) continue;
    if (p.answers[i]) {
      answered.push_back(*p.answers[i]);
    } else {
      silent.push_back(r);
      MPI_Cancel(&p.receives[i]);
      MPI_Wait(&p.receives[i], MPI_STATUS_IGNORE);
    }
  }
  const uint64_t call_id = p.call;
  probe_.reset();

  const RankState me = state();
  const RunPhase phase = me.phase;
  CallState call;
  {
    std::lock_guard lock(mutex_);
    const auto e = std::find_if(in_flight_.begin(), in_flight_.end(), [&](const Entry& x) { return x.id == call_id; });
    if (e == in_flight_.end()) return;  // the call ended while the others answered
    call = e->call;
    call.waited_ms = now_ms() - e->start_ms;
  }
  const int64_t probe_after = probe_interval_ms(phase);
  const StallVerdict v =
      judge_stall(me, call, answered, silent, hosts_, StallLimits{.deadline_ms = deadline_ms(phase)});
  // A lower rank that waits too tells the same story: it speaks (once per call, then this one does).
  const bool lower_waits = std::any_of(answered.begin(), answered.end(), [&](const RankState& s) {
    return s.rank < rank_ && std::any_of(s.in_flight.begin(), s.in_flight.end(),
                                         [&](const CallState& c) { return c.waited_ms >= probe_after; });
  });
  next_probe_at_ms_ = call.waited_ms + probe_after;
  const bool cut_off = static_cast<int>(silent.size()) == size_ - 1;  // nobody answered
  if (past_limit()) {
    // Out of time: the job stops whatever the verdict, from the lowest rank in a call (that rank
    // asks too); once deferred, from this one.
    const bool lower_in_call = std::any_of(answered.begin(), answered.end(),
                                           [&](const RankState& s) { return s.rank < rank_ && !s.in_flight.empty(); });
    if (!lower_in_call || deferred_)
      stop_job(fmt::format("{}{}; {}", kTimeoutWords, options_.limit_text, v.line), cut_off);
    deferred_ = true;
    return;
  }
  if (v.stop && (!lower_waits || deferred_)) stop_job(v.line, cut_off);
  if (v.stop) deferred_ = true;
  if (!v.stop && !lower_waits && call.waited_ms >= next_notice_at_ms_) {
    // Progress on a long wait, from one rank: whom it waits for and when it gives up.
    next_notice_at_ms_ = call.waited_ms + kNoticeEveryMs;
    const int64_t deadline = deadline_ms(phase);
    fmt::print(stderr, "trainscope: {}; still waiting (it stops the job if a rank stops answering{})\n", v.line,
               deadline > 0 ? ", or after " + seconds_text(deadline) + " for one that is starting or training" : "");
    std::fflush(stderr);
  }
}

namespace {

// The daemon that started this rank, when it is one of Open MPI's (orted, prted): the process
// that mpirun reaches a host through.
pid_t launch_daemon() {
  const pid_t parent = ::getppid();
  std::FILE* f = std::fopen(fmt::format("/proc/{}/comm", parent).c_str(), "r");
  if (!f) return 0;
  std::array<char, 64> name{};
  const bool read = std::fgets(name.data(), name.size(), f) != nullptr;
  std::fclose(f);
  const std::string_view comm(name.data());
  return read && (comm.starts_with("orted") || comm.starts_with("prted")) ? parent : 0;
}

// Whether /proc/PID/comm (at `comm_path`) still names Open MPI's daemon: the pid was not reused.
// Async-signal-safe (it runs after fork in a threaded process).
bool still_launch_daemon(const char* comm_path) {
  const int fd = ::open(comm_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[8] = {};
  const ssize_t n = ::read(fd, name, sizeof name);
  ::close(fd);
  return n >= 5 && (std::memcmp(name, "orted", 5) == 0 || std::memcmp(name, "prted", 5) == 0);
}

// A rank that nobody answers may be the one cut off (its host's link down): then mpirun cannot
// reach its daemon either, which would stay on this host for ever. A detached process ends the
// daemon if it is still there once mpirun has had time to end it (where mpirun can reach it, it
// has). After fork in a threaded process: only async-signal-safe calls.
void end_launch_daemon_later() {
  const pid_t daemon = launch_daemon();
  if (daemon <= 1) return;
  const std::string comm_path = fmt::format("/proc/{}/comm", daemon);
  if (::fork() != 0) return;
  ::setsid();  // out of the rank's process group, which the daemon may kill
  // Nothing of the rank's held open: its output pipes (the daemon counts a rank ended once they
  // close), its sockets, its files.
  for (int fd = 0; fd < 1024; ++fd) ::close(fd);
  const timespec wait{kDaemonGraceSeconds, 0}, term_grace{2, 0};
  ::nanosleep(&wait, nullptr);
  if (still_launch_daemon(comm_path.c_str()) && ::kill(daemon, SIGTERM) == 0) {
    ::nanosleep(&term_grace, nullptr);
    if (still_launch_daemon(comm_path.c_str())) ::kill(daemon, SIGKILL);
  }
  ::_exit(0);
}

}  // namespace

void StallWatch::stop_job(const std::string& line, bool cut_off) {
  std::string text = std::string(kStallLinePrefix) + line + "\n";
  const RankState me = state();
  text += fmt::format("trainscope:   rank {}'s last calls (its flight record):\n", rank_);
  for (const auto& c : me.recent)
    text += fmt::format("trainscope:     {} took {}\n", c.describe(), seconds_text(c.waited_ms));
  for (const auto& c : me.in_flight)
    text += fmt::format("trainscope:     {} waiting for {}\n", c.describe(), seconds_text(c.waited_ms));
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  std::function<void(const std::string&)> on_stop;
  {
    std::lock_guard lock(mutex_);
    on_stop = options_.on_stop;
  }
  if (on_stop) {
    try {
      on_stop(line);
    } catch (...) {  // the job stops whatever the record could take
    }
  }
  if (cut_off) end_launch_daemon_later();
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
    std::_Exit(1);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace ts::distributed
