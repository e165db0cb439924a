#pragma once
// A table page as every table of the viewer has it: a search box over a sortable table. The
// proxy sorts by kSortRole (numbers as numbers) and filters the first column by the box,
// ignoring case; the model's own order shows until a header is clicked.
#include <QString>

class QAbstractItemModel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QWidget;

namespace ts::viewer {

struct SearchableTable {
  QWidget* page = nullptr;  // the box, `note` when given, and the table, top to bottom
  QLineEdit* search = nullptr;
  QTableView* view = nullptr;
};

// `proxy` (owned by the caller's object tree) is set up over `model`; `note` may be null.
SearchableTable make_searchable_table(QAbstractItemModel* model, QSortFilterProxyModel* proxy,
                                      const QString& search_hint, QWidget* note = nullptr);

}  // namespace ts::viewer
