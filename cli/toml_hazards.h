#pragma once
// A pre-scan of suite files for the inputs Debian 12's toml++ mishandles (fuzz/suite_fuzzer.cpp
// found them): they are refused with their line before toml++ sees them.
#include <cstddef>
#include <optional>
#include <string_view>

namespace ts::cli {

// What toml++ 3.3 (Debian 12's) cannot be given: inputs on which it asserts (debug builds) or
// has undefined behaviour instead of reporting an error. Found by fuzz/suite_fuzzer.cpp; the first
// two are known upstream and fixed after 3.3 (marzer/tomlplusplus#294, #190 / #295):
//  - a table header whose '[' or '[[' is not followed by a name ("[[" then a line break, "[=");
//  - a non-ASCII character where toml++ skips whitespace: anywhere outside strings and comments
//    (which TOML forbids anyway), and after a backslash in a """ string;
//  - a '}' where an array expects a value ("[}", "[1, }");
//  - a value, a space, one digit and the value's end ("1979-05-27 9").
struct TomlHazard {
  size_t statement;  // where the statement holding it starts: the text before parses safely
  size_t at;
  std::string_view what;
};

// Follows just enough of TOML to find them: comments, the four kinds of string, and the nesting of
// values (after '='; arrays may span lines), so that a header's '[' is told from an array's, and
// a quote or bracket that opens a string or an array from one that toml++ reads as part of a bare
// value (2'x).
std::optional<TomlHazard> find_toml_hazard(std::string_view text);

}  // namespace ts::cli
