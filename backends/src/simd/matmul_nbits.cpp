// MatMulNBits (block-wise 4- or 8-bit weights) on the onednn backend, with the
// weights read packed and decompressed in registers; AVX2 + FMA and baseline x86-64
// variants chosen at run time (simd_isa).
// - Float activations (W4A16 / W8A16), up to kMaxPackedRows rows (a decode step, a
//   small batch): each output column's codes are loaded once for up to four rows,
//   widened to float minus the block's zero point and multiplied into the rows with
//   FMA; the block's scale multiplies its partial sums. The sums differ from the
//   reference's only in order (docs/runtime.md, "Block-wise weights"). More rows run
//   oneDNN's float matmul on the weight dequantized once per plan, as the unfused
//   DequantizeLinear + MatMul did.
// - accuracy_level 4 (W4A8, 4-bit codes, blocks of a multiple of 32): each row of A
//   is quantized per block to int8 (quantize_row_blocks), the codes and the int8
//   values multiply exactly in int16 pairs (vpmaddubsw: at most 2 * 15 * 127) summed
//   in int32, and each block's term is added in block order as int8_block_term
//   defines it: bit for bit the reference's result, for any number of rows.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "../kernels.h"
#include "../matmul_nbits.h"

namespace qfx::runtime {
namespace {

// Rows up to which the float-activation kernel runs; above it oneDNN's float
// matmul on the dequantized weight is faster (tools/bench/w4_matmul.py).
constexpr int64_t kMaxPackedRows = 4;
// The rows of A one pass over a K tile reads stay in L1.
constexpr int64_t kTileBytes = 24 << 10;

// What a tile reads and writes: the packed weight, its scales and zero points
// ([N, blocks], floats), A ([M, K]) and Y ([M, N]); for int8 activations the
// scales and zero points again as [blocks, N] (a panel's columns side by side), the
// quantized rows ([M, blocks * bs], each group of G = 32 or 64 values reordered as
// the even ones, then the odd ones) and their scales and sums ([blocks, M]).
struct Job {
  const uint8_t* B;
  const float *S, *Z;
  int64_t K, N, blocks, blob, bs, bits;
  const float* A = nullptr;
  float* Y = nullptr;
  const float* sT = nullptr;
  const int32_t* zT = nullptr;
  const int8_t* qa = nullptr;
  const float* sa = nullptr;
  const int32_t* qs = nullptr;
  int64_t M = 0;
};

// The packed bytes of column n's block b.
inline const uint8_t* block_bytes(const Job& j, int64_t n, int64_t b) { return j.B + (n * j.blocks + b) * j.blob; }

// Y[m0 + r][n] += the sum over the codes of blocks [b0, b1) of A[m0 + r][k] * W[k][n],
// for R rows and C columns from n0: the plain variant.
template <int R, int C>
void tile_baseline(const Job& j, int64_t m0, int64_t n0, int64_t b0, int64_t b1) {
  for (int c = 0; c < C; ++c) {
    const int64_t n = n0 + c;
    float acc[R] = {};
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* p = block_bytes(j, n, b);
      const float z = j.Z[n * j.blocks + b], s = j.S[n * j.blocks + b];
      const int64_t k0 = b * j.bs, len = std::min(j.bs, j.K - k0);
      float dot[R] = {};
      for (int64_t k = 0; k < len; ++k) {
        const float w = static_cast<float>(ir::packed_code(p, k, j.bits)) - z;
        for (int r = 0; r < R; ++r) dot[r] += w * j.A[(m0 + r) * j.K + k0 + k];
      }
      for (int r = 0; r < R; ++r) acc[r] += s * dot[r];
    }
    for (int r = 0; r < R; ++r) j.Y[(m0 + r) * j.N + n] += acc[r];
  }
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 8 codes from code k of a block (k a multiple of 8) as floats minus the zero
// point: 8-bit codes widened, 4-bit codes read as one 32-bit word whose nibble i is
// code k + i (low nibble first) and shifted into place lane by lane.
template <int BITS>
__attribute__((target("avx2,fma"))) inline __m256 widen8(const uint8_t* p, int64_t k, __m256i shifts, __m256 z) {
  __m256i c;
  if constexpr (BITS == 8) {
    c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + k)));
  } else {
    int32_t word;
    std::memcpy(&word, p + k / 2, 4);
    c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), shifts), _mm256_set1_epi32(15));
  }
  return _mm256_sub_ps(_mm256_cvtepi32_ps(c), z);
}

