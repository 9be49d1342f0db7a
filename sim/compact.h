// The generic periodic-stream compressor: writes a loop nest's instruction stream as a compact
// (loop-structured) core program (sim/program.h), emitting a period of repeating iterations once
// inside a repeat and never generating the rest. Kernel emitters drive it; it knows no kernel.
//
// Two parts:
// - StreamWriter: one core's instruction stream. Instructions are added with dependencies given as
//   handles, the flat positions Add returns (-1 = none). In compact form it keeps a log of every
//   read, cuts the stream into segments at iteration boundaries, wraps periods in repeats and
//   anchors the reads a period makes of results from before it; in flat form it only appends.
// - LoopCompressor: one loop of the emitter, one instance per nesting level. Run emits iterations
//   [first, last) of the loop through a LoopBody, and at every iteration boundary compares the
//   body's state, relative to the current position, with the state one and two iterations
//   earlier. When it equals one, every later iteration emits the same instructions with the same
//   relative dependencies, provided each read of a result from before the period can be written
//   once for all periods:
//     - a constant: a handle that the period did not write (the same result at both boundaries,
//       e.g. an operand loaded before the loop) is read through an anchor to the repeat's entry;
//     - a FIFO entry: partial results pushed in one loop and popped in a later one (HandleFifo)
//       either continue with the period (each period pops what the one before pushed, or entries
//       one period length apart), or advance by another fixed stride per period (written by an
//       earlier loop with another period) and are read through strided anchors.
//   The period is then wrapped in a repeat over all the periods that fit, the body's state is
//   moved past them (LoopBody::Skip) and Run continues after them. The simulated results of the
//   compact program equal those of the flat stream the same body would emit (compact_test.cc).
//
// A LoopBody (a template parameter of Run, so its calls inline) provides:
//   void Iterate(int64_t i);
//       Emits iteration i; may Run inner loops (with their own LoopCompressor).
//   void Snapshot(int64_t i, LoopState* state);
//       The state before iteration i: fills state->canon with every value the coming iterations'
//       emission depends on, handles made relative to state->pos (pos - h, or -1 for none), and
//       state->abs with each canon entry's absolute handle (-1 where the entry is not a handle);
//       state->saved may hold anything Skip needs from the period's start (e.g. counters).
//   void Skip(const SkippedPeriods& skip);
//       Moves the body's state past the skipped iterations: handles written in the period move by
//       skip.shift (SkippedPeriods::Move), counters by their per-period change, and so on. The
//       FIFO (fifo()) is moved by Run.
//   HandleFifo* fifo();
//       The body's FIFO of partial results read again in the order written, or nullptr.
#ifndef TESSEL_SIM_COMPACT_H_
#define TESSEL_SIM_COMPACT_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/program.h"

namespace tessel::sim {

// One core's instruction stream (see the top of this file). Handles are flat positions: the
// index of an instruction in the unrolled stream. Not thread-safe; the scratch vectors of the
// thread's previous writer are reused (so their capacity is), and handed back when done.
class StreamWriter {
 public:
  StreamWriter();
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Starts writing `core` (empty), in compact or flat form; the handles restart at 0.
  void Begin(CoreProgram* core, bool compact);
  bool compact() const { return compact_; }
  CoreProgram& core() { return *core_; }

  // Appends `inst` depending on the results named by `deps` (handles; negative ones are
  // ignored). Returns the new instruction's handle.
  template <size_t N>
  int64_t Add(const Instruction& inst, const int64_t (&deps)[N]) {
    return Add(inst, std::span<const int64_t>(deps, N));
  }
  int64_t Add(const Instruction& inst, std::span<const int64_t> deps) {
    int32_t inline_buf[4];
    std::vector<int32_t>& buf = deps_buf_;
    int32_t* out = inline_buf;
    if (deps.size() > 4) {
      buf.resize(deps.size());
      out = buf.data();
    }
    size_t n = 0;
    for (int64_t h : deps) {
      if (h < 0) continue;
      if (compact_) reads_.push_back(h);
      out[n++] = compact_ ? int32_t(pos_ - h) : int32_t(h);
    }
    if (compact_) {
      core_->AddCompact(inst, std::span<const int32_t>(out, n));
    } else {
      core_->Add(inst, std::span<const int32_t>(out, n));
    }
    return pos_++;
  }

