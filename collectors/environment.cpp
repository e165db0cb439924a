#include "collectors/environment.h"

#include <dnnl.h>
#include <omp.h>
#include <sqlite3.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "ts_git_revision.h"

#ifdef TS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ts::collectors {

namespace {

constexpr const char* kUnknown = "unknown";

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// "key : value" lines of /proc/cpuinfo-like files, for one key, every occurrence.
std::vector<std::string> values_of(const std::string& text, std::string_view key, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(sep);
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) == key)
      out.push_back(trim(std::string_view(line).substr(colon + 1)));
  }
  return out;
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string cpu_isa(const std::string& flags_line) {
  std::set<std::string> flags;
  std::istringstream in(flags_line);
  for (std::string f; in >> f;) flags.insert(f);
  static constexpr const char* kInteresting[] = {"sse4_2",   "avx",      "avx2",        "fma",         "avx512f",
                                                 "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                                 "amx_tile", "amx_bf16", "amx_int8"};
  std::string out;
  for (const char* f : kInteresting) {
    if (flags.count(f) != 0) out += (out.empty() ? "" : " ") + std::string(f);
  }
  return out.empty() ? std::string("none") : out;
}

std::string compiler() {
#if defined(__clang__)
  return "Clang " __VERSION__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return kUnknown;
#endif
}

std::string openmp_version() {
#ifdef _OPENMP
  static constexpr std::pair<int, const char*> kSpecs[] = {{202111, "5.2"}, {202011, "5.1"}, {201811, "5.0"},
                                                           {201511, "4.5"}, {201307, "4.0"}, {201107, "3.1"}};
  for (const auto& [date, spec] : kSpecs) {
    if (_OPENMP >= date) return std::to_string(_OPENMP) + " (OpenMP " + spec + ")";
  }
  return std::to_string(_OPENMP);
#else
  return kUnknown;
#endif
}

}  // namespace

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  auto add = [&](const char* key, std::string value) {
    out.push_back({key, value.empty() ? std::string(kUnknown) : std::move(value)});
  };

  const std::string cpuinfo = read_file("/proc/cpuinfo");
  auto models = values_of(cpuinfo, "model name", ':');
  add("cpu.model", models.empty() ? "" : models.front());
  {
    // "AMD EPYC" names several generations: the vendor, family and model say which CPU kind a
    // figure was measured on (issue 43: results per CPU kind).
    const auto vendor = values_of(cpuinfo, "vendor_id", ':');
    const auto family = values_of(cpuinfo, "cpu family", ':');
    const auto model = values_of(cpuinfo, "model", ':');
    add("cpu.kind", vendor.empty() || family.empty() || model.empty()
                        ? ""
                        : vendor.front() + " family " + family.front() + " model " + model.front());
  }
  const unsigned logical = std::thread::hardware_concurrency();
  add("cpu.logical_cores", logical == 0 ? "" : std::to_string(logical));
  {
    // Distinct (physical id, core id) pairs; absent on some architectures.
    const auto packages = values_of(cpuinfo, "physical id", ':');
    const auto cores = values_of(cpuinfo, "core id", ':');
    std::set<std::pair<std::string, std::string>> distinct;
    if (packages.size() == cores.size()) {
      for (size_t i = 0; i < cores.size(); ++i) distinct.emplace(packages[i], cores[i]);
    }
    add("cpu.physical_cores", distinct.empty() ? "" : std::to_string(distinct.size()));
  }
  {
    const auto flags = values_of(cpuinfo, "flags", ':');
    add("cpu.isa", flags.empty() ? "" : cpu_isa(flags.front()));
  }
  {
    const auto total = values_of(read_file("/proc/meminfo"), "MemTotal", ':');
    std::string bytes;
    if (!total.empty()) {
      try {
        bytes = std::to_string(std::stoll(total.front()) * 1024);  // "16318860 kB"
      } catch (const std::exception&) {
      }
    }
    add("memory.total_bytes", bytes);
  }
  {
    auto pretty = values_of(read_file("/etc/os-release"), "PRETTY_NAME", '=');
    std::string name = pretty.empty() ? "" : pretty.front();
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    add("os.name", name);
  }
  {
    utsname u{};
    const bool ok = uname(&u) == 0;
    add("os.kernel", ok ? std::string(u.sysname) + " " + u.release + " " + u.machine : "");
    char host[256] = {};
    add("host.name", gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string());
  }
  add("compiler", compiler());
  add("build.type", TS_BUILD_TYPE);
  add("trainscope.version", TS_VERSION);
  add("git.revision", TS_GIT_REVISION);
  {
    const dnnl_version_t* v = dnnl_version();
    add("lib.onednn", v == nullptr ? ""
                                   : std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                         std::to_string(v->patch) + " (" + v->hash + ")");
  }
  add("lib.sqlite", sqlite3_libversion());
  add("lib.openmp", openmp_version());
  add("omp.max_threads", std::to_string(omp_get_max_threads()));
  // How OpenMP threads wait at barriers (cli/openmp_waiting.h): spinning costs dearly on a busy machine.
  for (const char* variable : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TS_OPENMP_WAITING"}) {
    const char* value = std::getenv(variable);
    add((std::string("env.") + variable).c_str(), value == nullptr ? "unset" : value);
  }
#ifdef TS_HAVE_CUDA
  // The toolkit compiled against (the header's version: no runtime call, no device needed).
  add("cuda.toolkit", std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10));
  // The driver and the GPUs, asked of the runtime; on a machine without a GPU this says why.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    add("cuda.driver", std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10));
  } else {
    add("cuda.driver", "none");
  }
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    add("cuda.devices", std::string("0 (") + cudaGetErrorString(rc) + ")");
  } else {
    add("cuda.devices", std::to_string(count));
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
      const std::string key = "cuda.device." + std::to_string(i);
      add((key + ".name").c_str(), p.name);
      add((key + ".memory_bytes").c_str(), std::to_string(p.totalGlobalMem));
      add((key + ".compute_capability").c_str(), std::to_string(p.major) + "." + std::to_string(p.minor));
    }
  }
#endif
  return out;
}

}  // namespace ts::collectors
