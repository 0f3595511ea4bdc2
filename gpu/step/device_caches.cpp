#include "gpu/step/device_caches.hpp"

#include <cstring>
#include <vector>

#include "gpu/common/poison.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"

namespace qsa::gpu {

namespace {

size_t count(int64_t a, int64_t b, int64_t c = 1) { return static_cast<size_t>(a * b * c); }

void put_u16(uint8_t* dst, uint16_t bits) { std::memcpy(dst, &bits, sizeof bits); }

// Copies `bytes` host bytes to byte offset `offset` of a device buffer.
template <class T>
void upload_at(DeviceBuffer<T>& buf, size_t offset, const void* src, size_t bytes) {
  auto* base = reinterpret_cast<uint8_t*>(buf.get());
  QSA_GPU_CHECK(hipMemcpy(base + offset, src, bytes, hipMemcpyHostToDevice));
}

}  // namespace

void encode_indexer(const QsaConfig& c, const double* x, int64_t n, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    if (c.indexer_dtype == IndexerDtype::kFp8)
      dst[i] = fp8_encode(x[i], c.fp8_flavor);
    else
      put_u16(dst + 2 * i, bf16_bits(x[i]));
  }
}

double decode_indexer(const QsaConfig& c, const uint8_t* src, int64_t i) {
  if (c.indexer_dtype == IndexerDtype::kFp8) return fp8_decode(src[i], c.fp8_flavor);
  uint16_t bits = 0;
  std::memcpy(&bits, src + 2 * i, sizeof bits);
  return bf16_value(bits);
}

DeviceCaches::DeviceCaches(const QsaConfig& c, const CacheGeometry& g)
    : config(c),
      k(count(g.num_pages, c.page_size, int64_t{c.num_kv_heads} * c.head_dim) *
        static_cast<size_t>(c.kv_dtype == KvDtype::kFp8 ? 1 : 2)),
      v(k.size()),
      ring_keys(count(g.num_ring_blocks, c.ring_capacity(), c.indexer_head_dim)),
      ring_rope(count(g.num_ring_blocks, c.ring_capacity(), 3)),
      compressed(count(g.num_pages, c.compressed_rows_per_page(), c.indexer_head_dim) *
                 static_cast<size_t>(c.indexer_dtype == IndexerDtype::kFp8 ? 1 : 2)),
      tags(g, c.page_size, c.compress_ratio, c.ring_capacity()) {
  for (auto* b : {&k, &v, &compressed}) b->poison(kPoisonBf16Pair);
  ring_keys.poison(kPoisonFloat);
  ring_rope.poison(kPoisonId);
}

void DeviceCaches::write_kv(int64_t slot, int64_t position, const double* kx, const double* vx) {
  const int64_t n = int64_t{config.num_kv_heads} * config.head_dim;
  const auto e = static_cast<size_t>(kv_elem_bytes());
  std::vector<uint8_t> kb(static_cast<size_t>(n) * e), vb(kb.size());
  for (int64_t i = 0; i < n; ++i) {
    const auto j = static_cast<size_t>(i);
    if (config.kv_dtype == KvDtype::kFp8) {
      kb[j] = fp8_encode(kx[i] / config.k_scale, config.fp8_flavor);
      vb[j] = fp8_encode(vx[i] / config.v_scale, config.fp8_flavor);
    } else {
      put_u16(&kb[2 * j], bf16_bits(kx[i]));
      put_u16(&vb[2 * j], bf16_bits(vx[i]));
    }
  }
  upload_at(k, static_cast<size_t>(slot) * kb.size(), kb.data(), kb.size());
  upload_at(v, static_cast<size_t>(slot) * vb.size(), vb.data(), vb.size());
  tags.kv[static_cast<size_t>(slot)] = position;
}

void DeviceCaches::write_ring(int64_t slot, int64_t position, const int64_t rope3[3], const double* key) {
  const int d = config.indexer_head_dim;
  std::vector<float> f(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) f[static_cast<size_t>(i)] = static_cast<float>(key[i]);
  upload_at(ring_keys, static_cast<size_t>(slot) * f.size() * sizeof(float), f.data(), f.size() * sizeof(float));
  upload_at(ring_rope, static_cast<size_t>(slot) * 3 * sizeof(int64_t), rope3, 3 * sizeof(int64_t));
  tags.ring[static_cast<size_t>(slot)] = position;
}

void DeviceCaches::write_compressed(int64_t slot, int64_t block, const double* key) {
  const int d = config.indexer_head_dim;
  std::vector<uint8_t> codes(static_cast<size_t>(d * indexer_elem_bytes()));
  encode_indexer(config, key, d, codes.data());
  upload_at(compressed, static_cast<size_t>(slot) * codes.size(), codes.data(), codes.size());
  tags.compressed[static_cast<size_t>(slot)] = block;
}

void DeviceCaches::read_compressed(int64_t slot, double* key) const {
  const int d = config.indexer_head_dim;
  std::vector<uint8_t> codes(static_cast<size_t>(d * indexer_elem_bytes()));
  const auto* base = reinterpret_cast<const uint8_t*>(compressed.get());
  QSA_GPU_CHECK(hipMemcpy(codes.data(), base + static_cast<size_t>(slot) * codes.size(), codes.size(),
                          hipMemcpyDeviceToHost));
  for (int i = 0; i < d; ++i) key[i] = decode_indexer(config, codes.data(), i);
}

}  // namespace qsa::gpu
