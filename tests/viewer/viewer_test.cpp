// trainscope-viewer's window and models on real runs (made by the trainscope command), under
// the offscreen platform: what the models hold is what the store holds, filtering and sorting,
// a selected run's overview and tables, refreshing a database that gained a run or a run still
// being written (it stays selected, its timeline grows and keeps its zoom), clear errors
// for missing, foreign, corrupt and newer files, and every view rendered to a non-blank image.
#include <QAbstractItemModel>
#include <QDir>
#include <QImage>
#include <QLineEdit>
#include <QProcess>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "store/reader.h"
#include "tests/viewer/viewer_test_support.h"
#include "viewer/comparison_view.h"
#include "viewer/main_window.h"
#include "viewer/memory_view.h"
#include "viewer/models/run_details.h"
#include "viewer/models/run_table_model.h"
#include "viewer/run_overview.h"
#include "viewer/timeline_view.h"

using ts::viewer::MainWindow;
using ts::viewer::RunTableModel;

using namespace ts::viewer::testing;

class ViewerTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;

  QString path(const QString& name) const { return dir_.filePath(name); }

  void open(MainWindow& w, const QString& db) {
    QSignalSpy loaded(&w, &MainWindow::database_loaded);
    w.open_database(db);
    QVERIFY(loaded.wait(20000));
  }

  void select(MainWindow& w, int row) {
    QSignalSpy loaded(&w, &MainWindow::run_loaded);
    w.select_run(row);
    QVERIFY(loaded.wait(30000));
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = path("runs.db");
    const std::string db = db_.toStdString();
    for (const char* args : {"run resnet50 --preset tiny --iters 4 --warmup 1 --eval-batches 0 --threads 1",
                             "run transformer --preset tiny --iters 4 --warmup 1 --eval-batches 0 --threads 1",
                             "run wgan --preset tiny --iters 3 --warmup 1 --eval-batches 0 --threads 1"}) {
      QVERIFY2(run_command(std::string(TRAINSCOPE_BIN) + " " + args + " --db " + db), args);
    }
    // Run 3 as a process killed mid-run leaves it: `running`, written by a pid that is gone.
    sql(db_, "UPDATE runs SET status = 'running', ended_at = '', pid = 2147483000, pid_start = 1 WHERE id = 3");
  }

  void theRunsTableHoldsWhatTheStoreHolds() {
    MainWindow w;
    open(w, db_);
    const RunTableModel& m = *w.runs_model();
    ts::store::Reader reader(db_.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(m.rowCount(), static_cast<int>(runs.size()));
    for (int row = 0; row < m.rowCount(); ++row) {
      const auto& e = m.entry(row);
      const auto& r = runs[static_cast<size_t>(row)];
      QCOMPARE(e.run.id, r.id);
      QCOMPARE(m.data(m.index(row, RunTableModel::kWorkload), Qt::DisplayRole).toString(),
               QString::fromStdString(r.workload));
      QCOMPARE(m.data(m.index(row, RunTableModel::kBatch), Qt::DisplayRole).toLongLong(), r.batch_size);
      // The headline rate, sustained, in the workload's unit (resnet50: images/s, transformer: tokens/s).
      double stored = -1;
      std::string unit;
      for (const auto& metric : reader.metrics(r.id)) {
        if (metric.iteration < 0 && metric.name == "headline_throughput") {
          stored = metric.value;
          unit = metric.unit;
        }
      }
      if (r.id != 3) {
        QVERIFY(e.throughput.has_value());
        QCOMPARE(*e.throughput, stored);
        QCOMPARE(e.throughput_unit, QString::fromStdString(unit));
        QCOMPARE(e.throughput_unit, QString(r.workload == "resnet50" ? "images/s" : "tokens/s"));
        QVERIFY(m.data(m.index(row, RunTableModel::kThroughput), Qt::DisplayRole)
                    .toString()
                    .endsWith(" " + e.throughput_unit));
      }
    }
    QCOMPARE(m.data(m.index(0, RunTableModel::kStatus), Qt::DisplayRole).toString(), QString("completed"));
    QCOMPARE(m.data(m.index(2, RunTableModel::kStatus), Qt::DisplayRole).toString(),
             QString("lost"));  // its writer is gone
    QVERIFY(m.data(m.index(2, RunTableModel::kStatus), Qt::ForegroundRole).isValid());
  }

  void filteringAndSortingTheRuns() {
    MainWindow w;
    open(w, db_);
    QAbstractItemModel* shown = w.runs_view()->model();
    QCOMPARE(shown->rowCount(), 3);
    w.runs_filter()->setText("TRANSFORMER");
    QCOMPARE(shown->rowCount(), 1);
    QCOMPARE(shown->data(shown->index(0, RunTableModel::kWorkload)).toString(), QString("transformer"));
    w.runs_filter()->setText("lost");
    QCOMPARE(shown->rowCount(), 1);
    w.runs_filter()->clear();
    w.runs_view()->sortByColumn(RunTableModel::kThroughput, Qt::DescendingOrder);
    for (int row = 1; row < shown->rowCount(); ++row) {
      QVERIFY(shown->data(shown->index(row - 1, RunTableModel::kThroughput), ts::viewer::kSortRole).toDouble() >=
              shown->data(shown->index(row, RunTableModel::kThroughput), ts::viewer::kSortRole).toDouble());
    }
    w.runs_view()->sortByColumn(RunTableModel::kId, Qt::DescendingOrder);  // numbers as numbers
    QCOMPARE(shown->data(shown->index(0, RunTableModel::kId), ts::viewer::kSortRole).toLongLong(), 3);
  }

  void aSelectedRunFillsTheOverviewAndTables() {
    MainWindow w;
    open(w, db_);
    w.runs_view()->sortByColumn(RunTableModel::kId, Qt::AscendingOrder);
    select(w, 0);
    ts::store::Reader reader(db_.toStdString());
    QCOMPARE(w.ops_model()->rowCount(), static_cast<int>(reader.op_summary(1).size()));
    QCOMPARE(w.layers_model()->rowCount(), static_cast<int>(reader.layers(1).size()));
    QVERIFY(w.ops_model()->rowCount() > 5);
    // Ranked as `show` and the report rank them: slowest first by the median per iteration.
    auto ranked = reader.op_summary(1);
    ts::reports::rank_op_rows(ranked);
    QCOMPARE(w.ops_model()->rows().front().name, ranked.front().name);
    QVERIFY(ranked.front().median_per_iteration_ns >= 0);
    QCOMPARE(w.ops_model()->rows().front().name,
             ts::viewer::load_run_details(db_.toStdString(), 1).digest.ops.front().name);
    auto layers = reader.layers(1);
    ts::reports::rank_layer_rows(layers);
    QCOMPARE(w.layers_model()->rows().front().layer, layers.front().layer);
    // Total (inclusive) and self time side by side: never less, and more where an op ran others.
    bool nested = false;
    for (const auto& o : reader.op_summary(1)) {
      QVERIFY2(o.inclusive_ns >= o.total_ns, o.name.c_str());
      nested = nested || o.inclusive_ns > o.total_ns;
    }
    QVERIFY(nested);
    QCOMPARE(w.ops_model()->headerData(3, Qt::Horizontal, Qt::DisplayRole).toString(), QString("median ms/iteration"));
    QCOMPARE(w.ops_model()->headerData(4, Qt::Horizontal, Qt::DisplayRole).toString(), QString("total ms"));
    QCOMPARE(w.ops_model()->headerData(5, Qt::Horizontal, Qt::DisplayRole).toString(), QString("self ms"));
    const auto details = ts::viewer::load_run_details(db_.toStdString(), 1);
    const QString html = ts::viewer::overview_html(details.digest);
    for (const char* part :
         {"throughput", "Phases", "forward", "Memory at peak", "activations", "Environment", "Configuration"}) {
      QVERIFY2(html.contains(part), part);
    }
    // The digest's verdict on the machine's conditions, as `show` prints it.
    QVERIFY(html.contains("conditions <b>" +
                          QString::fromStdString(details.digest.conditions.verdict_line()).toHtmlEscaped()));
    // The lost run: what it streamed, and its status.
    select(w, 2);
    QVERIFY(ts::viewer::overview_html(ts::viewer::load_run_details(db_.toStdString(), 3).digest).contains("lost"));
  }

  void refreshShowsRunsAddedSinceOpening() {
    const QString db = path("growing.db");
    QVERIFY(QFile::copy(db_, db));
    MainWindow w;
    open(w, db);
    QCOMPARE(w.runs_model()->rowCount(), 3);
    QVERIFY(run_command(std::string(TRAINSCOPE_BIN) +
                        " run a3c --preset tiny --iters 2 --warmup 1 --eval-batches 0 --db " + db.toStdString()));
    QSignalSpy loaded(&w, &MainWindow::database_loaded);
    w.refresh();
    QVERIFY(loaded.wait(20000));
    QCOMPARE(w.runs_model()->rowCount(), 4);
  }

  // A run the trainscope command is still writing: F5 reads it again, the run stays selected, the
  // timeline holds the events streamed since and keeps a zoomed-in view where it was.
  void aRunBeingWrittenIsRefreshedInPlace() {
    const QString db = path("live.db");
    QProcess run;
    run.start(QString(TRAINSCOPE_BIN),
              {"run", "resnet50", "--preset", "tiny", "--iters", "1000000", "--warmup", "1", "--eval-batches", "0",
               "--threads", "1", "--flush-interval", "0.2", "--db", db});
    QVERIFY(run.waitForStarted());
    const std::string streamed_events = "SELECT count(*) FROM events WHERE run_id = 1";
    QTRY_VERIFY_WITH_TIMEOUT(query_number(db, "SELECT count(*) FROM iterations WHERE run_id = 1") >= 2, 60000);

    MainWindow w;
    open(w, db);
    QSignalSpy timeline_loaded(w.timeline(), &ts::viewer::TimelineView::loaded);
    select(w, 0);
    QVERIFY(timeline_loaded.count() > 0 || timeline_loaded.wait(30000));
    QCOMPARE(w.runs_model()->entry(0).status, QString("running"));
    const int64_t events_before = w.timeline()->event_count();
    QVERIFY(events_before > 0);
    const int64_t from = w.timeline()->view_from(), to = w.timeline()->view_to();
    QSignalSpy window_ready(w.timeline(), &ts::viewer::TimelineView::window_ready);
    w.timeline()->set_view(from + (to - from) / 4, from + (to - from) / 2);
    QVERIFY(window_ready.wait(10000));
    const int64_t zoomed_from = w.timeline()->view_from(), zoomed_to = w.timeline()->view_to();

    QTRY_VERIFY_WITH_TIMEOUT(query_number(db, streamed_events) > events_before + 100, 60000);
    QSignalSpy details_loaded(&w, &MainWindow::run_loaded);
    timeline_loaded.clear();
    w.refresh();
    QVERIFY(details_loaded.wait(30000));
    QVERIFY(timeline_loaded.count() > 0 || timeline_loaded.wait(30000));
    QCOMPARE(w.runs_view()->selectionModel()->currentIndex().row(), 0);
    QVERIFY2(
        w.timeline()->event_count() > events_before + 100,
        qPrintable(
            QString("%1 events after the refresh, %2 before").arg(w.timeline()->event_count()).arg(events_before)));
    QCOMPARE(w.timeline()->view_from(), zoomed_from);
    QCOMPARE(w.timeline()->view_to(), zoomed_to);

    run.terminate();  // SIGTERM: the run ends `interrupted` after its step
    QVERIFY(run.waitForFinished(60000));
  }

  void unreadableFilesAreReportedAndChangeNothing() {
    std::ofstream(path("foreign.txt").toStdString()) << "not a database\n";
    {
      std::ofstream corrupt(path("corrupt.db").toStdString(), std::ios::binary);
      corrupt << std::string("SQLite format 3\0", 16) << std::string(4096, '\x5a');
    }
    QVERIFY(QFile::copy(db_, path("newer.db")));
    sql(path("newer.db"), "PRAGMA user_version = 9999");
    sql(path("other_app.db"), "CREATE TABLE t(x)");
    const std::vector<std::pair<QString, QString>> cases = {{path("missing.db"), "missing"},
                                                            {path("foreign.txt"), ""},
                                                            {path("corrupt.db"), ""},
                                                            {path("newer.db"), "newer trainscope"},
                                                            {path("other_app.db"), "another application"}};
    MainWindow w;
    w.set_dialogs_enabled(false);
    open(w, db_);
    for (const auto& [file, words] : cases) {
      QSignalSpy errors(&w, &MainWindow::error_reported);
      w.open_database(file);
      QVERIFY2(errors.wait(20000), qPrintable(file));
      const QString message = errors.at(0).at(1).toString();
      QVERIFY2(!message.isEmpty(), qPrintable(file));
      QVERIFY2(words.isEmpty() || message.contains(words, Qt::CaseInsensitive), qPrintable(message));
      QCOMPARE(w.runs_model()->rowCount(), 3);  // what was open stays
    }
    // With dialogs on, the error is a window-modal box that does not block the event loop.
    w.set_dialogs_enabled(true);
    QSignalSpy errors(&w, &MainWindow::error_reported);
    w.open_database(path("newer.db"));
    QVERIFY(errors.wait(20000));
  }

  void everyViewRendersSomething() {
    MainWindow w;
    w.resize(1400, 850);
    w.show();
    open(w, db_);
    w.runs_view()->sortByColumn(RunTableModel::kId, Qt::AscendingOrder);
    QSignalSpy timeline(w.timeline(), &ts::viewer::TimelineView::loaded);
    QSignalSpy memory(w.memory(), &ts::viewer::MemoryView::loaded);
    select(w, 0);
    QVERIFY(timeline.count() > 0 || timeline.wait(30000));
    QVERIFY(memory.count() > 0 || memory.wait(30000));
    QSignalSpy compared(w.comparison(), &ts::viewer::ComparisonView::compared);
    w.compare_rows(0, 1);
    QVERIFY(compared.wait(30000));
    QDir().mkpath(VIEWER_SHOTS_DIR);
    for (int tab = 0; tab < w.tabs()->count(); ++tab) {
      w.tabs()->setCurrentIndex(tab);
      QTest::qWait(50);
      const QString name = w.tabs()->tabText(tab).toLower().replace(' ', '_');
      const QImage window = w.grab().toImage();
      const QImage page = w.tabs()->currentWidget()->grab().toImage();
      QVERIFY(window.save(QString(VIEWER_SHOTS_DIR) + "/window_" + name + ".png"));
      QVERIFY2(distinct_colours(page) > 8, qPrintable(name));
    }
  }

  void twoSelectedRunsAreComparedOlderFirst() {
    MainWindow w;
    w.set_dialogs_enabled(false);
    open(w, db_);
    w.runs_view()->sortByColumn(RunTableModel::kId, Qt::DescendingOrder);
    QSignalSpy compared(w.comparison(), &ts::viewer::ComparisonView::compared);
    w.runs_view()->selectRow(0);  // run 3
    w.runs_view()->selectionModel()->select(w.runs_view()->model()->index(1, 0),
                                            QItemSelectionModel::Select | QItemSelectionModel::Rows);  // run 2
    w.compare_selected();
    QVERIFY(compared.wait(30000));
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.comparison()));
    QVERIFY(w.comparison()->comparison().has_value());
    QCOMPARE(w.comparison()->comparison()->base_ref.run, 2);
    QCOMPARE(w.comparison()->comparison()->new_ref.run, 3);
    // One selected run is not a comparison: said, not guessed.
    w.runs_view()->selectRow(0);
    QSignalSpy errors(&w, &MainWindow::error_reported);
    w.compare_selected();
    QCOMPARE(errors.count(), 1);
  }
};

QTEST_MAIN(ViewerTest)
#include "viewer_test.moc"
