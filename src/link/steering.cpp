#include "link/steering.hpp"

namespace uroce::link::steering {

std::vector<sock_filter> reuseport_program() {
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),  // BTH bytes 4..7: reserved, destination QP
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xffffff),
      BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, kQpnLocalBits),
      BPF_STMT(BPF_RET | BPF_A, 0),
  };
}

}  // namespace uroce::link::steering
