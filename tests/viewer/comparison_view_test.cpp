// The viewer's side-by-side comparison on real runs (made by the trainscope command), under the
// offscreen platform: two runs of one configuration (the second with a planted slowdown) are
// judged exactly as `trainscope compare` judges them; ops, layers and memory are what the store
// holds; runs of different configurations, or a run that did not complete, get a note and no
// verdicts; ops of one run only are marked; the tables sort deltas as numbers and filter;
// a stale answer is dropped; errors come as a signal; the view renders to a non-blank image.
#include <QAbstractItemModel>
#include <QDir>
#include <QImage>
#include <QLineEdit>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QThreadPool>
#include <QtTest>

#include <sqlite3.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "reports/comparison.h"
#include "reports/number_format.h"
#include "reports/run_digest.h"
#include "reports/statistics.h"
#include "store/reader.h"
#include "tests/viewer/viewer_test_support.h"
#include "viewer/comparison_view.h"
#include "viewer/models/run_comparison.h"
#include "vocabulary/memory_category.h"

using ts::viewer::ComparisonView;
using ts::viewer::RunComparison;
using ts::viewer::RunRef;

using namespace ts::viewer::testing;

namespace {

ts::reports::RunDigest digest(const QString& db, int64_t id) {
  ts::store::Reader reader(db.toStdString());
  return ts::reports::digest_run(reader, db.toStdString(), *reader.run(id), ts::vocabulary::tbd_class_of);
}

QVariant cell(const QAbstractItemModel* m, int row, int column, int role = ts::viewer::kSortRole) {
  return m->data(m->index(row, column), role);
}

// The runs of initTestCase.
constexpr qint64 kBase = 1, kSlowed = 2, kOtherWorkload = 3, kLost = 4;

}  // namespace

class ComparisonViewTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;

  RunRef ref(qint64 run) const { return {db_, run}; }

  void compare(ComparisonView& v, qint64 base, qint64 next) {
    QSignalSpy compared(&v, &ComparisonView::compared);
    QSignalSpy errors(&v, &ComparisonView::error_reported);
    v.compare(ref(base), ref(next));
    QVERIFY(compared.wait(30000));
    QCOMPARE(errors.count(), 0);
    QVERIFY(v.comparison().has_value());
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db");
    const std::string bin = TRAINSCOPE_BIN;
    const std::string db = " --db " + db_.toStdString();
    // Two ranks, so that the breakdown per rank and exposed comm are compared too; 12 timed
    // iterations, past the 9 a verdict needs. Run 2 spends as long again in every op (a planted
    // regression, as the gate's test plants one).
    const std::string resnet = " run resnet50 --preset tiny --warmup 1 --eval-batches 0 --threads 1 --nproc 2";
    QVERIFY(run_command(bin + resnet + " --iters 12" + db));
    QVERIFY(run_command("TS_TEST_SLOW_OP='*:1' " + bin + resnet + " --iters 12" + db));
    QVERIFY(run_command(bin + " run transformer --preset tiny --iters 4 --warmup 1 --eval-batches 0 --threads 1" + db));
    QVERIFY(run_command(bin + resnet + " --iters 3" + db));
    // Run 4 as a process killed mid-run leaves it: `running`, written by a pid that is gone.
    sql(db_, "UPDATE runs SET status = 'running', ended_at = '', pid = 2147483000, pid_start = 1 WHERE id = 4");
  }

  void runsOfOneConfigurationAreJudgedAsTrainscopeCompareJudgesThem() {
    ComparisonView v;
    compare(v, kBase, kSlowed);
    const RunComparison& c = *v.comparison();
    QVERIFY(c.judged);
    // No note but, where the machine was busy while they ran (it may be), which runs were noisy.
    for (const auto& note : c.notes) QVERIFY2(note.find(" was noisy: ") != std::string::npos, note.c_str());
    const auto expected =
        ts::reports::compare_runs({digest(db_, kBase)}, {digest(db_, kSlowed)}, "base", "new", {}).pairs.at(0);
    QCOMPARE(c.metrics.size(), expected.metrics.size());
    for (size_t i = 0; i < c.metrics.size(); ++i) {
      const auto& m = c.metrics[i];
      const auto& e = expected.metrics[i];
      QCOMPARE(m.metric, e.metric);
      QVERIFY2(m.statistics.has_value(), m.metric.c_str());
      QCOMPARE(*m.base_median, e.base_median);
      QCOMPARE(*m.new_median, e.new_median);
      QCOMPARE(*m.change, e.delta);
      QCOMPARE(m.statistics->delta_low, e.delta_low);
      QCOMPARE(m.statistics->delta_high, e.delta_high);
      QCOMPARE(m.statistics->p_value, e.p_value);
      QCOMPARE(m.statistics->verdict, e.verdict);
      QCOMPARE(m.base_n, e.base_n);
      QCOMPARE(m.new_n, e.new_n);
    }
    QCOMPARE(c.metrics.front().metric, std::string("throughput"));
    QCOMPARE(c.metrics.back().metric, std::string("exposed comm"));  // two ranks
    // The planted slowdown is caught, and its rows are coloured as the HTML report colours them.
    QCOMPARE(c.metrics.front().statistics->verdict, ts::reports::Verdict::slower);
    const QString html = v.summary_html();
    for (const auto& m : c.metrics) {
      const auto verdict = m.statistics->verdict;
      const QString row = verdict == ts::reports::Verdict::slower   ? "<tr bgcolor='#fce8e6'>"
                          : verdict == ts::reports::Verdict::faster ? "<tr bgcolor='#e6f4ea'>"
                                                                    : "<tr>";
      QVERIFY2(html.contains(row + "<td>" + QString::fromStdString(m.metric) + "</td>"), m.metric.c_str());
    }
    const auto& throughput = c.metrics.front().statistics;
    const QString interval = QString::fromStdString(ts::reports::signed_percent(throughput->delta) + " [" +
                                                    ts::reports::signed_percent(throughput->delta_low) + ", " +
                                                    ts::reports::signed_percent(throughput->delta_high) + "]");
    QVERIFY2(v.summary_text().contains(interval), qPrintable(interval));
    QVERIFY(v.summary_text().contains("slower"));

    // Memory: compare_runs' rows and verdicts, and the bytes the store holds for rank 0's peak.
    QCOMPARE(c.memory.size(), expected.memory.size());
    for (size_t i = 0; i < c.memory.size(); ++i) {
      QCOMPARE(c.memory[i].category, expected.memory[i].category);
      QCOMPARE(c.memory[i].base_bytes, expected.memory[i].base_bytes);
      QCOMPARE(c.memory[i].new_bytes, expected.memory[i].new_bytes);
      QCOMPARE(*c.memory[i].verdict, expected.memory[i].verdict);
    }
    ts::store::Reader reader(db_.toStdString());
    std::map<std::string, int64_t> stored;
    int64_t peak = 0;
    for (const auto& p : reader.memory_peak(kBase)) {
      peak += p.bytes;
      if (p.bytes != 0) stored[p.category] = p.bytes;
    }
    QCOMPARE(c.memory.front().category, std::string("peak"));
    QCOMPARE(c.memory.front().base_bytes, peak);
    QCOMPARE(c.memory.size(), stored.size() + 1);
    for (size_t i = 1; i < c.memory.size(); ++i) QCOMPARE(c.memory[i].base_bytes, stored.at(c.memory[i].category));
    QVERIFY(v.summary_text().contains(QString::fromStdString(ts::reports::with_commas(peak))));

    // The breakdown of both ranks, side by side.
    const auto base = digest(db_, kBase);
    QCOMPARE(c.breakdown.size(), size_t{2});
    for (size_t i = 0; i < 2; ++i) {
      QCOMPARE(c.breakdown[i].rank, static_cast<int64_t>(i));
      QVERIFY(c.breakdown[i].base && c.breakdown[i].next);
      QCOMPARE(c.breakdown[i].base->compute_ms, base.breakdown[i].compute_ms);
      QCOMPARE(c.breakdown[i].base->idle_ms, base.breakdown[i].idle_ms);
    }
    QVERIFY(v.summary_text().contains("Breakdown per rank"));
    QVERIFY(v.header_text().contains("resnet50/tiny"));
    QVERIFY(v.header_text().contains("run 1") && v.header_text().contains("run 2") &&
            v.header_text().contains("completed"));
  }

  void opsAndLayersAreWhatTheStoreHolds() {
    ComparisonView v;
    compare(v, kBase, kSlowed);
    ts::store::Reader reader(db_.toStdString());
    std::map<std::pair<std::string, std::string>, ts::store::OpSummaryRow> base, next;
    for (const auto& o : reader.op_summary(kBase)) base[{o.device, o.name}] = o;
    for (const auto& o : reader.op_summary(kSlowed)) next[{o.device, o.name}] = o;
    std::set<std::pair<std::string, std::string>> every;
    for (const auto& [k, _] : base) every.insert(k);
    for (const auto& [k, _] : next) every.insert(k);
    const auto* m = v.ops_model();
    QCOMPARE(m->rowCount(), static_cast<int>(every.size()));
    QVERIFY(m->rowCount() > 5);
    for (int row = 0; row < m->rowCount(); ++row) {
      const auto& o = m->rows()[static_cast<size_t>(row)];
      const auto& b = base.at({o.device, o.name});  // one model: every op in both runs
      const auto& n = next.at({o.device, o.name});
      QCOMPARE(o.base->total_ns, b.total_ns);
      QCOMPARE(o.next->count, n.count);
      QCOMPARE(cell(m, row, ComparisonView::kOpBaseTotal).toDouble(), static_cast<double>(b.total_ns) * 1e-6);
      QCOMPARE(cell(m, row, ComparisonView::kOpDeltaTotal).toDouble(),
               static_cast<double>(n.total_ns - b.total_ns) * 1e-6);
      QCOMPARE(cell(m, row, ComparisonView::kOpDeltaMeanPercent).toDouble(), 100.0 * (n.mean_ns / b.mean_ns - 1.0));
      QCOMPARE(cell(m, row, ComparisonView::kOpNewCount).toLongLong(), n.count);
      QCOMPARE(cell(m, row, ComparisonView::kOpIn, Qt::DisplayRole).toString(), QString("both"));
      QVERIFY(!cell(m, row, ComparisonView::kOpName, Qt::BackgroundRole).isValid());
    }

    const auto layers = reader.layers(kBase);
    const auto new_layers = reader.layers(kSlowed);
    const auto* l = v.layers_model();
    QCOMPARE(l->rowCount(), static_cast<int>(layers.size()));
    QVERIFY(l->rowCount() > 5);
    for (int row = 0; row < l->rowCount(); ++row) {
      const auto& s = layers[static_cast<size_t>(row)];
      const auto& n = new_layers[static_cast<size_t>(row)];
      QCOMPARE(cell(l, row, ComparisonView::kLayerName).toString(), QString::fromStdString(s.layer));
      QCOMPARE(cell(l, row, ComparisonView::kLayerBaseForward).toDouble(), s.forward_ns * 1e-6);
      QCOMPARE(cell(l, row, ComparisonView::kLayerNewBackward).toDouble(), n.backward_ns * 1e-6);
      QCOMPARE(cell(l, row, ComparisonView::kLayerBaseActivations).toDouble(),
               static_cast<double>(s.activation_bytes) / 1024.0);
      QCOMPARE(cell(l, row, ComparisonView::kLayerNewParameters).toLongLong(), n.parameter_count);
      QCOMPARE(cell(l, row, ComparisonView::kLayerDeltaParameters).toLongLong(), 0);
      if (s.forward_ns > 0) {
        QCOMPARE(cell(l, row, ComparisonView::kLayerDeltaForwardPercent).toDouble(),
                 100.0 * (n.forward_ns / s.forward_ns - 1.0));
      }
    }
  }

  void differentConfigurationsGetANoteAndNoVerdicts() {
    ComparisonView v;
    compare(v, kBase, kOtherWorkload);
    const RunComparison& c = *v.comparison();
    QVERIFY(!c.judged);
    QCOMPARE(c.notes.size(), size_t{1});
    const QString note = QString::fromStdString(c.notes.front());
    for (const char* part : {"workload resnet50 vs transformer", "ranks 2 vs 1", "one configuration"})
      QVERIFY2(note.contains(part), part);
    QVERIFY(!note.contains("preset tiny"));  // both tiny
    QVERIFY(v.summary_text().contains("workload resnet50 vs transformer"));
    QVERIFY(v.header_text().contains("transformer"));
    const auto base = digest(db_, kBase);
    const auto next = digest(db_, kOtherWorkload);
    for (const auto& m : c.metrics) {
      QVERIFY2(!m.statistics, m.metric.c_str());
      if (m.base_median && m.new_median) QCOMPARE(*m.change, *m.new_median / *m.base_median - 1);
    }
    QCOMPARE(*c.metrics.front().base_median, ts::reports::median(base.throughput_per_iteration));
    QCOMPARE(*c.metrics.front().new_median, ts::reports::median(next.throughput_per_iteration));
    for (const auto& m : c.memory) QVERIFY2(!m.verdict, m.category.c_str());
    QCOMPARE(c.memory.front().new_bytes, next.peak_bytes);

    // Ops of one run only are marked: "in", "—" for the other side, a tint and a tooltip.
    ts::store::Reader reader(db_.toStdString());
    std::set<std::string> in_base, in_next;
    for (const auto& o : reader.op_summary(kBase)) in_base.insert(o.device + "/" + o.name);
    for (const auto& o : reader.op_summary(kOtherWorkload)) in_next.insert(o.device + "/" + o.name);
    const auto* m = v.ops_model();
    int base_only = 0, new_only = 0;
    for (int row = 0; row < m->rowCount(); ++row) {
      const auto& o = m->rows()[static_cast<size_t>(row)];
      const std::string key = o.device + "/" + o.name;
      QCOMPARE(o.base.has_value(), in_base.contains(key));
      QCOMPARE(o.next.has_value(), in_next.contains(key));
      const QString in = cell(m, row, ComparisonView::kOpIn, Qt::DisplayRole).toString();
      if (o.base && o.next) {
        QCOMPARE(in, QString("both"));
        continue;
      }
      QCOMPARE(in, QString(o.base ? "base only" : "new only"));
      (o.base ? base_only : new_only)++;
      QVERIFY(cell(m, row, ComparisonView::kOpName, Qt::BackgroundRole).isValid());
      QVERIFY(cell(m, row, ComparisonView::kOpName, Qt::ToolTipRole).toString().contains("only in the"));
      QCOMPARE(
          cell(m, row, o.base ? ComparisonView::kOpNewTotal : ComparisonView::kOpBaseTotal, Qt::DisplayRole).toString(),
          QString("—"));
      QVERIFY(!cell(m, row, ComparisonView::kOpDeltaTotalPercent).isValid());
      // Its whole time moved: it counts 0 where it did not run.
      const double total = static_cast<double>(o.base ? o.base->total_ns : o.next->total_ns) * 1e-6;
      QCOMPARE(cell(m, row, ComparisonView::kOpDeltaTotal).toDouble(), o.base ? -total : total);
    }
    QVERIFY(base_only > 0);  // convolutions are resnet50's alone
    QVERIFY(new_only > 0);
    std::set<std::string> every = in_base;
    every.insert(in_next.begin(), in_next.end());
    QCOMPARE(m->rows().size(), every.size());
  }

  void aRunThatDidNotCompleteIsNotJudged() {
    ComparisonView v;
    compare(v, kBase, kLost);
    const RunComparison& c = *v.comparison();
    QVERIFY(!c.judged);
    QCOMPARE(c.notes.size(), size_t{1});
    QVERIFY2(QString::fromStdString(c.notes.front()).contains("run 4 is lost"), c.notes.front().c_str());
    QVERIFY(!QString::fromStdString(c.notes.front()).contains("different configurations"));
    for (const auto& m : c.metrics) QVERIFY(!m.statistics);
    QVERIFY(v.header_text().contains("lost"));
  }

  void deltasSortAsNumbersAndTheSearchFilters() {
    ComparisonView v;
    compare(v, kBase, kOtherWorkload);
    QTableView* view = v.ops_view();
    const QAbstractItemModel* shown = view->model();
    const int rows = shown->rowCount();
    QVERIFY(rows > 10);
    view->sortByColumn(ComparisonView::kOpDeltaTotal, Qt::AscendingOrder);
    bool negative = false, positive = false;
    for (int row = 0; row < rows; ++row) {
      const double d = cell(shown, row, ComparisonView::kOpDeltaTotal).toDouble();
      negative = negative || d < 0;
      positive = positive || d > 0;
      if (row > 0)
        QVERIFY2(cell(shown, row - 1, ComparisonView::kOpDeltaTotal).toDouble() <= d, qPrintable(QString::number(row)));
    }
    QVERIFY(negative && positive);  // text order would put -0.5 before -12
    // Where a side is missing the change in percent is empty: after every number, either way up.
    for (const auto order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
      view->sortByColumn(ComparisonView::kOpDeltaTotalPercent, order);
      int numbers = 0;
      while (numbers < rows && cell(shown, numbers, ComparisonView::kOpDeltaTotalPercent).isValid()) ++numbers;
      QVERIFY(numbers > 0);
      for (int row = numbers; row < rows; ++row)
        QVERIFY(!cell(shown, row, ComparisonView::kOpDeltaTotalPercent).isValid());
      for (int row = 1; row < numbers; ++row) {
        const double a = cell(shown, row - 1, ComparisonView::kOpDeltaTotalPercent).toDouble();
        const double b = cell(shown, row, ComparisonView::kOpDeltaTotalPercent).toDouble();
        QVERIFY(order == Qt::AscendingOrder ? a <= b : a >= b);
      }
    }

    v.ops_search()->setText("CONV");
    int expected = 0;
    for (const auto& o : v.ops_model()->rows())
      expected += QString::fromStdString(o.name).contains("conv", Qt::CaseInsensitive);
    QVERIFY(expected > 0 && expected < rows);
    QCOMPARE(shown->rowCount(), expected);
    for (int row = 0; row < shown->rowCount(); ++row) {
      QVERIFY(cell(shown, row, ComparisonView::kOpName).toString().contains("conv", Qt::CaseInsensitive));
    }
    v.ops_search()->clear();
    QCOMPARE(shown->rowCount(), rows);
    v.layers_search()->setText("no layer is called this");
    QCOMPARE(v.layers_view()->model()->rowCount(), 0);
  }

  void aNewerRequestMakesAnOlderAnswerStale() {
    ComparisonView v;
    QSignalSpy compared(&v, &ComparisonView::compared);
    v.compare(ref(kBase), ref(kOtherWorkload));
    v.compare(ref(kBase), ref(kSlowed));
    QVERIFY(compared.wait(30000));
    QThreadPool::globalInstance()->waitForDone();
    QTest::qWait(100);  // the older answer, had it been kept, would land now
    QCOMPARE(compared.count(), 1);
    QCOMPARE(v.comparison()->new_ref.run, kSlowed);
    QCOMPARE(v.comparison()->next.key.workload, std::string("resnet50"));
  }

  void errorsComeAsASignal() {
    ComparisonView v;
    const std::vector<std::pair<RunRef, QString>> cases = {{{dir_.filePath("missing.db"), 1}, "no database"},
                                                           {{db_, 99}, "run 99"}};
    for (const auto& [bad, words] : cases) {
      QSignalSpy errors(&v, &ComparisonView::error_reported);
      QSignalSpy compared(&v, &ComparisonView::compared);
      v.compare(bad, ref(kBase));
      QVERIFY(errors.wait(30000));
      const QString message = errors.at(0).at(1).toString();
      QVERIFY2(message.contains(words), qPrintable(message));
      QVERIFY(errors.at(0).at(0).toString().contains("Cannot compare"));
      QCOMPARE(compared.count(), 0);
      QVERIFY(!v.comparison().has_value());
      QCOMPARE(v.ops_model()->rowCount(), 0);
      QVERIFY(v.summary_text().contains(message));
    }
    compare(v, kBase, kSlowed);  // and it goes on
  }

  void theViewRendersSomething() {
    ComparisonView v;
    v.resize(1400, 900);
    v.show();
    QDir().mkpath(VIEWER_SHOTS_DIR);
    const std::vector<std::pair<qint64, QString>> shots = {{kSlowed, "compare"}, {kOtherWorkload, "compare_workloads"}};
    for (const auto& [next, name] : shots) {
      compare(v, kBase, next);
      v.tabs()->setCurrentIndex(0);
      QTest::qWait(50);
      const QImage image = v.grab().toImage();
      QVERIFY(image.save(QString(VIEWER_SHOTS_DIR) + "/" + name + ".png"));
      QVERIFY2(distinct_colours(image) > 8, qPrintable(name));
    }
    v.ops_view()->sortByColumn(ComparisonView::kOpDeltaTotal, Qt::AscendingOrder);
    for (const auto& [tab, name] : std::vector<std::pair<int, QString>>{{1, "compare_ops"}, {2, "compare_layers"}}) {
      v.tabs()->setCurrentIndex(tab);
      QTest::qWait(50);
      const QImage image = v.grab().toImage();
      QVERIFY(image.save(QString(VIEWER_SHOTS_DIR) + "/" + name + ".png"));
      QVERIFY2(distinct_colours(image) > 8, qPrintable(name));
    }
  }
};

QTEST_MAIN(ComparisonViewTest)
#include "comparison_view_test.moc"
