// The attention kernel's step stream: Generate walks a plan's schedule in program order and tells
// an emitter each step. The simulator emitter (attention_sim.cc) and the CPU emitter
// (attention_cpu.cc) both consume it, so the lowering and Verify run the same tiles, tails,
// skipping, softmax steps, accumulation order and sharding. Internal to the attention kernel.
#ifndef TESSEL_KERNELS_ATTENTION_SCHEDULE_H_
#define TESSEL_KERNELS_ATTENTION_SCHEDULE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention_plan.h"

namespace tessel::kernels::attention_internal {

// One score tile of a softmax step.
struct KvTile {
  int64_t index = 0;  // key tile index
  int64_t j0 = 0, size = 0;
  bool masked = false;  // some (query, key) pair of the tile is masked
};

// Walks the plan's schedule in program order and tells `e` each step. Shared by the lowering and
// the CPU execution in Verify, so both run the same tiles, tails, skipping, softmax steps,
// accumulation order and sharding.
//
// Query tiles run in groups of q_group, their steps interleaved so that the engines always have
// independent work; each member keeps its own running statistics. The softmax steps of a head's
// groups form one stream that the pipeline walks: with pipeline > 0 the first step of the next
// group starts before the last step of the previous one finishes, so two groups' members can be
// live at once (member slots: group parity x q_group + member).
//
// A core's heads run through e.Heads(lo, hi, head) (head(h) emits head h; an emitter may call it
// for some heads only when it knows the rest emit alike, as the compact lowering does), and a core
// whose head count equals the previous core's is offered to e.CopyCore(core) first (true: copied,
// skip it).
template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  int64_t kv_tiles = p.kv_tiles;
  if (Fault() == AttentionFault::kDropRaggedKvTile && p.sk % p.kv_tile != 0 && kv_tiles > 1) {
    --kv_tiles;
  }
  struct Group {
    int members = 0;
    std::vector<int64_t> i0, qsz;
  };
  // Every step's key tiles, member after member, in one array: a step holds where its members'
  // tiles start (so steps copy without allocating).
  std::vector<KvTile> pool;
  struct Step {
    size_t group = 0;
    int64_t kb = 0;
    std::array<uint32_t, kMaxQGroup + 1> at{};  // member g's tiles: pool[at[g], at[g + 1])
    bool first = false, last = false;           // the group's first / last step
    // softmax=two_pass: 1 = the max pass (scores, row max), 2 = the exp pass (scores, exp, P^T,
    // PV); 0 = online softmax (all of it). exp_first: the group's first step of pass 2.
    int pass = 0;
    bool exp_first = false;
  };
  // The groups and their softmax steps, the same for every head (built once): per step, each
  // member's key tiles (causal skipping may leave a member, or the whole step, without any).
  std::vector<Group> groups;
  std::vector<Step> steps;
  for (int64_t qg = 0; qg < p.q_tiles; qg += p.q_group) {
    if (p.group_stride > 1 && qg / p.q_group % p.group_stride != p.group_stride / 2) continue;
    Group grp;
    grp.members = int(std::min(p.q_group, p.q_tiles - qg));
    for (int g = 0; g < grp.members; ++g) {
      grp.i0.push_back((qg + g) * p.bq);
      grp.qsz.push_back(std::min(p.bq, p.sq - grp.i0.back()));
    }
    const size_t first_step = steps.size();
    for (int64_t kb = 0; kb < p.kv_blocks; ++kb) {
      Step st{groups.size(), kb};
      bool any = false;
      for (int g = 0; g < grp.members; ++g) {
        st.at[size_t(g)] = uint32_t(pool.size());
        for (int64_t t = kb * p.kv_block; t < std::min(kv_tiles, (kb + 1) * p.kv_block); ++t) {
          KvTile tile{t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile), false};
          if (p.causal) {
            const int64_t last_row_sees = grp.i0[g] + grp.qsz[g] - 1 + p.offset();
            const int64_t first_row_sees = grp.i0[g] + p.offset();
            bool all_masked = tile.j0 > last_row_sees;
            if (Fault() == AttentionFault::kCausalSkipOffByOne) {
              all_masked = tile.j0 > first_row_sees;
            }
            if (all_masked && p.skip) continue;
            // Skipping also drops the tile's columns that no query of the member sees.
            if (p.skip) tile.size = std::min(tile.size, last_row_sees - tile.j0 + 1);
            tile.masked = tile.j0 + tile.size - 1 > first_row_sees;
          }
          pool.push_back(tile);
          any = true;
        }
      }
      st.at[size_t(grp.members)] = uint32_t(pool.size());
      if (any) steps.push_back(st);
    }
    // Every query sees key 0, so every group has at least one step.
    steps[first_step].first = true;
    if (p.two_pass) {
      // The max pass, then the same steps again as the exp pass.
      const size_t n = steps.size() - first_step;
      for (size_t x = 0; x < n; ++x) {
        steps.push_back(steps[first_step + x]);
        steps[first_step + x].pass = 1;
        steps.back().pass = 2;
        steps.back().first = false;
      }
      steps[first_step + n].exp_first = true;
    }
    steps.back().last = true;
    groups.push_back(std::move(grp));
  }
  if (p.two_pass) {
    // The stream alternates group g's exp pass with group g + 1's max pass, so that the
    // engines of one (TensorE, ScalarE, P^T) and of the other (TensorE, VectorE) overlap.
    std::vector<Step> order;
    order.reserve(steps.size());
    size_t at = 0;  // start of the current group's steps (its max pass, then its exp pass)
    auto half = [&](size_t start) {
      size_t n = 0;
      while (start + n < steps.size() && steps[start + n].pass == 1) ++n;
      return n;
    };
    size_t n = half(0);
    for (size_t x = 0; x < n; ++x) order.push_back(steps[x]);
    while (at < steps.size()) {
      const size_t next = at + 2 * n;  // the next group's first step
      const size_t n_next = next < steps.size() ? half(next) : 0;
      for (size_t x = 0; x < std::max(n, n_next); ++x) {
        if (x < n) order.push_back(steps[at + n + x]);
        if (x < n_next) order.push_back(steps[next + x]);
      }
      at = next;
      n = n_next;
    }
    steps = std::move(order);
  }
  // Member g's key tiles in step st.
  auto tiles = [&pool](const Step& st, int g) {
    return std::span<const KvTile>(pool.data() + st.at[size_t(g)],
                                   st.at[size_t(g) + 1] - st.at[size_t(g)]);
  };
  std::vector<char> needed(size_t(p.kv_block), 0);  // key tiles a step reads (not resident)
  // Per member slot (group parity x q_group + member): its first step's mid and back not yet
  // emitted in this head.
  std::vector<char> first_mid(size_t(2 * p.q_group), 1), first_back(size_t(2 * p.q_group), 1);
  int64_t previous_heads = -1;
  for (int core = 0; core < p.shards; ++core) {
    const int64_t lo = p.bh * core / p.shards, hi = p.bh * (core + 1) / p.shards;
    // A core with as many heads as the one before it runs the same program (every head's steps
    // are alike): an emitter may copy it.
    if (hi - lo == previous_heads && e.CopyCore(core)) continue;
    previous_heads = hi - lo;
    e.BeginCore(core);
    auto head = [&](int64_t h) {
      e.BeginHead(h);
      if (p.resident && p.group_stride == 1) {
        for (int64_t t = 0; t < kv_tiles; ++t) {
          e.LoadKv(t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile));
        }
      }
      std::fill(first_mid.begin(), first_mid.end(), 1);
      std::fill(first_back.begin(), first_back.end(), 1);
      auto member = [&](size_t group, int g) { return int(group % 2) * int(p.q_group) + g; };
      auto each = [&](size_t k, auto&& body) {
        const Step& st = steps[k];
        const Group& grp = groups[st.group];
        for (int g = 0; g < grp.members; ++g) {
          const std::span<const KvTile> ts = tiles(st, g);
          if (ts.empty()) continue;
          e.Select(member(st.group, g));
          body(member(st.group, g), grp.qsz[g], grp.i0[g], ts);
        }
      };
      // Per-tile state lives in one of two phases (step parity): with pipeline=2 the next
      // step's scores and probabilities are made while this step's P is still being read.
      auto slot = [&](size_t k, size_t i) { return int((k % 2) * p.kv_block + i); };
      // softmax_ops=step: one max and one exp over a member's whole step when all its tiles
      // are read from the same memory (mask=select evicts a masked tile for the mask, so with
      // softmax_src=psum a step holding one keeps per-tile instructions).
      auto step_wide = [&](std::span<const KvTile> ts) {
        if (!p.step_ops || ts.size() < 2) return false;
        if (p.src_sbuf || p.mask_matmul) return true;
        return std::none_of(ts.begin(), ts.end(), [](const KvTile& t) { return t.masked; });
      };
      // Front: the group's queries (first step), the step's key tiles (once for the group),
      // scores, masks, row maxima and the new running max.
      auto front = [&](size_t k) {
        const Step& st = steps[k];
        e.SetPass(st.pass);
        if (st.first) {
          const Group& grp = groups[st.group];
          for (int g = 0; g < grp.members; ++g) {
            const int m = member(st.group, g);
            first_mid[m] = first_back[m] = 1;
            e.Select(m);
            e.LoadQ(grp.i0[g], grp.qsz[g]);
          }
        }
        if (!p.resident) {
          std::fill(needed.begin(), needed.end(), 0);
          for (int g = 0; g < groups[st.group].members; ++g) {
            for (const KvTile& t : tiles(st, g)) needed[t.index - st.kb * p.kv_block] = 1;
          }
          for (int64_t x = 0; x < p.kv_block; ++x) {
            const int64_t t = st.kb * p.kv_block + x;
            if (needed[x]) e.LoadKv(t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile));
          }
        }
        if (st.exp_first) {
          // The exp pass's bias from the final max, before its first scores (which read it
          // with exp_layout=st).
          each(k, [&](int, int64_t qsz, int64_t, std::span<const KvTile>) {
            e.FinalMax(qsz);
            e.CombineStats(int(k % 2), false, qsz);
          });
        }
        each(k, [&](int, int64_t qsz, int64_t i0, std::span<const KvTile> ts) {
          const bool max = st.pass != 2;
          for (size_t i = 0; i < ts.size(); ++i) {
            e.Scores(slot(k, i), ts[i], i0, qsz);
            e.Prepare(slot(k, i), ts[i], i0, qsz);
            if (max && !step_wide(ts)) e.RowMax(slot(k, i), ts[i], qsz);
          }
          if (!max) return;
          if (step_wide(ts)) e.RowMaxStep(slot(k, 0), ts, qsz);
          e.CombineMax(int(k % 2), slot(k, 0), step_wide(ts) ? 1 : int(ts.size()), st.pass == 1,
                       qsz);
        });
      };
      // Middle: the exp bias and rescale factor, probabilities, running sum.
      auto middle = [&](size_t k) {
        const int phase = int(k % 2);
        const int pass = steps[k].pass;
        e.SetPass(pass);
        if (pass == 1) return;
        if (pass == 0) {
          each(k, [&](int, int64_t qsz, int64_t, std::span<const KvTile>) {
            e.CombineStats(phase, true, qsz);
          });
        }
        each(k, [&](int m, int64_t qsz, int64_t, std::span<const KvTile> ts) {
          if (step_wide(ts)) {
            e.ExpStep(slot(k, 0), ts, qsz);
          } else {
            for (size_t i = 0; i < ts.size(); ++i) e.Exp(slot(k, i), ts[i], qsz);
          }
          const int partials = step_wide(ts) ? 1 : int(ts.size());
          e.UpdateSum(phase, slot(k, 0), partials, first_mid[m], pass == 0, qsz);
          first_mid[m] = 0;
        });
      };
      // Back: P^T (transpose), then PV accumulation and the rescaled output accumulator
      // (accumulate); the group's outputs after its last step.
      auto transpose = [&](size_t k) {
        if (steps[k].pass == 1) return;
        e.SetPass(steps[k].pass);
        each(k, [&](int, int64_t qsz, int64_t, std::span<const KvTile> ts) {
          if (step_wide(ts)) {
            e.TransposePStep(slot(k, 0), ts, qsz);
          } else {
            for (size_t i = 0; i < ts.size(); ++i) e.TransposeP(slot(k, i), ts[i], qsz);
          }
        });
      };
      int64_t finishing = -1;  // the group whose outputs are due (see finish)
      // With softmax=two_pass, PV accumulates in the output bank over all the exp pass's steps.
      auto accumulate = [&](size_t k) {
        const int phase = int(k % 2);
        const int pass = steps[k].pass;
        if (pass == 1) return;
        e.SetPass(pass);
        each(k, [&](int m, int64_t qsz, int64_t, std::span<const KvTile> ts) {
          for (size_t i = 0; i < ts.size(); ++i) {
            for (int64_t c0 = 0; c0 < ts[i].size; c0 += 128) {
              const int64_t csz = std::min<int64_t>(128, ts[i].size - c0);
              e.Pv(slot(k, i), ts[i], c0, csz, qsz,
                   i == 0 && c0 == 0 && (pass == 0 || first_back[m]));
            }
          }
          if (pass == 2) first_back[m] = 0;
        });
        if (pass == 0) {
          each(k, [&](int m, int64_t qsz, int64_t, std::span<const KvTile>) {
            e.Rescale(phase, first_back[m], Fault() != AttentionFault::kSkipRescale, qsz);
            first_back[m] = 0;
          });
        }
        if (steps[k].last) finishing = int64_t(steps[k].group);
      };
      // A group's outputs (1/l, O / l, store). With softmax=two_pass they are emitted one step
      // late, just before the next step's PV: the engines' queues then hold the following steps'
      // work ahead of the chain from the last exp to the reciprocal, and the output bank is
      // released before the next group reuses it. (The online softmax's outputs read the SBUF
      // accumulator and are emitted at once: deferring them made its best config 1% slower.)
      auto finish = [&] {
        if (finishing < 0) return;
        const Group& grp = groups[size_t(finishing)];
        for (int g = 0; g < grp.members; ++g) {
          e.Select(member(size_t(finishing), g));
          e.Finish(grp.i0[g], grp.qsz[g]);
        }
        finishing = -1;
      };
      // Software pipelining over the head's step stream (each engine runs its instructions in
      // program order, so the order decides what overlaps). pipeline=1 issues the next step's
      // scores before this step's P^T and PV (TensorE computes QK^T of step s+1 while the
      // softmax of step s runs); pipeline=2 also issues the next step's softmax before them;
      // pipeline=3 issues this step's P^T between the next step's scores and its softmax (the
      // P^T evictions fill the gap while the next running max is being formed). pipeline=4
      // (two_pass only: its exp pass's max is final) issues the scores two steps ahead and the
      // next step's softmax before this step's P^T and PV, so TensorE's in-order queue holds
      // two steps of QK^T while each PV waits for its exp.
      const size_t lead = size_t(p.lead);
      for (size_t k = 0; k < lead && k < steps.size(); ++k) front(k);
      if (p.pipeline >= 2) middle(0);
      for (size_t k = 0; k < steps.size(); ++k) {
        const bool next = k + 1 < steps.size();
        if (lead == 0) front(k);
        if (p.pipeline < 2) middle(k);
        if (lead > 0 && k + lead < steps.size()) front(k + lead);
        if (p.pipeline == 3) transpose(k);
        if (p.pipeline >= 2 && next) middle(k + 1);
        if (p.pipeline != 3) transpose(k);
        finish();
        accumulate(k);
        if (!p.two_pass) finish();
      }
      finish();
    };
    // Every head emits alike from the emitter's state: an emitter may compress the loop.
    e.Heads(lo, hi, head);
  }
}

}  // namespace tessel::kernels::attention_internal

#endif  // TESSEL_KERNELS_ATTENTION_SCHEDULE_H_
