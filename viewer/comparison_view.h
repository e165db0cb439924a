#pragma once
// Two runs side by side: a header naming both, a summary judged with the statistics of
// `trainscope compare` (throughput, iteration time, phases, exposed comm with their change,
// 95% interval, p and verdict; the breakdown per rank; memory by category, exactly), and the ops
// and kernels and the layers joined with their deltas, sortable and searchable. The comparison is
// read off the GUI thread (run_comparison.h); errors arrive as a signal, never as a dialog.
#include <QColor>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "viewer/models/delta_table_model.h"
#include "viewer/models/run_comparison.h"

class QLabel;
class QLineEdit;
class QTabWidget;
class QTableView;
class QTextBrowser;

namespace ts::viewer {

// The summary as HTML: what the view shows, testable alone.
QString comparison_html(const RunComparison& comparison);

class ComparisonView : public QWidget {
  Q_OBJECT

 public:
  // The tables' columns (tests sort and read by them).
  enum OpColumn {
    kOpName,
    kOpDevice,
    kOpIn,
    kOpBaseTotal,
    kOpNewTotal,
    kOpDeltaTotal,
    kOpDeltaTotalPercent,
    kOpBaseMean,
    kOpNewMean,
    kOpDeltaMeanPercent,
    kOpBaseCount,
    kOpNewCount
  };
  enum LayerColumn {
    kLayerName,
    kLayerIn,
    kLayerBaseForward,
    kLayerNewForward,
    kLayerDeltaForwardPercent,
    kLayerBaseBackward,
    kLayerNewBackward,
    kLayerDeltaBackwardPercent,
    kLayerBaseActivations,
    kLayerNewActivations,
    kLayerDeltaActivations,
    kLayerBaseParameters,
    kLayerNewParameters,
    kLayerDeltaParameters
  };

  explicit ComparisonView(QWidget* parent = nullptr);

  // Reads both runs off the GUI thread; compared() or error_reported() when done. A newer request
  // makes an older one's answer stale (it is dropped).
  void compare(const RunRef& base, const RunRef& next);

  const std::optional<RunComparison>& comparison() const { return comparison_; }
  const DeltaTableModel<OpDelta>* ops_model() const { return ops_; }
  const DeltaTableModel<LayerDelta>* layers_model() const { return layers_; }
  QTableView* ops_view() const { return ops_view_; }  // its model: the sorted, filtered rows
  QTableView* layers_view() const { return layers_view_; }
  QLineEdit* ops_search() const { return ops_search_; }
  QLineEdit* layers_search() const { return layers_search_; }
  QTabWidget* tabs() const { return tabs_; }
  QString header_text() const;
  QString summary_html() const { return summary_html_; }
  QString summary_text() const;  // as shown, without markup

 signals:
  void compared();
  void error_reported(const QString& title, const QString& message);

 private:
  void show_comparison(RunComparison comparison);
  void show_message(const QString& text);  // loading, or why it failed

  QLabel* header_;
  QTabWidget* tabs_;
  QTextBrowser* summary_;
  DeltaTableModel<OpDelta>* ops_;
  DeltaTableModel<LayerDelta>* layers_;
  QLabel* ops_note_;  // what the totals cover
  QTableView* ops_view_ = nullptr;
  QTableView* layers_view_ = nullptr;
  QLineEdit* ops_search_ = nullptr;
  QLineEdit* layers_search_ = nullptr;
  QString summary_html_;
  std::optional<RunComparison> comparison_;
  uint64_t request_ = 0;  // a newer compare() makes an older answer stale
};

}  // namespace ts::viewer
