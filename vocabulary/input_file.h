#pragma once
// Reading a file a user names (a hostfile, a suite, a bundled script): it must be a regular file
// of bounded size. A FIFO would block the read for ever, /dev/zero would fill memory, a
// directory reads as nothing (issue 39). The check and the read are one: the file is opened
// without blocking and checked by its descriptor, so it cannot be swapped in between.
#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ts::vocabulary {

// The file's bytes; std::invalid_argument naming `what` and the file when it cannot be opened,
// is not a regular file (saying what it is), or holds more than `max_bytes`.
std::string read_input_file(const std::filesystem::path& path, std::string_view what, size_t max_bytes);

}  // namespace ts::vocabulary
