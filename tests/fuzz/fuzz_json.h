// Structure-aware mutations for the JSON inside the formats (checkpoint
// metadata, safetensors headers, vocab.json): byte mutations of JSON mostly
// produce syntax errors, which stop at the parser; these keep the document
// well-formed and change what the reader must distrust — a value's type or
// size, a missing key, a value copied from elsewhere (an offset moved onto
// another tensor's bytes).
#pragma once
#include <nlohmann/json.hpp>

#include "fuzz_driver.h"

namespace tessera::fuzz {

using nlohmann::json;

inline void collect_nodes(json& j, std::vector<json*>& out) {
  out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect_nodes(child, out);
}

inline json interesting_value(Rand& r, const json& current) {
  switch (r.below(12)) {
    case 0: return 0;
    case 1: return -1;
    case 2: return INT64_MAX;
    case 3: return INT64_MIN;
    case 4: return UINT64_MAX;
    case 5: return (int64_t(1) << 59) + 16;  // times 32 wraps to 512
    case 6: return 1e308;
    case 7: return "x";
    case 8: return json::array();
    case 9: return json::object();
    case 10: return nullptr;
    default:
      if (current.is_number_integer()) {  // near the real value: off by a little
        // In unsigned arithmetic, wrapping as a file's bytes would: near
        // INT64_MIN/MAX a signed sum overflowed (UBSan, issue 15).
        const int64_t deltas[] = {1, -1, 4, -4, 64, 1 << 20};
        return int64_t(uint64_t(current.get<int64_t>()) + uint64_t(deltas[r.below(6)]));
      }
      return true;
  }
}

// One structural change to `doc`.
inline void mutate_json_once(json& doc, Rand& r) {
  std::vector<json*> nodes;
  collect_nodes(doc, nodes);
  json* node = nodes[r.below(nodes.size())];
  switch (r.below(5)) {
    case 0:
    case 1: *node = interesting_value(r, *node); break;
    case 2: *node = *nodes[r.below(nodes.size())]; break;  // a copy of another value
    case 3:                                                 // drop a member or element
      if (node->is_object() && !node->empty()) {
        auto it = node->begin();
        std::advance(it, long(r.below(node->size())));
        node->erase(it.key());
      } else if (node->is_array() && !node->empty()) {
        node->erase(node->begin() + long(r.below(node->size())));
      }
      break;
    default:  // grow an array by repeating an element (more blocks, pieces, ...)
      if (node->is_array() && !node->empty()) node->push_back((*node)[r.below(node->size())]);
      break;
  }
}

// JSON text mutated structurally (or, when it does not parse, bytewise).
inline Bytes mutate_json_text(const Bytes& text, Rand& r) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return mutate(text, r, 0);
  const int n = 1 + int(r.below(3));
  for (int i = 0; i < n; ++i) mutate_json_once(doc, r);
  return doc.dump(1);
}

}  // namespace tessera::fuzz
