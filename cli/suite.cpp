#include "cli/suite.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/run_command.h"
#include "cli/summary.h"
#include "cli/toml_hazards.h"
#include "fmt/format.h"
#include "store/reader.h"
#include "vocabulary/input_file.h"
#include "workloads/workload.h"

namespace ts::cli {

namespace {

constexpr int64_t kMillion = 1'000'000;
// A suite file larger than this is not one (a device, a data file named by mistake).
constexpr size_t kMaxSuiteBytes = 16 << 20;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Text from the file as a message shows it: cut short (at a UTF-8 character boundary), quotes,
// backslashes and control bytes escaped, so a message stays one readable line.
std::string printable(std::string_view text) {
  constexpr size_t kShown = 40;
  size_t cut = std::min(text.size(), kShown);
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  std::string shown;
  for (unsigned char ch : text.substr(0, cut)) {
    if (ch == '"' || ch == '\\') shown += '\\';
    if (ch < 0x20 || ch == 0x7f) {
      shown += fmt::format("\\x{:02x}", ch);
    } else {
      shown += static_cast<char>(ch);
    }
  }
  return cut < text.size() ? shown + "..." : shown;
}

// A value as a message shows it: type and (for scalars) the value, so "must be ... (got ...)"
// says what was written.
std::string describe(const toml::node& n) {
  if (const auto* v = n.as_string()) return fmt::format("string \"{}\"", printable(v->get()));
  if (const auto* v = n.as_integer()) return fmt::format("integer {}", v->get());
  if (const auto* v = n.as_floating_point()) {
    const double d = v->get();
    // fmt prints 2.0 as "2"; keep the point so a float never reads as an integer.
    return std::isfinite(d) && d == std::trunc(d) && std::abs(d) < 1e15 ? fmt::format("float {:.1f}", d)
                                                                        : fmt::format("float {}", d);
  }
  if (const auto* v = n.as_boolean()) return v->get() ? "boolean true" : "boolean false";
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  if (n.is_date()) return "a date";
  if (n.is_time()) return "a time";
  return "a date-time";
}

toml::table parse_toml(std::string_view text, const std::string& file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}:{}: {}", file, e.source().begin.line, e.description()));
  }
}

std::string integer_range(int64_t min, int64_t max) {
  if (max == kInt64Max) return min == 0 ? "a non-negative integer" : fmt::format("an integer >= {}", min);
  return fmt::format("an integer in {}..{}", min, max);
}

// Typed access to one TOML table: each accessor takes a key, checks its type (no conversions:
// a float or a string is never an integer) and range, and throws UsageError
// "FILE:LINE: CONTEXT: key 'K' must be ... (got ...)" otherwise. Absent keys come back empty.
class TableReader {
 public:
  TableReader(const toml::table& table, const std::string& file, std::string context)
      : table_(table), file_(file), context_(std::move(context)) {}

