#pragma once
// The charting library that HTML reports inline: Chart.js 3 from Debian's libjs-chart.js. Reports
// draw every chart through it (no hand-written drawing code); the library's text is copied into
// each page, so a page opens offline.
#include <string>

namespace ts::reports {

// Where Debian's libjs-chart.js puts the UMD build, the one that defines the global `Chart`
// (chart.esm.js and chart.mjs are ES modules, which an inline classic <script> cannot load).
inline constexpr const char* kDefaultChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

// The environment variable that names another copy of Chart.js (a UMD build of 3.x) instead of
// kDefaultChartJsPath: for a machine without the Debian package, or for tests.
inline constexpr const char* kChartJsEnv = "TRAINSCOPE_CHART_JS";

// The file chart_js_source() reads: $TRAINSCOPE_CHART_JS when set and not empty, else
// kDefaultChartJsPath.
std::string chart_js_path();

// The library's source text, as the file holds it (to_html makes it safe to inline). Throws
// std::runtime_error when the file is missing, unreadable or empty, naming the file, the package
// to install (libjs-chart.js) and the environment variable.
std::string chart_js_source();

// "3.9.1" from the library's banner ("Chart.js v3.9.1"); empty when it has none.
std::string chart_js_version(const std::string& source);

}  // namespace ts::reports
