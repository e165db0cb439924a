#pragma once
// One run at a glance: throughput and its spread, phases, the per-rank breakdown, memory at the
// peak by category (a chart and a table), the environment and the configuration.
#include <QString>
#include <QWidget>

#include "reports/run_digest.h"

class QTextBrowser;
class QChart;
class QChartView;

namespace ts::viewer {

// The overview's text as HTML (tables), from a digest: what the view shows, testable alone.
QString overview_html(const reports::RunDigest& digest);

class RunOverview : public QWidget {
  Q_OBJECT

 public:
  explicit RunOverview(QWidget* parent = nullptr);
  void show_run(const reports::RunDigest& digest);
  void show_message(const QString& text);  // nothing selected, loading, or why it failed

 private:
  void replace_chart(QChart* chart);

  QTextBrowser* text_;
  QChartView* memory_chart_;
};

}  // namespace ts::viewer
