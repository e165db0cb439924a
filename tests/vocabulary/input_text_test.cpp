// The two guards on what users hand in (vocabulary/input_file.h, vocabulary/utf8.h): a named
// input is a regular file of bounded size, read without ever blocking; text stored as JSON is
// valid UTF-8.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "vocabulary/input_file.h"
#include "vocabulary/utf8.h"

namespace {

using ts::vocabulary::first_invalid_utf8;
using ts::vocabulary::read_input_file;
namespace fs = std::filesystem;

TEST(Utf8, ValidTextPassesAndTheFirstBadByteIsFound) {
  EXPECT_FALSE(first_invalid_utf8(""));
  EXPECT_FALSE(first_invalid_utf8("resnet50 caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_EQ(first_invalid_utf8("ab\xFF"), 2u);                 // never a UTF-8 byte
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);                  // a continuation first
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);               // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);           // overlong, three bytes
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1u);          // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);       // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xE2\x82"), 2u);             // cut short
  EXPECT_EQ(first_invalid_utf8("latin-1 caf\xE9 name"), 11u);  // a Latin-1 file name
}

class InputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ts_input_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(InputFile, ARegularFileIsReadWhole) {
  const fs::path f = dir_ / "hosts";
  std::ofstream(f) << "h1 slots=2\nh2\n";
  EXPECT_EQ(read_input_file(f, "hostfile", 1024), "h1 slots=2\nh2\n");
}

TEST_F(InputFile, AFifoIsRefusedAtOnceNotWaitedOn) {
  const fs::path f = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    read_input_file(f, "hostfile", 1024);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe), not a file"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(InputFile, DevicesDirectoriesOversizedAndMissingFilesAreRefused) {
  const auto refused = [](const fs::path& p, size_t max, const std::string& says) {
    try {
      read_input_file(p, "suite file", max);
      ADD_FAILURE() << p << " was read";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("suite file '" + p.string() + "'"), std::string::npos) << e.what();
    }
  };
  refused("/dev/zero", 1 << 20, "is a character device");  // would fill memory
  refused(dir_, 1 << 20, "is a directory");
  const fs::path big = dir_ / "big";
  std::ofstream(big) << std::string(2048, 'x');
  refused(big, 1024, "holds 2048 bytes, more than the 1024");
  refused(dir_ / "none", 1024, "cannot open");
}

}  // namespace
