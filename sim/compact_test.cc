// The periodic-stream compressor on synthetic instruction streams (no kernel): periodic runs,
// transients, ragged tails, streams that are not periodic, constants read through anchors, FIFO
// entries read continued or strided, nested loops. Every compact stream must unroll to the flat
// stream the same loop body emits, and simulate (fast path and exact) exactly as it does.
#include "sim/compact.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "sim/simulate.h"

namespace tessel::sim {
namespace {

// A pipelined loop: iteration i loads a tile into buffer i % bufs (after the buffer's last reader),
// runs a Vector op of free size Size(i) on it that reads the previous op (a chain), an optional
// constant (loaded before the loop) and, when popping, the front of a FIFO of partial results;
// then stores the result (optionally twice) and, when pushing, pushes it on the FIFO.
class PipelineBody {
 public:
  struct Options {
    int bufs = 2;
    std::vector<int> sizes = {64};  // Size(i) = sizes[i % sizes.size()]
    bool grow = false;              // Size(i) = 8 + i instead: not periodic
    bool pop = false, push = false;
    bool second_store = false;  // one more instruction per iteration
  };
  PipelineBody(StreamWriter& writer, HandleFifo& fifo, Options options)
      : w_(writer), fifo_(fifo), o_(std::move(options)), reader_(size_t(o_.bufs), -1) {}

  int64_t constant = -1;  // read by every op when >= 0
  int64_t last = -1;      // the last op

  int Size(int64_t i) const { return o_.grow ? int(8 + i) : o_.sizes[size_t(i) % o_.sizes.size()]; }

  void Iterate(int64_t i) {
    const size_t b = size_t(count_++ % o_.bufs);
    const int64_t load = w_.Add(MakeDma(Op::kDmaLoad, 128, 2048, 0), {reader_[b]});
    const int64_t partial = o_.pop && !fifo_.empty() ? fifo_.Pop() : -1;
    const int64_t op = w_.Add(MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, Size(i)),
                              {load, last, constant, partial});
    reader_[b] = op;
    last = op;
    w_.Add(MakeDma(Op::kDmaStore, 128, 512, 1), {op});
    if (o_.second_store) w_.Add(MakeDma(Op::kDmaStore, 128, 256, 1), {op});
    if (o_.push) fifo_.Push(op);
  }

  void Snapshot(int64_t i, LoopState* state) {
    state->canon.clear();
    state->abs.clear();
    auto handle = [&](int64_t h) {
      state->canon.push_back(h < 0 ? -1 : state->pos - h);
      state->abs.push_back(h);
    };
    for (int j = 0; j < o_.bufs; ++j) handle(reader_[size_t((count_ + j) % o_.bufs)]);
    handle(last);
    handle(constant);
    state->canon.push_back(o_.grow ? i : i % int64_t(o_.sizes.size()));
    state->abs.push_back(-1);
    state->saved.assign({count_});
  }

  void Skip(const SkippedPeriods& skip) {
    const int64_t per = count_ - skip.then->saved[0];
    count_ += per * skip.periods;
    const bool still = per % o_.bufs == 0;
    for (int64_t& h : reader_) skip.Move(h, still);
    const int64_t delta = (per * skip.periods) % o_.bufs;
    std::rotate(reader_.begin(), reader_.end() - delta, reader_.end());
    skip.Move(last, true);
    skip.Move(constant, true);
  }

  HandleFifo* fifo() { return &fifo_; }

