#include "tessera/model/recompute.h"

#include "tessera/core/error.h"

namespace tessera {

Recompute recompute_parse(std::string_view name) {
  if (name == "none") return Recompute::None;
  if (name == "selective") return Recompute::Selective;
  if (name == "full") return Recompute::Full;
  fail("--recompute-granularity: '{}' is not one of none, selective, full", name);
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

}  // namespace tessera
