#include "viewer/memory_view.h"

#include <QAreaSeries>
#include <QBrush>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QEvent>
#include <QFont>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QPen>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "reports/number_format.h"
#include "store/error.h"
#include "store/reader.h"
#include "viewer/async_query.h"
#include "viewer/nice_step.h"
#include "vocabulary/memory_category.h"

namespace ts::viewer {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }
QString mib_text(int64_t bytes) { return QString::number(mib(bytes), 'f', 2) + " MiB"; }
QString seconds_text(double s) { return QString::number(s, 'f', 3) + " s"; }
QString commas(int64_t n) { return QString::fromStdString(reports::with_commas(n)); }

// About `ticks` ticks over `range`, so the axes read 0.05, 0.10, ... and 5, 10, ... whatever the
// run's length and size.
void set_ticks(QValueAxis* axis, double range, int ticks) {
  const double step = range > 0 ? nice_step(range / ticks) : 1;
  axis->setTickType(QValueAxis::TicksDynamic);
  axis->setTickAnchor(0);
  axis->setTickInterval(step);
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step))));
  axis->setLabelFormat(QString("%.%1f").arg(decimals));
}

// One colour per category, the same in every run (Okabe-Ito's colour-blind-safe set, plus a
// brown and a grey): stacked areas in the theme's few colours would repeat after five.
QColor category_colour(const std::string& category) {
  static const QColor colours[vocabulary::kCategoryCount] = {QColor("#0072B2"), QColor("#56B4E9"), QColor("#009E73"),
                                                             QColor("#E69F00"), QColor("#F0E442"), QColor("#CC79A7"),
                                                             QColor("#D55E00"), QColor("#8C564B"), QColor("#999999")};
  const auto c = vocabulary::parse_category(category);
  return c ? colours[static_cast<size_t>(*c)] : QColor("#444444");
}

// Categories in the ledger's order (weights first, as the overview's bar), names this build does
// not know after them.
size_t category_order(const std::string& category) {
  const auto c = vocabulary::parse_category(category);
  return c ? static_cast<size_t>(*c) : vocabulary::kCategoryCount;
}

// The timeline's rows (one per category per point) as points: a time and bytes per category.
struct Point {
  int64_t t_ns = 0;
  std::map<std::string, int64_t> bytes;
  int64_t total = 0;
};

std::vector<Point> points_of(const std::vector<store::MemoryPoint>& rows) {
  std::vector<Point> points;
  for (const auto& r : rows) {
    if (points.empty() || points.back().t_ns != r.t_ns) points.push_back({r.t_ns, {}, 0});
    points.back().bytes[r.category] = r.live_bytes;
  }
  for (auto& p : points) {
    for (const auto& [category, bytes] : p.bytes) p.total += bytes;
  }
  return points;
}

std::vector<RecordColumn<store::MemoryLiveRow>> live_columns() {
  using R = store::MemoryLiveRow;
  return {
      {"category", [](const R& r) { return QVariant(QString::fromStdString(r.category)); }},
      {"owner (layer)",
       [](const R& r) {
         return QVariant(r.owner.empty() ? QStringLiteral("(none)") : QString::fromStdString(r.owner));
       }},
      {"bytes", [](const R& r) { return QVariant(static_cast<qlonglong>(r.bytes)); }},
      {"MiB", [](const R& r) { return QVariant(mib(r.bytes)); }, 3},
  };
}

}  // namespace

