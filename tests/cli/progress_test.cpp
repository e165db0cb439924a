// The progress lines where stderr is no terminal (a file, a pipe, a CI log).
#include "cli/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

using namespace ts::cli;

namespace {

std::string written(FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

}  // namespace

// The count ends on a line of its own, with no carriage return: the next prompt starts afresh.
TEST(Progress, ACountEndsWithANewlineWhereOutputIsNoTerminal) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  CountProgress p("trainscope: exported", "event", f);
  p.update(100'000, 250'000);  // the first is shown at once, the next after 5 s
  p.update(200'000, 250'000);
  p.update(250'000, 250'000);
  p.finish();
  EXPECT_EQ(written(f), "trainscope: exported 100,000/250,000 events\ntrainscope: exported 250,000/250,000 events\n");
  std::fclose(f);
}

TEST(Progress, ACountOfOneIsSingularAndNoCountSaysNothing) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  CountProgress one("x", "event", f);
  one.update(1, 1);
  one.finish();
  CountProgress none("y", "event", f);
  none.finish();
  EXPECT_EQ(written(f), "x 1/1 event\n");
  std::fclose(f);
}
