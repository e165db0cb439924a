#pragma once
// Whether text is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF). Everything trainscope stores as JSON (names, paths, the command line) must be:
// text that is not is refused before anything is written (issue 39).
#include <cstddef>
#include <optional>
#include <string_view>

namespace ts::vocabulary {

// The offset of the first byte that breaks UTF-8, or nullopt when all of `text` is valid.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace ts::vocabulary
