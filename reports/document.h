#pragma once
// A report as a neutral document (title, sections of paragraphs, tables and charts), built by the
// suite report and the run comparison, and its two renderings: one self-contained HTML page with
// its charts drawn by Chart.js, and GitHub-flavoured Markdown for CI job summaries.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ts::reports {

// Plain text: never markup. The renderers escape it (HTML entities; Markdown backslashes). A
// newline in it is kept as a line break.
struct Paragraph {
  std::string text;
};

struct Table {
  std::string caption;                         // plain text; empty: none
  std::vector<std::string> header;             // one per column; not empty when there are rows
  std::vector<std::vector<std::string>> rows;  // cells as plain text, already formatted; header.size() each
  std::vector<bool> numeric;                   // per column, true: right-aligned; empty: none is
  // Per row, optional (empty, or one per row): "better", "worse", "warning", "failed" or "".
  // HTML tints the row (green, red, amber, grey); Markdown shows nothing for it.
  std::vector<std::string> row_class;
};

struct Chart {
  std::string title;  // plain text, shown above the chart
  // A Chart.js 3 configuration object ({"type", "data", "options"}), JSON only (no callbacks).
  // The page fills in what it leaves out: options.maintainAspectRatio false (the chart fills a
  // fixed-height box at the page's width), options.animation false, and the colours of datasets
  // that name none (a colour-blind-safe palette: one colour per dataset; per slice for pie,
  // doughnut and polarArea).
  nlohmann::json config;
  std::string alt_text;  // a one-line summary: Markdown shows it instead of the chart; the canvas' aria-label
  int height = 0;        // CSS pixels of the chart's box in HTML (its width is the page's); 0: 320
};

using Block = std::variant<Paragraph, Table, Chart>;

struct Section {
  std::string title;
  std::vector<Block> blocks;
  std::vector<Section> subsections;  // headings one level down (HTML h3..h6, Markdown ###..######)
};

struct Document {
  std::string title;     // HTML <title> and <h1>; Markdown "# "
  std::string subtitle;  // a line under the title; empty: none
  std::vector<Section> sections;
};

// Throws std::invalid_argument naming the table (its caption, or its place) when a table is
// ragged: a row whose cell count differs from the header's, rows without a header, `numeric` or
// `row_class` of the wrong length, or a row class not in the list above; and naming the chart when
// its config is not a JSON object or its height is negative. Both renderers call it.
void validate(const Document& doc);

// GitHub-flavoured Markdown that reads well in a CI job summary ($GITHUB_STEP_SUMMARY): "#" for the
// title, "##" for sections and one more "#" per level of subsection (at most six); text with
// Markdown's and HTML's special characters backslash-escaped; pipe tables (captions in bold above,
// numeric columns right-aligned, "|" escaped and newlines as <br> in cells); each chart as its
// title and alt_text in italics.
std::string to_markdown(const Document& doc);

// One self-contained HTML page: inline CSS, the contents (a link per section), Chart.js inlined in
// a <script>, each chart's configuration as JSON in a <script type="application/json"> (with
// "<", ">" and "&" written \u003c, \u003e, \u0026, so no label can close the element) drawn on
// load. No network reference: nothing is loaded from anywhere, and a Content-Security-Policy
// forbids it. All text and attribute values are HTML-escaped.
//
// The page reports its health for a headless browser (tests/reports/browser_check.py): <body>
// carries data-charts-expected="N" from the start; once the charts are drawn a script sets
// data-charts-drawn="M" (charts created whose canvas has a non-zero size) and data-errors="K"
// (window errors, unhandled rejections, console.error calls, charts that failed, blocked loads;
// kept up to date afterwards), and the messages go into the hidden <pre id="ts-errors">.
//
// Reads the library with chart_js_source() (reports/chart_library.h) when the document has a
// chart, and so throws std::runtime_error naming the package when it is missing; a document
// without charts needs no library.
std::string to_html(const Document& doc);

// The same with the library's source given (as chart_js_source() returns it). Any "</script" in
// it is written "<\/script" (the same to JavaScript) so it cannot end its element; throws
// std::invalid_argument when it holds "<!--", which an inline script cannot hold safely.
std::string to_html(const Document& doc, std::string_view chart_js);

// The number of charts in the document, subsections included.
size_t chart_count(const Document& doc);

}  // namespace ts::reports
