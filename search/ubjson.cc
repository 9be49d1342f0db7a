#include "search/ubjson.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace tessel::search {
namespace {

constexpr size_t kMaxDepth = 64;

// Bytes of a value of a fixed-size marker, 0 for the others.
size_t FixedSize(char marker) {
  switch (marker) {
    case 'i':
    case 'U':
    case 'C':
      return 1;
    case 'I':
      return 2;
    case 'l':
    case 'd':
      return 4;
    case 'L':
    case 'D':
      return 8;
    default:
      return 0;
  }
}

bool IsInt(char marker) {
  return marker == 'i' || marker == 'U' || marker == 'I' || marker == 'l' || marker == 'L';
}

uint64_t BigEndian(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

bool UbjReader::Byte(char* c) {
  if (p_ >= end_) return false;
  *c = *p_++;
  return true;
}

bool UbjReader::Marker(char* c) {
  if (implied_ != 0) {
    *c = implied_;
    implied_ = 0;
    return true;
  }
  return Byte(c);
}

bool UbjReader::Int(char marker, int64_t* v) {
  const size_t n = FixedSize(marker);
  if (!IsInt(marker) || size_t(end_ - p_) < n) return false;
  const uint64_t bits = BigEndian(p_, n);
  p_ += n;
  switch (marker) {
    case 'i':
      *v = static_cast<int8_t>(bits);
      break;
    case 'U':
      *v = static_cast<uint8_t>(bits);
      break;
    case 'I':
      *v = static_cast<int16_t>(bits);
      break;
    case 'l':
      *v = static_cast<int32_t>(bits);
      break;
    default:
      *v = static_cast<int64_t>(bits);
  }
  return true;
}

bool UbjReader::Length(int64_t* n) {
  char marker = 0;
  return Byte(&marker) && Int(marker, n) && *n >= 0 && *n <= end_ - p_;
}

bool UbjReader::Double(char marker, double* v) {
  const size_t n = FixedSize(marker);
  if ((marker != 'd' && marker != 'D') || size_t(end_ - p_) < n) return false;
  const uint64_t bits = BigEndian(p_, n);
  p_ += n;
  if (marker == 'd') {
    const uint32_t b32 = static_cast<uint32_t>(bits);
    float f = 0;
    std::memcpy(&f, &b32, sizeof f);
    *v = f;
  } else {
    std::memcpy(v, &bits, sizeof *v);
  }
  return true;
}

bool UbjReader::Header(Container* c) {
  if (p_ < end_ && *p_ == '$') {
    ++p_;
    if (!Byte(&c->type) || p_ >= end_ || *p_ != '#') return false;
  }
  if (p_ < end_ && *p_ == '#') {
    ++p_;
    char marker = 0;
    if (!Byte(&marker) || !Int(marker, &c->left) || c->left < 0) return false;
  }
  return true;
}

bool UbjReader::Value(char marker) {
  if (open_.size() > kMaxDepth) return false;
  if (const size_t n = FixedSize(marker); n > 0) {
    if (size_t(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  switch (marker) {
    case 'Z':
    case 'N':
    case 'T':
    case 'F':
      return true;
    case 'S':
    case 'H': {
      int64_t n = 0;
      if (!Length(&n)) return false;
      p_ += n;
      return true;
    }
    case '[':
    case '{': {
      const bool object = marker == '{';
      Container c;
      if (!Header(&c)) return false;
      if (c.type != 0) {
        // Typed: elements (and an object's values) carry no marker.
        const size_t size = FixedSize(c.type);
        if (!object && size > 0) {
          if (uint64_t(c.left) > uint64_t(end_ - p_) / size) return false;
          p_ += c.left * int64_t(size);
          return true;
        }
      }
      open_.push_back(c);
      for (int64_t i = 0; c.left < 0 || i < c.left; ++i) {
        if (c.left < 0 && p_ < end_ && *p_ == (object ? '}' : ']')) {
          ++p_;
          break;
        }
        if (object) {
          int64_t n = 0;
          if (!Length(&n)) return false;
          p_ += n;
        }
        if (!(c.type != 0 ? Value(c.type) : Skip())) return false;
      }
      open_.pop_back();
      return true;
    }
    default:
      return false;
  }
}

bool UbjReader::Skip() {
  char marker = 0;
  return Marker(&marker) && Value(marker);
}

bool UbjReader::Enter(char open) {
  char marker = 0;
  Container c;
  if (!Marker(&marker) || marker != open || !Header(&c) || open_.size() > kMaxDepth) return false;
  open_.push_back(c);
  return true;
}

bool UbjReader::EnterObject() { return Enter('{'); }
bool UbjReader::EnterArray() { return Enter('['); }

bool UbjReader::Advance(char close, bool* done) {
  *done = false;
  if (open_.empty()) return false;
  Container& c = open_.back();
  if (c.left == 0 || (c.left < 0 && p_ < end_ && *p_ == close)) {
    if (c.left < 0) ++p_;
    open_.pop_back();
    *done = true;
    return false;
  }
  if (c.left > 0) --c.left;
  return true;
}

bool UbjReader::Next(std::string_view* key, bool* done) {
  int64_t n = 0;
  if (!Advance('}', done) || !Length(&n)) return false;
  *key = std::string_view(p_, size_t(n));
  p_ += n;
  implied_ = open_.back().type;
  return true;
}

bool UbjReader::NextItem(bool* done) {
  if (!Advance(']', done)) return false;
  implied_ = open_.back().type;
  return implied_ != 0 || p_ < end_;
}

template <typename T>
bool UbjReader::NumbersAs(std::vector<T>* out) {
  out->clear();
  char marker = 0;
  Container c;
  if (!Marker(&marker) || marker != '[' || !Header(&c)) return false;
  if (c.type != 0 && FixedSize(c.type) == 0) return false;
  if (c.left > 0) {
    const size_t least = c.type != 0 ? FixedSize(c.type) : 2;
    if (uint64_t(c.left) > uint64_t(end_ - p_) / least) return false;
    out->reserve(size_t(c.left));
  }
  for (int64_t i = 0; c.left < 0 || i < c.left; ++i) {
    if (c.left < 0 && p_ < end_ && *p_ == ']') {
      ++p_;
      break;
    }
    char m = c.type;
    if (m == 0 && !Byte(&m)) return false;
    if (IsInt(m)) {
      int64_t v = 0;
      if (!Int(m, &v)) return false;
      if constexpr (std::is_same_v<T, float>) {
        out->push_back(static_cast<float>(v));
      } else {
        out->push_back(v);
      }
    } else {
      double v = 0;
      if (!Double(m, &v)) return false;
      if constexpr (std::is_same_v<T, float>) {
        out->push_back(static_cast<float>(v));
      } else {
        // An integer array element written as a float must be a whole number in range.
        if (!(std::floor(v) == v && std::fabs(v) < 9.0e18)) return false;
        out->push_back(static_cast<int64_t>(v));
      }
    }
  }
  return true;
}

bool UbjReader::Numbers(std::vector<int64_t>* out) { return NumbersAs(out); }
bool UbjReader::Numbers(std::vector<float>* out) { return NumbersAs(out); }

bool UbjReader::String(std::string* out) {
  char marker = 0;
  int64_t n = 0;
  if (!Marker(&marker) || marker != 'S' || !Length(&n)) return false;
  out->assign(p_, size_t(n));
  p_ += n;
  return true;
}

}  // namespace tessel::search