  // Refuses the first key (in file order) not in `allowed`.
  void allow_only(const std::vector<std::string_view>& allowed, std::string_view hint) const {
    std::optional<std::pair<uint32_t, std::string_view>> first;  // line, key
    for (const auto& [k, v] : table_) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
      const uint32_t at = k.source().begin.line ? k.source().begin.line : line_of(v);
      if (!first || at < first->first) first.emplace(at, k.str());
    }
    if (first) fail(first->first, fmt::format("unknown key '{}' ({})", printable(first->second), hint));
  }

  std::optional<std::string> string(std::string_view key) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (const auto* v = n->as_string()) return v->get();
    fail_key(key, *n, "a string");
  }

  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (const auto* v = n->as_boolean()) return v->get();
    fail_key(key, *n, "a boolean (true or false)");
  }

  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (!in_range(*n, min, max)) fail_key(key, *n, integer_range(min, max));
    return n->as_integer()->get();
  }

  // A number (integer or float) in [min, max].
  std::optional<double> number(std::string_view key, double min, double max) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    std::optional<double> v;
    if (const auto* i = n->as_integer()) v = static_cast<double>(i->get());
    if (const auto* f = n->as_floating_point()) v = f->get();
    if (!v || !(*v >= min && *v <= max)) fail_key(key, *n, fmt::format("a number from {} to {}", min, max));
    return v;
  }

  // A string, or an array of strings.
  std::optional<std::vector<std::string>> strings(std::string_view key) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (const auto* v = n->as_string()) return std::vector<std::string>{v->get()};
    const auto* arr = n->as_array();
    if (!arr) fail_key(key, *n, "a string or an array of strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& element = (*arr)[i];
      const auto* v = element.as_string();
      if (!v)
        fail(line_of(element),
             fmt::format("key '{}' element {} must be a string (got {})", key, i + 1, describe(element)));
      out.push_back(v->get());
    }
    return out;
  }

  // One integer, or a non-empty array of them, each in [min, max].
  std::optional<std::vector<int64_t>> integers(std::string_view key, int64_t min, int64_t max) const {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    const auto* arr = n->as_array();
    if (!arr || arr->empty()) {
      if (arr || !in_range(*n, min, max)) fail_key(key, *n, integer_range(min, max) + " or a non-empty array of them");
      return std::vector<int64_t>{n->as_integer()->get()};
    }
    std::vector<int64_t> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& element = (*arr)[i];
      if (!in_range(element, min, max)) {
        fail(line_of(element), fmt::format("key '{}' element {} must be {} (got {})", key, i + 1,
                                           integer_range(min, max), describe(element)));
      }
      out.push_back(element.as_integer()->get());
    }
    return out;
  }

  bool has(std::string_view key) const { return find(key) != nullptr; }

  // The table's own line (its [[run]] header), for what concerns the table as a whole.
  uint32_t line() const { return table_.source().begin.line; }

  [[noreturn]] void fail(uint32_t line, std::string_view message) const {
    throw UsageError(fmt::format("{}:{}: {}{}", file_, line, context_.empty() ? "" : context_ + ": ", message));
  }

 private:
  const toml::node* find(std::string_view key) const { return table_.get(key); }

  static bool in_range(const toml::node& n, int64_t min, int64_t max) {
    const auto* v = n.as_integer();
    return v && v->get() >= min && v->get() <= max;
  }

  [[noreturn]] void fail_key(std::string_view key, const toml::node& n, std::string_view wanted) const {
    fail(line_of(n), fmt::format("key '{}' must be {} (got {})", key, wanted, describe(n)));
  }

  // Implicitly created tables ([a.b] makes a) have no source of their own: the table's line stands in.
  uint32_t line_of(const toml::node& n) const { return n.source().begin.line ? n.source().begin.line : line(); }

  const toml::table& table_;
  const std::string& file_;
  std::string context_;
};

// The keys a [[run]] may have: every option with a suite key, and the suite's own.
const std::vector<std::string_view>& run_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    for (const auto& o : session::run_options()) {
      if (!o.suite_key.empty()) k.push_back(o.suite_key);
    }
    k.push_back("repeats");
    return k;
  }();
  return keys;
}

std::string known_keys() {
  std::string s;
  for (const auto k : run_keys()) s += (s.empty() ? "" : ", ") + std::string(k);
  return "known: " + s;
}

// One option's value from the table, type- and range-checked as its declaration says; empty
// when absent.
std::optional<nlohmann::json> read_option(const TableReader& t, const session::RunOption& o) {
  using session::OptionType;
  const std::string_view key = o.suite_key;
  switch (o.type) {
    case OptionType::text: {
      const auto v = t.string(key);
      if (!v) return std::nullopt;
      // The strategy's choices are apply_strategy's to refuse, with its own message.
      if (!o.choices.empty() && !set_by_strategy(o) &&
          std::find(o.choices.begin(), o.choices.end(), *v) == o.choices.end()) {
        std::string allowed;
        for (size_t i = 0; i < o.choices.size(); ++i) {
          allowed += fmt::format("{}\"{}\"", i == 0 ? "" : i + 1 == o.choices.size() ? " or " : ", ", o.choices[i]);
        }
        t.fail(t.line(), fmt::format("key '{}' must be {} (got \"{}\")", key, allowed, printable(*v)));
      }
      return *v;
    }
    case OptionType::integer: {
      const auto v = t.integer(key, static_cast<int64_t>(o.min), static_cast<int64_t>(o.max));
      return v ? std::optional<nlohmann::json>(*v) : std::nullopt;
    }
    case OptionType::count: {
      const auto v = t.integer(key, 0, kInt64Max);
      return v ? std::optional<nlohmann::json>(static_cast<uint64_t>(*v)) : std::nullopt;
    }
    case OptionType::number: {
      const auto v = t.number(key, o.min, o.max);
      return v ? std::optional<nlohmann::json>(*v) : std::nullopt;
    }
    case OptionType::flag: {
      const auto v = t.boolean(key);
      return v ? std::optional<nlohmann::json>(*v) : std::nullopt;
    }
    case OptionType::pairs: {
      const auto v = t.strings(key);
      if (!v) return std::nullopt;
      nlohmann::json pairs = nlohmann::json::array();
      for (const auto& m : *v) {
        auto pair = split_mca(m);
        if (!pair)
          t.fail(t.line(), fmt::format("key '{}' takes \"NAME=VALUE\" strings (got \"{}\")", key, printable(m)));
        pairs.push_back(nlohmann::json(*pair));
      }
      return pairs;
    }
  }
  return std::nullopt;
}

