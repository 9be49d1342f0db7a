#include "kernels/attention_sim.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/attention_schedule.h"
#include "kernels/estimate_util.h"
#include "kernels/lowering/gemm_emit.h"
#include "sim/compact.h"

namespace tessel::kernels::attention_internal {
namespace {

constexpr int64_t kSampledGroups = 4;

AttentionLowering g_lowering = AttentionLowering::kCompact;

// Turns schedule steps into simulator instructions, tracking the buffers' readers and writers.
// `ProgramT` is sim::Program, or CountingProgram for the analytic estimate (which keeps only the
// instructions' costs).
template <typename ProgramT>
class SimEmitter {
 public:
  // A simulator program (else the estimate's counting one), written through a sim::StreamWriter.
  static constexpr bool kSim = std::is_same_v<ProgramT, sim::Program>;

  SimEmitter(const Plan& plan, const sim::Target& target, ProgramT* program)
      : p_(plan), target_(target), program_(program) {}

  // Core `core` has as many heads as core - 1: it runs the same program when the engines are
  // picked in the same turn as they were for core - 1 (compact lowering). Which buffer of a
  // rotation comes first does not matter: a core starts with all of them free, so another start
  // only renames them. The counters then move on as if the core had been emitted.
  bool CopyCore(int) {
    if constexpr (kSim) {
      if (g_lowering != AttentionLowering::kCompact) return false;
      const Counters now = Count(), moduli = Moduli();
      for (size_t k : {kEvict, kPt}) {
        if (now[k] % moduli[k] != core_start_[k] % moduli[k]) return false;
      }
      const std::array<int64_t*, 7> counters = CounterRefs();
      for (size_t k = 0; k < now.size(); ++k) *counters[k] += now[k] - core_start_[k];
      core_start_ = now;
      program_->RepeatPrevious();
      return true;
    }
    return false;
  }

  void BeginCore(int core) {
    c_ = &program_->Core(size_t(core));
    if constexpr (kSim) {
      writer_.Begin(c_, g_lowering == AttentionLowering::kCompact);
      core_start_ = Count();
      // Room for a typical core, so the program grows without copying itself several times.
      c_->instructions.reserve(4096);
      c_->deps.reserve(8192);
    }
    const int64_t chunks = CeilDiv(p_.kv_tile, 128);
    const int d = int(p_.d), bq = int(p_.bq);
    const int kvp = int(std::min<int64_t>(128, p_.kv_tile));
    auto add = [&](const char* name, Mem mem, int partitions, int64_t bytes, int bufs) {
      c_->allocations.push_back({name, mem, 0, partitions, bytes, bufs});
    };
    if (p_.resident) {
      add("k_t", Mem::kSbuf, d, p_.kv_tiles * p_.kv_tile * p_.in_bytes, 1);
      add("v", Mem::kSbuf, kvp, p_.kv_tiles * chunks * p_.v_cols() * p_.in_bytes, 1);
    } else {
      add("k_t", Mem::kSbuf, d, p_.kv_tile * p_.in_bytes, p_.kv_ring);
      add("v", Mem::kSbuf, kvp, chunks * p_.v_cols() * p_.in_bytes, p_.kv_ring);
    }
    if (!p_.qk_dma) {
      add("k_raw", Mem::kSbuf, kvp, chunks * p_.d * p_.in_bytes, 2);
      add("q_raw", Mem::kSbuf, bq, p_.d * p_.in_bytes, p_.q_sets() * int(p_.q_group));
    }
    const int group = int(p_.q_group);
    add("q_t", Mem::kSbuf, d, p_.bq * p_.in_bytes, p_.q_sets() * group);
    add("s_sbuf", Mem::kSbuf, bq, p_.kv_tile * 4, p_.s_slots);
    if (p_.qk_k) add("s_t", Mem::kSbuf, kvp, chunks * p_.bq * 4, 1);
    add("p", Mem::kSbuf, bq, p_.kv_tile * p_.in_bytes, p_.p_slots);
    add("p_t", Mem::kSbuf, kvp, chunks * p_.bq * p_.in_bytes, p_.p_slots);
    // Member slots: two groups may be in flight (see Generate).
    add("stats", Mem::kSbuf, bq, Plan::StatsBytes(p_), 2 * group);
    const int o_part = p_.pv_v ? d : bq;
    const int64_t o_free = p_.pv_v ? p_.bq : p_.d;
    add("o_acc", Mem::kSbuf, o_part, o_free * 4, 2 * group);
    add("o_stage", Mem::kSbuf, o_part, o_free * p_.out_bytes, kStagingBufs);
    add("s_psum", Mem::kPsum, bq, p_.kv_tile * 4, p_.s_slots);
    if (p_.pt_bank) add("pt_psum", Mem::kPsum, kvp, p_.pt_bytes(target_), 1);
    add("o_psum", Mem::kPsum, o_part, o_free * 4, group);
    if (p_.tr_bank) add("tr_psum", Mem::kPsum, 128, target_.psum_bank_bytes_per_partition, 1);
    mask_ready_ = -1;
    if (p_.mask_matmul) {
      // The constants, made once per core: the triangle and the identity (GpSimd iota and
      // affine_select).
      add("mask", Mem::kSbuf, bq, (p_.mask_width() + p_.bq) * 2, 1);
      mask_ready_ = Add(
          sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, int(p_.mask_width() + p_.bq), bq), {});
    }
    ones_ready_ = -1;
    if (p_.st) {
      add("m_diag", Mem::kSbuf, bq, p_.bq * 2, 2 * group);
      // The identity and a ones tile (GpSimd iota), made once per core.
      add("identity_ones", Mem::kSbuf, bq, 2 * p_.bq * 2, 1);
      ident_ready_ = Add(sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, 2 * bq, bq), {});
      // The ones column of every V buffer, set once (V loads write only the head_dim columns).
      const int64_t v_bufs = p_.resident ? p_.kv_tiles : p_.kv_ring;
      ones_ready_ =
          Add(sim::MakeEngineOp(Op::kMemset, EngineKind::kVector, int(v_bufs * chunks), kvp), {});
    }
    kv_reader_.assign(p_.kv_ring, -1);
    kv_buf_of_tile_.assign(p_.kv_tiles, 0);
    k_ready_.assign(kv_reader_.size(), -1);
    k8_ready_.assign(kv_reader_.size(), -1);
    k8_war_.assign(kv_reader_.size(), -1);
    k8_size_.assign(kv_reader_.size(), 0);
    v_ready_.assign(kv_reader_.size(), -1);
    s_reader_.assign(p_.s_slots, -1);
    p_reader_.assign(p_.p_slots, -1);
    stage_reader_.fill(-1);
    q_reader_.assign(p_.q_sets() * p_.q_group, -1);
    tr_reader_ = pt_reader_ = st_reader_ = -1;
    members_.assign(2 * p_.q_group, Member{});
    o_reader_.assign(p_.q_group, -1);
    current_ = 0;
    m_ = &members_[0];
  }

