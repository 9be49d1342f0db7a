// CostModel: XGBoost training, and scoring by a flat copy of its trees.
#include "search/cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "search/ubjson.h"

namespace tessel::search {

CostModel::CostModel(int features, uint64_t seed, int rounds, std::string tree_method)
    : features_(features), seed_(seed), rounds_(rounds), tree_method_(std::move(tree_method)) {}

CostModel::~CostModel() { Free(); }

void CostModel::Free() {
  if (booster_ != nullptr) XGBoosterFree(booster_);
  booster_ = nullptr;
  trees_.clear();
  splits_.clear();
  leaves_.clear();
}

bool CostModel::Fit(const std::vector<float>& x, const std::vector<float>& labels,
                    const std::vector<unsigned>& groups) {
  Free();
  DMatrixHandle train = nullptr;
  const bst_ulong rows = labels.size();
  if (XGDMatrixCreateFromMat_omp(x.data(), rows, features_, NAN, &train, 1) != 0) return false;
  bool ok = XGDMatrixSetFloatInfo(train, "label", labels.data(), rows) == 0 &&
            XGDMatrixSetUIntInfo(train, "group", groups.data(), groups.size()) == 0 &&
            XGBoosterCreate(&train, 1, &booster_) == 0;
  const std::string seed = std::to_string(seed_ % 2147483647);
  const std::pair<const char*, const char*> params[] = {
      {"objective", "rank:pairwise"}, {"eta", "0.3"},     {"max_depth", "6"},
      {"min_child_weight", "0.01"},   {"nthread", "1"},   {"tree_method", tree_method_.c_str()},
      {"seed", seed.c_str()},         {"verbosity", "0"}, {"subsample", "1"}};
  for (const auto& [name, value] : params) {
    ok = ok && XGBoosterSetParam(booster_, name, value) == 0;
  }
  for (int round = 0; ok && round < rounds_; ++round) {
    ok = XGBoosterUpdateOneIter(booster_, round, train) == 0;
  }
  XGDMatrixFree(train);
  if (!ok) {
    Free();
    return false;
  }
  // A model this copy cannot read (another XGBoost's format) is scored by XGBoost instead.
  if (!CopyTrees()) {
    trees_.clear();
    splits_.clear();
    leaves_.clear();
  }
  return true;
}

namespace {

// One tree's arrays, as XGBoost saves them.
struct TreeArrays {
  std::vector<int64_t> left, right, feature, default_left, split_type;
  std::vector<float> value;
};

// The base score and the trees of a saved XGBoost model (UBJSON), in boosting order.
bool ReadModel(UbjReader& r, std::string* base_score, std::vector<TreeArrays>* trees) {
  std::string_view key;
  bool done = false;
  // Runs `entry` on each key of the object at the position; false on a malformed object.
  auto each = [&](auto&& entry) {
    if (!r.EnterObject()) return false;
    while (r.Next(&key, &done)) {
      if (!entry(key)) return false;
    }
    return done;
  };
  auto tree = [&](std::string_view k) {
    TreeArrays& t = trees->back();
    if (k == "left_children") return r.Numbers(&t.left);
    if (k == "right_children") return r.Numbers(&t.right);
    if (k == "split_indices") return r.Numbers(&t.feature);
    if (k == "split_conditions") return r.Numbers(&t.value);
    if (k == "default_left") return r.Numbers(&t.default_left);
    if (k == "split_type") return r.Numbers(&t.split_type);
    return r.Skip();
  };
  auto model = [&](std::string_view k) {
    if (k != "trees") return r.Skip();
    if (!r.EnterArray()) return false;
    bool end = false;
    while (r.NextItem(&end)) {
      trees->emplace_back();
      if (!each(tree)) return false;
    }
    return end;
  };
  auto booster = [&](std::string_view k) { return k == "model" ? each(model) : r.Skip(); };
  auto param = [&](std::string_view k) {
    return k == "base_score" ? r.String(base_score) : r.Skip();
  };
  auto learner = [&](std::string_view k) {
    if (k == "learner_model_param") return each(param);
    if (k == "gradient_booster") return each(booster);
    return r.Skip();
  };
  return each([&](std::string_view k) { return k == "learner" ? each(learner) : r.Skip(); });
}

}  // namespace

bool CostModel::CopyTrees() {
  // UBJSON keeps the split conditions and leaf values as float32, exactly.
  bst_ulong length = 0;
  const char* buffer = nullptr;
  if (XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &length, &buffer) != 0) {
    return false;
  }
  UbjReader reader(buffer, length);
  std::string base;
  std::vector<TreeArrays> trees;
  if (!ReadModel(reader, &base, &trees) || base.empty()) return false;
  base_score_ = std::strtof(base.c_str(), nullptr);
  for (const TreeArrays& t : trees) {
    const auto& [left, right, feature, default_left, split_type, value] = t;
    const size_t n = left.size();
    if (right.size() != n || feature.size() != n || value.size() != n || default_left.size() != n ||
        split_type.size() != n || n == 0) {
      return false;
    }
    // Depth of each node reachable from the root (pruned nodes stay in the arrays, unlinked).
    std::vector<int> depth(n, -1);
    int max_depth = 0;
    std::vector<size_t> pending = {0};
    depth[0] = 0;
    while (!pending.empty()) {
      const size_t i = pending.back();
      pending.pop_back();
      if (split_type[i] != 0) return false;  // categorical splits: not ours
      const int64_t l = left[i];
      if (l < 0) continue;
      for (const int64_t child : {l, right[i]}) {
        if (child < 0 || static_cast<size_t>(child) >= n || depth[child] >= 0) return false;
        depth[child] = depth[i] + 1;
        max_depth = std::max(max_depth, depth[child]);
        pending.push_back(static_cast<size_t>(child));
      }
    }
    if (max_depth > 20) return false;
    Tree tree_copy{max_depth, splits_.size(), leaves_.size()};
    splits_.resize(splits_.size() + (size_t{1} << max_depth) - 1);
    leaves_.resize(leaves_.size() + (size_t{1} << max_depth));
    // Walk the tree; `slot` is the node's place in the complete tree of its depth.
    std::vector<std::pair<size_t, size_t>> stack = {{0, 0}};  // (node, slot)
    while (!stack.empty()) {
      const auto [node, slot] = stack.back();
      stack.pop_back();
      const int64_t l = left[node];
      if (l < 0) {
        // A leaf at depth d fills the 2^(max - d) bottom slots under its slot.
        const int below = max_depth - depth[node];
        // The splits under it keep any condition: every path ends at the same value.
        const size_t first = ((slot + 1) << below) - 1 - ((size_t{1} << max_depth) - 1);
        std::fill_n(leaves_.begin() + static_cast<std::ptrdiff_t>(tree_copy.leaves + first),
                    size_t{1} << below, value[node]);
        continue;
      }
      Split& split = splits_[tree_copy.splits + slot];
      if (feature[node] < 0 || feature[node] >= features_) return false;
      split.feature = static_cast<uint32_t>(feature[node]);
      split.condition = value[node];
      split.default_left = default_left[node] != 0;
      stack.emplace_back(static_cast<size_t>(l), 2 * slot + 1);
      stack.emplace_back(static_cast<size_t>(right[node]), 2 * slot + 2);
    }
    trees_.push_back(tree_copy);
  }
  return true;
}

