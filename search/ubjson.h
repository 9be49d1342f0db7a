// UbjReader: reads the parts of a UBJSON document one asks for, in place, without building a tree
// of it. CostModel reads XGBoost's saved model with it after every fit: a document object model
// of that model (nlohmann::json) allocated a node per tree-array element and was most of a fit's
// copying cost.
#ifndef TESSEL_SEARCH_UBJSON_H_
#define TESSEL_SEARCH_UBJSON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::search {

// UBJSON (ubjson.org, draft 12), as XGBoost and nlohmann::json write it: objects with
// length-prefixed keys, arrays and objects plain or with a count (`#`) and a type (`$`, whose
// values then carry no marker), integers i U I l L
// and floats d D (big-endian), strings S, high-precision numbers H, T F Z N and chars C. Every
// read checks the bounds: a malformed document makes a call return false, never read past its
// end.
class UbjReader {
 public:
  UbjReader(const char* data, size_t size) : p_(data), end_(data + size) {}

  // Skips one value of any kind.
  bool Skip();
  // Enters the object at the position; then Next reads its entries until it returns false
  // (`*done` tells the end of the object from an error).
  bool EnterObject();
  bool Next(std::string_view* key, bool* done);
  // Enters the array at the position; then NextItem says whether an element follows (and moves
  // to it) until the array ends (`*done`).
  bool EnterArray();
  bool NextItem(bool* done);
  // An array of numbers, converted; integers must be exact in the destination.
  bool Numbers(std::vector<int64_t>* out);
  bool Numbers(std::vector<float>* out);
  bool String(std::string* out);

 private:
  struct Container {
    int64_t left = -1;  // elements still to come when counted, else -1
    char type = 0;      // the elements' marker when typed
  };
  bool Byte(char* c);
  bool Marker(char* c);  // the next value's marker: implied by a typed container, else read
  bool Int(char marker, int64_t* v);
  bool Length(int64_t* n);
  bool Double(char marker, double* v);
  bool Value(char marker);  // skips the value whose marker was read
  bool Header(Container* c);
  bool Enter(char open);  // a container opened by `open`
  // Moves to the innermost container's next entry, or leaves the container at its end (`*done`).
  bool Advance(char close, bool* done);
  template <typename T>
  bool NumbersAs(std::vector<T>* out);

  const char* p_;
  const char* end_;
  std::vector<Container> open_;
  char implied_ = 0;  // the marker of the next value, when its container is typed
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_UBJSON_H_
