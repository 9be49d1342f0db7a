// The attention kernel: its problem rules, params, default, Verify's reduced problem and
// reference, and the registration of its steps. The plan is in attention_plan, the step stream in
// attention_schedule, the simulator emitter and estimate in attention_sim, the CPU emitter in
// attention_cpu.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_cpu.h"
#include "kernels/attention_plan.h"
#include "kernels/attention_sim.h"
#include "kernels/lowering/verify_util.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"

namespace tessel::kernels {

using attention_internal::MakePlan;
using attention_internal::Plan;
using sim::DType;

absl::Status AttentionKernel::ValidateProblem(const Problem& problem,
                                              const sim::Target& target) const {
  // causal=0 reaches the check below, which says what the values mean.
  absl::Status checked = CheckProblem(name(), dims(), dtypes(), problem, target, {"causal"});
  if (!checked.ok()) return checked;
  const int64_t causal = *problem.dims.Get("causal");
  if (causal != 1 && causal != 2) {
    return absl::InvalidArgumentError(
        StrCat("causal=", causal, ": use causal=1 for a causal mask, causal=2 for none"));
  }
  if (causal == 1 && *problem.dims.Get("seq_q") > *problem.dims.Get("seq_k")) {
    return absl::InvalidArgumentError(
        "causal attention needs seq_q <= seq_k: with the bottom-right aligned mask the first "
        "queries would see no key");
  }
  if (target.systolic) {
    return absl::InvalidArgumentError(StrCat(
        "attention needs a neuron target (engines, SBUF, PSUM); ", target.name, " is systolic"));
  }
  if (target.matmul_max_k > 0 && *problem.dims.Get("head_dim") > target.matmul_max_k) {
    return absl::InvalidArgumentError(StrCat(
        "head_dim=", *problem.dims.Get("head_dim"), " exceeds the TensorE contraction limit ",
        target.matmul_max_k, " (head_dim <= ", target.matmul_max_k, " is supported)"));
  }
  return absl::OkStatus();
}

namespace {

// The schedule params (causal_skip=1 and mask=matmul only for causal problems).
std::vector<Param> Params(const Problem& problem, const sim::Target& target) {
  std::vector<std::string> skip = {"0"}, mask = {"select"};
  if (*problem.dims.Get("causal") == 1) skip.push_back("1"), mask.push_back("matmul");
  return {
      {"block_q", {"32", "64", "128"}, "query rows per tile"},
      {"kv_tile", {"128", "256", "512"}, "key columns per score tile"},
      {"kv_block", {"1", "2", "4"}, "score tiles per online-softmax step"},
      {"q_group", {"1", "2", "4"}, "query tiles processed together, their steps interleaved"},
      {"qk_role", {"q", "k"}, "stationary operand of QK^T (k: S^T transposed back)"},
      {"pv_role", {"p", "v"}, "stationary operand of PV (v: O^T accumulates)"},
      {"qk_transpose", {"dma", "tensor"}, "how Q^T and K^T are made"},
      {"p_transpose",
       {"tensor", "dma", "half", "two_thirds"},
       "how P^T is made: TensorE, transposing DMA, or that share of the tiles by DMA"},
      {"softmax_src", {"psum", "sbuf"}, "where max and exp read the scores"},
      {"sum_engine", {"scalar", "vector"}, "row sums: exp accumulation or a Vector reduction"},
      {"stats_engine", {"vector", "scalar"}, "engine of the small running max/sum updates"},
      {"evict", {"vector", "scalar", "split", "gpsimd"}, "engine evicting PSUM"},
      {"kv_resident", {"0", "1"}, "1: a head's K^T and V stay in SBUF"},
      {"bufs", {"1", "2"}, "rotating buffers for K/V and score tiles"},
      {"causal_skip", skip, "1: skip score tiles above the diagonal"},
      {"pipeline",
       {"0", "1", "2", "3", "4"},
       "1: next QK^T before this PV; 2: next softmax too; 3: this P^T, then next softmax; "
       "4 (two_pass): the QK^T after next and the next softmax"},
      {"softmax_ops", {"tile", "step"}, "max and exp per score tile or per softmax step"},
      {"mask", mask, "causal mask: select (evict, GpSimd affine_select) or matmul (into PSUM)"},
      {"exp_layout",
       {"s", "st"},
       "two_pass exp pass: S then P^T by transposes, or S^T (P^T directly, -m by ones x diag(-m))"},
      {"max_dtype",
       {"input", "fp8"},
       "two_pass max pass QK^T: input dtype, or fp8 copies (faster only where TensorE runs "
       "K=head_dim fp8 tiles faster; the max may be off)"},
      {"softmax",
       {"online", "two_pass"},
       "online: running max, rescaled output; two_pass: a max pass, then exp and PV (QK^T twice)"},
      {"shards", ShardValues(target), "cores the batch x heads pairs are split over"},
  };
}

// out0[j] and out1[j] = sum over x of a0[x] (a1[x]) * b[j * d + x] in double, for j < n, each
// sum in x order. Two query rows and eight key rows at a time in eight two-double vectors: each
// key row loaded serves both queries, and every sum has the same operations in the same order
// as one row at a time, so the same bits.
void ReferenceDots2(const float* a0, const float* a1, const float* b, int64_t n, int64_t d,
                    double* out0, double* out1) {
  using Double2 = double __attribute__((vector_size(16)));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // Named accumulators, not an array: at -O2 an array's loop is not unrolled into registers.
    Double2 a00 = {}, a01 = {}, a02 = {}, a03 = {}, a10 = {}, a11 = {}, a12 = {}, a13 = {};
    const float* r = b + j * d;
    for (int64_t x = 0; x < d; ++x) {
      const double x0 = a0[x], x1 = a1[x];
      const Double2 k0{r[x], r[d + x]}, k1{r[2 * d + x], r[3 * d + x]};
      const Double2 k2{r[4 * d + x], r[5 * d + x]}, k3{r[6 * d + x], r[7 * d + x]};
      a00 += x0 * k0, a01 += x0 * k1, a02 += x0 * k2, a03 += x0 * k3;
      a10 += x1 * k0, a11 += x1 * k1, a12 += x1 * k2, a13 += x1 * k3;
    }
    const Double2 acc0[4] = {a00, a01, a02, a03}, acc1[4] = {a10, a11, a12, a13};
    std::memcpy(out0 + j, acc0, sizeof(acc0));
    std::memcpy(out1 + j, acc1, sizeof(acc1));
  }
  for (; j < n; ++j) {
    double acc0 = 0, acc1 = 0;
    for (int64_t x = 0; x < d; ++x) {
      acc0 += double(a0[x]) * b[j * d + x];
      acc1 += double(a1[x]) * b[j * d + x];
    }
    out0[j] = acc0, out1[j] = acc1;
  }
}

// out0[x] = sum over j < n0 of p0[j] * v[j * d + x] and out1[x] likewise over j < n1 (n0 <= n1)
// in double, for x < d, each sum in j order. Eight columns x of both rows at a time in eight
// two-double vectors (each V row loaded serves both; element-wise, the same operations in the
// same order, so the same bits as one row and one column at a time).
void ReferencePv2(const double* p0, int64_t n0, const double* p1, int64_t n1, const float* v,
                  int64_t d, double* out0, double* out1) {
  using Double2 = double __attribute__((vector_size(16)));
  using Float2 = float __attribute__((vector_size(8)));
  auto load = [](const float* at) {
    Float2 f;
    std::memcpy(&f, at, sizeof(f));
    return __builtin_convertvector(f, Double2);
  };
  int64_t x = 0;
  for (; x + 8 <= d; x += 8) {
    Double2 a00 = {}, a01 = {}, a02 = {}, a03 = {}, a10 = {}, a11 = {}, a12 = {}, a13 = {};
    int64_t j = 0;
    for (; j < n0; ++j) {
      const float* row = v + j * d + x;
      const Double2 v0 = load(row), v1 = load(row + 2), v2 = load(row + 4), v3 = load(row + 6);
      a00 += p0[j] * v0, a01 += p0[j] * v1, a02 += p0[j] * v2, a03 += p0[j] * v3;
      a10 += p1[j] * v0, a11 += p1[j] * v1, a12 += p1[j] * v2, a13 += p1[j] * v3;
    }
    for (; j < n1; ++j) {
      const float* row = v + j * d + x;
      a10 += p1[j] * load(row), a11 += p1[j] * load(row + 2);
      a12 += p1[j] * load(row + 4), a13 += p1[j] * load(row + 6);
    }
    const Double2 acc0[4] = {a00, a01, a02, a03}, acc1[4] = {a10, a11, a12, a13};
    std::memcpy(out0 + x, acc0, sizeof(acc0));
    std::memcpy(out1 + x, acc1, sizeof(acc1));
  }
  for (; x < d; ++x) {
    double acc0 = 0, acc1 = 0;
    for (int64_t j = 0; j < n0; ++j) acc0 += p0[j] * v[j * d + x];
    for (int64_t j = 0; j < n1; ++j) acc1 += p1[j] * v[j * d + x];
    out0[x] = acc0, out1[x] = acc1;
  }
}

// Verify's run on the reduced problem below, against a plain reference in double.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  // Reduced problem: at most two cores and one more (batch, head) pair than cores, at most two
  // query tiles and two softmax steps of keys (tails kept), the same causal offset where it fits.
  // Sharding only decides which core runs which pair (every pair's arithmetic is the same), and
  // two cores, one of them with two pairs, run that code as eight would: with shards=8, nine
  // pairs cost three times as much to run and check (the reference is per pair) and tested
  // nothing more.
  Plan plan = full;
  plan.shards = std::min(plan.shards, 2);
  plan.bh = std::min(plan.bh, int64_t(plan.shards) + 1);
  plan.sq = ReducedDim(full.sq, plan.bq, 2);
  plan.sk = ReducedDim(full.sk, plan.kv_tile * plan.kv_block, 2);
  if (plan.causal) plan.sk = std::max(plan.sk, std::min(full.sk, plan.sq + full.offset()));
  if (plan.causal) plan.sk = std::max(plan.sk, plan.sq);
  plan.Derive();
  if (plan.shards > plan.bh) plan.shards = int(plan.bh);
  const Dims reduced{
      {"batch_x_heads", plan.bh}, {"seq_q", plan.sq}, {"seq_k", plan.sk}, {"head_dim", plan.d}};

  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.sq * 131 + plan.sk * 7 + plan.bh));
  // Larger query magnitudes make the running max move between steps, exercising the rescale.
  const std::vector<float> q = RandomInputs(plan.bh * plan.sq * plan.d, rng, plan.dtype, 3.0f);
  const std::vector<float> k = RandomInputs(plan.bh * plan.sk * plan.d, rng, plan.dtype);
  const std::vector<float> v = RandomInputs(plan.bh * plan.sk * plan.d, rng, plan.dtype);
  std::vector<float> o = Unwritten(plan.bh * plan.sq * plan.d);
  RunOnCpu(plan, q, k, v, &o);

  // Plain reference in double. Tolerance: the probabilities' rounding to the input dtype (and
  // the scores' bf16 rounding) relative to max |V|, plus the output rounding.
  const double p_eps = plan.dtype == DType::kFp32 ? 1e-5 : plan.dtype == DType::kFp8 ? 0.08 : 0.012;
  const double out_eps = plan.dtype == DType::kFp32 ? 1e-6 : std::ldexp(1.0, -8);
  std::vector<double> s0(plan.sk), s1(plan.sk), ref0(plan.d), ref1(plan.d);
  // p = exp(s - max) over the first `visible` scores of a row, in place; returns their sum.
  auto probabilities = [&](std::vector<double>& s, int64_t visible) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j) {
      s[j] *= plan.scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    return sum;
  };
  for (int64_t h = 0; h < plan.bh; ++h) {
    double v_max = 0;
    for (int64_t j = 0; j < plan.sk * plan.d; ++j) {
      v_max = std::max(v_max, double(std::abs(v[h * plan.sk * plan.d + j])));
    }
    const float* kh = &k[h * plan.sk * plan.d];
    const float* vh = &v[h * plan.sk * plan.d];
    auto visible = [&](int64_t i) {
      return plan.causal ? std::min(plan.sk, i + plan.offset() + 1) : plan.sk;
    };
    auto check = [&](int64_t i, const std::vector<double>& ref, double sum) {
      for (int64_t x = 0; x < plan.d; ++x) {
        const double want = ref[x] / sum;
        const double got = o[(h * plan.sq + i) * plan.d + x];
        const double tol = p_eps * v_max + out_eps * std::abs(want) + 1e-30;
        if (!Within(got, want, tol)) {
          return WrongAnswer("attention", StrCat("O[", h, ",", i, ",", x, "]"), reduced.ToString(),
                             got, want, tol);
        }
      }
      return absl::OkStatus();
    };
    // Two query rows at a time (the last one alone is paired with itself); a row sees no more
    // keys than the next one, so the pair's scores go as far as the second row's.
    for (int64_t i = 0; i < plan.sq; i += 2) {
      const int64_t i1 = std::min(i + 1, plan.sq - 1);
      const int64_t n0 = visible(i), n1 = visible(i1);
      ReferenceDots2(&q[(h * plan.sq + i) * plan.d], &q[(h * plan.sq + i1) * plan.d], kh, n1,
                     plan.d, s0.data(), s1.data());
      const double sum0 = probabilities(s0, n0), sum1 = probabilities(s1, n1);
      ReferencePv2(s0.data(), n0, s1.data(), n1, vh, plan.d, ref0.data(), ref1.data());
      if (absl::Status status = check(i, ref0, sum0); !status.ok()) return status;
      if (i1 != i) {
        if (absl::Status status = check(i1, ref1, sum1); !status.ok()) return status;
      }
    }
  }
  return absl::OkStatus();
}

