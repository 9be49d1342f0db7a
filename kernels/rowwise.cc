#include "kernels/rowwise.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "kernels/schedule_util.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::kernels::rowwise {
namespace {

using sim::EngineKind;
using sim::Mem;
using sim::Op;

constexpr int32_t kHbmRegionBase = 1 << 28;  // keeps output regions apart from buffer ids

// Ops whose scalar operands are per-row (one value per row slot of a partition).
bool PerRow(const Step& s) {
  switch (s.kind) {
    case Kind::kBnStats:
    case Kind::kBnAggr:
      return true;
    case Kind::kActivation:
    case Kind::kTensorScalar:
      return s.scalar0.buf >= 0 || s.scalar1.buf >= 0;
    default:
      return false;
  }
}

float Apply(Fn fn, float a, float b) {
  switch (fn) {
    case Fn::kAdd:
      return a + b;
    case Fn::kSub:
      return a - b;
    case Fn::kMul:
      return a * b;
    case Fn::kMax:
      return std::max(a, b);
    case Fn::kPow:
      return std::pow(a, b);
    default:
      return a;
  }
}

// The engine instruction of each Kind, in Kind's order (the DMA kinds have their own).
constexpr Op kEngineOps[] = {
    Op::kDmaLoad,      Op::kDmaLoad,      Op::kDmaStore,   Op::kTensorReduce, Op::kActivation,
    Op::kTensorScalar, Op::kTensorTensor, Op::kReciprocal, Op::kBnStats,      Op::kBnAggr};
static_assert(std::size(kEngineOps) == size_t(Kind::kBnAggr) + 1);

}  // namespace

void SimSink::BeginCore(int core, std::vector<sim::Allocation> allocations) {
  program_->cores.resize(core + 1);
  core_ = &program_->cores[core];
  core_->allocations = std::move(allocations);
  bufs_.clear();
}

void SimSink::operator()(const Step& s) {
  deps_.clear();
  auto read = [&](int32_t buf) {
    if (buf < 0) return;
    auto it = bufs_.find(buf);
    if (it != bufs_.end() && it->second.writer >= 0) deps_.push_back(it->second.writer);
  };
  read(s.src.buf);
  read(s.src1.buf);
  read(s.scalar0.buf);
  read(s.scalar1.buf);
  const bool is_store = s.kind == Kind::kStore;
  if (s.from_output) read(kHbmRegionBase + s.hbm_region);
  const int32_t written =
      is_store ? (s.hbm_region >= 0 ? kHbmRegionBase + s.hbm_region : -1) : s.dst.buf;
  const int32_t accum = s.accum.buf != written ? s.accum.buf : -1;  // a second written buffer
  for (int32_t buf : {written, accum}) {
    if (buf < 0) continue;
    BufState& w = bufs_[buf];
    if (w.writer >= 0) deps_.push_back(w.writer);
    deps_.insert(deps_.end(), w.readers.begin(), w.readers.end());
  }

  const int partitions = int(CeilDiv(s.rows, g_));
  int32_t last = -1;
  switch (s.kind) {
    case Kind::kLoad:
    case Kind::kStore: {
      const int bytes = sim::DTypeBytes(is_store ? s.out_dtype : s.in_dtype);
      sim::Instruction dma = sim::MakeDma(is_store ? Op::kDmaStore : Op::kDmaLoad, partitions,
                                          int64_t(g_) * s.width * bytes, s.queue);
      dma.chunk_bytes = s.chunk_bytes;
      last = core_->Add(dma, deps_);
      break;
    }
    case Kind::kLoadVector: {
      sim::Instruction dma =
          sim::MakeDma(Op::kDmaLoad, s.partitions, s.width * sim::DTypeBytes(s.in_dtype), s.queue);
      last = core_->Add(dma, deps_);
      break;
    }
    default: {
      const Op op = kEngineOps[size_t(s.kind)];
      const bool per_row = PerRow(s) && g_ > 1;
      int64_t free = s.kind == Kind::kBnAggr ? s.width * kBnStatsWidth : s.width;
      if (!per_row && s.kind != Kind::kBnStats && s.kind != Kind::kBnAggr) free *= g_;
      const int count = per_row ? g_ : 1;
      const size_t first_dep_size = deps_.size();
      for (int i = 0; i < count; ++i) {
        sim::Instruction inst = sim::MakeEngineOp(op, s.engine, int(free), partitions);
        inst.dtype = s.in_dtype;
        inst.out_dtype = s.out_dtype;
        inst.add_op = s.kind == Kind::kReduce;
        last = core_->Add(inst, std::span<const int32_t>(deps_.data(), first_dep_size));
      }
      break;
    }
  }

  // Readers of the buffers this step read; the written buffer's new writer.
  auto reader = [&](int32_t buf) {
    if (buf >= 0 && buf != written) bufs_[buf].readers.push_back(last);
  };
  reader(s.src.buf);
  reader(s.src1.buf);
  reader(s.scalar0.buf);
  reader(s.scalar1.buf);
  if (s.from_output) reader(kHbmRegionBase + s.hbm_region);
  for (int32_t buf : {written, accum}) {
    if (buf < 0) continue;
    BufState& w = bufs_[buf];
    w.writer = last;
    w.readers.clear();
  }
}

