#include "comm/mpi_two_level.h"

#include <algorithm>
#include <vector>

#include "comm/reduce_kernels.h"
#include "core/quantize.h"

namespace zerodp::comm {

namespace {

constexpr int kPeerValuesTag = 0x5a50;  // within the host: a rank's values of a piece
constexpr int kPartialTag = 0x5a51;     // across: an fp32 partial sum, host h to h + 1
constexpr int kFinishedTag = 0x5a52;    // across: a finished piece, the last host to its owner

// An MPI derived datatype freed when it goes out of scope.
class ScopedType {
 public:
  ScopedType() = default;
  ~ScopedType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  ScopedType(const ScopedType&) = delete;
  ScopedType& operator=(const ScopedType&) = delete;
  MPI_Datatype* out() { return &type_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// `inner` with its extent set to `extent` bytes (so that consecutive ones start that far apart), committed.
int resized(MPI_Datatype inner, MPI_Aint extent, ScopedType& out) {
  if (const int rc = MPI_Type_create_resized(inner, 0, extent, out.out()); rc != MPI_SUCCESS) return rc;
  return MPI_Type_commit(out.out());
}

}  // namespace

int run_two_level_all_gather(const MpiGroup& g, const TwoLevelGroups& t, const Collective& c) {
  (void)g;
  const MPI_Datatype base = mpi_type(c.type);
  const int n = static_cast<int>(c.count), L = t.ranks_per_host, H = t.hosts;
  const auto es = static_cast<MPI_Aint>(c.type.size());
  char* recv = static_cast<char*>(c.recv);
  // Across: chunk g·L + l of every host g, straight into its place (chunks L·count apart).
  ScopedType chunk, chunk_in_row;
  if (const int rc = MPI_Type_contiguous(n, base, chunk.out()); rc != MPI_SUCCESS) return rc;
  if (const int rc = resized(chunk.get(), static_cast<MPI_Aint>(L) * n * es, chunk_in_row); rc != MPI_SUCCESS) return rc;
  char* lane = recv + static_cast<MPI_Aint>(t.local) * n * es;
  int rc = c.in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, lane, 1, chunk_in_row.get(), t.across_hosts)
                      : MPI_Allgather(c.send, n, base, lane, 1, chunk_in_row.get(), t.across_hosts);
  if (rc != MPI_SUCCESS) return rc;
  // Within the host: each local index's H chunks (strided L·count apart) to the host's other ranks.
  ScopedType strided, lane_type;
  if ((rc = MPI_Type_vector(H, n, L * n, base, strided.out())) != MPI_SUCCESS) return rc;
  if ((rc = resized(strided.get(), n * es, lane_type)) != MPI_SUCCESS) return rc;
  return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1, lane_type.get(), t.within_host);
}

int run_two_level_reduce_scatter(const MpiGroup& g, const TwoLevelGroups& t, const Collective& c, char* staging) {
  const DType dtype = c.type.dtype();
  const MPI_Datatype type = mpi_type(dtype);
  const size_t es = dtype_size(dtype), count = c.count;
  const int H = t.hosts, L = t.ranks_per_host, h = t.host, l = t.local, W = H * L;
  const int rank = h * L + l;
  const bool last_host = h == H - 1;
  const char* in = c.in_place ? in_place_base(c, rank) : static_cast<const char*>(c.send);
  char* out = static_cast<char*>(c.recv);
  const auto values = [&](int chunk, size_t k) { return in + (static_cast<size_t>(chunk) * count + k) * es; };

  const size_t piece = std::min(count, two_level_piece_elements());
  const bool quantized = c.quantize_across_hosts;
  // Staging: the host's other ranks' values of a piece (local index j in slot j, or j − 1 past l),
  // then two fp32 partial sums and two finished pieces, each pair alternating so that one can be in
  // flight while the next is computed; quantized (qgZ), two quantized pieces going out, one coming
  // in, and the quantized pieces of this rank's own chunk as they arrive.
  const TwoLevelStaging at = two_level_staging(count, dtype, L, quantized);
  char* slots = staging + at.slots;
  const auto slot = [&](int j) { return slots + static_cast<size_t>(j < l ? j : j - 1) * piece * es; };
  float* partial[2];
  char* finished[2];
  char* outgoing[2];
  for (int b = 0; b < 2; ++b) {
    partial[b] = reinterpret_cast<float*>(staging + at.partial[b]);
    finished[b] = staging + at.finished[b];
    outgoing[b] = staging + at.outgoing[b];
  }
  const size_t qpiece = quantized_int8_bytes(piece);
  char* incoming = staging + at.incoming;
  char* own_quantized = staging + at.own;  // piece k's at (k / piece)·qpiece

  std::vector<MPI_Request> sent_on(2, MPI_REQUEST_NULL);  // the send that still reads buffer b
  std::vector<MPI_Request> results;                          // this rank's finished pieces, arriving
  std::vector<MPI_Request> reqs;
  std::vector<const char*> rows(static_cast<size_t>(L));
  const auto wait_one = [&](MPI_Request& r) {
    std::vector<MPI_Request> one{r};
    const int rc = complete_requests(g, one);
    r = MPI_REQUEST_NULL;
    return rc;
  };
  int b = 0;
  for (int host_of_chunk = 0; host_of_chunk < H; ++host_of_chunk) {
    const int chunk = host_of_chunk * L + l;  // the lane's chunk at this step
    for (size_t k = 0; k < count; k += piece, b ^= 1) {
      const size_t m = std::min(piece, count - k);
      const int mi = static_cast<int>(m), qi = static_cast<int>(quantized_int8_bytes(m));
      if (const int rc = wait_one(sent_on[b]); rc != MPI_SUCCESS) return rc;
      float* acc = partial[b];
      reqs.clear();
      int rc = MPI_SUCCESS;
      for (int j = 0; j < L && rc == MPI_SUCCESS; ++j) {
        if (j == l) continue;
        reqs.emplace_back();
        rc = MPI_Irecv(slot(j), mi, type, j, kPeerValuesTag, t.within_host, &reqs.back());
        if (rc != MPI_SUCCESS) break;
        reqs.emplace_back();
        rc = MPI_Isend(values(host_of_chunk * L + j, k), mi, type, j, kPeerValuesTag, t.within_host, &reqs.back());
      }
      if (rc == MPI_SUCCESS && h > 0) {
        reqs.emplace_back();
        rc = quantized ? MPI_Irecv(incoming, qi, MPI_BYTE, h - 1, kPartialTag, t.across_hosts, &reqs.back())
                       : MPI_Irecv(acc, mi, MPI_FLOAT, h - 1, kPartialTag, t.across_hosts, &reqs.back());
      }
      if (rc == MPI_SUCCESS) rc = complete_requests(g, reqs);
      if (rc != MPI_SUCCESS) return rc;
      if (h > 0 && quantized) dequantize_int8(incoming, m, acc, DType::kF32);
      // The host's values, in rank order, onto the sum of the hosts before it.
      for (int j = 0; j < L; ++j) rows[static_cast<size_t>(j)] = j == l ? values(chunk, k) : slot(j);
      if (h == 0) widen_to_f32(rows[0], dtype, acc, m);
      for (int j = h == 0 ? 1 : 0; j < L; ++j) accumulate_f32(rows[static_cast<size_t>(j)], dtype, acc, m);
      if (!last_host) {
        if (quantized) {
          quantize_int8(acc, DType::kF32, m, outgoing[b]);
          rc = MPI_Isend(outgoing[b], qi, MPI_BYTE, h + 1, kPartialTag, t.across_hosts, &sent_on[b]);
        } else {
          rc = MPI_Isend(acc, mi, MPI_FLOAT, h + 1, kPartialTag, t.across_hosts, &sent_on[b]);
        }
        if (rc != MPI_SUCCESS) return rc;
        if (host_of_chunk == h) {  // this rank's own chunk: its values are read, its result may come
          results.emplace_back();
          rc = quantized ? MPI_Irecv(own_quantized + k / piece * qpiece, qi, MPI_BYTE, H - 1, kFinishedTag,
                                     t.across_hosts, &results.back())
                         : MPI_Irecv(out + k * es, mi, type, H - 1, kFinishedTag, t.across_hosts, &results.back());
          if (rc != MPI_SUCCESS) return rc;
        }
        continue;
      }
      if (c.op == ReduceOp::kAvg)
        for (size_t i = 0; i < m; ++i) acc[i] /= static_cast<float>(W);
      if (host_of_chunk == h) {
        narrow_from_f32(acc, out + k * es, dtype, m);
      } else if (quantized) {
        quantize_int8(acc, DType::kF32, m, outgoing[b]);
        if ((rc = MPI_Isend(outgoing[b], qi, MPI_BYTE, host_of_chunk, kFinishedTag, t.across_hosts, &sent_on[b])) !=
            MPI_SUCCESS)
          return rc;
      } else {
        narrow_from_f32(acc, finished[b], dtype, m);
        if ((rc = MPI_Isend(finished[b], mi, type, host_of_chunk, kFinishedTag, t.across_hosts, &sent_on[b])) !=
            MPI_SUCCESS)
          return rc;
      }
    }
  }
  for (MPI_Request& r : sent_on) results.push_back(r);
  if (const int rc = complete_requests(g, results); rc != MPI_SUCCESS) return rc;
  if (quantized && !last_host)  // this rank's chunk arrived quantized, piece by piece
    for (size_t k = 0; k < count; k += piece)
      dequantize_int8(own_quantized + k / piece * qpiece, std::min(piece, count - k), out + k * es, dtype);
  return MPI_SUCCESS;
}

}  // namespace zerodp::comm
