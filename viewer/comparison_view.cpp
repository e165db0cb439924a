#include "viewer/comparison_view.h"

#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QTextDocument>
#include <QVBoxLayout>

#include <algorithm>
#include <cstdlib>

#include "reports/number_format.h"
#include "viewer/async_query.h"
#include "viewer/searchable_table.h"

namespace ts::viewer {

namespace {

// The HTML reports' row colours (reports/document.cpp: tr.better, tr.worse, tr.warning).
const char* const kBetter = "#e6f4ea";
const char* const kWorse = "#fce8e6";
const char* const kWarning = "#fef3d6";

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString num(double v, int decimals) { return QString::number(v, 'f', decimals); }
QString ms(double v) { return num(v, v < 10 ? 3 : 1); }
QString percent(double fraction) { return QString::fromStdString(reports::signed_percent(fraction)); }
QString bytes(int64_t b) { return QString::fromStdString(reports::with_commas(b)); }
QString signed_bytes(int64_t b) { return (b > 0 ? "+" : "") + bytes(b); }
const QString kNone = QStringLiteral("—");

struct HtmlRow {
  QStringList cells;
  const char* colour = nullptr;  // background of the whole row; nullptr: none
};

QString table(const QStringList& header, const std::vector<HtmlRow>& rows) {
  QString h = "<table cellspacing=0 cellpadding=3 border=1 style='border-collapse:collapse'><tr>";
  for (const auto& c : header) h += "<th>" + c + "</th>";
  h += "</tr>";
  for (const auto& r : rows) {
    h += r.colour ? QString("<tr bgcolor='%1'>").arg(r.colour) : QString("<tr>");
    for (const auto& c : r.cells) h += "<td>" + c + "</td>";
    h += "</tr>";
  }
  return h + "</table>";
}

const char* colour_of(reports::Verdict v) {
  switch (v) {
    case reports::Verdict::faster:
    case reports::Verdict::shrank: return kBetter;
    case reports::Verdict::slower:
    case reports::Verdict::grew: return kWorse;
    case reports::Verdict::too_few_samples: return kWarning;
    default: return nullptr;
  }
}

QString verdict_text(reports::Verdict v) {
  const QString t = QString::fromStdString(std::string(reports::to_string(v)));
  return colour_of(v) && v != reports::Verdict::too_few_samples ? "<b>" + t + "</b>" : t;
}

// One line naming a run: id, database file, what it measures, its status.
QString run_line(const RunRef& ref, const reports::RunDigest& d) {
  const auto& k = d.key;
  return QStringList{
      "run " + QString::number(ref.run),     QFileInfo(ref.db).fileName().toHtmlEscaped(),
      esc(k.workload) + "/" + esc(k.preset), esc(k.device),
      "batch " + QString::number(k.batch),   QString::number(k.ranks) + (k.ranks == 1 ? " rank" : " ranks"),
      "<b>" + esc(d.status) + "</b>"}
      .join(" · ");
}

// Who is compared with whom: identity rows, the cells of a field that differs in bold.
QString runs_table(const RunComparison& c) {
  const auto& b = c.base;
  const auto& n = c.next;
  const auto row = [](const QString& field, const QString& base, const QString& next, bool key = false) {
    const bool differ = base != next;
    const auto cell = [differ](const QString& v) { return differ ? "<b>" + v + "</b>" : v; };
    return HtmlRow{{field, cell(base), cell(next)}, differ && key ? kWarning : nullptr};
  };
  std::vector<HtmlRow> rows = {
      row("run", QString::number(c.base_ref.run), QString::number(c.new_ref.run)),
      row("database", c.base_ref.db.toHtmlEscaped(), c.new_ref.db.toHtmlEscaped()),
      row("workload", esc(b.key.workload), esc(n.key.workload), true),
      row("preset", esc(b.key.preset), esc(n.key.preset), true),
      row("device", esc(b.key.device), esc(n.key.device), true),
      row("batch per rank", QString::number(b.key.batch), QString::number(n.key.batch), true),
      row("ranks", QString::number(b.key.ranks), QString::number(n.key.ranks), true),
      row("status", esc(b.status), esc(n.status)),
      row("started", esc(b.run.started_at), esc(n.run.started_at)),
      row("threads", QString::number(b.run.threads), QString::number(n.run.threads)),
      row("timed iterations kept", QString::number(b.iteration_ms.size()), QString::number(n.iteration_ms.size())),
  };
  return table({"", "base", "new"}, rows);
}

QString metrics_table(const RunComparison& c) {
  std::vector<HtmlRow> rows;
  const auto value = [](const std::optional<double>& v, const std::string& unit) {
    return v ? QString::fromStdString(reports::three_digits(*v)) + " " + esc(unit) : kNone;
  };
  for (const auto& m : c.metrics) {
    HtmlRow r;
    r.cells = {esc(m.metric), value(m.base_median, m.unit), value(m.new_median, m.unit)};
    if (m.statistics) {
      const auto& s = *m.statistics;
      r.cells << QString("%1 [%2, %3]").arg(percent(s.delta), percent(s.delta_low), percent(s.delta_high))
              << QString::number(s.p_value, 'g', 3) << QString("%1/%2").arg(s.base_n).arg(s.new_n)
              << verdict_text(s.verdict);
      r.colour = colour_of(s.verdict);
    } else {
      r.cells << (m.change ? percent(*m.change) : kNone) << kNone << QString("%1/%2").arg(m.base_n).arg(m.new_n)
              << kNone;
    }
    rows.push_back(std::move(r));
  }
  return table({"metric", "base median", "new median", c.judged ? "change [95% interval]" : "change of the medians",
                "p", "n base/new", "verdict"},
               rows);
}

QString breakdown_table(const RunComparison& c) {
  using B = reports::RankBreakdownMedians;
  const std::vector<std::pair<QString, double B::*>> fields = {
      {"iteration", &B::iteration_ms}, {"compute", &B::compute_ms},           {"comm", &B::comm_ms},
      {"overlap", &B::overlap_ms},     {"exposed comm", &B::exposed_comm_ms}, {"idle", &B::idle_ms}};
  QStringList header = {"rank"};
  for (const auto& [name, _] : fields) header << name;
  std::vector<HtmlRow> rows;
  for (const auto& r : c.breakdown) {
    HtmlRow row{{QString::number(r.rank)}};
    for (const auto& [_, field] : fields) {
      const QString base = r.base ? ms((*r.base).*field) : kNone;
      const QString next = r.next ? ms((*r.next).*field) : kNone;
      QString cell = base + " → " + next;
      if (r.base && r.next && (*r.base).*field > 0)
        cell += " <small>(" + percent((*r.next).*field / (*r.base).*field - 1) + ")</small>";
      row.cells << cell;
    }
    rows.push_back(std::move(row));
  }
  return table(header, rows);
}

QString memory_table(const RunComparison& c) {
  std::vector<HtmlRow> rows;
  for (const auto& m : c.memory) {
    HtmlRow r;
    const int64_t change = m.new_bytes - m.base_bytes;
    const QString share =
        m.base_bytes > 0 ? percent(static_cast<double>(m.new_bytes) / static_cast<double>(m.base_bytes) - 1) : kNone;
    r.cells = {m.category == "peak" ? "<b>total at peak</b>" : esc(m.category),
               esc(m.tbd_class),
               bytes(m.base_bytes),
               bytes(m.new_bytes),
               signed_bytes(change),
               change == 0 ? QString() : share,
               m.verdict ? verdict_text(*m.verdict) : kNone};
    if (m.verdict) r.colour = colour_of(*m.verdict);
    rows.push_back(std::move(r));
  }
  return table({"category", "TBD class", "base bytes", "new bytes", "change bytes", "change", "verdict"}, rows);
}

// The ops whose total time moved most, either way (an op of one run only moves by all of it).
QString op_changes(const RunComparison& c) {
  size_t both = 0, base_only = 0, new_only = 0;
  for (const auto& o : c.ops) (o.base && o.next ? both : o.base ? base_only : new_only)++;
  QString h = QString("<p>%1 ops and kernels in both runs, %2 only in the base, %3 only in the new run (the tables "
                      "have them all).</p>")
                  .arg(both)
                  .arg(base_only)
                  .arg(new_only);
  std::vector<const OpDelta*> moved;
  for (const auto& o : c.ops) moved.push_back(&o);
  const auto change_ns = [](const OpDelta* o) {
    return (o->next ? o->next->total_ns : 0) - (o->base ? o->base->total_ns : 0);
  };
  std::stable_sort(moved.begin(), moved.end(),
                   [&](const OpDelta* a, const OpDelta* b) { return std::abs(change_ns(a)) > std::abs(change_ns(b)); });
  moved.resize(std::min<size_t>(moved.size(), 8));
  std::vector<HtmlRow> rows;
  for (const OpDelta* o : moved) {
    const QString base = o->base ? ms(static_cast<double>(o->base->total_ns) * 1e-6) : kNone;
    const QString next = o->next ? ms(static_cast<double>(o->next->total_ns) * 1e-6) : kNone;
    const QString where = o->base && o->next ? QString() : o->base ? "base only" : "new only";
    rows.push_back({{esc(o->name), esc(o->device), base, next,
                     (change_ns(o) > 0 ? "+" : "") + ms(static_cast<double>(change_ns(o)) * 1e-6), where},
                    where.isEmpty() ? nullptr : kWarning});
  }
  if (!rows.empty()) h += table({"op or kernel", "device", "base total ms", "new total ms", "change ms", ""}, rows);
  return h;
}

// The store sums an op's self time over the run's timed iterations: totals of runs that timed
// different numbers of iterations differ by that alone.
QString ops_note(const RunComparison& c) {
  const size_t base = c.base.iteration_ms.size(), next = c.next.iteration_ms.size();
  QString note = QString("Self time summed over each run's timed iterations (base %1, new %2); Δ total counts an op "
                         "missing from a run as 0 ms.")
                     .arg(base)
                     .arg(next);
  if (base != next)
    note += " The runs timed different numbers of iterations: compare the means per call, or the totals per iteration.";
  return note;
}

}  // namespace

QString comparison_html(const RunComparison& c) {
  const QString what =
      c.base.key == c.next.key ? esc(c.base.key.label()) : esc(c.base.key.label()) + " → " + esc(c.next.key.label());
  QString h = QString("<h2>run %1 → run %2 · %3</h2>")
                  .arg(QString::number(c.base_ref.run), QString::number(c.new_ref.run), what);
  for (const auto& note : c.notes) h += QString("<p style='background-color:%1'>%2</p>").arg(kWarning, esc(note));
  h += runs_table(c);
  h += QString("<h3>Timing (%1)</h3>")
           .arg(c.judged ? "medians over the timed iterations; change = new/base - 1 with its 95% Hodges-Lehmann "
                           "interval; p from "
                           "the two-sided Mann-Whitney U test, as trainscope compare"
                         : "medians over the timed iterations; no statistics");
  h += metrics_table(c);
  if (!c.breakdown.empty())
    h += "<h3>Breakdown per rank (median ms per timed iteration, base → new)</h3>" + breakdown_table(c);
  h += QString("<h3>Memory at peak: %1 → %2 (the ledger, rank 0; compared exactly)</h3>")
           .arg(esc(reports::human_bytes(static_cast<double>(c.base.peak_bytes))),
                esc(reports::human_bytes(static_cast<double>(c.next.peak_bytes))));
  h += memory_table(c);
  h += "<h3>Ops and kernels: the largest changes in self time</h3><p>" + ops_note(c) + "</p>" + op_changes(c);
  if (c.environment.empty()) {
    h += "<h3>Environment</h3><p>the same in both runs</p>";
  } else {
    std::vector<HtmlRow> rows;
    for (const auto& e : c.environment)
      rows.push_back({{esc(e.key), e.base ? esc(*e.base) : kNone, e.next ? esc(*e.next) : kNone}});
    h += "<h3>Environment: what differs</h3>" + table({"key", "base", "new"}, rows);
  }
  return h;
}

namespace {

double ms_of(double ns) { return ns * 1e-6; }
QVariant none() { return {}; }
// new/base - 1 in percent, where both exist and the base is not 0.
QVariant percent_change(std::optional<double> base, std::optional<double> next) {
  if (!base || !next || *base == 0) return none();
  return 100.0 * (*next / *base - 1.0);
}
template <class T>
std::optional<double> as_double(const std::optional<T>& side, double T::*field) {
  return side ? std::optional<double>((*side).*field) : std::nullopt;
}
QString in_text(bool base, bool next) { return base && next ? "both" : base ? "base only" : "new only"; }

std::vector<RecordColumn<OpDelta>> op_columns() {
  using R = OpDelta;
  const auto total = [](const std::optional<store::OpSummaryRow>& o) {
    return o ? QVariant(ms_of(static_cast<double>(o->total_ns))) : none();
  };
  const auto mean = [](const std::optional<store::OpSummaryRow>& o) {
    return o ? QVariant(ms_of(o->mean_ns)) : none();
  };
  const auto count = [](const std::optional<store::OpSummaryRow>& o) {
    return o ? QVariant(static_cast<qlonglong>(o->count)) : none();
  };
  const auto total_ns = [](const std::optional<store::OpSummaryRow>& o) {
    return o ? std::optional<double>(static_cast<double>(o->total_ns)) : std::nullopt;
  };
  // The order of ComparisonView::OpColumn.
  return {
      {"op or kernel", [](const R& r) { return QVariant(QString::fromStdString(r.name)); }},
      {"device", [](const R& r) { return QVariant(QString::fromStdString(r.device)); }},
      {"in", [](const R& r) { return QVariant(in_text(r.base.has_value(), r.next.has_value())); }},
      {"base total ms", [=](const R& r) { return total(r.base); }, 3},
      {"new total ms", [=](const R& r) { return total(r.next); }, 3},
      // An op that ran in one run only moved by all of its time: it counts 0 where it did not run.
      {"Δ total ms",
       [](const R& r) {
         return QVariant(ms_of(static_cast<double>((r.next ? r.next->total_ns : 0) - (r.base ? r.base->total_ns : 0))));
       },
       3},
      {"Δ total %", [=](const R& r) { return percent_change(total_ns(r.base), total_ns(r.next)); }, 1},
      {"base mean ms", [=](const R& r) { return mean(r.base); }, 4},
      {"new mean ms", [=](const R& r) { return mean(r.next); }, 4},
      {"Δ mean %",
       [](const R& r) {
         return percent_change(as_double(r.base, &store::OpSummaryRow::mean_ns),
                               as_double(r.next, &store::OpSummaryRow::mean_ns));
       },
       1},
      {"base count", [=](const R& r) { return count(r.base); }},
      {"new count", [=](const R& r) { return count(r.next); }},
  };
}

std::vector<RecordColumn<LayerDelta>> layer_columns() {
  using R = LayerDelta;
  using L = store::LayerRow;
  const auto time = [](const std::optional<L>& l, double L::*field) {
    return l ? QVariant(ms_of((*l).*field)) : none();
  };
  const auto kib = [](const std::optional<L>& l) {
    return l ? QVariant(static_cast<double>(l->activation_bytes) / 1024.0) : none();
  };
  const auto params = [](const std::optional<L>& l) {
    return l ? QVariant(static_cast<qlonglong>(l->parameter_count)) : none();
  };
  // The order of ComparisonView::LayerColumn.
  return {
      {"layer", [](const R& r) { return QVariant(QString::fromStdString(r.layer)); }},
      {"in", [](const R& r) { return QVariant(in_text(r.base.has_value(), r.next.has_value())); }},
      {"base forward ms", [=](const R& r) { return time(r.base, &L::forward_ns); }, 4},
      {"new forward ms", [=](const R& r) { return time(r.next, &L::forward_ns); }, 4},
      {"Δ forward %",
       [](const R& r) { return percent_change(as_double(r.base, &L::forward_ns), as_double(r.next, &L::forward_ns)); },
       1},
      {"base backward ms", [=](const R& r) { return time(r.base, &L::backward_ns); }, 4},
      {"new backward ms", [=](const R& r) { return time(r.next, &L::backward_ns); }, 4},
      {"Δ backward %",
       [](const R& r) {
         return percent_change(as_double(r.base, &L::backward_ns), as_double(r.next, &L::backward_ns));
       },
       1},
      {"base activations KiB", [=](const R& r) { return kib(r.base); }, 1},
      {"new activations KiB", [=](const R& r) { return kib(r.next); }, 1},
      {"Δ activations KiB",
       [](const R& r) {
         return r.base && r.next
                    ? QVariant(static_cast<double>(r.next->activation_bytes - r.base->activation_bytes) / 1024.0)
                    : none();
       },
       1},
      {"base parameters", [=](const R& r) { return params(r.base); }},
      {"new parameters", [=](const R& r) { return params(r.next); }},
      {"Δ parameters",
       [](const R& r) {
         return r.base && r.next ? QVariant(static_cast<qlonglong>(r.next->parameter_count - r.base->parameter_count))
                                 : none();
       }},
  };
}

// Empty cells (a side without the op or layer) last whichever way a column is sorted: sorting the
// changes down to find the largest should not start with a screen of "—".
class EmptyLastProxy : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;

