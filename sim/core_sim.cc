// CoreSimulator: one core's program-order simulation, with the steady-state fast path for
// loop-structured programs (periodicity check and extrapolation of repeated bodies).
#include "sim/core_sim.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "schema/strings.h"

namespace tessel::sim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Which resources a repeated body uses (the union over everything nested in it).
struct RepInfo {
  int64_t body_len = 0;  // flat instructions per iteration
  uint32_t engines = 0;  // bit e: compute engine e
  uint64_t queues = 0;   // bit q: DMA queue q
  // How far back (flat positions) an instruction of the body can read a result: dependency
  // distances of every template in it, and the anchors (of any form) of nested repeats' templates
  // (all of them before those repeats' entries).
  int64_t reach = 0;
  // Distinct anchors of the templates directly in the body (its pins), ascending.
  std::vector<int32_t> anchors;
  // Strided anchored dependencies of the templates directly in the body: iteration j reads the
  // result a - j * s places before the entry (dep: the index into deps; off: the template's
  // offset in the body).
  struct Strided {
    uint32_t dep;
    int64_t a, s, off;
  };
  std::vector<Strided> strided;
  // Pins of enclosing repeats read by templates in the body, directly or in nested repeats
  // (anchors with AnchorForm::up reaching past this repeat): the pinning repeat's distance from
  // this one and the slot in its pins.
  struct OuterPin {
    int32_t up, slot;
  };
  std::vector<OuterPin> outer;
  int64_t anchor_reach = 0;  // the largest anchor (of any form) of the templates in the body
  // Whether a template in the body, or in a repeat nested in it, reads a result from before this
  // repeat's entry through an anchor (of any form) that this repeat or one around it fixes: then
  // an engine's last instruction may be that result, in the first iteration only (Canon).
  bool reads_before_entry = false;
  bool matmul = false, reload = false, vg = false, vs = false;
};

struct Level {  // boundary history of one active repeat
  std::vector<int64_t> canon[3];
  int64_t lval[3] = {}, pos[3] = {}, makespan[3] = {};
  std::vector<int64_t> dma_busy[3];
};

// One core's simulation in program order. Every engine and DMA queue executes its instructions in
// program order, so each start time is a max over earlier results plus constants (a max-plus
// recurrence): no event queue, and every time is a non-decreasing function of every duration.
//
// One instance per thread is reused (Reset), so its buffers keep their capacity and a simulation
// allocates nothing once its thread has run one of the same size.
class CoreSim {
 public:
  void Reset(const Target& target, const CoreProgram& core, const std::vector<Cost>& costs,
             bool exact) {
    core_ptr_ = &core;
    costs_ptr_ = &costs;
    exact_ = exact;
    std::fill(free_, free_ + 4, 0);
    std::fill(last_, last_ + 4, -1);
    lms_ = lle_ = port_vg_ = port_vs_ = 0;
    mask_ = window_ = pos_ = makespan_ = 0;
    depth_ = frame_ = 0;
    pruned_size_ = 0;
    pin_ = nullptr;
    pin_base_ = 0;
    iter_ = 0;
    tracking_ = false;
    inflight_.clear();
    error_ = absl::OkStatus();
    trace_ = nullptr;
    nq_ = target.dma_queues;
    ne_ = target.dma_engines;
    penalty_[0] = penalty_[1] = penalty_[2] = penalty_[3] = 0;
    for (int e = 0; e < 4; ++e) {
      penalty_[e] = int64_t(target.same_engine_dependency_cycles) * target.ticks_per_cycle[e];
    }
    issue_.assign(nq_, 0);
    hbm_free_.assign(nq_, 0);
    vfree_.assign(size_t(nq_) * ne_, 0);
    dma_busy_.assign(nq_, 0);
  }

  absl::Status Run() {
    const bool compact = core().compact();
    // Window: the longest dependency distance.
    int64_t w = 0;
    if (compact) {
      Prepare();
      for (int32_t d : core().deps) w = std::max<int64_t>(w, d < 0 ? -int64_t(d) : d);
      w = std::max(w, strided_window_);
    } else {
      for (size_t i = 0; i < core().instructions.size(); ++i) {
        for (int32_t d : core().DepsOf(int32_t(i))) w = std::max<int64_t>(w, int64_t(i) - d);
      }
    }
    window_ = w;
    size_t cap = 1;
    while (cap < size_t(w) + 1) cap <<= 1;
    // Not cleared: a slot is read only after its position was written (Step writes every
    // position it simulates, Skip every extrapolated one that is still read).
    if (ring_.size() < cap) {
      ring_.resize(cap);
    }
    mask_ = int64_t(cap - 1);
    if (!compact) {
      for (uint32_t i = 0; i < core().instructions.size(); ++i) {
        if ((i & 0xffff) == 0 && cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
          return absl::CancelledError("simulation cancelled");
        }
        Step<false>(i);
      }
    } else {
      AssignPinSlots();
      if (!exact_) Liveness();
      tracking_ = !exact_;  // live results serve the periodicity check and extrapolation only
      Walk(0, core().segments.size());
    }
    return error_;
  }

