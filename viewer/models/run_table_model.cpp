#include "viewer/models/run_table_model.h"

#include <QBrush>
#include <QColor>
#include <QFileInfo>

#include <algorithm>

namespace ts::viewer {

void RunTableModel::set_runs(const QString& db, std::vector<RunListEntry> runs) {
  beginResetModel();
  std::erase_if(rows_, [&](const RunListEntry& e) { return e.db == db; });
  for (auto& r : runs) rows_.push_back(std::move(r));
  endResetModel();
}

void RunTableModel::remove_db(const QString& db) {
  beginResetModel();
  std::erase_if(rows_, [&](const RunListEntry& e) { return e.db == db; });
  endResetModel();
}

QStringList RunTableModel::databases() const {
  QStringList out;
  for (const auto& r : rows_) {
    if (!out.contains(r.db)) out << r.db;
  }
  return out;
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int RunTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const RunListEntry& e = rows_[static_cast<size_t>(index.row())];
  const auto& r = e.run;
  const bool sorting = role == kSortRole;
  if (role == Qt::DisplayRole || sorting) {
    switch (index.column()) {
      case kDb: return QFileInfo(e.db).fileName();
      case kId: return static_cast<qlonglong>(r.id);
      case kWorkload: return QString::fromStdString(r.workload);
      case kPreset: return QString::fromStdString(r.preset);
      case kDevice: return QString::fromStdString(r.device);
      case kRanks: return static_cast<qlonglong>(r.ranks);
      case kBatch: return static_cast<qlonglong>(r.batch_size);
      case kStatus: return e.status;
      case kThroughput:
        if (!e.throughput) return sorting ? QVariant(-1.0) : QVariant(QStringLiteral("-"));
        return sorting
                   ? QVariant(*e.throughput)
                   : QVariant(QString::number(*e.throughput, 'f', *e.throughput < 100 ? 2 : 1) + " " +
                              e.throughput_unit + (e.sustained ? QString() : QStringLiteral(" (median/iteration)")));
      case kStarted: return QString::fromStdString(r.started_at);
    }
    return {};
  }
  if (role == Qt::ForegroundRole && index.column() == kStatus) {
    if (e.status == "lost" || e.status == "failed") return QBrush(QColor(0xb0, 0x1e, 0x1e));
    if (e.status == "interrupted" || e.status == "stalled") return QBrush(QColor(0x9a, 0x67, 0x00));
  }
  if (role == Qt::ToolTipRole) {
    if (index.column() == kDb) return e.db;
    if (index.column() == kStatus && e.status == "lost")
      return QStringLiteral("its writer is gone: the run ended without a word; it keeps what it flushed");
    if (index.column() == kStatus && e.status == "stalled")
      return QStringLiteral("its writer is there, but the run has not advanced for longer than it allows (stopped, hung)");
    if (index.column() == kStatus && !r.error.empty()) return QString::fromStdString(r.error);
  }
  if (role == Qt::TextAlignmentRole) {
    switch (index.column()) {
      case kId:
      case kRanks:
      case kBatch:
      case kThroughput: return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      default: return {};
    }
  }
  return {};
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const names[kColumnCount] = {"db",    "run",   "workload", "preset",         "device",
                                                  "ranks", "batch", "status",   "sustained rate", "started"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace ts::viewer
