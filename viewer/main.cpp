// trainscope-viewer [DB ...]: the Qt viewer over trainscope databases (docs/viewer.md).
#include <QApplication>
#include <QCommandLineParser>

#include "viewer/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("trainscope-viewer");
  QCommandLineParser parser;
  parser.setApplicationDescription("Browse trainscope runs: overview, ops and kernels, layers.");
  parser.addHelpOption();
  parser.addPositionalArgument("db", "trainscope databases to open (results/trainscope.db, ...)", "[DB...]");
  parser.process(app);
  ts::viewer::MainWindow window;
  window.show();
  for (const auto& db : parser.positionalArguments()) window.open_database(db);
  return QApplication::exec();
}
