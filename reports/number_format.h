#pragma once
// Numbers as people read them in summaries, reports and comparisons.
#include <cstdint>
#include <string>
#include <string_view>

namespace ts::reports {

std::string human_bytes(double bytes);        // 1536 -> "1.5 KiB"
std::string with_commas(int64_t n);           // 25557032 -> "25,557,032"
std::string signed_percent(double fraction);  // 0.1234 -> "+12.3%", -0.004 -> "-0.4%"
std::string three_digits(double v);           // 3 significant digits: 1234.5 -> "1235", 0.01234 -> "0.0123"
// A noun for a count: "thread" for 1, "threads" otherwise; `many` where adding an s is wrong
// (plural(2, "activity", "activities")).
std::string plural(int64_t n, std::string_view one, std::string_view many = {});
// A count and its noun: counted(1, "thread") -> "1 thread", counted(1234, "event") -> "1,234 events".
std::string counted(int64_t n, std::string_view one, std::string_view many = {});
// A unit kept in the plural (a workload's "images", "sentence pairs"), for a count of it: without
// its final s for 1 (units_for(1, "images") -> "image").
std::string units_for(int64_t n, std::string_view units);

}  // namespace ts::reports
