#pragma once
// Runs the real trainscope binary and captures its exit code and output.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include <unistd.h>
#include <fstream>
#include <sstream>
#include <string>

namespace ts::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `command` through the shell, stdout and stderr together.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline CommandResult run_trainscope(const std::string& args) {
  return run_command(std::string(TRAINSCOPE_BIN) + " " + args);
}

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("trainscope_cli_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A command's stdout and stderr apart: what a pipe or a file gets from each.
struct SplitResult {
  int exit_code = -1;
  std::string out, err;
};

inline SplitResult run_trainscope_split(const std::string& args) {
  TempDir dir;
  const auto r = run_command("{ " + std::string(TRAINSCOPE_BIN) + " " + args + " >" + (dir / "out").string() + " 2>" +
                             (dir / "err").string() + "; }");
  return {r.exit_code, read_file(dir / "out"), read_file(dir / "err")};
}

// The suite into `db` (`rounds` times); TS_TEST_SLOW_OP plants a slowdown when `slow` is set.
inline void run_suite(const TempDir& dir, const std::filesystem::path& db, const std::string& suite_text,
                      const std::string& slow = "") {
  std::ofstream(dir / "s.toml") << suite_text;
  const auto r = run_command((slow.empty() ? std::string() : "TS_TEST_SLOW_OP='" + slow + "' ") + TRAINSCOPE_BIN +
                             " suite " + (dir / "s.toml").string() + " --db " + db.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace ts::testing