  // The handle the next instruction gets.
  int64_t position() const { return pos_; }

  // The rest is for LoopCompressor (compact form only).

  // The number of reads logged: every dependency added so far, in order, plus those of skipped
  // periods (LogSkippedReads).
  size_t reads() const { return reads_.size(); }
  std::span<const int64_t> ReadsSince(size_t from, size_t to) const {
    return std::span<const int64_t>(reads_.data() + from, to - from);
  }
  // Logs the reads [from, to) once more for each of `periods` periods skipped after them, only
  // those of results before `entry` (the period's start; an enclosing loop's checks count only
  // those): a read of one of `constants` names the same result in every period, one of
  // `strided` (with `stride` > 0) the one `stride` later, any other the one a period `len` later.
  // `first` is the period's first template: its repeat's reads are then all in the log
  // (NestedAnchorReads counts only such repeats').
  void LogSkippedReads(size_t from, size_t to, int64_t entry, int64_t len, int64_t periods,
                       std::span<const int64_t> constants, std::span<const int64_t> strided,
                       int64_t stride, uint32_t first);
  // The first template at or after segment `seg` (the number of templates if none is).
  uint32_t FirstTemplate(size_t seg) const;
  // Starts a new instruction segment and returns its index (a possible repeat start).
  size_t Cut();
  // Joins the consecutive instruction segments from segment `from` on (the cuts a Run made and
  // did not wrap), so the simulator walks fewer of them; earlier segments keep their indices.
  void MergeSegments(size_t from);
  // Dependencies of the instructions emitted since segment `seg` (which starts at flat position
  // `entry`) on one of `constants` (ascending handles before `entry`) that can be anchored to
  // `entry` (sim/program.h): relative ones outside nested repeats and, without a stride, plain
  // anchored ones of the repeats nested directly in the segments. Returns how many reads they
  // make (a nested repeat's, once per iteration); with `rewrite`, anchors them to `entry`, so
  // they name the same instruction in every iteration once the segments become a repeat (with a
  // `stride`: the instruction `stride` positions later in each iteration).
  size_t AnchorReads(size_t seg, int64_t entry, std::span<const int64_t> constants, int64_t stride,
                     bool rewrite);
  // Wraps segments [seg, end) in a repeat of `count` iterations.
  void WrapRepeat(size_t seg, int64_t count);
  // Moves the position past `shift` instructions that a repeat runs but that were not added.
  void Advance(int64_t shift) { pos_ += shift; }

 private:
  // AnchorReads for the repeat whose kBegin is segments[begin], entered at `nested_entry`: its
  // own templates' plain anchors on a constant become anchors to `entry`, one repeat further out.
  size_t NestedAnchorReads(size_t begin, int64_t nested_entry, int64_t entry,
                           std::span<const int64_t> constants, bool rewrite);
  void SwapThreadBuffers();

