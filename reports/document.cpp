#include "reports/document.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <string>

#include "reports/chart_library.h"

namespace ts::reports {
namespace {

const std::set<std::string>& row_classes() {
  static const std::set<std::string> classes{"", "better", "worse", "warning", "failed"};
  return classes;
}

// ---------------------------------------------------------------------------------------------
// Validation

std::string table_name(const Table& t, const std::string& where) {
  return t.caption.empty() ? "a table in " + where : "table \"" + t.caption + "\"";
}

void validate_table(const Table& t, const std::string& where) {
  const size_t cols = t.header.size();
  if (cols == 0 && !t.rows.empty()) throw std::invalid_argument(table_name(t, where) + " has rows but no header");
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r].size() != cols)
      throw std::invalid_argument(
          fmt::format("{}: row {} has {} cells, the header {}", table_name(t, where), r + 1, t.rows[r].size(), cols));
  }
  if (!t.numeric.empty() && t.numeric.size() != cols)
    throw std::invalid_argument(
        fmt::format("{}: numeric has {} entries for {} columns", table_name(t, where), t.numeric.size(), cols));
  if (!t.row_class.empty() && t.row_class.size() != t.rows.size())
    throw std::invalid_argument(fmt::format("{}: row_class has {} entries for {} rows", table_name(t, where),
                                            t.row_class.size(), t.rows.size()));
  for (const auto& c : t.row_class) {
    if (!row_classes().contains(c))
      throw std::invalid_argument(table_name(t, where) + ": unknown row class \"" + c +
                                  "\" (better, worse, warning, failed or empty)");
  }
}

void validate_section(const Section& s, const std::string& where) {
  const std::string here = where + " > \"" + s.title + "\"";
  for (const auto& b : s.blocks) {
    if (const auto* t = std::get_if<Table>(&b)) validate_table(*t, "section " + here);
    if (const auto* c = std::get_if<Chart>(&b)) {
      if (!c->config.is_object())
        throw std::invalid_argument("chart \"" + c->title + "\" in section " + here +
                                    ": its config is not a JSON object");
      if (c->height < 0)
        throw std::invalid_argument("chart \"" + c->title + "\" in section " + here + ": negative height");
    }
  }
  for (const auto& sub : s.subsections) validate_section(sub, here);
}

size_t count_charts(const Section& s) {
  size_t n = 0;
  for (const auto& b : s.blocks) n += std::holds_alternative<Chart>(b) ? 1 : 0;
  for (const auto& sub : s.subsections) n += count_charts(sub);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Markdown

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || (static_cast<unsigned char>(c) >= 0x80);
}

enum class MdContext { heading, paragraph, cell };

// Escapes one line of plain text (no newline in it) for inline Markdown. At the start of a
// paragraph's line, what would open a block (a list, a heading, a quote, a rule, a code block) is
// escaped too.
std::string md_line(std::string_view line, MdContext ctx) {
  std::string out;
  size_t i = 0;
  if (ctx != MdContext::cell) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;  // no indented code block
    if (ctx == MdContext::paragraph && i < line.size()) {
      const char c = line[i];
      if (c == '-' || c == '+' || c == '=') {
        out += '\\';
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
        if (j < line.size() && (line[j] == '.' || line[j] == ')')) {
          out.append(line.substr(i, j - i));
          out += '\\';
          i = j;
        }
      }
    }
  }
  const size_t start = i;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    const char next = i + 1 < line.size() ? line[i + 1] : '\0';
    switch (c) {
      case '\\':
      case '`':
      case '*':
      case '~':
      case '|':
      case '$':
        out += '\\';
        out += c;
        break;
      case ']':
        // Ends a link's text only before "(" (inline), "[" (reference) or ":" (a definition, which
        // shortcut references need): "[1, 2]" stays as it is.
        if (next == '(' || next == '[' || next == ':') out += '\\';
        out += c;
        break;
      case '<':
        // Opens a tag, a comment or an autolink only before a letter, "/", "!" or "?": "<0.01" stays.
        if (std::isalpha(static_cast<unsigned char>(next)) != 0 || next == '/' || next == '!' || next == '?')
          out += '\\';
        out += c;
        break;
      case '>':
        // A quote at the start of a line; elsewhere it is text.
        if (i == start) out += '\\';
        out += c;
        break;
      case '&':
        // An entity only before a letter or "#": "a & b" stays.
        if (std::isalnum(static_cast<unsigned char>(next)) != 0 || next == '#') out += '\\';
        out += c;
        break;
      case '_': {
        // Between two letters or digits an underscore never emphasises (snake_case stays as it is).
        const bool inside = i > start && i + 1 < line.size() && is_alnum(line[i - 1]) && is_alnum(line[i + 1]);
        if (!inside) out += '\\';
        out += c;
        break;
      }
      case '#':
        // Opens a heading at the start of a line, closes one after a space.
        if (i == start || line[i - 1] == ' ' || line[i - 1] == '\t') out += '\\';
        out += c;
        break;
      case '\t': out += ' '; break;
      case '\r': break;
      default: out += c;
    }
  }
  // Trailing spaces would make a hard line break, or be lost.
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (true) {
    const size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return lines;
}

