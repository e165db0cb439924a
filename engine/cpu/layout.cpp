// The layout family on the CPU: concat and slice (oneDNN concat and sub-memory reorders, which
// keep a blocked layout when the cut falls on block boundaries), permute and the row
// gather/scatter (plain loops with OpenMP; index_add parallelises over columns, so no two threads
// add into one element). Results of permute and the row ops are plain.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/dnnl_primitives.h"

namespace ts::engine::cpu {

namespace {

// The layout a concat/slice along `dim` can keep: blocked layouts only when the channel
// boundaries fall on block boundaries.
bool layout_keeps(const Layout& l, int64_t dim, const std::vector<int64_t>& channel_counts) {
  if (l.kind != Layout::Kind::channel_blocked || dim != 1) return true;
  for (auto c : channel_counts) {
    if (c % l.block != 0) return false;
  }
  return true;
}

struct ConcatEntry {
  dnnl::concat::primitive_desc pd;
  dnnl::concat prim;
  std::vector<md> srcs;
};

struct SliceEntry {
  Reorder r;
};

}  // namespace

Tensor CpuBackend::concat(const std::vector<Tensor>& xs, int64_t dim) {
  for (const auto& t : xs) check_cpu(t, "concat");
  const Shape out = checks::concat_shape(xs, dim);
  std::vector<int64_t> sizes;
  bool same_layout = true;
  for (const auto& t : xs) {
    sizes.push_back(t.size(dim));
    same_layout = same_layout && t.layout() == xs[0].layout();
  }
  Layout l = xs[0].layout();
  if (!same_layout || !layout_keeps(l, dim, sizes)) l = Layout::plain();
  std::vector<Tensor> in;
  in.reserve(xs.size());
  for (const auto& t : xs) in.push_back(t.layout() == l ? t : to_layout(t, l));

  auto& im = *impl_;
  Key key("concat");
  key << dim << l;
  for (const auto& t : in) key << t.shape();
  auto e = im.get<ConcatEntry>(key, [&] {
    std::vector<md> srcs;
    for (const auto& t : in) srcs.push_back(md_for(t.shape(), l));
    const auto pd = dnnl_pd::concat(im.eng, md_for(out, l), static_cast<int>(dim), srcs);
    return std::make_shared<ConcatEntry>(ConcatEntry{pd, dnnl::concat(pd), srcs});
  });
  Tensor y = Tensor::empty(out, xs[0].device(), l);
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, memory(e->pd.dst_desc(), im.eng, y.data())},
                                       {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}};
  for (size_t k = 0; k < in.size(); ++k) {
    args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), memory(e->srcs[k], im.eng, in[k].data()));
  }
  im.run(e->prim, args);
  return y;
}

Tensor CpuBackend::slice(const Tensor& x_in, int64_t dim, int64_t start, int64_t length) {
  check_cpu(x_in, "slice");
  checks::check_slice(x_in.shape(), dim, start, length);
  const int64_t rank = x_in.dim();
  Layout l = x_in.layout();
  if (!layout_keeps(l, dim, {start, length})) l = Layout::plain();
  const Tensor x = x_in.layout() == l ? x_in : to_layout(x_in, l);
  Shape out = x.shape();
  out[static_cast<size_t>(dim)] = length;
  Tensor y = Tensor::empty(out, x.device(), l);
  if (length == 0) return y;
  auto& im = *impl_;
  auto e = im.get<SliceEntry>(Key("slice") << x.shape() << l << dim << start << length, [&] {
    memory::dims offsets(static_cast<size_t>(rank), 0);
    offsets[static_cast<size_t>(dim)] = start;
    const md sub = md_for(x.shape(), l).submemory_desc(to_dims(out), offsets);
    auto s = std::make_shared<SliceEntry>();
    s->r.from = sub;
    s->r.to = md_for(out, l);
    s->r.prim = dnnl::reorder(dnnl::reorder::primitive_desc(im.eng, sub, im.eng, s->r.to));
    return s;
  });
  im.reorder(e->r, x.data(), y.data());
  return y;
}

Tensor CpuBackend::index_select_rows(const Tensor& x_in, const Tensor& index_in) {
  const char* op = "index_select_rows";
  check_cpu(x_in, op, "input");
  check_cpu(index_in, op, "index");
  checks::check_select_rows(x_in, index_in);
  const Tensor x = plain(*this, x_in), index = plain(*this, index_in);
  const int64_t rows = x.size(0), m = index.size(0);
  checks::check_row_indices(index.data(), m, rows, op);
  const int64_t k = rows > 0 ? x.numel() / rows : 0;
  Shape out = x.shape();
  out[0] = m;
  Tensor y = Tensor::empty(out, x.device());
  const float* pi = index.data();
  const float* px = x.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const auto r = static_cast<int64_t>(pi[i]);
    std::copy(px + r * k, px + (r + 1) * k, py + i * k);
  }
  return y;
}

Tensor CpuBackend::index_add_rows(const Tensor& src_in, const Tensor& index_in, int64_t rows) {
  const char* op = "index_add_rows";
  check_cpu(src_in, op, "src");
  check_cpu(index_in, op, "index");
  checks::check_add_rows(src_in, index_in, rows);
  const Tensor src = plain(*this, src_in), index = plain(*this, index_in);
  const int64_t m = src.size(0);
  checks::check_row_indices(index.data(), m, rows, op);
  const int64_t k = m > 0 ? src.numel() / m : 1;
  Shape out = src.shape();
  out[0] = rows;
  Tensor y = Tensor::zeros(out, src.device());
  const float* pi = index.data();
  const float* ps = src.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const auto r = static_cast<int64_t>(pi[i]);
    for (int64_t j = 0; j < k; ++j) py[r * k + j] += ps[i * k + j];
  }
  return y;
}

Tensor CpuBackend::permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  const char* op = "permute";
  check_cpu(x_in, op, "input");
  checks::check_permutation(x_in.shape(), perm);
  const int64_t rank = x_in.dim();
  const Tensor x = plain(*this, x_in);
  Shape out(static_cast<size_t>(rank));
  std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    in_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(d + 1)] * x.size(d + 1);
  // Stride in x of each output dimension.
  std::vector<int64_t> src_strides(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    out[static_cast<size_t>(d)] = x.size(perm[static_cast<size_t>(d)]);
    src_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  }
  Tensor y = Tensor::empty(out, x.device());
  const int64_t n = y.numel();
  if (n == 0) return y;
  const float* px = x.data();
  float* py = y.data();
  const int64_t inner = rank > 0 ? out.back() : 1;
  const int64_t inner_stride = rank > 0 ? src_strides.back() : 1;
  const int64_t outer = n / inner;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t o = 0; o < outer; ++o) {
    // Decompose the outer index over the output dims but the last.
    int64_t rem = o, src = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      const int64_t sz = out[static_cast<size_t>(d)];
      src += (rem % sz) * src_strides[static_cast<size_t>(d)];
      rem /= sz;
    }
    float* dst = py + o * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = px[src + i * inner_stride];
  }
  return y;
}

}  // namespace ts::engine::cpu
