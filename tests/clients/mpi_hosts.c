/* Open MPI across hosts: every rank exchanges messages of 1 B .. 1 MiB with a rank on another
 * host and with its neighbour, then the collectives (Bcast, Allreduce, Alltoall, Allgather)
 * run over all ranks; every byte and every sum is checked. Prints
 * "mpi_hosts: N ranks on M hosts, all verified" on rank 0 when every rank saw only correct
 * data; exits non-zero otherwise. Ranks must be placed by node (ranks 0..k-1 on the first host). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(size_t i, unsigned from, unsigned to, unsigned k) {
  return (unsigned char)(i * 131u + from * 17u + to * 29u + k * 7u + (i >> 10));
}

static long exchange(int me, int peer, size_t n, unsigned k, unsigned char* out, unsigned char* in) {
  for (size_t i = 0; i < n; ++i) out[i] = pattern(i, (unsigned)me, (unsigned)peer, k);
  memset(in, 0, n);
  MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, (int)k, in, (int)n, MPI_BYTE, peer, (int)k, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  long bad = 0;
  for (size_t i = 0; i < n; ++i) bad += in[i] != pattern(i, (unsigned)peer, (unsigned)me, k);
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Ranks per host: those that share this rank's node. */
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int per_host;
  MPI_Comm_size(node, &per_host);
  const int hosts = size / per_host;
  if (hosts < 2 || size % per_host) {
    if (rank == 0) fprintf(stderr, "mpi_hosts: %d ranks, %d per host: run on 2 or more hosts, by node\n", size, per_host);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t max = 1u << 20;
  unsigned char* out = malloc(max);
  unsigned char* in = malloc(max);
  long bad = 0, msgs = 0;
  unsigned k = 0;
  /* Point to point: the same slot on the next host, then the neighbour on this host. */
  const int across = (rank + per_host) % size;
  const int beside = rank % per_host == per_host - 1 ? rank - per_host + 1 : rank + 1;
  const int beside_back = rank % per_host == 0 ? rank + per_host - 1 : rank - 1;
  const int across_back = (rank - per_host + size) % size;
  for (size_t n = 1; n <= max; n *= 4, ++k) {
    /* Pairs across hosts: with 2 hosts each rank's partner is mutual; with more, a ring. */
    if (hosts == 2) {
      bad += exchange(rank, across, n, k, out, in);
    } else {
      for (size_t i = 0; i < n; ++i) out[i] = pattern(i, (unsigned)rank, (unsigned)across, k);
      MPI_Sendrecv(out, (int)n, MPI_BYTE, across, (int)k, in, (int)n, MPI_BYTE, across_back, (int)k, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      for (size_t i = 0; i < n; ++i) bad += in[i] != pattern(i, (unsigned)across_back, (unsigned)rank, k);
    }
    ++msgs;
    if (per_host > 1) {
      for (size_t i = 0; i < n; ++i) out[i] = pattern(i, (unsigned)rank, (unsigned)beside, k + 100);
      MPI_Sendrecv(out, (int)n, MPI_BYTE, beside, (int)k + 100, in, (int)n, MPI_BYTE, beside_back, (int)k + 100,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (size_t i = 0; i < n; ++i) bad += in[i] != pattern(i, (unsigned)beside_back, (unsigned)rank, k + 100);
      ++msgs;
    }
  }
  /* Bcast of 1 MiB from the last rank (on the last host). */
  for (size_t i = 0; i < max; ++i) out[i] = rank == size - 1 ? pattern(i, 9, 9, 9) : 0;
  MPI_Bcast(out, (int)max, MPI_BYTE, size - 1, MPI_COMM_WORLD);
  for (size_t i = 0; i < max; ++i) bad += out[i] != pattern(i, 9, 9, 9);
  /* Allreduce of 64 Ki integers: element i sums rank * i + 1 over all ranks. */
  const int nint = 1 << 16;
  int64_t* v = malloc(sizeof(int64_t) * nint);
  int64_t* sum = malloc(sizeof(int64_t) * nint);
  for (int i = 0; i < nint; ++i) v[i] = (int64_t)rank * i + 1;
  MPI_Allreduce(v, sum, nint, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int64_t ranks_sum = (int64_t)size * (size - 1) / 2;
  for (int i = 0; i < nint; ++i) bad += sum[i] != ranks_sum * i + size;
  /* Alltoall of 4 KiB blocks: block j from rank r is pattern(r, j). */
  const size_t blk = 4096;
  unsigned char* a = malloc(blk * (size_t)size);
  unsigned char* b = malloc(blk * (size_t)size);
  for (int j = 0; j < size; ++j)
    for (size_t i = 0; i < blk; ++i) a[(size_t)j * blk + i] = pattern(i, (unsigned)rank, (unsigned)j, 50);
  MPI_Alltoall(a, (int)blk, MPI_BYTE, b, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  for (int j = 0; j < size; ++j)
    for (size_t i = 0; i < blk; ++i) bad += b[(size_t)j * blk + i] != pattern(i, (unsigned)j, (unsigned)rank, 50);
  /* Allgather: every rank's 4 KiB block. */
  for (size_t i = 0; i < blk; ++i) a[i] = pattern(i, (unsigned)rank, 0, 60);
  MPI_Allgather(a, (int)blk, MPI_BYTE, b, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  for (int j = 0; j < size; ++j)
    for (size_t i = 0; i < blk; ++i) bad += b[(size_t)j * blk + i] != pattern(i, (unsigned)j, 0, 60);
  long all_bad = 0, all_msgs = 0;
  MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&msgs, &all_msgs, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_bad == 0)
      printf("mpi_hosts: %d ranks on %d hosts, all verified (%ld point-to-point messages, Bcast, Allreduce, Alltoall, Allgather)\n",
             size, hosts, all_msgs);
    else
      printf("mpi_hosts: %ld bad bytes or sums\n", all_bad);
  }
  free(a);
  free(b);
  free(v);
  free(sum);
  free(in);
  free(out);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all_bad == 0 || rank != 0 ? 0 : 1;
}