MemoryView::MemoryView(QWidget* parent)
    : QWidget(parent),
      pages_(new QStackedWidget),
      message_(new QLabel),
      ranks_(new QComboBox),
      ranks_label_(new QLabel(tr("Rank"))),
      changes_note_(new QLabel),
      view_(new QChartView),
      live_summary_(new QLabel),
      live_(new RecordTableModel<store::MemoryLiveRow>(live_columns(), this)),
      live_view_(new QTableView) {
  message_->setWordWrap(true);
  message_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  message_->setMargin(8);

  changes_note_->setWordWrap(true);
  live_summary_->setWordWrap(true);
  live_summary_->setText(tr("Click a time in the chart to see what was live then, by category and owner."));
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumHeight(240);
  view_->viewport()->installEventFilter(this);
  view_->setToolTip(tr("Click a time to see what was live then"));

  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(live_);
  proxy->setSortRole(kSortRole);
  live_view_->setModel(proxy);
  live_view_->setSortingEnabled(true);
  live_view_->sortByColumn(-1, Qt::AscendingOrder);  // the store's order (largest first) until a header is clicked
  live_view_->verticalHeader()->hide();
  live_view_->horizontalHeader()->setStretchLastSection(true);
  live_view_->setSelectionBehavior(QAbstractItemView::SelectRows);

  auto* top = new QHBoxLayout;
  top->addWidget(ranks_label_);
  top->addWidget(ranks_);
  top->addWidget(changes_note_, 1);
  connect(ranks_, &QComboBox::activated, this, [this](int index) {
    if (index >= 0) show_rank(ranks_->itemData(index).toLongLong());
  });

  auto* below = new QWidget;
  auto* below_layout = new QVBoxLayout(below);
  below_layout->setContentsMargins(0, 0, 0, 0);
  below_layout->addWidget(live_summary_);
  below_layout->addWidget(live_view_);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(view_);
  split->addWidget(below);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);

  auto* chart_page = new QWidget;
  auto* chart_layout = new QVBoxLayout(chart_page);
  chart_layout->setContentsMargins(0, 0, 0, 0);
  chart_layout->addLayout(top);
  chart_layout->addWidget(split, 1);
  pages_->addWidget(message_);
  pages_->addWidget(chart_page);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(pages_);
  replace_chart(new QChart);
  show_message(tr("Select a run to see its memory over time."));
}

QChart* MemoryView::chart() const { return view_->chart(); }

QString MemoryView::peak_label() const { return peak_text_ ? peak_text_->text() : QString(); }

QString MemoryView::live_summary() const { return live_summary_->text(); }

QString MemoryView::message() const { return pages_->currentWidget() == message_ ? message_->text() : QString(); }

void MemoryView::show_message(const QString& text) {
  message_->setText(text);
  pages_->setCurrentWidget(message_);
}

// QChartView takes the new chart and lets go of the old one without deleting it; the markers
// were the old chart's.
void MemoryView::replace_chart(QChart* chart) {
  QChart* old = view_->chart();
  peak_line_ = nullptr;
  inspect_line_ = nullptr;
  peak_text_ = nullptr;
  view_->setChart(chart);
  delete old;
}

void MemoryView::show_run(const QString& db_path, qint64 run_id) {
  db_ = db_path;
  run_ = run_id;
  load(-1);
}

void MemoryView::show_rank(qint64 rank) {
  if (db_.isEmpty()) return;
  load(rank);
}

void MemoryView::load(int64_t rank) {
  const uint64_t request = ++load_request_;
  ++inspect_request_;         // a click's answer for the previous run or rank is stale too
  replace_chart(new QChart);  // no clicks on the previous run's chart meanwhile
  show_message(tr("Reading the memory of run %1 ...").arg(run_));
  run_query<MemoryData>(
      this, [db = db_, run = run_, rank] { return load_memory_data(db, run, rank); },
      [this, request, db = db_, run = run_](QueryResult<MemoryData> r) {
        if (request != load_request_) return;  // the user has moved on
        if (!r.value) {
          show_message(tr("The memory of run %1 of %2 could not be read: %3").arg(run).arg(db, r.error));
          emit error_reported(tr("Cannot read the memory of run %1").arg(run), r.error);
          return;
        }
        show_data(*r.value);
        emit loaded();
      });
}

