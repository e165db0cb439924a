// Issue 43: the GEMM shapes each workload runs, and how fast each path available here runs them.
// A plain program (not Google Benchmark):
//
//   gemm_shapes_bench [--workloads a,b] [--threads 2] [--preset small] [--rounds 5] [--json OUT]
//       runs one training iteration of each workload with the engine's shape recorder on
//       (engine/cpu/gemm.h), then times the shapes that carry the workload's GEMM FLOPs on every
//       path, in interleaved rounds, and prints a table per workload
//   gemm_shapes_bench --shapes IN.json [--rounds N] [--first-round R] --json OUT
//       times the shapes of an earlier OUT (bench/pytorch/gemm_shapes.py alternates this with its
//       PyTorch rounds); --rounds 0 with no --shapes: collect only
//
// Paths: oneDNN's sgemm (the engine's), oneDNN's matmul primitive (created once per shape, plain
// row-major operands), the same primitive with the weights operand B in the primitive's own
// layout (format_tag::any: a reorder of B on every call, since training changes B every step),
// and OpenBLAS's OpenMP build through dlopen (its column says "not installed" where
// /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 is absent; nothing links it).
// A round times every shape on every path, the paths' order reversed on odd rounds (A B C D,
// D C B A); a sample is the mean time per call over a batch of calls lasting about 10 ms.
// Shapes the engine runs on the calling thread (attention's heads, inside our own parallel loop)
// are timed on one thread and counted as threads-way parallel in the milliseconds per
// iteration. The operands are packed (leading dimension = width), alpha 1, beta 0.
#include <dlfcn.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/cpu/gemm.h"
#include "engine/peaks.h"
#include "workloads/workload.h"