 private:
  StreamWriter& w_;
  HandleFifo& fifo_;
  Options o_;
  std::vector<int64_t> reader_;
  int64_t count_ = 0;
};

// A compact and a flat program written by the same `emit`, which gets the writer and whether to
// compress.
struct Written {
  Program compact, flat;
};
Written WriteBoth(const std::function<void(StreamWriter&, bool)>& emit) {
  Written out;
  out.compact.cores.resize(1);
  out.flat.cores.resize(1);
  StreamWriter writer;
  writer.Begin(&out.compact.cores[0], true);
  emit(writer, true);
  writer.Begin(&out.flat.cores[0], false);
  emit(writer, false);
  return out;
}

// Runs `body` over [first, last): compressed through `loop`, or iteration by iteration.
template <typename Body>
void RunLoop(StreamWriter& w, bool compress, LoopCompressor& loop, Body& body, int64_t first,
             int64_t last, const RunOptions& options = {}) {
  if (compress) {
    loop.Run(w, body, first, last, options);
  } else {
    for (int64_t i = first; i < last; ++i) body.Iterate(i);
  }
}

int Repeats(const CoreProgram& core) {
  return int(std::ranges::count_if(core.segments,
                                   [](const Segment& s) { return s.kind == Segment::kBegin; }));
}

void ExpectSameResult(const SimResult& a, const SimResult& b, const char* what) {
  EXPECT_EQ(a.ticks, b.ticks) << what;
  EXPECT_EQ(a.hbm_bytes, b.hbm_bytes) << what;
  EXPECT_EQ(a.bound, b.bound) << what;
  for (int e = 0; e < kNumEngines; ++e) {
    EXPECT_EQ(a.engines[e].busy_ticks, b.engines[e].busy_ticks) << what << " engine " << e;
    EXPECT_EQ(a.engines[e].instructions, b.engines[e].instructions) << what << " engine " << e;
  }
}

// The compact program unrolls to exactly the flat one and simulates exactly as it does, with the
// fast path and without.
void ExpectSameStream(const Written& w) {
  absl::StatusOr<Program> unrolled = Flatten(w.compact);
  ASSERT_TRUE(unrolled.ok()) << unrolled.status();
  const CoreProgram& u = unrolled->cores[0];
  const CoreProgram& f = w.flat.cores[0];
  ASSERT_EQ(u.instructions.size(), f.instructions.size());
  for (size_t i = 0; i < f.instructions.size(); ++i) {
    ASSERT_TRUE(SameOperation(u.instructions[i], f.instructions[i])) << "instruction " << i;
    ASSERT_TRUE(std::ranges::equal(u.DepsOf(int32_t(i)), f.DepsOf(int32_t(i)))) << "deps of " << i;
  }
  const Target t = *LoadTarget("snc2");
  absl::StatusOr<SimResult> fast = Simulate(t, w.compact, {});
  absl::StatusOr<SimResult> exact = Simulate(t, w.compact, {.exact = true});
  absl::StatusOr<SimResult> flat = Simulate(t, w.flat, {});
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(exact.ok() && flat.ok());
  ExpectSameResult(*fast, *exact, "fast vs exact");
  ExpectSameResult(*exact, *flat, "exact vs flat");
}

Written Pipeline(int64_t n, PipelineBody::Options options, const RunOptions& run = {}) {
  return WriteBoth([&](StreamWriter& w, bool compress) {
    HandleFifo fifo;
    PipelineBody body(w, fifo, options);
    LoopCompressor loop;
    RunLoop(w, compress, loop, body, 0, n, run);
  });
}

TEST(CompactTest, APeriodicRunBecomesOneRepeatAfterItsTransient) {
  // Three buffers: the first three iterations load without waiting for a reader (a transient),
  // iteration 3 is the first of the period, found at the boundary before iteration 4.
  const Written w = Pipeline(100, {.bufs = 3});
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_EQ(w.flat.cores[0].instructions.size(), 300u);
  EXPECT_EQ(c.instructions.size(), 12u);  // iterations 0-3, never the other 96
  ASSERT_EQ(Repeats(c), 1);
  ASSERT_EQ(c.segments.size(), 4u);
  EXPECT_EQ(c.segments[0].end - c.segments[0].begin, 9u);  // the transient
  EXPECT_EQ(c.segments[1].count, 97);                      // iterations 3-99
  EXPECT_EQ(c.FlatSize(), 300);
  ExpectSameStream(w);
}

TEST(CompactTest, APeriodOfTwoIterationsLeavesARaggedTailOutsideTheRepeat) {
  // Sizes alternate: no period of one iteration. The period starts at iteration 1, so 102
  // iterations leave one after the last period.
  const Written w = Pipeline(102, {.bufs = 1, .sizes = {64, 128}});
  const CoreProgram& c = w.compact.cores[0];
  ASSERT_EQ(Repeats(c), 1);
  const auto begin =
      std::ranges::find_if(c.segments, [](const Segment& s) { return s.kind == Segment::kBegin; });
  EXPECT_EQ(c.RepeatFlatSize(size_t(begin - c.segments.begin())) % 6, 0);  // whole periods
  EXPECT_EQ(c.segments.back().kind, Segment::kInstructions);               // the tail
  EXPECT_EQ(c.FlatSize(), 306);
  EXPECT_LT(c.instructions.size(), 20u);
  ExpectSameStream(w);
}

TEST(CompactTest, AStreamThatIsNotPeriodicStaysFlat) {
  const Written w = Pipeline(60, {.grow = true});
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_EQ(Repeats(c), 0);
  EXPECT_EQ(c.instructions.size(), w.flat.cores[0].instructions.size());
  ExpectSameStream(w);
}

TEST(CompactTest, ARepeatMustSaveWhatItCosts) {
  // 10 iterations of 3 instructions cannot save 100.
  const Written w = Pipeline(10, {}, {.min_saving = 100});
  EXPECT_EQ(Repeats(w.compact.cores[0]), 0);
  ExpectSameStream(w);
  const Written saved = Pipeline(60, {}, {.min_saving = 100});
  EXPECT_EQ(Repeats(saved.compact.cores[0]), 1);
  ExpectSameStream(saved);
}

TEST(CompactTest, AConstantLoadedBeforeTheLoopIsReadThroughAnAnchor) {
  const Written w = WriteBoth([](StreamWriter& wr, bool compress) {
    HandleFifo fifo;
    PipelineBody body(wr, fifo, {});
    body.constant = wr.Add(MakeDma(Op::kDmaLoad, 128, 4096, 2), {-1});
    LoopCompressor loop;
    RunLoop(wr, compress, loop, body, 0, 80);
  });
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_EQ(Repeats(c), 1);
  EXPECT_TRUE(std::ranges::any_of(c.deps, [](int32_t d) { return d < 0; }));
  ExpectSameStream(w);
}

// A loop pushes partial results and a later loop adds to them in the same order. Written with the
// same period, the second loop's reads continue the FIFO; with a longer period (a second store
// per iteration), they advance by the first loop's period, a strided read.
Written FifoLoops(bool second_store) {
  return WriteBoth([&](StreamWriter& w, bool compress) {
    HandleFifo fifo;
    PipelineBody first(w, fifo, {.push = true});
    LoopCompressor loop;
    RunLoop(w, compress, loop, first, 0, 64);
    PipelineBody second(w, fifo, {.pop = true, .second_store = second_store});
    second.last = first.last;
    RunLoop(w, compress, loop, second, 0, 64);
  });
}

TEST(CompactTest, FifoEntriesWrittenWithTheSamePeriodAreReadRelative) {
  const Written w = FifoLoops(false);
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_EQ(Repeats(c), 2);
  EXPECT_TRUE(c.anchor_forms.empty());
  ExpectSameStream(w);
}

TEST(CompactTest, FifoEntriesWrittenWithAnotherPeriodAreReadStrided) {
  const Written w = FifoLoops(true);
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_EQ(Repeats(c), 2);
  EXPECT_TRUE(
      std::ranges::any_of(c.anchor_forms, [](const AnchorForm& f) { return f.stride > 0; }));
  ExpectSameStream(w);
}

// An outer loop whose iterations each load a tile and run an inner pipeline loop; every inner op
// also reads a constant loaded before the outer loop.
class OuterBody {
 public:
  OuterBody(StreamWriter& w, bool compress, bool log_inner)
      : w_(w), compress_(compress), log_inner_(log_inner) {}
  int64_t constant = -1, last = -1;