  // Emits heads [lo, hi) of the current core (head(h) emits head h). The compact lowering emits
  // the first head, then runs chunks of heads that bring the engine turns back (split evictions,
  // the P^T transposes' DMA share) through a sim::LoopCompressor: once a chunk's state (relative
  // to the position, rotations relative to their next buffer) repeats, the rest are a repeat and
  // are not generated. The remaining heads follow plainly.
  template <typename Head>
  void Heads(int64_t lo, int64_t hi, Head& head) {
    int64_t h = lo;
    if constexpr (kSim) {
      if (writer_.compact() && hi - lo > kMinChunks) {
        Counters before = Count();
        head(h++);
        const Counters after = Count(), moduli = Moduli();
        int64_t r = 1;  // heads per chunk
        for (size_t k : {kEvict, kPt}) {
          const int64_t delta = (after[k] - before[k]) % moduli[k];
          r = std::lcm(r, moduli[k] / std::gcd(moduli[k], delta));
        }
        const int64_t chunks = (hi - h) / r;
        if (chunks >= kMinChunks) {
          HeadChunks<Head> body{this, &head, h, r};
          loop_.Run(writer_, body, 0, chunks, sim::RunOptions{.min_saving = 64});
          h += chunks * r;
        }
      }
    }
    for (; h < hi; ++h) head(h);
  }

  void BeginHead(int64_t) {}

  // Makes query tile `g` of the current group the one later calls refer to.
  void Select(int g) {
    current_ = g;
    m_ = &members_[size_t(g)];
  }

