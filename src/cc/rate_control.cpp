#include "cc/rate_control.hpp"

namespace uroce::cc {

bool parse_algo(std::string_view name, Algo& out) {
  if (name == "none") out = Algo::None;
  else if (name == "dcqcn") out = Algo::Dcqcn;
  else return false;
  return true;
}

}  // namespace uroce::cc
