// trainscope-viewer's memory view on a real run (made by the trainscope command), under the
// offscreen platform: the stacked chart holds the store's timeline point by point, the peak is
// marked where memory_peak puts it, what was live at the peak (by category and owner) adds up
// to the peak's total and its split, a click inspects the time under it, a second rank is
// chosen, a run without memory data and an unreadable file say so, and the view renders.
#include <QAbstractItemModel>
#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QImage>
#include <QLineSeries>
#include <QSet>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "store/reader.h"
#include "store/writer.h"
#include "tests/viewer/viewer_test_support.h"
#include "viewer/memory_view.h"

using ts::viewer::MemoryView;

using namespace ts::viewer::testing;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The store's timeline as the chart should stack it: per time, bytes per category.
std::map<int64_t, std::map<std::string, int64_t>> stored_points(const QString& db, int64_t run, int64_t rank) {
  std::map<int64_t, std::map<std::string, int64_t>> points;
  for (const auto& r : ts::store::Reader(db.toStdString()).memory_timeline(run, rank)) {
    points[r.t_ns][r.category] = r.live_bytes;
  }
  return points;
}

}  // namespace

class MemoryViewTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;
  int64_t bare_run_ = 0;

  void load(MemoryView& v, const QString& db, qint64 run) {
    QSignalSpy loaded(&v, &MemoryView::loaded);
    v.show_run(db, run);
    QVERIFY(loaded.wait(20000));
  }

  void inspect(MemoryView& v, qint64 t_ns) {
    QSignalSpy inspected(&v, &MemoryView::inspected);
    v.inspect_at(t_ns);
    QVERIFY(inspected.wait(20000));
    QCOMPARE(inspected.at(0).at(0).toLongLong(), t_ns);
  }

  // The chart's areas by category, and that each lies on the one below it.
  static std::map<std::string, QAreaSeries*> areas_of(QChart* chart) {
    std::map<std::string, QAreaSeries*> out;
    for (auto* s : chart->series()) {
      if (auto* area = qobject_cast<QAreaSeries*>(s)) out[area->name().toStdString()] = area;
    }
    return out;
  }

  // What the chart stacks equals what the store holds for `rank`, point by point.
  static void check_chart_against_store(MemoryView& v, const QString& db, int64_t run, int64_t rank) {
    const auto points = stored_points(db, run, rank);
    QVERIFY(!points.empty());
    QCOMPARE(v.origin_ns(), points.begin()->first);
    std::set<std::string> non_zero;
    for (const auto& [t, by_category] : points) {
      for (const auto& [category, bytes] : by_category) {
        if (bytes != 0) non_zero.insert(category);
      }
    }
    const auto areas = areas_of(v.chart());
    std::set<std::string> shown;
    for (const auto& [category, area] : areas) shown.insert(category);
    QVERIFY(shown == non_zero);  // every category with bytes, and no empty one
    QVERIFY(shown.size() >= 3);
    std::vector<double> below(points.size(), 0.0);  // the stack so far, per point, in MiB
    std::set<double> lowers_seen;
    for (auto* s : v.chart()->series()) {  // in stacking order
      auto* area = qobject_cast<QAreaSeries*>(s);
      if (!area) continue;
      const std::string category = area->name().toStdString();
      QCOMPARE(area->upperSeries()->count(), static_cast<int>(points.size()));
      QVERIFY(area->lowerSeries() != nullptr);
      size_t i = 0;
      for (const auto& [t, by_category] : points) {
        const QPointF up = area->upperSeries()->at(static_cast<int>(i));
        const QPointF low = area->lowerSeries()->at(static_cast<int>(i));
        const double x = static_cast<double>(t - points.begin()->first) * 1e-9;
        QVERIFY2(std::abs(up.x() - x) < 1e-9 && std::abs(low.x() - x) < 1e-9, category.c_str());
        const auto it = by_category.find(category);
        const double bytes = it == by_category.end() ? 0.0 : static_cast<double>(it->second);
        // Its own bytes between its lines, stacked on the categories before it.
        QVERIFY2(std::abs((up.y() - low.y()) * kMiB - bytes) < 0.5, qPrintable(QString("%1 at point %2: %3 vs %4")
                                                                                   .arg(category.c_str())
                                                                                   .arg(i)
                                                                                   .arg((up.y() - low.y()) * kMiB)
                                                                                   .arg(bytes)));
        QVERIFY2(std::abs(low.y() - below[i]) * kMiB < 0.5, category.c_str());
        below[i] = up.y();
        ++i;
      }
    }
    // The top of the stack is the total at each point.
    size_t i = 0;
    for (const auto& [t, by_category] : points) {
      int64_t total = 0;
      for (const auto& [category, bytes] : by_category) total += bytes;
      QVERIFY(std::abs(below[i++] * kMiB - static_cast<double>(total)) < 1.0);
    }
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db");
    const std::string db = db_.toStdString();
    QVERIFY(run_command(std::string(TRAINSCOPE_BIN) +
                        " run resnet50 --preset tiny --iters 4 --warmup 1 --eval-batches 0 --threads 1 --db " + db));
    // A run with no memory data at all: a row and nothing else.
    ts::store::Writer w(db);
    ts::store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cpu";
    bare_run_ = w.begin_run(info);
  }

  void theChartStacksTheStoredTimeline() {
    MemoryView v;
    load(v, db_, 1);
    QVERIFY(v.message().isEmpty());
    QCOMPARE(v.rank(), 0);
    QVERIFY(!v.rank_chooser()->isEnabled() && v.rank_chooser()->isHidden());  // one rank: nothing to choose
    check_chart_against_store(v, db_, 1, 0);
  }

  void thePeakIsMarkedWhereTheStorePutsIt() {
    MemoryView v;
    load(v, db_, 1);
    const auto peak = ts::store::Reader(db_.toStdString()).memory_peak(1);
    QVERIFY(!peak.empty());
    int64_t total = 0;
    for (const auto& p : peak) total += p.bytes;
    QVERIFY(total > 0);
    QCOMPARE(v.peak().t_ns, peak.front().t_ns);
    QCOMPARE(v.peak().total_bytes, total);
    QVERIFY(!v.peak().from_timeline);
    QVERIFY(v.peak_line() != nullptr);
    const double x = static_cast<double>(peak.front().t_ns - v.origin_ns()) * 1e-9;
    QCOMPARE(v.peak_line()->count(), 2);  // a vertical line at the peak's time
    QVERIFY(std::abs(v.peak_line()->at(0).x() - x) < 1e-9 && std::abs(v.peak_line()->at(1).x() - x) < 1e-9);
    QVERIFY(v.peak_line()->at(1).y() * kMiB >= static_cast<double>(total));  // reaching above the stack
    const QString label = v.peak_label();
    QVERIFY2(label.contains(QString::number(static_cast<double>(total) / kMiB, 'f', 2) + " MiB"), qPrintable(label));
  }

  void whatWasLiveAtThePeakAddsUpToIt() {
    MemoryView v;
    load(v, db_, 1);
    ts::store::Reader reader(db_.toStdString());
    const auto peak = reader.memory_peak(1);
    inspect(v, peak.front().t_ns);
    const auto& rows = v.live_model()->rows();
    QVERIFY(!rows.empty());
    int64_t total = 0;
    std::map<std::string, int64_t> by_category;
    for (const auto& r : rows) {
      total += r.bytes;
      by_category[r.category] += r.bytes;
    }
    QCOMPARE(total, v.peak().total_bytes);
    // And its split by category is memory_peak's.
    for (const auto& p : peak) QCOMPARE(by_category[p.category], p.bytes);
    // Largest first, and at least one owner is one of the model's layers.
    std::set<std::string> layers;
    for (const auto& l : reader.layers(1)) layers.insert(l.layer);
    bool names_a_layer = false;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i > 0) QVERIFY(rows[i - 1].bytes >= rows[i].bytes);
      names_a_layer = names_a_layer || layers.contains(rows[i].owner);
    }
    QVERIFY(names_a_layer);
    // The table shows every owner, "(none)" for allocations made under no layer.
    const auto* m = v.live_model();
    for (int row = 0; row < m->rowCount(); ++row) {
      const QString owner = m->data(m->index(row, 1), Qt::DisplayRole).toString();
      QVERIFY(!owner.isEmpty());
      if (rows[static_cast<size_t>(row)].owner.empty()) QCOMPARE(owner, QString("(none)"));
    }
    QVERIFY2(v.live_summary().contains(QString::number(static_cast<double>(total) / kMiB, 'f', 2) + " MiB"),
             qPrintable(v.live_summary()));
  }

  void aClickInThePlotInspectsTheTimeUnderIt() {
    MemoryView v;
    v.resize(1000, 700);
    v.show();
    load(v, db_, 1);
    QTest::qWait(50);  // laid out: the plot area is where it is drawn
    QChartView* view = v.findChild<QChartView*>();
    QVERIFY(view != nullptr);
    QChart* chart = v.chart();
    const double x = static_cast<double>(v.peak().t_ns - v.origin_ns()) * 1e-9;
    const QPointF in_chart = chart->mapToPosition(QPointF(x, 0.5 * v.peak_line()->at(1).y()), v.peak_line());
    const QPoint at = view->mapFromScene(chart->mapToScene(in_chart));
    QSignalSpy inspected(&v, &MemoryView::inspected);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
    QVERIFY(inspected.wait(20000));
    // The time under the pointer, to within a pixel's worth of the x axis.
    const double seconds_per_pixel =
        chart->mapToValue(in_chart + QPointF(1, 0), v.peak_line()).x() - chart->mapToValue(in_chart, v.peak_line()).x();
    const double clicked = static_cast<double>(inspected.at(0).at(0).toLongLong() - v.origin_ns()) * 1e-9;
    QVERIFY2(std::abs(clicked - x) <= 1.5 * seconds_per_pixel, qPrintable(QString("%1 vs %2").arg(clicked).arg(x)));
    QVERIFY(v.live_model()->rowCount() > 0);
    // Outside the plot area (the title): nothing.
    QSignalSpy again(&v, &MemoryView::inspected);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, QPoint(view->width() / 2, 3));
    QVERIFY(!again.wait(500));
  }

  void aSecondRankIsChosen() {
    // Rank 1 as a copy of rank 0's timeline and peak at twice the bytes (a real two-rank run
    // needs mpirun); it is given no change log, so a click there finds no owners.
    const QString db = dir_.filePath("ranks.db");
    QVERIFY(QFile::copy(db_, db));
    sql(db,
        "INSERT INTO memory_timeline (run_id, t_ns, category_id, live_bytes, rank) "
        "SELECT run_id, t_ns + 1000, category_id, 2 * live_bytes, 1 FROM memory_timeline WHERE run_id = 1 AND rank = 0;"
        "INSERT INTO memory_peak (run_id, category, bytes, t_ns, rank) "
        "SELECT run_id, category, 2 * bytes, t_ns + 1000, 1 FROM memory_peak WHERE run_id = 1 AND rank = 0;");
    MemoryView v;
    load(v, db, 1);
    QCOMPARE(v.rank_chooser()->count(), 2);
    QVERIFY(v.rank_chooser()->isEnabled() && !v.rank_chooser()->isHidden());
    const int64_t rank0_total = v.peak().total_bytes;
    QSignalSpy loaded(&v, &MemoryView::loaded);
    v.show_rank(1);
    QVERIFY(loaded.wait(20000));
    QCOMPARE(v.rank(), 1);
    QCOMPARE(v.rank_chooser()->currentData().toLongLong(), 1);
    QCOMPARE(v.peak().total_bytes, 2 * rank0_total);
    check_chart_against_store(v, db, 1, 1);
    inspect(v, v.peak().t_ns);
    QCOMPARE(v.live_model()->rowCount(), 0);
    QVERIFY2(v.live_summary().contains("no allocation log"), qPrintable(v.live_summary()));
  }

  void aRunWithoutMemoryDataSaysSo() {
    MemoryView v;
    load(v, db_, bare_run_);
    QVERIFY2(v.message().contains("no memory data"), qPrintable(v.message()));
    QVERIFY(areas_of(v.chart()).empty());
  }

  void anUnreadableFileIsReportedNotShown() {
    MemoryView v;
    QSignalSpy errors(&v, &MemoryView::error_reported);
    v.show_run(dir_.filePath("missing.db"), 1);
    QVERIFY(errors.wait(20000));
    QVERIFY(!errors.at(0).at(1).toString().isEmpty());
    QVERIFY2(v.message().contains("could not be read"), qPrintable(v.message()));
    QSignalSpy again(&v, &MemoryView::error_reported);
    v.show_run(db_, 999);  // a run that is not there
    QVERIFY(again.wait(20000));
  }

  void theViewRendersSomething() {
    MemoryView v;
    v.resize(1100, 800);
    v.show();
    load(v, db_, 1);
    inspect(v, v.peak().t_ns);
    QTest::qWait(100);
    const QImage image = v.grab().toImage();
    QDir().mkpath(VIEWER_SHOTS_DIR);
    QVERIFY(image.save(QString(VIEWER_SHOTS_DIR) + "/memory.png"));
    QVERIFY(distinct_colours(image) > 8);
    // The chart itself is drawn (its areas' colours), not just the table below it.
    QVERIFY(distinct_colours(v.findChild<QChartView*>()->grab().toImage()) > 8);
  }
};

QTEST_MAIN(MemoryViewTest)
#include "memory_view_test.moc"