SuiteEntry read_entry(const TableReader& t, const std::string& file, size_t index, const std::filesystem::path& db,
                      bool check) {
  t.allow_only(run_keys(), known_keys());
  SuiteEntry e;
  RunConfig& c = e.config;
  if (!t.has("workload")) t.fail(t.line(), "key 'workload' is required");
  const session::RunOption& batch = session::run_option("batch");
  std::vector<GivenOption> given;
  for (const auto& o : session::run_options()) {
    // The batch may be a list of sizes, each a run of its own: read below.
    if (o.suite_key.empty() || &o == &batch) continue;
    if (auto value = read_option(t, o)) given.push_back({&o, std::move(*value)});
  }
  e.repeats = t.integer("repeats", 1, kMillion).value_or(1);
  try {
    apply_options(given, c, true);
  } catch (const UsageError& err) {
    t.fail(t.line(), err.what());
  }
  e.batches = t.integers(batch.suite_key, static_cast<int64_t>(batch.min), static_cast<int64_t>(batch.max))
                  .value_or(std::vector<int64_t>{});
  c.db = db;
  c.command_line = "suite " + file + " #" + std::to_string(index);
  if (!check) return e;
  try {
    validate(c);
  } catch (const UsageError& err) {
    t.fail(t.line(), err.what());
  }
  return e;
}

}  // namespace

uint64_t Suite::run_count() const {
  uint64_t n = 0;
  for (const auto& e : entries) n += std::max<uint64_t>(e.batches.size(), 1) * static_cast<uint64_t>(e.repeats);
  return n;
}

namespace {

struct SuitePosition {
  size_t entry = 0;
  uint64_t batch = 0, repeat = 0;
};

SuitePosition grouped_position(const Suite& s, uint64_t index) {
  for (size_t e = 0; e < s.entries.size(); ++e) {
    const uint64_t batches = std::max<uint64_t>(s.entries[e].batches.size(), 1);
    const uint64_t repeats = static_cast<uint64_t>(s.entries[e].repeats);
    if (index < batches * repeats) return {e, index / repeats, index % repeats};
    index -= batches * repeats;
  }
  throw std::out_of_range(fmt::format("suite run index past the end ({} runs)", s.run_count()));
}

// Rounds come in stretches of equal size: between two neighbouring repeat counts the same
// entries take part. Walking the stretches (at most one per entry) finds the round without
// visiting a million of them.
SuitePosition interleaved_position(const Suite& s, uint64_t index) {
  std::vector<uint64_t> bounds;  // distinct repeat counts, ascending
  for (const auto& e : s.entries) bounds.push_back(static_cast<uint64_t>(e.repeats));
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  uint64_t round = 0;
  for (const uint64_t bound : bounds) {
    uint64_t round_size = 0;  // runs in each round of this stretch: entries with repeats > round
    for (const auto& e : s.entries) {
      if (static_cast<uint64_t>(e.repeats) > round) round_size += std::max<uint64_t>(e.batches.size(), 1);
    }
    const uint64_t stretch = (bound - round) * round_size;
    if (index < stretch) {
      round += index / round_size;
      index %= round_size;
      for (size_t e = 0; e < s.entries.size(); ++e) {
        if (static_cast<uint64_t>(s.entries[e].repeats) <= round) continue;
        const uint64_t batches = std::max<uint64_t>(s.entries[e].batches.size(), 1);
        if (index < batches) return {e, index, round};
        index -= batches;
      }
    }
    index -= stretch;
    round = bound;
  }
  throw std::out_of_range(fmt::format("suite run index past the end ({} runs)", s.run_count()));
}

}  // namespace

RunConfig Suite::run_at(uint64_t index) const {
  const SuitePosition at = interleave ? interleaved_position(*this, index) : grouped_position(*this, index);
  const SuiteEntry& e = entries[at.entry];
  RunConfig c = e.config;
  if (!e.batches.empty()) c.batch = e.batches[at.batch];
  c.suite = {name, static_cast<int64_t>(at.entry) + 1, static_cast<int64_t>(at.repeat) + 1};
  return c;
}

namespace {
// The whole file; `check`: validate() each entry too.
Suite read_suite(std::string_view text, const std::string& file, const std::filesystem::path& db, bool check);
}  // namespace

