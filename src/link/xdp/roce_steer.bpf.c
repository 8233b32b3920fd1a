// XDP program of the AF_XDP link: RoCEv2 frames for this device (UDP 4791 to one of its
// addresses, IPv4 unfragmented or IPv6 without extension headers, a destination QPN in its
// steering slot) go to the XSK of the queue they arrived on; everything else, and a queue
// without an XSK, goes on to the kernel.
// Built with clang -target bpf at build time; the link sets `config` before attaching it.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct steer_config {
  __u32 ip;         // the device's IPv4 address, network order
  __u32 slot;       // the steering slot of the process (link/steering.hpp)
  __u32 any_slot;   // 1: a device of one process, every destination QPN is its
  __u32 qpn_shift;  // the bits of a QPN below its slot
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct steer_config);
} config SEC(".maps");

struct v6_addr {
  __u8 b[16];
};

struct {  // the device's IPv6 addresses (its GIDs)
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16);
  __type(key, struct v6_addr);
  __type(value, __u32);
} v6_addrs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks SEC(".maps");

static __always_inline int steer(struct xdp_md* ctx, struct steer_config* cfg, struct udphdr* udp, void* end) {
  if ((void*)(udp + 1) > end || udp->dest != bpf_htons(4791)) return XDP_PASS;
  __u8* bth = (void*)(udp + 1);
  if ((void*)(bth + 8) > end) return XDP_PASS;
  __u32 qpn = ((__u32)bth[5] << 16) | ((__u32)bth[6] << 8) | bth[7];
  if (!cfg->any_slot && (qpn >> (cfg->qpn_shift & 31)) != cfg->slot) return XDP_PASS;
  return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp.frags")  // frames in several buffers (MTU 9000): their headers are in the first
int roce_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  __u32 zero = 0;
  struct steer_config* cfg = bpf_map_lookup_elem(&config, &zero);
  if (!cfg) return XDP_PASS;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return XDP_PASS;
  if (eth->h_proto == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = (void*)(eth + 1);
    if ((void*)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP || ip->daddr != cfg->ip) return XDP_PASS;
    if (ip->frag_off & bpf_htons(0x3fff)) return XDP_PASS;  // fragments: the kernel reassembles
    return steer(ctx, cfg, (void*)(ip + 1), end);
  }
  if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = (void*)(eth + 1);
    if ((void*)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
    struct v6_addr dst;
    __builtin_memcpy(dst.b, &ip6->daddr, 16);
    if (!bpf_map_lookup_elem(&v6_addrs, &dst)) return XDP_PASS;
    return steer(ctx, cfg, (void*)(ip6 + 1), end);
  }
  return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
