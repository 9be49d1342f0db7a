#include "kernels/attention.h"

#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using test_support::ForSnc2AndSnc3;
using test_support::Load;
using test_support::Parse;

using ::testing::HasSubstr;

const Kernel& Attention() { return *FindKernel("attention"); }

// causal: 1 = causal mask, 2 = none.
Problem Attn(int64_t batch, int64_t heads, int64_t sq, int64_t sk, int64_t d, int64_t causal,
             std::string dtype = "bf16") {
  return test_support::ProblemOf(Attention(), {batch, heads, sq, sk, d, causal}, std::move(dtype));
}

// (Tiny problems make most of the space redundant: many draws may be needed.)
std::optional<Config> RandomValid(const Space& space, std::mt19937_64& rng) {
  return test_support::RandomValid(space, rng, 100000);
}

TEST(AttentionTest, ProblemValidationExplainsTheCausalConvention) {
  sim::Target t = Load("snc2");
  EXPECT_TRUE(Attention().ValidateProblem(Attn(1, 2, 64, 64, 64, 1), t).ok());
  EXPECT_THAT(std::string(Attention().ValidateProblem(Attn(1, 2, 64, 64, 64, 3), t).message()),
              HasSubstr("causal=1 for a causal mask, causal=2 for none"));
  EXPECT_THAT(std::string(Attention().ValidateProblem(Attn(1, 2, 128, 64, 64, 1), t).message()),
              HasSubstr("seq_q <= seq_k"));
  EXPECT_TRUE(Attention().ValidateProblem(Attn(1, 2, 128, 64, 64, 2), t).ok());
  EXPECT_THAT(std::string(Attention().ValidateProblem(Attn(1, 2, 64, 64, 256, 2), t).message()),
              HasSubstr("head_dim=256 exceeds the TensorE contraction limit 128"));
  sim::Target no_fp8 = t;
  no_fp8.matmul_fp8_factor = 0;
  EXPECT_THAT(
      std::string(Attention().ValidateProblem(Attn(1, 2, 64, 64, 64, 2, "fp8"), no_fp8).message()),
      HasSubstr("not supported"));
  EXPECT_TRUE(Attention().ValidateProblem(Attn(1, 2, 64, 64, 64, 2, "fp8"), t).ok());
  EXPECT_TRUE(Attention().ValidateProblem(Attn(1, 2, 64, 64, 64, 2, "fp8"), Load("snc3")).ok());
}

TEST(AttentionTest, MinimumWorkCountsCausalPairsHonestly) {
  const Kernel::Work full = Attention().MinimumWork(Attn(1, 1, 4, 4, 8, 2));
  const Kernel::Work causal = Attention().MinimumWork(Attn(1, 1, 4, 4, 8, 1));
  EXPECT_DOUBLE_EQ(full.flops, 4.0 * 16 * 8);
  EXPECT_DOUBLE_EQ(causal.flops, 4.0 * (1 + 2 + 3 + 4) * 8);
  // seq_q < seq_k: the last query sees every key.
  EXPECT_DOUBLE_EQ(Attention().MinimumWork(Attn(1, 1, 2, 4, 8, 1)).flops, 4.0 * (3 + 4) * 8);
}

TEST(AttentionTest, DefaultIsValidSimulatesAndVerifies) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Attn(1, 2, 512, 512, 128, 1), Attn(2, 3, 100, 300, 64, 2),
                      Attn(1, 1, 1, 1, 1, 1), Attn(1, 2, 256, 256, 128, 2, "fp32")}) {
      const std::optional<sim::SimResult> r = test_support::ExpectDefaultWorks(Attention(), p, t);
      ASSERT_TRUE(r.has_value());
    }
  }
}

