#pragma once
// What a rank says when another rank that waits asks it (stall_watch.h), and the verdict on a
// wait drawn from the answers: who holds the job up, and whether to stop it. Pure: no MPI, no
// clock, so every case is a unit test.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts::distributed {

// Whom a blocking call waits for.
constexpr int kEveryRank = -1;  // a collective every rank takes part in
constexpr int kSomeRank = -2;   // a message from one of several ranks, or a collective of some ranks

// How long a rank that asks waits for the others' answers (a live rank's watch answers within
// 100 ms; a link at a crawl may hold the answer behind the data queued before it).
constexpr int64_t kAnswerWindowMs = 5000;

// What a rank is doing (its phase, as the run session sets it).
enum class RunPhase { starting, training, evaluating, ending };
std::string_view to_string(RunPhase);

// One blocking call, as the rank making it reports it.
struct CallState {
  std::string channel;  // "gradients", "control", "ps", "records", ...
  std::string what;     // "all_reduce", "barrier", "pull wait", ...
  std::string label;    // what it carried: "bucket 3", "stop flag", "key 12", ...
  int64_t seq = 0;      // its number among the channel's calls (the same on every rank for a collective)
  int peer = kEveryRank;
  int32_t iteration = -1;
  int64_t waited_ms = 0;  // so far (in flight) or in all (done)

  std::string describe() const;  // "gradients all_reduce #231 'bucket 3' (iteration 12)"
};

// A rank's answer: where it is, what it waits in, the calls it finished last.
struct RankState {
  int rank = 0;
  std::string host;
  RunPhase phase = RunPhase::starting;
  int32_t iteration = -1;
  std::vector<CallState> in_flight;
  std::map<std::string, int64_t> completed;  // per channel: the highest call number finished
  std::vector<CallState> recent;             // its flight record: the last calls it finished, oldest first

  std::string encode() const;
  // nullopt when `text` is not what encode() writes.
  static std::optional<RankState> decode(std::string_view text);
  // "training, iteration 12, in control all_reduce #57 'stop flag' for 3.1 s" / "..., computing".
  std::string summary() const;
};

struct StallLimits {
  // How long a rank that answers may keep the others waiting; 0: no limit (it is alive and
  // doing something else, as rank 0 writing the results while the others wait to end).
  int64_t deadline_ms = 0;
};

struct StallVerdict {
  bool stop = false;
  std::string line;  // what holds the job up, on one line (the reason stored in the run)
};

// The verdict on `me`'s call `call` (one of its in-flight calls): `answered` are the other
// ranks' answers (any order), `silent` the ranks that did not answer in time, with `hosts`
// naming every rank's host (by rank). Stops when a rank is silent, or when the wait has passed
// the deadline (`limits`, as the waiting rank's phase sets it) and the rank it waits for is in a
// phase that has one (starting or training); a wait on some rank stops past the deadline only
// when every rank waits and none of them in an exchange with this one.
StallVerdict judge_stall(const RankState& me, const CallState& call, const std::vector<RankState>& answered,
                         const std::vector<int>& silent, const std::vector<std::string>& hosts,
                         const StallLimits& limits);

// A wait, as the verdicts write it: "850 ms", "12.3 s".
std::string seconds_text(int64_t ms);

}  // namespace ts::distributed