void Emit(const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
  attention_internal::EmitProgram(plan, target, program);
}

constexpr char kDescription[] =
    "flash attention O = softmax(QK^T/sqrt(d)) V per (batch, head); causal=1 masks (bottom-right "
    "aligned), causal=2 does not: Q/KV blocks, online or two-pass softmax, operand roles, "
    "transposes, engine split, causal block skipping, sharding over batch x heads";

}  // namespace

// Version 1: initial lowering. 2: the step stream is pipelined across query groups; pipeline
// 2/3, softmax_ops, p_transpose half/two_thirds; a step's score banks are adjacent.
// 3: the two-pass softmax and its options (softmax, mask, exp_layout, max_dtype,
// pipeline=4), so a best tuned under 2 missed most of today's space and is served as
// stale.
// (Spec: name, version, description, dims, dtypes; steps: params, plan, emit, verify, estimate.)
AttentionKernel::AttentionKernel()
    : PlannedKernel({"attention",
                     3,
                     kDescription,
                     {"batch", "heads", "seq_q", "seq_k", "head_dim", "causal"},
                     {"bf16", "fp32", "fp8"}},
                    Erase(PlanSteps<Plan>{Params, StrictPlan(MakePlan), Emit, RunReduced,
                                          attention_internal::Estimate})) {}