// The AVX2 + FMA float variant: R x C independent dot products per block, two
// partial sums each, so the FMAs' latency does not bound the loop.
template <int BITS, int R, int C>
__attribute__((target("avx2,fma"))) void tile_avx2(const Job& j, int64_t m0, int64_t n0, int64_t b0, int64_t b1) {
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = j.A + (m0 + r) * j.K;
  __m256 acc[R][C];
  float tail[R][C] = {};
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t k0 = b * j.bs, len = std::min(j.bs, j.K - k0), vec = len / 16 * 16;
    const uint8_t* p[C];
    __m256 d0[R][C], d1[R][C];
    for (int c = 0; c < C; ++c) {
      p[c] = block_bytes(j, n0 + c, b);
      for (int r = 0; r < R; ++r) d0[r][c] = d1[r][c] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < vec; k += 16) {
      for (int c = 0; c < C; ++c) {
        const __m256 z = _mm256_broadcast_ss(j.Z + (n0 + c) * j.blocks + b);
        const __m256 w0 = widen8<BITS>(p[c], k, shifts, z), w1 = widen8<BITS>(p[c], k + 8, shifts, z);
        for (int r = 0; r < R; ++r) {
          d0[r][c] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[r] + k0 + k), d0[r][c]);
          d1[r][c] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a[r] + k0 + k + 8), d1[r][c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      const float ss = j.S[(n0 + c) * j.blocks + b], zs = j.Z[(n0 + c) * j.blocks + b];
      const __m256 s = _mm256_set1_ps(ss);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(_mm256_add_ps(d0[r][c], d1[r][c]), s, acc[r][c]);
      for (int64_t k = vec; k < len; ++k) {  // a block's last codes short of 16
        const float w = static_cast<float>(ir::packed_code(p[c], k, BITS)) - zs;
        for (int r = 0; r < R; ++r) tail[r][c] += ss * (w * a[r][k0 + k]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) j.Y[(m0 + r) * j.N + n0 + c] += hsum(acc[r][c]) + tail[r][c];
}

// Block b's eight int8_block_terms of an R x C = 8 tile at once, lane by lane the
// scalar definition's operations (integer dot, minus zero * sum, to float, times
// w_scale * a_scale, added to the running sum), so each lane rounds as it does.
// Lane l is row l / C, column l % C.
template <int R, int C>
__attribute__((target("avx2,fma"))) inline void block_terms8(const Job& j, int64_t m0, int64_t n0, int64_t b, const __m256i (&d)[R][C], __m256* y8) {
  const __m256i(&f)[R * C] = reinterpret_cast<const __m256i(&)[R * C]>(d);  // lane order: row-major
  const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(f[0], f[1]), _mm256_hadd_epi32(f[2], f[3]));
  const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(f[4], f[5]), _mm256_hadd_epi32(f[6], f[7]));
  const __m256i dots = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
  const int32_t* z = j.zT + b * j.N + n0;
  const float* ws = j.sT + b * j.N + n0;
  const int32_t* qs = j.qs + b * j.M + m0;
  const float* as = j.sa + b * j.M + m0;
  __m256i zl, ql;
  __m256 wl, al;
  if constexpr (C == 8) {
    zl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z));
    wl = _mm256_loadu_ps(ws);
    ql = _mm256_set1_epi32(*qs);
    al = _mm256_set1_ps(*as);
  } else if constexpr (C == 4) {  // rows [0 x4, 1 x4]
    zl = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(z)));
    wl = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(ws));
    ql = _mm256_setr_m128i(_mm_set1_epi32(qs[0]), _mm_set1_epi32(qs[1]));
    al = _mm256_setr_m128(_mm_set1_ps(as[0]), _mm_set1_ps(as[1]));
  } else {  // C == 2, rows [0, 0, 1, 1, 2, 2, 3, 3]
    int64_t z2, w2;
    std::memcpy(&z2, z, 8);
    std::memcpy(&w2, ws, 8);
    zl = _mm256_set1_epi64x(z2);
    wl = _mm256_castsi256_ps(_mm256_set1_epi64x(w2));
    const __m256i pairs = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    ql = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))), pairs);
    al = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(as)), pairs);
  }
  const __m256 scale = _mm256_mul_ps(wl, al);
  *y8 = _mm256_add_ps(*y8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(dots, _mm256_mullo_epi32(zl, ql))), scale));
}

