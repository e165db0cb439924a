#pragma once
// A read-only table over a vector of store records, its columns given as functions: what the
// ops, kernels and layers tables are. Sorting uses kSortRole (numbers as numbers).
#include <QAbstractTableModel>
#include <QString>
#include <QVariant>

#include <functional>
#include <utility>
#include <vector>

namespace ts::viewer {

// The role every viewer table sorts by: numbers as numbers (the display role holds text).
inline constexpr int kSortRole = Qt::UserRole + 1;

template <class Row>
struct RecordColumn {
  QString header;
  std::function<QVariant(const Row&)> value;  // a number (shown with `decimals`) or a string
  int decimals = 0;
};

template <class Row>
class RecordTableModel : public QAbstractTableModel {
 public:
  explicit RecordTableModel(std::vector<RecordColumn<Row>> columns, QObject* parent = nullptr)
      : QAbstractTableModel(parent), columns_(std::move(columns)) {}

  void set_rows(std::vector<Row> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
  }
  const std::vector<Row>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(columns_.size());
  }

  QVariant data(const QModelIndex& index, int role) const override {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const auto& column = columns_[static_cast<size_t>(index.column())];
    const QVariant v = column.value(rows_[static_cast<size_t>(index.row())]);
    const bool number = v.typeId() != QMetaType::QString;
    if (role == kSortRole) return v;
    if (role == Qt::DisplayRole) return number ? QVariant(QString::number(v.toDouble(), 'f', column.decimals)) : v;
    if (role == Qt::TextAlignmentRole && number) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    return {};
  }

  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= columnCount()) return {};
    return columns_[static_cast<size_t>(section)].header;
  }

 private:
  std::vector<RecordColumn<Row>> columns_;
  std::vector<Row> rows_;
};

}  // namespace ts::viewer
