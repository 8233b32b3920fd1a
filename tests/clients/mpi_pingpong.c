/* Two MPI ranks exchange messages of growing sizes (1 B .. 4 MiB) and check every byte of every
 * message: rank 0 sends pattern k, rank 1 checks it and answers with pattern k + 1. Prints
 * "mpi_pingpong: all N messages verified" on rank 0 when both ranks saw only correct bytes. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char* b, size_t n, unsigned k) {
  for (size_t i = 0; i < n; ++i) b[i] = (unsigned char)(i * 131u + k * 7u + (i >> 10));
}

static long bad_bytes(const unsigned char* b, size_t n, unsigned k) {
  long bad = 0;
  for (size_t i = 0; i < n; ++i) bad += b[i] != (unsigned char)(i * 131u + k * 7u + (i >> 10));
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: run with 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t max = 4u << 20;
  unsigned char* buf = malloc(max);
  long bad = 0, msgs = 0;
  unsigned k = 0;
  for (size_t n = 1; n <= max; n *= 4) {
    for (int rep = 0; rep < 10; ++rep, k += 2) {
      if (rank == 0) {
        fill(buf, n, k);
        MPI_Send(buf, (int)n, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        memset(buf, 0, n);
        MPI_Recv(buf, (int)n, MPI_BYTE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += bad_bytes(buf, n, k + 1);
      } else {
        memset(buf, 0, n);
        MPI_Recv(buf, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += bad_bytes(buf, n, k);
        fill(buf, n, k + 1);
        MPI_Send(buf, (int)n, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
      }
      msgs += 2;
    }
  }
  long total_bad = 0;
  MPI_Reduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total_bad) printf("mpi_pingpong: %ld bytes differ\n", total_bad);
    else printf("mpi_pingpong: all %ld messages verified\n", msgs);
  }
  free(buf);
  MPI_Finalize();
  return total_bad ? 1 : 0;
}
