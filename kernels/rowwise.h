// A small schedule IR shared by the row-wise kernels (softmax, layernorm, rmsnorm).
//
// A row tile holds up to P x g consecutive rows of a [rows, cols] tensor: P partitions, each with g
// consecutive rows along its free dimension. A kernel's generator walks its schedule and emits
// Steps (loads, vector/scalar instructions on SBUF buffers, stores). Two sinks consume the same
// step stream:
// - SimSink turns each step into simulator instructions. Engine ops work on all g rows of a
//   partition at once (free size g x width), except ops that take a per-row scalar operand
//   (activation scale/bias, tensor_scalar operands, bn_stats/bn_aggr), which need one instruction
//   per row slot (g instructions of free size width). Dependencies come from the buffers each step
//   reads and writes (read-after-write, write-after-read, write-after-write), so multi-buffering
//   is exactly as deep as the generator's buffer rotation.
// - CpuSink executes the steps on float data, rounding every result to the step's output dtype,
//   with the same tile boundaries, column chunks, reduction order and rescaling as the schedule.
#ifndef TESSEL_KERNELS_ROWWISE_H_
#define TESSEL_KERNELS_ROWWISE_H_

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "kernels/kernel.h"
#include "kernels/schedule_util.h"
#include "sim/compact.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels::rowwise {

// Values of the tiling parameters every row-wise kernel offers.
extern const std::vector<std::string> kTileRows;  // "tile_rows": partitions per row tile
extern const std::vector<std::string>
    kRowsPerPartition;                          // "rows_per_partition": rows per partition
extern const std::vector<std::string> kChunks;  // "chunk": columns per chunk

// How a row-wise kernel tiles a [rows, cols] problem: row tiles of tile_rows partitions x g rows,
// columns in chunks, the row tile kept resident in SBUF or streamed chunk by chunk through `bufs`
// buffers, and row tiles split over `shards` cores. Kernels extend it with their own choices.
struct RowTiling {
  int64_t rows = 0, cols = 0;
  sim::DType dtype = sim::DType::kBf16;  // of X, Y and the parameter vectors
  int in_bytes = 2;                      // bytes of one element of dtype
  int64_t tile_rows = 128, g = 1, chunk = 512;
  bool resident = true;
  int bufs = 2, shards = 1;
  // Derived by DeriveTiling.
  int64_t rows_per_tile = 0, tiles = 0, chunks = 0;
};

// Reads rows, cols and dtype from `problem` and tile_rows, rows_per_partition, chunk, resident,
// bufs and shards from `config`, then derives. InvalidArgument naming a missing or bad parameter.
absl::Status ParseRowTiling(const Problem& problem, const Config& config, RowTiling& tiling);
// Sets rows_per_tile, tiles and chunks from the other fields.
void DeriveTiling(RowTiling& tiling);
// The tiling a plain compiler picks for `problem` (rows, cols): one row per partition, 128-row
// tiles (halved while half still covers the rows, down to 32), 512-column chunks (halved while half
// still covers the columns, down to 128), resident when one chunk covers a row, double-buffered
// unless there is a single tile of a single chunk, one core. Kernels' Default configs start from
// it.
RowTiling PlainTiling(const Problem& problem);
// The rules every row-wise tiling obeys on `target` (partitions, free-size cap, resident needs
// more than one chunk, shards within the chip's cores); with `strict`, also rejects redundant
// choices (a tile, row group or chunk twice as large as needed, more shards than row tiles, more
// buffers than rotate). InvalidArgument with the rule's reason.
absl::Status CheckRowTiling(const RowTiling& tiling, const sim::Target& target, bool strict);

