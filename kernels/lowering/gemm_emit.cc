#include "kernels/lowering/gemm_emit.h"

#include "kernels/schedule_util.h"

namespace tessel::kernels {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

sim::Instruction GemmShape::Load(int64_t k, int64_t bytes_per_row, int queue) const {
  const int rows = rows_per_partition;
  return sim::MakeDma(Op::kDmaLoad, int(CeilDiv(k, rows)), bytes_per_row * rows, queue);
}

sim::Instruction GemmShape::Matmul(int64_t k, int64_t m, int64_t n, bool reload) const {
  sim::Instruction mm = transposed ? sim::MakeMatmul(dtype, int(k), int(n), int(m), reload)
                                   : sim::MakeMatmul(dtype, int(k), int(m), int(n), reload);
  mm.partitions = int16_t(CeilDiv(k, rows_per_partition));
  return mm;
}

sim::Instruction GemmShape::Evict(EngineKind engine, int64_t m, int64_t n, bool add) const {
  sim::Instruction inst =
      sim::MakeEngineOp(add ? Op::kTensorTensor : Op::kTensorCopy, engine, int(Free(m, n)),
                        Partitions(m, n), Mem::kPsum, Mem::kSbuf);
  inst.dtype = DType::kFp32;
  if (add) inst.in1 = Mem::kSbuf;
  return inst;
}

sim::Instruction GemmShape::Store(int64_t m, int64_t n) const {
  sim::Instruction dma =
      sim::MakeDma(Op::kDmaStore, Partitions(m, n), Free(m, n) * out_bytes, store_queue);
  dma.transpose = transposed;  // C^T tiles need a transposing store into row-major C
  return dma;
}

sim::Instruction PsumToSbuf(EngineKind engine, int partitions, int free) {
  sim::Instruction inst =
      sim::MakeEngineOp(Op::kTensorCopy, engine, free, partitions, Mem::kPsum, Mem::kSbuf);
  inst.dtype = DType::kFp32;
  return inst;
}

EngineKind EvictEngine(std::string_view evict, int64_t index) {
  const bool scalar = evict == "scalar" || (evict == "split" && index % 2 == 1);
  return scalar ? EngineKind::kScalar : EngineKind::kVector;
}

}  // namespace tessel::kernels