TEST(AttentionTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Attn(1, 16, 4096, 4096, 128, 1);
  Space space = *Attention().SpaceFor(p, t);
  Config base = Attention().Default(p, t);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  EXPECT_THAT(reason({{"evict", "gpsimd"}}), HasSubstr("GpSimd cannot access PSUM"));
  EXPECT_THAT(
      reason({{"kv_block", "4"}}),
      HasSubstr(
          "8 score banks (kv_block x 2 x q_group) + 1 P^T bank + 1 output bank(s) = 10 exceed"));
  Config four = base;
  four.Set("kv_block", "4");
  four.Set("bufs", "1");
  EXPECT_TRUE(space.Validate(four).ok()) << space.Validate(four);
  Problem full = Attn(1, 16, 4096, 4096, 128, 2);
  Config skip = base;
  skip.Set("causal_skip", "1");
  EXPECT_TRUE(space.Validate(skip).ok());
  // Not offered for non-causal problems, and rejected with the reason by the plan.
  EXPECT_FALSE(Attention().SpaceFor(full, t)->Validate(skip).ok());
  EXPECT_THAT(std::string(Attention().Lower(full, skip, t).status().message()),
              HasSubstr("causal_skip=1 needs a causal problem"));
  Space one = *Attention().SpaceFor(Attn(1, 1, 128, 4096, 128, 2), t);
  Config resident = Attention().Default(Attn(1, 1, 128, 4096, 128, 2), t);
  resident.Set("kv_resident", "1");
  EXPECT_THAT(std::string(one.Validate(resident).message()), HasSubstr("one query tile"));
  resident.Set("shards", "2");
  resident.Set("kv_resident", "0");
  EXPECT_THAT(std::string(one.Validate(resident).message()), HasSubstr("exceeds the 1 (batch"));
}

// The space is too large to enumerate in a test (tens of millions of points): finding 2,000
// distinct valid configs by seeded random draws proves the valid count is at least that.
TEST(AttentionTest, LargeShapeSpaceHasManyValidConfigs) {
  ForSnc2AndSnc3(Attention(), Attn(1, 16, 4096, 4096, 128, 1),
                 [](const char* target, const Space& space) {
                   std::mt19937_64 rng(3);
                   std::set<uint64_t> valid;
                   for (int draw = 0; draw < 200000 && valid.size() < 2000; ++draw) {
                     const uint64_t i = rng() % space.Size();
                     if (space.Validate(space.Decode(i)).ok()) valid.insert(i);
                   }
                   EXPECT_GE(valid.size(), 2000u) << target << " of " << space.Size();
                 });
}

// The acceptance test of issue 4: at least 200 random valid configs on random (often ragged,
// often sharded, causal and not) shapes match the reference on the CPU.
TEST(AttentionTest, RandomValidConfigsVerify) {
  std::mt19937_64 rng(77);
  int verified = 0, sharded = 0, ragged = 0, causal = 0;
  for (int i = 0; i < 220; ++i) {
    sim::Target t = Load(i % 2 ? "snc3" : "snc2");
    std::uniform_int_distribution<int64_t> small(1, 3), seq(1, 300), dims(1, 128);
    const char* dtype = i % 5 == 0 ? "fp32" : (i % 6 == 1 ? "fp8" : "bf16");
    int64_t sq = seq(rng), sk = seq(rng);
    const int64_t mask = rng() % 2 ? 1 : 2;
    if (mask == 1 && sq > sk) std::swap(sq, sk);
    Problem p = Attn(small(rng), small(rng), sq, sk, dims(rng) % 2 ? 64 : dims(rng), mask, dtype);
    Space space = *Attention().SpaceFor(p, t);
    std::optional<Config> c = RandomValid(space, rng);
    ASSERT_TRUE(c.has_value()) << p.dims.ToString();
    absl::Status status = Attention().Verify(p, *c, t);
    ASSERT_TRUE(status.ok()) << p.dims.ToString() << " " << p.dtype << " " << c->ToString() << ": "
                             << status;
    ++verified;
    sharded += *c->GetInt("shards") > 1;
    ragged += sk % *c->GetInt("kv_tile") != 0 || sq % *c->GetInt("block_q") != 0;
    causal += mask == 1;
  }
  EXPECT_GE(verified, 200);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(ragged, 100);
  EXPECT_GE(causal, 60);
}

