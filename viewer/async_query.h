#pragma once
// Every store query the viewer makes runs on a worker thread (Qt's global pool), with a Reader
// of its own, and hands its result back on the GUI thread: the window never waits on SQLite.
// A query that throws comes back as its message.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>
#include <functional>
#include <optional>
#include <utility>

namespace ts::viewer {

template <class T>
struct QueryResult {
  std::optional<T> value;
  QString error;  // set when the query threw
};

// Runs `query` off the GUI thread; `done` is called on `context`'s thread with its result, unless
// `context` is destroyed first.
template <class T>
void run_query(QObject* context, std::function<T()> query, std::function<void(QueryResult<T>)> done) {
  auto* watcher = new QFutureWatcher<QueryResult<T>>(context);
  QObject::connect(watcher, &QFutureWatcher<QueryResult<T>>::finished, context, [watcher, done = std::move(done)] {
    done(watcher->result());
    watcher->deleteLater();
  });
  watcher->setFuture(QtConcurrent::run([query = std::move(query)]() -> QueryResult<T> {
    QueryResult<T> r;
    try {
      r.value = query();
    } catch (const std::exception& e) {
      r.error = QString::fromStdString(e.what());
    } catch (...) {
      r.error = QStringLiteral("an unknown error");
    }
    return r;
  }));
}

}  // namespace ts::viewer
