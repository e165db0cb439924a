// The suite report's charts say what they show (issue 38): phase shares of the timed iterations'
// time with the unaccounted share, memory in MiB beside its shares, whole rank ticks and a
// p10-p90 band on the scaling and batch curves, oneDNN's reorders with the layout work, and
// enough colours for every op class.
#include "reports/suite_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "reports/document.h"
#include "reports/op_class.h"

using namespace ts::reports;

namespace {

RunDigest run(int64_t id, int64_t ranks, int64_t batch, double ms) {
  RunDigest d;
  d.run.id = id;
  d.key = {"resnet50", "tiny", "cpu", batch, ranks};
  d.status = "completed";
  d.unit = "images/s";
  for (int i = 0; i < 20; ++i) {
    const double t = ms * (1 + 0.01 * (i % 5));
    d.iteration_ms.push_back(t);
    d.throughput_per_iteration.push_back(static_cast<double>(batch) / (t * 1e-3));
  }
  // forward 60% and backward 30% of the timed iterations' time: 10% in no phase.
  d.phases = {{"forward", std::vector<double>(20, 0.6 * ms), 0.6 * ms, 0.6},
              {"backward", std::vector<double>(20, 0.3 * ms), 0.3 * ms, 0.3}};
  d.unaccounted_median_ms = 0.1 * ms;
  d.unaccounted_share = 0.1;
  d.memory = {{"weights", "Weights", 3 << 20}, {"activations", "Feature maps", 5 << 20}};
  d.peak_bytes = 8 << 20;
  return d;
}

std::vector<Chart> charts_of(const Section& s) {
  std::vector<Chart> out;
  for (const auto& b : s.blocks) {
    if (const auto* c = std::get_if<Chart>(&b)) out.push_back(*c);
  }
  for (const auto& sub : s.subsections) {
    for (auto& c : charts_of(sub)) out.push_back(c);
  }
  return out;
}

const Chart* chart_titled(const std::vector<Chart>& charts, const std::string& start) {
  for (const auto& c : charts) {
    if (c.title.rfind(start, 0) == 0) return &c;
  }
  return nullptr;
}

}  // namespace

TEST(SuiteReport, PhaseSharesAreOfTheIterationsTimeWithTheUnaccountedShare) {
  const Document doc = suite_report_document({run(1, 1, 4, 10.0)}, "test.db");
  std::vector<Chart> charts;
  for (const auto& s : doc.sections) {
    for (auto& c : charts_of(s)) charts.push_back(c);
  }
  const Chart* phases = chart_titled(charts, "Time per phase");
  ASSERT_NE(phases, nullptr);
  EXPECT_EQ(phases->title, "Time per phase (% of the timed iterations' time)");
  double total = 0;
  std::set<std::string> names;
  for (const auto& ds : phases->config["data"]["datasets"]) {
    names.insert(ds["label"]);
    total += ds["data"][0].get<double>();
  }
  EXPECT_EQ(names, (std::set<std::string>{"forward", "backward", "unaccounted"}));
  EXPECT_NEAR(total, 100.0, 1e-9);
  for (const auto& ds : phases->config["data"]["datasets"]) {
    if (ds["label"] == "forward") {
      EXPECT_NEAR(ds["data"][0].get<double>(), 60.0, 1e-9);  // the stored share, not forward / (forward + backward)
    }
  }
  // The per-configuration table has the unaccounted row too.
  const std::string md = to_markdown(doc);
  EXPECT_NE(md.find("| unaccounted | 1.00 | 10.0% |"), std::string::npos) << md;
  // Memory: MiB first, then shares.
  const Chart* mib = chart_titled(charts, "Memory at peak by category (MiB)");
  ASSERT_NE(mib, nullptr);
  for (const auto& ds : mib->config["data"]["datasets"]) {
    EXPECT_EQ(ds["data"][0].get<double>(), ds["label"] == "weights" ? 3.0 : 5.0);
  }
  EXPECT_FALSE(mib->config["options"]["scales"]["x"].contains("max"));  // not normalised to 100
  EXPECT_NE(chart_titled(charts, "Memory at peak by category (% of peak)"), nullptr);
}