TEST(AttentionTest, BrokenLoweringsAreCaughtAsDataLoss) {
  sim::Target t = Load("snc3");
  Problem p = Attn(1, 3, 200, 700, 64, 1);
  Config c = Parse(
      "block_q=64,kv_tile=128,kv_block=2,q_group=2,qk_role=q,pv_role=p,qk_transpose=dma,p_"
      "transpose=tensor,"
      "softmax_src=psum,sum_engine=scalar,stats_engine=scalar,evict=split,kv_resident=0,bufs=1,"
      "causal_skip=1,pipeline=1,softmax_ops=tile,softmax=online,mask=select,exp_layout=s,"
      "max_dtype=input,shards=2");
  // The same with the deepest pipeline and step-wide softmax instructions, and with the
  // two-pass softmax (which has no rescale to skip) masking by matmul.
  Config deep = c;
  deep.Set("pipeline", "3");
  deep.Set("softmax_ops", "step");
  deep.Set("p_transpose", "half");
  Config two_pass = deep;
  two_pass.Set("softmax", "two_pass");
  two_pass.Set("mask", "matmul");
  Config st = two_pass;  // P^T straight from exp, row sums from PV
  st.Set("exp_layout", "st");
  st.Set("p_transpose", "tensor");
  Config fast = st;  // the fp8 max pass, scores two steps ahead
  fast.Set("max_dtype", "fp8");
  fast.Set("pipeline", "4");
  for (const Config& config : {c, deep, two_pass, st, fast}) {
    ASSERT_TRUE(Attention().SpaceFor(p, t)->Validate(config).ok())
        << Attention().SpaceFor(p, t)->Validate(config);
    ASSERT_TRUE(Attention().Verify(p, config, t).ok());
    for (AttentionFault fault : {AttentionFault::kDropRaggedKvTile, AttentionFault::kSkipRescale,
                                 AttentionFault::kCausalSkipOffByOne}) {
      if (fault == AttentionFault::kSkipRescale && config.Get("softmax") == "two_pass") continue;
      SetAttentionFaultForTesting(fault);
      absl::Status status = Attention().Verify(p, config, t);
      SetAttentionFaultForTesting(AttentionFault::kNone);
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss)
          << config.ToString() << " " << int(fault) << ": " << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr("attention wrong answer"));
    }
  }
}

// Every pipeline order, with per-tile and per-step softmax instructions, every P^T split, both
// softmax forms and both causal masks, computes the right answer on ragged causal and non-causal
// problems with two groups in flight.
TEST(AttentionTest, PipelineOrdersAndStepOpsVerify) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Attn(1, 3, 300, 700, 64, 1), Attn(2, 1, 250, 333, 96, 2)}) {
      Config c = Parse(
          "block_q=64,kv_tile=128,kv_block=2,q_group=2,qk_role=q,pv_role=p,qk_transpose=dma,"
          "p_transpose=tensor,softmax_src=psum,sum_engine=scalar,stats_engine=vector,"
          "evict=scalar,kv_resident=1,bufs=1,causal_skip=0,pipeline=0,softmax_ops=tile,"
          "softmax=online,mask=select,exp_layout=s,max_dtype=input,shards=2");
      int combination = 0;
      for (const char* pipeline : {"0", "1", "2", "3", "4"}) {
        for (const char* ops : {"tile", "step"}) {
          for (const char* pt : {"tensor", "dma", "half", "two_thirds"}) {
            for (const char* src : {"psum", "sbuf"}) {
              // The two-pass softmax on every third combination (the test's time; 3 is prime to
              // every loop length, so it meets every value of each).
              // (pipeline=4 is two-pass only.)
              const bool two = ++combination % 3 == 0 || std::string_view(pipeline) == "4";
              c.Set("softmax", two ? "two_pass" : "online");
              const bool causal = *p.dims.Get("causal") == 1;
              c.Set("mask", causal && combination % 2 == 0 ? "matmul" : "select");
              // The S^T exp pass where it applies (it makes no P^T).
              const bool st = two && std::string_view(pt) == "tensor";
              c.Set("exp_layout", st ? "st" : "s");
              // The fp8 max pass where the target has fp8 (every other two-pass combination).
              const bool fp8 = two && std::string_view(target) == "snc3" && combination % 2 == 1;
              c.Set("max_dtype", fp8 ? "fp8" : "input");
              c.Set("pipeline", pipeline);
              c.Set("softmax_ops", ops);
              c.Set("p_transpose", pt);
              c.Set("softmax_src", src);
              c.Set("causal_skip", *p.dims.Get("causal") == 1 ? "1" : "0");
              ASSERT_TRUE(Attention().SpaceFor(p, t)->Validate(c).ok()) << c.ToString();
              absl::Status status = Attention().Verify(p, c, t);
              EXPECT_TRUE(status.ok()) << target << " " << c.ToString() << ": " << status;
              EXPECT_TRUE(Evaluate(Attention(), p, c, t).ok()) << c.ToString();
            }
          }
        }
      }
    }
  }
}