float& CpuSink::At(int32_t buf, int64_t row, int64_t col) {
  std::vector<std::vector<float>>& b = bufs_[buf];
  if (int64_t(b.size()) <= row) b.resize(row + 1);
  std::vector<float>& r = b[row];
  if (int64_t(r.size()) <= col) r.resize(col + 1, std::numeric_limits<float>::quiet_NaN());
  return r[col];
}

float CpuSink::Scalar(const Ref& ref, float imm, int64_t row) {
  return ref.buf >= 0 ? At(ref.buf, row, ref.col) : imm;
}

void CpuSink::operator()(const Step& s) {
  auto out = [&](float v) { return RoundToDType(v, s.out_dtype); };
  switch (s.kind) {
    case Kind::kLoad: {
      const std::vector<float>& from = s.from_output ? *y_ : x_;
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t j = 0; j < s.width; ++j) {
          At(s.dst.buf, r, s.dst.col + j) = from[(s.row0 + r) * cols_ + s.col0 + j];
        }
      }
      return;
    }
    case Kind::kLoadVector:
      for (int64_t j = 0; j < s.width; ++j) {
        At(s.dst.buf, 0, s.dst.col + j) = vectors_[s.vector_id][s.col0 + j];
      }
      return;
    case Kind::kStore:
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t j = 0; j < s.width; ++j) {
          (*y_)[(s.row0 + r) * cols_ + s.col0 + j] = out(At(s.src.buf, r, s.src.col + j));
        }
      }
      return;
    default:
      break;
  }
  for (int64_t r = 0; r < s.rows; ++r) {
    switch (s.kind) {
      case Kind::kReduce: {
        float acc = At(s.src.buf, r, s.src.col);
        for (int64_t j = 1; j < s.width; ++j)
          acc = Apply(s.fn, acc, At(s.src.buf, r, s.src.col + j));
        At(s.dst.buf, r, s.dst.col) = out(acc);
        break;
      }
      case Kind::kActivation: {
        const float scale = Scalar(s.scalar0, s.imm0, r);
        const float bias = Scalar(s.scalar1, s.imm1, r);
        float sum = 0;
        for (int64_t j = 0; j < s.width; ++j) {
          const float v = At(s.src.buf, r, s.src.col + j) * scale + bias;
          float f = v;
          if (s.fn == Fn::kExp) f = std::exp(v);
          if (s.fn == Fn::kSquare) f = v * v;
          At(s.dst.buf, r, s.dst.col + j) = out(f);
          sum += At(s.dst.buf, r, s.dst.col + j);
        }
        if (s.accum.buf >= 0) At(s.accum.buf, r, s.accum.col) = sum;
        break;
      }
      case Kind::kTensorScalar: {
        const float a = Scalar(s.scalar0, s.imm0, r);
        const float b = Scalar(s.scalar1, s.imm1, r);
        for (int64_t j = 0; j < s.width; ++j) {
          float v = Apply(s.fn, At(s.src.buf, r, s.src.col + j), a);
          if (s.fn1 != Fn::kNone) v = Apply(s.fn1, v, b);
          At(s.dst.buf, r, s.dst.col + j) = out(v);
        }
        break;
      }
      case Kind::kTensorTensor:
        for (int64_t j = 0; j < s.width; ++j) {
          const float b = At(s.src1.buf, s.src1_vector ? 0 : r, s.src1.col + j);
          At(s.dst.buf, r, s.dst.col + j) = out(Apply(s.fn, At(s.src.buf, r, s.src.col + j), b));
        }
        break;
      case Kind::kReciprocal:
        for (int64_t j = 0; j < s.width; ++j) {
          At(s.dst.buf, r, s.dst.col + j) = out(1.0f / At(s.src.buf, r, s.src.col + j));
        }
        break;
      case Kind::kBnStats: {
        float mean = 0;
        for (int64_t j = 0; j < s.width; ++j) mean += At(s.src.buf, r, s.src.col + j);
        mean /= float(s.width);
        float m2 = 0;
        for (int64_t j = 0; j < s.width; ++j) {
          const float d = At(s.src.buf, r, s.src.col + j) - mean;
          m2 += d * d;
        }
        At(s.dst.buf, r, s.dst.col) = float(s.width);
        At(s.dst.buf, r, s.dst.col + 1) = mean;
        At(s.dst.buf, r, s.dst.col + 2) = m2;
        break;
      }
      case Kind::kBnAggr: {
        float n = 0, mean = 0, m2 = 0;
        for (int64_t i = 0; i < s.width; ++i) {
          const int64_t c = s.src.col + i * kBnStatsWidth;
          const float nb = At(s.src.buf, r, c), mb = At(s.src.buf, r, c + 1),
                      m2b = At(s.src.buf, r, c + 2);
          const float total = n + nb;
          const float delta = mb - mean;
          mean += delta * nb / total;
          m2 += m2b + delta * delta * n * nb / total;
          n = total;
        }
        At(s.dst.buf, r, s.dst.col) = out(mean);
        At(s.dst.buf, r, s.dst.col + 1) = out(m2 / n);
        break;
      }
      default:
        break;
    }
  }
}

