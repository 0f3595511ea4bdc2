// The persistent caches of the GPU step driver, resident on the device in
// the layouts the kernels read (gpu/prepare writes them, gpu/select and
// gpu/attention read them), plus the host tag mirrors (cache_tags.hpp).
// Entries never written are poisoned, so a read the tag checks missed shows
// up as NaN rather than as plausible numbers.
#pragma once

#include <cstdint>

#include "gpu/common/device_buffer.hpp"
#include "gpu/step/cache_tags.hpp"
#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

struct DeviceCaches {
  DeviceCaches(const QsaConfig& c, const CacheGeometry& g);

  // Initial state (a trace's snapshot): values already in the storage dtype.
  void write_kv(int64_t slot, int64_t position, const double* k, const double* v);  // [G, D] each
  void write_ring(int64_t slot, int64_t position, const int64_t rope3[3], const double* key);  // [d_I]
  void write_compressed(int64_t slot, int64_t block, const double* key);  // [d_I]

  // Stored value of compressed row `slot`, decoded ([d_I]).
  void read_compressed(int64_t slot, double* key) const;

  QsaConfig config;
  DeviceBuffer<uint8_t> k;           // [num_pages · P, G, D] bf16 bits or fp8 codes (kv_elem_bytes each)
  DeviceBuffer<uint8_t> v;           // same layout as k
  DeviceBuffer<float> ring_keys;     // [num_ring_blocks · C, d_I] raw keys (bf16 values)
  DeviceBuffer<int64_t> ring_rope;   // [num_ring_blocks · C, 3] (t, h, w) RoPE position of each member
  DeviceBuffer<uint8_t> compressed;  // [num_pages · P/r, d_I] indexer codes (indexer_elem_bytes each)
  CacheTags tags;

  int kv_elem_bytes() const { return config.kv_dtype == KvDtype::kFp8 ? 1 : 2; }
  int indexer_elem_bytes() const { return config.indexer_dtype == IndexerDtype::kFp8 ? 1 : 2; }
};

// Encodes `n` values of the indexer dtype into `dst` (bf16 bits or fp8
// codes, as the kernels store them) and back.
void encode_indexer(const QsaConfig& c, const double* x, int64_t n, uint8_t* dst);
double decode_indexer(const QsaConfig& c, const uint8_t* src, int64_t i);

}  // namespace qsa::gpu
