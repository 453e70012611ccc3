// Multi-head softmax attention of q [B, T, H·D] over k, v [B, T_k, H·D] (heads side by side in each row), causal (a
// decoder's self-attention, T_k = T) or bidirectional (an encoder; cross-attention, where T_k is the source's
// length). Per batch b and head h, with Q [T, D], K, V [T_k, D] the slices and s = 1/√D:
//
//   S = s·Q Kᵀ,   P = softmax(S + M) row-wise,   O = P V
//
// M = −∞ above the diagonal when causal (row t sees keys 0..t), 0 everywhere when bidirectional. With key lengths
// n_b (padded sequences: an encoder-decoder's source), M is also −∞ on the keys j ≥ n_b of batch row b, so padding
// never reaches a real position; the masked probabilities are exactly 0, so the backward below needs no change.
// s is 1/√D unless the caller gives another (QKNorm's learnable g is applied to q beforehand, s = 1).
// With a soft-cap c (Gemma 2), S is replaced by c·tanh(S/c), whose derivative is 1 − tanh²(S/c).
//
// Backward, with G = ∂L/∂O:
//
//   ∂L/∂V = Pᵀ G,   ∂L/∂P = G Vᵀ,   ∂L/∂S = P ⊙ (∂L/∂P − rowsum(P ⊙ ∂L/∂P))   (softmax Jacobian)
//   ∂L/∂Q = s·(∂L/∂S) K,   ∂L/∂K = s·(∂L/∂S)ᵀ Q
//
// P [B, H, T, T_k] is saved. Each (b, h) runs its GEMMs single-threaded inside one parallel loop;
// the backward's ∂L/∂P lives in a per-thread [T, T] slice of the graph workspace.
//
// Recomputed probabilities (`engine.recompute_attention`, recompute_attention_probabilities below) keep nothing of
// size T × T_k between the passes: the B·H·T·T_k saved P is usually the largest activation of a step (at T 1024 it
// is 4 MiB per head and batch row). Each (b, h) walks its queries in blocks of R rows; a causal block [r0, r1) sees
// only the keys 0..r1 − 1, so the logits above the diagonal's blocks are never formed (about half of the attention
// GEMMs' work at large T). Forward: the block's S and P in a per-thread [R, T_k] scratch, then O_blk = P V. Backward
// recomputes the block's S and P as the forward did (the same GEMM of the same operands, the same softmax) and
// applies the formulas above to the block, with G_blk its rows of ∂L/∂O:
//
//   ∂L/∂V[0:r1] += Pᵀ G_blk,   ∂L/∂P = G_blk Vᵀ,   ∂L/∂S as above,
//   ∂L/∂Q_blk = s·(∂L/∂S) K,   ∂L/∂K[0:r1] += s·(∂L/∂S)ᵀ Q_blk
//
// The price is one more logits GEMM and softmax per block in backward; the results equal the saved path's to
// rounding (the blocks' GEMMs sum in another order), which the tests check beside finite differences.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "engine/fast_math.h"
#include "engine/gemm.h"
#include "engine/ops.h"