// A heading's or an italic line's text: newlines become spaces.
std::string md_inline(std::string_view text) {
  std::string flat(text);
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  return md_line(flat, MdContext::heading);
}

std::string md_cell(std::string_view text) {
  std::string out;
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "<br>";
    std::string l = md_line(lines[i], MdContext::cell);
    const size_t first = l.find_first_not_of(' ');
    out += first == std::string::npos ? std::string() : l.substr(first);
  }
  return out;
}

// A paragraph: each line escaped; a newline in the text is a hard line break ("\" at the end).
std::string md_paragraph(std::string_view text) {
  std::string out;
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\\\n";
    out += md_line(lines[i], MdContext::paragraph);
  }
  return out;
}

void md_table(std::string& out, const Table& t) {
  if (!t.caption.empty()) out += "**" + md_inline(t.caption) + "**\n\n";
  if (t.header.empty()) return;
  const auto numeric = [&](size_t c) { return c < t.numeric.size() && t.numeric[c]; };
  out += '|';
  for (const auto& h : t.header) out += " " + md_cell(h) + " |";
  out += "\n|";
  for (size_t c = 0; c < t.header.size(); ++c) out += numeric(c) ? " ---: |" : " --- |";
  out += '\n';
  for (const auto& row : t.rows) {
    out += '|';
    for (const auto& cell : row) {
      const std::string text = md_cell(cell);
      out += text.empty() ? " |" : " " + text + " |";
    }
    out += '\n';
  }
  out += '\n';
}

void md_chart(std::string& out, const Chart& c) {
  std::string text = md_inline(c.title);
  const std::string alt = md_inline(c.alt_text);
  if (!text.empty() && !alt.empty()) text += ": ";
  text += alt;
  if (text.empty()) return;
  out += "*" + text + "*\n\n";
}

void md_section(std::string& out, const Section& s, int level) {
  out += std::string(static_cast<size_t>(std::min(level, 6)), '#') + " " + md_inline(s.title) + "\n\n";
  for (const auto& b : s.blocks) {
    if (const auto* p = std::get_if<Paragraph>(&b)) {
      const std::string text = md_paragraph(p->text);
      if (!text.empty()) out += text + "\n\n";
    } else if (const auto* t = std::get_if<Table>(&b)) {
      md_table(out, *t);
    } else if (const auto* c = std::get_if<Chart>(&b)) {
      md_chart(out, *c);
    }
  }
  for (const auto& sub : s.subsections) md_section(out, sub, level + 1);
}

// ---------------------------------------------------------------------------------------------
// HTML

// Text content and double-quoted attribute values.
std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Text whose newlines are line breaks.
std::string esc_lines(std::string_view s) {
  std::string out;
  const auto lines = lines_of(s);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "<br>";
    out += esc(lines[i]);
  }
  return out;
}

// JSON for a <script type="application/json">: "<", ">" and "&" occur only inside strings there,
// where \u escapes mean the same, and without them no "</script" or "<!--" can appear.
std::string script_json(const nlohmann::json& j) {
  const std::string dumped = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(dumped.size());
  for (const char c : dumped) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

bool iequal_at(std::string_view s, size_t pos, std::string_view lower) {
  if (pos + lower.size() > s.size()) return false;
  for (size_t i = 0; i < lower.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[pos + i])) != lower[i]) return false;
  }
  return true;
}

