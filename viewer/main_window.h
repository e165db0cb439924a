#pragma once
// The viewer's window: the runs of every open database on the left (sortable, filterable), the
// selected run on the right (overview, timeline, memory, ops and kernels, layers) and two
// selected runs side by side (compare). Every read runs off the GUI thread (async_query.h); a
// database that cannot be read gets a dialog saying why, never a crash.
#include <QMainWindow>
#include <QString>

#include <cstdint>
#include <optional>

#include "viewer/models/record_table_model.h"
#include "viewer/models/run_comparison.h"
#include "viewer/models/run_details.h"

class QAction;
class QLabel;
class QModelIndex;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTabWidget;

namespace ts::viewer {

class ComparisonView;
class MemoryView;
class RunOverview;
class RunTableModel;
class TimelineView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  void open_database(const QString& path);  // async; adds its runs, or reports why it cannot
  // Re-reads every open database (runs being written); the run shown stays selected and its views
  // are read again (the timeline keeps its zoom).
  void refresh();
  void select_run(int row);                             // a row of the runs table as shown (sorted, filtered)
  void compare_rows(int base_row, int new_row);         // rows as shown; the older run is the base
  void compare_selected();                              // the two selected rows (Run > Compare, Ctrl+D)
  void set_dialogs_enabled(bool on) { dialogs_ = on; }  // tests: errors as signals only

  QTableView* runs_view() const { return runs_view_; }
  QLineEdit* runs_filter() const { return runs_filter_; }
  QTabWidget* tabs() const { return tabs_; }
  TimelineView* timeline() const { return timeline_; }
  ComparisonView* comparison() const { return comparison_; }
  MemoryView* memory() const { return memory_; }
  QTableView* ops_view() const { return ops_view_; }
  QTableView* layers_view() const { return layers_view_; }
  RunTableModel* runs_model() const { return runs_; }
  const RecordTableModel<store::OpSummaryRow>* ops_model() const { return ops_; }
  const RecordTableModel<store::LayerRow>* layers_model() const { return layers_; }

 signals:
  void database_loaded(const QString& path, int runs);
  void run_loaded(qint64 run_id);
  void error_reported(const QString& title, const QString& message);

 private:
  void report_error(const QString& title, const QString& message);
  void choose_databases();
  void show_details(const RunDetails& details);
  void highlight_row(QTableView* view, const QModelIndex& current);
  void reselect_shown_run(const QString& db);  // after `db`'s runs were read again

  RunTableModel* runs_;
  QSortFilterProxyModel* runs_proxy_;
  QTableView* runs_view_;
  QLineEdit* runs_filter_;
  QTabWidget* tabs_;
  RunOverview* overview_;
  TimelineView* timeline_;
  MemoryView* memory_;
  ComparisonView* comparison_;
  QAction* compare_action_ = nullptr;
  RecordTableModel<store::OpSummaryRow>* ops_;
  RecordTableModel<store::LayerRow>* layers_;
  QTableView* ops_view_ = nullptr;
  QTableView* layers_view_ = nullptr;
  QLabel* status_;
  uint64_t details_request_ = 0;  // a newer selection makes an older answer stale
  std::optional<RunRef> shown_;   // the run the views show
  bool dialogs_ = true;
};

}  // namespace ts::viewer
