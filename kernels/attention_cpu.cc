#include "kernels/attention_cpu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

#include "kernels/attention_schedule.h"
#include "kernels/lowering/verify_util.h"

namespace tessel::kernels::attention_internal {
namespace {

float RoundBf16(float x) { return RoundToDType(x, DType::kBf16); }

// Four floats side by side (GCC/Clang vector extension): element-wise IEEE operations, each
// element computed as its scalar form would be.
using Float4 = float __attribute__((vector_size(16)));
void Store4(float* p, Float4 v) { std::memcpy(p, &v, sizeof(v)); }

// out[c] = sum over x of a[x] * b[c * d + x], for c < n, each sum in x order (fp32 PSUM
// accumulating along the contraction). Eight rows at a time in two vectors: eight independent
// sums side by side instead of one chain of dependent adds, with the same operations in the same
// order per sum, so every result is the same to the bit.
void DotRows(const float* a, const float* b, int64_t n, int64_t d, float* out) {
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    Float4 lo = {}, hi = {};
    const float* rows = b + c * d;
    for (int64_t x = 0; x < d; ++x) {
      const Float4 l = {rows[x], rows[d + x], rows[2 * d + x], rows[3 * d + x]};
      const Float4 h = {rows[4 * d + x], rows[5 * d + x], rows[6 * d + x], rows[7 * d + x]};
      lo += a[x] * l;
      hi += a[x] * h;
    }
    Store4(out + c, lo);
    Store4(out + c + 4, hi);
  }
  for (; c < n; ++c) {
    float acc = 0;
    for (int64_t x = 0; x < d; ++x) acc += a[x] * b[c * d + x];
    out[c] = acc;
  }
}

// DotRows for `rows` rows of a (a row every d floats) into rows of out (every `ld` floats). Four
// rows at a time: each key row gathered serves four queries, with the same operations in the
// same order per sum as DotRows, so the same bits.
void DotRowsBlock(const float* a, int64_t rows, const float* b, int64_t n, int64_t d, float* out,
                  int64_t ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *a0 = a + r * d, *a1 = a0 + d, *a2 = a1 + d, *a3 = a2 + d;
    float *o0 = out + r * ld, *o1 = o0 + ld, *o2 = o1 + ld, *o3 = o2 + ld;
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      Float4 l0 = {}, h0 = {}, l1 = {}, h1 = {}, l2 = {}, h2 = {}, l3 = {}, h3 = {};
      const float* rw = b + c * d;
      for (int64_t x = 0; x < d; ++x) {
        const Float4 l = {rw[x], rw[d + x], rw[2 * d + x], rw[3 * d + x]};
        const Float4 h = {rw[4 * d + x], rw[5 * d + x], rw[6 * d + x], rw[7 * d + x]};
        l0 += a0[x] * l, h0 += a0[x] * h, l1 += a1[x] * l, h1 += a1[x] * h;
        l2 += a2[x] * l, h2 += a2[x] * h, l3 += a3[x] * l, h3 += a3[x] * h;
      }
      Store4(o0 + c, l0), Store4(o0 + c + 4, h0), Store4(o1 + c, l1), Store4(o1 + c + 4, h1);
      Store4(o2 + c, l2), Store4(o2 + c + 4, h2), Store4(o3 + c, l3), Store4(o3 + c + 4, h3);
    }
    if (c < n) {
      for (int64_t k = 0; k < 4; ++k)
        DotRows(a + (r + k) * d, b + c * d, n - c, d, out + (r + k) * ld + c);
    }
  }
  for (; r < rows; ++r) DotRows(a + r * d, b, n, d, out + r * ld);
}