// The int8 dot products of codes [k8, k_end) (at most 256) of the blocks at p[c]
// (block start k0) with R quantized rows, as int32 lanes in out[r][c]. Pair sums are
// at most 2 * 15 * 127 = 3810, so the 256 codes' sums stay in int16 (30480) until
// they widen. G = 64: 32 bytes hold the 32 even codes' nibbles (low) and the 32 odd
// ones' (high), against the rows' values reordered alike; G = 32: 16 bytes, the even
// codes in the low half of the vector, the odd ones in the high half.
template <int G, int R, int C>
__attribute__((target("avx2,fma"), always_inline)) inline void int8_chunk(const Job& j, int64_t m0, const uint8_t* const* p, int64_t k0,
                                                                         int64_t k8, int64_t k_end, __m256i (&out)[R][C]) {
  const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const int64_t qk = j.blocks * j.bs;
  __m256i h[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) h[r][c] = _mm256_setzero_si256();
  for (int64_t k = k8; k < k_end; k += G) {
    if constexpr (G == 64) {
      __m256i qe[R], qo[R];
      for (int r = 0; r < R; ++r) {
        qe[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(j.qa + (m0 + r) * qk + k0 + k));
        qo[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(j.qa + (m0 + r) * qk + k0 + k + 32));
      }
      for (int c = 0; c < C; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[c] + k / 2));
        const __m256i ue = _mm256_and_si256(raw, low), uo = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
        for (int r = 0; r < R; ++r)
          h[r][c] = _mm256_add_epi16(h[r][c], _mm256_add_epi16(_mm256_maddubs_epi16(ue, qe[r]), _mm256_maddubs_epi16(uo, qo[r])));
      }
    } else {
      __m256i q[R];
      for (int r = 0; r < R; ++r) q[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(j.qa + (m0 + r) * qk + k0 + k));
      for (int c = 0; c < C; ++c) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[c] + k / 2));
        const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low);
        for (int r = 0; r < R; ++r) h[r][c] = _mm256_add_epi16(h[r][c], _mm256_maddubs_epi16(u, q[r]));
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = _mm256_madd_epi16(h[r][c], ones);
}

// Block b's four int8_block_terms of a 1 x 4 tile at once, lane by lane as the
// scalar definition computes them (see block_terms8).
__attribute__((target("avx2,fma"))) inline void block_terms4(const Job& j, int64_t m0, int64_t n0, int64_t b, const __m256i (&d)[1][4], __m128* y4) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0][0], d[0][1]), _mm256_hadd_epi32(d[0][2], d[0][3]));
  const __m128i dots = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  const __m128i zl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(j.zT + b * j.N + n0));
  const __m128 wl = _mm_loadu_ps(j.sT + b * j.N + n0);
  const __m128i ql = _mm_set1_epi32(j.qs[b * j.M + m0]);
  const __m128 al = _mm_set1_ps(j.sa[b * j.M + m0]);
  *y4 = _mm_add_ps(*y4, _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(dots, _mm_mullo_epi32(zl, ql))), _mm_mul_ps(wl, al)));
}