  int64_t makespan() const { return makespan_; }
  const CoreProgram& core() const { return *core_ptr_; }
  const std::vector<Cost>& costs() const { return *costs_ptr_; }
  const std::vector<int64_t>& dma_busy() const { return dma_busy_; }

 private:
  template <bool kCompact>
  [[gnu::always_inline]] inline void Step(uint32_t t) {
    const Cost& c = costs()[t];
    const Instruction& inst = core().instructions[t];
    const int64_t pos = pos_;
    int64_t ready = 0;
    bool dep_on_prev = false;
    int64_t prev_result = 0;
    const int64_t prev = c.engine < 4 ? last_[int(c.engine)] : -1;
    for (const int32_t& d : core().DepsOf(int32_t(t))) {
      // Flat: absolute index; compact: distance (> 0) or anchor (< 0: from the frame's pins, or
      // strided, pin slot -1: from the ring).
      int32_t slot = 0;
      const int64_t* pins = nullptr;
      int64_t dp;
      if (!kCompact) {
        dp = d;
      } else if (d > 0) {
        dp = pos - d;
      } else {
        const size_t j = size_t(&d - core().deps.data());
        slot = pin_slot_[j];
        if (slot < 0) {
          dp = pin_base_ + d + iter_ * core().anchor_forms[j].stride;
        } else if (pin_up_[j] == 0) {
          pins = pin_;
          dp = pin_base_ + d;
        } else {  // pinned by an enclosing repeat
          const int f = frame_ - 1 - pin_up_[j];
          pins = pins_[size_t(f)].data();
          dp = frame_base_[size_t(f)] + d;
        }
      }
      if (dp < 0 || (kCompact && d < 0 && frame_ == 0)) {
        error_ = absl::InvalidArgumentError(
            StrCat("instruction ", pos, ": dependency points before the start of the core"));
        continue;
      }
      const int64_t v = kCompact && d < 0 && slot >= 0 ? pins[slot] : ring_[dp & mask_];
      ready = std::max(ready, v);
      if (dp == prev) {
        dep_on_prev = true;
        prev_result = v;
      }
    }
    int64_t result;
    if (c.engine < 4) {
      const int e = c.engine;
      int64_t start = std::max(ready, free_[e]);
      if (dep_on_prev) start = std::max(start, prev_result + penalty_[e]);
      if (c.reload) {
        const int64_t load_end = std::max({ready, lms_, lle_}) + c.load;
        start = std::max(start, load_end);
        lle_ = load_end;
      }
      if (c.vg) start = std::max(start, port_vg_);
      if (c.vs) start = std::max(start, port_vs_);
      const int64_t finish = start + c.dur;
      if (c.matmul) lms_ = start;
      if (c.vg) port_vg_ = finish;
      if (c.vs) port_vs_ = finish;
      free_[e] = finish;
      last_[e] = pos;
      result = finish + c.extra;
      if (trace_ && pos < trace_limit_) {
        trace_->push_back({core_index_, e, int32_t(pos), start, finish, double(finish - start)});
      }
    } else {
      const int q = c.queue;
      // The queue generates this transfer's descriptors (the fixed cost), then its pieces move
      // data on the engines while the queue goes on to the next transfer's descriptors.
      const int64_t tick = std::max(ready, issue_[q]) + fixed_ticks_;
      issue_[q] = tick;
      int64_t* vf = &vfree_[size_t(q) * ne_];  // sorted ascending
      int64_t finish = 0, first = std::numeric_limits<int64_t>::max();
      int64_t ends[64];
      bool sorted = true;  // usual: starts and piece lengths grow with p
      // The queue's HBM free time and busy ticks in locals (the compiler cannot tell that the
      // pieces' stores do not alias them).
      int64_t hbm_free = hbm_free_[q], busy = 0;
      int64_t hbm_full = hbm_free;  // this transfer's pieces through the HBM at the full rate
      // A piece moves its data at the full rates of its engine and of the HBM (an idle engine
      // serves whichever queue waits); the queue is charged that data at its shares, which is how
      // soon its next pieces may follow, so a queue streams at its share.
      for (int p = 0; p < c.pieces; ++p) {
        const bool lo = p < c.n_lo;
        const int64_t start = std::max(tick, vf[p]);
        first = std::min(first, start);
        int64_t end = start + (lo ? c.eng_full_lo : c.eng_full_hi);
        int64_t charged = start + (lo ? c.eng_lo : c.eng_hi);
        if (c.hbm) {
          hbm_free = std::max(start, hbm_free) + (lo ? c.hbm_lo : c.hbm_hi);
          hbm_full = std::max(start, hbm_full) + (lo ? c.hbm_full_lo : c.hbm_full_hi);
          end = std::max(end, hbm_full);
        }
        charged = std::max(charged, end);
        sorted &= p == 0 || charged >= ends[p - 1];
        ends[p] = charged;
        busy += charged - start;
        finish = std::max(finish, end);
      }
      hbm_free_[q] = hbm_free;
      dma_busy_[q] += busy;
      // Merge the new free times back into the sorted list. Usually they are ascending and come
      // before the engines the pieces did not use: the list starts with them as they are.
      if (sorted && (c.pieces == 0 || c.pieces == ne_ || ends[c.pieces - 1] <= vf[c.pieces])) {
        std::copy(ends, ends + c.pieces, vf);
      } else if (sorted && ends[0] >= vf[ne_ - 1]) {
        // Or all after them: those move to the front.
        std::copy(vf + c.pieces, vf + ne_, vf);
        std::copy(ends, ends + c.pieces, vf + (ne_ - c.pieces));
      } else {
        if (!sorted) std::sort(ends, ends + c.pieces);
        int64_t merged[64];
        int a = 0, b = c.pieces, o = 0;
        while (a < c.pieces || b < ne_) {
          if (b >= ne_ || (a < c.pieces && ends[a] <= vf[b])) {
            merged[o++] = ends[a++];
          } else {
            merged[o++] = vf[b++];
          }
        }
        std::copy(merged, merged + ne_, vf);
      }
      result = finish;
      if (trace_ && pos < trace_limit_) {
        trace_->push_back({core_index_, 4 + q, int32_t(pos), first, finish, double(busy)});
      }
    }
    (void)inst;
    ring_[pos & mask_] = result;
    makespan_ = std::max(makespan_, result);
    if (tracking_ && maxread_[t] > 0) {
      inflight_.push_back({pos, pos + maxread_[t]});
      // Outside repeats nothing prunes: drop what is beyond every dependency's reach (amortised;
      // the list is sorted).
      if (int64_t(inflight_.size()) > 2 * window_ + 64) {
        inflight_.erase(inflight_.begin(), FirstInFlightFrom(pos_ - window_));
      }
    }
    ++pos_;
  }

