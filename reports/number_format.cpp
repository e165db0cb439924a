#include "reports/number_format.h"

#include <cmath>

#include "fmt/format.h"

namespace ts::reports {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string plural(int64_t n, std::string_view one, std::string_view many) {
  if (n == 1) return std::string(one);
  return many.empty() ? std::string(one) + "s" : std::string(many);
}

std::string counted(int64_t n, std::string_view one, std::string_view many) {
  return with_commas(n) + " " + plural(n, one, many);
}

std::string units_for(int64_t n, std::string_view units) {
  if (n == 1 && units.ends_with('s')) units.remove_suffix(1);
  return std::string(units);
}

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", fraction * 100); }

std::string three_digits(double v) {
  if (v == 0 || !std::isfinite(v)) return fmt::format("{}", v);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(v))));
  return magnitude >= 2 ? fmt::format("{:.0f}", v) : fmt::format("{:.{}f}", v, 2 - magnitude);
}

}  // namespace ts::reports
