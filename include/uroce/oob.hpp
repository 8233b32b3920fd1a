// Out-of-band connection setup over TCP: each side sends its Endpoints (GID, QPN, PSN and an
// optional MR address/rkey/length) and receives the peer's. Used by the demo, tools and tests.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "uroce/result.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

class OobChannel {
 public:
  // Server: listens on host:port and accepts one peer (timeout_ms < 0: wait forever).
  static Result<OobChannel> accept(const std::string& host, uint16_t port, int timeout_ms = -1);
  // Client: connects, retrying until timeout_ms while the server is not up yet.
  static Result<OobChannel> connect(const std::string& host, uint16_t port, int timeout_ms = 10'000);
  // Two connected ends, for two processes of one program (one end each after fork): no port
  // to agree on, none another program can hold.
  static Result<std::pair<OobChannel, OobChannel>> pair();
  OobChannel(OobChannel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OobChannel& operator=(OobChannel&& o) noexcept;
  ~OobChannel();

  Result<std::vector<Endpoint>> exchange(const std::vector<Endpoint>& mine);
  Result<Endpoint> exchange(const Endpoint& mine);
  // Both sides wait here until the other arrives.
  Status barrier();
  Status send_line(const std::string& s);
  Result<std::string> recv_line();
  // Exactly n bytes, for peers with a fixed binary exchange of their own (ibv_*_pingpong's).
  Status send_bytes(const void* p, size_t n);
  Status recv_bytes(void* p, size_t n);

 private:
  explicit OobChannel(int fd) : fd_(fd) {}
  Status fill_buffer();  // one recv() appended to buf_
  int fd_ = -1;
  std::string buf_;
};

}  // namespace uroce