  // Per-repeat resource usage and body lengths.
  void Prepare() {
    const auto& segs = core().segments;
    // Grown only, never shrunk: entries keep their vectors' capacity from program to program.
    if (rep_.size() < segs.size()) rep_.resize(segs.size());
    strided_window_ = 0;
    for (size_t i = 0; i < segs.size(); ++i) {
      RepInfo& r = rep_[i];
      r.body_len = r.reach = r.anchor_reach = 0;
      r.reads_before_entry = false;
      r.engines = 0;
      r.queues = 0;
      r.anchors.clear();
      r.strided.clear();
      r.outer.clear();
      r.matmul = r.reload = r.vg = r.vs = false;
    }
    std::vector<size_t>& stack = stack_;
    stack.clear();
    size_t max_depth = 0;
    for (size_t i = 0; i < segs.size(); ++i) {
      const Segment& s = segs[i];
      if (s.kind == Segment::kBegin) {
        stack.push_back(i);
        max_depth = std::max(max_depth, stack.size());
      } else if (s.kind == Segment::kEnd) {
        const size_t b = stack.back();
        stack.pop_back();
        RepInfo& done = rep_[b];
        std::sort(done.anchors.begin(), done.anchors.end());
        done.anchors.erase(std::unique(done.anchors.begin(), done.anchors.end()),
                           done.anchors.end());
        // The ring must hold what a strided dependency reads, up to its last iteration, and
        // the reads of the p <= 2 iterations before a boundary (RunIterations compares them).
        for (const RepInfo::Strided& x : done.strided) {
          const int64_t n = segs[b].count, len = done.body_len;
          strided_window_ =
              std::max(strided_window_, x.a + x.off + std::max<int64_t>(0, (n - 1) * (len - x.s)) +
                                            2 * std::max(len, x.s));
        }
        if (!stack.empty()) {
          RepInfo& outer = rep_[stack.back()];
          const RepInfo& inner = rep_[b];
          outer.reach = std::max({outer.reach, inner.reach, inner.anchor_reach});
          outer.body_len += inner.body_len * segs[b].count;
          outer.engines |= inner.engines;
          outer.queues |= inner.queues;
          outer.matmul |= inner.matmul;
          outer.reload |= inner.reload;
          outer.vg |= inner.vg;
          outer.vs |= inner.vs;
        }
        if (levels_.size() < max_depth) {  // grown only, as rep_
          levels_.resize(max_depth);
          pins_.resize(max_depth);
          frame_base_.resize(max_depth);
        }
      } else if (!stack.empty()) {
        RepInfo& r = rep_[stack.back()];
        for (uint32_t t = s.begin; t < s.end; ++t) {
          const Instruction& inst = core().instructions[t];
          for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
            const int32_t d = core().deps[j];
            if (d > 0) r.reach = std::max<int64_t>(r.reach, d);
            if (d >= 0) continue;
            r.anchor_reach = std::max<int64_t>(r.anchor_reach, -d);
            const AnchorForm form = core().FormOf(j);
            // Every repeat from this one out to the one the anchor counts from reads it.
            for (int32_t k = 0; k <= form.up; ++k) {
              rep_[stack[stack.size() - 1 - size_t(k)]].reads_before_entry = true;
            }
            if (form.stride != 0) {
              r.strided.push_back({j, -int64_t(d), form.stride, r.body_len + (t - s.begin)});
            } else {  // pinned by the repeat `up` levels out
              rep_[stack[stack.size() - 1 - size_t(form.up)]].anchors.push_back(-d);
            }
          }
          const Cost& c = costs()[t];
          if (c.engine < 4) {
            r.engines |= 1u << c.engine;
          } else {
            r.queues |= uint64_t(1) << c.queue;
          }
          r.matmul |= c.matmul;
          r.reload |= c.reload;
          r.vg |= c.vg;
          r.vs |= c.vs;
        }
        r.body_len += int64_t(s.end) - s.begin;
      }
    }
  }

  // Liveness: for every template, the longest distance at which any instruction (or repeat entry,
  // for anchored dependencies) reads one of its results, found by resolving each dependency to the
  // templates it can name in the loop structure. In-flight tracking, canonical states and
  // extrapolated result windows then cover only results that are read again. If resolving would
  // take too long (huge distances over many small iterations), every template is assumed read up
  // to the window.
  void Liveness() {
    const auto& segs = core().segments;
    const size_t ns = segs.size();
    seg_off_.assign(ns, 0);
    seg_parent_.assign(ns, -1);
    if (bodies_.size() < ns + 1) bodies_.resize(ns + 1);
    for (size_t b = 0; b <= ns; ++b) bodies_[b].clear();
    std::vector<int32_t>& stack = body_stack_;
    stack.clear();
    std::vector<int64_t>& off = body_off_;  // running offset in each open body
    off.assign(1, 0);
    for (size_t i = 0; i < ns; ++i) {
      const Segment& s = segs[i];
      if (s.kind == Segment::kEnd) {
        stack.pop_back();
        off.pop_back();
        continue;
      }
      const int32_t parent = stack.empty() ? -1 : stack.back();
      seg_parent_[i] = parent;
      seg_off_[i] = off.back();
      const int64_t len =
          s.kind == Segment::kBegin ? s.count * rep_[i].body_len : int64_t(s.end) - s.begin;
      if (len > 0) bodies_[parent < 0 ? ns : size_t(parent)].push_back(uint32_t(i));
      off.back() += len;
      if (s.kind == Segment::kBegin) {
        stack.push_back(int32_t(i));
        off.push_back(0);
      }
    }
    maxread_.assign(core().instructions.size(), 0);
    resolve_budget_ = 8 * int64_t(core().deps.size()) + 4096;
    bool ok = true;
    for (size_t i = 0; i < ns && ok; ++i) {
      const Segment& s = segs[i];
      if (s.kind != Segment::kInstructions) continue;
      for (uint32_t u = s.begin; u < s.end && ok; ++u) {
        const Instruction& inst = core().instructions[u];
        for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count && ok; ++j) {
          const int32_t d = core().deps[j];
          if (d > 0 && int64_t(u - s.begin) >= d) {  // same segment, same visit
            maxread_[u - uint32_t(d)] = std::max<int64_t>(maxread_[u - uint32_t(d)], d);
          } else if (d > 0) {
            ok = Resolve(seg_parent_[i], seg_off_[i] + (u - s.begin), d, d);
          } else if (seg_parent_[i] >= 0 && core().StrideOf(j) == 0) {
            // Anchored: read (pinned) at the entry of its repeat, `up` levels out.
            int32_t r = seg_parent_[i];
            for (int32_t up = core().FormOf(j).up; up > 0 && r >= 0; --up) r = seg_parent_[r];
            if (r >= 0) ok = Resolve(seg_parent_[r], seg_off_[r], -int64_t(d), -int64_t(d));
          } else if (seg_parent_[i] >= 0) {
            // Strided: iteration k reads -d - k * stride before the entry, from offset `off` of
            // the body.
            const int32_t r = seg_parent_[i];
            const int64_t stride = core().StrideOf(j), len = rep_[r].body_len;
            const int64_t off = seg_off_[i] + (u - s.begin);
            for (int64_t k = 0; k < core().segments[r].count && ok; ++k) {
              ok = Resolve(seg_parent_[r], seg_off_[r], -int64_t(d) - k * stride,
                           -int64_t(d) + k * (len - stride) + off);
            }
          }
        }
      }
    }
    if (!ok) std::fill(maxread_.begin(), maxread_.end(), window_);
  }

  // The template at offset `rel` (>= 0, inside) of one iteration of body `body` (-1: the top).
  uint32_t TemplateAt(int32_t body, int64_t rel) const {
    const auto& segs = core().segments;
    for (;;) {
      const std::vector<uint32_t>& items = bodies_[body < 0 ? segs.size() : size_t(body)];
      auto it = std::upper_bound(items.begin(), items.end(), rel,
                                 [&](int64_t r, uint32_t i) { return r < seg_off_[i]; });
      const uint32_t i = *(it - 1);
      rel -= seg_off_[i];
      if (segs[i].kind == Segment::kInstructions) return segs[i].begin + uint32_t(rel);
      body = int32_t(i);
      rel %= rep_[i].body_len;
    }
  }

  // Records that the instruction at `offset` of body `body` reads `d` positions back (a read at
  // distance `dist` overall) in every template that position can be, over all iterations of the
  // enclosing repeats. False when the budget ran out.
  // Its first case (an earlier position of the same body, the usual one) is inlined where it is
  // called; the rest is ResolveBeforeBody.
  [[gnu::always_inline]] inline bool Resolve(int32_t body, int64_t offset, int64_t d,
                                             int64_t dist) {
    if (--resolve_budget_ < 0) return false;
    const int64_t rel = offset - d;
    if (rel < 0) return ResolveBeforeBody(body, rel, dist);
    int64_t& m = maxread_[TemplateAt(body, rel)];
    m = std::max(m, dist);
    return true;
  }
  // Resolve for a read `rel` (< 0) positions before the start of body `body`.
  bool ResolveBeforeBody(int32_t body, int64_t rel, int64_t dist) {
    if (body < 0) return true;  // before the start of the core: Step reports it
    const int64_t len = rep_[body].body_len, n = core().segments[body].count;
    // Iteration j reads offset j * len + rel of the repeat: inside it from j0 on.
    const int64_t j0 = CeilDiv(-rel, len);
    if (j0 < n) {
      int64_t& m = maxread_[TemplateAt(body, ((rel % len) + len) % len)];
      m = std::max(m, dist);
    }
    for (int64_t j = 0; j < std::min(j0, n); ++j) {
      if (!Resolve(seg_parent_[body], seg_off_[body], -(j * len + rel), dist)) return false;
    }
    return true;
  }

  // The pin slot of every anchored dependency: its anchor's index in its repeat's anchors.
  void AssignPinSlots() {
    pin_slot_.assign(core().deps.size(), 0);
    pin_up_.assign(core().deps.size(), 0);
    std::vector<size_t>& stack = stack_;
    stack.clear();
    for (size_t i = 0; i < core().segments.size(); ++i) {
      const Segment& s = core().segments[i];
      if (s.kind == Segment::kBegin) {
        stack.push_back(i);
      } else if (s.kind == Segment::kEnd) {
        stack.pop_back();
      } else if (!stack.empty()) {
        const std::vector<int32_t>& anchors = rep_[stack.back()].anchors;
        for (uint32_t t = s.begin; t < s.end; ++t) {
          const Instruction& inst = core().instructions[t];
          for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
            if (core().deps[j] >= 0) continue;
            const AnchorForm form = core().FormOf(j);
            if (form.stride != 0) {  // not pinned: read from the ring
              pin_slot_[j] = -1;
              continue;
            }
            const std::vector<int32_t>& pinned =
                form.up == 0 ? anchors : rep_[stack[stack.size() - 1 - size_t(form.up)]].anchors;
            pin_slot_[j] = int32_t(std::lower_bound(pinned.begin(), pinned.end(), -core().deps[j]) -
                                   pinned.begin());
            pin_up_[j] = form.up;
            // The repeats inside the pinning one see the pin as a fixed input (Canon).
            for (int32_t k = 0; k < form.up; ++k) {
              rep_[stack[stack.size() - 1 - size_t(k)]].outer.push_back(
                  {form.up - k, pin_slot_[j]});
            }
          }
        }
      }
    }
  }

  void Walk(size_t first, size_t last) {
    const auto& segs = core().segments;
    for (size_t i = first; i < last; ++i) {
      const Segment& s = segs[i];
      if (s.kind == Segment::kInstructions) {
        for (uint32_t t = s.begin; t < s.end; ++t) Step<true>(t);
      } else if (s.kind == Segment::kBegin) {
        RunRepeat(i);
        i = s.match;
      }
    }
  }

  // The lower bound L of a body: every later use of a dependency's result or of a DMA queue's
  // engine/HBM free time is inside a max with one of these, all non-decreasing.
  int64_t Bound(const RepInfo& r) const {
    int64_t l = std::numeric_limits<int64_t>::max();
    for (int e = 0; e < 4; ++e) {
      if (r.engines >> e & 1) l = std::min(l, free_[e]);
    }
    for (int q = 0; q < nq_; ++q) {
      if (r.queues >> q & 1) l = std::min(l, issue_[q]);
    }
    if (r.matmul) l = std::min(l, lms_);
    return l == std::numeric_limits<int64_t>::max() ? 0 : l;
  }

  // The state at a boundary, with every time relative to L and values at or below L (which can
  // no longer influence the body) clamped to 0. Equal vectors at two boundaries mean the body's
  // schedule repeats shifted in time.
  //
  // Anchored dependencies read the repeat's pins, which do not shift: a boundary whose pins are
  // not all at or below L is reported unsettled (no extrapolation from it), and whether an
  // engine's last instruction lies before the entry is part of the state (an anchored or strided
  // dependency on it pays the same-engine penalty). Strided dependencies read results that do not
  // shift either; RunIterations checks them (StridedPeriods).
  bool Canon(const RepInfo& r, int64_t l, std::vector<int64_t>* out) {
    out->clear();
    const int64_t far = window_ + 1;
    for (int e = 0; e < 4; ++e) {
      if (!(r.engines >> e & 1)) continue;
      out->push_back(free_[e] - l);
      out->push_back(last_[e] < 0 ? far : std::min(far, pos_ - last_[e]));
      if (r.reads_before_entry) out->push_back(last_[e] >= 0 && last_[e] < pin_base_);
    }
    bool settled = true;
    for (size_t a = 0; a < r.anchors.size(); ++a) settled &= pin_[a] <= l;
    for (const RepInfo::OuterPin& o : r.outer)
      settled &= pins_[size_t(frame_ - 1 - o.up)][size_t(o.slot)] <= l;
    if (r.matmul) out->push_back(lms_ - l);
    if (r.reload) out->push_back(lle_ - l);
    if (r.vg) out->push_back(std::max<int64_t>(0, port_vg_ - l));
    if (r.vs) out->push_back(std::max<int64_t>(0, port_vs_ - l));
    for (int q = 0; q < nq_; ++q) {
      if (!(r.queues >> q & 1)) continue;
      out->push_back(issue_[q] - l);
      out->push_back(std::max<int64_t>(0, hbm_free_[q] - l));
      const int64_t* vf = &vfree_[size_t(q) * ne_];
      for (int e = 0; e < ne_; ++e) out->push_back(std::max<int64_t>(0, vf[e] - l));
    }
    out->push_back(-1);
    // inflight_ is sorted: only the tail is in this body's reach.
    for (auto it = FirstInFlightFrom(pos_ - r.reach); it != inflight_.end(); ++it) {
      if (it->until < pos_) continue;
      const int64_t v = ring_[it->pos & mask_];
      if (v > l) {
        out->push_back(pos_ - it->pos);
        out->push_back(v - l);
      }
    }
    return settled;
  }

  // Drops in-flight entries whose results are never read again.
  void Prune() {
    size_t o = 0;
    for (const InFlight& x : inflight_) {
      if (x.until >= pos_) inflight_[o++] = x;
    }
    inflight_.resize(o);
  }

  // Runs the repeat at segment i: pins the results its anchored dependencies name, then the
  // iterations (RunIterations).
  void RunRepeat(size_t i) {
    const RepInfo& info = rep_[i];
    const int64_t* saved_pin = pin_;
    const int64_t saved_base = pin_base_;
    std::vector<int64_t>& pins = pins_[frame_];
    pins.resize(info.anchors.size());
    for (size_t a = 0; a < info.anchors.size(); ++a) {
      const int64_t x = pos_ - info.anchors[a];
      // A negative position is reported by Step when an instruction uses it.
      pins[a] = x >= 0 ? ring_[x & mask_] : 0;
    }
    pin_ = pins.data();
    pin_base_ = pos_;
    frame_base_[size_t(frame_)] = pos_;
    const int64_t saved_iter = iter_;
    ++frame_;
    RunIterations(i);
    --frame_;
    pin_ = saved_pin;
    pin_base_ = saved_base;
    iter_ = saved_iter;
  }

  void RunIterations(size_t i) {
    const Segment& seg = core().segments[i];
    const int64_t n = seg.count;
    const RepInfo& info = rep_[i];
    if (exact_ || n < 3 || !error_.ok()) {
      for (iter_ = 0; iter_ < n; ++iter_) Walk(i + 1, seg.match);
      return;
    }
    Level& lv = levels_[depth_];
    ++depth_;
    int64_t r = 0;
    bool skipped = false;
    while (r < n) {
      if (!skipped) {
        const int64_t l = Bound(info);
        // Prune at the top's boundaries and whenever the list has doubled, so it stays
        // amortised O(1) per step.
        if (inflight_.size() > 2 * pruned_size_ + 64) {
          Prune();
          pruned_size_ = inflight_.size();
        }
        const int slot = int(r % 3);
        const bool settled = Canon(info, l, &lv.canon[slot]);
        lv.lval[slot] = l;
        lv.pos[slot] = pos_;
        lv.makespan[slot] = makespan_;
        lv.dma_busy[slot] = dma_busy_;
        for (int p = 1; p <= 2 && p <= r && settled; ++p) {
          const int ps = int((r - p) % 3);
          if (lv.canon[ps] != lv.canon[slot]) continue;
          const int64_t delta = l - lv.lval[ps];
          if (makespan_ - lv.makespan[ps] != delta || delta < 0) continue;
          int64_t k = (n - r) / p;
          if (k < 1) break;
          if (!info.strided.empty()) k = StridedPeriods(info, r, p, k, l, delta);
          if (k < 1) continue;
          Skip(info, k, p, delta, lv.dma_busy[ps]);
          r += k * p;
          skipped = true;
          break;
        }
        if (r >= n) break;
      }
      iter_ = r;
      Walk(i + 1, seg.match);
      ++r;
    }
    --depth_;
  }

  // How many of the next `k` periods of p iterations, from boundary r (lower bound l, `delta`
  // ticks per period), read through the repeat's strided dependencies what the period before
  // read, shifted by delta. With equal states at the two boundaries (Canon), iterations whose
  // inputs also repeat so repeat the schedule. An input at or below its period's lower bound
  // cannot influence it (see Bound), so only its excess over that bound must match. Canon tells
  // the entry's boundary (engines' last instructions before the entry, RepInfo::reads_before_entry)
  // from the others, so r - p >= 1: every last instruction is in the body, never a strided
  // dependency's target, and no same-engine penalty differs.
  int64_t StridedPeriods(const RepInfo& info, int64_t r, int p, int64_t k, int64_t l,
                         int64_t delta) const {
    for (int64_t j = r; j < r + k * p; ++j) {
      const int64_t bound = l + (j - r) / p * delta;  // of j's period; j - p's is delta lower
      for (const RepInfo::Strided& x : info.strided) {
        const int64_t now = ring_[(pin_base_ - x.a + j * x.s) & mask_];
        const int64_t then = ring_[(pin_base_ - x.a + (j - p) * x.s) & mask_];
        if (std::max<int64_t>(0, now - bound) != std::max<int64_t>(0, then - (bound - delta))) {
          return (j - r) / p;
        }
      }
    }
    return k;
  }

  // Extrapolates k periods of p iterations each: the schedule of iteration r + j*p is that of
  // iteration r shifted by j * delta ticks.
  void Skip(const RepInfo& info, int64_t k, int p, int64_t delta,
            const std::vector<int64_t>& busy_then) {
    const int64_t period_len = info.body_len * p;
    const int64_t shift_pos = k * period_len;
    const int64_t shift_t = k * delta;
    // Results: a position read after the skip repeats a live result of the last simulated period
    // (src) j periods later, j <= k; only those still live at the new end are written.
    const int64_t new_pos = pos_ + shift_pos;
    live_src_.clear();
    for (auto it = FirstInFlightFrom(pos_ - period_len); it != inflight_.end(); ++it) {
      if (it->until >= pos_) live_src_.push_back({it->pos, ring_[it->pos & mask_], it->until});
    }
    // Live at new_pos after j periods: until + j * period_len >= new_pos.
    auto first_period = [&](const LiveResult& src) {
      return std::max<int64_t>(1, k - (src.until - pos_) / period_len);
    };
    // The new entries are appended in position order, so inflight_ stays sorted (they all lie
    // after the old ones): period j's entries (src.pos + j * period_len, src in position order)
    // before period j + 1's. Each period's block starts where the earlier periods' entries end.
    int64_t j_min = k + 1;
    for (const LiveResult& src : live_src_) j_min = std::min(j_min, first_period(src));
    if (j_min <= k) {
      std::vector<int64_t>& at = period_at_;  // per period from j_min: its next slot
      at.assign(size_t(k - j_min + 1), 0);
      for (const LiveResult& src : live_src_) ++at[size_t(first_period(src) - j_min)];
      int64_t active = 0, next = int64_t(inflight_.size());
      for (int64_t& slot : at) {
        active += slot;  // sources live in this period
        slot = next;
        next += active;
      }
      inflight_.resize(size_t(next));
      for (const LiveResult& src : live_src_) {
        for (int64_t j = first_period(src); j <= k; ++j) {
          const int64_t y = src.pos + j * period_len;
          ring_[y & mask_] = src.value + j * delta;
          inflight_[size_t(at[size_t(j - j_min)]++)] = {y, src.until + j * period_len};
        }
      }
    }
    for (int e = 0; e < 4; ++e) {
      if (!(info.engines >> e & 1)) continue;
      free_[e] += shift_t;
      last_[e] += shift_pos;
    }
    if (info.matmul) lms_ += shift_t;
    if (info.reload) lle_ += shift_t;
    if (info.vg) port_vg_ += shift_t;
    if (info.vs) port_vs_ += shift_t;
    for (int q = 0; q < nq_; ++q) {
      if (!(info.queues >> q & 1)) continue;
      issue_[q] += shift_t;
      hbm_free_[q] += shift_t;
      int64_t* vf = &vfree_[size_t(q) * ne_];
      for (int e = 0; e < ne_; ++e) vf[e] += shift_t;
      dma_busy_[q] += k * (dma_busy_[q] - busy_then[q]);
    }
    makespan_ += shift_t;
    pos_ = new_pos;
  }

 public:
  std::vector<TraceEvent>* trace_ = nullptr;
  int64_t trace_limit_ = 0;
  int core_index_ = 0;
  int64_t fixed_ticks_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;  // CoreRun::cancel

 private:
  const CoreProgram* core_ptr_ = nullptr;
  const std::vector<Cost>* costs_ptr_ = nullptr;
  bool exact_ = false;
  std::vector<size_t> stack_;  // scratch of Prepare and AssignPinSlots
  std::vector<int32_t> body_stack_;
  std::vector<int64_t> body_off_;
  int nq_ = 0, ne_ = 0;
  int64_t penalty_[4];
  int64_t free_[4] = {0, 0, 0, 0};
  int64_t last_[4] = {-1, -1, -1, -1};
  int64_t lms_ = 0, lle_ = 0, port_vg_ = 0, port_vs_ = 0;
  std::vector<int64_t> issue_, hbm_free_, vfree_, dma_busy_;
  std::vector<int64_t> ring_;  // result of flat position x at x & mask_
  int64_t mask_ = 0, window_ = 0, pos_ = 0, makespan_ = 0;
  std::vector<RepInfo> rep_;
  std::vector<Level> levels_;
  int depth_ = 0;
  // Pins of the active repeats (one vector per nesting depth, reused), the innermost's results
  // and entry position.
  std::vector<std::vector<int64_t>> pins_;
  int frame_ = 0;
  std::vector<int32_t> pin_slot_;    // per entry of core().deps (anchored ones; -1: strided)
  std::vector<int32_t> pin_up_;      // and how many repeats out its pin is
  std::vector<int64_t> frame_base_;  // per active repeat (frame), its entry position
  size_t pruned_size_ = 0;
  const int64_t* pin_ = nullptr;
  int64_t pin_base_ = 0;
  int64_t iter_ = 0;            // the innermost active repeat's iteration (strided dependencies)
  int64_t strided_window_ = 0;  // how far back strided dependencies read (Prepare)
  bool tracking_ = false;
  // In-flight results: ascending positions whose results may still be read, each with the last
  // position that may read it (dead ones, until < pos_, not yet pruned).
  struct InFlight {
    int64_t pos, until;
  };
  std::vector<InFlight> inflight_;
  // The first in-flight entry at or after position `pos`.
  std::vector<InFlight>::iterator FirstInFlightFrom(int64_t pos) {
    return std::lower_bound(inflight_.begin(), inflight_.end(), pos,
                            [](const InFlight& a, int64_t p) { return a.pos < p; });
  }
  struct LiveResult {
    int64_t pos, value, until;
  };
  std::vector<LiveResult> live_src_;  // Skip's scratch
  std::vector<int64_t> period_at_;    // Skip's scratch
  // Liveness: the longest distance at which each template's results are read (0: never).
  std::vector<int64_t> maxread_;
  // The segment tree for Liveness: per segment, its offset in its enclosing body and that body's
  // kBegin (-1: the top level); per body, its non-empty children (bodies_.back(): the top level).
  std::vector<int64_t> seg_off_;
  std::vector<int32_t> seg_parent_;
  std::vector<std::vector<uint32_t>> bodies_;
  int64_t resolve_budget_ = 0;
  absl::Status error_;
};

}  // namespace

class CoreSimulator::Impl : public CoreSim {};

CoreSimulator::CoreSimulator() : impl_(std::make_unique<Impl>()) {}
CoreSimulator::~CoreSimulator() = default;

absl::Status CoreSimulator::Run(const Target& target, const CoreProgram& core,
                                const std::vector<Cost>& costs, const CoreRun& run) {
  impl_->Reset(target, core, costs, run.exact);
  impl_->trace_ = run.trace;
  impl_->trace_limit_ = run.trace_limit;
  impl_->core_index_ = run.core_index;
  impl_->fixed_ticks_ = run.fixed_ticks;
  impl_->cancel_ = run.cancel;
  return impl_->Run();
}

int64_t CoreSimulator::makespan() const { return impl_->makespan(); }
const std::vector<int64_t>& CoreSimulator::dma_busy() const { return impl_->dma_busy(); }

}  // namespace tessel::sim
