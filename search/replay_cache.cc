#include "search/replay_cache.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "nlohmann/json.hpp"
#include "schema/strings.h"

namespace tessel::search {
namespace {

using nlohmann::json;

// Older Kernel Tuner files mark failures with this time.
constexpr double kFailedTime = 1e20;

absl::StatusOr<std::string> Gunzip(const std::string& data, std::string_view origin) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError("zlib: inflateInit2 failed");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int code = Z_OK;
  while (code != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code != Z_OK && code != Z_STREAM_END) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(
          StrCat(origin, ": corrupt gzip data (zlib error ", code, ")"));
    }
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (code == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(StrCat(origin, ": truncated gzip data"));
    }
  }
  inflateEnd(&stream);
  return out;
}

// A value as Kernel Tuner writes it in a cache key (Python str()).
std::string ValueString(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  return value.dump();
}

}  // namespace

absl::StatusOr<ReplayCache> ReplayCache::Load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(StrCat("cannot open cache file '", path, "'"));
  std::stringstream buffer;
  buffer << file.rdbuf();
  std::string data = buffer.str();
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
      static_cast<unsigned char>(data[1]) == 0x8b) {
    absl::StatusOr<std::string> text = Gunzip(data, path);
    if (!text.ok()) return text.status();
    data = std::move(*text);
  }
  return Parse(data, path);
}

absl::StatusOr<ReplayCache> ReplayCache::Parse(std::string_view text, std::string_view origin) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(StrCat(origin, ": not a JSON object"));
  }
  auto field = [&](const char* name, json::value_t type) -> const json* {
    auto it = doc.find(name);
    return it != doc.end() && it->type() == type ? &*it : nullptr;
  };
  const json* keys = field("tune_params_keys", json::value_t::array);
  const json* tune_params = field("tune_params", json::value_t::object);
  const json* cache = field("cache", json::value_t::object);
  if (keys == nullptr || tune_params == nullptr || cache == nullptr) {
    return absl::InvalidArgumentError(
        StrCat(origin,
               ": not a Kernel Tuner cache file (needs tune_params_keys, tune_params and "
               "cache)"));
  }
  ReplayCache out;
  if (auto it = doc.find("kernel_name"); it != doc.end() && it->is_string()) {
    out.kernel_name_ = it->get<std::string>();
  }
  if (auto it = doc.find("device_name"); it != doc.end() && it->is_string()) {
    out.device_name_ = it->get<std::string>();
  }
  std::vector<std::string> names;
  std::vector<const json*> param_values;
  for (const json& key : *keys) {
    if (!key.is_string()) return absl::InvalidArgumentError(StrCat(origin, ": bad param name"));
    std::string name = key.get<std::string>();
    auto values = tune_params->find(name);
    if (values == tune_params->end() || !values->is_array() || values->empty()) {
      return absl::InvalidArgumentError(
          StrCat(origin, ": tune_params has no values for '", name, "'"));
    }
    kernels::Param param{name, {}, ""};
    for (const json& v : *values) param.values.push_back(ValueString(v));
    out.product_size_ *= param.values.size();
    out.params_.push_back(std::move(param));
    names.push_back(name);
    param_values.push_back(&*values);
  }

  double best = std::numeric_limits<double>::infinity();
  for (const auto& [key, record] : cache->items()) {
    if (!record.is_object()) {
      return absl::InvalidArgumentError(StrCat(origin, ": cache entry '", key, "' not an object"));
    }
    std::vector<std::string_view> key_parts = StrSplit(key, ',');
    uint64_t index = 0, scale = 1;
    for (size_t p = 0; p < names.size(); ++p) {
      const std::vector<std::string>& values = out.params_[p].values;
      int found = -1;
      if (auto it = record.find(names[p]); it != record.end()) {
        for (size_t v = 0; v < param_values[p]->size() && found < 0; ++v) {
          if ((*param_values[p])[v] == *it || values[v] == ValueString(*it)) found = int(v);
        }
      } else if (key_parts.size() == names.size()) {
        auto it = std::find(values.begin(), values.end(), key_parts[p]);
        if (it != values.end()) found = int(it - values.begin());
      }
      if (found < 0) {
        return absl::InvalidArgumentError(StrCat(origin, ": cache entry '", key,
                                                 "' has a value of ", names[p],
                                                 " that is not in tune_params"));
      }
      index += scale * found;
      scale *= values.size();
    }
    // Two keys can name one configuration (a record's values decide over its key): which one
    // measured it is not for this reader to guess, and counting both would count it twice.
    if (out.entries_.contains(index)) {
      return absl::InvalidArgumentError(StrCat(origin, ": cache entry '", key,
                                               "' names the same configuration as an earlier one"));
    }
    Entry entry;
    auto time = record.find("time");
    if (time != record.end() && time->is_number()) {
      double t = time->get<double>();
      entry.ok = std::isfinite(t) && t > 0 && t < kFailedTime;
      if (entry.ok) entry.time = t;
    }
    if (entry.ok) {
      if (auto runs = record.find("times"); runs != record.end() && runs->is_array()) {
        for (const json& r : *runs) {
          if (r.is_number()) entry.runs.push_back(r.get<double>());
        }
      }
      ++out.ok_entries_;
      best = std::min(best, entry.time);
    }
    out.entries_[index] = std::move(entry);
  }
  if (out.ok_entries_ == 0) {
    return absl::InvalidArgumentError(StrCat(origin, ": no successful configuration recorded"));
  }
  out.best_time_ = best;
  return out;
}

