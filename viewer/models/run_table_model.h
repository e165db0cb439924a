#pragma once
// The runs of every open database, one row each, for a sortable, filterable table. Sorting uses
// kSortRole (record_table_model.h); runs whose writer is gone (`lost`) are marked in red.
#include <QAbstractTableModel>

#include <vector>

#include "viewer/models/record_table_model.h"
#include "viewer/models/run_list.h"

namespace ts::viewer {

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kDb, kId, kWorkload, kPreset, kDevice, kRanks, kBatch, kStatus, kThroughput, kStarted, kColumnCount };

  using QAbstractTableModel::QAbstractTableModel;

  // Replaces the rows of `db` (every run it holds now), keeping other databases' rows.
  void set_runs(const QString& db, std::vector<RunListEntry> runs);
  void remove_db(const QString& db);
  const RunListEntry& entry(int row) const { return rows_.at(static_cast<size_t>(row)); }
  QStringList databases() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<RunListEntry> rows_;
};

}  // namespace ts::viewer