namespace normlab::engine {
namespace {

enum Slot { kQ, kK, kV, kKeyLengths, kPosition = kKeyLengths };
// The attention nodes' attributes by name. attr.i: the heads, the threads its workspace was planned for, whether it is
// causal, and top_k (keep each query's top_k largest scores; 0 = all; set_attention_top_k). attr.f: the logit scale
// (0: 1/√D), the soft-cap (0: none) and the rows of a recomputed query block (0: the saved-probabilities path).
enum AttentionCount : size_t { kHeads, kPlannedThreads, kCausal, kTopK };
enum AttentionReal : size_t { kScale, kSoftcap, kBlockRows };

struct Dims {
  int64_t batch, time, keys, width, heads, dim;  // time: the queries' positions; keys: the keys' (equal when causal)
};
Dims dims_of(const Graph& g, const Node& n) {
  const Shape& s = g.shape(n.in[kQ]);
  return {s[0], s[1], g.shape(n.in[kK])[1], s[2], n.attr.i[kHeads], s[2] / n.attr.i[kHeads]};
}
// The last key that row t of batch row b attends to.
inline int64_t last_key(const Node& n, const Dims& d, const int32_t* key_lengths, int64_t b, int64_t t) {
  const int64_t last = n.attr.i[kCausal] ? t : d.keys - 1;
  return key_lengths ? std::min<int64_t>(last, key_lengths[b] - 1) : last;
}
const int32_t* key_lengths_of(Graph& g, const Node& n) {
  return n.in[kKeyLengths] == kNoTensor ? nullptr : g.data<int32_t>(n.in[kKeyLengths]);
}
template <typename T>
T logit_scale(const Node& n, const Dims& d) {
  return n.attr.f[kScale] > 0 ? static_cast<T>(n.attr.f[kScale]) : T(1) / std::sqrt(static_cast<T>(d.dim));
}

// P's row from its logits S[0..width): the soft-cap (cap > 0), then the softmax over the keys 0..last; the masked keys
// past `last` get probability 0. top_k > 0 (an inference-time option, Model's InferenceOptions): only the top_k largest
// logits keep a probability (all of those tied with the k-th), the rest are masked like the keys past `last`, so
// the backward below holds unchanged; scratch holds last + 1 values for the selection.
template <typename T>
void softmax_row(T* row, int64_t last, int64_t width, T cap, int64_t top_k, T* scratch) {
  if (cap > 0)
    for (int64_t j = 0; j <= last; ++j) row[j] = cap * std::tanh(row[j] / cap);
  T threshold = -std::numeric_limits<T>::infinity();
  if (top_k > 0 && top_k <= last) {
    std::copy(row, row + last + 1, scratch);
    std::nth_element(scratch, scratch + top_k - 1, scratch + last + 1, std::greater<T>());
    threshold = scratch[top_k - 1];
  }
  T max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j <= last; ++j) max = std::max(max, row[j]);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j <= last; ++j)
    sum += (row[j] = row[j] < threshold ? T(0) : fast_exp(row[j] - max));  // NaN stays NaN
  for (int64_t j = 0; j <= last; ++j) row[j] /= sum;
  std::fill(row + last + 1, row + width, T(0));
}

// Row t of ∂L/∂S from P's row and ∂L/∂P's row (in place): the softmax Jacobian, then the soft-cap's derivative from
// the uncapped logits `raw` (cap > 0); the masked keys past `last` get 0.
template <typename T>
void softmax_row_backward(const T* prow, T* row, const T* raw, int64_t last, int64_t width, T cap) {
  T dot = 0;
  for (int64_t j = 0; j <= last; ++j) dot += prow[j] * row[j];
  for (int64_t j = 0; j <= last; ++j) row[j] = prow[j] * (row[j] - dot);
  if (cap > 0)
    for (int64_t j = 0; j <= last; ++j) {
      const T th = std::tanh(raw[j] / cap);
      row[j] *= T(1) - th * th;
    }
  std::fill(row + last + 1, row + width, T(0));
}

template <typename T>
void forward_kernel(Graph& g, const Node& n) {
  const Dims d = dims_of(g, n);
  const T scale = logit_scale<T>(n, d), cap = static_cast<T>(n.attr.f[kSoftcap]);
  const T *q = g.data<T>(n.in[kQ]), *k = g.data<T>(n.in[kK]), *v = g.data<T>(n.in[kV]);
  T* out = g.data<T>(n.out);
  T* probs = g.data<T>(n.saved[0]);
  const int32_t* lengths = key_lengths_of(g, n);
  const int threads = static_cast<int>(std::min<int64_t>(n.attr.i[kPlannedThreads], omp_get_max_threads()));
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t offset = b * d.time * d.width + h * d.dim, key_offset = b * d.keys * d.width + h * d.dim;
      T* p = probs + (b * d.heads + h) * d.time * d.keys;
      T* scratch = reinterpret_cast<T*>(g.workspace()) + omp_get_thread_num() * 2 * d.time * d.keys;
      gemm(false, true, d.time, d.keys, d.dim, scale, q + offset, d.width, k + key_offset, d.width, T(0), p, d.keys);
      for (int64_t t = 0; t < d.time; ++t)
        softmax_row(p + t * d.keys, last_key(n, d, lengths, b, t), d.keys, cap, n.attr.i[kTopK], scratch);
      gemm(false, false, d.time, d.dim, d.keys, T(1), p, d.keys, v + key_offset, d.width, T(0), out + offset, d.width);
    }
}