// Executes schedule steps on the CPU with the hardware's precisions: fp32 PSUM, scores rounded to
// bf16 when they pass through SBUF as bf16, P rounded to the input dtype before PV, fp32 running
// statistics and accumulator, output rounded to the output dtype.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& plan, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>* o)
      : p_(plan), q_(q), k_(k), v_(v), o_(o) {
    const size_t n = size_t(2 * p_.kv_block);  // two phases, as in the lowering
    s_.assign(n, std::vector<float>(p_.bq * p_.kv_tile));
    pm_.assign(n, std::vector<float>(p_.bq * p_.kv_tile));
    tile_max_.assign(n, std::vector<float>(p_.bq));
    tile_sum_.assign(n, std::vector<float>(p_.bq));
    m_.assign(p_.bq, kNegInf);
    l_.assign(p_.bq, 0);
    alpha_.assign(2 * p_.bq, 0);
    o_psum_.assign(p_.bq * p_.d, 0);
    o_acc_.assign(p_.bq * p_.d, 0);
    members_.resize(2 * p_.q_group);  // two groups may be in flight
    for (Member& m : members_) {
      m.s = s_, m.pm = pm_, m.tile_max = tile_max_, m.tile_sum = tile_sum_;
      m.m = m_, m.l = l_, m.alpha = alpha_, m.o_psum = o_psum_, m.o_acc = o_acc_;
    }
    if (p_.max_fp8) {  // the max pass's fp8 copies of Q and K, rounded once
      auto fp8 = [](float x) { return RoundToDType(x, DType::kFp8); };
      q8_.resize(q_.size());
      k8_.resize(k_.size());
      std::transform(q_.begin(), q_.end(), q8_.begin(), fp8);
      std::transform(k_.begin(), k_.end(), k8_.begin(), fp8);
    }
  }

  void BeginCore(int) {}
  bool CopyCore(int) { return false; }  // every head's values differ
  template <typename Head>
  void Heads(int64_t lo, int64_t hi, Head& head) {
    for (int64_t h = lo; h < hi; ++h) head(h);
  }
  void BeginHead(int64_t h) { h_ = h; }
  void Select(int g) {
    if (g == current_) return;
    Swap(members_[current_]);
    Swap(members_[g]);
    current_ = g;
  }
  void LoadKv(int64_t, int64_t, int64_t) {}
  void LoadQ(int64_t i0, int64_t) {
    i0_ = i0;
    std::fill(m_.begin(), m_.end(), kNegInf);
    std::fill(l_.begin(), l_.end(), 0.0f);
  }

  void SetPass(int pass) {
    st_ = p_.st && pass == 2;
    fp8_ = p_.max_fp8 && pass == 1;
  }

  void Scores(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    // max_dtype=fp8: the max pass multiplies fp8 copies.
    const float* q = &(fp8_ ? q8_ : q_)[(h_ * p_.sq + i0) * p_.d];
    const float* k = &(fp8_ ? k8_ : k_)[(h_ * p_.sk + tile.j0) * p_.d];
    // S^T evicted as bf16 (qk_role=k), except in the exp pass's S^T layout, which accumulates
    // the bf16 -m (ones x diag(-m)) onto the fp32 scores instead.
    const bool round = p_.qk_k && p_.dtype != DType::kFp32 && !st_;
    DotRowsBlock(q, qsz, k, tile.size, p_.d, s_[i].data(), p_.kv_tile);
    for (int64_t r = 0; r < qsz; ++r) {
      const float bias = st_ ? RoundBf16(-m_[r]) : 0.0f;
      for (int64_t c = 0; c < tile.size; ++c) {
        float acc = s_[i][r * p_.kv_tile + c];
        if (st_) acc += bias;
        s_[i][r * p_.kv_tile + c] = round ? RoundBf16(acc) : acc;
      }
    }
  }

  void Prepare(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    const bool round = p_.src_sbuf && p_.dtype != DType::kFp32;
    for (int64_t r = 0; r < qsz; ++r) {
      for (int64_t c = 0; c < tile.size; ++c) {
        float& s = s_[i][r * p_.kv_tile + c];
        const bool masked = tile.masked && tile.j0 + c > i0 + r + p_.offset();
        if (masked && p_.mask_matmul) s += kMaskValue;  // fp32 PSUM accumulation
        if (round) s = RoundBf16(s);
        if (masked && !p_.mask_matmul) s = kNegInf;
      }
    }
  }

  void RowMax(int i, const KvTile& tile, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = kNegInf;
      for (int64_t c = 0; c < tile.size; ++c) mx = std::max(mx, s_[i][r * p_.kv_tile + c]);
      tile_max_[i][r] = mx;
    }
  }

  void RowMaxStep(int base, std::span<const KvTile> tiles, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = kNegInf;
      for (size_t t = 0; t < tiles.size(); ++t) {
        for (int64_t c = 0; c < tiles[t].size; ++c) {
          mx = std::max(mx, s_[base + t][r * p_.kv_tile + c]);
        }
      }
      tile_max_[base][r] = mx;
    }
  }

  void CombineStats(int, bool, int64_t) {}
  // The max is exact, so combining per step or once (deferred) gives the same m.
  void FinalMax(int64_t) {}
  void CombineMax(int phase, int base, int n, bool, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = m_[r];
      for (int i = base; i < base + n; ++i) mx = std::max(mx, tile_max_[i][r]);
      alpha_[phase * p_.bq + r] = m_[r] == kNegInf ? 0.0f : std::exp(p_.scale * (m_[r] - mx));
      m_[r] = mx;
    }
  }

  void Exp(int i, const KvTile& tile, int64_t qsz) { ExpTiles(i, &tile, 1, qsz); }
  void ExpStep(int base, std::span<const KvTile> tiles, int64_t qsz) {
    ExpTiles(base, tiles.data(), tiles.size(), qsz);
  }

  void UpdateSum(int phase, int base, int n, bool first, bool rescale, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float partial = 0;
      for (int i = base; i < base + n; ++i) partial += tile_sum_[i][r];
      l_[r] = (first ? 0.0f : rescale ? l_[r] * alpha_[phase * p_.bq + r] : l_[r]) + partial;
    }
  }

  void TransposeP(int, const KvTile&, int64_t) {}
  void TransposePStep(int, std::span<const KvTile>, int64_t) {}

  // P of `n` tiles from slot `base` on, with one running row sum (into tile_sum_[base]) in the
  // order one instruction accumulates it.
  void ExpTiles(int base, const KvTile* tiles, size_t n, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      // (S^T layout: -m is already in the scores; the row sums come from PV with a ones
      // column, so they add the rounded P.)
      const float bias = st_ || m_[r] == kNegInf ? 0.0f : -p_.scale * m_[r];
      const bool sum_rounded = p_.sum_vector || st_;
      float sum = 0;
      for (size_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < tiles[t].size; ++c) {
          const float e = std::exp(p_.scale * s_[base + t][r * p_.kv_tile + c] + bias);
          const float rounded = RoundToDType(e, p_.dtype);
          pm_[base + t][r * p_.kv_tile + c] = rounded;
          sum += sum_rounded ? rounded : e;  // the activation accumulates before rounding
        }
      }
      tile_sum_[base][r] = sum;
    }
  }

  void Pv(int i, const KvTile& tile, int64_t c0, int64_t csz, int64_t qsz, bool start) {
    if (start) std::fill(o_psum_.begin(), o_psum_.end(), 0.0f);
    const float* v = &v_[(h_ * p_.sk + tile.j0 + c0) * p_.d];
    for (int64_t r = 0; r < qsz; ++r) {
      AccumulateRowTimesMatrix(&pm_[i][r * p_.kv_tile + c0], v, csz, p_.d, p_.d,
                               &o_psum_[r * p_.d]);
    }
  }

  void Rescale(int phase, bool first, bool rescale, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      for (int64_t x = 0; x < p_.d; ++x) {
        float& acc = o_acc_[r * p_.d + x];
        const float add = o_psum_[r * p_.d + x];
        acc = first ? add : (rescale ? acc * alpha_[phase * p_.bq + r] : acc) + add;
      }
    }
  }

  void Finish(int64_t i0, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      const float inv = 1.0f / l_[r];
      // softmax=two_pass: O was accumulated in PSUM over the whole exp pass.
      const std::vector<float>& o = p_.two_pass ? o_psum_ : o_acc_;
      for (int64_t x = 0; x < p_.d; ++x) {
        float out = o[r * p_.d + x] * inv;
        out = RoundToOutput(out, p_.dtype);
        (*o_)[(h_ * p_.sq + i0 + r) * p_.d + x] = out;
      }
    }
  }

 private:
  const Plan& p_;
  const std::vector<float>& q_;
  const std::vector<float>& k_;
  std::vector<float> q8_, k8_;  // max_dtype=fp8: q_ and k_ rounded to fp8
  const std::vector<float>& v_;
  std::vector<float>* o_;
  struct Member {
    std::vector<std::vector<float>> s, pm, tile_max, tile_sum;
    std::vector<float> m, l, alpha, o_psum, o_acc;
  };
  // Exchanges the working state with `m` (O(1): vectors are swapped, not copied).
  void Swap(Member& m) {
    s_.swap(m.s), pm_.swap(m.pm), tile_max_.swap(m.tile_max), tile_sum_.swap(m.tile_sum);
    m_.swap(m.m), l_.swap(m.l), alpha_.swap(m.alpha), o_psum_.swap(m.o_psum);
    o_acc_.swap(m.o_acc);
  }

  int64_t h_ = 0, i0_ = 0;
  std::vector<std::vector<float>> s_, pm_, tile_max_, tile_sum_;
  std::vector<float> m_, l_, alpha_, o_psum_, o_acc_;
  std::vector<Member> members_;
  int current_ = 0;
  bool st_ = false;   // the exp pass in the S^T layout (SetPass)
  bool fp8_ = false;  // the max pass with max_dtype=fp8 (SetPass)
};

}  // namespace

void RunOnCpu(const Plan& plan, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, std::vector<float>* o) {
  CpuEmitter emitter(plan, q, k, v, o);
  Generate(plan, emitter);
}

}  // namespace tessel::kernels::attention_internal