  void LoadKv(int64_t t, int64_t, int64_t tsz) {
    const int buf = int(p_.resident ? t : kv_count_++ % p_.kv_ring);
    kv_buf_of_tile_[t] = buf;
    const int32_t war = kv_reader_[buf];
    const int kvp = int(std::min<int64_t>(128, tsz));
    const int64_t chunks = CeilDiv(tsz, 128);
    if (p_.qk_dma) {
      sim::Instruction k = sim::MakeDma(Op::kDmaLoad, int(p_.d), tsz * p_.in_bytes, kQueueK);
      k.transpose = true;
      k_ready_[buf] = Add(k, {war});
    } else {
      sim::Instruction raw = sim::MakeDma(Op::kDmaLoad, kvp, chunks * p_.d * p_.in_bytes, kQueueK);
      raw.chunk_bytes = int32_t(p_.d * p_.in_bytes);
      const int32_t load = Add(raw, {war});
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tsz - c * 128));
        last = Transpose(csz, int(p_.d), {load, tr_reader_});
      }
      tr_reader_ = k_ready_[buf] = EvictTransposed(int(p_.d), int(tsz), last, war);
    }
    // (max_dtype=fp8: the fp8 copy is made when the max pass first reads the tile, so that
    // GpSimd does not convert all of a head's resident tiles ahead of its first Q^T.)
    if (p_.max_fp8) k8_ready_[buf] = -1, k8_war_[buf] = war, k8_size_[buf] = int(tsz);
    sim::Instruction v = sim::MakeDma(Op::kDmaLoad, kvp, chunks * p_.d * p_.in_bytes, kQueueV);
    v.chunk_bytes = int32_t(p_.d * p_.in_bytes);
    v_ready_[buf] = Add(v, {war});
  }

  void LoadQ(int64_t, int64_t qsz) {
    const int buf = int(q_count_++ % (p_.q_sets() * p_.q_group));
    const int32_t war = q_reader_[buf];
    if (p_.qk_dma) {
      sim::Instruction q = sim::MakeDma(Op::kDmaLoad, int(p_.d), qsz * p_.in_bytes, kQueueQ);
      q.transpose = true;
      m_->q_ready = Add(q, {war});
    } else {
      const int32_t load =
          Add(sim::MakeDma(Op::kDmaLoad, int(qsz), p_.d * p_.in_bytes, kQueueQ), {war});
      const int32_t tr = Transpose(int(qsz), int(p_.d), {load, tr_reader_});
      tr_reader_ = m_->q_ready = EvictTransposed(int(p_.d), int(qsz), tr, war);
    }
    if (p_.max_fp8) m_->q8_ready = ToFp8(int(qsz), m_->q_ready, war);
    m_->q_buf = buf;
    // Running max and sum start at -inf and 0.
    // (With two_pass and O in PSUM, the member's previous output is no longer in SBUF.)
    const int32_t o_war = p_.two_pass && !p_.pv_v ? -1 : m_->oacc;
    m_->stats =
        Add(sim::MakeEngineOp(Op::kMemset, EngineKind::kVector, 2, int(qsz)), {m_->stats, o_war});
    m_->ids.m = m_->ids.l = m_->stats;
    m_->ids.sum_last = -1, m_->ids.sums = 0;
    m_->ids.max_last = -1, m_->ids.maxes = 0;
  }

  // The pass the following calls belong to (softmax=two_pass: 1 max, 2 exp; 0 online).
  void SetPass(int pass) {
    st_ = p_.st && pass == 2;
    fp8_ = p_.max_fp8 && pass == 1;
  }

  void Scores(int i, const KvTile& tile, int64_t, int64_t qsz) {
    // A step's score tiles take adjacent banks (one group of kv_block), so one instruction can
    // read them all (softmax_ops=step).
    if (i % p_.kv_block == 0) s_base_ = int(s_count_++ % (p_.s_slots / p_.kv_block) * p_.kv_block);
    const int slot = s_base_ + int(i % p_.kv_block);
    m_->slot[i] = slot;
    const int buf = kv_buf_of_tile_[tile.index];
    const int64_t chunks = CeilDiv(tile.size, 128);
    if (st_) {
      // S^T chunks [keys, queries] side by side in the bank, each followed in its accumulation
      // group by ones[queries, keys] x diag(-m) (every key row gets -m), which needs no result
      // of the chunk's matmul.
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        Add(sim::MakeMatmul(p_.dtype, int(p_.d), csz, int(qsz)),
            {m_->q_ready, k_ready_[buf], s_reader_[slot]});
        last = Add(sim::MakeMatmul(DType::kBf16, int(qsz), csz, int(qsz)),
                   {m_->ids.m_diag, ident_ready_});
      }
      m_->s_ready[i] = m_->ids.m_diag_reader = last;
    } else if (!p_.qk_k) {
      sim::Instruction mm = sim::MakeMatmul(QkDType(), int(p_.d), int(qsz), int(tile.size));
      m_->s_ready[i] = Add(mm, {QReady(), KReady(buf), s_reader_[slot]});
    } else {
      // S^T chunks with K^T stationary, evicted, then transposed back into the score bank.
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        sim::Instruction mm = sim::MakeMatmul(QkDType(), int(p_.d), csz, int(qsz));
        last = Add(mm, {QReady(), KReady(buf), tr_reader_});
      }
      const int32_t ev =
          Evict(int(std::min<int64_t>(128, tile.size)), int(chunks * qsz), last, st_reader_);
      tr_reader_ = ev;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        last = Transpose(csz, int(qsz), {ev, s_reader_[slot]});
      }
      st_reader_ = last;
      m_->s_ready[i] = last;
    }
    q_reader_[m_->q_buf] = m_->s_ready[i];
    kv_reader_[buf] = std::max(kv_reader_[buf], m_->s_ready[i]);
    m_->src[i] = Mem::kPsum;
    m_->src_bf16[i] = false;
  }

  void Prepare(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    const int64_t chunks = CeilDiv(tile.size, 128);
    const int parts = ScoreParts(tile, qsz), free = int(ScoreFree(tile, qsz));
    const int64_t first = std::max<int64_t>(0, i0 + p_.offset() - tile.j0 + 1);
    if (tile.masked && p_.mask_matmul) {
      // Identity (stationary) x the triangle's window (moving) accumulates into the scores,
      // over the columns from the first one any query of the tile masks (S^T: each chunk
      // holding such a key). It follows QK^T on TensorE into the same accumulation group, so it
      // needs no result of it: readers wait for this last accumulation.
      if (!st_) {
        sim::Instruction mm =
            sim::MakeMatmul(DType::kBf16, int(qsz), int(qsz), int(tile.size - first));
        m_->s_ready[i] = Add(mm, {mask_ready_});
      } else {
        for (int64_t c = first / 128; c < chunks; ++c) {
          const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
          m_->s_ready[i] = Add(sim::MakeMatmul(DType::kBf16, csz, csz, int(qsz)), {mask_ready_});
        }
      }
    }
    if (!p_.src_sbuf && (!tile.masked || p_.mask_matmul)) return;
    int32_t ev = Evict(parts, free, m_->s_ready[i], -1);
    m_->src[i] = Mem::kSbuf;
    m_->src_bf16[i] = p_.src_sbuf && p_.dtype != DType::kFp32;
    if (tile.masked && !p_.mask_matmul) {
      // affine_select on GpSimd writes -inf above the diagonal.
      ev = Add(sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, free, parts), {ev});
    }
    s_reader_[m_->slot[i]] = ev;
    m_->s_ready[i] = ev;
  }

  void RowMax(int i, const KvTile& tile, int64_t qsz) {
    sim::Instruction max = sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(tile.size),
                                             int(qsz), m_->src[i]);
    max.dtype = m_->src_bf16[i] ? DType::kBf16 : DType::kFp32;
    max.add_op = true;
    m_->max[i] = Add(max, {m_->s_ready[i]});
    if (m_->src[i] == Mem::kPsum)
      s_reader_[m_->slot[i]] = std::max(s_reader_[m_->slot[i]], m_->max[i]);
  }

  // The new running max of the step (right after its row maxima). With `deferred` (the two-pass
  // max pass) the tile maxima stay in their columns of the stats tile and FinalMax reduces them
  // all at once.
  void CombineMax(int, int base, int n, bool deferred, int64_t qsz) {
    if (deferred) {
      for (int i = base; i < base + n; ++i)
        m_->ids.max_last = std::max(m_->ids.max_last, m_->max[i]);
      m_->ids.maxes += n;
      return;
    }
    std::vector<int32_t>& deps = ScratchDeps();
    deps.assign(m_->max.begin() + base, m_->max.begin() + base + n);
    deps.push_back(m_->ids.m);
    deps.push_back(m_->ids.m_reader);
    m_->ids.m =
        Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, n + 1, int(qsz)), deps);
    m_->stats = std::max(m_->stats, m_->ids.m);
  }

  // The deferred maxima's reduction (two_pass: at the start of the exp pass).
  void FinalMax(int64_t qsz) {
    if (m_->ids.maxes == 0) return;
    m_->ids.m =
        Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, m_->ids.maxes, int(qsz)),
            {m_->ids.max_last, m_->ids.m, m_->ids.m_reader});
    m_->stats = std::max(m_->stats, m_->ids.m);
    m_->ids.max_last = -1, m_->ids.maxes = 0;
  }

  // The running max's scaled negation (the exp bias) and, with `alpha` (online softmax),
  // alpha = exp(scale (m_old - m)), whose phase slot the step two back may still be reading.
  void CombineStats(int phase, bool alpha, int64_t qsz) {
    if (p_.st) {
      // exp_layout=st: diag(-m) in bf16 (the identity times -m per partition), the moving
      // operand that adds -m to the scores; the exp itself then needs no bias.
      m_->ids.m_diag = Add(sim::MakeEngineOp(Op::kTensorScalar, StatsEngine(), int(qsz), int(qsz)),
                           {m_->ids.m, m_->ids.m_diag_reader, ident_ready_});
      m_->ids.m_reader = m_->ids.neg = m_->ids.m_diag;
      m_->stats = std::max(m_->stats, m_->ids.m_diag);
      return;
    }
    const int32_t neg = Add(sim::MakeEngineOp(Op::kTensorScalar, StatsEngine(), 1, int(qsz)),
                            {m_->ids.m, m_->ids.neg_reader});
    m_->ids.m_reader = m_->ids.neg = neg;
    m_->stats = std::max(m_->stats, neg);
    if (!alpha) return;
    m_->alpha[phase] = Add(sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, 1, int(qsz)),
                           {neg, m_->ids.alpha_reader[phase]});
    m_->stats = std::max(m_->stats, m_->alpha[phase]);
  }

  // One max over all the step's tiles (adjacent banks, or SBUF when they were evicted).
  void RowMaxStep(int base, std::span<const KvTile> tiles, int64_t qsz) {
    int64_t total = 0;
    std::vector<int32_t>& deps = ScratchDeps();
    for (size_t t = 0; t < tiles.size(); ++t) {
      total += tiles[t].size;
      deps.push_back(m_->s_ready[base + t]);
    }
    sim::Instruction max = sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(total),
                                             int(qsz), m_->src[base]);
    max.dtype = m_->src_bf16[base] ? DType::kBf16 : DType::kFp32;
    max.add_op = true;
    m_->max[base] = Add(max, deps);
    for (size_t t = 0; t < tiles.size(); ++t) {
      m_->max[base + t] = m_->max[base];
      if (m_->src[base] == Mem::kPsum) {
        s_reader_[m_->slot[base + t]] = std::max(s_reader_[m_->slot[base + t]], m_->max[base]);
      }
    }
  }

  // One exp activation over all the step's tiles, accumulating one row sum (or one Vector
  // reduction of the step's P).
  void ExpStep(int base, std::span<const KvTile> tiles, int64_t qsz) {
    int64_t total = 0;
    std::vector<int32_t>& deps = ScratchDeps();
    deps.assign({m_->ids.neg, m_->max[base]});
    for (size_t t = 0; t < tiles.size(); ++t) {
      const int i = base + int(t);
      if (t == 0) p_base_ = int(p_count_++ % (p_.p_slots / p_.kv_block) * p_.kv_block);
      m_->p_buf[i] = p_base_ + int(t);
      total += ScoreFree(tiles[t], qsz);
      deps.push_back(m_->s_ready[i]);
      deps.push_back(p_reader_[m_->p_buf[i]]);
    }
    sim::Instruction exp = sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, int(total),
                                             ScoreParts(tiles[0], qsz), m_->src[base], Mem::kSbuf);
    exp.dtype = m_->src_bf16[base] ? DType::kBf16 : DType::kFp32;
    const int32_t id = Add(exp, deps);
    m_->ids.neg_reader = std::max(m_->ids.neg_reader, id);
    int32_t sum = id;
    if (p_.sum_vector) {
      sim::Instruction red =
          sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(total), int(qsz));
      red.dtype = p_.dtype == DType::kFp32 ? DType::kFp32 : DType::kBf16;
      red.add_op = true;
      sum = Add(red, {id});
    }
    for (size_t t = 0; t < tiles.size(); ++t) {
      const int i = base + int(t);
      m_->p_ready[i] = id;
      m_->sum[i] = sum;
      s_reader_[m_->slot[i]] = std::max(s_reader_[m_->slot[i]], id);
    }
  }

  void Exp(int i, const KvTile& tile, int64_t qsz) {
    if (i % p_.kv_block == 0) p_base_ = int(p_count_++ % (p_.p_slots / p_.kv_block) * p_.kv_block);
    const int buf = p_base_ + int(i % p_.kv_block);
    m_->p_buf[i] = buf;
    sim::Instruction exp =
        sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, int(ScoreFree(tile, qsz)),
                          ScoreParts(tile, qsz), m_->src[i], Mem::kSbuf);
    exp.dtype = m_->src_bf16[i] ? DType::kBf16 : DType::kFp32;
    m_->p_ready[i] = Add(exp, {m_->s_ready[i], m_->ids.neg, p_reader_[buf], m_->max[i]});
    m_->ids.neg_reader = std::max(m_->ids.neg_reader, m_->p_ready[i]);
    s_reader_[m_->slot[i]] = std::max(s_reader_[m_->slot[i]], m_->p_ready[i]);
    m_->sum[i] = m_->p_ready[i];
    if (p_.sum_vector) {
      sim::Instruction sum =
          sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(tile.size), int(qsz));
      sum.dtype = p_.dtype == DType::kFp32 ? DType::kFp32 : DType::kBf16;
      sum.add_op = true;
      m_->sum[i] = Add(sum, {m_->p_ready[i]});
    }
  }

  // l = l * alpha + the step's row sums (rescale: online softmax), else l + the row sums.
  void UpdateSum(int phase, int base, int n, bool, bool rescale, int64_t qsz) {
    if (st_) return;  // the row sums accumulate in PV's ones column
    if (!rescale) {
      // Two-pass softmax: each exp's row sums stay in their own column of the stats tile; Finish
      // adds them all with one reduction (so no per-step op waits for ScalarE's exp).
      for (int i = base; i < base + n; ++i)
        m_->ids.sum_last = std::max(m_->ids.sum_last, m_->sum[i]);
      m_->ids.sums += n;
      return;
    }
    std::vector<int32_t>& deps = ScratchDeps();
    deps.assign(m_->sum.begin() + base, m_->sum.begin() + base + n);
    deps.push_back(m_->alpha[phase]);
    deps.push_back(m_->ids.l);
    // l = l * alpha + sum of the tiles' row sums: one fused op (Vector scalar_tensor_tensor, or
    // a Scalar activation with per-partition scale and bias) after summing several tiles' sums.
    int32_t partial = -1;
    if (n > 1) {
      partial = Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, n, int(qsz)), deps);
    }
    const Op op = StatsEngine() == EngineKind::kScalar ? Op::kActivation : Op::kTensorTensor;
    sim::Instruction update = sim::MakeEngineOp(op, StatsEngine(), 1, int(qsz));
    update.dtype = DType::kFp32;
    deps.push_back(partial);
    m_->ids.l = Add(update, deps);
    m_->ids.alpha_reader[phase] = std::max(m_->ids.alpha_reader[phase], m_->ids.l);
    m_->stats = std::max(m_->stats, m_->ids.l);
  }

  void TransposeP(int i, const KvTile& tile, int64_t qsz) {
    if (st_) {  // exp wrote P^T
      m_->pt_ready[i] = m_->p_ready[i];
      return;
    }
    if (pt_count_++ % p_.p_dma_den < p_.p_dma_num) {
      DmaTransposeP(i, 1, tile.size, qsz);
    } else {
      TensorTransposeP(i, tile, qsz);
    }
  }

  // P^T of a whole step: one transposing DMA of the step's adjacent P buffers, or per-tile
  // TensorE transposes (p_transpose splits count steps).
  void TransposePStep(int base, std::span<const KvTile> tiles, int64_t qsz) {
    if (st_) {
      for (size_t t = 0; t < tiles.size(); ++t) m_->pt_ready[base + t] = m_->p_ready[base + t];
      return;
    }
    if (pt_count_++ % p_.p_dma_den < p_.p_dma_num) {
      int64_t total = 0;
      for (const KvTile& t : tiles) total += t.size;
      DmaTransposeP(base, int(tiles.size()), total, qsz);
    } else {
      for (size_t t = 0; t < tiles.size(); ++t) TensorTransposeP(base + int(t), tiles[t], qsz);
    }
  }

  void Pv(int i, const KvTile& tile, int64_t, int64_t csz, int64_t qsz, bool start) {
    const int buf = kv_buf_of_tile_[tile.index];
    // (exp_layout=st: V's ones column makes column head_dim the row sums.)
    sim::Instruction mm = p_.pv_v ? sim::MakeMatmul(p_.dtype, int(csz), int(p_.d), int(qsz))
                                  : sim::MakeMatmul(p_.dtype, int(csz), int(qsz), int(p_.v_cols()));
    // The member's output bank is shared with the same member of the other group in flight.
    m_->last_pv =
        Add(mm, {m_->pt_ready[i], v_ready_[buf], start ? o_reader_[OBank()] : -1, ones_ready_});
    p_reader_[m_->p_buf[i]] = std::max(p_reader_[m_->p_buf[i]], m_->last_pv);
    kv_reader_[buf] = std::max(kv_reader_[buf], m_->last_pv);
  }

  void Rescale(int phase, bool first, bool, int64_t qsz) {
    const int o_part = int(p_.pv_v ? p_.d : qsz);
    const int o_free = int(p_.pv_v ? qsz : p_.d);
    if (first) {
      sim::Instruction copy = sim::MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, o_free,
                                                o_part, Mem::kPsum, Mem::kSbuf);
      copy.dtype = DType::kFp32;
      m_->oacc = o_reader_[OBank()] = Add(copy, {m_->last_pv, m_->oacc});
      return;
    }
    if (!p_.pv_v) {
      // O = O * alpha + PV in one scalar_tensor_tensor (per-partition alpha; PV read from PSUM).
      sim::Instruction fused = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free,
                                                 o_part, Mem::kPsum, Mem::kSbuf);
      fused.in1 = Mem::kSbuf;
      fused.dtype = DType::kFp32;
      m_->oacc = o_reader_[OBank()] = Add(fused, {m_->last_pv, m_->alpha[phase], m_->oacc});
      m_->ids.alpha_reader[phase] = std::max(m_->ids.alpha_reader[phase], m_->oacc);
      return;
    }
    int32_t scaled;
    {
      const int32_t bcast = Broadcast(int(qsz), m_->alpha[phase]);
      m_->ids.alpha_reader[phase] = std::max(m_->ids.alpha_reader[phase], bcast);
      sim::Instruction mul = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free,
                                               o_part, Mem::kPsum, Mem::kSbuf);
      mul.in1 = Mem::kSbuf;
      mul.dtype = DType::kFp32;
      scaled = tr_reader_ = Add(mul, {bcast, m_->oacc});
    }
    sim::Instruction add = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free, o_part,
                                             Mem::kPsum, Mem::kSbuf);
    add.in1 = Mem::kSbuf;
    add.dtype = DType::kFp32;
    m_->oacc = o_reader_[OBank()] = Add(add, {m_->last_pv, scaled});
  }

  // O / l into the staging buffer and the store. With softmax=two_pass, O is still in its PSUM
  // bank: ScalarE scales it from there (O layout), or it is evicted first (O^T layout, whose
  // broadcast of 1/l is in PSUM too).
  void Finish(int64_t, int64_t qsz) {
    if (m_->ids.sums > 0) {
      m_->ids.l =
          Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, m_->ids.sums, int(qsz)),
              {m_->ids.sum_last, m_->ids.l});
    }
    // (exp_layout=st: l is the output bank's last column.)
    const int32_t inv =
        p_.st ? Add(sim::MakeEngineOp(Op::kReciprocal, EngineKind::kVector, 1, int(qsz), Mem::kPsum,
                                      Mem::kSbuf),
                    {m_->last_pv})
              : Add(sim::MakeEngineOp(Op::kReciprocal, EngineKind::kVector, 1, int(qsz)),
                    {m_->ids.l});
    const int stage = int(stage_count_++ % kStagingBufs);
    int32_t out;
    if (p_.two_pass && p_.pv_v) {
      m_->oacc = o_reader_[OBank()] = Evict(int(p_.d), int(qsz), m_->last_pv, m_->oacc);
    }
    if (!p_.pv_v) {
      sim::Instruction mul =
          sim::MakeEngineOp(Op::kTensorScalar, EngineKind::kScalar, int(p_.d), int(qsz));
      mul.dtype = DType::kFp32;
      if (p_.two_pass) {
        mul.in0 = Mem::kPsum;
        out = o_reader_[OBank()] = Add(mul, {inv, m_->last_pv, m_->oacc, stage_reader_[stage]});
      } else {
        out = Add(mul, {inv, m_->oacc, stage_reader_[stage]});
      }
      sim::Instruction store =
          sim::MakeDma(Op::kDmaStore, int(qsz), p_.d * p_.out_bytes, kQueueStore);
      stage_reader_[stage] = Add(store, {out});
    } else {
      const int32_t bcast = Broadcast(int(qsz), inv);
      sim::Instruction mul = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, int(qsz),
                                               int(p_.d), Mem::kPsum, Mem::kSbuf);
      mul.in1 = Mem::kSbuf;
      mul.dtype = DType::kFp32;
      out = tr_reader_ = Add(mul, {bcast, m_->oacc, stage_reader_[stage]});
      // O^T tiles: a transposing store writes O row-major.
      sim::Instruction store =
          sim::MakeDma(Op::kDmaStore, int(p_.d), qsz * p_.out_bytes, kQueueStore);
      store.transpose = true;
      stage_reader_[stage] = Add(store, {out});
    }
    m_->oacc = out;
    m_->stats = std::max(m_->stats, inv);
  }

 private:
  // Chunks of heads too few to compress: the compressor needs about three periods to find one.
  static constexpr int64_t kMinChunks = 4;

  // The counters that pick rotating buffers (the first kRings) and engines, and their periods.
  using Counters = std::array<int64_t, 7>;
  static constexpr size_t kRings = 5, kEvict = 5, kPt = 6;
  Counters Count() const {
    return {kv_count_, s_count_, p_count_, q_count_, stage_count_, evict_count_, pt_count_};
  }
  std::array<int64_t*, 7> CounterRefs() {  // in Count()'s order
    return {&kv_count_, &s_count_, &p_count_, &q_count_, &stage_count_, &evict_count_, &pt_count_};
  }
  Counters Moduli() const {
    return {std::max(1, p_.kv_ring),
            std::max<int64_t>(1, p_.s_slots / p_.kv_block),
            std::max<int64_t>(1, p_.p_slots / p_.kv_block),
            std::max<int64_t>(1, p_.q_sets() * p_.q_group),
            kStagingBufs,
            p_.evict == "split" ? 2 : 1,  // EvictEngine alternates
            std::max(1, p_.p_dma_den)};
  }
  // Per rotation, the buffers a counter step moves by (a step's score banks and P buffers are
  // kv_block adjacent ones).
  std::array<int64_t, kRings> Widths() const { return {1, p_.kv_block, p_.kv_block, 1, 1}; }

  // The rotations as their counters stand.
  std::array<sim::Rotation, kRings> Rotations() const {
    const Counters counts = Count(), moduli = Moduli();
    const std::array<int64_t, kRings> widths = Widths();
    std::array<sim::Rotation, kRings> r;
    for (size_t k = 0; k < kRings; ++k) r[k] = sim::Rotation::At(counts[k], moduli[k], widths[k]);
    return r;
  }
  enum RingId { kKv = 0, kS, kP, kQ, kStage };
  // Rotation k's arrays of handles (one entry per buffer).
  template <typename F>
  void ForRingArrays(F&& f) {
    for (std::vector<int32_t>* v : {&kv_reader_, &k_ready_, &v_ready_, &k8_ready_, &k8_war_}) {
      f(kKv, std::span<int32_t>(*v));
    }
    f(kS, std::span<int32_t>(s_reader_));
    f(kP, std::span<int32_t>(p_reader_));
    f(kQ, std::span<int32_t>(q_reader_));
    f(kStage, std::span<int32_t>(stage_reader_));
  }
  // The state's buffer numbers of each rotation.
  template <typename F>
  void ForRingValues(F&& f) {
    f(kS, s_base_);
    f(kP, p_base_);
    for (Member& m : members_) {
      f(kQ, m.q_buf);
      for (int64_t i = 0; i < 2 * p_.kv_block; ++i) {
        f(kS, m.slot[size_t(i)]);
        f(kP, m.p_buf[size_t(i)]);
      }
    }
    for (int& b : kv_buf_of_tile_) f(kKv, b);
  }

  // A chunk of heads as a sim::LoopCompressor body (sim/compact.h): iteration i emits `r` heads.
  template <typename Head>
  struct HeadChunks {
    SimEmitter* e;
    Head* head;
    int64_t first, r;
    void Iterate(int64_t i) {
      for (int64_t k = 0; k < r; ++k) (*head)(first + i * r + k);
    }
    void Snapshot(int64_t, sim::LoopState* state) { e->Snapshot(state); }
    void Skip(const sim::SkippedPeriods& skip) { e->SkipHeads(skip); }
    sim::HandleFifo* fifo() { return nullptr; }
  };

  // Calls handle(int32_t&) for every handle of the state a head's emission depends on and
  // value(int64_t) for everything else, in a fixed order (every member's, the current one's too). A
  // rotation's buffers are visited from the next one its counter picks, and buffer numbers are
  // given relative to it: a rotation in another turn is the same state.
  template <typename HandleF, typename ValueF>
  void VisitState(HandleF&& handle, ValueF&& value) {
    const std::array<sim::Rotation, kRings> rot = Rotations();
    const Counters counts = Count(), moduli = Moduli();
    value(current_);
    for (size_t k : {kEvict, kPt}) value(counts[k] % moduli[k]);
    value(st_);
    value(fp8_);
    ForRingValues([&](int ring, int& b) { value(rot[size_t(ring)].Rel(b)); });
    for (Member& m : members_) {
      for (int32_t* h :
           {&m.q_ready, &m.q8_ready, &m.stats, &m.oacc, &m.last_pv, &m.alpha[0], &m.alpha[1]}) {
        handle(*h);
      }
      StatIds& ids = m.ids;
      for (int32_t* h :
           {&ids.m, &ids.m_reader, &ids.neg, &ids.neg_reader, &ids.l, &ids.sum_last, &ids.max_last,
            &ids.m_diag, &ids.m_diag_reader, &ids.alpha_reader[0], &ids.alpha_reader[1]}) {
        handle(*h);
      }
      value(ids.sums);
      value(ids.maxes);
      for (int i = 0; i < live_slots_; ++i) {  // the others are never written
        handle(m.s_ready[i]);
        handle(m.max[i]);
        handle(m.p_ready[i]);
        handle(m.sum[i]);
        handle(m.pt_ready[i]);
        value(int64_t(m.src[i]) * 2 + int64_t(m.src_bf16[i]));
      }
    }
    ForRingArrays([&](int ring, std::span<int32_t> v) { rot[size_t(ring)].Visit(v, handle); });
    rot[kKv].Visit(std::span<int32_t>(k8_size_), value);
    for (int32_t& h : o_reader_) handle(h);
    for (int32_t* h :
         {&tr_reader_, &pt_reader_, &st_reader_, &mask_ready_, &ones_ready_, &ident_ready_}) {
      handle(*h);
    }
  }

  // The state at a chunk boundary (LoopBody::Snapshot): handles relative to the position.
  void Snapshot(sim::LoopState* state) {
    sim::CanonOf(state, [&](auto&& handle, auto&& value) { VisitState(handle, value); });
    const Counters counts = Count();
    state->saved.assign(counts.begin(), counts.end());
  }

  // Moves the state past skipped chunks (LoopBody::Skip): a handle the same at both ends of the
  // period is a constant; every other one moves by the skipped length. The counters advance by
  // their change per period.
  void SkipHeads(const sim::SkippedPeriods& skip) {
    sim::MoveHandles(skip, [&](auto&& handle, auto&& value) { VisitState(handle, value); });
    // The rotations turn on by the skipped counter steps.
    const std::array<sim::Rotation, kRings> rot = Rotations();
    std::array<int64_t, kRings> steps;
    for (size_t ring = 0; ring < kRings; ++ring) {
      steps[ring] = skip.CounterSteps(Count()[ring], ring);
    }
    ForRingValues(
        [&](int ring, int& b) { b = int(rot[size_t(ring)].Moved(b, steps[size_t(ring)])); });
    ForRingArrays(
        [&](int ring, std::span<int32_t> v) { rot[size_t(ring)].Turn(v, steps[size_t(ring)]); });
    rot[kKv].Turn(std::span<int32_t>(k8_size_), steps[kKv]);
    for (size_t c = 0; int64_t * counter : CounterRefs())
      *counter += skip.CounterSteps(*counter, c++);
  }

  // Appends an instruction: through the stream writer (a simulator program; handles are flat
  // positions) or to the counting core.
  int32_t Add(const sim::Instruction& inst, std::span<const int32_t> deps) {
    if constexpr (kSim) {
      int64_t few[8];
      if (deps.size() <= std::size(few)) {
        std::copy(deps.begin(), deps.end(), few);
        return int32_t(writer_.Add(inst, std::span<const int64_t>(few, deps.size())));
      }
      deps64_.assign(deps.begin(), deps.end());
      return int32_t(writer_.Add(inst, std::span<const int64_t>(deps64_)));
    } else {
      return c_->Add(inst, deps);
    }
  }
  int32_t Add(const sim::Instruction& inst, std::initializer_list<int32_t> deps) {
    return Add(inst, std::span<const int32_t>(deps.begin(), deps.size()));
  }
  // An emptied dependency list for one instruction, reused (no allocation per instruction); the
  // functions that use it do not call one another.
  std::vector<int32_t>& ScratchDeps() {
    scratch_deps_.clear();
    return scratch_deps_;
  }

  // The max pass's QK^T operands with max_dtype=fp8: the fp8 copies.
  DType QkDType() const { return fp8_ ? DType::kFp8 : p_.dtype; }
  int32_t QReady() const { return fp8_ ? m_->q8_ready : m_->q_ready; }
  int32_t KReady(int buf) {
    if (!fp8_) return k_ready_[buf];
    if (k8_ready_[buf] < 0) k8_ready_[buf] = ToFp8(k8_size_[buf], k_ready_[buf], k8_war_[buf]);
    return k8_ready_[buf];
  }
  // An fp8 copy of a [head_dim, free] tile on GpSimd (SBUF to SBUF), after `dep`, once the
  // copy's previous readers (`war`) are done.
  int32_t ToFp8(int free, int32_t dep, int32_t war) {
    sim::Instruction copy =
        sim::MakeEngineOp(Op::kTensorCopy, EngineKind::kGpSimd, free, int(p_.d));
    copy.dtype = p_.dtype;
    return Add(copy, {dep, war});
  }

  // A score tile's [partitions, free] shape: [queries, keys], or in the S^T layout [keys,
  // chunks x queries].
  int ScoreParts(const KvTile& tile, int64_t qsz) const {
    return st_ ? int(std::min<int64_t>(128, tile.size)) : int(qsz);
  }
  int64_t ScoreFree(const KvTile& tile, int64_t qsz) const {
    return st_ ? CeilDiv(tile.size, 128) * qsz : tile.size;
  }

  EngineKind NextEvictEngine() { return EvictEngine(p_.evict, evict_count_++); }

  int OBank() const { return current_ % int(p_.q_group); }

  // P^T of tiles [base, base + n) (adjacent buffers, `total` keys) by one SBUF-to-SBUF
  // transposing DMA.
  void DmaTransposeP(int base, int n, int64_t total, int64_t qsz) {
    std::vector<int32_t>& deps = ScratchDeps();
    for (int i = base; i < base + n; ++i) {
      deps.push_back(m_->p_ready[i]);
      deps.push_back(p_reader_[m_->p_buf[i]]);
    }
    sim::Instruction tr = sim::MakeDma(Op::kDmaCopy, int(qsz), total * p_.in_bytes, kQueueP);
    tr.transpose = true;
    const int32_t id = Add(tr, deps);
    for (int i = base; i < base + n; ++i) m_->pt_ready[i] = p_reader_[m_->p_buf[i]] = id;
  }

  // P^T of one tile through TensorE (128-key chunks into the P^T bank), then one eviction.
  void TensorTransposeP(int i, const KvTile& tile, int64_t qsz) {
    const int64_t chunks = CeilDiv(tile.size, 128);
    const int kvp = int(std::min<int64_t>(128, tile.size));
    const int buf = m_->p_buf[i];
    int32_t last = -1;
    for (int64_t c = 0; c < chunks; ++c) {
      const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
      last = Transpose(int(qsz), csz, {m_->p_ready[i], pt_reader_});
    }
    m_->pt_ready[i] = pt_reader_ = EvictTransposed(kvp, int(chunks * qsz), last, p_reader_[buf]);
    p_reader_[buf] = m_->pt_ready[i];
  }

  EngineKind StatsEngine() const {
    return p_.stats_scalar ? EngineKind::kScalar : EngineKind::kVector;
  }

  int32_t Transpose(int partitions, int free, std::initializer_list<int32_t> deps) {
    sim::Instruction tr;
    tr.op = Op::kTranspose;
    tr.engine = EngineKind::kTensor;
    tr.partitions = int16_t(partitions);
    tr.free = free;
    tr.in0 = Mem::kSbuf;
    tr.out = Mem::kPsum;
    tr.dtype = p_.dtype;
    return Add(tr, deps);
  }

  int32_t Evict(int partitions, int free, int32_t dep, int32_t war) {
    return Add(PsumToSbuf(NextEvictEngine(), partitions, free), {dep, war});
  }

  // Evicts TensorE transposes of input-dtype data (Q^T, K^T, P^T). Where the target's transposes
  // keep the dtype in PSUM, the copy reads and writes that dtype (bf16: VectorE's performance
  // mode applies); else it reads fp32 like any matmul result's eviction.
  int32_t EvictTransposed(int partitions, int free, int32_t dep, int32_t war) {
    sim::Instruction ev = PsumToSbuf(NextEvictEngine(), partitions, free);
    if (target_.TransposePsumDType(p_.dtype) == p_.dtype) ev.dtype = ev.out_dtype = p_.dtype;
    return Add(ev, {dep, war});
  }

  // Broadcasts a per-query column [qsz, 1] over the head_dim partitions of the O^T layout:
  // transpose to a row, evict it, then a K=1 matmul with a ones row lands [d, qsz] in PSUM.
  int32_t Broadcast(int qsz, int32_t dep) {
    const int32_t tr = Transpose(qsz, 1, {dep, tr_reader_});
    const int32_t row = Evict(1, qsz, tr, -1);
    sim::Instruction mm = sim::MakeMatmul(DType::kFp32, 1, int(p_.d), qsz);
    return Add(mm, {row});
  }

  // Writers and last readers of a member's running statistics (WAR hazards across the
  // pipelined steps).
  struct StatIds {
    int32_t m = -1, m_reader = -1, neg = -1, neg_reader = -1, l = -1;
    // Two-pass softmax: the row-sum columns written so far and the last writer (one engine
    // writes them all, in order).
    int32_t sum_last = -1, sums = 0;
    // Two-pass softmax: likewise the tile maxima of the max pass (VectorE writes them all).
    int32_t max_last = -1, maxes = 0;
    // exp_layout=st: diag(-m) and its last reader.
    int32_t m_diag = -1, m_diag_reader = -1;
    std::array<int32_t, 2> alpha_reader{-1, -1};
  };
  // The per-query-tile state of a group member; the emitter works on the selected one in place
  // (m_). Per tile of the two softmax steps in flight (phase x kv_block + tile): slot to src_bf16.
  struct Member {
    int32_t q_ready = -1, q8_ready = -1, stats = -1, oacc = -1, last_pv = -1;
    std::array<int32_t, 2> alpha{-1, -1};
    StatIds ids;
    int q_buf = 0;
    std::array<int, kSlots> slot{}, p_buf{};
    std::array<int32_t, kSlots> s_ready{}, max{}, p_ready{}, sum{}, pt_ready{};
    std::array<Mem, kSlots> src{};
    std::array<bool, kSlots> src_bf16{};
  };
  const Plan& p_;
  const sim::Target& target_;
  ProgramT* program_;
  std::remove_reference_t<decltype(std::declval<ProgramT&>().cores[0])>* c_ = nullptr;
  std::vector<Member> members_;
  int current_ = 0;
  Member* m_ = nullptr;  // members_[current_]: the query tile later calls refer to (Select)
  // The per-tile slots in use (VisitState): two phases of kv_block tiles.
  const int live_slots_ = int(std::min<int64_t>(kSlots, 2 * p_.kv_block));
  std::vector<int32_t> kv_reader_, k_ready_, v_ready_, s_reader_, p_reader_;
  std::vector<int> kv_buf_of_tile_;
  std::array<int32_t, kStagingBufs> stage_reader_{};
  std::vector<int32_t> q_reader_;
  int64_t kv_count_ = 0, s_count_ = 0, p_count_ = 0, evict_count_ = 0;
  int64_t pt_count_ = 0;         // P^T tiles made so far (p_transpose split)
  int s_base_ = 0, p_base_ = 0;  // first score bank / P buffer of the step being emitted
  int64_t q_count_ = 0;
  int64_t stage_count_ = 0;
  int32_t tr_reader_ = -1, pt_reader_ = -1, st_reader_ = -1;
  int32_t mask_ready_ = -1;   // mask=matmul: the constants
  int32_t ones_ready_ = -1;   // exp_layout=st: V's ones columns
  int32_t ident_ready_ = -1;  // exp_layout=st: the identity and ones tiles
  bool st_ = false;           // emitting the exp pass in the S^T layout (SetPass)
  bool fp8_ = false;          // emitting the max pass with max_dtype=fp8 (SetPass)
  // max_dtype=fp8, per K buffer: its fp8 copy (-1: not made yet), the copy's WAR dependency and
  // the tile's keys.
  std::vector<int32_t> k8_ready_, k8_war_, k8_size_;
  std::vector<int32_t> o_reader_;  // per output PSUM bank: its last reader
  // The compact lowering's writer and heads loop, and Add's scratch.
  sim::StreamWriter writer_;
  sim::LoopCompressor loop_;
  std::vector<int64_t> deps64_;
  std::vector<int32_t> scratch_deps_;  // ScratchDeps
  Counters core_start_{};              // the counters when the last emitted core began
};

}  // namespace

