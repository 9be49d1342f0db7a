// The periodic-stream compressor's non-template parts: the StreamWriter's segment and anchor
// edits, the FIFO's skip, and LoopCompressor's period tests (see compact.h).
#include "sim/compact.h"

#include <algorithm>
#include <limits>

namespace tessel::sim {
namespace {

// The farthest an anchor can reach back: program dependencies are 32-bit.
constexpr int64_t kMaxAnchor = std::numeric_limits<int32_t>::max();

bool Contains(std::span<const int64_t> sorted, int64_t h) {
  return h >= sorted.front() && h <= sorted.back() &&
         std::binary_search(sorted.begin(), sorted.end(), h);
}

}  // namespace

StreamWriter::StreamWriter() { SwapThreadBuffers(); }
StreamWriter::~StreamWriter() { SwapThreadBuffers(); }

void StreamWriter::SwapThreadBuffers() {
  struct Buffers {
    std::vector<int64_t> reads;
    std::vector<int32_t> deps;
    std::vector<std::pair<int64_t, int64_t>> skipped;
    std::vector<size_t> merge_stack;
    std::vector<uint32_t> logged;
  };
  thread_local Buffers buffers;
  reads_.swap(buffers.reads);
  deps_buf_.swap(buffers.deps);
  skipped_.swap(buffers.skipped);
  merge_stack_.swap(buffers.merge_stack);
  logged_.swap(buffers.logged);
}

void StreamWriter::Begin(CoreProgram* core, bool compact) {
  core_ = core;
  compact_ = compact;
  pos_ = 0;
  reads_.clear();
  logged_.clear();
  if (compact) reads_.reserve(1 << 13);
}

void StreamWriter::LogSkippedReads(size_t from, size_t to, int64_t entry, int64_t len,
                                   int64_t periods, std::span<const int64_t> constants,
                                   std::span<const int64_t> strided, int64_t stride,
                                   uint32_t first) {
  logged_.push_back(first);
  // Each read before the period, with how far it moves per period.
  std::vector<std::pair<int64_t, int64_t>>& before = skipped_;
  before.clear();
  for (size_t r = from; r < to; ++r) {
    const int64_t h = reads_[r];
    if (h >= entry) continue;
    const int64_t step = std::binary_search(constants.begin(), constants.end(), h) ? 0
                         : stride > 0 && std::binary_search(strided.begin(), strided.end(), h)
                             ? stride
                             : len;
    before.push_back({h, step});
  }
  for (int64_t j = 1; j <= periods; ++j) {
    for (const auto& [h, step] : before) reads_.push_back(h + j * step);
  }
}

uint32_t StreamWriter::FirstTemplate(size_t seg) const {
  const auto& segs = core_->segments;
  for (size_t i = seg; i < segs.size(); ++i) {
    if (segs[i].kind == Segment::kInstructions && segs[i].begin < segs[i].end) {
      return segs[i].begin;
    }
  }
  return uint32_t(core_->instructions.size());
}

size_t StreamWriter::Cut() {
  const uint32_t n = uint32_t(core_->instructions.size());
  core_->segments.push_back({Segment::kInstructions, n, n, 0, 0});
  return core_->segments.size() - 1;
}

void StreamWriter::MergeSegments(size_t from) {
  auto& segs = core_->segments;
  size_t out = from;
  std::vector<size_t>& open = merge_stack_;
  open.clear();
  for (size_t i = from; i < segs.size(); ++i) {
    const Segment g = segs[i];
    if (g.kind == Segment::kInstructions) {
      if (g.begin == g.end) continue;
      if (out > from && segs[out - 1].kind == Segment::kInstructions &&
          segs[out - 1].end == g.begin) {
        segs[out - 1].end = g.end;
        continue;
      }
    } else if (g.kind == Segment::kBegin) {
      open.push_back(out);
    } else {
      segs[open.back()].match = uint32_t(out);
      segs[out] = g;
      segs[out++].match = uint32_t(open.back());
      open.pop_back();
      continue;
    }
    segs[out++] = g;
  }
  segs.resize(out);
}

size_t StreamWriter::AnchorReads(size_t seg, int64_t entry, std::span<const int64_t> constants,
                                 int64_t stride, bool rewrite) {
  if (constants.empty()) return 0;
  const auto& segs = core_->segments;
  size_t found = 0;
  int64_t pos = entry;
  for (size_t i = seg; i < segs.size(); ++i) {
    const Segment& g = segs[i];
    if (g.kind == Segment::kBegin) {
      if (stride == 0) found += NestedAnchorReads(i, pos, entry, constants, rewrite);
      pos += core_->RepeatFlatSize(i);
      i = g.match;
      continue;
    }
    for (uint32_t t = g.begin; t < g.end; ++t, ++pos) {
      const Instruction& inst = core_->instructions[t];
      for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
        const int32_t d = core_->deps[j];
        if (d <= 0 || !Contains(constants, pos - d)) continue;
        ++found;
        if (!rewrite) continue;
        core_->deps[j] = -int32_t(entry - (pos - d));
        core_->SetAnchorForm(j, {.stride = int32_t(stride), .up = 0});
      }
    }
  }
  return found;
}