// accuracy_level 4 over 4-bit codes in blocks of a multiple of G codes: Y continues
// its block-ordered float sum.
template <int G, int R, int C>
__attribute__((target("avx2,fma"))) void tile_int8(const Job& j, int64_t m0, int64_t n0, int64_t b0, int64_t b1) {
  float y[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r][c] = j.Y[(m0 + r) * j.N + n0 + c];
  __m256 y8 = _mm256_setzero_ps();  // R x C = 8: the eight sums, row-major, one per lane
  if constexpr (R * C == 8) y8 = _mm256_loadu_ps(&y[0][0]);
  __m128 y4 = _mm_setzero_ps();  // 1 x 4: the four sums, one per lane
  if constexpr (R == 1 && C == 4) y4 = _mm_loadu_ps(&y[0][0]);
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t k0 = b * j.bs;
    const uint8_t* p[C];
    for (int c = 0; c < C; ++c) p[c] = block_bytes(j, n0 + c, b);
    __m256i d[R][C];
    int8_chunk<G, R, C>(j, m0, p, k0, 0, std::min<int64_t>(j.bs, 256), d);
    for (int64_t k8 = 256; k8 < j.bs; k8 += 256) {  // blocks longer than 256 codes
      __m256i e[R][C];
      int8_chunk<G, R, C>(j, m0, p, k0, k8, std::min(j.bs, k8 + 256), e);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) d[r][c] = _mm256_add_epi32(d[r][c], e[r][c]);
    }
    if constexpr (R * C == 8) {
      block_terms8<R, C>(j, m0, n0, b, d, &y8);
    } else if constexpr (R == 1 && C == 4) {
      block_terms4(j, m0, n0, b, d, &y4);
    } else {
      for (int c = 0; c < C; ++c) {
        const int64_t i = b * j.N + n0 + c;
        for (int r = 0; r < R; ++r) {
          const int64_t rb = b * j.M + m0 + r;
          y[r][c] += ir::int8_block_term(hsum_i32(d[r][c]), j.zT[i], j.qs[rb], j.sT[i], j.sa[rb]);
        }
      }
    }
  }
  if constexpr (R * C == 8) _mm256_storeu_ps(&y[0][0], y8);
  if constexpr (R == 1 && C == 4) _mm_storeu_ps(&y[0][0], y4);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) j.Y[(m0 + r) * j.N + n0 + c] = y[r][c];
}

using TileFn = void (*)(const Job&, int64_t m0, int64_t n0, int64_t b0, int64_t b1);

// The tile functions of one path: a panel of `width` columns for [1, 2, 4] rows,
// each call covering cols[i] of them, and one column (N's last columns) for [1, 2,
// 4] rows. The float path's panels are 4 wide (1 x 4, 2 x 2, 4 x 1); the int8
// path's 8 (1 x 4 twice, 2 x 4, 4 x 2), so its wider tiles finish eight sums per
// block at once (block_terms8) while one row keeps 1 x 4 (eight columns of one row
// would not fit the registers).
struct Tiles {
  int64_t width;
  int64_t cols[3];
  TileFn wide[3], one[3];
};

template <template <int, int> class T, int W>
Tiles tiles_of() {
  constexpr int C2 = W == 8 ? 4 : 2, C4 = W == 8 ? 2 : 1;
  return {W, {4, C2, C4}, {T<1, 4>::f, T<2, C2>::f, T<4, C4>::f}, {T<1, 1>::f, T<2, 1>::f, T<4, 1>::f}};
}
template <int R, int C> struct Baseline { static constexpr TileFn f = tile_baseline<R, C>; };
template <int R, int C> struct Avx2Bits4 { static constexpr TileFn f = tile_avx2<4, R, C>; };
template <int R, int C> struct Avx2Bits8 { static constexpr TileFn f = tile_avx2<8, R, C>; };
template <int R, int C> struct Int8G32 { static constexpr TileFn f = tile_int8<32, R, C>; };
template <int R, int C> struct Int8G64 { static constexpr TileFn f = tile_int8<64, R, C>; };