RowTile::RowTile(const RowTiling& tiling, int core, int64_t t, int64_t* stream)
    : tiling_(tiling),
      core_(core),
      t_(t),
      row0_(t * tiling.rows_per_tile),
      rows_(std::min(tiling.rows_per_tile, tiling.rows - row0_)),
      stat_base_(int32_t((t % kStatSlots) * kStatsPerSlot)),
      stream_(stream) {}

int64_t RowTile::Width(int64_t j) const {
  return std::min(tiling_.chunk, tiling_.cols - j * tiling_.chunk);
}

Ref RowTile::Data(int64_t j) {
  if (!tiling_.resident) return Streamed();
  return Ref{int32_t(kDataBase + (t_ % tiling_.bufs) * tiling_.chunks + j), 0};
}

Ref RowTile::Streamed() { return Ref{int32_t(kDataBase + ((*stream_)++ % tiling_.bufs)), 0}; }

Step RowTile::Dma(Kind kind, Ref buf, int64_t j) const {
  Step s =
      Compute(kind, EngineKind::kDma, Fn::kNone, {}, {}, Width(j), tiling_.dtype, tiling_.dtype);
  (kind == Kind::kLoad ? s.dst : s.src) = buf;
  s.col0 = j * tiling_.chunk;
  s.queue = kind == Kind::kLoad ? kQueueLoad : kQueueStore;
  // Rows are contiguous in HBM only when a chunk holds the whole row.
  s.chunk_bytes = tiling_.chunks > 1 ? int32_t(s.width * tiling_.in_bytes) : 0;
  return s;
}

Step RowTile::Compute(Kind kind, EngineKind engine, Fn fn, Ref src, Ref dst, int64_t width,
                      sim::DType in, sim::DType out) const {
  Step s;
  s.kind = kind;
  s.engine = engine;
  s.core = core_;
  s.row0 = row0_;
  s.rows = rows_;
  s.width = width;
  s.dst = dst;
  s.src = src;
  s.fn = fn;
  s.in_dtype = in;
  s.out_dtype = out;
  return s;
}

const std::vector<std::string> kTileRows = {"32", "64", "128"};
const std::vector<std::string> kRowsPerPartition = {"1", "2", "4", "8"};
const std::vector<std::string> kChunks = {"128",  "256",  "512",  "1024",
                                          "2048", "4096", "8192", "16384"};