enum class Kind : uint8_t {
  kLoad,          // dst[r][c + j] = X[row0 + r][col0 + j] (or Y when from_output)
  kLoadVector,    // dst row 0 [c + j] = vector[vector_id][col0 + j], DMA-broadcast to partitions
  kStore,         // Y[row0 + r][col0 + j] = src[r][c + j]
  kReduce,        // dst[r][c] = fn(src[r][c .. c + width))   (fn: kMax, kAdd; fp32 accumulate)
  kActivation,    // dst = fn(src * scale + bias)            (fn: kExp, kCopy, kSquare; Scalar)
  kTensorScalar,  // dst = (src fn a) fn1 b                  (a, b: per-row scalars or immediates)
  kTensorTensor,  // dst = src fn src1                       (src1 per row, or a broadcast vector)
  kReciprocal,    // dst = 1 / src
  kBnStats,       // dst[r][c .. c + 3) = count, mean, M2 of src[r][c .. c + width)
  kBnAggr,  // dst[r][c], [c + 1] = mean, variance of `width` bn_stats groups at src (stride 6)
};

enum class Fn : uint8_t { kNone, kAdd, kSub, kMul, kMax, kPow, kExp, kCopy, kSquare };

// A buffer column: for data operands the first column touched, for per-row scalars the column
// holding the scalar. buf < 0 means "none" (scalars then use the step's immediate).
struct Ref {
  int32_t buf = -1;
  int32_t col = 0;
};

// Elements of bn_stats output per group (hardware layout; the CPU uses the first three).
inline constexpr int kBnStatsWidth = 6;

struct Step {
  Kind kind = Kind::kLoad;
  sim::EngineKind engine = sim::EngineKind::kVector;
  int core = 0;
  int64_t row0 = 0, rows = 0;  // the tile's problem rows
  int64_t col0 = 0;            // load/store: first problem column
  int64_t width = 1;           // elements per row
  Ref dst, src, src1;
  bool src1_vector = false;  // tensor_tensor: src1 is a [width] vector shared by all rows
  Fn fn = Fn::kNone, fn1 = Fn::kNone;
  Ref scalar0, scalar1;  // activation: scale, bias; tensor_scalar: operands of fn, fn1
  // Activation: also the sum of each row's results into this statistic (NKI activation_reduce:
  // ScalarE reduces along the free dimension in the same instruction, at no extra cost here).
  Ref accum;
  float imm0 = 0, imm1 = 0;
  sim::DType in_dtype = sim::DType::kFp32, out_dtype = sim::DType::kFp32;
  int queue = 0;             // DMA queue
  int32_t chunk_bytes = 0;   // DMA: contiguous bytes per descriptor (0 = all of a partition's)
  bool from_output = false;  // load: read Y (a later pass over the output)
  int32_t hbm_region = -1;   // store writes / output load reads this region (for dependencies)
  int vector_id = 0;         // load_vector: which vector (0 = gamma, 1 = beta)
  int partitions = 0;        // load_vector: partitions to broadcast to
};

// DMA queues, statistic slots and data buffer ids of every row-wise schedule.
inline constexpr int kQueueLoad = 0, kQueueStore = 1;
inline constexpr int kStatSlots = 2;        // row tiles whose statistics are live at once
inline constexpr int kStatsPerSlot = 16;    // statistic buffers per slot
inline constexpr int32_t kDataBase = 1000;  // first data buffer id

// The end of the row tiles [.., end) that emit alike: all of them, or all but a last tile that
// has fewer rows.
inline int64_t RegularEnd(const RowTiling& tiling, int64_t end) {
  return end == tiling.tiles && tiling.rows % tiling.rows_per_tile != 0 ? end - 1 : end;
}

// Calls `per_core(core, first_tile, end_tile)` for each of `tiling`'s shards in core order, after
// starting the core on `sink` with `allocations`; the row tiles are split evenly (ShardBegin).
// A core with as many row tiles as the previous one, none of them short, starting at the same
// phase of the rotations that follow the tile index (statistics, resident data buffers), runs
// the same program, which a sink may copy (Sink::CopyCore returns whether it did).
template <typename Sink, typename PerCore>
void ForEachCore(const RowTiling& tiling, const std::vector<sim::Allocation>& allocations,
                 Sink& sink, PerCore per_core) {
  for (int core = 0; core < tiling.shards; ++core) {
    const int64_t begin = ShardBegin(tiling.tiles, tiling.shards, core);
    const int64_t end = ShardBegin(tiling.tiles, tiling.shards, core + 1);
    const int64_t previous = core > 0 ? ShardBegin(tiling.tiles, tiling.shards, core - 1) : 0;
    if (core > 0 && end - begin == begin - previous &&
        (begin - previous) % std::lcm<int64_t>(kStatSlots, tiling.bufs) == 0 &&
        RegularEnd(tiling, end) == end && sink.CopyCore(core)) {
      continue;
    }
    sink.BeginCore(core, allocations);
    per_core(core, begin, end);
  }
}

