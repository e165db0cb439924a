#include "importers/chrome_trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <istream>
#include <nlohmann/json.hpp>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"

namespace ts::importers {

namespace {

using Kind = TraceError::Kind;

// The file through zlib, which reads gzip and plain files alike; refuses what is not a regular
// file before reading a byte (a FIFO would block, a device never end), checked on the open
// descriptor so the file cannot be swapped in between.
class GzFileBuf final : public std::streambuf {
 public:
  explicit GzFileBuf(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw TraceError(Kind::io, fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw TraceError(Kind::io, fmt::format("'{}' is not a regular file", path.string()));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::array<unsigned char, 2> magic{};
    gzip_ = ::pread(fd, magic.data(), magic.size(), 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    file_ = ::gzdopen(fd, "rb");
    if (file_ == nullptr) {
      ::close(fd);
      throw TraceError(Kind::io, fmt::format("cannot read '{}'", path.string()));
    }
    ::gzbuffer(file_, 1 << 17);
  }
  ~GzFileBuf() override {
    if (file_ != nullptr) ::gzclose(file_);
  }
  GzFileBuf(const GzFileBuf&) = delete;
  GzFileBuf& operator=(const GzFileBuf&) = delete;
  bool gzip() const { return gzip_; }
  int64_t bytes() const { return bytes_; }
  bool at_end() const { return at_end_; }  // every byte has been handed out

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = ::gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) {
      int code = 0;
      const char* why = ::gzerror(file_, &code);
      throw TraceError(Kind::io, fmt::format("cannot read '{}' after {} bytes: {}", path_.string(), bytes_, why));
    }
    if (n == 0) {
      // A gzip stream cut short reads as an end without its trailer: that is a truncated file.
      int code = 0;
      ::gzerror(file_, &code);
      if (code == Z_BUF_ERROR)
        throw TraceError(Kind::truncated, fmt::format("'{}' ends inside its gzip stream (after {} bytes of JSON): "
                                                      "the file is truncated",
                                                      path_.string(), bytes_));
      at_end_ = true;
      return traits_type::eof();
    }
    bytes_ += n;
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::filesystem::path path_;
  gzFile file_ = nullptr;
  bool gzip_ = false, at_end_ = false;
  int64_t bytes_ = 0;
  std::array<char, 1 << 17> buffer_{};
};

TracePhase phase_of(const std::string& ph) {
  if (ph == "X") return TracePhase::complete;
  if (ph == "i" || ph == "I") return TracePhase::instant;
  if (ph == "C") return TracePhase::counter;
  if (ph == "M") return TracePhase::metadata;
  return TracePhase::other;
}

// The SAX handler: keeps the open containers' depth and, inside an event, the fields the store
// has a place for; everything else is read past without being kept.
class Handler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  Handler(size_t batch, const std::function<void(std::span<const TraceRecord>)>& on_batch,
          const std::filesystem::path& path, const GzFileBuf& input, TraceSummary& summary)
      : batch_(std::max<size_t>(1, batch)), on_batch_(on_batch), path_(path), input_(input), summary_(summary) {
    records_.reserve(batch_);
  }

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), v); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(static_cast<double>(v), static_cast<int64_t>(std::min<number_unsigned_t>(v, INT64_MAX)));
  }
  bool number_float(number_float_t v, const string_t&) override { return number(v, static_cast<int64_t>(v)); }
  bool string(string_t& v) override {
    if (in_event_fields()) {
      if (key_ == "ph") current_.phase = phase_of(v);
      else if (key_ == "cat") current_.cat = std::move(v);
      else if (key_ == "name") current_.name = std::move(v);
      else if (key_ == "pid") current_.pid_text = std::move(v);
      else if (key_ == "tid") current_.tid_text = std::move(v);
    } else if (in_event_args() && key_ == "name") {
      current_.args_name = std::move(v);
    }
    return scalar();
  }
  bool binary(binary_t&) override { return scalar(); }

  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      top_is_object_ = true;
    } else if (events_depth_ > 0 && depth_ == events_depth_) {
      current_ = TraceRecord{};  // an event begins
    } else if (in_event_fields()) {
      in_args_ = key_ == "args";  // an object among the event's fields: its args, or skipped
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    if (events_depth_ > 0 && depth_ == events_depth_) {
      records_.push_back(std::move(current_));
      ++summary_.events;
      if (records_.size() >= batch_) flush();
    }
    after_value();
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) {
      events_depth_ = 1;  // a bare array of events
      saw_events_ = true;
    } else if (depth_ == 1 && top_is_object_ && key_ == "traceEvents") {
      events_depth_ = 2;
      saw_events_ = true;
    } else if (events_depth_ > 0 && depth_ == events_depth_) {
      ++summary_.skipped;  // an array where an event should be
    }
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    if (events_depth_ > 0 && depth_ == events_depth_ - 1) events_depth_ = 0;  // the events' array closed
    after_value();
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    if (input_.at_end() && input_.bytes() == 0)
      throw TraceError(Kind::foreign, fmt::format("'{}' is empty: no trace", path_.string()));
    // The input ran out where the JSON could not end: the file stops short.
    if (input_.at_end())
      throw TraceError(Kind::truncated, fmt::format("'{}' ends at byte {} inside its JSON: the file is truncated",
                                                    path_.string(), position));
    throw TraceError(Kind::malformed, fmt::format("'{}' is not valid JSON at byte {} (near '{}'): {}", path_.string(),
                                                  position, last_token.substr(0, 40), ex.what()));
  }

  void finish() {
    flush();
    if (!saw_events_)
      throw TraceError(Kind::foreign, fmt::format("'{}' is JSON but no trace: it has no traceEvents array (a Chrome or "
                                                  "PyTorch profiler trace has one)",
                                                  path_.string()));
  }

 private:
  // Where the value just read lies: an event's own fields, or its args.
  bool in_event_fields() const { return events_depth_ > 0 && depth_ == events_depth_ + 1; }
  bool in_event_args() const { return events_depth_ > 0 && depth_ == events_depth_ + 2 && in_args_; }

  bool number(double d, int64_t i) {
    if (in_event_fields()) {
      if (key_ == "ts") current_.ts_us = d, current_.has_ts = true;
      else if (key_ == "dur") current_.dur_us = d;
      else if (key_ == "pid") current_.pid = i;
      else if (key_ == "tid") current_.tid = i;
    } else if (in_event_args()) {
      if (key_ == "device") current_.device = i;
      else if (key_ == "stream") current_.stream = i;
      else if (key_ == "correlation") current_.correlation = i;
      else if (key_ == "External id") current_.external_id = i;
      else if (key_ == "Bytes" || key_ == "bytes") current_.bytes = i;
      else if (key_ == "Total Allocated") current_.total_allocated = i;
      else if (key_ == "Total Reserved") current_.total_reserved = i;
      else if (key_ == "Device Type") current_.device_type = i;
      else if (key_ == "Device Id") current_.device_id = i;
      else if (key_ == "Sequence number") current_.sequence = i;
    } else if (depth_ == 1 && top_is_object_ && key_ == "baseTimeNanoseconds") {
      summary_.base_time_ns = i;
    }
    return scalar();
  }
  bool scalar() {
    if (events_depth_ > 0 && depth_ == events_depth_) ++summary_.skipped;  // a scalar where an event should be
    after_value();
    return true;
  }
  // Back among an event's fields: no object is open below them.
  void after_value() {
    if (events_depth_ > 0 && depth_ == events_depth_ + 1) in_args_ = false;
  }

  size_t batch_;
  const std::function<void(std::span<const TraceRecord>)>& on_batch_;
  const std::filesystem::path& path_;
  const GzFileBuf& input_;
  TraceSummary& summary_;
  std::vector<TraceRecord> records_;
  TraceRecord current_;
  std::string key_;
  int depth_ = 0, events_depth_ = 0;
  bool top_is_object_ = false, saw_events_ = false, in_args_ = false;

  void flush() {
    if (records_.empty()) return;
    on_batch_(std::span<const TraceRecord>(records_));
    records_.clear();
  }
};

}  // namespace

TraceSummary read_chrome_trace(const std::filesystem::path& path, size_t batch,
                               const std::function<void(std::span<const TraceRecord>)>& on_batch) {
  TraceSummary summary;
  GzFileBuf buf(path);
  summary.gzip = buf.gzip();
  std::istream in(&buf);
  in.exceptions(std::ios::badbit);
  Handler handler(batch, on_batch, path, buf, summary);
  try {
    nlohmann::json::sax_parse(in, &handler);
  } catch (const std::ios_base::failure&) {
    throw TraceError(Kind::io, fmt::format("cannot read '{}'", path.string()));
  }
  summary.bytes_read = buf.bytes();
  handler.finish();
  return summary;
}

}  // namespace ts::importers
