#pragma once
// Packed weights: whether layers keep their weights parameters in the layout their backend's
// kernels read and write (Backend::conv_weights_layout: oneDNN's OIhw16i16o on an AVX-512 CPU)
// instead of plain, so that no call reorders them. On by default; TS_PACKED_WEIGHTS=0 in the
// environment turns it off for the process, set_packed_weights for the layers built after it.
// The values are the same either way; only their order in memory differs, so ranks that
// exchange raw parameter storage must agree on it (distributed/data_parallel.cpp checks).
namespace ts::engine {

void set_packed_weights(bool on);
bool packed_weights();

}  // namespace ts::engine
