#pragma once
// StoreError: the one exception type the store throws.
#include <stdexcept>
#include <string>
#include <string_view>

namespace ts::store {

class StoreError : public std::runtime_error {
 public:
  enum class Kind {
    io,              // cannot open / create / write, SQL failure, constraint failure
    not_trainscope,  // not a SQLite file, or a SQLite file that is not ours
    newer_schema,    // ours, but written by a newer trainscope (higher user_version)
    corrupt,         // SQLite reports the file as corrupt
    not_found,       // missing database file, or missing run id
    busy,            // another process held the lock for longer than the writer waits
  };

  StoreError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

std::string_view to_string(StoreError::Kind);

}  // namespace ts::store