TEST(SuiteReport, ScalingAndBatchCurvesHaveWholeRankTicksAndABand) {
  const Document doc = suite_report_document(
      {run(1, 1, 4, 10.0), run(2, 2, 4, 11.0), run(3, 3, 4, 12.0), run(4, 1, 8, 18.0)}, "test.db");
  std::vector<Chart> charts;
  for (const auto& s : doc.sections) {
    for (auto& c : charts_of(s)) charts.push_back(c);
  }
  const Chart* scaling = chart_titled(charts, "resnet50/tiny cpu batch 4 per rank");
  ASSERT_NE(scaling, nullptr);
  EXPECT_EQ(scaling->config["options"]["scales"]["x"]["ticks"]["stepSize"], 1);
  EXPECT_EQ(scaling->config["options"]["scales"]["x"]["ticks"]["precision"], 0);
  const auto& ds = scaling->config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 4u);  // median, linear scaling, p10, p90 filled down to p10
  EXPECT_EQ(ds[3]["fill"], "-1");
  for (size_t i = 0; i < ds[0]["data"].size(); ++i) {
    const double lo = ds[2]["data"][i]["y"], mid = ds[0]["data"][i]["y"], hi = ds[3]["data"][i]["y"];
    EXPECT_LE(lo, mid);
    EXPECT_LE(mid, hi);
    EXPECT_LT(lo, hi);  // the iterations spread by up to 4%
  }
  const Chart* batch = chart_titled(charts, "resnet50/tiny cpu: throughput against batch size");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->config["data"]["datasets"].size(), 3u);
}

TEST(SuiteReport, ReordersAreLayoutWorkAndEveryOpClassHasItsOwnColour) {
  EXPECT_EQ(op_class("reorder"), "layout & copies");
  EXPECT_EQ(op_class("reorder_backward"), "layout & copies");
  EXPECT_EQ(op_class("conv2d"), "convolution");  // still first
  // The page's palette: at least as many distinct colours as there are op classes (11).
  Document d;
  d.title = "t";
  const std::string html = to_html(d);
  const std::smatch m = [&] {
    std::smatch s;
    std::regex_search(html, s, std::regex(R"(var PALETTE = \[([^\]]*)\])"));
    return s;
  }();
  ASSERT_FALSE(m.empty());
  std::set<std::string> colours;
  const std::string list = m[1];
  const std::regex colour("'(#[0-9A-Fa-f]{6})'");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), colour); it != std::sregex_iterator(); ++it)
    colours.insert((*it)[1]);
  EXPECT_GE(colours.size(), 11u);
}

// Repeats pooled: an op is ranked by the mean of the repeats' medians per iteration, and by its
// total where a repeat stored none.
TEST(SuiteReport, TopOpsRankByTheRepeatsMediansWhereEveryRepeatHasOne) {
  auto with_ops = [](RunDigest d, double relu_median, std::optional<double> conv_median) {
    d.figures.timed_iterations = 20;
    d.ops = {{"relu", 20, 200.0, "cpu", 0, relu_median}, {"conv", 20, 100.0, "cpu", 0, conv_median}};
    return d;
  };
  const std::string both = to_markdown(suite_report_document(
      {with_ops(run(1, 1, 4, 10.0), 0.5, 2.0), with_ops(run(2, 1, 4, 10.0), 0.7, 4.0)}, "test.db"));
  // conv first (median 3.00 against relu's 0.600), though relu's total is twice conv's.
  EXPECT_LT(both.find("| conv |"), both.find("| relu |")) << both;
  EXPECT_NE(both.find("| 3.00 |"), std::string::npos) << both;
  const std::string one_missing = to_markdown(suite_report_document(
      {with_ops(run(1, 1, 4, 10.0), 0.5, 2.0), with_ops(run(2, 1, 4, 10.0), 0.7, std::nullopt)}, "test.db"));
  EXPECT_LT(one_missing.find("| relu |"), one_missing.find("| conv |")) << one_missing;  // by total
}