Suite load_suite(const std::filesystem::path& file, const std::filesystem::path& db) {
  std::string text;
  try {
    text = vocabulary::read_input_file(file, "suite file", kMaxSuiteBytes);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return load_suite(text, file.string(), db);
}

Suite load_suite(std::string_view text, const std::string& file, const std::filesystem::path& db) {
  return read_suite(text, file, db, true);
}

Suite parse_suite(std::string_view text, const std::string& file, const std::filesystem::path& db) {
  return read_suite(text, file, db, false);
}

namespace {

Suite read_suite(std::string_view text, const std::string& file, const std::filesystem::path& db, bool check) {
  if (const auto hazard = find_toml_hazard(text)) {
    // An error before it is toml++'s to report, and the statements before it are safe to parse.
    parse_toml(text.substr(0, hazard->statement), file);
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(hazard->at), '\n');
    throw UsageError(fmt::format("{}:{}: {}", file, line, hazard->what));
  }
  const toml::table doc = parse_toml(text, file);
  const TableReader top(doc, file, "");
  top.allow_only({"name", "interleave", "run"},
                 "only 'name' and 'interleave' may appear above the first [[run]]; run settings go inside one");
  Suite s;
  s.name = top.string("name").value_or(std::filesystem::path(file).stem().string());
  s.interleave = top.boolean("interleave").value_or(true);
  const toml::node* run = doc.get("run");
  if (!run) throw UsageError(file + ": no [[run]] entries");
  if (const auto* t = run->as_table()) {
    top.fail(t->source().begin.line ? t->source().begin.line : top.line(),
             "'run' must be an array of tables: write [[run]], not [run]");
  }
  const toml::array* runs = run->as_array();
  if (!runs) {
    top.fail(run->source().begin.line, fmt::format("key 'run' must be [[run]] tables (got {})", describe(*run)));
  }
  if (runs->empty()) throw UsageError(file + ": no [[run]] entries");
  for (size_t i = 0; i < runs->size(); ++i) {
    const toml::node& node = (*runs)[i];
    const std::string context = fmt::format("run #{}", i + 1);
    const toml::table* t = node.as_table();
    if (!t) {
      TableReader(doc, file, context).fail(node.source().begin.line, "must be a table (got " + describe(node) + ")");
    }
    s.entries.push_back(read_entry(TableReader(*t, file, context), file, i + 1, db, check));
  }
  return s;
}

}  // namespace

int run_suite(const Suite& suite, bool json) {
  const uint64_t total = suite.run_count();
  int worst = kExitOk;
  nlohmann::json all = nlohmann::json::array();
  std::vector<int64_t> made;  // the runs of this invocation, for the closing table
  for (uint64_t i = 0; i < total; ++i) {
    const RunConfig c = suite.run_at(i);
    // The batch the run trains with, resolved where every batch is (an entry without one: its preset's).
    const int64_t batch = workloads::find_workload(c.workload)->batch_of(c.preset, c.batch);
    std::string label = fmt::format("[{}/{}] {}/{} batch {}", i + 1, total, c.workload, c.preset, batch);
    if (launches_ranks(c)) {
      label += !c.hosts.empty()      ? " on " + c.hosts
               : !c.hostfile.empty() ? " on the hosts of " + c.hostfile.string()
                                     : " x" + counted(c.nproc, "rank");
      if (c.strategy == RunConfig::Strategy::ps) {
        label += fmt::format(" + {} {} ({})", c.ps.servers,
                             plural(c.ps.servers, c.ps.dedicated ? "dedicated server" : "co-located server"),
                             distributed::ps::to_string(c.ps.mode));
      }
      say(stderr, "trainscope: {}\n", label);  // the ranks' progress lines do not carry the label
    }
    const RunOutcome out = execute_run(c, label);
    if (out.run_id > 0) made.push_back(out.run_id);
    const auto summary = stored_summary(c.db, out);
    if (json) {
      all.push_back(summary);
    } else {
      say("{}\n", format_summary(summary));
    }
    if (out.exit_code == kExitInterrupted) {
      worst = kExitInterrupted;
      break;
    }
    worst = std::max(worst, out.exit_code);
  }
  if (json) {
    say("{}\n", all.dump(2));  // one document: the summaries hold what the table shows
  } else if (!made.empty()) {
    // The whole suite at a glance, after the summaries: each run with its status and headline rate.
    say("suite {}: {}\n{}", suite.name, counted(static_cast<int64_t>(made.size()), "run"),
        format_runs(suite.run_at(0).db, made));  // every entry's db is the suite's
  }
  return worst;
}

}  // namespace ts::cli