// Blocks [b0, b1) for every row of A and the panel of columns from n0 (one column
// where fewer than a panel are left): rows in groups of 4, then 2, then 1.
void panel(const Job& j, const Tiles& t, int64_t M, int64_t n0, int64_t b0, int64_t b1) {
  const bool wide = n0 + t.width <= j.N;
  for (int64_t m = 0; m < M;) {
    const int rows = M - m >= 4 ? 4 : M - m >= 2 ? 2 : 1, which = rows == 4 ? 2 : rows - 1;
    const int64_t cols = wide ? t.cols[which] : 1;  // columns per call
    const TileFn f = wide ? t.wide[which] : t.one[which];
    for (int64_t n = n0; n < (wide ? n0 + t.width : n0 + 1); n += cols) f(j, m, n, b0, b1);
    m += rows;
  }
}

// Every panel of Y ([M, N], zeroed) over K tiles of `tile` blocks, in block order.
void run_panels(const Job& j, const Tiles& t, int64_t M, int64_t tile) {
  std::fill(j.Y, j.Y + M * j.N, 0.0f);
  const int64_t full = j.N / t.width, panels = full + (j.N - full * t.width);  // wide panels, then single columns
  for (int64_t b0 = 0; b0 < j.blocks; b0 += tile) {
    const int64_t b1 = std::min(j.blocks, b0 + tile);
#pragma omp parallel for schedule(static) if (M * j.N * j.K > (1 << 15))
    for (int64_t p = 0; p < panels; ++p) panel(j, t, M, p < full ? p * t.width : full * t.width + (p - full), b0, b1);
  }
}

bool avx2_here() { return simd_isa() != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// The kernel's own state: the weight (shared with the graph), zero points as
// floats, and the int8 path's buffers (made once, when built).
struct State {
  ir::NBitsWeight w;
  std::vector<float> zf, sT;
  std::vector<int32_t> zT;
  int64_t M = 0, group = 32;
  std::vector<int8_t> q, qa;
  std::vector<float> sa, row_sa;
  std::vector<int32_t> qs, row_qs;
};

Job job_of(const State& s) {
  const ir::NBitsWeight& w = s.w;
  Job j{w.B.data<uint8_t>(), w.scales.data<float>(), s.zf.data(), w.K, w.N, w.blocks, w.blob, w.block_size, w.bits};
  j.sT = s.sT.data();
  j.zT = s.zT.data();
  j.qa = s.qa.data();
  j.sa = s.sa.data();
  j.qs = s.qs.data();
  j.M = s.M;
  return j;
}

// The int8 path's buffers and transposed qparams ([blocks, N]), made once.
void prepare_int8(State& s, int64_t M) {
  const ir::NBitsWeight& w = s.w;
  s.M = M;
  s.group = w.block_size % 64 == 0 ? 64 : 32;
  s.sT.resize(static_cast<size_t>(w.blocks * w.N));
  s.zT.resize(s.sT.size());
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t b = 0; b < w.blocks; ++b) {
      s.sT[static_cast<size_t>(b * w.N + n)] = w.scales.data<float>()[n * w.blocks + b];
      s.zT[static_cast<size_t>(b * w.N + n)] = w.zero[static_cast<size_t>(n * w.blocks + b)];
    }
  s.q.resize(static_cast<size_t>(w.blocks * w.block_size));
  s.qa.resize(static_cast<size_t>(M * w.blocks * w.block_size));
  s.sa.resize(static_cast<size_t>(M * w.blocks));
  s.qs.resize(s.sa.size());
  s.row_sa.resize(static_cast<size_t>(w.blocks));
  s.row_qs.resize(static_cast<size_t>(w.blocks));
}