template <typename T>
void backward_kernel(Graph& g, const Node& n) {
  const Dims d = dims_of(g, n);
  const T scale = logit_scale<T>(n, d), cap = static_cast<T>(n.attr.f[kSoftcap]);
  const T *q = g.data<T>(n.in[kQ]), *k = g.data<T>(n.in[kK]), *v = g.data<T>(n.in[kV]);
  const T* dout = g.grad<T>(n.out);
  const T* probs = g.data<T>(n.saved[0]);
  const int32_t* lengths = key_lengths_of(g, n);
  T* dq = g.requires_grad(n.in[kQ]) ? g.grad<T>(n.in[kQ]) : nullptr;
  T* dk = g.requires_grad(n.in[kK]) ? g.grad<T>(n.in[kK]) : nullptr;
  T* dv = g.requires_grad(n.in[kV]) ? g.grad<T>(n.in[kV]) : nullptr;
  const int threads = static_cast<int>(std::min<int64_t>(n.attr.i[kPlannedThreads], omp_get_max_threads()));
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t offset = b * d.time * d.width + h * d.dim, key_offset = b * d.keys * d.width + h * d.dim;
      const T* p = probs + (b * d.heads + h) * d.time * d.keys;
      T* dp = reinterpret_cast<T*>(g.workspace()) + omp_get_thread_num() * 2 * d.time * d.keys;
      T* raw = dp + d.time * d.keys;  // the uncapped logits, recomputed only when a soft-cap is on
      if (cap > 0)
        gemm(false, true, d.time, d.keys, d.dim, scale, q + offset, d.width, k + key_offset, d.width, T(0), raw,
             d.keys);
      if (dv)
        gemm(true, false, d.keys, d.dim, d.time, T(1), p, d.keys, dout + offset, d.width, T(1), dv + key_offset,
             d.width);
      gemm(false, true, d.time, d.keys, d.dim, T(1), dout + offset, d.width, v + key_offset, d.width, T(0), dp, d.keys);
      for (int64_t t = 0; t < d.time; ++t)
        softmax_row_backward(p + t * d.keys, dp + t * d.keys, raw + t * d.keys, last_key(n, d, lengths, b, t), d.keys,
                             cap);
      if (dq)
        gemm(false, false, d.time, d.dim, d.keys, scale, dp, d.keys, k + key_offset, d.width, T(1), dq + offset,
             d.width);
      if (dk)
        gemm(true, false, d.keys, d.dim, d.time, scale, dp, d.keys, q + offset, d.width, T(1), dk + key_offset,
             d.width);
    }
}

// --- Recomputed probabilities: the query blocks (attr.f[kBlockRows] = R, their rows; 0 on the saved path) ---

// A block of R query rows [first, first + rows) and the keys [0, keys) it sees.
struct QueryBlock {
  int64_t first, rows, keys;
};
QueryBlock query_block(const Node& n, const Dims& d, int64_t first) {
  const int64_t rows = std::min(static_cast<int64_t>(n.attr.f[kBlockRows]), d.time - first);
  return {first, rows, n.attr.i[kCausal] ? first + rows : d.keys};
}
// A thread's scratch, in elements: P, ∂L/∂P and the uncapped logits of one block, and the top-k selection's row.
int64_t block_scratch(int64_t block_rows, int64_t keys) { return (3 * block_rows + 1) * keys; }

// The block's P [rows, keys] (and its uncapped logits in raw, when given), as the forward forms it.
template <typename T>
void block_probabilities(const Node& n, const Dims& d, const int32_t* lengths, int64_t b, const QueryBlock& blk,
                         const T* q_blk, const T* k, T scale, T cap, T* p, T* raw, T* select) {
  gemm(false, true, blk.rows, blk.keys, d.dim, scale, q_blk, d.width, k, d.width, T(0), p, blk.keys);
  if (raw) std::copy(p, p + blk.rows * blk.keys, raw);
  for (int64_t t = 0; t < blk.rows; ++t)
    softmax_row(p + t * blk.keys, last_key(n, d, lengths, b, blk.first + t), blk.keys, cap, n.attr.i[kTopK], select);
}