// Issue 4's attention workload: the best config `tessel tune` found (budget 1500) verifies and
// reaches 39% of the Tensor roofline on snc3; the best online-softmax config stays above the
// 20.9% of the first lowering. (Issue 4 asked for 40%, reached while snc3 ran every fp8 tile at
// 2x and the max pass in fp8 gained from it; since snc3 version 2 fp8 is 2x only in double-row
// K=256 tiles, which head_dim=128 cannot use, as on trn2, and the best reaches 39.9%.)
TEST(AttentionTest, Issue4TunedConfigReaches39PercentOfTheRoofline) {
  sim::Target t = Load("snc3");
  Problem p = Attn(1, 16, 4096, 4096, 128, 1);
  const Config best = Parse(
      "block_q=128,kv_tile=128,kv_block=2,q_group=2,qk_role=q,pv_role=p,qk_transpose=dma,"
      "p_transpose=tensor,softmax_src=psum,sum_engine=scalar,stats_engine=scalar,evict=scalar,"
      "kv_resident=1,bufs=1,causal_skip=1,pipeline=4,softmax_ops=step,mask=matmul,"
      "exp_layout=st,max_dtype=input,softmax=two_pass,shards=8");
  const Config online = Parse(
      "block_q=128,kv_tile=512,kv_block=2,q_group=2,qk_role=q,pv_role=p,qk_transpose=dma,"
      "p_transpose=half,softmax_src=psum,sum_engine=scalar,stats_engine=scalar,evict=scalar,"
      "kv_resident=1,bufs=1,causal_skip=1,pipeline=3,softmax_ops=step,softmax=online,"
      "mask=select,exp_layout=s,max_dtype=input,shards=8");
  for (const auto& [c, floor] : {std::pair{best, 0.39}, std::pair{online, 0.209}}) {
    ASSERT_TRUE(Attention().SpaceFor(p, t)->Validate(c).ok()) << c.ToString();
    absl::StatusOr<sim::SimResult> r = Evaluate(Attention(), p, c, t);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(RooflineNs(Attention(), p, t) / r->time_ns, floor) << c.ToString();
    EXPECT_TRUE(Attention().Verify(p, c, t).ok()) << c.ToString();
  }
}

