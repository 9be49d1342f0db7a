#include "search/space.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace tessel::search {
namespace {

// Most values a numeric parameter read as a code (0, 1, ..., n-1) may have.
constexpr int kMaxCodeValues = 8;

std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool IsPowerOfTwo(double value) {
  if (value < 1 || value != std::floor(value) || value > 9.0e15) return false;
  auto v = static_cast<uint64_t>(value);
  return (v & (v - 1)) == 0;
}

bool IsPermutationOf(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  std::string x = a, y = b;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

}  // namespace

ParamKind InferKind(const std::vector<std::string>& values) {
  bool numeric = !values.empty(), pow2 = values.size() > 1;
  for (const std::string& v : values) {
    std::optional<double> number = ParseNumber(v);
    numeric = numeric && number.has_value();
    pow2 = pow2 && number && IsPowerOfTwo(*number);
  }
  if (numeric) return pow2 ? ParamKind::kPowerOfTwo : ParamKind::kInteger;
  bool permutation = values.size() > 1 && values[0].size() > 1;
  for (const std::string& v : values) permutation = permutation && IsPermutationOf(v, values[0]);
  return permutation ? ParamKind::kPermutation : ParamKind::kCategorical;
}

SearchSpace::SearchSpace(const kernels::Space& space) : space_(space) {
  for (const kernels::Param& param : space.params()) {
    const std::vector<std::string>& values = param.values;
    int radix = std::max<int>(1, static_cast<int>(values.size()));
    radix_.push_back(radix);
    stride_.push_back(size_);
    size_ *= radix;
    ParamKind kind = InferKind(values);
    kinds_.push_back(kind);

    std::vector<double> features(radix, 0.0);
    for (int v = 0; v < static_cast<int>(values.size()); ++v) {
      if (kind == ParamKind::kInteger)
        features[v] = *ParseNumber(values[v]);
      else if (kind == ParamKind::kPowerOfTwo)
        features[v] = std::log2(*ParseNumber(values[v]));
      else
        features[v] = v;
    }
    features_.push_back(features);

    std::vector<std::vector<int>> moves(radix);
    // Numeric values 0, 1, ..., n-1 (a few of them) are usually a code for a choice (method
    // 0/1/2) rather than a quantity, so every value is a neighbour; for quantities the neighbours
    // are the next smaller and larger value.
    bool code = kind == ParamKind::kInteger && radix >= 3 && radix <= kMaxCodeValues;
    for (int v = 0; code && v < radix; ++v) code = features[v] == v;
    if ((kind == ParamKind::kInteger || kind == ParamKind::kPowerOfTwo) && !code) {
      std::vector<int> order(radix);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return features[a] < features[b]; });
      for (int r = 0; r < radix; ++r) {
        if (r > 0) moves[order[r]].push_back(order[r - 1]);
        if (r + 1 < radix) moves[order[r]].push_back(order[r + 1]);
      }
    } else if (kind == ParamKind::kPermutation) {
      for (int v = 0; v < radix; ++v) {
        for (size_t i = 0; i + 1 < values[v].size(); ++i) {
          std::string swapped = values[v];
          std::swap(swapped[i], swapped[i + 1]);
          auto it = std::find(values.begin(), values.end(), swapped);
          if (it != values.end() && it - values.begin() != v) {
            moves[v].push_back(static_cast<int>(it - values.begin()));
          }
        }
        // A permutation value set without adjacent swaps still needs moves.
        if (moves[v].empty()) {
          for (int w = 0; w < radix; ++w) {
            if (w != v) moves[v].push_back(w);
          }
        }
      }
    } else {
      for (int v = 0; v < radix; ++v) {
        for (int w = 0; w < radix; ++w) {
          if (w != v) moves[v].push_back(w);
        }
      }
    }
    moves_.push_back(std::move(moves));
  }
}

bool SearchSpace::Valid(uint64_t index) const {
  if (index >= size_) return false;
  auto [it, inserted] = valid_memo_.try_emplace(index, false);
  if (inserted) it->second = space_.ValidateAt(index).ok();
  return it->second;
}

void SearchSpace::Features(uint64_t index, std::vector<float>& out) const {
  for (int p = 0; p < num_params(); ++p) {
    out.push_back(static_cast<float>(features_[p][ValueAt(index, p)]));
  }
  if (has_estimate()) {
    const double estimate = EstimateAt(index);
    out.push_back(std::isfinite(estimate) && estimate > 0 ? static_cast<float>(std::log(estimate))
                                                          : NAN);
  }
}

double SearchSpace::EstimateAt(uint64_t index) const {
  if (!has_estimate() || index >= size_) return std::numeric_limits<double>::infinity();
  auto [it, inserted] = estimate_memo_.try_emplace(index, 0.0);
  if (inserted) {
    std::optional<double> estimate = space_.EstimateNs(space_.Decode(index));
    it->second = estimate.value_or(std::numeric_limits<double>::infinity());
  }
  return it->second;
}

int SearchSpace::Distance(uint64_t a, uint64_t b) const {
  int d = 0;
  for (int p = 0; p < num_params(); ++p) d += ValueAt(a, p) != ValueAt(b, p);
  return d;
}

std::vector<uint64_t> SearchSpace::Neighbours(uint64_t index, int radius) const {
  std::vector<uint64_t> out;
  const int n = num_params();
  if (radius <= 1) {
    for (int p = 0; p < n; ++p) {
      for (int v : MovesFrom(p, ValueAt(index, p))) {
        uint64_t next = WithValue(index, p, v);
        if (Valid(next)) out.push_back(next);
      }
    }
    return out;
  }
  for (int p = 0; p < n; ++p) {
    for (int q = p + 1; q < n; ++q) {
      for (int v : MovesFrom(p, ValueAt(index, p))) {
        uint64_t mid = WithValue(index, p, v);
        for (int w : MovesFrom(q, ValueAt(index, q))) {
          uint64_t next = WithValue(mid, q, w);
          if (Valid(next)) out.push_back(next);
        }
      }
    }
  }
  return out;
}

std::vector<uint64_t> SearchSpace::Ball(uint64_t index, int radius) const {
  std::vector<uint64_t> out;
  const int n = num_params();
  for (int p = 0; p < n; ++p) {
    for (int v = 0; v < radix(p); ++v) {
      if (v == ValueAt(index, p)) continue;
      const uint64_t mid = WithValue(index, p, v);
      if (Valid(mid)) out.push_back(mid);
      if (radius < 2) continue;
      for (int q = p + 1; q < n; ++q) {
        for (int w = 0; w < radix(q); ++w) {
          if (w == ValueAt(index, q)) continue;
          const uint64_t next = WithValue(mid, q, w);
          if (Valid(next)) out.push_back(next);
        }
      }
    }
  }
  return out;
}

}  // namespace tessel::search