namespace {

using namespace ts;
using engine::cpu::GemmShapeCount;
using engine::cpu::GemmThreads;
using nlohmann::json;

constexpr double kCoverage = 0.97;  // time the largest shapes until they hold this share of the FLOPs
constexpr size_t kMaxShapes = 24;   // ... or this many per workload
constexpr double kBatchSeconds = 0.01;

// --- collecting ---

class PlainPhases final : public workloads::Phases {
 public:
  void data(const std::function<void()>& f) override { f(); }
  void forward(const std::function<void()>& f) override { f(); }
  void backward(const std::function<void()>& f, int) override { f(); }
  void optimizer(const std::function<void()>& f) override { f(); }
};

json shape_json(const GemmShapeCount& s) {
  return {{"site", engine::cpu::gemm_site_name(s.site)},
          {"ta", std::string(1, s.ta)},
          {"tb", std::string(1, s.tb)},
          {"m", s.m},
          {"n", s.n},
          {"k", s.k},
          {"calling_thread", s.threads == GemmThreads::calling_thread},
          {"calls", s.calls}};
}

json collect(const std::string& name, const std::string& preset, int threads) {
  const workloads::WorkloadSpec* spec = workloads::find_workload(name);
  if (!spec) throw std::invalid_argument("no workload '" + name + "'");
  workloads::WorkloadConfig wc;
  wc.preset = preset;
  json w = {{"workload", name}, {"preset", preset}};
  try {
    engine::OpThreadsScope op_threads(threads);
    auto workload = spec->create(wc);
    PlainPhases phases;
    std::vector<GemmShapeCount> counts;
    {
      engine::cpu::GemmRecordingScope rec;
      workload->step(phases);
      counts = engine::cpu::gemm_shape_counts();
    }
    std::sort(counts.begin(), counts.end(), [](const GemmShapeCount& a, const GemmShapeCount& b) {
      return a.flops_per_call() * static_cast<double>(a.calls) > b.flops_per_call() * static_cast<double>(b.calls);
    });
    double total = 0;
    int64_t calls = 0;
    for (const auto& s : counts) {
      total += s.flops_per_call() * static_cast<double>(s.calls);
      calls += s.calls;
    }
    json shapes = json::array();
    double covered = 0;
    for (const auto& s : counts) {
      json j = shape_json(s);
      j["timed"] = covered < kCoverage * total && shapes.size() < kMaxShapes;
      if (j["timed"]) covered += s.flops_per_call() * static_cast<double>(s.calls);
      shapes.push_back(j);
    }
    w["gemm_flops_per_iteration"] = total;
    w["gemm_calls_per_iteration"] = calls;
    w["distinct_shapes"] = counts.size();
    w["timed_flops_share"] = total > 0 ? covered / total : 0.0;
    w["shapes"] = shapes;
  } catch (const std::exception& e) {
    w["error"] = e.what();
  }
  return w;
}

// --- the paths ---

struct Operands {
  int64_t m, n, k;
  char ta, tb;
  std::vector<float> a, b, c;
  int64_t lda() const { return ta == 'N' ? k : m; }
  int64_t ldb() const { return tb == 'N' ? n : k; }
};

class Path {
 public:
  virtual ~Path() = default;
  virtual std::string name() const = 0;
  virtual std::string unavailable() const { return ""; }  // why it cannot run here, if it cannot
  // Runs once (creating what the path caches for the shape); then `run` is what is timed.
  virtual void prepare(Operands& op) = 0;
  virtual void run(Operands& op) = 0;
};

class DnnlSgemm final : public Path {
 public:
  std::string name() const override { return "dnnl_sgemm"; }
  void prepare(Operands& op) override { run(op); }
  void run(Operands& op) override {
    if (dnnl_sgemm(op.ta, op.tb, op.m, op.n, op.k, 1.0f, op.a.data(), op.lda(), op.b.data(), op.ldb(), 0.0f,
                   op.c.data(), op.n) != dnnl_success) {
      throw std::runtime_error("dnnl_sgemm failed");
    }
  }
};

// oneDNN's matmul primitive, created once per shape (and thread count), B plain or in the
// primitive's preferred layout.
class DnnlMatmul final : public Path {
 public:
  explicit DnnlMatmul(bool any_weights) : any_(any_weights), eng_(dnnl::engine::kind::cpu, 0), stream_(eng_) {}
  std::string name() const override { return any_ ? "matmul_any_b" : "matmul"; }
  void prepare(Operands& op) override {
    using dims = dnnl::memory::dims;
    using md = dnnl::memory::desc;
    const auto f32 = dnnl::memory::data_type::f32;
    const std::string key = std::to_string(op.m) + "," + std::to_string(op.n) + "," + std::to_string(op.k) + op.ta +
                            op.tb + "," + std::to_string(omp_get_max_threads());
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      Entry e;
      e.a = md({op.m, op.k}, f32, op.ta == 'N' ? dims{op.k, 1} : dims{1, op.m});
      e.b = md({op.k, op.n}, f32, op.tb == 'N' ? dims{op.n, 1} : dims{1, op.k});
      const md c({op.m, op.n}, f32, dims{op.n, 1});
      const md b_req = any_ ? md({op.k, op.n}, f32, dnnl::memory::format_tag::any) : e.b;
#if DNNL_VERSION_MAJOR >= 3
      dnnl::matmul::primitive_desc pd(eng_, e.a, b_req, c);
#else
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.a, b_req, c), eng_);
#endif
      e.prim = dnnl::matmul(pd);
      e.b_prim = pd.weights_desc();
      e.c = c;
      if (e.b_prim != e.b) e.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, e.b, eng_, e.b_prim));
      it = cache_.emplace(key, std::move(e)).first;
    }
    cur_ = &it->second;
    mem_a_ = dnnl::memory(cur_->a, eng_, op.a.data());
    mem_b_ = dnnl::memory(cur_->b, eng_, op.b.data());
    mem_c_ = dnnl::memory(cur_->c, eng_, op.c.data());
    if (cur_->reorder) mem_b_prim_ = dnnl::memory(cur_->b_prim, eng_);
    run(op);
  }
  void run(Operands&) override {
    dnnl::memory* b = &mem_b_;
    if (cur_->reorder) {
      cur_->reorder.execute(stream_, mem_b_, mem_b_prim_);
      b = &mem_b_prim_;
    }
    cur_->prim.execute(stream_, {{DNNL_ARG_SRC, mem_a_}, {DNNL_ARG_WEIGHTS, *b}, {DNNL_ARG_DST, mem_c_}});
    stream_.wait();
  }
  // Whether the last prepared shape reorders B (the preferred layout differs from plain).
  bool reorders() const { return cur_ && static_cast<bool>(cur_->reorder); }

 private:
  struct Entry {
    dnnl::memory::desc a, b, b_prim, c;
    dnnl::matmul prim;
    dnnl::reorder reorder;
  };
  bool any_;
  dnnl::engine eng_;
  dnnl::stream stream_;
  std::map<std::string, Entry> cache_;
  Entry* cur_ = nullptr;
  dnnl::memory mem_a_, mem_b_, mem_c_, mem_b_prim_;
};

// OpenBLAS (OpenMP build) through dlopen: the project links nothing of it.
class OpenBlas final : public Path {
 public:
  static constexpr const char* kLibrary = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0";
  OpenBlas() {
    handle_ = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) return;
    sgemm_ = reinterpret_cast<SgemmFn>(dlsym(handle_, "cblas_sgemm"));
    set_threads_ = reinterpret_cast<SetThreadsFn>(dlsym(handle_, "openblas_set_num_threads"));
  }
  std::string name() const override { return "openblas"; }
  std::string unavailable() const override { return sgemm_ && set_threads_ ? "" : "not installed"; }
  void prepare(Operands& op) override { run(op); }
  void run(Operands& op) override {
    set_threads_(omp_get_max_threads());
    constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
    sgemm_(kRowMajor, op.ta == 'N' ? kNoTrans : kTrans, op.tb == 'N' ? kNoTrans : kTrans, static_cast<int>(op.m),
           static_cast<int>(op.n), static_cast<int>(op.k), 1.0f, op.a.data(), static_cast<int>(op.lda()), op.b.data(),
           static_cast<int>(op.ldb()), 0.0f, op.c.data(), static_cast<int>(op.n));
  }

 private:
  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                           int);
  using SetThreadsFn = void (*)(int);
  void* handle_ = nullptr;
  SgemmFn sgemm_ = nullptr;
  SetThreadsFn set_threads_ = nullptr;
};

