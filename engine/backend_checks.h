#pragma once
// The argument checks both backends make alike, written once (as rnn_schedule.h and ctc_plan.h
// are for their families): each backend checks its own device and layout, then calls these for
// the shapes and values, so an op fails the same way, with the same message, on either device.
// std::invalid_argument "<op>: ..." on bad arguments.
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace ts::engine::checks {

// --- layout family ---
// The shape of xs concatenated along `dim`, which is normalised (a negative dim counts from the
// end); xs must be non-empty and agree outside `dim`.
Shape concat_shape(const std::vector<Tensor>& xs, int64_t& dim);
// [start, start + length) along `dim` (normalised) must lie inside x.
void check_slice(const Shape& x, int64_t& dim, int64_t start, int64_t length);
// perm must be a permutation of x's dimensions.
void check_permutation(const Shape& x, const std::vector<int64_t>& perm);
// index_select_rows: x [N, ...], index [M]; index_add_rows: src [M, ...], index [M], rows >= 0.
void check_select_rows(const Tensor& x, const Tensor& index);
void check_add_rows(const Tensor& src, const Tensor& index, int64_t rows);
// Row indices stored as fp32 (`count` of them, on the host) must be integers in [0, rows).
void check_row_indices(const float* index, int64_t count, int64_t rows, const char* op);

// --- attention family ---
struct AttentionDims {
  int64_t b = 0, tq = 0, tk = 0, hd = 0;  // batch, query and key steps, heads x head width
};
// q [B, Tq, H d], k and v [B, Tk, H d] with H = heads dividing the width.
AttentionDims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads);
// key_lengths [B].
void check_key_lengths(const Tensor& key_lengths, int64_t b);

// --- roi family ---
// rois [R, 5]; then their batch indices (rois' values on the host) integers in [0, batch).
void check_rois_shape(const Tensor& rois, const char* op);
void check_roi_batches(const float* rois, int64_t count, int64_t batch, const char* op);
void check_pooled(int64_t pooled_h, int64_t pooled_w, float spatial_scale, const char* op);

}  // namespace ts::engine::checks