 protected:
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override {
    const bool l = left.data(sortRole()).isValid();
    const bool r = right.data(sortRole()).isValid();
    if (l && r) return QSortFilterProxyModel::lessThan(left, right);
    // Descending order puts a row first when the other is less than it.
    return l != r && (sortOrder() == Qt::AscendingOrder ? l : r);
  }
};

template <class Row>
QString one_sided(const Row& r) {
  if (r.base && r.next) return {};
  return r.base ? QObject::tr("only in the base run") : QObject::tr("only in the new run");
}

}  // namespace

ComparisonView::ComparisonView(QWidget* parent)
    : QWidget(parent),
      header_(new QLabel),
      tabs_(new QTabWidget),
      summary_(new QTextBrowser),
      ops_(new DeltaTableModel<OpDelta>(op_columns(), one_sided<OpDelta>, this)),
      layers_(new DeltaTableModel<LayerDelta>(layer_columns(), one_sided<LayerDelta>, this)),
      ops_note_(new QLabel) {
  header_->setTextFormat(Qt::RichText);
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  header_->setWordWrap(true);
  header_->setContentsMargins(6, 4, 6, 2);
  tabs_->addTab(summary_, tr("Summary"));
  ops_note_->setWordWrap(true);
  const auto ops = make_searchable_table(ops_, new EmptyLastProxy(this), tr("Search ops and kernels"), ops_note_);
  ops_view_ = ops.view;
  ops_search_ = ops.search;
  tabs_->addTab(ops.page, tr("Ops and kernels"));
  auto* layers_note = new QLabel(tr("Forward and backward: ms per timed iteration; activations: bytes allocated per "
                                    "iteration; parameters: the layer's own (a block's are in its layers)."));
  layers_note->setWordWrap(true);
  const auto layers = make_searchable_table(layers_, new EmptyLastProxy(this), tr("Search layers"), layers_note);
  layers_view_ = layers.view;
  layers_search_ = layers.search;
  tabs_->addTab(layers.page, tr("Layers"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(header_);
  layout->addWidget(tabs_, 1);
  show_message(tr("Select two runs to compare."));
}

void ComparisonView::compare(const RunRef& base, const RunRef& next) {
  const uint64_t request = ++request_;
  const QString runs =
      tr("run %1 of %2 and run %3 of %4").arg(QString::number(base.run), base.db, QString::number(next.run), next.db);
  show_message(tr("Reading %1 ...").arg(runs));
  run_query<RunComparison>(
      this, [base, next] { return load_run_comparison(base, next); },
      [this, request, base, next, runs](QueryResult<RunComparison> r) {
        if (request != request_) return;  // the user has asked for another comparison since
        if (!r.value) {
          show_message(tr("Could not compare %1: %2").arg(runs, r.error));
          emit error_reported(
              tr("Cannot compare run %1 with run %2").arg(QString::number(base.run), QString::number(next.run)),
              r.error);
          return;
        }
        show_comparison(std::move(*r.value));
        emit compared();
      });
}

void ComparisonView::show_message(const QString& text) {
  comparison_.reset();
  header_->setText(text.toHtmlEscaped());
  summary_html_ = "<p>" + text.toHtmlEscaped() + "</p>";
  summary_->setHtml(summary_html_);
  ops_note_->clear();
  ops_->set_rows({});
  layers_->set_rows({});
}

void ComparisonView::show_comparison(RunComparison c) {
  header_->setText(QString("<b>base</b> %1<br><b>new</b> %2%3")
                       .arg(run_line(c.base_ref, c.base), run_line(c.new_ref, c.next),
                            c.judged ? QString()
                                     : QString("<br><span style='background-color:%1'>%2</span>")
                                           .arg(kWarning, tr("not judged: see the summary"))));
  summary_html_ = comparison_html(c);
  summary_->setHtml(summary_html_);
  ops_note_->setText(ops_note(c));
  ops_->set_rows(c.ops);
  layers_->set_rows(c.layers);
  ops_view_->resizeColumnsToContents();
  layers_view_->resizeColumnsToContents();
  comparison_ = std::move(c);
}

QString ComparisonView::header_text() const {
  QTextDocument doc;
  doc.setHtml(header_->text());
  return doc.toPlainText();
}

QString ComparisonView::summary_text() const { return summary_->toPlainText(); }

}  // namespace ts::viewer
