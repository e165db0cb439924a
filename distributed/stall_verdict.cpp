#include "distributed/stall_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace ts::distributed {

namespace {

// The encoding: one record per line, fields separated by tabs; tabs and line ends in labels
// are replaced by spaces (labels are ours: "bucket 3", "key 12").
constexpr char kField = '\t';

std::string clean(std::string_view s) {
  std::string out(s);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool number(std::string_view s, int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

std::string encode_call(char tag, const CallState& c) {
  return fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", tag, clean(c.channel), clean(c.what), c.seq, c.peer,
                     c.iteration, c.waited_ms, clean(c.label));
}

bool decode_call(const std::vector<std::string_view>& f, CallState& c) {
  int64_t seq = 0, peer = 0, iteration = 0, waited = 0;
  if (f.size() != 8 || !number(f[3], seq) || !number(f[4], peer) || !number(f[5], iteration) || !number(f[6], waited)) {
    return false;
  }
  c.channel = f[1];
  c.what = f[2];
  c.seq = seq;
  c.peer = static_cast<int>(peer);
  c.iteration = static_cast<int32_t>(iteration);
  c.waited_ms = waited;
  c.label = f[7];
  return true;
}

std::string rank_name(int rank, const std::vector<std::string>& hosts) {
  const auto r = static_cast<size_t>(rank);
  return r < hosts.size() && !hosts[r].empty() ? fmt::format("rank {} ({})", rank, hosts[r])
                                               : fmt::format("rank {}", rank);
}

bool has_deadline(RunPhase p) { return p == RunPhase::starting || p == RunPhase::training; }

// Whether `s` has reached `call` (a collective every rank makes): it is in it, or past it.
bool reached(const RankState& s, const CallState& call) {
  for (const auto& c : s.in_flight) {
    if (c.channel == call.channel && c.seq == call.seq) return true;
  }
  const auto done = s.completed.find(call.channel);
  return done != s.completed.end() && done->second >= call.seq;
}

}  // namespace

std::string_view to_string(RunPhase p) {
  switch (p) {
    case RunPhase::starting: return "starting";
    case RunPhase::training: return "training";
    case RunPhase::evaluating: return "evaluating";
    case RunPhase::ending: return "ending";
  }
  return "starting";
}

std::string seconds_text(int64_t ms) {
  return ms < 1000 ? fmt::format("{} ms", ms) : fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

std::string CallState::describe() const {
  std::string s = fmt::format("{} {} #{}", channel, what, seq);
  if (!label.empty()) s += fmt::format(" '{}'", label);
  if (iteration >= 0) s += fmt::format(" (iteration {})", iteration);
  return s;
}

std::string RankState::encode() const {
  std::string out = fmt::format("R\t{}\t{}\t{}\t{}\n", rank, clean(host), to_string(phase), iteration);
  for (const auto& c : in_flight) out += encode_call('C', c);
  for (const auto& [channel, seq] : completed) out += fmt::format("D\t{}\t{}\n", clean(channel), seq);
  for (const auto& c : recent) out += encode_call('H', c);
  return out;
}

std::optional<RankState> RankState::decode(std::string_view text) {
  RankState s;
  bool head = false;
  for (const auto line : split(text, '\n')) {
    if (line.empty()) continue;
    const auto f = split(line, kField);
    if (f[0] == "R") {
      int64_t rank = 0, iteration = 0;
      if (f.size() != 5 || !number(f[1], rank) || !number(f[4], iteration)) return std::nullopt;
      s.rank = static_cast<int>(rank);
      s.host = f[2];
      s.iteration = static_cast<int32_t>(iteration);
      bool known = false;
      for (const RunPhase p : {RunPhase::starting, RunPhase::training, RunPhase::evaluating, RunPhase::ending}) {
        if (f[3] == to_string(p)) s.phase = p, known = true;
      }
      if (!known) return std::nullopt;
      head = true;
    } else if (f[0] == "C" || f[0] == "H") {
      CallState c;
      if (!decode_call(f, c)) return std::nullopt;
      (f[0] == "C" ? s.in_flight : s.recent).push_back(std::move(c));
    } else if (f[0] == "D") {
      int64_t seq = 0;
      if (f.size() != 3 || !number(f[2], seq)) return std::nullopt;
      s.completed[std::string(f[1])] = seq;
    } else {
      return std::nullopt;
    }
  }
  if (!head) return std::nullopt;
  return s;
}

std::string RankState::summary() const {
  std::string s(to_string(phase));
  if (iteration >= 0) s += fmt::format(", iteration {}", iteration);
  if (in_flight.empty()) return s + ", in no exchange";
  for (const auto& c : in_flight) s += fmt::format(", in {} for {}", c.describe(), seconds_text(c.waited_ms));
  return s;
}

StallVerdict judge_stall(const RankState& me, const CallState& call, const std::vector<RankState>& answered,
                         const std::vector<int>& silent, const std::vector<std::string>& hosts,
                         const StallLimits& limits) {
  StallVerdict v;
  const std::string head =
      fmt::format("{} has waited {} in {}", rank_name(me.rank, hosts), seconds_text(call.waited_ms), call.describe());
  std::vector<std::string> others;  // what every rank that answered was doing
  for (const auto& s : answered) others.push_back(fmt::format("{}: {}", rank_name(s.rank, hosts), s.summary()));
  if (!silent.empty()) {
    std::vector<std::string> names;
    for (int r : silent) names.push_back(rank_name(r, hosts));
    v.stop = true;
    v.line = fmt::format("{}: {} {} within {} (stopped, dead, cut off, or behind a link at a crawl)", head,
                         fmt::join(names, ", "), silent.size() == 1 ? "does not answer" : "do not answer",
                         seconds_text(kAnswerWindowMs));
    if (!others.empty()) v.line += fmt::format("; {}", fmt::join(others, "; "));
    return v;
  }
  // Everyone answered: whom the call waits for.
  std::vector<const RankState*> holders;
  for (const auto& s : answered) {
    const bool holds = call.peer >= 0 ? s.rank == call.peer : call.peer == kEveryRank && !reached(s, call);
    if (holds) holders.push_back(&s);
  }
  const bool past_deadline = limits.deadline_ms > 0 && call.waited_ms >= limits.deadline_ms;
  if (!holders.empty()) {
    std::vector<std::string> held;
    for (const auto* h : holders) {
      std::string last;
      if (const auto done = h->completed.find(call.channel); call.peer == kEveryRank && done != h->completed.end())
        last = fmt::format(" (its last {} call: #{})", call.channel, done->second);
      held.push_back(fmt::format("{}, {}{}", rank_name(h->rank, hosts), h->summary(), last));
    }
    v.stop = past_deadline &&
             std::any_of(holders.begin(), holders.end(), [](const RankState* h) { return has_deadline(h->phase); });
    v.line = fmt::format("{}: waiting for {}", head, fmt::join(held, "; "));
    if (v.stop)
      v.line += fmt::format(", alive but not arriving within the deadline ({})", seconds_text(limits.deadline_ms));
    return v;
  }
  if (call.peer == kEveryRank) {
    v.stop = past_deadline;
    v.line = fmt::format("{}: every rank is in it, the data is not moving (a link down or at a crawl?)", head);
  } else {
    // A wait on some rank (a parameter server's answers, the workers' barrier): while a rank
    // works outside any exchange (an asynchronous worker still training), the wait may be long.
    const bool all_wait =
        std::all_of(answered.begin(), answered.end(), [](const RankState& s) { return !s.in_flight.empty(); });
    // A rank whose call is with this one (a large message on its way to it) is not stuck elsewhere.
    const bool talking_to_me = std::any_of(answered.begin(), answered.end(), [&](const RankState& s) {
      return std::any_of(s.in_flight.begin(), s.in_flight.end(), [&](const CallState& c) { return c.peer == me.rank; });
    });
    v.stop = past_deadline && all_wait && !talking_to_me;
    v.line = fmt::format("{}: {}", head,
                         talking_to_me ? "a rank's exchange with it goes on"
                         : all_wait    ? "every rank waits, none sends what the others wait for"
                                       : "the ranks it may wait for answer");
    if (!others.empty()) v.line += fmt::format("; {}", fmt::join(others, "; "));
  }
  if (v.stop) v.line += fmt::format(" (deadline {})", seconds_text(limits.deadline_ms));
  return v;
}

}  // namespace ts::distributed
