#pragma once
// A run's memory over time (issue 17): live bytes stacked by category, the peak marked, and a
// click on a time shows what was live then by category and owner (the layer it was allocated
// under), from the ledger's change log (store: memory_changes). Every read runs off the GUI
// thread (async_query.h); errors are reported as a signal, never a dialog from here.
#include <QString>
#include <QWidget>

#include <cstdint>
#include <vector>

#include "store/records.h"
#include "viewer/models/memory_data.h"
#include "viewer/models/record_table_model.h"

class QChart;
class QChartView;
class QComboBox;
class QGraphicsSimpleTextItem;
class QLabel;
class QLineSeries;
class QStackedWidget;
class QTableView;

namespace ts::viewer {

class MemoryView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryView(QWidget* parent = nullptr);

  void show_run(const QString& db_path, qint64 run_id);  // async: loaded() or error_reported()
  void show_rank(qint64 rank);                           // another rank of the same run, async
  void inspect_at(qint64 t_ns);                          // what a click does: async, inspected()

  // For tests and the window around it.
  QChart* chart() const;
  const PeakMarker& peak() const { return peak_; }
  QLineSeries* peak_line() const { return peak_line_; }
  QString peak_label() const;
  qint64 origin_ns() const { return origin_ns_; }  // the time at x = 0 (the rank's first point)
  qint64 rank() const { return rank_; }
  QComboBox* rank_chooser() const { return ranks_; }
  const RecordTableModel<store::MemoryLiveRow>* live_model() const { return live_; }
  QString live_summary() const;
  QString message() const;  // the sentence shown instead of the chart ("" when the chart shows)

 signals:
  void loaded();
  void inspected(qint64 t_ns);
  void error_reported(const QString& title, const QString& message);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void load(int64_t rank);
  void show_data(const MemoryData& data);
  void show_message(const QString& text);
  void replace_chart(QChart* chart);
  void place_labels();

  QStackedWidget* pages_;
  QLabel* message_;
  QComboBox* ranks_;
  QLabel* ranks_label_;
  QLabel* changes_note_;
  QChartView* view_;
  QLabel* live_summary_;
  RecordTableModel<store::MemoryLiveRow>* live_;
  QTableView* live_view_;
  QLineSeries* peak_line_ = nullptr;
  QLineSeries* inspect_line_ = nullptr;
  QGraphicsSimpleTextItem* peak_text_ = nullptr;
  double y_top_mib_ = 0;

  QString db_;
  qint64 run_ = 0;
  qint64 rank_ = 0;
  qint64 origin_ns_ = 0;
  PeakMarker peak_;
  bool has_changes_ = false;
  uint64_t load_request_ = 0;     // a newer run or rank makes an older answer stale
  uint64_t inspect_request_ = 0;  // likewise a newer click
};

}  // namespace ts::viewer