  void Iterate(int64_t) {
    w_.Add(MakeDma(Op::kDmaLoad, 128, 1024, 0), {-1});
    HandleFifo none;
    PipelineBody inner(w_, none, {.bufs = 1});
    inner.constant = constant;
    inner.last = last;
    RunLoop(w_, compress_, inner_loop_, inner, 0, 40, {.log_skipped_reads = log_inner_});
    last = inner.last;
  }
  void Snapshot(int64_t, LoopState* state) {
    state->canon = {last < 0 ? -1 : state->pos - last, state->pos - constant};
    state->abs = {last, constant};
  }
  void Skip(const SkippedPeriods& skip) {
    skip.Move(last, true);
    skip.Move(constant, true);
  }
  HandleFifo* fifo() { return nullptr; }

 private:
  StreamWriter& w_;
  bool compress_, log_inner_;
  LoopCompressor inner_loop_;
};

Written Nested(bool log_inner) {
  return WriteBoth([&](StreamWriter& w, bool compress) {
    OuterBody outer(w, compress, log_inner);
    outer.constant = w.Add(MakeDma(Op::kDmaLoad, 128, 4096, 2), {-1});
    LoopCompressor loop;
    RunLoop(w, compress, loop, outer, 0, 30);
  });
}

TEST(CompactTest, NestedRepeatsReadAConstantFromBeforeTheOuterLoop) {
  // With the inner loops' skipped reads logged, the outer loop compresses too, reading the
  // constant from inside the inner repeat through an anchor one repeat further out.
  const Written w = Nested(true);
  const CoreProgram& c = w.compact.cores[0];
  EXPECT_LT(c.instructions.size() * 20, w.flat.cores[0].instructions.size());
  EXPECT_TRUE(std::ranges::any_of(c.anchor_forms, [](const AnchorForm& f) { return f.up > 0; }));
  ExpectSameStream(w);
  // Without the log the outer loop cannot tell that every read of the constant is anchorable.
  const Written unlogged = Nested(false);
  const CoreProgram& u = unlogged.compact.cores[0];
  EXPECT_FALSE(std::ranges::any_of(u.anchor_forms, [](const AnchorForm& f) { return f.up > 0; }));
  EXPECT_GT(u.instructions.size(), c.instructions.size());
  ExpectSameStream(unlogged);
}

TEST(CompactTest, AFifoSkipContinuesThePushesWithThePeriodLength) {
  HandleFifo fifo;
  for (int64_t h : {10, 13, 16}) fifo.Push(h);
  EXPECT_EQ(fifo.Pop(), 10);
  // A period from (head 0, end 2) to now (head 1, end 3), 3 positions long: one pop, one push.
  fifo.Skip(0, 2, 3, 2);
  EXPECT_EQ(fifo.head(), 3u);
  EXPECT_EQ(fifo.end(), 5u);
  EXPECT_EQ(fifo.Pop(), 19);
  EXPECT_EQ(fifo.Pop(), 22);
  EXPECT_TRUE(fifo.empty());
}

}  // namespace
}  // namespace tessel::sim