  CoreProgram* core_ = nullptr;
  bool compact_ = true;
  int64_t pos_ = 0;
  std::vector<int64_t> reads_;
  std::vector<int32_t> deps_buf_;                     // Add's scratch for more than 4 deps
  std::vector<size_t> merge_stack_;                   // MergeSegments' scratch
  std::vector<std::pair<int64_t, int64_t>> skipped_;  // LogSkippedReads' scratch
  std::vector<uint32_t> logged_;  // first templates of the repeats LogSkippedReads logged
};

// A FIFO of handles: results written in one order and read again in the same order (e.g. the
// partial sums one loop writes and a later one adds to). Entries are numbered from 0 in push
// order; [head(), end()) are live. Run moves it past skipped periods.
class HandleFifo {
 public:
  void Clear() {
    entries_.clear();
    head_ = base_ = 0;
  }
  void Push(int64_t h) { entries_.push_back(h); }
  bool empty() const { return head_ == end(); }
  // The front live entry, removed. REQUIRES: !empty().
  int64_t Pop() { return entries_[head_++ - base_]; }
  size_t head() const { return head_; }
  size_t end() const { return base_ + entries_.size(); }
  size_t live() const { return end() - head_; }
  const int64_t* live_data() const { return entries_.data() + (head_ - base_); }
  // The FIFO after `periods` more periods like the one from a boundary with (then_head,
  // then_end) to now (`len` positions long): each pops and pushes as many entries as that one,
  // the pushes continuing its pushes with step `len` (the entries read were checked by Run).
  void Skip(size_t then_head, size_t then_end, int64_t len, int64_t periods);
  void swap(HandleFifo& other) {
    entries_.swap(other.entries_);
    scratch_.swap(other.scratch_);
    std::swap(head_, other.head_);
    std::swap(base_, other.base_);
  }

 private:
  // Indices are logical: entries_[i - base_] holds entry i (Skip drops the history).
  std::vector<int64_t> entries_;
  std::vector<int64_t> scratch_;  // Skip's, swapped with entries_ so both keep their capacity
  size_t head_ = 0, base_ = 0;
};

// A loop body's state at a boundary between two iterations (see LoopBody at the top).
struct LoopState {
  // Filled by the body's Snapshot.
  std::vector<int64_t> canon;
  std::vector<int64_t> abs;    // per canon entry: the absolute handle, or -1 (not a handle)
  std::vector<int64_t> saved;  // anything the body's Skip needs from the period's start
  // Filled by Run: the position, the first live FIFO entries relative to it (as many as the rest
  // of the run can read), the FIFO's head and end, the writer's segment cut and read count here.
  int64_t pos = 0;
  std::vector<int64_t> fifo_rel;
  size_t fifo_head = 0, fifo_end = 0;
  size_t seg = 0;
  size_t reads = 0;
};

// What LoopBody::Skip is told: `periods` periods of `p` iterations from iteration `at` were
// wrapped in a repeat and not generated.
struct SkippedPeriods {
  int64_t at = 0;
  int64_t periods = 0;
  int p = 1;
  int64_t shift = 0;                // flat positions skipped: the period's length x periods
  const LoopState* then = nullptr;  // the state at the period's start (`saved` is the body's)
  const LoopState* now = nullptr;   // and at its end (the current state)
  // Moves handle `h` (-1: none) past the skipped periods: by `shift`, unless it is a constant the
  // period did not write (older than the period, in an array that does not rotate: `still`).
  // In a rotating array every entry is relative: one older than the period was written in an
  // earlier one.
  void Move(int64_t& h, bool still) const {
    if (h >= 0 && !(still && h < then->pos)) h += shift;
  }
  // How far a counter moves over the skipped periods: its change in the period (from
  // then->saved[k], where the body's Snapshot saved it, to `count`, its value now) per period.
  int64_t CounterSteps(int64_t count, size_t k) const { return (count - then->saved[k]) * periods; }
};

// LoopBody::Snapshot's canon from a visit of the body's state: visit(handle, value) must call
// handle(h) for every handle (-1: none) and value(v) for every other value the coming iterations
// depend on, in a fixed order. Handles become relative to state->pos.
template <typename Visit>
void CanonOf(LoopState* state, Visit&& visit) {
  std::vector<int64_t>& canon = state->canon;
  std::vector<int64_t>& abs = state->abs;
  canon.clear();
  abs.clear();
  const int64_t pos = state->pos;
  visit(
      [&](auto h) {
        canon.push_back(h < 0 ? int64_t(-1) : pos - int64_t(h));
        abs.push_back(int64_t(h));
      },
      [&](int64_t v) {
        canon.push_back(v);
        abs.push_back(-1);
      });
}

// LoopBody::Skip's handles, from the same visit as CanonOf's (handles by reference): a handle
// that is the same at both ends of the period (a constant of it) stays, every other one moves
// by skip.shift.
template <typename Visit>
void MoveHandles(const SkippedPeriods& skip, Visit&& visit) {
  size_t k = 0;
  visit(
      [&](auto& h) {
        using Handle = std::remove_reference_t<decltype(h)>;
        if (h >= 0 && skip.then->abs[k] != skip.now->abs[k]) h = Handle(h + skip.shift);
        ++k;
      },
      [&](int64_t) { ++k; });
}

// A rotation of alike buffers (a ring of SBUF tiles, PSUM banks, ...): a counter picks the next
// `width` adjacent ones of the first `size` (size / width steps make a turn). A loop body's
// state is compared from the buffer the counter picks next, so a rotation in another turn is the
// same state; skipping periods turns it on.
struct Rotation {
  int64_t start = 0, size = 1, width = 1;

