#pragma once
// The viewer's window: the runs of every open database on the left (sortable, filterable), the
// selected run on the right (overview, ops and kernels, layers). Every read runs off the GUI
// thread (async_query.h); a database that cannot be read gets a dialog saying why, never a crash.
#include <QMainWindow>
#include <QString>

#include <cstdint>

#include "viewer/record_table_model.h"
#include "viewer/run_details.h"

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTabWidget;

namespace ts::viewer {

class RunOverview;
class RunTableModel;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  void open_database(const QString& path);   // async; adds its runs, or reports why it cannot
  void refresh();                            // re-reads every open database (runs being written)
  void select_run(int row);                  // a row of the runs table as shown (sorted, filtered)
  void set_dialogs_enabled(bool on) { dialogs_ = on; }   // tests: errors as signals only

  QTableView* runs_view() const { return runs_view_; }
  QLineEdit* runs_filter() const { return runs_filter_; }
  QTabWidget* tabs() const { return tabs_; }
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
  QTableView* make_table(QAbstractItemModel* model, const QString& search_hint, QWidget** page);

  RunTableModel* runs_;
  QSortFilterProxyModel* runs_proxy_;
  QTableView* runs_view_;
  QLineEdit* runs_filter_;
  QTabWidget* tabs_;
  RunOverview* overview_;
  RecordTableModel<store::OpSummaryRow>* ops_;
  RecordTableModel<store::LayerRow>* layers_;
  QTableView* ops_view_ = nullptr;
  QTableView* layers_view_ = nullptr;
  QLabel* status_;
  uint64_t details_request_ = 0;   // a newer selection makes an older answer stale
  bool dialogs_ = true;
};

}  // namespace ts::viewer