Problem AttentionKernel::Example() const {
  return {*Dims::Parse("batch=1,heads=8,seq_q=1024,seq_k=1024,head_dim=128,causal=1"), "bf16"};
}

Config AttentionKernel::Default(const Problem& problem, const sim::Target& target) const {
  // A plain compiler: full tiles, one score tile per softmax step, textbook roles (Q^T and P^T
  // stationary), DMA transposes for Q/K, TensorE for P, separate reductions on Vector, every
  // eviction on Vector, masking instead of skipping, one core. Smaller tiles only where the
  // problem is smaller than a tile (the redundancy rules would reject the full one).
  Config c{{"block_q", "128"},         {"q_group", "1"},
           {"kv_tile", "512"},         {"kv_block", "1"},
           {"qk_role", "q"},           {"pv_role", "p"},
           {"qk_transpose", "dma"},    {"p_transpose", "tensor"},
           {"softmax_src", "psum"},    {"sum_engine", "vector"},
           {"stats_engine", "vector"}, {"evict", "vector"},
           {"kv_resident", "0"},       {"bufs", "2"},
           {"causal_skip", "0"},       {"pipeline", "0"},
           {"softmax_ops", "tile"},    {"softmax", "online"},
           {"mask", "select"},         {"exp_layout", "s"},
           {"max_dtype", "input"},     {"shards", "1"}};
  absl::StatusOr<Space> space = SpaceFor(problem, target);
  if (!space.ok()) return c;
  for (const char* bq : {"128", "64", "32"}) {
    for (const char* kv : {"512", "256", "128"}) {
      c.Set("block_q", bq);
      c.Set("kv_tile", kv);
      if (space->Validate(c).ok()) return c;
    }
  }
  return c;
}

