// CostModel: a pairwise-ranking gradient-boosted tree model (XGBoost), scored by its own flat
// copy of the trees.
#ifndef TESSEL_SEARCH_COST_MODEL_H_
#define TESSEL_SEARCH_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::search {

// Trained through XGBoost's C API, single-threaded so that parallel jobs do not fight over cores.
// Higher scores mean faster. Scoring does not go through XGBoost: after each fit the trees are
// copied (from the model's UBJSON) into flat arrays and evaluated here, the same comparisons and
// the same float sums in the same order as XGBoost's CPU predictor, so the scores are identical
// to the last bit (a test checks) at a fraction of the cost: no DMatrix per call, no OpenMP.
class CostModel {
 public:
  CostModel(int features, uint64_t seed, int rounds, std::string tree_method);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Trains a new model on rows `x` (`features` per row) with relevance `labels` in query groups
  // of `groups` rows each. False when XGBoost fails (the old model is dropped).
  bool Fit(const std::vector<float>& x, const std::vector<float>& labels,
           const std::vector<unsigned>& groups);
  // Scores of rows `x`; empty when there is no model.
  std::vector<float> Predict(const std::vector<float>& x) const;
  // Whether Predict scores by the flat copy (false: by XGBoost, when the copy failed).
  bool flat() const { return !trees_.empty(); }
  // The same through XGBoost's predictor (for tests).
  std::vector<float> PredictWithXgboost(const std::vector<float>& x) const;

 private:
  // Each tree as a complete binary tree of its depth: a leaf above the bottom is repeated into
  // every bottom slot below it. Scoring a row then takes `depth` steps with no data-dependent
  // branch (a tree walk mispredicts at almost every level).
  struct Split {
    uint32_t feature = 0;
    float condition = 0;       // left when the feature's value is below it
    bool default_left = true;  // where a missing (NaN) value goes
  };
  struct Tree {
    int depth = 0;
    size_t splits = 0;  // offset of its 2^depth - 1 splits in splits_, in breadth-first order
    size_t leaves = 0;  // offset of its 2^depth leaf values in leaves_
  };
  bool CopyTrees();
  void Free();

  const int features_;
  const uint64_t seed_;
  const int rounds_;
  const std::string tree_method_;
  void* booster_ = nullptr;  // BoosterHandle
  float base_score_ = 0;
  std::vector<Tree> trees_;  // in boosting order
  std::vector<Split> splits_;
  std::vector<float> leaves_;
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_COST_MODEL_H_