void SetAttentionLoweringForTesting(AttentionLowering lowering) { g_lowering = lowering; }

void EmitProgram(const Plan& plan, const sim::Target& target, sim::Program* program) {
  SimEmitter emitter(plan, target, program);
  Generate(plan, emitter);
}

std::optional<double> Estimate(const Plan& plan, const Problem&, const sim::Target& target) {
  const int64_t pairs = CeilDiv(plan.bh, plan.shards);
  Plan one = plan;
  one.bh = 1;
  one.shards = 1;
  const int64_t groups = CeilDiv(one.q_tiles, one.q_group);
  one.group_stride = std::max<int64_t>(1, groups / kSampledGroups);
  int64_t sampled = 0;
  for (int64_t g = 0; g < groups; ++g) sampled += g % one.group_stride == one.group_stride / 2;
  CountingProgram program(target);
  SimEmitter emitter(one, target, &program);
  program.cores.resize(1);  // Generate's BeginCore keeps it
  CountingCore& core = program.cores[0];
  core.set_weight(double(groups) / double(sampled));
  Generate(one, emitter);
  if (one.resident && one.group_stride > 1) {  // once per head, not per group
    core.set_weight(1);
    for (int64_t t = 0; t < one.kv_tiles; ++t) {
      emitter.LoadKv(t, t * one.kv_tile, std::min(one.kv_tile, one.sk - t * one.kv_tile));
    }
  }
  return double(pairs) * core.BoundNs(plan.shards);
}

}  // namespace tessel::kernels::attention_internal
