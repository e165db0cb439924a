#include "cli/toml_hazards.h"

#include <vector>

namespace ts::cli {

std::optional<TomlHazard> find_toml_hazard(std::string_view text) {
  const auto starts_name = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '"' || c == '\'' || c == ']';  // ']': toml++ refuses "[]" itself
  };
  const auto non_ascii = [](char c) { return static_cast<unsigned char>(c) >= 0x80; };
  const auto ends_value = [](char c) { return std::string_view(" \t\r\n\v\f]},#").find(c) != std::string_view::npos; };
  enum class Lexeme { none, comment, basic, literal, multi_basic, multi_literal };
  struct Level {
    char bracket;  // '[' array, '{' inline table
    bool key;      // inline table: before the current entry's '='
  };
  Lexeme in = Lexeme::none;
  bool in_value = false;       // after a key's '=', until the line ends outside brackets
  bool expect_value = false;   // where a value starts: after '=', '[' or an array's ','
  bool in_bare_value = false;  // inside a value that is not a string (a number, a date, true)
  std::vector<Level> nest;     // brackets open inside the value
  size_t statement = 0;
  bool statement_begun = false;  // toml++ reads a header only where a statement begins
  const size_t n = text.size();
  const size_t bom = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // toml++ skips it
  for (size_t i = bom; i < n; ++i) {
    const char c = text[i];
    const auto closes = [&](char quote) { return i + 2 < n && text[i + 1] == quote && text[i + 2] == quote; };
    // Comments and one-line strings end at the line's end, which may also end a value.
    const bool line_ends =
        c == '\n' && (in == Lexeme::none || in == Lexeme::comment || in == Lexeme::basic || in == Lexeme::literal);
    if (line_ends) {
      in = Lexeme::none;
      in_bare_value = false;
      if (nest.empty()) {
        in_value = false;
        statement = i + 1;
        statement_begun = false;
      }
      continue;
    }
    switch (in) {
      case Lexeme::comment: break;
      case Lexeme::basic:
        if (c == '\\') {
          ++i;  // the escaped character, never the closing quote
        } else if (c == '"') {
          in = Lexeme::none;
        }
        break;
      case Lexeme::literal:
        if (c == '\'') in = Lexeme::none;
        break;
      case Lexeme::multi_basic:
      case Lexeme::multi_literal: {
        const char quote = in == Lexeme::multi_basic ? '"' : '\'';
        if (c == '\\' && in == Lexeme::multi_basic) {
          size_t j = i + 1;  // a line-ending backslash: toml++ skips the whitespace after it
          while (j < n && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) ++j;
          if (j < n && non_ascii(text[j])) {
            return TomlHazard{statement, j,
                              "a non-ASCII character after '\\' in a \"\"\" string (toml++ 3.3 "
                              "mishandles it): write it as \\uXXXX, or use a ''' string"};
          }
          ++i;  // the escaped character, never a closing quote
        } else if (c == quote && closes(quote)) {
          i += 2;
          // Up to two more quotes belong to the string: """a"""" is a, then a quote.
          for (int extra = 0; extra < 2 && i + 1 < n && text[i + 1] == quote; ++extra) ++i;
          in = Lexeme::none;
        }
        break;
      }
      case Lexeme::none: {
        if (non_ascii(c)) {
          return TomlHazard{statement, i,
                            "a non-ASCII character outside a string or comment (a key with one "
                            "must be quoted)"};
        }
        const bool in_key = !in_value || (!nest.empty() && nest.back().bracket == '{' && nest.back().key);
        const bool after_bare_value = in_bare_value;
        in_bare_value = false;
        const bool begins_statement = !in_value && !statement_begun && c != ' ' && c != '\t' && c != '\r';
        if (begins_statement) statement_begun = true;
        // toml++ reads a bare value up to a space, ']', '}', ',' or '#': a quote or bracket glued
        // to it (2'x, 9{"x) is part of it, not a string or a table.
        const bool glued = after_bare_value && !in_key && !ends_value(c);
        if (glued) {
          in_bare_value = true;
        } else if (c == '#') {
          in = Lexeme::comment;
        } else if ((c == '"' || c == '\'') && (in_key || expect_value)) {
          const bool multi = closes(c);
          in = multi ? (c == '"' ? Lexeme::multi_basic : Lexeme::multi_literal)
                     : (c == '"' ? Lexeme::basic : Lexeme::literal);
          if (multi) i += 2;
          expect_value = false;
        } else if (!in_value) {
          if (c == '=') {
            in_value = true;
            expect_value = true;
          } else if (c == '[' && begins_statement) {
            size_t j = i + 1;
            if (j < n && text[j] == '[') ++j;
            while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
            // At the end of the text toml++ reports the end itself.
            if (j < n && !starts_name(text[j])) {
              return TomlHazard{statement, i, "a table header needs a name after '[' or '[[' (e.g. [[run]])"};
            }
          }
        } else if (c == '[') {
          nest.push_back({'[', false});
          expect_value = true;
        } else if (c == '{') {
          nest.push_back({'{', true});
          expect_value = false;
        } else if (c == ']' || c == '}') {
          if (c == '}' && expect_value && !nest.empty() && nest.back().bracket == '[') {
            return TomlHazard{statement, i, "a '}' where an array needs a value or ']'"};
          }
          if (!nest.empty()) nest.pop_back();
          expect_value = false;
        } else if (c == ',' && !nest.empty()) {
          nest.back().key = nest.back().bracket == '{';
          expect_value = nest.back().bracket == '[';
        } else if (c == '=' && in_key) {
          nest.back().key = false;
          expect_value = true;
        } else if (c == ' ' && after_bare_value && !in_key && i + 2 < n && text[i + 1] >= '0' && text[i + 1] <= '9' &&
                   ends_value(text[i + 2])) {
          // toml++ reads "1979-05-27 0" as the start of a date-time and its next step assumes more.
          return TomlHazard{statement, i + 1, "a stray digit after a value"};
        } else if (c != ' ' && c != '\t' && c != '\r') {
          expect_value = false;  // inside a bare value: a quote here is toml++'s, not a string's
          in_bare_value = true;
        }
        break;
      }
    }
  }
  return std::nullopt;
}

}  // namespace ts::cli
