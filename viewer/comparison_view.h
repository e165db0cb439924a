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

#include "viewer/record_table_model.h"
#include "viewer/run_comparison.h"

class QLabel;
class QLineEdit;
class QTabWidget;
class QTableView;
class QTextBrowser;

namespace ts::viewer {

// The summary as HTML: what the view shows, testable alone.
QString comparison_html(const RunComparison& comparison);

// A record table whose cells may be empty: a column gives an invalid QVariant where a run has no
// such op or layer, shown as "—" and sorted after every number. Rows in one run only are tinted.
template <class Row>
class DeltaTableModel : public RecordTableModel<Row> {
 public:
  DeltaTableModel(std::vector<RecordColumn<Row>> columns, std::function<QString(const Row&)> one_sided, QObject* parent = nullptr)
      : RecordTableModel<Row>(std::move(columns), parent), one_sided_(std::move(one_sided)) {}

  QVariant data(const QModelIndex& index, int role) const override {
    if (!index.isValid() || index.row() >= this->rowCount() || index.column() >= this->columnCount()) return {};
    const Row& row = this->rows()[static_cast<size_t>(index.row())];
    if (role == Qt::BackgroundRole || role == Qt::ToolTipRole) {
      const QString why = one_sided_(row);
      if (why.isEmpty()) return {};
      return role == Qt::ToolTipRole ? QVariant(why) : QVariant(QColor(255, 236, 179));
    }
    if (role == Qt::DisplayRole && !RecordTableModel<Row>::data(index, kSortRole).isValid()) return QStringLiteral("—");
    return RecordTableModel<Row>::data(index, role);
  }

 private:
  std::function<QString(const Row&)> one_sided_;   // why the row is in one run only; empty: in both
};

class ComparisonView : public QWidget {
  Q_OBJECT

 public:
  // The tables' columns (tests sort and read by them).
  enum OpColumn { kOpName, kOpDevice, kOpIn, kOpBaseTotal, kOpNewTotal, kOpDeltaTotal, kOpDeltaTotalPercent, kOpBaseMean,
                  kOpNewMean, kOpDeltaMeanPercent, kOpBaseCount, kOpNewCount };
  enum LayerColumn { kLayerName, kLayerIn, kLayerBaseForward, kLayerNewForward, kLayerDeltaForwardPercent, kLayerBaseBackward,
                     kLayerNewBackward, kLayerDeltaBackwardPercent, kLayerBaseActivations, kLayerNewActivations,
                     kLayerDeltaActivations, kLayerBaseParameters, kLayerNewParameters, kLayerDeltaParameters };

  explicit ComparisonView(QWidget* parent = nullptr);

  // Reads both runs off the GUI thread; compared() or error_reported() when done. A newer request
  // makes an older one's answer stale (it is dropped).
  void compare(const RunRef& base, const RunRef& next);

  const std::optional<RunComparison>& comparison() const { return comparison_; }
  const DeltaTableModel<OpDelta>* ops_model() const { return ops_; }
  const DeltaTableModel<LayerDelta>* layers_model() const { return layers_; }
  QTableView* ops_view() const { return ops_view_; }         // its model: the sorted, filtered rows
  QTableView* layers_view() const { return layers_view_; }
  QLineEdit* ops_search() const { return ops_search_; }
  QLineEdit* layers_search() const { return layers_search_; }
  QTabWidget* tabs() const { return tabs_; }
  QString header_text() const;
  QString summary_html() const { return summary_html_; }
  QString summary_text() const;   // as shown, without markup

 signals:
  void compared();
  void error_reported(const QString& title, const QString& message);

 private:
  void show_comparison(RunComparison comparison);
  void show_message(const QString& text);   // loading, or why it failed

  QLabel* header_;
  QTabWidget* tabs_;
  QTextBrowser* summary_;
  DeltaTableModel<OpDelta>* ops_;
  DeltaTableModel<LayerDelta>* layers_;
  QLabel* ops_note_;   // what the totals cover
  QTableView* ops_view_ = nullptr;
  QTableView* layers_view_ = nullptr;
  QLineEdit* ops_search_ = nullptr;
  QLineEdit* layers_search_ = nullptr;
  QString summary_html_;
  std::optional<RunComparison> comparison_;
  uint64_t request_ = 0;   // a newer compare() makes an older answer stale
};

}  // namespace ts::viewer
