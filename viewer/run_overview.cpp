#include "viewer/run_overview.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHorizontalStackedBarSeries>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QValueAxis>

#include "nlohmann/json.hpp"
#include "reports/number_format.h"

namespace ts::viewer {

namespace {

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString num(double v, int decimals) { return QString::number(v, 'f', decimals); }
QString ms(double v) { return num(v, v < 10 ? 3 : 1); }

QString table(const QStringList& header, const std::vector<QStringList>& rows) {
  QString h = "<table cellspacing=0 cellpadding=3 border=1 style='border-collapse:collapse'><tr>";
  for (const auto& c : header) h += "<th>" + c + "</th>";
  h += "</tr>";
  for (const auto& r : rows) {
    h += "<tr>";
    for (const auto& c : r) h += "<td>" + c + "</td>";
    h += "</tr>";
  }
  return h + "</table>";
}

}  // namespace

QString overview_html(const reports::RunDigest& d) {
  const auto& r = d.run;
  QString h = QString("<h2>run %1 · %2</h2>").arg(r.id).arg(esc(d.key.label()));
  h += QString("<p>status <b>%1</b>").arg(esc(d.status));
  if (!r.error.empty()) h += " · " + esc(r.error);
  h += QString("<br>started %1%2 · %3 · %4 kept</p>")
           .arg(esc(r.started_at), r.ended_at.empty() ? QString() : " · ended " + esc(r.ended_at))
           .arg(QString::fromStdString(reports::counted(r.threads, "thread")))
           .arg(QString::fromStdString(
               reports::counted(static_cast<int64_t>(d.throughput_per_iteration.size()), "timed iteration")));
  // The digest's figures (docs/formulas.md, "Throughput"), each labelled as `show` labels it.
  const reports::RunFigures& f = d.figures;
  if (f.headline_per_iteration) {
    // One unit (the headline's) and the sustained rate first, as `show` prints them.
    const reports::Spread& per = *f.headline_per_iteration;
    h += "<p>";
    if (f.sustained_headline) {
      h += QString("throughput <b>%1 %2</b> sustained, one rank's")
               .arg(num(f.sustained_headline->value, 1), esc(f.sustained_headline->unit));
      if (const auto job = d.job_sustained(); job && r.ranks > 1)
        h += QString("; the job's: %1 %2").arg(num(*job, 1), esc(f.sustained_headline->unit));
      h += QString("<br>per iteration: median %1 (p10 %2, p90 %3)")
               .arg(num(per.median, 1), num(per.p10, 1), num(per.p90, 1));
    } else {
      h += QString("throughput <b>%1 %2</b> median per iteration (p10 %3, p90 %4), one rank's; no sustained rate "
                   "stored")
               .arg(num(per.median, 1), esc(per.unit), num(per.p10, 1), num(per.p90, 1));
      if (const auto job = d.job_median_per_iteration(); job && r.ranks > 1)
        h += QString("; the job's: %1 %2").arg(num(*job, 1), esc(per.unit));
    }
    h += QString("<br>iteration %1 ms median").arg(ms(f.iteration_ms_median.value_or(0)));
    if (const auto& o = d.outliers) {  // as `show` says it
      h += QString("; %1 of %2 timed iterations far slower (beyond %3 ms, Q3 + 3 IQR; slowest %4 ms)")
               .arg(o->count)
               .arg(o->of)
               .arg(ms(o->fence_ms), ms(o->slowest_ms));
    }
    h += "</p>";
  } else {
    h += "<p>no timed iterations were stored</p>";
  }
  // Whether the machine gave the run what it asked for: the digest's verdict, as `show` prints it.
  h += "<p>conditions <b>" + esc(d.conditions.verdict_line()) + "</b>";
  if (const std::string figures = d.conditions.figures_line(); !figures.empty()) h += "<br>" + esc(figures);
  h += "</p>";
  if (!d.phases.empty()) {
    std::vector<QStringList> rows;
    for (const auto& p : d.phases) rows.push_back({esc(p.phase), ms(p.median_ms), num(100 * p.share, 1) + "%"});
    if (d.unaccounted_median_ms) {
      rows.push_back({"unaccounted", ms(*d.unaccounted_median_ms), num(100 * d.unaccounted_share, 1) + "%"});
    }
    h += "<h3>Phases (median ms per timed iteration; share of their time)</h3>" + table({"phase", "ms", "share"}, rows);
  }
  if (!d.breakdown.empty()) {
    std::vector<QStringList> rows;
    for (const auto& b : d.breakdown) {
      rows.push_back({QString::number(b.rank), ms(b.iteration_ms), ms(b.compute_ms), ms(b.comm_ms), ms(b.overlap_ms),
                      ms(b.exposed_comm_ms), ms(b.idle_ms)});
    }
    h += "<h3>Breakdown per rank (median ms per timed iteration)</h3>" +
         table({"rank", "iteration", "compute", "comm", "overlap", "exposed comm", "idle"}, rows);
  }
  if (!d.memory.empty()) {
    std::vector<QStringList> rows;
    for (const auto& m : d.memory) {
      rows.push_back({esc(m.category), esc(m.tbd_class), QString::fromStdString(reports::with_commas(m.bytes)),
                      num(100.0 * d.share_of_peak(m.bytes), 1) + "%"});
    }
    h += QString("<h3>Memory at peak: %1 (the ledger, rank 0)</h3>")
             .arg(esc(reports::human_bytes(static_cast<double>(d.peak_bytes)))) +
         table({"category", "TBD class", "bytes", "share"}, rows);
  }
  if (!d.environment.empty()) {
    std::vector<QStringList> rows;
    for (const auto& e : d.environment) rows.push_back({esc(e.key), esc(e.value)});
    h += "<h3>Environment</h3>" + table({"key", "value"}, rows);
  }
  h += "<h3>Configuration</h3><pre>";
  try {
    h += esc(nlohmann::json::parse(r.config_json).dump(2));
  } catch (const std::exception&) {
    h += esc(r.config_json);
  }
  h += "</pre><p>command: <code>" + esc(r.command_line) + "</code></p>";
  return h;
}

RunOverview::RunOverview(QWidget* parent) : QWidget(parent), text_(new QTextBrowser), memory_chart_(new QChartView) {
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(text_);
  split->addWidget(memory_chart_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  memory_chart_->setRenderHint(QPainter::Antialiasing);
  memory_chart_->setMinimumHeight(160);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(split);
  show_message(tr("Open a database and select a run."));
}

void RunOverview::show_message(const QString& text) {
  text_->setHtml("<p>" + text.toHtmlEscaped() + "</p>");
  replace_chart(new QChart);
}

// QChartView takes the new chart and lets go of the old one without deleting it.
void RunOverview::replace_chart(QChart* chart) {
  QChart* old = memory_chart_->chart();
  memory_chart_->setChart(chart);
  delete old;
}

void RunOverview::show_run(const reports::RunDigest& d) {
  text_->setHtml(overview_html(d));
  // Memory at the peak by category: one stacked bar, as TBD draws it.
  auto* chart = new QChart;
  chart->setTitle(tr("Memory at peak by category (MiB)"));
  auto* series = new QHorizontalStackedBarSeries;
  for (const auto& m : d.memory) {
    auto* set = new QBarSet(QString::fromStdString(m.category));
    *set << static_cast<double>(m.bytes) / (1024.0 * 1024.0);
    series->append(set);
  }
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(QString("run %1").arg(d.run.id));
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis;
  x->setLabelFormat("%.1f");
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  chart->legend()->setAlignment(Qt::AlignBottom);
  replace_chart(chart);
}

}  // namespace ts::viewer