  // The rotation whose counter stands at `count`, with `steps` steps of `width` buffers.
  static Rotation At(int64_t count, int64_t steps, int64_t width) {
    return Rotation{count % steps * width, steps * width, width};
  }
  // Buffer `b` relative to the next one the counter picks; -1 (none) stays.
  int64_t Rel(int64_t b) const { return b < 0 ? -1 : ((b - start) % size + size) % size; }
  // Buffer `b` after `steps` more counter steps; -1 (none) stays.
  int64_t Moved(int64_t b, int64_t steps) const {
    return b < 0 ? -1 : (b + steps % (size / width) * width) % size;
  }
  // Calls f on the entries of `v` (one per buffer) from the next one the counter picks (entries
  // beyond `size` are never picked: they follow in order).
  template <typename T, typename F>
  void Visit(std::span<T> v, F&& f) const {
    const size_t n = std::min(v.size(), size_t(size));
    for (size_t k = 0; k < n; ++k) f(v[(size_t(start) + k) % n]);
    for (size_t k = n; k < v.size(); ++k) f(v[k]);
  }
  // Moves the entries of `v` on by `steps` counter steps (entry b goes to Moved(b, steps)).
  template <typename T>
  void Turn(std::span<T> v, int64_t steps) const {
    const size_t n = std::min(v.size(), size_t(size)), by = size_t(Moved(0, steps));
    if (n > 1) std::rotate(v.begin(), v.begin() + ptrdiff_t(n - by % n), v.begin() + ptrdiff_t(n));
  }
};

// How a loop's repeats are chosen (see Run).
struct RunOptions {
  // When > 0, a repeat must save more than this many flat instructions beyond its first two
  // periods ((periods - 2) x period length, with at least 3 periods), since the simulator
  // simulates about three iterations before it recognises a period and then pays for its
  // extrapolation; once the rest of the run cannot repay one, Run stops looking.
  int64_t min_saving = 0;
  // When > 0, an iteration pops at most this many FIFO entries (so a boundary records only the
  // entries the rest of the run can read); 0 = no bound known.
  int64_t fifo_pops_per_iteration = 0;
  // Log the skipped iterations' reads (StreamWriter::LogSkippedReads), so a repeat of an
  // enclosing loop can anchor the reads this loop's repeats make of results from before it.
  bool log_skipped_reads = false;
};

// One loop of an emitter (see the top of this file). Keeps the boundary states of its current
// Run (their vectors keep their capacity from Run to Run). Not thread-safe.
class LoopCompressor {
 public:
  // Emits iterations [first, last) of `body` through `writer` (compact form), wrapping repeating
  // periods in repeats. Returns last.
  template <typename LoopBody>
  int64_t Run(StreamWriter& writer, LoopBody& body, int64_t first, int64_t last,
              const RunOptions& options);

  void swap(LoopCompressor& other) {
    std::swap(marks_, other.marks_);
    constants_.swap(other.constants_);
    fifo_reads_.swap(other.fifo_reads_);
    ambiguous_.swap(other.ambiguous_);
  }