// Calls body(b, blk, rows_at, key_offset, scratch) for every (b, h), in parallel, and each of its query blocks in
// order: rows_at is the block's first row of q and O (element offset, head h's columns), key_offset row 0 of k and v,
// scratch this thread's block_scratch elements.
template <typename T, typename Body>
void over_query_blocks(Graph& g, const Node& n, const Dims& d, Body body) {
  const int64_t block_rows = static_cast<int64_t>(n.attr.f[kBlockRows]);
  const int threads = static_cast<int>(std::min<int64_t>(n.attr.i[kPlannedThreads], omp_get_max_threads()));
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t offset = b * d.time * d.width + h * d.dim, key_offset = b * d.keys * d.width + h * d.dim;
      T* scratch = reinterpret_cast<T*>(g.workspace()) + omp_get_thread_num() * block_scratch(block_rows, d.keys);
      for (int64_t first = 0; first < d.time; first += block_rows)
        body(b, query_block(n, d, first), offset + first * d.width, key_offset, scratch);
    }
}

template <typename T>
void forward_recomputing(Graph& g, const Node& n) {
  const Dims d = dims_of(g, n);
  const T scale = logit_scale<T>(n, d), cap = static_cast<T>(n.attr.f[kSoftcap]);
  const T *q = g.data<T>(n.in[kQ]), *k = g.data<T>(n.in[kK]), *v = g.data<T>(n.in[kV]);
  T* out = g.data<T>(n.out);
  const int32_t* lengths = key_lengths_of(g, n);
  const int64_t block_rows = static_cast<int64_t>(n.attr.f[kBlockRows]);
  over_query_blocks<T>(g, n, d, [&](int64_t b, const QueryBlock& blk, int64_t rows_at, int64_t key_offset, T* p) {
    block_probabilities(n, d, lengths, b, blk, q + rows_at, k + key_offset, scale, cap, p, static_cast<T*>(nullptr),
                        p + 3 * block_rows * d.keys);
    gemm(false, false, blk.rows, d.dim, blk.keys, T(1), p, blk.keys, v + key_offset, d.width, T(0), out + rows_at,
         d.width);
  });
}

template <typename T>
void backward_recomputing(Graph& g, const Node& n) {
  const Dims d = dims_of(g, n);
  const T scale = logit_scale<T>(n, d), cap = static_cast<T>(n.attr.f[kSoftcap]);
  const T *q = g.data<T>(n.in[kQ]), *k = g.data<T>(n.in[kK]), *v = g.data<T>(n.in[kV]);
  const T* dout = g.grad<T>(n.out);
  const int32_t* lengths = key_lengths_of(g, n);
  T* dq = g.requires_grad(n.in[kQ]) ? g.grad<T>(n.in[kQ]) : nullptr;
  T* dk = g.requires_grad(n.in[kK]) ? g.grad<T>(n.in[kK]) : nullptr;
  T* dv = g.requires_grad(n.in[kV]) ? g.grad<T>(n.in[kV]) : nullptr;
  const int64_t block_rows = static_cast<int64_t>(n.attr.f[kBlockRows]);
  over_query_blocks<T>(g, n, d, [&](int64_t b, const QueryBlock& blk, int64_t rows_at, int64_t key_offset, T* p) {
    T *dp = p + block_rows * d.keys, *raw = dp + block_rows * d.keys, *select = raw + block_rows * d.keys;
    block_probabilities(n, d, lengths, b, blk, q + rows_at, k + key_offset, scale, cap, p, cap > 0 ? raw : nullptr,
                        select);
    if (dv)
      gemm(true, false, blk.keys, d.dim, blk.rows, T(1), p, blk.keys, dout + rows_at, d.width, T(1), dv + key_offset,
           d.width);
    gemm(false, true, blk.rows, blk.keys, d.dim, T(1), dout + rows_at, d.width, v + key_offset, d.width, T(0), dp,
         blk.keys);
    for (int64_t t = 0; t < blk.rows; ++t)
      softmax_row_backward(p + t * blk.keys, dp + t * blk.keys, raw + t * blk.keys,
                           last_key(n, d, lengths, b, blk.first + t), blk.keys, cap);
    if (dq)
      gemm(false, false, blk.rows, d.dim, blk.keys, scale, dp, blk.keys, k + key_offset, d.width, T(1), dq + rows_at,
           d.width);
    if (dk)
      gemm(true, false, blk.keys, d.dim, blk.rows, scale, dp, blk.keys, q + rows_at, d.width, T(1), dk + key_offset,
           d.width);
  });
}

