#include "kernels/advice.h"

#include <algorithm>
#include <string_view>

#include "fmt/format.h"
#include "schema/strings.h"

namespace tessel::kernels {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Params whose larger values move more data per transfer.
bool SizesTransfers(std::string_view name) {
  return StartsWith(name, "tile_") || StartsWith(name, "block_") || StartsWith(name, "kv_") ||
         name == "chunk" || name == "rows_per_partition" || name == "batch_group";
}
// Params that keep operands on chip (0/1) when set.
bool KeepsResident(std::string_view name) { return name == "hoist" || EndsWith(name, "resident"); }
// Params that choose the engine a part of the work runs on.
bool ChoosesEngine(std::string_view name) {
  return name == "evict" || EndsWith(name, "_engine") || name == "softmax_src";
}

// The index of `value` in `param`'s values, or -1.
int IndexOf(const Param& param, std::string_view value) {
  for (size_t i = 0; i < param.values.size(); ++i) {
    if (param.values[i] == value) return int(i);
  }
  return -1;
}

// Whether `config` with `name` set to `value` is a config of `space` (a suggestion the space
// rejects, such as a buffer count that no longer fits, would send the user to an error).
bool ValidWith(const Space& space, const Config& config, const std::string& name,
               const std::string& value) {
  Config changed = config;
  changed.Set(name, value);
  return space.Validate(changed).ok();
}

// The first value of `p` after `now` that keeps the config valid, or -1.
int NextValid(const Space& space, const Config& config, const Param& p, std::string_view now) {
  const int at = IndexOf(p, now);
  if (at < 0) return -1;
  for (size_t i = size_t(at) + 1; i < p.values.size(); ++i) {
    if (ValidWith(space, config, p.name, p.values[i])) return int(i);
  }
  return -1;
}

// Adds a suggestion: its text and the change it names.
void Suggest(Bottleneck& b, std::string text, std::string param, std::string value) {
  b.try_next.push_back(std::move(text));
  b.changes.emplace_back(std::move(param), std::move(value));
}

// "P=V" for the next value of P (a larger one: values are listed in ascending order where their
// order means anything) that keeps the config valid, when there is one.
void Next(const Space& space, const Config& config, const Param& p, std::string_view now,
          Bottleneck& b) {
  const int next = NextValid(space, config, p, now);
  if (next >= 0) {
    Suggest(b, fmt::format("{}={}", p.name, p.values[size_t(next)]), p.name,
            p.values[size_t(next)]);
  }
}

}  // namespace

std::string Bottleneck::Summary() const {
  std::vector<std::string> busy;
  for (const auto& [engine, frac] : busiest) {
    busy.push_back(fmt::format("{} {:.0f}%", engine, 100 * frac));
  }
  std::string text = fmt::format("{}-bound", bound);
  if (!busy.empty()) text += " (" + StrJoin(busy, ", ") + ")";
  if (!try_next.empty()) {
    const size_t n = std::min<size_t>(try_next.size(), 3);
    text += ": try " + StrJoin(std::vector<std::string>(try_next.begin(), try_next.begin() + n),
                               n == 2 ? " or " : ", ");
  }
  return text;
}

Bottleneck FindBottleneck(const Space& space, const Config& config, const sim::SimResult& result,
                          const std::vector<std::string>& faster_dtypes) {
  Bottleneck b;
  b.bound = result.bound;
  for (const sim::SimResult::Busy& busy : result.busiest) {
    if (busy.busy_frac > 0) {
      b.busiest.emplace_back(std::string(sim::EngineName(busy.resource)), busy.busy_frac);
    }
  }
  const bool dma = b.bound == "dma", tensor = b.bound == "tensor", latency = b.bound == "latency";
  for (const Param& p : space.params()) {
    const std::optional<std::string_view> now = config.Get(p.name);
    if (!now) continue;
    if (dma || latency) {
      if (p.name == "bufs" || p.name == "pipeline") Next(space, config, p, *now, b);
    }
    if (dma) {
      if (KeepsResident(p.name)) {
        if (*now == "0" && IndexOf(p, "1") >= 0 && ValidWith(space, config, p.name, "1")) {
          Suggest(b, p.name + "=1", p.name, "1");
        }
      } else if (SizesTransfers(p.name)) {
        Next(space, config, p, *now, b);
      }
    } else if (tensor || latency) {
      if (p.name == "shards") Next(space, config, p, *now, b);
      // TensorE: larger tiles make longer matmuls, each paying its fixed cost once, and a K=256
      // contraction runs fp8 at double rate where the target has the double-row mode.
      if (tensor && SizesTransfers(p.name) && !KeepsResident(p.name)) {
        Next(space, config, p, *now, b);
      }
    } else if (ChoosesEngine(p.name)) {
      // A compute engine other than TensorE: another value of a param that places work.
      for (const std::string& v : p.values) {
        if (v != *now && v != b.bound && ValidWith(space, config, p.name, v)) {
          Suggest(b, fmt::format("{}={}", p.name, v), p.name, v);
          break;
        }
      }
    }
  }
  if (tensor && !faster_dtypes.empty()) Suggest(b, "dtype=" + faster_dtypes.front(), "", "");
  return b;
}

void KeepFasterChanges(Bottleneck& b, const Kernel& kernel, const Problem& problem,
                       const sim::Target& target, const Config& config, double time_ns) {
  struct Kept {
    double time_ns;
    std::string text;
    std::pair<std::string, std::string> change;
  };
  std::vector<Kept> faster, other;
  for (size_t i = 0; i < b.try_next.size(); ++i) {
    const auto& [param, value] = b.changes[i];
    if (param.empty()) {
      other.push_back({0, b.try_next[i], b.changes[i]});
      continue;
    }
    Config changed = config;
    changed.Set(param, value);
    absl::StatusOr<sim::SimResult> r = Evaluate(kernel, problem, changed, target, {});
    if (!r.ok() || !(r->time_ns < time_ns)) continue;
    faster.push_back(
        {r->time_ns,
         fmt::format("{}={} ({:+.1f}%)", param, value, 100 * (r->time_ns / time_ns - 1)),
         b.changes[i]});
  }
  std::stable_sort(faster.begin(), faster.end(),
                   [](const Kept& x, const Kept& y) { return x.time_ns < y.time_ns; });
  b.try_next.clear();
  b.changes.clear();
  for (std::vector<Kept>* list : {&faster, &other}) {
    for (Kept& k : *list) {
      b.try_next.push_back(std::move(k.text));
      b.changes.push_back(std::move(k.change));
    }
  }
}

Bottleneck Advise(const Kernel& kernel, const Problem& problem, const sim::Target& target,
                  const Space& space, const Config& config, const sim::SimResult& result) {
  Bottleneck b = FindBottleneck(space, config, result, FasterDTypes(kernel, problem.dtype, target));
  KeepFasterChanges(b, kernel, problem, target, config, result.time_ns);
  return b;
}

std::vector<std::string> FasterDTypes(const Kernel& kernel, std::string_view dtype,
                                      const sim::Target& target) {
  auto peak = [&](std::string_view name) {
    absl::StatusOr<sim::DType> d = sim::ParseDType(name);
    return d.ok() && target.SupportsDType(*d) ? target.PeakTflops(*d) : 0.0;
  };
  const double now = peak(dtype);
  std::vector<std::pair<double, std::string>> faster;
  for (const std::string& d : kernel.dtypes()) {
    if (peak(d) > now) faster.emplace_back(peak(d), d);
  }
  std::stable_sort(faster.begin(), faster.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [tflops, d] : faster) out.push_back(std::move(d));
  return out;
}

}  // namespace tessel::kernels