size_t StreamWriter::NestedAnchorReads(size_t begin, int64_t nested_entry, int64_t entry,
                                       std::span<const int64_t> constants, bool rewrite) {
  const auto& segs = core_->segments;
  // Only a repeat whose skipped iterations' reads were logged: the caller compares these
  // counts with the log, which would otherwise miss some of the reads counted here.
  if (std::find(logged_.begin(), logged_.end(), FirstTemplate(begin + 1)) == logged_.end()) {
    return 0;
  }
  size_t found = 0;
  for (size_t i = begin + 1; i < segs[begin].match; ++i) {
    const Segment& g = segs[i];
    if (g.kind == Segment::kBegin) {  // deeper: left as it is (so not counted)
      i = g.match;
      continue;
    }
    for (uint32_t t = g.begin; t < g.end; ++t) {
      const Instruction& inst = core_->instructions[t];
      for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
        const int32_t d = core_->deps[j];
        if (d >= 0 || core_->FormOf(j) != AnchorForm{} || !Contains(constants, nested_entry + d)) {
          continue;
        }
        found += size_t(segs[begin].count);
        if (!rewrite) continue;
        core_->deps[j] = -int32_t(entry - (nested_entry + d));
        core_->SetAnchorForm(j, {.stride = 0, .up = 1});
      }
    }
  }
  return found;
}

void StreamWriter::WrapRepeat(size_t seg, int64_t count) {
  auto& segs = core_->segments;
  segs.insert(segs.begin() + ptrdiff_t(seg), Segment{Segment::kBegin, 0, 0, count, 0});
  for (size_t j = seg + 1; j < segs.size(); ++j) {
    if (segs[j].kind != Segment::kInstructions) segs[j].match += 1;
  }
  core_->EndRepeat();
}

void HandleFifo::Skip(size_t then_head, size_t then_end, int64_t len, int64_t periods) {
  const size_t pops = head_ - then_head;
  const size_t pushes = end() - then_end;
  const size_t live_now = live();
  const size_t new_live = live_now + size_t(periods) * pushes - size_t(periods) * pops;
  scratch_.resize(new_live);
  const int64_t* f = live_data();
  for (size_t u = 0; u < new_live; ++u) {
    const size_t t = size_t(periods) * pops + u;
    if (t < live_now) {
      scratch_[u] = f[t];
    } else {
      const size_t v = t - live_now;
      scratch_[u] = f[live_now - pushes + v % pushes] + int64_t(v / pushes + 1) * len;
    }
  }
  entries_.swap(scratch_);
  head_ += size_t(periods) * pops;
  base_ = head_;
}

void LoopCompressor::Record(StreamWriter& writer, const HandleFifo* fifo, int64_t remaining,
                            const RunOptions& options, LoopState* m) {
  m->reads = writer.reads();
  m->seg = writer.Cut();
  m->fifo_head = fifo != nullptr ? fifo->head() : 0;
  m->fifo_end = fifo != nullptr ? fifo->end() : 0;
  const size_t live = fifo != nullptr ? fifo->live() : 0;
  // With a bound on the pops, the run's iterations read no further.
  m->fifo_rel.resize(
      options.fifo_pops_per_iteration > 0
          ? std::min<size_t>(live, size_t(remaining * options.fifo_pops_per_iteration) + 2)
          : live);
  const int64_t* entries = fifo != nullptr ? fifo->live_data() : nullptr;
  for (size_t x = 0; x < m->fifo_rel.size(); ++x) m->fifo_rel[x] = m->pos - entries[x];
}

bool LoopCompressor::FindPeriod(StreamWriter& writer, size_t now, int64_t remaining,
                                const RunOptions& options, Period* found, bool* stop) {
  const LoopState& m = marks_[now % 3];
  for (int p = 1; p <= 2 && size_t(p) <= now; ++p) {
    const size_t then_index = (now - size_t(p)) % 3;
    const LoopState& then = marks_[then_index];
    if (!CanonPeriodic(then, m)) continue;
    const int64_t periods = remaining / p;
    if (periods < 1) break;
    // A repeat must save more than the simulator spends finding its period and extrapolating
    // it; fewer periods remain later.
    if (options.min_saving > 0 &&
        (periods < 3 || (periods - 2) * (m.pos - then.pos) < options.min_saving)) {
      *stop = true;
      break;
    }
    int64_t stride = 0;
    if (!FifoPeriodic(then, m, periods) && (stride = FifoStride(then, m, periods)) == 0) {
      continue;
    }
    if (!ConstantReadsAnchorable(writer, then, m)) continue;
    if (stride > 0 && !ReadsAnchorable(writer, then, m, fifo_reads_, stride)) continue;
    if (!constants_.empty()) writer.AnchorReads(then.seg, then.pos, constants_, 0, true);
    if (stride > 0) writer.AnchorReads(then.seg, then.pos, fifo_reads_, stride, true);
    writer.WrapRepeat(then.seg, 1 + periods);
    if (options.log_skipped_reads) {
      writer.LogSkippedReads(then.reads, m.reads, then.pos, m.pos - then.pos, periods, constants_,
                             fifo_reads_, stride, writer.FirstTemplate(then.seg + 1));
    }
    *found = {then_index, p, periods};
    return true;
  }
  return false;
}

