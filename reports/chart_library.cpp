#include "reports/chart_library.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace ts::reports {
namespace {

[[noreturn]] void unavailable(const std::string& path, const std::string& why) {
  const char* env = std::getenv(kChartJsEnv);
  const std::string from = env != nullptr && *env != '\0' ? std::string(" (from ") + kChartJsEnv + ")" : "";
  throw std::runtime_error("the charting library Chart.js is not available: " + path + from + ": " + why +
                           " (install Debian's libjs-chart.js: apt-get install libjs-chart.js, or scripts/setup; "
                           "or point " +
                           kChartJsEnv + " at a UMD build of Chart.js 3)");
}

}  // namespace

std::string chart_js_path() {
  const char* env = std::getenv(kChartJsEnv);
  if (env != nullptr && *env != '\0') return env;
  return kDefaultChartJsPath;
}

std::string chart_js_source() {
  const std::string path = chart_js_path();
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    unavailable(path, "not a regular file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) unavailable(path, errno != 0 ? std::strerror(errno) : "cannot be opened");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) unavailable(path, "read error");
  if (text.empty()) unavailable(path, "the file is empty");
  return text;
}

std::string chart_js_version(const std::string& source) {
  const std::string marker = "Chart.js v";
  const size_t at = source.find(marker);
  if (at == std::string::npos || at > 1024) return {};
  size_t end = at + marker.size();
  while (end < source.size() &&
         (std::isalnum(static_cast<unsigned char>(source[end])) || source[end] == '.' || source[end] == '-'))
    ++end;
  return source.substr(at + marker.size(), end - at - marker.size());
}

}  // namespace ts::reports
