#pragma once
// What the viewer's QTest programs share: making runs with the trainscope command, editing a
// database behind the viewer's back, and telling a rendered view from a blank one.
#include <QImage>
#include <QSet>
#include <QString>
#include <QtTest>

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ts::viewer::testing {

inline bool run_command(const std::string& command) {
  return std::system((command + " > /dev/null 2>&1").c_str()) == 0;
}

// Runs `statement` on `db` (a QTest check: call it from a test function).
inline void sql(const QString& db, const std::string& statement) {
  sqlite3* h = nullptr;
  QCOMPARE(sqlite3_open(db.toStdString().c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, statement.c_str(), nullptr, nullptr, &err);
  const QString message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  QVERIFY2(rc == SQLITE_OK, qPrintable(message));
}

// The first column of the first row `query` returns on `db`, as a number; -1 when it fails (the
// file is locked by its writer for a moment, or not there yet).
inline int64_t query_number(const QString& db, const std::string& query) {
  sqlite3* h = nullptr;
  int64_t value = -1;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_open_v2(db.toStdString().c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(h, query.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    value = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return value;
}

// Not blank: more than a handful of colours (sampled every other pixel).
inline int distinct_colours(const QImage& image) {
  QSet<QRgb> seen;
  for (int y = 0; y < image.height(); y += 2)
    for (int x = 0; x < image.width(); x += 2) seen.insert(image.pixel(x, y));
  return static_cast<int>(seen.size());
}

}  // namespace ts::viewer::testing