std::vector<float> CostModel::Predict(const std::vector<float>& x) const {
  std::vector<float> scores;
  if (booster_ == nullptr || x.empty()) return scores;
  if (trees_.empty()) return PredictWithXgboost(x);
  const size_t rows = x.size() / features_;
  scores.assign(rows, base_score_);
  // Tree by tree, as XGBoost sums: each row's score is base + tree 0 + tree 1 + ... in float.
  // Rows go down a tree kBlock at a time: their walks are independent, so the core overlaps
  // their loads instead of waiting on one chain of them.
  constexpr size_t kBlock = 8;
  for (const Tree& tree : trees_) {
    const Split* splits = &splits_[tree.splits];
    const float* leaves = &leaves_[tree.leaves];
    const size_t bottom = (size_t{1} << tree.depth) - 1;
    for (size_t first = 0; first < rows; first += kBlock) {
      const size_t block = std::min(kBlock, rows - first);
      size_t slot[kBlock] = {};
      for (int level = 0; level < tree.depth; ++level) {
        for (size_t k = 0; k < block; ++k) {
          const Split& split = splits[slot[k]];
          const float f = x[(first + k) * features_ + split.feature];
          const bool right = std::isnan(f) ? !split.default_left : !(f < split.condition);
          slot[k] = 2 * slot[k] + 1 + static_cast<size_t>(right);
        }
      }
      for (size_t k = 0; k < block; ++k) scores[first + k] += leaves[slot[k] - bottom];
    }
  }
  return scores;
}

std::vector<float> CostModel::PredictWithXgboost(const std::vector<float>& x) const {
  std::vector<float> scores;
  if (booster_ == nullptr || x.empty()) return scores;
  const bst_ulong rows = x.size() / features_;
  DMatrixHandle matrix = nullptr;
  if (XGDMatrixCreateFromMat_omp(x.data(), rows, features_, NAN, &matrix, 1) != 0) return scores;
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* out = nullptr;
  const char* config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                       R"( "strict_shape": false})";
  if (XGBoosterPredictFromDMatrix(booster_, matrix, config, &shape, &dims, &out) == 0) {
    scores.assign(out, out + rows);
  }
  XGDMatrixFree(matrix);
  return scores;
}

}  // namespace tessel::search
