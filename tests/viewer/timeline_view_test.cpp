// The timeline view on real traced runs (made by the trainscope command), offscreen: it draws
// what the store holds (every lane's time at the whole-run zoom), zoom and pan keep the point
// under the cursor and stay on the run, clicking an event shows that event, a table's row marks
// its events, a run without a final write is drawn from an index built on opening, and the view
// renders to a non-blank image at both ends of the zoom.
#include <QDir>
#include <QImage>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <cstdlib>
#include <map>
#include <string>

#include "store/reader.h"
#include "store/timeline.h"
#include "store/writer.h"
#include "tests/viewer/viewer_test_support.h"
#include "viewer/main_window.h"
#include "viewer/timeline_view.h"

using ts::viewer::MainWindow;
using ts::viewer::TimelineCanvas;
using ts::viewer::TimelineView;

using namespace ts::viewer::testing;

namespace {

constexpr int64_t kSkew = 2'500'000'000, kStart = 1'000'000'000;
// Two ranks training 10 ms, rank 1's clock 2.5 s ahead (measured at the start and the end).
// With `call`: one all-reduce of iteration 0 on each rank's communication thread, rank 0
// arriving at +2 ms and rank 1 at +3 ms, both done at +5 ms (rank 0's clock).
int64_t write_skewed_run(const std::string& db, bool call) {
  int64_t run = 0;
  {
    ts::store::Writer w(db);
    ts::store::RunInfo info;
    info.workload = "synthetic";
    info.preset = "tiny";
    info.device = "cpu";
    info.ranks = 2;
    info.started_at = "2026-11-28T00:00:00Z";
    run = w.begin_run(info);
    std::vector<ts::store::EventRow> events;
    std::vector<ts::store::IterationRow> iterations;
    std::vector<ts::store::CollectiveRow> calls;
    for (int64_t rank : {0, 1}) {
      const int64_t at = kStart + (rank == 1 ? kSkew : 0);
      events.push_back({at, at + 10'000'000, "iteration", "", "iteration", "none", 0, 0, rank});
      for (int k = 0; k < 100; ++k)
        events.push_back({at + k * 100'000, at + k * 100'000 + 60'000, "conv", "layer", "op", "forward", 0, 0, rank});
      ts::store::IterationRow it;
      it.rank = rank;
      it.index = 0;
      it.start_ns = at;
      it.end_ns = at + 10'000'000;
      iterations.push_back(it);
      if (call) {
        const int64_t arrival = at + (rank == 0 ? 2'000'000 : 3'000'000), end = at + 5'000'000;
        events.push_back({arrival, end, "all_reduce", "", "comm", "none", 0, 1, rank});
        calls.push_back({rank, 0, 1, "all_reduce", "bucket 0.0", 1 << 20, arrival, end});
      }
    }
    std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.end_ns < b.end_ns; });
    w.add_events(run, events);
    w.add_iterations(run, iterations);
    w.add_collectives(run, calls);
    const std::vector<ts::store::RankClockRow> clocks = {{1, "start", kSkew, 4'000, kStart, 8'000, 32},
                                                         {1, "end", kSkew, 6'000, kStart + 10'000'000, 8'000, 32}};
    w.add_rank_clocks(run, clocks);
    w.finish_run(run, ts::store::RunStatus::completed, "2026-11-28T00:00:01Z", "");
  }
  return run;
}

}  // namespace

class TimelineViewTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;

  void open(TimelineView& v, qint64 run) {
    QSignalSpy loaded(&v, &TimelineView::loaded);
    v.show_run(db_, run);
    QVERIFY(loaded.wait(30000));
  }
  void settle(TimelineView& v) {
    QSignalSpy ready(&v, &TimelineView::window_ready);
    QVERIFY(ready.wait(20000));
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db");
    const std::string db = db_.toStdString();
    for (const char* args : {"run resnet50 --preset tiny --iters 3 --warmup 1 --eval-batches 0 --threads 1",
                             "run transformer --preset tiny --iters 3 --warmup 1 --eval-batches 0 --threads 1"})
      QVERIFY2(run_command(std::string(TRAINSCOPE_BIN) + " " + args + " --db " + db), args);
  }

  // At the whole-run zoom, each lane's summarised and drawn time is the time of its events.
  void theWholeRunShowsEveryLanesTime() {
    TimelineView v;
    v.resize(1200, 600);
    open(v, 1);
    ts::store::TimelineReader reader(db_.toStdString(), 1);
    QVERIFY(reader.index_stored());  // written at the run's final write
    const auto* w = v.window();
    QVERIFY(w != nullptr);
    QVERIFY(!w->tiles.empty() || !w->events.empty());
    QCOMPARE(v.view_from(), reader.start_ns());
    std::map<int, int64_t> drawn, stored;
    for (const auto& t : w->tiles) drawn[t.lane] += t.busy_ns;
    for (const auto& e : w->events) drawn[e.lane] += e.end_ns - e.start_ns;
    ts::store::Reader r(db_.toStdString());
    std::map<int64_t, int> lane_of_thread;
    for (const auto& lane : reader.lanes()) lane_of_thread[lane.thread] = lane.lane;
    for (const auto& e : r.events(1)) stored[lane_of_thread.at(e.thread)] += e.end_ns - e.start_ns;
    QCOMPARE(drawn, stored);
  }

  void zoomKeepsThePointUnderTheCursorAndPanStaysOnTheRun() {
    TimelineView v;
    v.resize(1200, 600);
    v.show();
    open(v, 1);
    const int64_t from = v.view_from(), to = v.view_to();
    const int64_t anchor = from + (to - from) / 4;
    v.zoom(4, anchor);
    settle(v);
    QVERIFY(std::abs((v.view_to() - v.view_from()) - (to - from) / 4) <= 2);
    // The anchor is a quarter of the way across before and after.
    QVERIFY(std::abs((anchor - v.view_from()) * 4 - (anchor - from)) <= 8);
    const int level_before = v.window()->level;
    for (int i = 0; i < 6; ++i) v.zoom(8, anchor);
    settle(v);
    QVERIFY2(v.window()->level < level_before || level_before < 0, "zooming in reaches a finer level");
    QVERIFY(v.window()->level == -1);  // 8^6 deeper: the events themselves
    // Keys: Home shows the whole run; '-' zooms out; panning stops at the run's end.
    QTest::keyClick(v.canvas(), Qt::Key_Home);
    settle(v);
    QCOMPARE(v.view_from(), from);
    QTest::keyClick(v.canvas(), Qt::Key_Plus);
    settle(v);
    QVERIFY(v.view_to() - v.view_from() < to - from);
    for (int i = 0; i < 20; ++i) QTest::keyClick(v.canvas(), Qt::Key_Right);
    settle(v);
    const int64_t margin = (to - from) / 20 + 2;
    QVERIFY(v.view_to() <= to + margin);
    QVERIFY(v.view_to() >= to);
    // Dragging right moves the view left, by the dragged distance.
    const int64_t before = v.view_from();
    const double ns_per_px = v.canvas()->ns_per_pixel();
    QTest::mousePress(v.canvas(), Qt::LeftButton, {}, QPoint(600, 60));
    QTest::mouseMove(v.canvas(), QPoint(700, 60));
    QTest::mouseRelease(v.canvas(), Qt::LeftButton, {}, QPoint(700, 60));
    QVERIFY(std::abs(static_cast<double>(before - v.view_from()) - 100 * ns_per_px) <= ns_per_px * 2);
  }

  void clickingAnEventShowsThatEvent() {
    TimelineView v;
    v.resize(1200, 700);
    v.show();
    open(v, 1);
    // An op well inside the run, from the store: zoom to it and click its middle.
    ts::store::Reader r(db_.toStdString());
    const auto events = r.events(1);
    const ts::store::EventRow* op = nullptr;
    for (const auto& e : events)
      if (e.kind == "op" && !e.layer.empty() && e.end_ns - e.start_ns > 1000) {
        op = &e;
        if (e.start_ns > v.view_from() + (v.view_to() - v.view_from()) / 2) break;
      }
    QVERIFY(op != nullptr);
    const int64_t d = op->end_ns - op->start_ns;
    v.set_view(op->start_ns - d, op->end_ns + d);
    settle(v);
    const ts::store::TimelineEvent* drawn = nullptr;
    for (const auto& e : v.window()->events)
      if (e.start_ns == op->start_ns && e.end_ns == op->end_ns && e.name == op->name) drawn = &e;
    QVERIFY2(drawn != nullptr, "the op is drawn alone at this zoom");
    const auto& canvas = *v.canvas();
    const int top = canvas.lane_top(drawn->lane);
    QVERIFY(top > 0);
    const int x = canvas.plot_left() +
                  static_cast<int>((static_cast<double>(op->start_ns + d / 2) - v.view_from()) / canvas.ns_per_pixel());
    const int y = top + drawn->depth * TimelineCanvas::kRowHeight + TimelineCanvas::kRowHeight / 2;
    QSignalSpy selected(&v, &TimelineView::selection_changed);
    QTest::mouseClick(v.canvas(), Qt::LeftButton, {}, QPoint(x, y));
    QVERIFY(selected.wait(10000));
    QVERIFY(v.selected().has_value());
    QCOMPARE(v.selected()->event.name, op->name);
    QCOMPARE(v.selected()->layer, op->layer);
    QCOMPARE(v.selected()->kind, std::string("op"));
    QVERIFY(v.details_text().contains(QString::fromStdString(op->layer)));
    // Empty space selects nothing.
    QVERIFY(!v.select_at(QPoint(5, 5)));
  }

  void aTableRowMarksItsEventsOnTheTimeline() {
    MainWindow w;
    w.set_dialogs_enabled(false);
    w.resize(1400, 850);
    QSignalSpy db_loaded(&w, &MainWindow::database_loaded);
    w.open_database(db_);
    QVERIFY(db_loaded.wait(20000));
    QSignalSpy timeline_loaded(w.timeline(), &TimelineView::loaded);
    QSignalSpy run_loaded(&w, &MainWindow::run_loaded);
    w.select_run(0);
    QVERIFY(run_loaded.wait(30000));
    QVERIFY(timeline_loaded.count() > 0 || timeline_loaded.wait(30000));
    ts::store::Reader r(db_.toStdString());
    const auto events = r.events(1);
    // The ops table's first row, as shown: its events in the store and on the timeline.
    QSignalSpy marked(w.timeline(), &TimelineView::highlighted);
    w.ops_view()->selectRow(0);
    QVERIFY(marked.wait(20000));
    const QString name = w.ops_view()->model()->index(0, 0).data().toString();
    const auto expected =
        std::count_if(events.begin(), events.end(), [&](const auto& e) { return e.name == name.toStdString(); });
    QVERIFY(expected > 0);
    QCOMPARE(marked.at(0).at(0).toInt(), static_cast<int>(expected));
    QCOMPARE(static_cast<int64_t>(w.timeline()->marks().size()), static_cast<int64_t>(expected));
    // A layer's row: the events it owns.
    w.layers_view()->selectRow(0);
    QVERIFY(marked.wait(20000));
    const QString layer = w.layers_view()->model()->index(0, 0).data().toString();
    const auto owned =
        std::count_if(events.begin(), events.end(), [&](const auto& e) { return e.layer == layer.toStdString(); });
    QCOMPARE(static_cast<int64_t>(w.timeline()->marks().size()), static_cast<int64_t>(owned));
  }

  void aRunWithoutItsFinalWriteIsDrawnFromAnIndexBuiltOnOpening() {
    const QString copy = dir_.filePath("unfinished.db");
    QVERIFY(QFile::copy(db_, copy));
    sqlite3* h = nullptr;
    QCOMPARE(sqlite3_open(copy.toStdString().c_str(), &h), SQLITE_OK);
    QCOMPARE(sqlite3_exec(h, "DELETE FROM timeline_index WHERE run_id = 2", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
    TimelineView v;
    v.resize(1200, 600);
    QSignalSpy loaded(&v, &TimelineView::loaded);
    v.show_run(copy, 2);
    QVERIFY(loaded.wait(30000));
    QVERIFY(!v.window()->tiles.empty() || !v.window()->events.empty());
    TimelineView stored;
    stored.resize(1200, 600);
    QSignalSpy loaded_stored(&stored, &TimelineView::loaded);
    stored.show_run(db_, 2);
    QVERIFY(loaded_stored.wait(30000));
    QCOMPARE(v.window()->tiles.size(), stored.window()->tiles.size());
    QCOMPARE(v.window()->events.size(), stored.window()->events.size());
    // A missing run is an error signal, not a crash.
    QSignalSpy errors(&v, &TimelineView::error_reported);
    v.show_run(db_, 99);
    QVERIFY(errors.wait(10000));
  }

  // Issue 41: a run whose rank 1 read its clock 2.5 s ahead of rank 0's opens on rank 0's clock:
  // the whole run is the 10 ms both ranks trained (not 2.5 s), rank 1's events and iteration
  // band lie within it, and the status line says how good the alignment is.
  void ranksOnSkewedClocksOpenOnRankZerosClock() {
    const std::string db = dir_.filePath("skewed.db").toStdString();
    const int64_t run = write_skewed_run(db, false);
    TimelineView v;
    v.resize(1200, 600);
    QSignalSpy loaded(&v, &TimelineView::loaded);
    v.show_run(QString::fromStdString(db), run);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(v.view_from(), kStart);
    QCOMPARE(v.view_to(), kStart + 10'000'000);
    const auto* w = v.window();
    QVERIFY(w != nullptr);
    int rank1_drawn = 0;
    for (const auto& e : w->events) {
      if (e.lane != 1) continue;
      ++rank1_drawn;
      QVERIFY2(e.start_ns >= kStart && e.end_ns <= kStart + 10'000'000, "rank 1's events on rank 0's clock");
    }
    QVERIFY(rank1_drawn > 0 || !w->tiles.empty());
    for (const auto& t : w->tiles)
      if (t.lane == 1) QVERIFY2(t.start_ns < kStart + 10'000'000 && t.end_ns > kStart, "rank 1's summaries too");
    QVERIFY2(v.status_text().contains("Ranks on rank 0's clock, good to 6"), qPrintable(v.status_text()));
  }

  // Issue 41: clicking a collective on one rank brings the same call on every rank: the details
  // list each rank's part split into waiting and moving (rank 0 waited 1 ms for rank 1), and a
  // strip along each rank's communication lane shows it, light while waiting, dark while moving.
  void aSelectedCollectiveShowsTheSameCallOnEveryRank() {
    const std::string db = dir_.filePath("skewed_call.db").toStdString();
    const int64_t run = write_skewed_run(db, true);
    TimelineView v;
    v.resize(1200, 600);
    v.show();
    QSignalSpy loaded(&v, &TimelineView::loaded);
    v.show_run(QString::fromStdString(db), run);
    QVERIFY(loaded.wait(30000));
    const ts::store::TimelineEvent* rank1_call = nullptr;
    for (const auto& e : v.window()->events)
      if (e.name == "all_reduce" && e.start_ns == kStart + 3'000'000) rank1_call = &e;  // on rank 0's clock
    QVERIFY2(rank1_call != nullptr, "rank 1's all-reduce is drawn alone, on rank 0's clock");
    const auto& canvas = *v.canvas();
    const auto x_at = [&](int64_t t) {
      return canvas.plot_left() + static_cast<int>((static_cast<double>(t) - v.view_from()) / canvas.ns_per_pixel());
    };
    QSignalSpy selected(&v, &TimelineView::selection_changed);
    QTest::mouseClick(
        v.canvas(), Qt::LeftButton, {},
        QPoint(x_at(kStart + 4'000'000), canvas.lane_top(rank1_call->lane) + TimelineCanvas::kRowHeight / 2));
    QVERIFY(selected.wait(10000));
    QVERIFY(v.selected().has_value());
    const auto& d = *v.selected();
    QCOMPARE(d.rank, int64_t{1});
    QCOMPARE(d.call.size(), size_t{2});
    QCOMPARE(d.call_last_rank, int64_t{1});
    QCOMPARE(d.call[0].waiting_ns, int64_t{1'000'000});
    QCOMPARE(d.call[0].moving_ns, int64_t{2'000'000});
    QCOMPARE(d.call[1].waiting_ns, int64_t{0});
    const QString text = v.details_text();
    QVERIFY2(text.contains("rank 0") && text.contains("rank 1 (this)") && text.contains("arrived last") &&
                 text.contains("waited 1"),
             qPrintable(text));
    // The strip on rank 0's communication lane: light (waiting) from +2 to +3 ms, dark after.
    const QImage shot = v.canvas()->grab().toImage();
    QDir().mkpath(VIEWER_SHOTS_DIR);
    QVERIFY(shot.save(QString(VIEWER_SHOTS_DIR) + "/timeline_collective.png"));
    const int rank0_top = canvas.lane_top(d.call[0].lane);
    QVERIFY(rank0_top > 0);
    const QColor waiting = shot.pixelColor(x_at(kStart + 2'500'000), rank0_top + 1),
                 moving = shot.pixelColor(x_at(kStart + 4'000'000), rank0_top + 1);
    QCOMPARE(waiting, QColor(140, 190, 255));
    QCOMPARE(moving, QColor(0, 50, 190));
    const QColor rank1_moving = shot.pixelColor(x_at(kStart + 4'000'000), canvas.lane_top(rank1_call->lane) + 1);
    QCOMPARE(rank1_moving, QColor(0, 50, 190));
  }

  void theViewRendersAtBothEndsOfTheZoom() {
    TimelineView v;
    v.resize(1400, 700);
    v.show();
    open(v, 2);
    QDir().mkpath(VIEWER_SHOTS_DIR);
    QImage whole = v.grab().toImage();
    QVERIFY(whole.save(QString(VIEWER_SHOTS_DIR) + "/timeline.png"));
    QVERIFY(distinct_colours(whole) > 20);
    v.zoom(300, v.view_from() + (v.view_to() - v.view_from()) / 2);
    settle(v);
    QVERIFY(v.window()->level == -1);
    QImage zoomed = v.grab().toImage();
    QVERIFY(zoomed.save(QString(VIEWER_SHOTS_DIR) + "/timeline_zoomed.png"));
    QVERIFY(distinct_colours(zoomed) > 20);
  }
};

QTEST_MAIN(TimelineViewTest)
#include "timeline_view_test.moc"
