#include "viewer/main_window.h"

#include <QAction>
#include <QFileDialog>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "viewer/async_query.h"
#include "viewer/comparison_view.h"
#include "viewer/memory_view.h"
#include "viewer/models/run_list.h"
#include "viewer/models/run_table_model.h"
#include "viewer/run_overview.h"
#include "viewer/searchable_table.h"
#include "viewer/timeline_view.h"

namespace ts::viewer {

namespace {

double ms(double ns) { return ns * 1e-6; }

std::vector<RecordColumn<store::OpSummaryRow>> op_columns() {
  using R = store::OpSummaryRow;
  return {
      {"op or kernel", [](const R& r) { return QVariant(QString::fromStdString(r.name)); }},
      {"device", [](const R& r) { return QVariant(QString::fromStdString(r.device)); }},
      {"count", [](const R& r) { return QVariant(static_cast<qlonglong>(r.count)); }},
      // What a typical timed iteration spends in it (self), the ranking's key; blank before v7.
      {"median ms/iteration",
       [](const R& r) { return r.median_per_iteration_ns >= 0 ? QVariant(ms(r.median_per_iteration_ns)) : QVariant(); },
       4},
      // With what the op ran (its nested ops); blank for files before schema v5.
      {"total ms",
       [](const R& r) { return r.inclusive_ns > 0 ? QVariant(ms(static_cast<double>(r.inclusive_ns))) : QVariant(); },
       3},
      {"self ms", [](const R& r) { return QVariant(ms(static_cast<double>(r.total_ns))); }, 3},
      {"mean ms", [](const R& r) { return QVariant(ms(r.mean_ns)); }, 4},
      {"median ms", [](const R& r) { return QVariant(ms(r.median_ns)); }, 4},
      {"max ms", [](const R& r) { return QVariant(ms(static_cast<double>(r.max_ns))); }, 4},
  };
}

std::vector<RecordColumn<store::LayerRow>> layer_columns() {
  using R = store::LayerRow;
  return {
      {"layer", [](const R& r) { return QVariant(QString::fromStdString(r.layer)); }},
      {"median ms",
       [](const R& r) { return r.median_per_iteration_ns >= 0 ? QVariant(ms(r.median_per_iteration_ns)) : QVariant(); },
       4},
      {"forward ms", [](const R& r) { return QVariant(ms(r.forward_ns)); }, 4},
      {"backward ms", [](const R& r) { return QVariant(ms(r.backward_ns)); }, 4},
      {"activations KiB", [](const R& r) { return QVariant(static_cast<double>(r.activation_bytes) / 1024.0); }, 1},
      {"parameters", [](const R& r) { return QVariant(static_cast<qlonglong>(r.parameter_count)); }},
      {"ops", [](const R& r) { return QVariant(QString::fromStdString(r.op_types)); }},
  };
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      runs_(new RunTableModel(this)),
      runs_proxy_(new QSortFilterProxyModel(this)),
      runs_view_(new QTableView),
      runs_filter_(new QLineEdit),
      tabs_(new QTabWidget),
      overview_(new RunOverview),
      timeline_(new TimelineView),
      memory_(new MemoryView),
      comparison_(new ComparisonView),
      ops_(new RecordTableModel<store::OpSummaryRow>(op_columns(), this)),
      layers_(new RecordTableModel<store::LayerRow>(layer_columns(), this)),
      status_(new QLabel) {
  setWindowTitle(tr("trainscope viewer"));
  runs_proxy_->setSourceModel(runs_);
  runs_proxy_->setSortRole(kSortRole);
  runs_proxy_->setFilterKeyColumn(-1);  // a filter matches any column
  runs_proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  runs_filter_->setPlaceholderText(tr("Filter runs (workload, status, device, ...)"));
  runs_filter_->setClearButtonEnabled(true);
  connect(runs_filter_, &QLineEdit::textChanged, runs_proxy_, &QSortFilterProxyModel::setFilterFixedString);
  runs_view_->setModel(runs_proxy_);
  runs_view_->setSortingEnabled(true);
  runs_view_->sortByColumn(RunTableModel::kId, Qt::AscendingOrder);
  runs_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  runs_view_->setSelectionMode(QAbstractItemView::ExtendedSelection);  // two rows: compare them
  runs_view_->verticalHeader()->hide();
  runs_view_->horizontalHeader()->setStretchLastSection(true);
  connect(runs_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (current.isValid()) select_run(current.row());
          });

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(runs_filter_);
  left_layout->addWidget(runs_view_);

  tabs_->addTab(overview_, tr("Overview"));
  tabs_->addTab(timeline_, tr("Timeline"));
  tabs_->addTab(memory_, tr("Memory"));
  const auto ops = make_searchable_table(ops_, new QSortFilterProxyModel(this), tr("Search ops and kernels"));
  ops_view_ = ops.view;
  tabs_->addTab(ops.page, tr("Ops and kernels"));
  const auto layers = make_searchable_table(layers_, new QSortFilterProxyModel(this), tr("Search layers"));
  layers_view_ = layers.view;
  tabs_->addTab(layers.page, tr("Layers"));
  tabs_->addTab(comparison_, tr("Compare"));
  connect(timeline_, &TimelineView::error_reported, this, &MainWindow::report_error);
  connect(comparison_, &ComparisonView::error_reported, this, &MainWindow::report_error);
  connect(memory_, &MemoryView::error_reported, this, &MainWindow::report_error);
  // A table's row marks its events on the timeline.
  connect(ops_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { highlight_row(ops_view_, current); });
  connect(layers_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { highlight_row(layers_view_, current); });

  auto* split = new QSplitter;
  split->addWidget(left);
  split->addWidget(tabs_);
  split->setSizes({600, 800});  // the runs table's columns up to throughput in view
  setCentralWidget(split);
  statusBar()->addWidget(status_, 1);

  auto* file = menuBar()->addMenu(tr("&File"));
  auto* open = file->addAction(tr("&Open databases..."), this, &MainWindow::choose_databases);
  open->setShortcut(QKeySequence::Open);
  auto* reload = file->addAction(tr("&Refresh"), this, &MainWindow::refresh);
  reload->setShortcut(QKeySequence::Refresh);
  auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);
  auto* run_menu = menuBar()->addMenu(tr("&Run"));
  compare_action_ = run_menu->addAction(tr("&Compare the two selected runs"), this, &MainWindow::compare_selected);
  compare_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_D));
  compare_action_->setEnabled(false);
  connect(runs_view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { compare_action_->setEnabled(runs_view_->selectionModel()->selectedRows().size() == 2); });
  resize(1400, 850);
}