// --- timing ---

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct ShapeRun {
  json* shape;
  Operands op;
  int reps = 1;
};

Operands operands_for(const json& s, uint64_t seed) {
  Operands op{s["m"], s["n"], s["k"], s["ta"].get<std::string>()[0], s["tb"].get<std::string>()[0], {}, {}, {}};
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  op.a.resize(static_cast<size_t>(op.m * op.k));
  op.b.resize(static_cast<size_t>(op.k * op.n));
  op.c.assign(static_cast<size_t>(op.m * op.n), 0.0f);
  for (auto& v : op.a) v = u(rng);
  for (auto& v : op.b) v = u(rng);
  return op;
}

// Times every timed shape of `w` on every available path for `rounds` rounds, appending each
// round's seconds per call to shape["samples"][path].
void time_workload(json& w, std::vector<std::unique_ptr<Path>>& paths, int threads, int rounds, int first_round) {
  if (!w.contains("shapes")) return;
  for (json& s : w["shapes"]) {
    if (!s["timed"].get<bool>()) continue;
    const int t = s["calling_thread"].get<bool>() ? 1 : threads;
    omp_set_num_threads(t);
    Operands op = operands_for(s, 1);
    // Warm up every path (primitive creation, first-touch), and size the batch from the engine's path.
    for (auto& p : paths) {
      if (p->unavailable().empty()) p->prepare(op);
    }
    if (auto* mm = dynamic_cast<DnnlMatmul*>(paths[2].get())) s["any_b_reorders"] = mm->reorders();
    const double t0 = now_s();
    paths[0]->run(op);
    paths[0]->run(op);
    const double one = (now_s() - t0) / 2;
    const int reps = static_cast<int>(std::clamp(kBatchSeconds / std::max(one, 1e-7), 3.0, 20000.0));
    s["reps"] = reps;
    s["threads"] = t;
    for (int r = first_round; r < first_round + rounds; ++r) {
      std::vector<size_t> order(paths.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = r % 2 == 0 ? i : order.size() - 1 - i;
      for (const size_t i : order) {
        Path& p = *paths[i];
        if (!p.unavailable().empty()) continue;
        p.prepare(op);
        const double start = now_s();
        for (int k = 0; k < reps; ++k) p.run(op);
        s["samples"][p.name()].push_back((now_s() - start) / reps);
      }
    }
  }
}

// --- the table ---

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void print_tables(const json& doc, const std::vector<std::unique_ptr<Path>>& paths) {
  const double peak = doc["sgemm_peak_gflops"];
  const int threads = doc["threads"];
  for (const json& w : doc["workloads"]) {
    std::cout << "\n### " << w["workload"].get<std::string>() << " (" << w["preset"].get<std::string>() << ")\n";
    if (w.contains("error")) {
      std::cout << "not collected: " << w["error"].get<std::string>() << "\n";
      continue;
    }
    std::cout << w["distinct_shapes"] << " distinct shapes, " << w["gemm_calls_per_iteration"] << " calls and "
              << fixed(w["gemm_flops_per_iteration"].get<double>() * 1e-9, 2)
              << " GFLOP per iteration; the timed rows hold " << fixed(100 * w["timed_flops_share"].get<double>(), 1)
              << "% of them\n\n";
    std::cout << "| shape (ta tb m n k) | site | calls/iter |";
    for (const auto& p : paths) std::cout << " " << p->name() << " ms/iter |";
    std::cout << " best | best / dnnl_sgemm | dnnl_sgemm GFLOP/s (% peak) | spread |\n|---|---|---|";
    for (size_t i = 0; i < paths.size(); ++i) std::cout << "---|";
    std::cout << "---|---|---|---|\n";
    std::map<std::string, double> totals;
    for (const json& s : w["shapes"]) {
      if (!s["timed"].get<bool>() || !s.contains("samples")) continue;
      const double calls = s["calls"].get<double>();
      const bool own_thread = s["calling_thread"].get<bool>();
      const double per_iter = calls / (own_thread ? threads : 1);
      std::cout << "| " << s["ta"].get<std::string>() << s["tb"].get<std::string>() << " " << s["m"] << "x" << s["n"]
                << "x" << s["k"] << (own_thread ? " (1 thread)" : "") << " | " << s["site"].get<std::string>() << " | "
                << s["calls"] << " |";
      std::string best;
      double best_ms = 0, base_ms = 0, spread = 0;
      for (const auto& p : paths) {
        if (!p->unavailable().empty() || !s["samples"].contains(p->name())) {
          std::cout << " " << (p->unavailable().empty() ? "-" : p->unavailable()) << " |";
          continue;
        }
        const auto v = s["samples"][p->name()].get<std::vector<double>>();
        const double med = median(v);
        const double ms = med * per_iter * 1e3;
        totals[p->name()] += ms;
        if (p->name() == "dnnl_sgemm") {
          base_ms = ms;
          spread = med > 0 ? (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / med : 0;
        }
        if (best.empty() || ms < best_ms) {
          best = p->name();
          best_ms = ms;
        }
        std::cout << " " << fixed(ms, 3) << " |";
      }
      const double gflops = base_ms > 0 ? s["m"].get<double>() * s["n"].get<double>() * s["k"].get<double>() * 2 *
                                              per_iter / (base_ms * 1e-3) * 1e-9
                                        : 0;
      std::cout << " " << best << " | " << fixed(base_ms > 0 ? best_ms / base_ms : 0, 2) << " | " << fixed(gflops, 1)
                << " (" << fixed(100 * gflops / peak, 0) << "%) | " << fixed(100 * spread, 0) << "% |\n";
    }
    std::cout << "| **timed rows** | | |";
    for (const auto& p : paths) {
      std::cout << " " << (totals.count(p->name()) ? fixed(totals[p->name()], 2) : "-") << " |";
    }
    std::cout << " | | | |\n";
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names = workloads::workload_names();
  int threads = 2, rounds = 5, first_round = 0;
  std::string preset = "small", shapes_in, json_out;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--workloads") {
        names = split(value());
      } else if (arg == "--threads") {
        threads = std::stoi(value());
      } else if (arg == "--rounds") {
        rounds = std::stoi(value());
      } else if (arg == "--first-round") {
        first_round = std::stoi(value());
      } else if (arg == "--preset") {
        preset = value();
      } else if (arg == "--shapes") {
        shapes_in = value();
      } else if (arg == "--json") {
        json_out = value();
      } else {
        std::cerr << "usage: gemm_shapes_bench [--workloads a,b] [--threads N] [--preset P] [--rounds N]\n"
                     "                         [--shapes IN.json] [--first-round R] [--json OUT.json]\n";
        return arg == "--help" ? 0 : 2;
      }
    }
    if (threads < 1 || rounds < 0) throw std::invalid_argument("--threads must be >= 1 and --rounds >= 0");

    json doc;
    if (!shapes_in.empty()) {
      std::ifstream in(shapes_in);
      if (!in) throw std::runtime_error("cannot read " + shapes_in);
      doc = json::parse(in);
      threads = doc["threads"];
      if (rounds > 0) {  // measured again beside this round's timings; the driver keeps the best
        doc["sgemm_peak_gflops"] = engine::measure_peaks(engine::Device::cpu(), threads).sgemm_gflops;
      }
    } else {
      doc = {{"threads", threads}, {"preset", preset}, {"workloads", json::array()}};
      for (const auto& name : names) {
        std::cerr << "collecting " << name << "...\n";
        doc["workloads"].push_back(collect(name, preset, threads));
      }
      const engine::MachinePeaks peaks = engine::measure_peaks(engine::Device::cpu(), threads);
      doc["sgemm_peak_gflops"] = peaks.sgemm_gflops;
      doc["sgemm_peak_size"] = peaks.sgemm_size;
    }
    doc["rounds"] = first_round + rounds;

    std::vector<std::unique_ptr<Path>> paths;
    paths.push_back(std::make_unique<DnnlSgemm>());
    paths.push_back(std::make_unique<DnnlMatmul>(false));
    paths.push_back(std::make_unique<DnnlMatmul>(true));
    paths.push_back(std::make_unique<OpenBlas>());
    doc["openblas"] = paths[3]->unavailable().empty() ? OpenBlas::kLibrary : "not installed";
    if (rounds > 0) {
      for (json& w : doc["workloads"]) {
        std::cerr << "timing " << w["workload"].get<std::string>() << "...\n";
        time_workload(w, paths, threads, rounds, first_round);
      }
      omp_set_num_threads(threads);
      print_tables(doc, paths);
    }
    if (!json_out.empty()) {
      std::ofstream out(json_out);
      out << doc.dump(1) << "\n";
      if (!out) throw std::runtime_error("cannot write " + json_out);
    }
  } catch (const std::exception& e) {
    std::cerr << "gemm_shapes_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