// Row tile `t` of a row-wise schedule as core `core` walks it: its rows, its statistic buffers
// (slot t % kStatSlots), its chunks' widths and data buffers, and the steps every row-wise kernel
// builds. The builders return the step, which the caller completes and hands to its sink.
class RowTile {
 public:
  // `stream` counts the core's streamed chunk buffers so far (shared by its tiles); `tiling`
  // must outlive the tile.
  RowTile(const RowTiling& tiling, int core, int64_t t, int64_t* stream);

  int64_t index() const { return t_; }
  int64_t row0() const { return row0_; }
  int64_t rows() const { return rows_; }
  // Statistic buffer `id` (< kStatsPerSlot) of the tile's slot, column `col`.
  Ref Stat(int32_t id, int32_t col = 0) const { return Ref{stat_base_ + id, col}; }
  // Columns of chunk j (the last one may be ragged).
  int64_t Width(int64_t j) const;
  // Chunk j's buffer: the tile's own (rotating over bufs row tiles) when the tiling is resident,
  // else Streamed().
  Ref Data(int64_t j);
  // The next streaming chunk buffer (rotating over bufs).
  Ref Streamed();
  // A load of chunk j into `buf` (kLoad) or a store of `buf` to chunk j (kStore) in the tiling's
  // dtype, on kQueueLoad or kQueueStore, with one descriptor per row when rows are chunked.
  Step Dma(Kind kind, Ref buf, int64_t j) const;
  // `kind` on `engine` with function `fn` from `src` to `dst` over `width` columns, reading `in`
  // and writing `out`; the caller adds the other operands.
  Step Compute(Kind kind, sim::EngineKind engine, Fn fn, Ref src, Ref dst, int64_t width = 1,
               sim::DType in = sim::DType::kFp32, sim::DType out = sim::DType::kFp32) const;

 private:
  const RowTiling& tiling_;
  int core_;
  int64_t t_, row0_, rows_;
  int32_t stat_base_;
  int64_t* stream_;
};

// How SimSink writes programs: loop-structured, the regular row tiles of a pass compressed
// (kCompact, the default), or every instruction emitted (kFlat, for the exactness tests).
enum class RowLowering { kCompact, kFlat };
void SetRowLoweringForTesting(RowLowering lowering);

// Buffer ids that rotate with a counter: `slots` slots of `width` ids from `base`, the slot of
// counter value c being c % slots (e.g. the statistics rotate with the row tile, streamed chunk
// buffers with the chunks streamed so far). counter == nullptr: the row tile's index.
struct Rotation {
  int32_t base = 0;
  int32_t slots = 1;
  int32_t width = 1;
  const int64_t* counter = nullptr;
};

// A pass's loop over the row tiles as the sinks see it: which buffer ids rotate, the counters the
// tiles advance (besides the tile index), and how many outputs a tile reads back
// (from_output loads; 0 if none).
struct TileLoop {
  std::span<const Rotation> rotations;
  std::span<int64_t* const> counters;
  int64_t reads_back = 0;
};

// Turns steps into instructions of `program`; one CoreProgram per BeginCore. In the compact
// lowering, a pass's regular row tiles (Tiles) go through a sim::LoopCompressor: its state at a
// tile boundary is every buffer's writer and readers, in rotation order relative to the
// counters, so once a period of tiles repeats the rest are not generated (sim/compact.h).
class SimSink {
 public:
  SimSink(const sim::Target& target, int rows_per_partition, sim::Program* program);
  ~SimSink();
  SimSink(const SimSink&) = delete;
  SimSink& operator=(const SimSink&) = delete;