// The library's text made safe inside <script>...</script>.
std::string inline_script(std::string_view js) {
  std::string out;
  out.reserve(js.size());
  for (size_t i = 0; i < js.size(); ++i) {
    if (js[i] == '<' && iequal_at(js, i, "<!--"))
      throw std::invalid_argument("the charting library holds \"<!--\" and cannot be inlined in a <script> element");
    if (js[i] == '<' && iequal_at(js, i, "</script")) {
      out += "<\\";  // "<\/script": "\/" is "/" in a JavaScript string, template, regular expression or comment
      continue;
    }
    out += js[i];
  }
  return out;
}

constexpr const char* kCss = R"css(
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f3f5f7; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 1.5rem 2rem 3rem; color: var(--fg); background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "Noto Sans", "DejaVu Sans", sans-serif; }
header h1 { margin: 0 0 .25rem; font-size: 1.8rem; line-height: 1.25; }
.subtitle { margin: 0 0 1rem; color: var(--muted); }
h2 { margin: 2rem 0 .75rem; padding-bottom: .3rem; border-bottom: 1px solid var(--line); font-size: 1.4rem; }
h3 { margin: 1.5rem 0 .5rem; font-size: 1.15rem; }
h4, h5, h6 { margin: 1.25rem 0 .5rem; font-size: 1rem; }
section { scroll-margin-top: 1rem; }
p { margin: .5rem 0 .75rem; }
nav.toc { margin: 1rem 0 1.5rem; padding: .5rem 1.25rem .75rem; background: var(--head); border: 1px solid var(--line);
  border-radius: 6px; display: inline-block; min-width: 18rem; }
