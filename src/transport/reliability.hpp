// How an RC QP recovers lost packets, as the public API names it (uroce::Reliability):
// go-back-N or selective repeat. recovery/ holds what each does.
#pragma once
#include "uroce/types.hpp"

namespace uroce::transport {

using uroce::Reliability;

}  // namespace uroce::transport