namespace {
const Table* table_captioned(const Document& doc, const std::string& start) {
  std::function<const Table*(const Section&)> find = [&](const Section& s) -> const Table* {
    for (const auto& b : s.blocks) {
      if (const auto* t = std::get_if<Table>(&b); t && t->caption.rfind(start, 0) == 0) return t;
    }
    for (const auto& sub : s.subsections) {
      if (const auto* t = find(sub)) return t;
    }
    return nullptr;
  };
  for (const auto& s : doc.sections) {
    if (const auto* t = find(s)) return t;
  }
  return nullptr;
}
}  // namespace

// One statistic everywhere (issue 38): the report leads with the sustained rate (the median of
// the repeats'), as `show` and `runs` do, labels the median per iteration beside it, and marks
// each row measured on a busy machine, in the scaling and batch tables too.
TEST(SuiteReport, RowsLeadWithTheSustainedRateAndFlagNoisyRuns) {
  std::vector<RunDigest> runs = {run(1, 1, 4, 10.0), run(2, 1, 4, 10.0), run(3, 2, 4, 11.0), run(4, 1, 8, 18.0)};
  runs[0].figures.sustained_headline = Rate{390.0, "images/s"};
  runs[1].figures.sustained_headline = Rate{380.0, "images/s"};
  runs[2].figures.sustained_headline = Rate{350.0, "images/s"};
  runs[2].conditions.verdict = Conditions::Verdict::noisy;  // run 4 stored no sustained rate
  const Document doc = suite_report_document(runs, "test.db");
  const Table* summary = table_captioned(doc, "Per configuration");
  ASSERT_NE(summary, nullptr);
  ASSERT_EQ(summary->rows.size(), 3u);
  EXPECT_EQ(summary->header[2], "throughput (sustained)");
  EXPECT_EQ(summary->rows[0][2], "385 images/s");  // the median of 390 and 380
  EXPECT_NE(summary->rows[2][2].find("(median per iteration)"), std::string::npos) << summary->rows[2][2];
  EXPECT_EQ(summary->rows[1][5], "700 images/s");  // the job's: 2 ranks x 350
  EXPECT_EQ(summary->row_class[1], "warning");
  EXPECT_EQ(summary->row_class[0], "");
  const Table* scaling = table_captioned(doc, "resnet50/tiny cpu batch 4 per rank: job throughput");
  ASSERT_NE(scaling, nullptr);
  ASSERT_EQ(scaling->rows.size(), 2u);
  EXPECT_EQ(scaling->rows[1][3], "noisy (1 of 1)");
  EXPECT_EQ(scaling->row_class, (std::vector<std::string>{"", "warning"}));
  EXPECT_EQ(scaling->rows[1][2], fmt::format("{:.0f}%", 100.0 * 700 / (2 * 385)));
  const Table* batch = table_captioned(doc, "resnet50/tiny cpu: throughput per rank against batch size");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->rows.size(), 2u);
}