// Quantizes A's M rows for tile_int8: quantize_row_blocks, each `group` values
// reordered (the even ones first), scales and sums stored [blocks, M].
void quantize_rows(State& s, const float* A) {
  const ir::NBitsWeight& w = s.w;
  const int64_t qk = w.blocks * w.block_size, half = s.group / 2;
  for (int64_t m = 0; m < s.M; ++m) {
    ir::quantize_row_blocks(A + m * w.K, w.K, w.block_size, s.q.data(), s.row_sa.data(), s.row_qs.data());
    for (int64_t b = 0; b < w.blocks; ++b) {
      s.sa[static_cast<size_t>(b * s.M + m)] = s.row_sa[static_cast<size_t>(b)];
      s.qs[static_cast<size_t>(b * s.M + m)] = s.row_qs[static_cast<size_t>(b)];
    }
    int8_t* dst = s.qa.data() + m * qk;
    for (int64_t g = 0; g < qk; g += s.group)
      for (int64_t i = 0; i < half; ++i) {
        dst[g + i] = s.q[static_cast<size_t>(g + 2 * i)];
        dst[g + half + i] = s.q[static_cast<size_t>(g + 2 * i + 1)];
      }
  }
}

bool packed_kernel(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  if (r.in.empty() || r.in[0].dtype != DType::kFloat32 || r.in[0].shape.empty()) return r.decline("A is not a float32 tensor");
  auto st = std::make_shared<State>();
  st->w = ir::read_nbits_weight(n, r.consts);
  const ir::NBitsWeight& w = st->w;
  const int64_t M = ir::nbits_rows(n, r.in[0], w);
  const bool int8 = ir::int8_activations(n);
  if (int8 && (w.bits != 4 || w.block_size % 32 != 0 || w.block_size > ir::kMaxInt8ActivationBlock || !avx2_here()))
    return r.decline("accuracy_level 4 runs here for 4-bit codes in blocks of a multiple of 32, with AVX2");
  if (!int8 && w.bits != 4 && w.bits != 8) return r.decline("bits other than 4 and 8");
  if (!int8 && M > kMaxPackedRows) return r.decline("more than " + std::to_string(kMaxPackedRows) + " rows (oneDNN's float matmul is faster)");
  st->zf.assign(w.zero.begin(), w.zero.end());
  Tiles t = tiles_of<Baseline, 4>();
  if (int8) {
    prepare_int8(*st, M);
    t = st->group == 64 ? tiles_of<Int8G64, 8>() : tiles_of<Int8G32, 8>();
  } else if (avx2_here()) {
    t = w.bits == 8 ? tiles_of<Avx2Bits8, 4>() : tiles_of<Avx2Bits4, 4>();
  }
  // Blocks per K tile: A's rows over one tile fit kTileBytes (at least one block).
  const int64_t tile = std::max<int64_t>(1, kTileBytes / ((int8 ? 1 : 4) * M * w.block_size));
  Shape out = r.in[0].shape;
  out.back() = w.N;
  k->outputs = {{out, DType::kFloat32}};
  k->run = [st, t, M, tile, int8](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& o) {
    if (int8) quantize_rows(*st, in[0]->data<float>());
    Job j = job_of(*st);
    j.A = in[0]->data<float>();
    j.Y = o[0]->data<float>();
    run_panels(j, t, M, tile);
  };
  return true;
}

bool dequantized_kernel(const KernelRequest& r, Kernel* k) {
  if (r.in.empty() || r.in[0].dtype != DType::kFloat32) return r.decline("A is not a float32 tensor");
  if (ir::int8_activations(r.node)) return r.decline("accuracy_level 4 (int8 activations) is not a float matmul");
  *k = ir::dequantized_matmul(r.node, r.in[0], ir::read_nbits_weight(r.node, r.consts), "onednn");
  return true;
}

}  // namespace

void register_simd_matmul_nbits() {
  add_kernel("onednn", "MatMulNBits", "simd", packed_kernel);
  add_kernel("onednn", "MatMulNBits", "dequantized", dequantized_kernel);
}

}  // namespace qfx::runtime
