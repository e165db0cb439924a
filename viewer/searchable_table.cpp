#include "viewer/searchable_table.h"

#include <QHeaderView>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include "viewer/models/record_table_model.h"

namespace ts::viewer {

SearchableTable make_searchable_table(QAbstractItemModel* model, QSortFilterProxyModel* proxy,
                                      const QString& search_hint, QWidget* note) {
  proxy->setSourceModel(model);
  proxy->setSortRole(kSortRole);
  proxy->setFilterKeyColumn(0);
  proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  SearchableTable t;
  t.search = new QLineEdit;
  t.search->setPlaceholderText(search_hint);
  t.search->setClearButtonEnabled(true);
  QObject::connect(t.search, &QLineEdit::textChanged, proxy, &QSortFilterProxyModel::setFilterFixedString);
  t.view = new QTableView;
  t.view->setModel(proxy);
  t.view->setSortingEnabled(true);
  t.view->sortByColumn(-1, Qt::AscendingOrder);  // the model's order until a header is clicked
  t.view->verticalHeader()->hide();
  t.view->horizontalHeader()->setStretchLastSection(true);
  t.view->setSelectionBehavior(QAbstractItemView::SelectRows);
  t.page = new QWidget;
  auto* layout = new QVBoxLayout(t.page);
  layout->addWidget(t.search);
  if (note != nullptr) layout->addWidget(note);
  layout->addWidget(t.view);
  return t;
}

}  // namespace ts::viewer
