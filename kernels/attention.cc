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

// out[j] = sum over x of a[x] * b[j * d + x] in double, for j < n, each sum in x order. Eight
// rows at a time in four two-double vectors (eight independent sums side by side, the same
// operations in the same order per sum, so the same bits as one row at a time).
void ReferenceDots(const float* a, const float* b, int64_t n, int64_t d, double* out) {
  using Double2 = double __attribute__((vector_size(16)));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // Named accumulators, not an array: at -O2 an array's loop is not unrolled into registers.
    Double2 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
    const float* r = b + j * d;
    for (int64_t x = 0; x < d; ++x) {
      const double ax = a[x];
      acc0 += ax * Double2{r[x], r[d + x]};
      acc1 += ax * Double2{r[2 * d + x], r[3 * d + x]};
      acc2 += ax * Double2{r[4 * d + x], r[5 * d + x]};
      acc3 += ax * Double2{r[6 * d + x], r[7 * d + x]};
    }
    const Double2 acc[4] = {acc0, acc1, acc2, acc3};
    std::memcpy(out + j, acc, sizeof(acc));
  }
  for (; j < n; ++j) {
    double acc = 0;
    for (int64_t x = 0; x < d; ++x) acc += double(a[x]) * b[j * d + x];
    out[j] = acc;
  }
}

// out[x] = sum over j of p[j] * v[j * d + x] in double, for x < d, each sum in j order. Eight
// columns x at a time in four two-double vectors (element-wise, the same operations in the same
// order, so the same bits as one column at a time).
void ReferencePv(const double* p, const float* v, int64_t n, int64_t d, double* out) {
  using Double2 = double __attribute__((vector_size(16)));
  using Float2 = float __attribute__((vector_size(8)));
  auto load = [](const float* at) {
    Float2 f;
    std::memcpy(&f, at, sizeof(f));
    return __builtin_convertvector(f, Double2);
  };
  int64_t x = 0;
  for (; x + 8 <= d; x += 8) {
    Double2 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
    for (int64_t j = 0; j < n; ++j) {
      const float* row = v + j * d + x;
      acc0 += p[j] * load(row);
      acc1 += p[j] * load(row + 2);
      acc2 += p[j] * load(row + 4);
      acc3 += p[j] * load(row + 6);
    }
    const Double2 acc[4] = {acc0, acc1, acc2, acc3};
    std::memcpy(out + x, acc, sizeof(acc));
  }
  for (; x < d; ++x) {
    double acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += p[j] * v[j * d + x];
    out[x] = acc;
  }
}

// Verify's run on the reduced problem below, against a plain reference in double.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  // Reduced problem: one more (batch, head) pair than cores, at most two query tiles and two
  // softmax steps of keys (tails kept), the same causal offset where it fits.
  Plan plan = full;
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
  std::vector<double> s(plan.sk), ref(plan.d);
  for (int64_t h = 0; h < plan.bh; ++h) {
    double v_max = 0;
    for (int64_t j = 0; j < plan.sk * plan.d; ++j) {
      v_max = std::max(v_max, double(std::abs(v[h * plan.sk * plan.d + j])));
    }
    for (int64_t i = 0; i < plan.sq; ++i) {
      const int64_t visible = plan.causal ? std::min(plan.sk, i + plan.offset() + 1) : plan.sk;
      double mx = -std::numeric_limits<double>::infinity();
      ReferenceDots(&q[(h * plan.sq + i) * plan.d], &k[h * plan.sk * plan.d], visible, plan.d,
                    s.data());
      for (int64_t j = 0; j < visible; ++j) {
        s[j] *= plan.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        s[j] = std::exp(s[j] - mx);  // p
        sum += s[j];
      }
      ReferencePv(s.data(), &v[h * plan.sk * plan.d], visible, plan.d, ref.data());
      for (int64_t x = 0; x < plan.d; ++x) {
        const double want = ref[x] / sum;
        const double got = o[(h * plan.sq + i) * plan.d + x];
        const double tol = p_eps * v_max + out_eps * std::abs(want) + 1e-30;
        if (!Within(got, want, tol)) {
          return WrongAnswer("attention", StrCat("O[", h, ",", i, ",", x, "]"), reduced.ToString(),
                             got, want, tol);
        }
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
