// The simulator instructions of a GEMM-family schedule (matmul, bmm, conv2d as an implicit GEMM,
// and attention's PSUM evictions): operand loads with K on partitions, TensorE matmuls with either
// operand stationary, PSUM evictions and output stores. A kernel's SimEmitter decides the order
// and the dependencies; these decide what each instruction is, so every GEMM lowers alike.
#ifndef TESSEL_KERNELS_LOWERING_GEMM_EMIT_H_
#define TESSEL_KERNELS_LOWERING_GEMM_EMIT_H_

#include <cstdint>
#include <string_view>

#include "sim/program.h"

namespace tessel::kernels {

// One matmul step of a GEMM schedule, as its generator hands it to the emitters: output tile
// rows [m0, m0 + m) and columns [n0, n0 + n) of batch `batch`, contraction [k0, k0 + k), into
// PSUM accumulation group `slot`, and the handles it depends on (-1: none).
struct GemmMatmul {
  int64_t batch = 0;
  int64_t m0 = 0, m = 0;
  int64_t n0 = 0, n = 0;
  int64_t k0 = 0, k = 0;
  int slot = 0;
  bool start = false;  // the group's first matmul: it overwrites the accumulator
  bool reload = true;  // the stationary operand must be loaded (not the previous matmul's)
  int32_t after_a = -1, after_b = -1, after_slot = -1;  // operands loaded; slot free
};

// One output tile leaving PSUM (eviction into a staging buffer) or SBUF (the store): rows
// [m0, m0 + m), columns [n0, n0 + n) of batch `batch`.
struct GemmOutputTile {
  int64_t batch = 0;
  int64_t m0 = 0, m = 0;
  int64_t n0 = 0, n = 0;
  int slot = 0;   // the PSUM accumulation group evicted
  int stage = 0;  // the staging buffer written (eviction) or read (store)
};

// How a schedule's GEMM maps onto TensorE. C = A x B with M x N output tiles: with A stationary,
// PSUM holds C tiles (M on partitions); with B stationary (`transposed`), it holds C^T tiles (N on
// partitions) and a transposing DMA stores them into row-major C.
struct GemmShape {
  sim::DType dtype = sim::DType::kBf16;
  int rows_per_partition = 1;  // contraction rows per partition (2: fp8 double-row)
  int in_bytes = 2, out_bytes = 2;
  bool transposed = false;
  int store_queue = 0;

  // Partitions and free size of an m x n output tile in PSUM and staging.
  int Partitions(int64_t m, int64_t n) const { return int(transposed ? n : m); }
  int64_t Free(int64_t m, int64_t n) const { return transposed ? m : n; }

  // A DMA of a k-row operand block (K on partitions, rows_per_partition rows each) of
  // `bytes_per_row` bytes per contraction row into SBUF, on `queue`.
  sim::Instruction Load(int64_t k, int64_t bytes_per_row, int queue) const;
  // The matmul of an m x n output tile over k contraction rows.
  sim::Instruction Matmul(int64_t k, int64_t m, int64_t n, bool reload) const;
  // The eviction of an m x n accumulator tile on `engine`: a copy into SBUF, or (add) an add of
  // the PSUM tile to an SBUF accumulator.
  sim::Instruction Evict(sim::EngineKind engine, int64_t m, int64_t n, bool add = false) const;
  // The store of an m x n output tile from its staging buffer (transposing when `transposed`).
  sim::Instruction Store(int64_t m, int64_t n) const;
};

// The fp32 copy of a [partitions, free] PSUM tile into SBUF on `engine`.
sim::Instruction PsumToSbuf(sim::EngineKind engine, int partitions, int free);

// The engine of the `index`-th eviction under an `evict` param: vector, scalar, or split
// (vector and scalar alternating, vector first).
sim::EngineKind EvictEngine(std::string_view evict, int64_t index);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_LOWERING_GEMM_EMIT_H_