void MemoryView::show_data(const MemoryData& d) {
  rank_ = d.rank;
  ranks_->clear();
  for (const int64_t k : d.ranks) ranks_->addItem(tr("rank %1").arg(k), QVariant::fromValue<qlonglong>(k));
  ranks_->setCurrentIndex(ranks_->findData(QVariant::fromValue<qlonglong>(d.rank)));
  ranks_->setEnabled(d.ranks.size() > 1);
  ranks_->setVisible(d.ranks.size() > 1);  // a chooser only when there is something to choose
  ranks_label_->setVisible(d.ranks.size() > 1);
  live_->set_rows({});
  live_summary_->setText(tr("Click a time in the chart to see what was live then, by category and owner."));
  has_changes_ = d.changes_stored > 0;
  if (!has_changes_) {
    changes_note_->setText(tr("This run stored no allocation log with owners for rank %1 (runs written before "
                              "schema v5 have none): a click cannot split what was live by owner.")
                               .arg(d.rank));
  } else if (d.changes_dropped > 0) {
    changes_note_->setText(tr("Only the first %1 of %2 allocations and frees were stored: what was live after the "
                              "last of them is incomplete.")
                               .arg(commas(d.changes_stored), commas(d.changes_stored + d.changes_dropped)));
  } else {
    changes_note_->setText(tr("%1 allocations and frees stored with their owners.").arg(commas(d.changes_stored)));
  }

  const std::vector<Point> points = points_of(d.timeline);
  std::set<std::string> shown_set;
  for (const auto& p : points) {
    for (const auto& [category, bytes] : p.bytes) {
      if (bytes != 0) shown_set.insert(category);
    }
  }
  if (points.empty() || shown_set.empty()) {
    replace_chart(new QChart);
    show_message(d.ranks.size() > 1
                     ? tr("Run %1 has no memory data for rank %2: it stored no memory timeline.").arg(run_).arg(d.rank)
                     : tr("Run %1 has no memory data: it stored no memory timeline.").arg(run_));
    return;
  }
  std::vector<std::string> shown(shown_set.begin(), shown_set.end());
  std::stable_sort(shown.begin(), shown.end(),
                   [](const std::string& a, const std::string& b) { return category_order(a) < category_order(b); });

  origin_ns_ = points.front().t_ns;
  const auto x_of = [this](int64_t t_ns) { return static_cast<double>(t_ns - origin_ns_) * 1e-9; };
  peak_ = {};
  if (!d.peak.empty()) {
    peak_.t_ns = d.peak.front().t_ns;
    for (const auto& p : d.peak) peak_.total_bytes += p.bytes;
  } else {
    const auto highest = std::max_element(points.begin(), points.end(),
                                          [](const Point& a, const Point& b) { return a.total < b.total; });
    peak_ = {highest->t_ns, highest->total, true};
  }
  int64_t highest_total = peak_.total_bytes;
  for (const auto& p : points) highest_total = std::max(highest_total, p.total);
  y_top_mib_ = std::max(mib(highest_total) * 1.12, 1e-3);  // room above the peak for its label

  auto* chart = new QChart;
  chart->setTitle(tr("Live memory by category, run %1, rank %2").arg(run_).arg(d.rank));
  auto* x = new QValueAxis;
  x->setTitleText(tr("seconds from the first point"));
  const double x_end = std::max(x_of(points.back().t_ns), x_of(peak_.t_ns));
  x->setRange(0, x_end);
  set_ticks(x, x_end, 8);
  auto* y = new QValueAxis;
  y->setTitleText(tr("MiB live"));
  y->setRange(0, y_top_mib_);
  set_ticks(y, y_top_mib_, 5);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);

  // Stacked: each category's area lies between the sum of the categories below it and that sum
  // plus its own bytes. Each area owns both of its lines (a shared line would be deleted twice).
  std::vector<int64_t> below(points.size(), 0);
  for (const auto& category : shown) {
    auto* area = new QAreaSeries;
    auto* upper = new QLineSeries(area);
    auto* lower = new QLineSeries(area);
    QList<QPointF> up, low;
    up.reserve(static_cast<qsizetype>(points.size()));
    low.reserve(static_cast<qsizetype>(points.size()));
    for (size_t i = 0; i < points.size(); ++i) {
      const auto it = points[i].bytes.find(category);
      const int64_t bytes = it == points[i].bytes.end() ? 0 : it->second;
      const double px = x_of(points[i].t_ns);
      low.append({px, mib(below[i])});
      below[i] += bytes;
      up.append({px, mib(below[i])});
    }
    upper->replace(up);
    lower->replace(low);
    area->setUpperSeries(upper);
    area->setLowerSeries(lower);
    area->setName(QString::fromStdString(category));
    const QColor colour = category_colour(category);
    area->setBrush(colour);
    area->setPen(QPen(colour.darker(130), 1));
    chart->addSeries(area);
    area->attachAxis(x);
    area->attachAxis(y);
  }

  const auto vertical = [&](double at, const QPen& pen, const QString& name) {
    auto* line = new QLineSeries;
    line->setName(name);
    line->append(at, 0);
    line->append(at, y_top_mib_);
    line->setPen(pen);
    chart->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
    for (auto* marker : chart->legend()->markers(line)) marker->setVisible(false);
    return line;
  };
  QPen inspect_pen(QColor("#202124"), 1.5, Qt::DashLine);
  QPen peak_pen(QColor("#B3261E"), 2);
  auto* inspect = vertical(0, inspect_pen, tr("inspected"));
  inspect->setVisible(false);
  auto* peak = vertical(x_of(peak_.t_ns), peak_pen, tr("peak"));
  chart->legend()->setAlignment(Qt::AlignBottom);

  auto* text = new QGraphicsSimpleTextItem(chart);
  text->setText(tr("%1 %2 at %3")
                    .arg(peak_.from_timeline ? tr("highest point") : tr("peak"), mib_text(peak_.total_bytes),
                         seconds_text(x_of(peak_.t_ns))));
  text->setBrush(peak_pen.color());
  QFont font = text->font();
  font.setBold(true);
  text->setFont(font);
  text->setZValue(10);
  connect(chart, &QChart::plotAreaChanged, this, [this] { place_labels(); });

  replace_chart(chart);
  peak_line_ = peak;
  inspect_line_ = inspect;
  peak_text_ = text;
  pages_->setCurrentIndex(1);
  place_labels();
}