  void BeginCore(int core, std::vector<sim::Allocation> allocations);
  // In the compact lowering, core `core` gets core - 1's program; returns whether it did.
  bool CopyCore(int core);
  void operator()(const Step& step);
  // From now on (until the next core), stores' results are read back in order by later
  // from_output loads (a later pass over Y).
  void ReadOutputsBack() { read_back_ = true; }
  // Row tiles [first, last) of a pass, emitted by tile(t); [first, regular_end) emit alike (the
  // last tile may have fewer rows).
  template <typename Tile>
  void Tiles(int64_t first, int64_t last, int64_t regular_end, const TileLoop& loop, Tile&& tile);

 private:
  struct BufState {
    int64_t writer = -1;
    std::vector<int64_t> readers;
    bool constant = false;  // loaded once per core and never written again: readers untracked
    bool listed = false;    // in used_
  };
  // A from_output load's region until the store that writes it again.
  struct OpenRegion {
    int32_t region;
    int64_t writer, reader;
  };
  template <typename Tile>
  struct TileBody {
    SimSink& sink;
    Tile& tile;
    const TileLoop& loop;
    void Iterate(int64_t t) { tile(t); }
    void Snapshot(int64_t t, sim::LoopState* state) { sink.Canon(t, loop, state); }
    void Skip(const sim::SkippedPeriods& skip) { sink.SkipTiles(skip, loop); }
    sim::HandleFifo* fifo() { return &sink.outputs_; }
  };
  BufState& At(int32_t buf);
  // The tile-boundary state (LoopBody::Snapshot) and its move past skipped tiles (Skip).
  void Canon(int64_t t, const TileLoop& loop, sim::LoopState* state);
  void SkipTiles(const sim::SkippedPeriods& skip, const TileLoop& loop);

  const sim::Target& target_;
  int g_;
  sim::Program* program_;
  sim::CoreProgram* core_ = nullptr;
  std::vector<BufState> bufs_;  // by buffer id
  std::vector<int32_t> used_;   // the ids the core has touched, ascending
  std::vector<OpenRegion> open_;
  sim::HandleFifo outputs_;  // stores' handles, when read back
  bool read_back_ = false;
  int64_t tile_ = 0;  // the tile Canon last saw (the counter of rotations without one)
  std::vector<int64_t> deps_;
  sim::StreamWriter writer_;
  sim::LoopCompressor loop_;
};

template <typename Tile>
void SimSink::Tiles(int64_t first, int64_t last, int64_t regular_end, const TileLoop& loop,
                    Tile&& tile) {
  if (writer_.compact() && regular_end - first >= 4) {
    TileBody<Tile> body{*this, tile, loop};
    sim::RunOptions options;
    // A repeat must save more than the simulator spends finding its period (sim/compact.h).
    options.min_saving = 64;
    options.fifo_pops_per_iteration = std::max<int64_t>(1, loop.reads_back);
    first = loop_.Run(writer_, body, first, regular_end, options);
  }
  for (int64_t t = first; t < last; ++t) tile(t);
}

// Executes steps on the CPU. X and Y are row-major [rows, cols]; vectors[i] has cols elements.
class CpuSink {
 public:
  CpuSink(int64_t cols, const std::vector<float>& x, std::vector<float>* y,
          std::vector<std::vector<float>> vectors)
      : cols_(cols), x_(x), y_(y), vectors_(std::move(vectors)) {}
  CpuSink(const CpuSink&) = delete;
  CpuSink& operator=(const CpuSink&) = delete;

  void BeginCore(int, const std::vector<sim::Allocation>&) {}
  bool CopyCore(int) { return false; }
  void operator()(const Step& step);
  void ReadOutputsBack() {}
  template <typename Tile>
  void Tiles(int64_t first, int64_t last, int64_t, const TileLoop&, Tile&& tile) {
    for (int64_t t = first; t < last; ++t) tile(t);
  }

 private:
  float& At(int32_t buf, int64_t row, int64_t col);
  float Scalar(const Ref& ref, float imm, int64_t row);
  int64_t cols_;
  const std::vector<float>& x_;
  std::vector<float>* y_;
  std::vector<std::vector<float>> vectors_;
  std::unordered_map<int32_t, std::vector<std::vector<float>>> bufs_;
};

}  // namespace tessel::kernels::rowwise

#endif  // TESSEL_KERNELS_ROWWISE_H_