Kernel::Work AttentionKernel::MinimumWork(const Problem& problem) const {
  const double bh =
      double(problem.dims.Get("batch").value_or(0)) * double(problem.dims.Get("heads").value_or(0));
  const int64_t sq = problem.dims.Get("seq_q").value_or(0);
  const int64_t sk = problem.dims.Get("seq_k").value_or(0);
  const double d = double(problem.dims.Get("head_dim").value_or(0));
  const bool causal = problem.dims.Get("causal").value_or(2) == 1;
  // (query, key) pairs the mask keeps: query i sees min(sk, i + sk - sq + 1) keys.
  double pairs = double(sq) * double(sk);
  if (causal) {
    pairs = 0;
    for (int64_t i = 0; i < sq; ++i) {
      pairs += double(std::clamp<int64_t>(i + sk - sq + 1, 0, sk));
    }
  }
  auto dtype = sim::ParseDType(problem.dtype);
  const double in_bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  const double out_bytes = dtype.ok() ? OutputBytes(*dtype) : 2;
  // QK^T and PV: 2 flops per multiply-add each.
  return Work{4 * bh * pairs * d,
              bh * ((double(sq) + 2 * double(sk)) * d * in_bytes + double(sq) * d * out_bytes)};
}

}  // namespace tessel::kernels
