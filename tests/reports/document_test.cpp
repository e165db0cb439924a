// The report document and its two renderings: Markdown for CI job summaries, and one
// self-contained HTML page whose charts Chart.js draws. Hostile text stays text in both; the
// page references nothing on the network; a missing charting library is a clear error.
//
// DocumentSample.WritesPages writes a sample page (3 charts: bar, line, stacked bar; tables with
// hostile text), its Markdown, and a page with a broken chart into $TS_REPORT_SAMPLE_DIR (a
// scratch directory when unset): the ctest entries reports_document_browser and
// reports_document_browser_rejects_broken open them in a headless browser
// (tests/reports/browser_check.py).
#include "reports/document.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>

#include "reports/chart_library.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::reports;
using nlohmann::json;

namespace {

const std::string kHostile = "</script><b>x</b> & \"q\"";

// Sets an environment variable for one scope and restores it afterwards.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool have_chart_js() {
  try {
    (void)chart_js_source();
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json bar_config(const std::vector<std::string>& labels, bool stacked = false) {
  json cfg = {{"type", "bar"},
              {"data",
               {{"labels", labels},
                {"datasets", json::array({{{"label", "baseline"}, {"data", {12.5, 40.1, 7.25, 88.0, 19.5}}},
                                          {{"label", "candidate"}, {"data", {11.9, 43.7, 7.3, 80.2, 0}}}})}}},
              {"options", {{"plugins", {{"legend", {{"position", "bottom"}}}}}}}};
  if (stacked) {
    cfg["data"]["datasets"] =
        json::array({{{"label", "forward"}, {"data", {5.1, 14.0, 2.9, 31.0, 8.0}}},
                     {{"label", "backward"}, {"data", {6.0, 21.5, 3.6, 44.2, 9.1}}},
                     {{"label", "optimizer"}, {"data", {0.9, 3.2, 0.5, 9.1, 1.6}}},
                     {{"label", "data loading " + kHostile}, {"data", {0.5, 1.4, 0.25, 3.7, 0.8}}}});
    cfg["options"]["scales"] = {
        {"x", {{"stacked", true}}},
        {"y", {{"stacked", true}, {"title", {{"display", true}, {"text", "ms per iteration"}}}}}};
  } else {
    cfg["options"]["scales"] = {{"y", {{"beginAtZero", true}, {"title", {{"display", true}, {"text", "median ms"}}}}}};
  }
  return cfg;
}

json line_config() {
  json base = json::array(), cand = json::array(), labels = json::array();
  for (int i = 1; i <= 20; ++i) {
    labels.push_back(i);
    base.push_back(40.0 + (i % 5) * 0.6 - (i == 1 ? -9 : 0));
    cand.push_back(43.5 + (i % 4) * 0.5 - (i == 1 ? -11 : 0));
  }
  return {{"type", "line"},
          {"data",
           {{"labels", labels},
            {"datasets", json::array({{{"label", "baseline"}, {"data", base}, {"tension", 0.2}},
                                      {{"label", "candidate"}, {"data", cand}, {"tension", 0.2}}})}}},
          {"options",
           {{"plugins", {{"legend", {{"position", "bottom"}}}}},
            {"scales",
             {{"x", {{"title", {{"display", true}, {"text", "iteration"}}}}},
              {"y", {{"title", {{"display", true}, {"text", "ms"}}}}}}}}}};
}

// A comparison report as the comparison code would build it, with hostile text in a table, a
// chart label and a dataset name.
Document sample_document() {
  const std::vector<std::string> workloads{"mlp_mnist", "resnet18", "lstm|small", "faster_rcnn", kHostile};
  Table verdicts{
      .caption = "Median iteration time, baseline vs candidate",
      .header = {"Workload", "Baseline (ms)", "Candidate (ms)", "Change", "95% CI", "p", "Verdict"},
      .rows = {{"mlp_mnist", "12.50", "11.90", "-4.8%", "[-6.1%, -3.5%]", "0.0004", "faster"},
               {"resnet18", "40.10", "43.70", "+9.0%", "[+7.2%, +10.9%]", "<0.0001", "slower"},
               {"lstm|small\n(2 layers)", "7.25", "7.30", "+0.7%", "[-1.2%, +2.5%]", "0.41", "no change"},
               {"faster_rcnn", "88.00", "80.20", "-8.9%", "[-15.0%, +1.1%]", "0.09", "noisy: 11% CV"},
               {kHostile, "19.50", "", "", "", "", "failed: exit 3"}},
      .numeric = {false, true, true, true, true, true, false},
      .row_class = {"better", "worse", "", "warning", "failed"},
  };
  Table memory{
      .caption = "Peak memory",
      .header = {"Workload", "Baseline (MiB)", "Candidate (MiB)", "Change"},
      .rows = {{"mlp_mnist", "118", "118", "0%"},
               {"resnet18", "1,512", "1,498", "-0.9%"},
               {"lstm|small", "301", "355", "+17.9%"},
               {"faster_rcnn", "2,940", "2,911", "-1.0%"}},
      .numeric = {false, true, true, true},
      .row_class = {"", "", "worse", ""},
  };
  Chart by_workload{.title = "Median iteration time per workload",
                    .config = bar_config(workloads),
                    .alt_text = "resnet18 9% slower, mlp_mnist 5% faster, lstm|small unchanged"};
  Chart over_iterations{.title = "resnet18: iteration time over the run",
                        .config = line_config(),
                        .alt_text = "candidate 3.5 ms slower on every iteration after warm-up"};
  Chart breakdown{.title = "Where an iteration goes (candidate)",
                  .config = bar_config(workloads, true),
                  .alt_text = "backward is about half of every workload's iteration",
                  .height = 360};
  return Document{
      .title = "Comparison: main@1a2b3c4 vs pr-42@9f8e7d6",
      .subtitle = "Suite cpu-small, 5 workloads x 20 iterations, interleaved on one machine",
      .sections = {Section{.title = "Summary",
                           .blocks = {Paragraph{"1 workload is faster, 1 slower, 1 noisy and 1 failed. Changes are the "
                                                "median's, with 95% confidence intervals (Mann-Whitney U)."},
                                      verdicts}},
                   Section{.title = "Time", .blocks = {by_workload, over_iterations}},
                   Section{
                       .title = "Breakdown and memory",
                       .blocks = {breakdown},
                       .subsections = {Section{.title = "Memory",
                                               .blocks = {Paragraph{"Peak of the memory ledger's total."}, memory}}}}},
  };
}

// One chart Chart.js draws and one it rejects (no such chart type).
Document broken_document() {
  Chart good{.title = "A good chart", .config = bar_config({"a", "b", "c", "d", "e"}), .alt_text = "five bars"};
  json bad_config = bar_config({"a", "b", "c", "d", "e"});
  bad_config["type"] = "no-such-chart-type";
  Chart bad{.title = "A broken chart", .config = bad_config, .alt_text = "cannot be drawn"};
  return Document{.title = "Broken page", .sections = {Section{.title = "Charts", .blocks = {good, bad}}}};
}

// Every "<script" opens an element that the next "</script" closes: no text closed one early.
void expect_scripts_balanced(const std::string& html) {
  const std::string l = lower(html);
  size_t pos = 0, scripts = 0;
  while ((pos = l.find("<script", pos)) != std::string::npos) {
    const size_t close = l.find("</script", pos);
    ASSERT_NE(close, std::string::npos);
    const size_t next = l.find("<script", pos + 1);
    EXPECT_TRUE(next == std::string::npos || next > close) << "a <script> opened inside another at " << pos;
    ++scripts;
    pos = close + 1;
  }
  EXPECT_EQ(scripts, count(l, "</script"));
}

// The JSON of the charts embedded in the page, in order.
std::vector<json> embedded_configs(const std::string& html) {
  std::vector<json> configs;
  const std::string open = "class=\"ts-chart-config\"";
  for (size_t pos = html.find(open); pos != std::string::npos; pos = html.find(open, pos + 1)) {
    const size_t start = html.find('>', pos) + 1;
    const size_t end = html.find("</script>", start);
    configs.push_back(json::parse(html.substr(start, end - start)));
  }
  return configs;
}

const std::string kFakeLibrary = "/*! FakeChart v0 */ window.Chart = function () {};";

// ---------------------------------------------------------------------------------------------
// Markdown

TEST(DocumentMarkdown, HeadingsNest) {
  Section deep{.title = "Level 7"};
  Section l6{.title = "Level 6", .subsections = {deep}};
  Section l5{.title = "Level 5", .subsections = {l6}};
  Section l4{.title = "Level 4", .subsections = {l5}};
  Section l3{.title = "Level 3", .subsections = {l4}};
  Document doc{.title = "Report",
               .subtitle = "sub",
               .sections = {Section{.title = "Level 2", .subsections = {l3}}, Section{.title = "Second"}}};
  const std::string md = to_markdown(doc);
  EXPECT_EQ(md, "# Report\n\nsub\n\n## Level 2\n\n### Level 3\n\n#### Level 4\n\n##### Level 5\n\n###### Level 6\n\n"
                "###### Level 7\n\n## Second\n");
}

TEST(DocumentMarkdown, TablesEscapePipesAndNewlines) {
  Table t{.caption = "Times",
          .header = {"Name", "ms"},
          .rows = {{"a|b", "1.5"}, {"two\nlines", "20"}, {"", "3"}},
          .numeric = {false, true}};
  const std::string md = to_markdown(Document{.title = "T", .sections = {Section{.title = "S", .blocks = {t}}}});
  EXPECT_NE(md.find("**Times**\n\n| Name | ms |\n| --- | ---: |\n| a\\|b | 1.5 |\n| two<br>lines | 20 |\n| | 3 |\n"),
            std::string::npos)
      << md;
  // Every table line has exactly columns + 1 unescaped pipes.
  for (const auto& line : {std::string("| a\\|b | 1.5 |"), std::string("| two<br>lines | 20 |")}) {
    size_t pipes = 0;
    for (size_t i = 0; i < line.size(); ++i) pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(pipes, 3u) << line;
  }
}

TEST(DocumentMarkdown, TextIsNeverMarkup) {
  Document doc{.title = "# Title *with* <i>tags</i>",
               .sections = {Section{.title = "S",
                                    .blocks = {Paragraph{"- not a list\n1. not numbered\n> not a quote\n" + kHostile +
                                                         " [link](x) `code` _em_ snake_case $x$"}}}}};
  const std::string md = to_markdown(doc);
  EXPECT_NE(md.find("# \\# Title \\*with\\* \\<i>tags\\</i>\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\\- not a list\\\n1\\. not numbered\\\n\\> not a quote\\\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\\</script>\\<b>x\\</b> & \"q\" [link\\](x) \\`code\\` \\_em\\_ snake_case \\$x\\$"),
            std::string::npos)
      << md;
  EXPECT_FALSE(std::regex_search(md, std::regex(R"((^|[^\\])<[a-z/])"))) << "an unescaped tag in\n" << md;
  // What cannot be markup is left as it is: the summary stays readable as text.
  const std::string plain = to_markdown(
      Document{.title = "T",
               .sections = {Section{.title = "S",
                                    .blocks = {Paragraph{"p <0.01, CI [1.2, 3.4] & more > less; &amp; [a]: b"}}}}});
  EXPECT_NE(plain.find("p <0.01, CI [1.2, 3.4] & more > less; \\&amp; [a\\]: b"), std::string::npos) << plain;
}

TEST(DocumentMarkdown, ChartsAreTheirAltTextInItalics) {
  Chart c{.title = "Throughput", .config = {{"type", "bar"}}, .alt_text = "resnet18 9% slower"};
  const std::string md = to_markdown(Document{.title = "T", .sections = {Section{.title = "S", .blocks = {c}}}});
  EXPECT_NE(md.find("\n*Throughput: resnet18 9% slower*\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("\"type\""), std::string::npos);
}

TEST(DocumentMarkdown, SampleReadsAsATable) {
  const std::string md = to_markdown(sample_document());
  EXPECT_NE(md.find("| Workload | Baseline (ms) | Candidate (ms) | Change | 95% CI | p | Verdict |\n"
                    "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n"
                    "| mlp_mnist | 12.50 | 11.90 | -4.8% | [-6.1%, -3.5%] | 0.0004 | faster |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| lstm\\|small<br>(2 layers) |"), std::string::npos) << md;
}

TEST(Document, RaggedTablesAreRefused) {
  const auto doc_with = [](Table t) {
    return Document{.title = "T", .sections = {Section{.title = "S", .blocks = {std::move(t)}}}};
  };
  EXPECT_THROW(to_markdown(doc_with(Table{.header = {"a", "b"}, .rows = {{"1"}}})), std::invalid_argument);
  EXPECT_THROW(to_markdown(doc_with(Table{.rows = {{"1"}}})), std::invalid_argument);
  EXPECT_THROW(to_markdown(doc_with(Table{.header = {"a"}, .rows = {{"1"}}, .numeric = {true, false}})),
               std::invalid_argument);
  EXPECT_THROW(to_markdown(doc_with(Table{.header = {"a"}, .rows = {{"1"}}, .row_class = {"better", ""}})),
               std::invalid_argument);
  try {
    (void)to_html(doc_with(Table{.caption = "Times", .header = {"a"}, .rows = {{"1"}}, .row_class = {"green"}}),
                  kFakeLibrary);
    ADD_FAILURE() << "an unknown row class was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Times"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("green"), std::string::npos) << e.what();
  }
  EXPECT_THROW(to_markdown(Document{.title = "T",
                                    .sections = {Section{.title = "S", .blocks = {Chart{.config = json::array()}}}}}),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// HTML

TEST(DocumentHtml, EscapesHostileText) {
  Table t{.caption = kHostile, .header = {kHostile}, .rows = {{kHostile}}, .row_class = {"worse"}};
  Document doc{.title = kHostile,
               .subtitle = kHostile,
               .sections = {Section{.title = kHostile, .blocks = {Paragraph{kHostile + "\nline 2"}, t}}}};
  const std::string html = to_html(doc, kFakeLibrary);
  const std::string escaped = "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt; &amp; &quot;q&quot;";
  EXPECT_NE(html.find("<title>" + escaped + "</title>"), std::string::npos);
  EXPECT_NE(html.find("<h1>" + escaped + "</h1>"), std::string::npos);
  EXPECT_NE(html.find("<p>" + escaped + "<br>line 2</p>"), std::string::npos);
  EXPECT_NE(html.find("<caption>" + escaped + "</caption>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"worse\"><td>" + escaped + "</td></tr>"), std::string::npos);
  EXPECT_EQ(html.find(kHostile), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  expect_scripts_balanced(html);
}

TEST(DocumentHtml, EmbeddedJsonCannotCloseTheScript) {
  const std::string label = "</script><script>alert(1)</script> </SCRIPT > <!-- & \u00e9";
  json cfg = {{"type", "bar"}, {"data", {{"labels", {label}}, {"datasets", {{{"label", label}, {"data", {1}}}}}}}};
  Chart c{.title = label, .config = cfg, .alt_text = label};
  const std::string html =
      to_html(Document{.title = "T", .sections = {Section{.title = "S", .blocks = {c}}}}, kFakeLibrary);
  EXPECT_EQ(html.find("alert(1)</script"), std::string::npos);
  EXPECT_EQ(lower(html).find("<!--"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  expect_scripts_balanced(html);
  // The embedded JSON still means what it meant.
  const auto configs = embedded_configs(html);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0], cfg);
  // And the label as the canvas' aria-label is an escaped attribute value.
  EXPECT_NE(html.find("aria-label=\"&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);
}

TEST(DocumentHtml, NoNetworkReferences) {
  Document doc = sample_document();
  doc.sections[0].blocks.push_back(Paragraph{"see https://example.com/x and <a href=\"http://example.com\">"});
  const std::string html = to_html(doc, kFakeLibrary);
  const std::regex network(R"((src|href|srcset|action|poster)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, network));
  EXPECT_EQ(lower(html).find("<link"), std::string::npos);
  EXPECT_EQ(lower(html).find("<script src"), std::string::npos);
  EXPECT_EQ(lower(html).find("@import"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none';"), std::string::npos);
}

TEST(DocumentHtml, StructureChartsAndTables) {
  const std::string html = to_html(sample_document(), kFakeLibrary);
  EXPECT_NE(html.find("<body data-charts-expected=\"3\">"), std::string::npos);
  EXPECT_EQ(chart_count(sample_document()), 3u);
  EXPECT_EQ(embedded_configs(html).size(), 3u);
  EXPECT_EQ(count(html, "<canvas id=\"ts-chart-"), 3u);
  EXPECT_NE(html.find("<pre id=\"ts-errors\" hidden></pre>"), std::string::npos);
  // Contents: a link per section, subsections nested.
  EXPECT_NE(html.find("<nav class=\"toc\""), std::string::npos);
  EXPECT_NE(html.find("<li><a href=\"#s-1\">Summary</a></li>"), std::string::npos);
  EXPECT_NE(html.find("<li><a href=\"#s-3-1\">Memory</a></li>"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"s-3-1\">\n<h3>Memory</h3>"), std::string::npos);
  // Rows by class, numeric columns right-aligned.
  EXPECT_NE(html.find("<tr class=\"better\"><td>mlp_mnist</td><td class=\"num\">12.50</td>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"failed\">"), std::string::npos);
  EXPECT_NE(html.find("<th scope=\"col\" class=\"num\">Baseline (ms)</th>"), std::string::npos);
  EXPECT_NE(html.find("position: sticky"), std::string::npos);
  EXPECT_NE(html.find("style=\"height: 360px\""), std::string::npos);
  EXPECT_NE(html.find("@media print"), std::string::npos);
  expect_scripts_balanced(html);
}

TEST(DocumentHtml, LibraryTextCannotCloseItsScript) {
  const std::string html = to_html(sample_document(), "var s = '</script>'; var t = /<\\/SCRIPT>/;");
  EXPECT_NE(html.find("var s = '<\\/script>';"), std::string::npos);
  expect_scripts_balanced(html);
  EXPECT_THROW(to_html(sample_document(), "var s = '<!--';"), std::invalid_argument);
}

TEST(DocumentHtml, ChartJsIsInlined) {
  if (!have_chart_js()) GTEST_SKIP() << "Chart.js not installed (libjs-chart.js; scripts/setup)";
  const std::string html = to_html(sample_document());
  EXPECT_NE(html.find("Chart.js v3."), std::string::npos);
  EXPECT_TRUE(html.find(".Chart=") != std::string::npos || html.find(".Chart = ") != std::string::npos);
  EXPECT_NE(html.find("Charts drawn with Chart.js 3."), std::string::npos);
  EXPECT_GT(html.size(), chart_js_source().size());
  expect_scripts_balanced(html);
}

TEST(DocumentHtml, MissingLibraryIsAClearError) {
  ts::testing::ScratchDir dir("trainscope_document");
  const std::string missing = (dir.path() / "no-chart.min.js").string();
  EnvVar env(kChartJsEnv, missing);
  EXPECT_EQ(chart_js_path(), missing);
  try {
    (void)to_html(sample_document());
    ADD_FAILURE() << "no error for a missing library";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(missing), std::string::npos) << what;
    EXPECT_NE(what.find("libjs-chart.js"), std::string::npos) << what;
    EXPECT_NE(what.find("TRAINSCOPE_CHART_JS"), std::string::npos) << what;
  }
  // A page without charts needs no library.
  const std::string html =
      to_html(Document{.title = "T", .sections = {Section{.title = "S", .blocks = {Paragraph{"no charts here"}}}}});
  EXPECT_NE(html.find("data-charts-expected=\"0\""), std::string::npos);
  // An empty file is no library either.
  ts::testing::write_bytes(missing, "");
  EXPECT_THROW(chart_js_source(), std::runtime_error);
}

TEST(DocumentHtml, LibraryPathFromTheEnvironment) {
  ts::testing::ScratchDir dir("trainscope_document");
  const fs::path lib = dir.path() / "chart.js";
  ts::testing::write_bytes(lib, "/*! Chart.js v3.0.0-test */ window.Chart = function () {};");
  EnvVar env(kChartJsEnv, lib.string());
  const std::string html = to_html(sample_document());
  EXPECT_NE(html.find("window.Chart = function () {};"), std::string::npos);
  EXPECT_NE(html.find("Charts drawn with Chart.js 3.0.0-test"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The pages the browser check opens.

TEST(DocumentSample, WritesPages) {
  if (!have_chart_js()) GTEST_SKIP() << "Chart.js not installed (libjs-chart.js; scripts/setup)";
  std::optional<ts::testing::ScratchDir> scratch;
  fs::path dir;
  if (const char* env = std::getenv("TS_REPORT_SAMPLE_DIR"); env != nullptr && *env != '\0') {
    dir = env;
    fs::create_directories(dir);
  } else {
    scratch.emplace("trainscope_document");
    dir = scratch->path();
  }
  ts::testing::write_bytes(dir / "sample.html", to_html(sample_document()));
  ts::testing::write_bytes(dir / "sample.md", to_markdown(sample_document()));
  ts::testing::write_bytes(dir / "broken.html", to_html(broken_document()));
  for (const char* name : {"sample.html", "sample.md", "broken.html"}) EXPECT_GT(fs::file_size(dir / name), 0u) << name;
}

}  // namespace
