#pragma once
// The timeline: one row per rank's thread and per GPU stream, events nested by depth, each rank's
// iterations and phases as a band above its rows, a time ruler. Zoom with the wheel, +/- or W/S
// (around the cursor), pan by dragging, with A/D or the arrow keys; Home shows the whole run;
// a click selects an event (or a summary) and shows its details; a double click zooms to it.
// What is drawn comes from store::TimelineReader, one window at a time, off the GUI thread: at
// coarse zoom per-bucket summaries (the bar's height is how busy the bucket was), zoomed in the
// events themselves. While an answer is on its way the last one is drawn at the new scale.
#include <QElapsedTimer>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "store/timeline.h"

class QLabel;
class QTextBrowser;

namespace ts::viewer {

class TimelineCanvas;

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);
  ~TimelineView() override;

  void show_run(const QString& db_path, qint64 run_id);  // async; `loaded` when drawn
  void show_message(const QString& text);
  // Marks every event of an op or kernel (`layer` false) or of a layer; empty: none.
  void highlight(const QString& name, bool layer);

  int64_t event_count() const { return event_count_; }  // the open run's traced events; 0: none open

  // The view, in the run's nanoseconds.
  int64_t view_from() const;
  int64_t view_to() const;
  void set_view(int64_t from_ns, int64_t to_ns);
  void zoom(double factor, std::optional<int64_t> anchor_ns = std::nullopt);  // > 1: zoom in
  void pan(double fraction);                                                  // of the view's width
  void show_all();
  // Selects what is drawn at `pos` (canvas coordinates); false when nothing is there.
  bool select_at(QPoint pos);

  TimelineCanvas* canvas() const { return canvas_; }
  const store::TimelineWindow* window() const;  // the last window received
  const std::optional<store::TimelineEventDetails>& selected() const { return selected_; }
  const std::vector<store::TimelineMark>& marks() const { return marks_; }
  QString details_text() const;
  QString status_text() const;  // the line under the plot: what is shown, how the ranks' clocks were set
  qint64 last_query_ms() const { return last_query_ms_; }  // the last window's query, off the GUI thread

 signals:
  void loaded();        // the run is open and its first window drawn
  void window_ready();  // a window answered (after zoom, pan, resize)
  void selection_changed();
  void highlighted(int marks);
  void error_reported(const QString& title, const QString& message);

 private:
  friend class TimelineCanvas;
  struct Session;
  void request_window();
  void on_selected(const std::optional<store::TimelineEvent>& event, const std::optional<store::TimelineTile>& tile);

  TimelineCanvas* canvas_;
  QTextBrowser* details_;
  QLabel* status_;
  std::shared_ptr<Session> session_;  // the open run; queries hold it while they run
  uint64_t generation_ = 0;           // a newer run makes older answers stale
  bool in_flight_ = false, pending_ = false;
  std::optional<store::TimelineEventDetails> selected_;
  std::vector<store::TimelineMark> marks_;
  qint64 last_query_ms_ = 0;
  int64_t event_count_ = 0;  // read when the run opened: never a query on the GUI thread
};

// The painted area; owned by TimelineView, which holds the data it draws.
class TimelineCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineCanvas(TimelineView* view);
  QSize sizeHint() const override { return {1000, 400}; }
  int plot_left() const { return kLabelWidth; }
  int plot_width() const { return std::max(1, width() - kLabelWidth); }
  double ns_per_pixel() const;
  int64_t time_at(int x) const;
  int lane_top(int lane) const;  // -1: not drawn
  qint64 last_paint_ms() const { return last_paint_ms_; }

  static constexpr int kLabelWidth = 190, kRulerHeight = 24, kBandHeight = 14, kRowHeight = 16, kMaxDepths = 12;

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  friend class TimelineView;
  struct RowLayout {
    int lane = -1;  // -1: a rank's band row
    int64_t rank = 0;
    int top = 0, height = 0;
  };
  // What is drawn at a point: an event (within 2 px) or else a summary; both null: nothing.
  struct Hit {
    const store::TimelineEvent* event = nullptr;
    const store::TimelineTile* tile = nullptr;
  };
  Hit hit_at(QPoint pos) const;
  void layout_rows();
  const RowLayout* lane_row(int lane) const;
  const RowLayout* band_row(int64_t rank) const;
  int x_of(int64_t t) const;

  TimelineView* view_;
  std::vector<store::TimelineLane> lanes_;
  std::vector<store::TimelineBand> bands_;
  std::optional<store::TimelineWindow> window_;
  std::vector<RowLayout> rows_;
  std::vector<int> lane_rows_;        // lane -> its index in rows_ (-1: none)
  std::map<int64_t, int> band_rows_;  // rank -> its band row's index in rows_
  int64_t run_start_ = 0, run_end_ = 0;
  double from_ = 0, to_ = 1;  // the view (ns); doubles so deep zooms keep fractions
  std::optional<QPoint> drag_from_;
  double drag_view_from_ = 0;
  bool dragged_ = false;
  qint64 last_paint_ms_ = 0;
};

}  // namespace ts::viewer
