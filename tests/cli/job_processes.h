#pragma once
// The processes of a job a test started (the launcher, mpirun, the ranks), found by the db their
// command lines name: to signal one rank, or to check that none is left.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace ts::testing {

// Starts shell command `cmd` in the background, its output into `log`; its exit status goes to
// `rc` once it ends. True when the shell took it.
inline bool start_job(const std::string& cmd, const std::filesystem::path& log, const std::filesystem::path& rc) {
  return std::system(("(" + cmd + " > " + log.string() + " 2>&1; echo $? > " + rc.string() + ") &").c_str()) == 0;
}

// The pid of the rank `rank` of the run writing `db` (its environment says which rank it is),
// or with rank -1 of the launcher that started the ranks.
inline int find_pid(const std::filesystem::path& db, int rank) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline"), env(e.path() / "environ");
    std::string c((std::istreambuf_iterator<char>(cmd)), {}), v((std::istreambuf_iterator<char>(env)), {});
    const std::string program = c.substr(0, c.find('\0'));  // not mpirun, nor the shell that started the job
    if (c.find(db.string()) == std::string::npos || !program.ends_with("trainscope")) continue;
    const bool is_rank = v.find("OMPI_COMM_WORLD_RANK=") != std::string::npos;
    if (rank < 0 ? !is_rank : v.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// Every process whose command line names `db` (mpirun, the launcher, the ranks), sent `signal`
// where it is not 0.
inline int processes_naming(const std::filesystem::path& db, int signal = 0) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline");
    const std::string c((std::istreambuf_iterator<char>(cmd)), {});
    if (c.find(db.string()) == std::string::npos) continue;
    ++n;
    if (signal != 0) ::kill(std::stoi(name), signal);
  }
  return n;
}

}  // namespace ts::testing