void forward(Graph& g, const Node& n) {
  const bool recomputing = n.attr.f[kBlockRows] > 0;
  dispatch_float(g.float_type(),
                 [&]<typename T>() { recomputing ? forward_recomputing<T>(g, n) : forward_kernel<T>(g, n); });
}
void backward(Graph& g, const Node& n) {
  const bool recomputing = n.attr.f[kBlockRows] > 0;
  dispatch_float(g.float_type(),
                 [&]<typename T>() { recomputing ? backward_recomputing<T>(g, n) : backward_kernel<T>(g, n); });
}

// Decoding with a key-value cache (cached_attention): the node sees a chunk of S new positions, q, k, v [B, S, H·D],
// whose first position is `pos` (the i32 [1] input). Their keys and values are written into the caches K̂, V̂
// [B, C, H·D] at rows pos..pos+S−1 (rows before pos hold the earlier positions' keys and values, from earlier calls),
// and the chunk's query t attends to cache rows 0..pos+t:
//
//   S = s·Q K̂[0..pos+S)ᵀ,   P = softmax(S + M) row-wise (M = −∞ on keys j > pos + t),   O = P V̂[0..pos+S)
//
// which is the causal attention above restricted to the chunk's rows: every position's keys and values are
// computed once, so generating a token costs O(pos) attention instead of a whole forward pass over the window.
// For decoding only: there is no backward (and nothing is saved for one).
template <typename T>
void cached_forward_kernel(Graph& g, const Node& n) {
  const Dims d = dims_of(g, n);
  const int64_t capacity = g.shape(n.saved[0])[1], pos = *g.data<int32_t>(n.in[kPosition]), keys = pos + d.time;
  if (pos < 0 || keys > capacity)
    fail("internal: cached attention at positions {}..{} overruns its cache of {}", pos, keys - 1, capacity);
  const T scale = logit_scale<T>(n, d), cap = static_cast<T>(n.attr.f[kSoftcap]);
  const T *q = g.data<T>(n.in[kQ]), *k = g.data<T>(n.in[kK]), *v = g.data<T>(n.in[kV]);
  T *k_cache = g.data<T>(n.saved[0]), *v_cache = g.data<T>(n.saved[1]), *out = g.data<T>(n.out);
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t chunk = b * d.time * d.width, rows = (b * capacity + pos) * d.width;
    std::copy_n(k + chunk, d.time * d.width, k_cache + rows);
    std::copy_n(v + chunk, d.time * d.width, v_cache + rows);
  }
  const int threads = static_cast<int>(std::min<int64_t>(n.attr.i[kPlannedThreads], omp_get_max_threads()));
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t offset = b * d.time * d.width + h * d.dim, cached = b * capacity * d.width + h * d.dim;
      T* p = reinterpret_cast<T*>(g.workspace()) + omp_get_thread_num() * (d.time + 1) * capacity;
      T* scratch = p + d.time * capacity;
      gemm(false, true, d.time, keys, d.dim, scale, q + offset, d.width, k_cache + cached, d.width, T(0), p, keys);
      for (int64_t t = 0; t < d.time; ++t) softmax_row(p + t * keys, pos + t, keys, cap, n.attr.i[kTopK], scratch);
      gemm(false, false, d.time, d.dim, keys, T(1), p, keys, v_cache + cached, d.width, T(0), out + offset, d.width);
    }
}

void cached_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { cached_forward_kernel<T>(g, n); });
}
void cached_backward(Graph&, const Node&) { fail("internal: cached attention is for decoding; it has no backward"); }

}  // namespace

extern const OpKernels attention_kernels{forward, backward};
extern const OpKernels cached_attention_kernels{cached_forward, cached_backward};