// The peak's label at the top of its line, on whichever side of it has room.
void MemoryView::place_labels() {
  if (!peak_line_ || !peak_text_ || peak_line_->count() == 0) return;
  QChart* c = chart();
  const QPointF top = c->mapToPosition(QPointF(peak_line_->at(0).x(), y_top_mib_), peak_line_);
  const double width = peak_text_->boundingRect().width();
  const double left = top.x() + 4 + width > c->plotArea().right() ? top.x() - 4 - width : top.x() + 4;
  peak_text_->setPos(left, top.y() + 2);
}

void MemoryView::inspect_at(qint64 t_ns) {
  if (db_.isEmpty() || !inspect_line_) return;
  const double at = static_cast<double>(t_ns - origin_ns_) * 1e-9;
  inspect_line_->replace({QPointF(at, 0), QPointF(at, y_top_mib_)});
  inspect_line_->setVisible(true);
  for (auto* marker : chart()->legend()->markers(inspect_line_)) marker->setVisible(false);  // shown again with it
  live_summary_->setText(tr("Reading what was live at %1 ...").arg(seconds_text(at)));
  const uint64_t request = ++inspect_request_;
  run_query<std::vector<store::MemoryLiveRow>>(
      this,
      [db = db_.toStdString(), run = run_, rank = rank_, t_ns] {
        return store::Reader(db).memory_live_at(run, t_ns, rank);
      },
      [this, request, t_ns, at](QueryResult<std::vector<store::MemoryLiveRow>> r) {
        if (request != inspect_request_) return;  // a newer click, run or rank
        if (!r.value) {
          live_->set_rows({});
          live_summary_->setText(tr("What was live at %1 could not be read: %2").arg(seconds_text(at), r.error));
          emit error_reported(tr("Cannot read the memory of run %1").arg(run_), r.error);
          return;
        }
        int64_t total = 0;
        for (const auto& row : *r.value) total += row.bytes;
        const int rows = static_cast<int>(r.value->size());
        live_->set_rows(std::move(*r.value));
        live_view_->resizeColumnsToContents();
        if (!has_changes_) {
          live_summary_->setText(
              tr("At %1: no allocation log with owners for rank %2.").arg(seconds_text(at)).arg(rank_));
        } else {
          live_summary_->setText(tr("Live at %1 (rank %2): %3 (%4 bytes) in %5 rows by category and owner")
                                     .arg(seconds_text(at))
                                     .arg(rank_)
                                     .arg(mib_text(total), commas(total))
                                     .arg(rows));
        }
        emit inspected(t_ns);
      });
}

bool MemoryView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view_->viewport() && event->type() == QEvent::MouseButtonPress && peak_line_) {
    const auto* mouse = static_cast<QMouseEvent*>(event);
    if (mouse->button() == Qt::LeftButton) {
      const QPointF in_chart = chart()->mapFromScene(view_->mapToScene(mouse->position().toPoint()));
      if (chart()->plotArea().contains(in_chart)) {
        const double seconds = chart()->mapToValue(in_chart, peak_line_).x();
        inspect_at(origin_ns_ + std::llround(seconds * 1e9));
      }
    }
  }
  return QWidget::eventFilter(watched, event);
}

}  // namespace ts::viewer
