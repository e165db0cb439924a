// The viewer's models layer (viewer/models/) without a widget: the runs table over runs written
// straight into a db (a finished run, one stored before the sustained rate, one cut short), a
// rank's memory data, and the record table's display and sort roles. The rates are the digest's (reports/run_digest.h).
#include <QTemporaryDir>
#include <QtTest>

#include <string>
#include <vector>

#include "store/error.h"
#include "store/writer.h"
#include "viewer/models/memory_data.h"
#include "viewer/models/record_table_model.h"
#include "viewer/models/run_list.h"
#include "viewer/models/run_table_model.h"

using ts::viewer::kSortRole;
using ts::viewer::RunTableModel;

namespace {

ts::store::RunInfo info(const char* workload) {
  ts::store::RunInfo i;
  i.workload = workload;
  i.preset = "tiny";
  i.device = "cpu";
  i.batch_size = 4;
  i.iterations = 3;
  i.warmup = 1;
  i.started_at = "2026-11-27T20:00:00Z";
  return i;
}

// One warm-up, then 10 samples in 100, 200 and 400 ms: 100, 50, 25 samples/s, 30/700 ms sustained.
std::vector<ts::store::IterationRow> iterations() {
  return {{0, true, 0, 1'000'000'000, 10, 0, 0},
          {1, false, 1'000'000'000, 1'100'000'000, 10, 0, 0},
          {2, false, 1'100'000'000, 1'300'000'000, 10, 0, 0},
          {3, false, 1'300'000'000, 1'700'000'000, 10, 0, 0}};
}

struct Op {
  QString name;
  double ms = 0;
};

}  // namespace

class ViewerModelsTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("models.db");
    ts::store::Writer w(db_.toStdString());
    const auto done = w.begin_run(info("resnet50"));  // finished: the sustained headline stored
    w.add_iterations(done, iterations());
    const std::vector<ts::store::MetricRow> stored = {{"headline_throughput", 42.857, "images/s", -1},
                                                      {"throughput_median", 50.0, "images/s", -1},
                                                      {"memory_changes_stored", 7, "count", -1}};
    w.add_metrics(done, stored);
    const std::vector<ts::store::MemoryPeakRow> peak = {{"weights", 1024, 5, 0}, {"activations", 4096, 5, 0}};
    w.add_memory_peak(done, peak);
    const std::vector<ts::store::MemoryPoint> timeline = {{0, "weights", 1024, 0}, {5, "activations", 4096, 0}};
    w.add_memory_timeline(done, timeline);
    w.finish_run(done, ts::store::RunStatus::completed, "2026-11-27T20:01:00Z", "");
    const auto old = w.begin_run(info("resnet50"));  // stored before the sustained rate
    const std::vector<ts::store::MetricRow> median_only = {{"throughput_median", 12.5, "images/s", -1}};
    w.add_metrics(old, median_only);
    w.finish_run(old, ts::store::RunStatus::failed, "2026-11-27T20:02:00Z", "out of memory");
    const auto cut = w.begin_run(info("transformer"));  // never reached its final write
    w.add_iterations(cut, iterations());
    w.finish_run(cut, ts::store::RunStatus::interrupted, "2026-11-27T20:03:00Z", "");
  }

  void theRunsTableShowsTheDigestsListedRateLabelled() {
    RunTableModel m;
    m.set_runs(db_, ts::viewer::list_runs(db_.toStdString()));
    QCOMPARE(m.rowCount(), 3);
    QCOMPARE(m.headerData(RunTableModel::kThroughput, Qt::Horizontal, Qt::DisplayRole).toString(),
             QString("sustained rate"));
    const auto shown = [&](int row) {
      return m.data(m.index(row, RunTableModel::kThroughput), Qt::DisplayRole).toString();
    };
    QCOMPARE(shown(0), QString("42.86 images/s"));
    QVERIFY(m.entry(0).sustained);
    QCOMPARE(shown(1), QString("12.50 images/s (median/iteration)"));
    QVERIFY(!m.entry(1).sustained);
    // Cut short: the median of the rates it kept (warm-up left out), in samples/s.
    QCOMPARE(shown(2), QString("50.00 samples/s (median/iteration)"));
    QCOMPARE(m.data(m.index(2, RunTableModel::kThroughput), kSortRole).toDouble(), 50.0);
    QCOMPARE(m.data(m.index(1, RunTableModel::kStatus), Qt::DisplayRole).toString(), QString("failed"));
    QVERIFY(m.data(m.index(1, RunTableModel::kStatus), Qt::ForegroundRole).isValid());
    QCOMPARE(m.data(m.index(1, RunTableModel::kStatus), Qt::ToolTipRole).toString(), QString("out of memory"));
    QVERIFY(!m.data(m.index(0, RunTableModel::kStatus), Qt::ForegroundRole).isValid());
  }

  void databasesAreReplacedAndRemovedWhole() {
    RunTableModel m;
    m.set_runs(db_, ts::viewer::list_runs(db_.toStdString()));
    m.set_runs("other.db", {ts::viewer::RunListEntry{"other.db", {}, "completed", std::nullopt}});
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(m.databases(), QStringList({db_, "other.db"}));
    QCOMPARE(m.data(m.index(3, RunTableModel::kThroughput), Qt::DisplayRole).toString(), QString("-"));
    QCOMPARE(m.data(m.index(3, RunTableModel::kThroughput), kSortRole).toDouble(), -1.0);  // no rate sorts last
    m.set_runs(db_, ts::viewer::list_runs(db_.toStdString()));  // a refresh replaces, never adds
    QCOMPARE(m.rowCount(), 4);
    m.remove_db(db_);
    QCOMPARE(m.rowCount(), 1);
    QCOMPARE(m.databases(), QStringList({"other.db"}));
  }

  void aRanksMemoryIsReadInOneGo() {
    const auto d = ts::viewer::load_memory_data(db_, 1, -1);
    QCOMPARE(d.ranks, std::vector<int64_t>({0}));
    QCOMPARE(d.rank, int64_t{0});
    QCOMPARE(d.peak.size(), size_t{2});
    QCOMPARE(d.timeline.size(), size_t{2});
    QCOMPARE(d.changes_stored, int64_t{7});
    QCOMPARE(ts::viewer::load_memory_data(db_, 2, -1).changes_stored, int64_t{-1});  // no change log
    QVERIFY_THROWS_EXCEPTION(ts::store::StoreError, ts::viewer::load_memory_data(db_, 99, -1));
  }

  void aRecordTableShowsNumbersAsTextAndSortsThemAsNumbers() {
    ts::viewer::RecordTableModel<Op> m(
        {{"op", [](const Op& o) { return QVariant(o.name); }}, {"ms", [](const Op& o) { return QVariant(o.ms); }, 2}});
    m.set_rows({{"conv", 12.345}, {"relu", 9.5}});
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.columnCount(), 2);
    QCOMPARE(m.headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), QString("ms"));
    QCOMPARE(m.data(m.index(0, 1), Qt::DisplayRole).toString(), QString("12.35"));
    QCOMPARE(m.data(m.index(0, 1), kSortRole).toDouble(), 12.345);
    QCOMPARE(m.data(m.index(1, 0), Qt::DisplayRole).toString(), QString("relu"));
    QVERIFY(m.data(m.index(0, 1), Qt::TextAlignmentRole).isValid());  // numbers to the right
    QVERIFY(!m.data(m.index(0, 0), Qt::TextAlignmentRole).isValid());
    QVERIFY(!m.data(m.index(2, 0), Qt::DisplayRole).isValid());  // past the rows
  }
};

QTEST_GUILESS_MAIN(ViewerModelsTest)
#include "viewer_models_test.moc"