 private:
  // The period found at a boundary: `p` iterations from marks_[then], repeated `periods` times.
  struct Period {
    size_t then = 0;
    int p = 0;
    int64_t periods = 0;
  };
  // Records the writer's and the FIFO's part of boundary `state`, `remaining` iterations before
  // the run's end.
  void Record(StreamWriter& writer, const HandleFifo* fifo, int64_t remaining,
              const RunOptions& options, LoopState* state);
  // Looks for a period ending at boundary `now` (the made-th of the run) with `remaining`
  // iterations left; when one is found, anchors its reads and wraps it in a repeat. Sets *stop
  // when the run can no longer repay a repeat (RunOptions::min_saving).
  bool FindPeriod(StreamWriter& writer, size_t now, int64_t remaining, const RunOptions& options,
                  Period* found, bool* stop);
  // Whether the period from `then` to `now` repeats: every canon entry equal, except handles
  // that the period did not write (the same instruction at both boundaries, older than `then`).
  // Collects those constants in constants_.
  bool CanonPeriodic(const LoopState& then, const LoopState& now);
  // Whether the period's reads of the constants can be anchored (see ReadsAnchorable), and none
  // reads a constant that a rewritten entry also held (which of the two it reads is unknown).
  bool ConstantReadsAnchorable(StreamWriter& writer, const LoopState& then, const LoopState& now);
  // Whether the period's reads of `handles` (ascending, before then.pos) are all outside nested
  // repeats, where they can be anchored (with `stride`) to the repeat's entry.
  bool ReadsAnchorable(StreamWriter& writer, const LoopState& then, const LoopState& now,
                       std::span<const int64_t> handles, int64_t stride);
  // Whether the FIFO entries the coming `periods` periods read continue the period: each is the
  // entry P places earlier plus the period's length. A period pops and pushes the same number of
  // entries, or only pushes, or only pops.
  static bool FifoPeriodic(const LoopState& then, const LoopState& now, int64_t periods);
  // Or, when the period only pops, whether the entries the period and the coming ones read
  // advance by one stride per period: written by an earlier loop with another period, they are
  // read through strided dependencies (sim/program.h). Returns the stride and fills fifo_reads_
  // with the entries the period read; 0 when they do not.
  int64_t FifoStride(const LoopState& then, const LoopState& now, int64_t periods);

  std::array<LoopState, 3> marks_;   // the last three boundaries of the run, a ring
  std::vector<int64_t> constants_;   // scratch of CanonPeriodic and the anchoring
  std::vector<int64_t> fifo_reads_;  // scratch of FifoStride
  std::vector<int64_t> ambiguous_;   // scratch of ConstantReadsAnchorable
};

template <typename LoopBody>
int64_t LoopCompressor::Run(StreamWriter& writer, LoopBody& body, int64_t first, int64_t last,
                            const RunOptions& options) {
  size_t made = 0, first_seg = 0;
  int64_t i = first;
  bool done = false;
  while (i < last) {
    if (!done) {
      const size_t now = made++;
      LoopState& m = marks_[now % 3];
      m.pos = writer.position();
      body.Snapshot(i, &m);
      HandleFifo* fifo = body.fifo();
      Record(writer, fifo, last - i, options, &m);
      if (now == 0) first_seg = m.seg;
      Period found;
      if (FindPeriod(writer, now, last - i, options, &found, &done) && found.periods > 0) {
        const LoopState& then = marks_[found.then];
        const int64_t len = m.pos - then.pos;
        const SkippedPeriods skip{i, found.periods, found.p, len * found.periods, &then, &m};
        body.Skip(skip);
        if (fifo != nullptr) fifo->Skip(then.fifo_head, then.fifo_end, len, found.periods);
        writer.Advance(skip.shift);
        i += found.periods * found.p;
        done = true;
      }
      if (i >= last) break;
    }
    body.Iterate(i);
    ++i;
  }
  if (made > 0) writer.MergeSegments(first_seg);
  return last;
}

}  // namespace tessel::sim

#endif  // TESSEL_SIM_COMPACT_H_
