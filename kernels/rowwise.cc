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

RowLowering g_lowering = RowLowering::kCompact;

void SetRowLoweringForTesting(RowLowering lowering) { g_lowering = lowering; }

SimSink::SimSink(const sim::Target& target, int rows_per_partition, sim::Program* program)
    : target_(target), g_(rows_per_partition), program_(program) {}

SimSink::~SimSink() = default;

void SimSink::BeginCore(int core, std::vector<sim::Allocation> allocations) {
  core_ = &program_->Core(size_t(core));
  core_->allocations = std::move(allocations);
  const bool compact = g_lowering == RowLowering::kCompact;
  writer_.Begin(core_, compact);
  core_->instructions.reserve(compact ? 1024 : 4096);
  core_->deps.reserve(compact ? 2048 : 8192);
  for (int32_t id : used_) {
    BufState& b = bufs_[size_t(id)];
    b.writer = -1;
    b.readers.clear();  // keeps its capacity
    b.constant = b.listed = false;
  }
  used_.clear();
  open_.clear();
  outputs_.Clear();
  read_back_ = false;
}

bool SimSink::CopyCore(int) {
  if (g_lowering != RowLowering::kCompact) return false;
  program_->RepeatPrevious();
  return true;
}

SimSink::BufState& SimSink::At(int32_t buf) {
  if (size_t(buf) >= bufs_.size()) bufs_.resize(size_t(buf) + 1);
  BufState& b = bufs_[size_t(buf)];
  if (!b.listed) {
    b.listed = true;
    used_.insert(std::lower_bound(used_.begin(), used_.end(), buf), buf);
  }
  return b;
}

void SimSink::operator()(const Step& s) {
  deps_.clear();
  auto read = [&](int32_t buf) {
    if (buf < 0 || size_t(buf) >= bufs_.size()) return;
    if (const int64_t w = bufs_[size_t(buf)].writer; w >= 0) deps_.push_back(w);
  };
  read(s.src.buf);
  read(s.src1.buf);
  read(s.scalar0.buf);
  read(s.scalar1.buf);
  const bool is_store = s.kind == Kind::kStore;
  int64_t region_writer = -1;
  if (s.from_output) {  // Y written by an earlier pass's store, read back in the same order
    region_writer = outputs_.Pop();
    deps_.push_back(region_writer);
  }
  const int32_t written = is_store ? -1 : s.dst.buf;
  const int32_t accum = s.accum.buf != written ? s.accum.buf : -1;  // a second written buffer
  // A store writes its region of Y: after the from_output load that read it, if one did.
  size_t open = open_.size();  // the open region the store closes, if any
  if (is_store && s.hbm_region >= 0) {
    open = size_t(std::find_if(open_.begin(), open_.end(),
                               [&](const OpenRegion& r) { return r.region == s.hbm_region; }) -
                  open_.begin());
    if (open < open_.size()) {
      deps_.push_back(open_[open].writer);
      deps_.push_back(open_[open].reader);
    }
  }
  for (int32_t buf : {written, accum}) {
    if (buf < 0) continue;
    const BufState& w = At(buf);
    if (w.writer >= 0) deps_.push_back(w.writer);
    deps_.insert(deps_.end(), w.readers.begin(), w.readers.end());
  }

  const int partitions = int(CeilDiv(s.rows, g_));
  int64_t last = -1;
  switch (s.kind) {
    case Kind::kLoad:
    case Kind::kStore: {
      const int bytes = sim::DTypeBytes(is_store ? s.out_dtype : s.in_dtype);
      sim::Instruction dma = sim::MakeDma(is_store ? Op::kDmaStore : Op::kDmaLoad, partitions,
                                          int64_t(g_) * s.width * bytes, s.queue);
      dma.chunk_bytes = s.chunk_bytes;
      last = writer_.Add(dma, deps_);
      break;
    }
    case Kind::kLoadVector: {
      sim::Instruction dma =
          sim::MakeDma(Op::kDmaLoad, s.partitions, s.width * sim::DTypeBytes(s.in_dtype), s.queue);
      last = writer_.Add(dma, deps_);
      break;
    }
    default: {
      const Op op = kEngineOps[size_t(s.kind)];
      const bool per_row = PerRow(s) && g_ > 1;
      int64_t free = s.kind == Kind::kBnAggr ? s.width * kBnStatsWidth : s.width;
      if (!per_row && s.kind != Kind::kBnStats && s.kind != Kind::kBnAggr) free *= g_;
      const int count = per_row ? g_ : 1;
      for (int i = 0; i < count; ++i) {
        sim::Instruction inst = sim::MakeEngineOp(op, s.engine, int(free), partitions);
        inst.dtype = s.in_dtype;
        inst.out_dtype = s.out_dtype;
        inst.add_op = s.kind == Kind::kReduce;
        last = writer_.Add(inst, deps_);
      }
      break;
    }
  }

  // Readers of the buffers this step read; the written buffer's new writer.
  auto reader = [&](int32_t buf) {
    if (buf < 0 || buf == written) return;
    BufState& b = At(buf);
    if (!b.constant) b.readers.push_back(last);
  };
  reader(s.src.buf);
  reader(s.src1.buf);
  reader(s.scalar0.buf);
  reader(s.scalar1.buf);
  for (int32_t buf : {written, accum}) {
    if (buf < 0) continue;
    BufState& w = At(buf);
    w.writer = last;
    w.readers.clear();
    w.constant = s.kind == Kind::kLoadVector;
  }
  if (open < open_.size()) {
    open_.erase(open_.begin() + ptrdiff_t(open));
  } else if (is_store && s.hbm_region >= 0 && read_back_) {
    outputs_.Push(last);
  }
  // Opened after the store's check above: `open` indexes the regions open before this step.
  if (s.from_output) open_.push_back({s.hbm_region, region_writer, last});
}