// NeuronCore-v3 TensorE transposes keep bf16 in PSUM (NKI nc_transpose: is_transpose, output
// dtype = input dtype), so their evictions are bf16 copies in VectorE's performance mode; on
// NeuronCore-v2 a transpose is an fp32 matmul result like any other.
TEST(AttentionTest, Snc3TransposesKeepBf16InPsumAndEvictInPerformanceMode) {
  Problem p = Attn(1, 2, 512, 512, 128, 1);
  const Config c = Parse(
      "block_q=128,kv_tile=256,kv_block=1,q_group=1,qk_role=q,pv_role=p,qk_transpose=tensor,"
      "p_transpose=tensor,softmax_src=psum,sum_engine=scalar,stats_engine=scalar,evict=vector,"
      "kv_resident=0,bufs=2,causal_skip=1,pipeline=0,softmax_ops=tile,mask=select,exp_layout=s,"
      "max_dtype=input,softmax=online,shards=1");
  auto bf16_evictions = [&](const sim::Target& t) {
    absl::StatusOr<sim::Program> program = Attention().Lower(p, c, t);
    EXPECT_TRUE(program.ok()) << program.status();
    int n = 0;
    for (const sim::Instruction& inst : program->cores[0].instructions) {
      n += inst.op == sim::Op::kTensorCopy && inst.in0 == sim::Mem::kPsum &&
           inst.dtype == sim::DType::kBf16 && inst.out_dtype == sim::DType::kBf16;
    }
    return n;
  };
  const sim::Target snc2 = Load("snc2"), snc3 = Load("snc3");
  ASSERT_TRUE(snc3.transpose_keeps_dtype);
  ASSERT_FALSE(snc2.transpose_keeps_dtype);
  // Per head: 4 Q^T and 4 K^T evictions, and one P^T eviction per (query, key) tile pair seen.
  EXPECT_GE(bf16_evictions(snc3), 2 * (4 + 4 + 4));
  EXPECT_EQ(bf16_evictions(snc2), 0);
  sim::Target fp32_transposes = snc3;
  fp32_transposes.transpose_keeps_dtype = false;
  EXPECT_EQ(bf16_evictions(fp32_transposes), 0);
  absl::StatusOr<sim::SimResult> kept = Evaluate(Attention(), p, c, snc3);
  absl::StatusOr<sim::SimResult> fp32 = Evaluate(Attention(), p, c, fp32_transposes);
  ASSERT_TRUE(kept.ok() && fp32.ok());
  const auto vector_busy = [](const sim::SimResult& r) {
    return r.engines[int(sim::EngineKind::kVector)].busy_ticks;
  };
  EXPECT_LT(vector_busy(*kept), vector_busy(*fp32));
  EXPECT_LE(kept->time_ns, fp32->time_ns);
  EXPECT_TRUE(Attention().Verify(p, c, snc3).ok());
}

TEST(AttentionTest, CausalSkippingHalvesTensorWork) {
  sim::Target t = Load("snc3");
  Problem p = Attn(1, 2, 2048, 2048, 128, 1);
  Config c = Attention().Default(p, t);
  absl::StatusOr<sim::SimResult> masked = Evaluate(Attention(), p, c, t);
  c.Set("causal_skip", "1");
  absl::StatusOr<sim::SimResult> skipped = Evaluate(Attention(), p, c, t);
  ASSERT_TRUE(masked.ok() && skipped.ok());
  const auto tensor = [](const sim::SimResult& r) {
    return r.engines[int(sim::EngineKind::kTensor)].instructions;
  };
  // 16 query tiles x 4 key tiles, of which 4 x (1 + 2 + 3 + 4) = 40 are not above the diagonal;
  // skipping also trims each query tile's diagonal tile to the keys its queries see (128, 256, 384
  // or 512 of 512), so the TensorE work per key falls below the 40/64 of whole tiles, but not
  // below the 136/160 of their 128-key chunks that remain.
  EXPECT_LT(tensor(*skipped) * 64, tensor(*masked) * 40);
  EXPECT_GE(tensor(*skipped) * 64 * 160, tensor(*masked) * 40 * 136);
  EXPECT_LT(skipped->time_ns, 0.7 * masked->time_ns);
}

}  // namespace
}  // namespace tessel::kernels