// Issue 41: a run whose ranks' collectives were split gets, per rank, its waiting and moving as a
// table and stacked bars, and the straggler named; a run without a split gets neither.
TEST(SuiteReport, ARunsCollectivesAreSplitPerRankIntoWaitingAndMovingWithTheStragglerNamed) {
  RunDigest split = run(1, 2, 4, 10.0);
  split.wait_move = {{0, 3.0, 40.0, 1, 0.5, 0.118}, {1, 0.5, 41.0, 9, 3.0, 0.115}};
  split.split_calls = 10;
  split.wait_move_uncertainty_ns = 9'000;
  RunDigest plain = run(2, 2, 8, 10.0);
  const Document doc = suite_report_document({split, plain}, "test.db");
  std::vector<Chart> charts;
  std::vector<Table> tables;
  std::string text;
  std::function<void(const Section&)> walk = [&](const Section& s) {
    for (const auto& b : s.blocks) {
      if (const auto* c = std::get_if<Chart>(&b)) charts.push_back(*c);
      if (const auto* t = std::get_if<Table>(&b)) tables.push_back(*t);
      if (const auto* p = std::get_if<Paragraph>(&b)) text += p->text + "\n";
    }
    for (const auto& sub : s.subsections) walk(sub);
  };
  for (const auto& s : doc.sections) walk(s);
  int split_charts = 0;
  for (const auto& c : charts) {
    if (c.title.rfind("Collectives per rank: waiting", 0) != 0) continue;
    ++split_charts;
    const auto& ds = c.config["data"]["datasets"];
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_EQ(ds[0]["label"], "waiting");
    EXPECT_EQ(ds[0]["data"], nlohmann::json({3.0, 0.5}));
    EXPECT_EQ(ds[1]["data"], nlohmann::json({40.0, 41.0}));
  }
  EXPECT_EQ(split_charts, 1) << "one chart, for the run with a split";
  const Table* t = nullptr;
  for (const auto& x : tables)
    if (x.caption.find("run 1 split into waiting") != std::string::npos) t = &x;
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->caption.find("10 calls on rank 0's clock, good to 9.00 us"), std::string::npos) << t->caption;
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[1], (std::vector<std::string>{"1", "0.500", "41.0", "0.115", "9", "3.00"}));
  EXPECT_NE(text.find("Straggler: rank 1, last to arrive in 9 of 10 calls; the others waited 3.00 ms"),
            std::string::npos)
      << text;
}

// The error ledger in the report (issue 44): a row per checked projection of a selected run, marked
// beyond 10%, the median and 90th percentile of |error|, and the same rows in the JSON; none
// where no run has one.
TEST(SuiteReport, ProjectionsAreSetAgainstTheRunsTheyProject) {
  std::vector<RunDigest> runs = {run(1, 2, 16, 100), run(2, 2, 16, 100)};
  EXPECT_FALSE(std::any_of(suite_report_document(runs, "t").sections.begin(),
                           suite_report_document(runs, "t").sections.end(),
                           [](const Section& s) { return s.title == "Projections against measured"; }));
  ts::store::ProjectionRow close, far, unchecked;
  close.run_id = 7;
  close.strategy = "allreduce";
  close.knobs_json = R"({"bucket_mb":25,"overlap":false,"priority":false})";
  close.link = "sweep 3";
  close.projected_ns = 102e6;
  close.measured_ns = 100e6;
  close.error = 0.02;
  far = close;
  far.run_id = 8;
  far.strategy = "ps";
  far.knobs_json = R"({"chunk_mb":1})";
  far.projected_ns = 80e6;
  far.error = -0.2;
  unchecked = close;
  unchecked.error.reset();
  runs[0].projections = {close, unchecked};
  runs[1].projections = {far};
  const Document doc = suite_report_document(runs, "t");
  const auto s = std::find_if(doc.sections.begin(), doc.sections.end(),
                              [](const Section& x) { return x.title == "Projections against measured"; });
  ASSERT_NE(s, doc.sections.end());
  const auto* t = std::get_if<Table>(&s->blocks.at(0));
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 2u);  // the unchecked projection has no error to show
  EXPECT_EQ(t->rows[0][3], "25 MiB buckets, no overlap");
  EXPECT_EQ(t->rows[0][7], "+2.0%");
  EXPECT_EQ(t->rows[1][3], "ps sync, 1 MiB keys");
  EXPECT_EQ(t->row_class, (std::vector<std::string>{"", "warning"}));
  const auto* p = std::get_if<Paragraph>(&s->blocks.at(1));
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->text.find("|error| median 11.0%"), std::string::npos) << p->text;
  const auto j = suite_report_json(runs, "t");
  ASSERT_EQ(j["projections"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["projections"][1]["error"].get<double>(), -0.2);
  EXPECT_EQ(j["projections"][1]["measured_run"], 2);
}