namespace {

// The counter value of `r` at tile `t`.
int64_t CounterOf(const Rotation& r, int64_t t) { return r.counter != nullptr ? *r.counter : t; }

}  // namespace

void SimSink::Canon(int64_t t, const TileLoop& loop, sim::LoopState* state) {
  tile_ = t;
  std::vector<int64_t>& canon = state->canon;
  std::vector<int64_t>& abs = state->abs;
  canon.clear();
  abs.clear();
  const int64_t pos = state->pos;
  auto handle = [&](int64_t h) {
    canon.push_back(h < 0 ? int64_t(-1) : pos - h);
    abs.push_back(h);
  };
  auto value = [&](int64_t v) {
    canon.push_back(v);
    abs.push_back(-1);
  };
  auto entry = [&](size_t id) {
    if (id >= bufs_.size()) {
      value(-2);
      return;
    }
    const BufState& b = bufs_[id];
    handle(b.writer);
    value(int64_t(b.readers.size()) * 2 + int64_t(b.constant));
    for (int64_t h : b.readers) handle(h);
  };
  // The rotating ids in slot order from the counter's current slot, then every other id in use.
  for (const Rotation& r : loop.rotations) {
    const int64_t c = CounterOf(r, t);
    for (int64_t k = 0; k < r.slots; ++k) {
      const int64_t slot = (c + k) % r.slots;
      for (int64_t w = 0; w < r.width; ++w) entry(size_t(r.base + slot * r.width + w));
    }
  }
  auto rotating = [&](size_t id) {
    return std::any_of(loop.rotations.begin(), loop.rotations.end(), [&](const Rotation& r) {
      return int64_t(id) >= r.base && int64_t(id) < r.base + int64_t(r.slots) * r.width;
    });
  };
  for (int32_t id : used_) {
    const BufState& b = bufs_[size_t(id)];
    if ((b.writer < 0 && b.readers.empty()) || rotating(size_t(id))) continue;
    value(id);
    entry(size_t(id));
  }
  value(int64_t(open_.size()));
  for (const OpenRegion& o : open_) {
    value(o.region);
    handle(o.writer);
    handle(o.reader);
  }
  state->saved.clear();
  for (const int64_t* c : loop.counters) state->saved.push_back(*c);
}

void SimSink::SkipTiles(const sim::SkippedPeriods& skip, const TileLoop& loop) {
  const int64_t tiles = skip.periods * skip.p;
  // Counter changes per period and in all; the tile index moves by `tiles`.
  const std::vector<int64_t>& then = skip.then->saved;
  auto per_period = [&](const Rotation& r) {
    if (r.counter == nullptr) return int64_t(skip.p);
    for (size_t k = 0; k < loop.counters.size(); ++k) {
      if (loop.counters[k] == r.counter) return *r.counter - then[k];
    }
    return int64_t(0);
  };
  auto rotating = [&](size_t id) {
    return std::any_of(loop.rotations.begin(), loop.rotations.end(), [&](const Rotation& r) {
      return int64_t(id) >= r.base && int64_t(id) < r.base + int64_t(r.slots) * r.width;
    });
  };
  for (const Rotation& r : loop.rotations) {
    const int64_t per = per_period(r);
    const bool still = per % r.slots == 0;
    const int64_t begin = r.base, end = r.base + int64_t(r.slots) * r.width;
    for (int64_t id = begin; id < end; ++id) {
      BufState& b = At(int32_t(id));  // every id of the range listed, so rotating keeps used_
      skip.Move(b.writer, still);
      for (int64_t& h : b.readers) skip.Move(h, still);
    }
    // Slot s's state moves to slot s + per x periods.
    const int64_t shift = ((per * skip.periods) % r.slots + r.slots) % r.slots * r.width;
    std::rotate(bufs_.begin() + begin, bufs_.begin() + (end - shift), bufs_.begin() + end);
  }
  for (int32_t id : used_) {
    if (rotating(size_t(id))) continue;
    BufState& b = bufs_[size_t(id)];
    skip.Move(b.writer, true);
    for (int64_t& h : b.readers) skip.Move(h, true);
  }
  for (OpenRegion& o : open_) {
    skip.Move(o.writer, true);
    skip.Move(o.reader, true);
  }
  for (size_t k = 0; k < loop.counters.size(); ++k) {
    *loop.counters[k] += skip.CounterSteps(*loop.counters[k], k);
  }
  tile_ += tiles;
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