std::optional<uint64_t> ReplayCache::IndexOf(const Config& config) const {
  if (config.size() != params_.size()) return std::nullopt;
  uint64_t index = 0, scale = 1;
  for (const kernels::Param& p : params_) {
    std::optional<std::string_view> value = config.Get(p.name);
    if (!value) return std::nullopt;
    auto it = std::find(p.values.begin(), p.values.end(), *value);
    if (it == p.values.end()) return std::nullopt;
    index += scale * uint64_t(it - p.values.begin());
    scale *= p.values.size();
  }
  return index;
}

const ReplayCache::Entry* ReplayCache::Find(uint64_t index) const {
  auto it = entries_.find(index);
  return it == entries_.end() ? nullptr : &it->second;
}

ReplayCache ReplayCache::WithShuffledValues(uint64_t seed) const {
  std::mt19937_64 rng(MixSeed(seed, 0x5487));
  std::vector<std::vector<uint64_t>> perm(params_.size());
  for (size_t p = 0; p < params_.size(); ++p) {
    perm[p].resize(params_[p].values.size());
    std::iota(perm[p].begin(), perm[p].end(), 0);
    std::shuffle(perm[p].begin(), perm[p].end(), rng);
  }
  ReplayCache out = *this;
  out.entries_.clear();
  for (const auto& [index, entry] : entries_) {
    uint64_t rest = index, moved = 0, scale = 1;
    for (size_t p = 0; p < params_.size(); ++p) {
      const uint64_t radix = params_[p].values.size();
      moved += scale * perm[p][rest % radix];
      rest /= radix;
      scale *= radix;
    }
    out.entries_.emplace(moved, entry);
  }
  return out;
}

ReplayCache ReplayCache::WithFailedEntries(double fraction, uint64_t seed) const {
  // Sorted indices, so that the failed set depends on the seed only, not on hash-map order.
  std::vector<uint64_t> ok;
  for (const auto& [index, entry] : entries_) {
    if (entry.ok) ok.push_back(index);
  }
  if (ok.empty()) return *this;
  std::sort(ok.begin(), ok.end());
  std::mt19937_64 rng(MixSeed(seed, 0xfa11));
  std::shuffle(ok.begin(), ok.end(), rng);
  const size_t failed = std::min(ok.size() - 1, static_cast<size_t>(fraction * ok.size()));
  ReplayCache out = *this;
  for (size_t i = 0; i < failed; ++i) {
    Entry& entry = out.entries_[ok[i]];
    entry = Entry{};
  }
  out.ok_entries_ = ok.size() - failed;
  out.best_time_ = std::numeric_limits<double>::infinity();
  for (const auto& [index, entry] : out.entries_) {
    if (entry.ok) out.best_time_ = std::min(out.best_time_, entry.time);
  }
  return out;
}

}  // namespace tessel::search