// The next periods read and write the same relative state, so a constant handle stays as it is
// (SkippedPeriods::Move keeps it). The period may read it only where Run can anchor the reads to
// the repeat's entry. Split from ConstantReadsAnchorable for early rejection: the canon entries
// are cheap to compare.
bool LoopCompressor::CanonPeriodic(const LoopState& then, const LoopState& now) {
  if (then.canon.size() != now.canon.size()) return false;
  constants_.clear();
  for (size_t q = 0; q < now.canon.size(); ++q) {
    if (then.canon[q] == now.canon[q]) continue;
    const int64_t h = now.abs[q];
    if (h < 0 || h != then.abs[q] || h >= then.pos) return false;
    constants_.push_back(h);
  }
  return true;
}

bool LoopCompressor::ConstantReadsAnchorable(StreamWriter& writer, const LoopState& then,
                                             const LoopState& now) {
  if (constants_.empty()) return true;
  std::sort(constants_.begin(), constants_.end());
  constants_.erase(std::unique(constants_.begin(), constants_.end()), constants_.end());
  // A constant that another entry also held at the period's start, an entry the period
  // rewrote, is ambiguous: a read of it may go through either (the one must name the same
  // instruction in every period, the other the next period's result), so such a read keeps the
  // loop unrolled.
  ambiguous_.clear();
  for (size_t q = 0; q < then.abs.size(); ++q) {
    const int64_t h = then.abs[q];
    if (h >= 0 && h != now.abs[q] && std::binary_search(constants_.begin(), constants_.end(), h)) {
      ambiguous_.push_back(h);
    }
  }
  if (!ambiguous_.empty()) {
    std::sort(ambiguous_.begin(), ambiguous_.end());
    for (int64_t target : writer.ReadsSince(then.reads, now.reads)) {
      if (std::binary_search(ambiguous_.begin(), ambiguous_.end(), target)) return false;
    }
  }
  return ReadsAnchorable(writer, then, now, constants_, 0);
}

bool LoopCompressor::ReadsAnchorable(StreamWriter& writer, const LoopState& then,
                                     const LoopState& now, std::span<const int64_t> handles,
                                     int64_t stride) {
  if (then.pos - handles.front() > kMaxAnchor) return false;
  size_t reads = 0;
  for (int64_t target : writer.ReadsSince(then.reads, now.reads)) {
    // Most reads are of the period's own results, above every handle.
    if (target < handles.front() || target > handles.back()) continue;
    reads += std::binary_search(handles.begin(), handles.end(), target);
  }
  return reads == 0 || reads == writer.AnchorReads(then.seg, then.pos, handles, stride, false);
}

bool LoopCompressor::FifoPeriodic(const LoopState& then, const LoopState& now, int64_t periods) {
  const size_t pops = now.fifo_head - then.fifo_head;
  const size_t pushes = now.fifo_end - then.fifo_end;
  const size_t live = now.fifo_end - now.fifo_head;
  if (pops == 0) return pushes <= live;
  if (pushes != 0 && pops != pushes) return false;
  if (pushes == 0 && size_t(periods) * pops > live) return false;
  // Entry u of the FIFO is read in period u / P; equal relative offsets for every entry read in
  // the coming periods mean each period reads as the last one did (and the FIFO continues with
  // stride P and step len, which HandleFifo::Skip relies on).
  const size_t need = std::min<size_t>(live, size_t(periods) * pops);
  if (now.fifo_rel.size() < need || then.fifo_rel.size() < need) return false;
  return std::equal(now.fifo_rel.begin(), now.fifo_rel.begin() + ptrdiff_t(need),
                    then.fifo_rel.begin());
}

int64_t LoopCompressor::FifoStride(const LoopState& then, const LoopState& now, int64_t periods) {
  const size_t pops = now.fifo_head - then.fifo_head;
  const size_t pushes = now.fifo_end - then.fifo_end;
  const size_t need = size_t(periods) * pops;
  if (pops == 0 || pushes != 0 || need > now.fifo_rel.size() || pops > then.fifo_rel.size() ||
      need > now.fifo_end - now.fifo_head) {
    return 0;
  }
  auto at_now = [&](size_t u) { return now.pos - now.fifo_rel[u]; };
  auto at_then = [&](size_t u) { return then.pos - then.fifo_rel[u]; };
  const int64_t stride = at_now(0) - at_then(0);
  if (stride <= 0) return 0;
  for (size_t u = 0; u < need; ++u) {
    if (at_now(u) - (u < pops ? at_then(u) : at_now(u - pops)) != stride) return 0;
  }
  fifo_reads_.resize(pops);
  for (size_t u = 0; u < pops; ++u) fifo_reads_[u] = at_then(u);
  std::sort(fifo_reads_.begin(), fifo_reads_.end());
  return stride;
}

}  // namespace tessel::sim
