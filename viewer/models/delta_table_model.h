#pragma once
// A record table (record_table_model.h) with cells that may be empty, for two runs joined row by
// row: the Compare tab's ops, kernels and layers.
#include <QColor>
#include <QString>

#include <functional>
#include <utility>
#include <vector>

#include "viewer/models/record_table_model.h"

namespace ts::viewer {

// A record table whose cells may be empty: a column gives an invalid QVariant where a run has no
// such op or layer, shown as "—" and sorted after every number. Rows in one run only are tinted.
template <class Row>
class DeltaTableModel : public RecordTableModel<Row> {
 public:
  DeltaTableModel(std::vector<RecordColumn<Row>> columns, std::function<QString(const Row&)> one_sided,
                  QObject* parent = nullptr)
      : RecordTableModel<Row>(std::move(columns), parent), one_sided_(std::move(one_sided)) {}

  QVariant data(const QModelIndex& index, int role) const override {
    if (!index.isValid() || index.row() >= this->rowCount() || index.column() >= this->columnCount()) return {};
    const Row& row = this->rows()[static_cast<size_t>(index.row())];
    if (role == Qt::BackgroundRole || role == Qt::ToolTipRole) {
      const QString why = one_sided_(row);
      if (why.isEmpty()) return {};
      return role == Qt::ToolTipRole ? QVariant(why) : QVariant(QColor(255, 236, 179));
    }
    if (role == Qt::DisplayRole && !RecordTableModel<Row>::data(index, kSortRole).isValid()) return QStringLiteral("—");
    return RecordTableModel<Row>::data(index, role);
  }

 private:
  std::function<QString(const Row&)> one_sided_;  // why the row is in one run only; empty: in both
};

}  // namespace ts::viewer