void MainWindow::choose_databases() {
  const QStringList files = QFileDialog::getOpenFileNames(this, tr("Open trainscope databases"), QString(),
                                                          tr("trainscope databases (*.db *.sqlite);;All files (*)"));
  for (const auto& f : files) open_database(f);
}

void MainWindow::open_database(const QString& path) {
  status_->setText(tr("Reading %1 ...").arg(path));
  run_query<std::vector<RunListEntry>>(
      this, [p = path.toStdString()] { return list_runs(p); },
      [this, path](QueryResult<std::vector<RunListEntry>> r) {
        if (!r.value) {
          status_->setText(tr("Could not open %1").arg(path));
          report_error(tr("Cannot open %1").arg(path), r.error);
          return;
        }
        const int n = static_cast<int>(r.value->size());
        runs_->set_runs(path, std::move(*r.value));
        runs_view_->resizeColumnsToContents();
        status_->setText(n == 1 ? tr("%1: 1 run").arg(path) : tr("%1: %2 runs").arg(path).arg(n));
        reselect_shown_run(path);
        emit database_loaded(path, n);
      });
}

void MainWindow::refresh() {
  for (const auto& db : runs_->databases()) open_database(db);
}

void MainWindow::reselect_shown_run(const QString& db) {
  if (!shown_ || shown_->db != db) return;
  for (int row = 0; row < runs_->rowCount(); ++row) {
    const RunListEntry& e = runs_->entry(row);
    if (e.db != db || e.run.id != shown_->run) continue;
    const QModelIndex shown = runs_proxy_->mapFromSource(runs_->index(row, 0));
    if (!shown.isValid()) return;  // filtered out: the views keep what they show
    // Resetting the model cleared the current row; setting it again reads the run anew.
    runs_view_->selectionModel()->setCurrentIndex(shown,
                                                  QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    return;
  }
}

void MainWindow::select_run(int row) {
  const QModelIndex source = runs_proxy_->mapToSource(runs_proxy_->index(row, 0));
  if (!source.isValid()) return;
  const RunListEntry& e = runs_->entry(source.row());
  shown_ = RunRef{e.db, e.run.id};
  const uint64_t request = ++details_request_;
  overview_->show_message(tr("Reading run %1 ...").arg(e.run.id));
  timeline_->show_run(e.db, e.run.id);
  memory_->show_run(e.db, e.run.id);
  run_query<RunDetails>(
      this, [db = e.db.toStdString(), id = e.run.id] { return load_run_details(db, id); },
      [this, request, db = e.db, id = e.run.id](QueryResult<RunDetails> r) {
        if (request != details_request_) return;  // the user has moved on
        if (!r.value) {
          overview_->show_message(tr("Run %1 of %2 could not be read: %3").arg(id).arg(db, r.error));
          report_error(tr("Cannot read run %1").arg(id), r.error);
          return;
        }
        show_details(*r.value);
        emit run_loaded(id);
      });
}

void MainWindow::compare_selected() {
  const auto rows = runs_view_->selectionModel()->selectedRows();
  if (rows.size() != 2) {
    report_error(tr("Compare"), tr("Select exactly two runs (Ctrl+click) to compare them."));
    return;
  }
  compare_rows(rows[0].row(), rows[1].row());
}

void MainWindow::compare_rows(int base_row, int new_row) {
  auto ref = [this](int row) -> std::optional<RunRef> {
    const QModelIndex source = runs_proxy_->mapToSource(runs_proxy_->index(row, 0));
    if (!source.isValid()) return std::nullopt;
    const RunListEntry& e = runs_->entry(source.row());
    return RunRef{e.db, e.run.id};
  };
  auto base = ref(base_row), next = ref(new_row);
  if (!base || !next) return;
  // The older run is the base, as `trainscope compare BASE NEW` reads.
  if (base->db == next->db && base->run > next->run) std::swap(base, next);
  comparison_->compare(*base, *next);
  tabs_->setCurrentWidget(comparison_);
}

void MainWindow::highlight_row(QTableView* view, const QModelIndex& current) {
  const auto* proxy = static_cast<const QSortFilterProxyModel*>(view->model());
  const QModelIndex source = proxy->mapToSource(current);
  if (!source.isValid()) return timeline_->highlight({}, false);
  const auto row = static_cast<size_t>(source.row());
  if (view == ops_view_ && row < ops_->rows().size())
    timeline_->highlight(QString::fromStdString(ops_->rows()[row].name), false);
  else if (view == layers_view_ && row < layers_->rows().size())
    timeline_->highlight(QString::fromStdString(layers_->rows()[row].layer), true);
}

void MainWindow::show_details(const RunDetails& d) {
  overview_->show_run(d.digest);
  // The order `show` and the report rank them in (reports/run_digest.h, "Rankings"), until a
  // header is clicked.
  auto ops = d.ops;
  reports::rank_op_rows(ops);
  auto layers = d.layers;
  reports::rank_layer_rows(layers);
  ops_->set_rows(std::move(ops));
  layers_->set_rows(std::move(layers));
  ops_view_->resizeColumnsToContents();
  layers_view_->resizeColumnsToContents();
}

void MainWindow::report_error(const QString& title, const QString& message) {
  emit error_reported(title, message);
  if (!dialogs_) return;
  auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // not exec(): the window goes on
}

}  // namespace ts::viewer