absl::Status ParseRowTiling(const Problem& problem, const Config& config, RowTiling& tiling) {
  TESSEL_ASSIGN_OR_RETURN(tiling.dtype, sim::ParseDType(problem.dtype));
  tiling.in_bytes = sim::DTypeBytes(tiling.dtype);
  tiling.rows = *problem.dims.Get("rows");
  tiling.cols = *problem.dims.Get("cols");
  std::string tile_rows, g, chunk, resident;
  TESSEL_RETURN_IF_ERROR(ChoiceParams(config, {{"tile_rows", kTileRows, &tile_rows},
                                               {"rows_per_partition", kRowsPerPartition, &g},
                                               {"chunk", kChunks, &chunk},
                                               {"resident", {"0", "1"}, &resident}}));
  int64_t bufs = 0, shards = 0;
  TESSEL_RETURN_IF_ERROR(IntParams(config, {{"bufs", &bufs}, {"shards", &shards}}));
  tiling.tile_rows = std::stoll(tile_rows);
  tiling.g = std::stoll(g);
  tiling.chunk = std::stoll(chunk);
  tiling.resident = resident == "1";
  tiling.bufs = int(bufs);
  tiling.shards = int(shards);
  DeriveTiling(tiling);
  return absl::OkStatus();
}

RowTiling PlainTiling(const Problem& problem) {
  RowTiling t;
  t.rows = problem.dims.Get("rows").value_or(1);
  t.cols = problem.dims.Get("cols").value_or(1);
  while (t.tile_rows > 32 && t.tile_rows / 2 >= t.rows) t.tile_rows /= 2;
  while (t.chunk > 128 && t.chunk / 2 >= t.cols) t.chunk /= 2;
  t.resident = t.chunk >= t.cols;
  t.bufs = t.resident && CeilDiv(t.rows, t.tile_rows) < 2 ? 1 : 2;
  DeriveTiling(t);
  return t;
}

void DeriveTiling(RowTiling& t) {
  t.rows_per_tile = t.tile_rows * t.g;
  t.tiles = CeilDiv(t.rows, t.rows_per_tile);
  t.chunks = CeilDiv(t.cols, t.chunk);
}

absl::Status CheckRowTiling(const RowTiling& p, const sim::Target& target, bool strict) {
  if (p.tile_rows > target.sbuf_partitions) {
    return absl::InvalidArgumentError(
        StrCat("tile_rows=", p.tile_rows, " exceeds the ", target.sbuf_partitions, " partitions"));
  }
  if (target.max_free_sbuf > 0 && p.g * p.chunk > target.max_free_sbuf) {
    return absl::InvalidArgumentError(StrCat("rows_per_partition=", p.g, " x chunk=", p.chunk,
                                             " elements exceed the per-instruction free size cap ",
                                             target.max_free_sbuf));
  }
  if (strict) {
    if (p.tile_rows > 32 && p.tile_rows / 2 >= p.rows) {
      return absl::InvalidArgumentError(StrCat("tile_rows=", p.tile_rows,
                                               " is redundant: ", p.tile_rows / 2,
                                               " partitions already cover all ", p.rows, " rows"));
    }
    if (p.g > 1 && p.rows_per_tile / 2 >= p.rows) {
      return absl::InvalidArgumentError(
          StrCat("rows_per_partition=", p.g, " is redundant: ", p.rows_per_tile / 2,
                 " rows per tile already cover ", "all ", p.rows, " rows"));
    }
    if (p.chunk > 128 && p.chunk / 2 >= p.cols) {
      return absl::InvalidArgumentError(StrCat("chunk=", p.chunk, " is redundant: ", p.chunk / 2,
                                               " already covers all ", p.cols, " columns"));
    }
    if (p.shards > p.tiles) {
      return absl::InvalidArgumentError(
          StrCat("shards=", p.shards, " exceeds the ", p.tiles, " row tiles"));
    }
    const int64_t tiles_per_core = CeilDiv(p.tiles, p.shards);
    const int64_t rotating = p.resident ? tiles_per_core : tiles_per_core * p.chunks;
    if (p.bufs > 1 && p.bufs > rotating) {
      return absl::InvalidArgumentError(StrCat("bufs=", p.bufs, " is redundant: only ", rotating,
                                               p.resident ? " row tiles" : " chunks",
                                               " rotate per core"));
    }
  }
  if (p.chunks == 1 && !p.resident) {
    return absl::InvalidArgumentError(StrCat("resident=0 needs more than one chunk: chunk=",
                                             p.chunk, " already holds all ", p.cols, " columns"));
  }
  if (p.shards > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds the ",
                                             target.cores_per_chip, " cores per chip of ",
                                             target.name));
  }
  return absl::OkStatus();
}

}  // namespace tessel::kernels::rowwise