void recompute_attention_probabilities(Graph& g, int64_t block_rows) {
  if (block_rows < 1) fail("internal: attention's query blocks need at least one row, not {}", block_rows);
  for (Node& n : g.nodes_to_adjust()) {
    if (n.op != OpKind::attention || n.attr.f[kBlockRows] > 0) continue;
    const Dims d = dims_of(g, n);
    const int64_t rows = std::min(block_rows, d.time);
    g.drop_activation(n.saved[0]);
    n.saved[0] = kNoTensor;
    n.attr.f[kBlockRows] = static_cast<double>(rows);
    n.workspace_bytes =
        static_cast<size_t>(n.attr.i[kPlannedThreads] * block_scratch(rows, d.keys)) * dtype_size(g.float_type());
  }
}

void set_attention_top_k(Node& attention, int64_t top_k) {
  if (attention.op != OpKind::attention && attention.op != OpKind::cached_attention)
    fail("internal: set_attention_top_k on another op's node");
  attention.attr.i[kTopK] = top_k;
}

TensorId attention(Graph& g, const std::string& name, TensorId q, TensorId k, TensorId v, int64_t heads, double scale,
                   double softcap, bool causal, TensorId key_lengths) {
  const Shape& s = g.shape(q);
  const Shape keys = g.shape(k);
  if (s.rank != 3 || s[2] % heads != 0) fail("attention needs [B,T,H·D] inputs; got {} with {} heads", s.str(), heads);
  if (keys.rank != 3 || keys[0] != s[0] || keys[2] != s[2] || g.shape(v) != keys || (causal && keys != s))
    fail("internal: attention's k and v must be [B, T_k, H·D] like q [B, T, H·D] (T_k = T when causal)");
  if (key_lengths != kNoTensor && (g.spec(key_lengths).dtype != DType::i32 || g.shape(key_lengths) != Shape{s[0]}))
    fail("internal: attention's key lengths must be i32 [{}]", s[0]);
  Node n = make_node(OpKind::attention, q, k, v);
  n.in[kKeyLengths] = key_lengths;
  n.out = like(g, name, q, {q, k, v});
  n.saved[0] = g.activation(name + ".probs", Shape{s[0], heads, s[1], keys[1]}, false);
  n.attr.i[kHeads] = heads;
  n.attr.i[kPlannedThreads] = omp_get_max_threads();  // workspace slices planned for this many threads
  n.attr.i[kCausal] = causal;
  n.attr.f[kScale] = scale, n.attr.f[kSoftcap] = softcap;  // kBlockRows stays 0: the saved path until planned
  n.workspace_bytes = static_cast<size_t>(n.attr.i[kPlannedThreads] * 2 * s[1] * keys[1]) * dtype_size(g.float_type());
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine

namespace normlab::engine {

TensorId cached_attention(Graph& g, const std::string& name, TensorId q, TensorId k, TensorId v, TensorId position,
                          int64_t heads, int64_t capacity, double scale, double softcap) {
  const Shape& s = g.shape(q);
  if (s.rank != 3 || s[2] % heads != 0) fail("attention needs [B,T,H·D] inputs; got {} with {} heads", s.str(), heads);
  if (g.shape(k) != s || g.shape(v) != s) fail("internal: attention's q, k, v differ in shape");
  if (g.spec(position).dtype != DType::i32 || g.shape(position) != Shape{1})
    fail("internal: cached attention's position must be i32 [1]");
  if (capacity < s[1]) fail("internal: a key-value cache of {} positions cannot hold a chunk of {}", capacity, s[1]);
  Node n = make_node(OpKind::cached_attention, q, k, v);
  n.in[kPosition] = position;
  n.out = g.activation(name, s, false);
  n.saved[0] = g.activation(name + ".k_cache", Shape{s[0], capacity, s[2]}, false);
  n.saved[1] = g.activation(name + ".v_cache", Shape{s[0], capacity, s[2]}, false);
  n.attr.i[kHeads] = heads;
  n.attr.i[kPlannedThreads] = omp_get_max_threads();       // workspace slices planned for this many threads
  n.attr.f[kScale] = scale, n.attr.f[kSoftcap] = softcap;  // kBlockRows stays 0: the saved path until planned
  n.workspace_bytes =
      static_cast<size_t>(n.attr.i[kPlannedThreads] * (s[1] + 1) * capacity) * dtype_size(g.float_type());
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
