#include "viewer/timeline_view.h"

#include <QHash>
#include <QKeyEvent>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QScrollArea>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>

#include "reports/rank_clocks.h"
#include "store/reader.h"
#include "viewer/async_query.h"
#include "viewer/nice_step.h"

namespace ts::viewer {

// The open run. Window, details and marks queries may overlap on the worker threads, and a
// reader (one SQLite connection) serves one of them at a time.
struct TimelineView::Session {
  QString db_path;
  qint64 run_id = 0;
  std::mutex mutex;
  std::unique_ptr<store::TimelineReader> reader;
  template <class F>
  auto use(F f) {
    std::lock_guard lock(mutex);
    return f(*reader);
  }
};

namespace {

constexpr double kMinViewNs = 200;  // the deepest zoom: 200 ns across the plot
// A selected collective's call on every rank: waiting for the last rank, then moving data.
const QColor kCallWaitingColour(140, 190, 255), kCallMovingColour(0, 50, 190);

QString duration_text(double ns) {
  const double a = std::abs(ns);
  if (a >= 1e9) return QString::number(ns / 1e9, 'f', a >= 1e10 ? 1 : 3) + " s";
  if (a >= 1e6) return QString::number(ns / 1e6, 'f', a >= 1e7 ? 1 : 3) + " ms";
  if (a >= 1e3) return QString::number(ns / 1e3, 'f', a >= 1e4 ? 1 : 3) + " µs";
  return QString::number(ns, 'f', 0) + " ns";
}

// A ruler label: in the unit of the time itself, with the decimals the tick step needs.
QString ruler_text(double ns, double step) {
  const double a = std::abs(ns);
  const double unit = a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : a >= 1e3 ? 1e3 : 1;
  const char* name = unit == 1e9 ? " s" : unit == 1e6 ? " ms" : unit == 1e3 ? " µs" : " ns";
  const int decimals = std::clamp(static_cast<int>(std::ceil(std::log10(unit / step) - 1e-9)), 0, 9);
  return QString::number(ns / unit, 'f', decimals) + name;
}

// A stable colour per name, so an op looks the same at every zoom and in every run.
QColor colour_of(const std::string& name) {
  const auto h = qHash(QByteArray::fromRawData(name.data(), static_cast<qsizetype>(name.size())));
  return QColor::fromHsv(static_cast<int>(h % 360), 110 + static_cast<int>((h >> 9) % 80),
                         200 + static_cast<int>((h >> 17) % 40));
}

QColor phase_colour(const std::string& phase) {
  if (phase == "forward") return {66, 133, 244};
  if (phase == "backward") return {234, 134, 52};
  if (phase == "optimizer") return {52, 168, 83};
  return colour_of(phase);
}

QString lane_label(const store::TimelineLane& lane) {
  if (lane.source == "gpu") return QStringLiteral("GPU %1 · stream %2").arg(lane.rank).arg(lane.thread);
  return QStringLiteral("%1 (thread %2)").arg(QString::fromStdString(lane.label)).arg(lane.thread);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  canvas_ = new TimelineCanvas(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(canvas_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  details_ = new QTextBrowser(this);
  details_->setMaximumHeight(130);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(status_);
  layout->addWidget(scroll, 1);
  layout->addWidget(details_);
  show_message(tr("Select a run to see its timeline."));
}

TimelineView::~TimelineView() = default;

void TimelineView::show_message(const QString& text) {
  session_.reset();
  event_count_ = 0;
  ++generation_;
  canvas_->lanes_.clear();
  canvas_->bands_.clear();
  canvas_->window_.reset();
  canvas_->layout_rows();
  selected_.reset();
  marks_.clear();
  details_->clear();
  status_->setText(text);
  canvas_->update();
}

void TimelineView::show_run(const QString& db_path, qint64 run_id) {
  // The same run read again (a refresh while it is written) keeps a zoomed-in view where it was;
  // a view of the whole run shows the whole run again, now longer.
  std::optional<std::pair<int64_t, int64_t>> kept_view;
  if (session_ && session_->db_path == db_path && session_->run_id == run_id &&
      (view_from() > canvas_->run_start_ || view_to() < canvas_->run_end_))
    kept_view = {view_from(), view_to()};
  show_message(tr("Opening the timeline of run %1…").arg(run_id));
  const uint64_t generation = generation_;
  const int pixels = canvas_->plot_width();
  struct Opened {
    std::shared_ptr<Session> session;
    std::vector<store::TimelineBand> bands;
    store::TimelineWindow window;
    qint64 window_ms = 0;
    QString clocks;  // how the ranks' times were set side by side
  };
  run_query<Opened>(
      this,
      [db_path, run_id, pixels, kept_view] {
        Opened o;
        o.session = std::make_shared<Session>();
        o.session->db_path = db_path;
        o.session->run_id = run_id;
        o.session->reader = std::make_unique<store::TimelineReader>(db_path.toStdString(), run_id);
        // Every rank on rank 0's clock, where their clocks were measured (issue 41).
        const reports::RankClocks clocks(store::Reader(db_path.toStdString()).rank_clocks(run_id));
        if (!clocks.models().empty()) {
          o.session->reader->align(clocks.models());
          o.clocks = tr(" Ranks on rank 0's clock, good to %1.")
                         .arg(duration_text(static_cast<double>(clocks.max_uncertainty_ns())));
        }
        o.bands = o.session->reader->bands();
        auto& r = *o.session->reader;
        QElapsedTimer timer;
        timer.start();
        o.window = kept_view ? r.window(kept_view->first, kept_view->second, pixels)
                             : r.window(r.start_ns(), std::max(r.end_ns(), r.start_ns() + 1), pixels);
        o.window_ms = timer.elapsed();
        return o;
      },
      [this, generation, run_id](QueryResult<Opened> r) {
        if (generation != generation_) return;
        if (!r.value) {
          status_->setText(tr("The timeline could not be read: %1").arg(r.error));
          emit error_reported(tr("Cannot read the timeline"), r.error);
          return;
        }
        session_ = r.value->session;
        last_query_ms_ = r.value->window_ms;
        auto& reader = *session_->reader;
        event_count_ = reader.event_count();
        canvas_->lanes_ = reader.lanes();
        canvas_->bands_ = std::move(r.value->bands);
        canvas_->run_start_ = reader.start_ns();
        canvas_->run_end_ = std::max(reader.end_ns(), reader.start_ns() + 1);
        canvas_->from_ = static_cast<double>(r.value->window.from_ns);
        canvas_->to_ = static_cast<double>(r.value->window.to_ns);
        canvas_->window_ = std::move(r.value->window);
        canvas_->layout_rows();
        status_->setText(
            reader.event_count() == 0
                ? tr("Run %1 has no trace (run with --trace to record its events).").arg(run_id)
                : tr("Run %1: %2 in %3, %4. Wheel or +/- to zoom, drag or arrows to pan, Home for the "
                     "whole run, click for details.%5")
                          .arg(run_id)
                          .arg(reader.event_count() == 1 ? tr("1 event") : tr("%1 events").arg(reader.event_count()))
                          .arg(reader.lanes().size() == 1 ? tr("1 row") : tr("%1 rows").arg(reader.lanes().size()))
                          .arg(duration_text(static_cast<double>(canvas_->run_end_ - canvas_->run_start_)))
                          .arg(reader.index_stored() ? QString()
                                                     : tr(" (level of detail built on opening: the run has no "
                                                          "final write yet)")) +
                      r.value->clocks);
        canvas_->update();
        emit loaded();
      });
}

int64_t TimelineView::view_from() const { return std::llround(canvas_->from_); }
int64_t TimelineView::view_to() const { return std::llround(canvas_->to_); }
const store::TimelineWindow* TimelineView::window() const { return canvas_->window_ ? &*canvas_->window_ : nullptr; }

void TimelineView::set_view(int64_t from_ns, int64_t to_ns) {
  const double span = static_cast<double>(canvas_->run_end_ - canvas_->run_start_);
  double from = static_cast<double>(from_ns), to = static_cast<double>(to_ns);
  if (to - from < kMinViewNs) {
    const double mid = (from + to) / 2;
    from = mid - kMinViewNs / 2;
    to = mid + kMinViewNs / 2;
  }
  // Never further out than the run with a margin, never panned off it.
  const double lo = static_cast<double>(canvas_->run_start_) - span * 0.05;
  const double hi = static_cast<double>(canvas_->run_end_) + span * 0.05;
  if (to - from > hi - lo) from = lo, to = hi;
  if (from < lo) to += lo - from, from = lo;
  if (to > hi) from -= to - hi, to = hi;
  canvas_->from_ = from;
  canvas_->to_ = to;
  canvas_->update();
  request_window();
}

void TimelineView::zoom(double factor, std::optional<int64_t> anchor_ns) {
  const double anchor = anchor_ns ? static_cast<double>(*anchor_ns) : (canvas_->from_ + canvas_->to_) / 2;
  const double from = anchor - (anchor - canvas_->from_) / factor, to = anchor + (canvas_->to_ - anchor) / factor;
  set_view(std::llround(from), std::llround(to));
}

void TimelineView::pan(double fraction) {
  const double shift = (canvas_->to_ - canvas_->from_) * fraction;
  set_view(std::llround(canvas_->from_ + shift), std::llround(canvas_->to_ + shift));
}

void TimelineView::show_all() { set_view(canvas_->run_start_, canvas_->run_end_); }

void TimelineView::request_window() {
  if (!session_) return;
  if (in_flight_) {  // the newest view is asked for when the current answer lands
    pending_ = true;
    return;
  }
  in_flight_ = true;
  const uint64_t generation = generation_;
  struct Answer {
    store::TimelineWindow window;
    qint64 ms = 0;
  };
  run_query<Answer>(
      this,
      [session = session_, from = view_from(), to = view_to(), pixels = canvas_->plot_width()] {
        QElapsedTimer timer;
        timer.start();
        Answer a{session->use([&](store::TimelineReader& r) { return r.window(from, to, pixels); }), 0};
        a.ms = timer.elapsed();
        return a;
      },
      [this, generation](QueryResult<Answer> r) {
        in_flight_ = false;
        if (generation != generation_) return;
        if (!r.value) {
          status_->setText(tr("The timeline could not be read: %1").arg(r.error));
          emit error_reported(tr("Cannot read the timeline"), r.error);
          return;
        }
        last_query_ms_ = r.value->ms;
        canvas_->window_ = std::move(r.value->window);
        canvas_->update();
        if (pending_) {
          pending_ = false;
          request_window();
          return;
        }
        emit window_ready();
      });
}

void TimelineView::highlight(const QString& name, bool layer) {
  marks_.clear();
  canvas_->update();
  if (!session_ || name.isEmpty()) {
    emit highlighted(0);
    return;
  }
  const uint64_t generation = generation_;
  run_query<std::vector<store::TimelineMark>>(
      this,
      [session = session_, n = name.toStdString(), layer] {
        return session->use([&](store::TimelineReader& r) { return r.marks(n, layer); });
      },
      [this, generation, name](QueryResult<std::vector<store::TimelineMark>> r) {
        if (generation != generation_) return;
        if (!r.value) {
          emit error_reported(tr("Cannot find the events of %1").arg(name), r.error);
          return;
        }
        marks_ = std::move(*r.value);
        canvas_->update();
        emit highlighted(static_cast<int>(marks_.size()));
      });
}

bool TimelineView::select_at(QPoint pos) {
  const auto hit = canvas_->hit_at(pos);
  if (hit.event != nullptr) {
    on_selected(*hit.event, std::nullopt);
    return true;
  }
  if (hit.tile != nullptr) {
    on_selected(std::nullopt, *hit.tile);
    return true;
  }
  return false;
}

void TimelineView::on_selected(const std::optional<store::TimelineEvent>& event,
                               const std::optional<store::TimelineTile>& tile) {
  selected_.reset();
  if (tile) {
    const double share =
        100.0 * static_cast<double>(tile->busy_ns) / static_cast<double>(tile->end_ns - tile->start_ns);
    details_->setHtml(tr("<b>%1 events</b> start in %2 – %3 (a summary: zoom in to see them one by one)<br>"
                         "busy %4 (%5% of the interval), most of it in <b>%6</b>")
                          .arg(tile->events)
                          .arg(duration_text(static_cast<double>(tile->start_ns - canvas_->run_start_)))
                          .arg(duration_text(static_cast<double>(tile->end_ns - canvas_->run_start_)))
                          .arg(duration_text(static_cast<double>(tile->busy_ns)))
                          .arg(share, 0, 'f', 1)
                          .arg(QString::fromStdString(tile->top_name).toHtmlEscaped()));
    canvas_->update();
    emit selection_changed();
    return;
  }
  const uint64_t generation = generation_;
  run_query<store::TimelineEventDetails>(
      this,
      [session = session_, e = *event] { return session->use([&](store::TimelineReader& r) { return r.details(e); }); },
      [this, generation](QueryResult<store::TimelineEventDetails> r) {
        if (generation != generation_) return;
        if (!r.value) {
          emit error_reported(tr("Cannot read the event"), r.error);
          return;
        }
        selected_ = std::move(r.value);
        details_->setHtml(details_text());
        canvas_->update();
        emit selection_changed();
      });
}

QString TimelineView::status_text() const { return status_->text(); }

QString TimelineView::details_text() const {
  if (!selected_) return details_->toPlainText();
  const auto& d = *selected_;
  auto row = [](const QString& key, const QString& value) {
    return value.isEmpty() ? QString()
                           : QStringLiteral("<tr><td>%1</td><td>%2</td></tr>").arg(key, value.toHtmlEscaped());
  };
  auto text = [](const std::string& s) { return QString::fromStdString(s); };
  QString html = QStringLiteral("<b>%1</b> <table>").arg(text(d.event.name).toHtmlEscaped());
  html += row(tr("kind"), text(d.kind));
  html += row(tr("where"), text(d.source_label));
  html += row(tr("start"), duration_text(static_cast<double>(d.event.start_ns - canvas_->run_start_)));
  html += row(tr("duration"), duration_text(static_cast<double>(d.event.end_ns - d.event.start_ns)));
  html += row(tr("layer"), text(d.layer));
  html += row(tr("pass"), d.pass == "none" ? QString() : text(d.pass));
  html += row(tr("iteration"), d.iteration >= 0 ? QString::number(d.iteration) : QString());
  html += row(tr("bytes"), d.bytes >= 0 ? QLocale().toString(static_cast<qlonglong>(d.bytes)) : QString());
  html += row(tr("detail"), text(d.detail));
  html += row(tr("launched by"), text(d.launched_by));
  // The same collective call on every rank (drawn under each rank's lane: waiting light, moving dark).
  for (const auto& part : d.call) {
    QString what = tr("%1 – %2").arg(duration_text(static_cast<double>(part.start_ns - canvas_->run_start_)),
                                     duration_text(static_cast<double>(part.end_ns - canvas_->run_start_)));
    if (part.waiting_ns >= 0)
      what += tr(": waited %1, moved %2")
                  .arg(duration_text(static_cast<double>(part.waiting_ns)),
                       duration_text(static_cast<double>(part.moving_ns)));
    if (part.rank == d.call_last_rank) what += tr(" (arrived last)");
    html += row(part.rank == d.rank ? tr("rank %1 (this)").arg(part.rank) : tr("rank %1").arg(part.rank), what);
  }
  if (!d.call.empty() && d.call_last_rank < 0)
    html += row(tr("across ranks"), tr("the ranks' clocks were not measured: each part on its own clock, not split"));
  return html + QStringLiteral("</table>");
}

// ---- the canvas ----

TimelineCanvas::TimelineCanvas(TimelineView* view) : QWidget(view), view_(view) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

double TimelineCanvas::ns_per_pixel() const { return (to_ - from_) / plot_width(); }
int64_t TimelineCanvas::time_at(int x) const { return std::llround(from_ + (x - plot_left()) * ns_per_pixel()); }
int TimelineCanvas::x_of(int64_t t) const {
  const double x = plot_left() + (static_cast<double>(t) - from_) / ns_per_pixel();
  return static_cast<int>(std::clamp(x, -1e6, 1e6));
}

void TimelineCanvas::layout_rows() {
  rows_.clear();
  lane_rows_.assign(lanes_.size(), -1);
  band_rows_.clear();
  int y = kRulerHeight;
  std::optional<int64_t> rank;
  for (const auto& lane : lanes_) {
    if (lane.source == "cpu" && rank != lane.rank) {
      rank = lane.rank;
      band_rows_[lane.rank] = static_cast<int>(rows_.size());
      rows_.push_back({-1, lane.rank, y, kBandHeight});
      y += kBandHeight;
    }
    const int height = std::clamp(lane.depths, 1, kMaxDepths) * kRowHeight;
    if (lane.lane >= 0 && lane.lane < static_cast<int>(lane_rows_.size()))
      lane_rows_[lane.lane] = static_cast<int>(rows_.size());
    rows_.push_back({lane.lane, lane.rank, y, height});
    y += height + 4;
  }
  setMinimumHeight(y + 4);
}

const TimelineCanvas::RowLayout* TimelineCanvas::lane_row(int lane) const {
  if (lane < 0 || lane >= static_cast<int>(lane_rows_.size()) || lane_rows_[lane] < 0) return nullptr;
  return &rows_[static_cast<size_t>(lane_rows_[lane])];
}

const TimelineCanvas::RowLayout* TimelineCanvas::band_row(int64_t rank) const {
  const auto it = band_rows_.find(rank);
  return it == band_rows_.end() ? nullptr : &rows_[static_cast<size_t>(it->second)];
}

int TimelineCanvas::lane_top(int lane) const {
  const RowLayout* row = lane_row(lane);
  return row != nullptr ? row->top : -1;
}

TimelineCanvas::Hit TimelineCanvas::hit_at(QPoint pos) const {
  Hit hit;
  if (!window_ || pos.x() < plot_left()) return hit;
  for (const auto& row : rows_) {
    if (row.lane < 0 || pos.y() < row.top || pos.y() >= row.top + row.height) continue;
    const int depth = (pos.y() - row.top) / kRowHeight;
    const int64_t t = time_at(pos.x());
    const int64_t slack = std::llround(2 * ns_per_pixel());
    for (const auto& e : window_->events)
      if (e.lane == row.lane && e.depth == depth && e.start_ns - slack <= t && t <= e.end_ns + slack) {
        hit.event = &e;
        return hit;
      }
    for (const auto& tile : window_->tiles)
      if (tile.lane == row.lane && tile.depth == depth && tile.start_ns <= t && t < tile.end_ns) {
        hit.tile = &tile;
        return hit;
      }
    return hit;
  }
  return hit;
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const int left = plot_left(), right = width();
  const QFont base_font = font();
  QFont small = base_font;
  small.setPointSizeF(std::max(6.0, base_font.pointSizeF() * 0.85));
  p.setFont(small);
  const QFontMetrics fm(small);

  // Ruler: steps of 1, 2 or 5 x 10^k ns, about every 100 px, labelled from the run's start.
  if (lanes_.empty() && !window_) {
    last_paint_ms_ = timer.elapsed();
    return;
  }
  const double step = nice_step(std::max(1.0, ns_per_pixel() * 100));
  p.setPen(palette().text().color());
  p.drawLine(left, kRulerHeight - 1, right, kRulerHeight - 1);
  const double rel_from = from_ - static_cast<double>(run_start_);
  for (double t = std::ceil(rel_from / step) * step; t <= to_ - static_cast<double>(run_start_); t += step) {
    const int x = x_of(run_start_ + std::llround(t));
    p.drawLine(x, kRulerHeight - 6, x, kRulerHeight - 1);
    p.drawText(x + 3, kRulerHeight - 8, ruler_text(t, step));
  }
  p.drawText(4, kRulerHeight - 8, QStringLiteral("%1 / px").arg(duration_text(ns_per_pixel())));

  // Row labels and backgrounds.
  for (const auto& row : rows_) {
    if (row.lane < 0) {
      p.fillRect(0, row.top, right, row.height, palette().alternateBase());
      p.setPen(palette().text().color());
      QFont bold = small;
      bold.setBold(true);
      p.setFont(bold);
      p.drawText(4, row.top + row.height - 3, QStringLiteral("rank %1 · iterations").arg(row.rank));
      p.setFont(small);
      continue;
    }
    p.setPen(palette().text().color());
    p.drawText(14, row.top + fm.ascent() + 2, lane_label(lanes_[row.lane]));
    p.setPen(palette().mid().color());
    p.drawLine(0, row.top + row.height + 1, right, row.top + row.height + 1);
  }
  p.setClipRect(left, 0, right - left, height());

  // Iterations (alternate shades) and phases on each rank's band row.
  for (const auto& band : bands_) {
    if (static_cast<double>(band.end_ns) < from_ || static_cast<double>(band.start_ns) > to_) continue;
    const RowLayout* row = band_row(band.rank);
    if (row == nullptr) continue;
    const int x0 = x_of(band.start_ns), x1 = std::max(x0 + 1, x_of(band.end_ns));
    if (band.phase.empty()) {
      QColor c = band.iteration % 2 == 0 ? QColor(190, 190, 190) : QColor(150, 150, 150);
      if (band.warmup) c = QColor(230, 200, 200);
      p.fillRect(x0, row->top, x1 - x0, row->height / 2, c);
    } else {
      p.fillRect(x0, row->top + row->height / 2, x1 - x0, row->height / 2, phase_colour(band.phase));
    }
  }

  if (window_) {
    // Summaries: a bar as high as the bucket was busy, in the colour of its busiest name.
    for (const auto& tile : window_->tiles) {
      if (tile.depth >= kMaxDepths) continue;
      const int top = lane_top(tile.lane);
      if (top < 0) continue;
      const int x0 = x_of(tile.start_ns), x1 = std::max(x0 + 1, x_of(tile.end_ns));
      const double busy =
          std::min(1.0, static_cast<double>(tile.busy_ns) / static_cast<double>(tile.end_ns - tile.start_ns));
      const int h = std::max(2, static_cast<int>(std::lround(busy * (kRowHeight - 2))));
      p.fillRect(x0, top + tile.depth * kRowHeight + (kRowHeight - 1 - h), x1 - x0, h, colour_of(tile.top_name));
    }
    // Events drawn alone, with their name where it fits.
    const auto& selected = view_->selected_;
    for (const auto& e : window_->events) {
      if (e.depth >= kMaxDepths) continue;
      const int top = lane_top(e.lane);
      if (top < 0) continue;
      const int x0 = x_of(e.start_ns), x1 = std::max(x0 + 1, x_of(e.end_ns));
      const QRect box(x0, top + e.depth * kRowHeight, x1 - x0, kRowHeight - 1);
      p.fillRect(box, colour_of(e.name));
      const bool is_selected = selected && selected->event.id == e.id && selected->event.gpu == e.gpu;
      if (is_selected) {
        p.setPen(QPen(Qt::black, 2));
        p.drawRect(box.adjusted(1, 1, -1, -1));
      }
      if (box.width() > 30) {
        p.setPen(Qt::black);
        const QRect text = box.intersected(QRect(left, 0, right - left, height())).adjusted(3, 0, -2, 0);
        p.drawText(text, Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(QString::fromStdString(e.name), Qt::ElideRight, text.width()));
      }
    }
  }

  // The selected collective's call on every rank: a strip along the top of each rank's lane,
  // light blue while the rank waited for the last to arrive, dark blue while the data moved.
  if (const auto& chosen = view_->selected_; chosen && !chosen->call.empty()) {
    for (const auto& part : chosen->call) {
      const RowLayout* row = lane_row(part.lane);
      if (row == nullptr) continue;
      const int64_t arrived = part.waiting_ns >= 0 ? part.start_ns + part.waiting_ns : part.start_ns;
      const int x0 = x_of(part.start_ns), x1 = x_of(arrived), x2 = std::max(x1 + 1, x_of(part.end_ns));
      if (x1 > x0) p.fillRect(x0, row->top, x1 - x0, 4, kCallWaitingColour);
      p.fillRect(x1, row->top, x2 - x1, 4, kCallMovingColour);
    }
  }

  // Marks of the highlighted op or layer: a strip under each lane, one tick per pixel at most.
  const auto& marks = view_->marks_;
  for (auto it = marks.begin(); it != marks.end();) {
    const int lane = it->lane;
    const auto lane_end =
        std::partition_point(it, marks.end(), [&](const store::TimelineMark& m) { return m.lane == lane; });
    if (const RowLayout* row = lane_row(lane); row != nullptr) {
      const auto first = std::partition_point(it, lane_end, [&](const store::TimelineMark& m) {
        return static_cast<double>(m.start_ns) < from_ - (to_ - from_);
      });
      int last_x = INT_MIN;
      for (auto m = first; m != lane_end && static_cast<double>(m->start_ns) <= to_; ++m) {
        if (static_cast<double>(m->end_ns) < from_) continue;
        const int x0 = x_of(m->start_ns), x1 = std::max(x0 + 1, x_of(m->end_ns));
        if (x1 <= last_x) continue;
        p.fillRect(std::max(x0, last_x), row->top + row->height - 3, x1 - std::max(x0, last_x), 4, QColor(220, 0, 160));
        last_x = x1;
      }
    }
    it = lane_end;
  }
  last_paint_ms_ = timer.elapsed();
}

void TimelineCanvas::wheelEvent(QWheelEvent* e) {
  const double notches = e->angleDelta().y() / 120.0;
  if (notches == 0) return;
  view_->zoom(std::pow(1.25, notches), time_at(static_cast<int>(e->position().x())));
  e->accept();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  drag_from_ = e->pos();
  drag_view_from_ = from_;
  dragged_ = false;
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* e) {
  if (!drag_from_) return;
  const int dx = e->pos().x() - drag_from_->x();
  if (std::abs(dx) < 3 && !dragged_) return;
  dragged_ = true;
  const double span = to_ - from_;
  const double from = drag_view_from_ - dx * ns_per_pixel();
  view_->set_view(std::llround(from), std::llround(from + span));
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent* e) {
  if (drag_from_ && !dragged_) view_->select_at(e->pos());
  drag_from_.reset();
}

void TimelineCanvas::mouseDoubleClickEvent(QMouseEvent* e) {
  if (!window_) return;
  // Zoom to the event under the cursor, with a margin either side; elsewhere 4x about it.
  if (const auto hit = hit_at(e->pos()); hit.event != nullptr) {
    const int64_t margin = std::max<int64_t>(1, (hit.event->end_ns - hit.event->start_ns) / 10);
    view_->set_view(hit.event->start_ns - margin, hit.event->end_ns + margin);
    return;
  }
  view_->zoom(4, time_at(e->pos().x()));
}

void TimelineCanvas::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
    case Qt::Key_W: view_->zoom(1.5); break;
    case Qt::Key_Minus:
    case Qt::Key_S: view_->zoom(1 / 1.5); break;
    case Qt::Key_Left:
    case Qt::Key_A: view_->pan(-0.2); break;
    case Qt::Key_Right:
    case Qt::Key_D: view_->pan(0.2); break;
    case Qt::Key_Home: view_->show_all(); break;
    default: QWidget::keyPressEvent(e); return;
  }
  e->accept();
}

void TimelineCanvas::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  view_->request_window();  // a different width may want another level
}

}  // namespace ts::viewer