nav.toc h2 { margin: .25rem 0; padding: 0; border: 0; font-size: 1rem; }
nav.toc ol { margin: 0; padding-left: 1.25rem; }
nav.toc a { color: #0b57d0; text-decoration: none; }
nav.toc a:hover { text-decoration: underline; }
.table-wrap { margin: .5rem 0 1rem; max-height: 75vh; overflow: auto; border: 1px solid var(--line); border-radius: 6px;
  width: fit-content; max-width: 100%; }
table { border-collapse: separate; border-spacing: 0; font-size: 14px; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .5rem .75rem; background: #fff; }
th, td { padding: .3rem .75rem; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { position: sticky; top: 0; z-index: 1; background: var(--head); border-bottom: 2px solid var(--line);
  white-space: nowrap; }
tbody tr:last-child td { border-bottom: 0; }
tbody tr:nth-child(even) { background: #fafbfc; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.better { background: #e6f4ea !important; }
tr.worse { background: #fce8e6 !important; }
tr.warning { background: #fef3d6 !important; }
tr.failed { background: #ececec !important; color: #5f6368; }
tr.better > td:first-child { box-shadow: inset 4px 0 0 #1e8e3e; }
tr.worse > td:first-child { box-shadow: inset 4px 0 0 #d93025; }
tr.warning > td:first-child { box-shadow: inset 4px 0 0 #e37400; }
tr.failed > td:first-child { box-shadow: inset 4px 0 0 #80868b; }
.row-legend { margin: -.5rem 0 1rem; font-size: 13px; color: var(--muted); }
.row-legend span { display: inline-block; padding: 0 .5rem; margin-right: .5rem; border-radius: 3px; }
.row-legend .better { background: #e6f4ea; box-shadow: inset 4px 0 0 #1e8e3e; }
.row-legend .worse { background: #fce8e6; box-shadow: inset 4px 0 0 #d93025; }
.row-legend .warning { background: #fef3d6; box-shadow: inset 4px 0 0 #e37400; }
.row-legend .failed { background: #ececec; box-shadow: inset 4px 0 0 #80868b; }
figure.chart { margin: 1rem 0 1.5rem; padding: .75rem 1rem 1rem; border: 1px solid var(--line); border-radius: 6px; }
figure.chart figcaption { font-weight: 600; margin-bottom: .5rem; }
.chart-box { position: relative; width: 100%; }
.chart-error { color: #b3261e; margin: 0; padding: 1rem 0; }
footer { margin-top: 2.5rem; padding-top: .5rem; border-top: 1px solid var(--line); color: var(--muted); font-size: 13px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  nav.toc { display: none; }
  .table-wrap { max-height: none; overflow: visible; border: 0; width: auto; }
  thead th { position: static; }
  thead { display: table-header-group; }
  tr, figure.chart { break-inside: avoid; }
  h2, h3, h4 { break-after: avoid; }
  figure.chart { border: 0; padding: 0; }
  .chart-box canvas { width: 100% !important; height: 100% !important; }  /* the drawing follows the paper */
}
)css";

// Runs first, before the library: records every error the page meets, and shows the count and
// the messages on <body> and in #ts-errors.
constexpr const char* kRecorderJs = R"js(
(function () {
  'use strict';
  var errors = [];
  function show() {
    var body = document.body;
    if (!body) return;
    body.setAttribute('data-errors', String(errors.length));
    var pre = document.getElementById('ts-errors');
    if (pre) pre.textContent = errors.join('\n');
  }
  function record(message) { errors.push(String(message)); show(); }
  window.__tsErrors = errors;
  window.__tsRecordError = record;
  window.__tsShowErrors = show;
  window.addEventListener('error', function (e) {
    if (e instanceof ErrorEvent) {
      record((e.message || 'error') + (e.filename ? ' (' + e.filename + ':' + e.lineno + ')' : ''));
    } else if (e.target && e.target !== window) {
      record('failed to load a ' + String(e.target.tagName).toLowerCase() + ' element');
    }
  }, true);
  window.addEventListener('unhandledrejection', function (e) {
    var r = e.reason;
    record('unhandled rejection: ' + (r && r.message ? r.message : String(r)));
  });
  document.addEventListener('securitypolicyviolation', function (e) {
    record('blocked by the page\'s policy: ' + e.blockedURI + ' (' + e.violatedDirective + ')');
  });
  var consoleError = console.error;
  console.error = function () {
    record('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return consoleError.apply(console, arguments);
  };
})();
)js";

// Draws every chart from its JSON, then sets data-charts-drawn and data-errors on <body>.
constexpr const char* kDrawJs = R"js(
(function () {
  'use strict';
  var record = window.__tsRecordError, show = window.__tsShowErrors;
  // Okabe & Ito's colour-blind-safe palette, then Paul Tol's muted scheme's darker members for a
  // chart with more parts (the op classes are 11; yellow last: it is faint on white). No two
  // parts of one chart share a colour up to PALETTE.length.
  var PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#56B4E9', '#CC79A7', '#999999', '#332288', '#117733',
                 '#882255', '#44AA99', '#AA4499', '#DDCC77', '#F0E442'];
  var PER_POINT = { pie: true, doughnut: true, polarArea: true };
  var LINE_LIKE = { line: true, radar: true, scatter: true, bubble: true };
  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16 & 255) + ',' + (n >> 8 & 255) + ',' + (n & 255) + ',' + alpha + ')';
  }
  function prepare(cfg) {
    cfg.options = cfg.options || {};
    if (cfg.options.maintainAspectRatio === undefined) cfg.options.maintainAspectRatio = false;
    if (cfg.options.animation === undefined) cfg.options.animation = false;
    var datasets = (cfg.data && cfg.data.datasets) || [];
    datasets.forEach(function (ds, i) {
      var type = ds.type || cfg.type;
      if (PER_POINT[type]) {
        if (ds.backgroundColor === undefined)
          ds.backgroundColor = (ds.data || []).map(function (_, j) { return PALETTE[j % PALETTE.length]; });
        if (ds.borderColor === undefined) ds.borderColor = '#ffffff';
        return;
      }
      var colour = PALETTE[i % PALETTE.length];
      if (ds.borderColor === undefined) ds.borderColor = colour;
      if (ds.backgroundColor === undefined) ds.backgroundColor = LINE_LIKE[type] ? rgba(colour, 0.2) : colour;
      if (LINE_LIKE[type] && ds.pointBackgroundColor === undefined) ds.pointBackgroundColor = colour;
    });
    return cfg;
  }
  function draw() {
    var charts = [];
    var drawn = 0;
    if (typeof Chart !== 'undefined') {
      var family = window.getComputedStyle(document.body).fontFamily;
      if (family) Chart.defaults.font.family = family;
      Chart.defaults.color = '#1f2328';
    }
    var configs = document.querySelectorAll('script.ts-chart-config');
    Array.prototype.forEach.call(configs, function (el) {
      var canvas = document.getElementById(el.getAttribute('data-canvas'));
      var title = el.getAttribute('data-title') || el.getAttribute('data-canvas');
      try {
        if (typeof Chart === 'undefined') throw new Error('Chart.js did not load');
        if (!canvas) throw new Error('its canvas is missing');
        var chart = new Chart(canvas, prepare(JSON.parse(el.textContent)));
        charts.push(chart);
        if (chart.width > 0 && chart.height > 0 && canvas.width > 0 && canvas.height > 0) {
          drawn += 1;
        } else {
          record('chart "' + title + '" has no size');
        }
      } catch (e) {
        var message = e && e.message ? e.message : String(e);
        record('chart "' + title + '": ' + message);
        // A chart that failed half-way stays registered and would fail again on every resize.
        var stale = typeof Chart !== 'undefined' && canvas && Chart.getChart ? Chart.getChart(canvas) : undefined;
        if (stale) { try { stale.destroy(); } catch (ignored) { /* already reported */ } }
        if (canvas && canvas.parentNode) {
          var p = document.createElement('p');
          p.className = 'chart-error';
          p.textContent = 'This chart could not be drawn: ' + message;
          canvas.style.display = 'none';
          canvas.parentNode.style.height = 'auto';
          canvas.parentNode.appendChild(p);
        }
      }
    });
    window.__tsCharts = charts;
    // Printing lays the page out at the paper's width: the charts follow it.
    function resizeAll() { charts.forEach(function (c) { c.resize(); }); }
    window.addEventListener('beforeprint', resizeAll);
    window.addEventListener('afterprint', resizeAll);
    document.body.setAttribute('data-charts-drawn', String(drawn));
    show();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', draw);
  else draw();
})();
)js";

struct HtmlWriter {
  std::string out;
  int next_chart = 1;

  void toc_entries(const std::vector<Section>& sections, const std::string& prefix) {
    out += "<ol>\n";
    for (size_t i = 0; i < sections.size(); ++i) {
      const std::string id = prefix + "-" + std::to_string(i + 1);
      out += "<li><a href=\"#" + id + "\">" + esc(sections[i].title) + "</a>";
      if (!sections[i].subsections.empty()) {
        out += '\n';
        toc_entries(sections[i].subsections, id);
      }
      out += "</li>\n";
    }
    out += "</ol>\n";
  }

  void table(const Table& t) {
    const auto numeric = [&](size_t c) { return c < t.numeric.size() && t.numeric[c]; };
    out += "<div class=\"table-wrap\"><table>\n";
    if (!t.caption.empty()) out += "<caption>" + esc_lines(t.caption) + "</caption>\n";
    if (!t.header.empty()) {
      out += "<thead><tr>";
      for (size_t c = 0; c < t.header.size(); ++c)
        out += std::string(numeric(c) ? "<th scope=\"col\" class=\"num\">" : "<th scope=\"col\">") +
               esc_lines(t.header[c]) + "</th>";
      out += "</tr></thead>\n";
    }
    out += "<tbody>\n";
    std::set<std::string> used;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const std::string cls = r < t.row_class.size() ? t.row_class[r] : std::string();
      if (!cls.empty()) used.insert(cls);
      out += cls.empty() ? "<tr>" : "<tr class=\"" + esc(cls) + "\">";
      for (size_t c = 0; c < t.rows[r].size(); ++c)
        out += std::string(numeric(c) ? "<td class=\"num\">" : "<td>") + esc_lines(t.rows[r][c]) + "</td>";
      out += "</tr>\n";
    }
    out += "</tbody></table></div>\n";
    if (!used.empty()) {
      out += "<p class=\"row-legend\">Rows: ";
      for (const char* cls : {"better", "worse", "warning", "failed"}) {
        if (used.contains(cls)) out += fmt::format("<span class=\"{0}\">{0}</span>", cls);
      }
      out += "</p>\n";
    }
  }

  void chart(const Chart& c) {
    const std::string id = "ts-chart-" + std::to_string(next_chart++);
    out += "<figure class=\"chart\">\n";
    if (!c.title.empty()) out += "<figcaption>" + esc_lines(c.title) + "</figcaption>\n";
    out += fmt::format("<div class=\"chart-box\" style=\"height: {}px\">", c.height > 0 ? c.height : 320);
    out += "<canvas id=\"" + id + "\" role=\"img\" aria-label=\"" + esc(c.alt_text.empty() ? c.title : c.alt_text) +
           "\"><p>" + esc_lines(c.alt_text) + "</p></canvas></div>\n";
    out += "<script type=\"application/json\" class=\"ts-chart-config\" data-canvas=\"" + id + "\" data-title=\"" +
           esc(c.title) + "\">" + script_json(c.config) + "</script>\n";
    out += "</figure>\n";
  }

  void section(const Section& s, const std::string& id, int level) {
    const int h = std::min(level, 6);
    out += "<section id=\"" + id + "\">\n";
    out += fmt::format("<h{0}>{1}</h{0}>\n", h, esc_lines(s.title));
    for (const auto& b : s.blocks) {
      if (const auto* p = std::get_if<Paragraph>(&b)) {
        out += "<p>" + esc_lines(p->text) + "</p>\n";
      } else if (const auto* t = std::get_if<Table>(&b)) {
        table(*t);
      } else if (const auto* c = std::get_if<Chart>(&b)) {
        chart(*c);
      }
    }
    for (size_t i = 0; i < s.subsections.size(); ++i)
      section(s.subsections[i], id + "-" + std::to_string(i + 1), level + 1);
    out += "</section>\n";
  }
};

size_t toc_size(const std::vector<Section>& sections) {
  size_t n = sections.size();
  for (const auto& s : sections) n += toc_size(s.subsections);
  return n;
}

}  // namespace

void validate(const Document& doc) {
  for (const auto& s : doc.sections) validate_section(s, "\"" + doc.title + "\"");
}

size_t chart_count(const Document& doc) {
  size_t n = 0;
  for (const auto& s : doc.sections) n += count_charts(s);
  return n;
}

std::string to_markdown(const Document& doc) {
  validate(doc);
  std::string out = "# " + md_inline(doc.title) + "\n\n";
  if (!doc.subtitle.empty()) out += md_paragraph(doc.subtitle) + "\n\n";
  for (const auto& s : doc.sections) md_section(out, s, 2);
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

std::string to_html(const Document& doc) {
  validate(doc);
  return to_html(doc, chart_count(doc) > 0 ? chart_js_source() : std::string());
}

std::string to_html(const Document& doc, std::string_view chart_js) {
  validate(doc);
  const size_t charts = chart_count(doc);
  HtmlWriter w;
  std::string& out = w.out;
  out.reserve(chart_js.size() + 64 * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be loaded from anywhere: a reference that slipped in is blocked, and counted as
  // an error by the recorder.
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
         "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">\n";
  out += "<meta name=\"generator\" content=\"trainscope\">\n";
  out += "<title>" + esc(doc.title) + "</title>\n";
  out += "<style>" + std::string(kCss) + "</style>\n";
  out += "<script>" + std::string(kRecorderJs) + "</script>\n";
  std::string version;
  if (charts > 0) {
    version = chart_js_version(std::string(chart_js.substr(0, std::min<size_t>(chart_js.size(), 2048))));
    out += "<script>\n" + inline_script(chart_js) + "\n</script>\n";
  }
  out += "</head>\n";
  out += fmt::format("<body data-charts-expected=\"{}\">\n", charts);
  out += "<header>\n<h1>" + esc_lines(doc.title) + "</h1>\n";
  if (!doc.subtitle.empty()) out += "<p class=\"subtitle\">" + esc_lines(doc.subtitle) + "</p>\n";
  out += "</header>\n";
  if (toc_size(doc.sections) >= 2) {
    out += "<nav class=\"toc\" aria-label=\"Contents\">\n<h2>Contents</h2>\n";
    w.toc_entries(doc.sections, "s");
    out += "</nav>\n";
  }
  out += "<main>\n";
  for (size_t i = 0; i < doc.sections.size(); ++i) w.section(doc.sections[i], "s-" + std::to_string(i + 1), 2);
  out += "</main>\n";
  out += "<footer>Made by trainscope.";
  if (charts > 0)
    out += " Charts drawn with Chart.js" + (version.empty() ? std::string() : " " + esc(version)) +
           " (MIT License), included in this page.";
  out += "</footer>\n";
  out += "<pre id=\"ts-errors\" hidden></pre>\n";
  out += "<script>" + std::string(kDrawJs) + "</script>\n";
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace ts::reports
