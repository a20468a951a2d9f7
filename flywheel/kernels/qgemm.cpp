// qgemm: a batch-invariant linear over GGUF blocks (int8 codes x fp32 group scales [+ fp32 offsets]).
//
// The numbers, fixed so that a row's bits depend on that row alone:
//
//   weight w[n,k] = s[n,g] * c[n,k] (+ o[n,g])       g = k / G, G = 16 or 32 (the file's block group)
//
//   mode 0 "f32a" (exact weights, fp32 activations):
//       acc = 0; for k = 0..K-1 in order: acc = fma(x[k], w[n,k], acc);  y = acc + bias[n]
//       where w[n,k] is formed as fl(s * c) then fl(w + o): exactly the fp32 weight the
//       transformers GGUF loader writes (s * c is exact in fp32 for every block type used).
//   mode 1 "i8a" (per-row int8 activations, integer dot products):
//       per 32 columns of a row: d = amax / 127, q = nearbyint(x * (1 / d)) clamped to +-127
//       acc = 0; for g in order: isum = sum_k q[k]*c[n,k] (int32, exact, however a variant groups it);
//            qsum = sum_k q[k];
//            acc = fma(float(isum), s[n,g] * d, acc); if offsets: acc = fma(float(qsum), o[n,g] * d, acc)
//       y = acc + bias[n]
//
// Every variant (AVX-512 VNNI, AVX2, portable) performs exactly these IEEE operations per output in
// this order (vector lanes are output features; K is never split; threads split the output
// features), so bits do not depend on the batch size, a row's position, the thread count or the
// variant. Integer sums are exact, so how a variant groups them changes nothing. Built with
// -ffp-contract=off and without fast-math: the compiler may not fuse or reorder what is written.
//
// Layout (`pack` in flywheel/kernels/blocks.py): output features in tiles of 16 (N padded);
//   codes   uint8 [NT][K/4][16][4]  c + 128, c in -127..127 (never -128: AVX2's sign trick needs |c| <= 127);
//                                   VNNI multiplies these unsigned bytes by the signed activations directly
//   scales  f32   [NT][K/G][16]
//   offsets f32   [NT][K/G][16]     (empty when the block type has none)

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int kTile = 16;     // output features per tile (one AVX-512 register of fp32 lanes)
constexpr int kQBlock = 32;   // activation quantization block (mode i8a)

struct Problem {
  const float* x;          // [M][K]
  const uint8_t* codes;    // [NT][K/4][16][4], c + 128
  const float* scales;     // [NT][K/G][16]
  const float* offsets;    // [NT][K/G][16] or nullptr
  const float* bias;       // [N] or nullptr
  float* y;                // [M][N]
  int64_t M, K, N, G;
  // mode i8a: the quantized rows
  const int8_t* xq;        // [M][K]
  const float* xd;         // [M][K/32]
  const int32_t* qsum;     // [M][K/G]
};

inline void store_tile(const Problem& p, int64_t row, int64_t nt, const float* acc) {
  const int64_t n0 = nt * kTile;
  const int64_t n_end = std::min<int64_t>(n0 + kTile, p.N);
  float* out = p.y + row * p.N;
  for (int64_t n = n0; n < n_end; ++n) {
    const float a = acc[n - n0];
    out[n] = p.bias ? a + p.bias[n] : a;
  }
}

// ---- activation quantization (mode i8a), the same scalar code for every variant -----------------

void quantize_rows(const float* x, int64_t M, int64_t K, int64_t G, int8_t* xq, float* xd, int32_t* qsum) {
  at::parallel_for(0, M, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * K;
      for (int64_t b = 0; b < K / kQBlock; ++b) {
        float amax = 0.0f;
        for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(row[b * kQBlock + i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        xd[r * (K / kQBlock) + b] = d;
        for (int i = 0; i < kQBlock; ++i) {
          float q = std::nearbyint(row[b * kQBlock + i] * id);
          q = std::min(127.0f, std::max(-127.0f, q));   // also maps NaN to -127 deterministically
          xq[r * K + b * kQBlock + i] = static_cast<int8_t>(q);
        }
      }
      for (int64_t g = 0; g < K / G; ++g) {
        int32_t s = 0;
        for (int64_t i = 0; i < G; ++i) s += xq[r * K + g * G + i];
        qsum[r * (K / G) + g] = s;
      }
    }
  });
}

// ---- portable reference (any CPU) ---------------------------------------------------------------

inline int code_at(const Problem& p, int64_t nt, int64_t k, int lane) {
  return static_cast<int>(p.codes[((nt * (p.K / 4) + k / 4) * kTile + lane) * 4 + (k % 4)]) - 128;
}

void tile_f32a_portable(const Problem& p, int64_t nt) {
  const int64_t groups = p.K / p.G;
  for (int64_t r = 0; r < p.M; ++r) {
    float acc[kTile] = {};
    const float* xr = p.x + r * p.K;
    for (int64_t g = 0; g < groups; ++g) {
      const float* s = p.scales + (nt * groups + g) * kTile;
      const float* o = p.offsets ? p.offsets + (nt * groups + g) * kTile : nullptr;
      for (int64_t k = g * p.G; k < (g + 1) * p.G; ++k) {
        for (int lane = 0; lane < kTile; ++lane) {
          float w = s[lane] * static_cast<float>(code_at(p, nt, k, lane));
          if (o) w = w + o[lane];
          acc[lane] = std::fma(xr[k], w, acc[lane]);
        }
      }
    }
    store_tile(p, r, nt, acc);
  }
}

void tile_i8a_portable(const Problem& p, int64_t nt) {
  const int64_t groups = p.K / p.G;
  for (int64_t r = 0; r < p.M; ++r) {
    float acc[kTile] = {};
    const int8_t* q = p.xq + r * p.K;
    for (int64_t g = 0; g < groups; ++g) {
      const float d = p.xd[r * (p.K / kQBlock) + (g * p.G) / kQBlock];
      const float* s = p.scales + (nt * groups + g) * kTile;
      const float* o = p.offsets ? p.offsets + (nt * groups + g) * kTile : nullptr;
      const float qs = static_cast<float>(p.qsum[r * groups + g]);
      for (int lane = 0; lane < kTile; ++lane) {
        int32_t isum = 0;
        for (int64_t k = g * p.G; k < (g + 1) * p.G; ++k) isum += static_cast<int32_t>(q[k]) * code_at(p, nt, k, lane);
        acc[lane] = std::fma(static_cast<float>(isum), s[lane] * d, acc[lane]);
        if (o) acc[lane] = std::fma(qs, o[lane] * d, acc[lane]);
      }
    }
    store_tile(p, r, nt, acc);
  }
}

// ---- row blocks: R rows of one tile, R a compile-time constant so accumulators stay in registers ----

// Runs `Block<R>::run(p, nt, r0)` over all rows of tile `nt`, R = MaxR while enough rows remain,
// then the remainder with a smaller R (each row's arithmetic is the same whatever R it ran in).
template <template <int> class Block, int MaxR>
struct RowBlocks {
  static void run(const Problem& p, int64_t nt) {
    int64_t r0 = 0;
    for (; r0 + MaxR <= p.M; r0 += MaxR) Block<MaxR>::run(p, nt, r0);
    rest<MaxR - 1>(p, nt, r0);
  }
  template <int R>
  static void rest(const Problem& p, int64_t nt, int64_t r0) {
    if constexpr (R >= 1) {
      if (p.M - r0 == R) Block<R>::run(p, nt, r0);
      else rest<R - 1>(p, nt, r0);
    }
  }
};

// ---- AVX-512 (F + BW + VNNI) ----------------------------------------------------------------------

#define FW_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

template <int R>
struct F32aAvx512 {
  FW_AVX512 static void run(const Problem& p, int64_t nt, int64_t r0) {
    const int64_t groups = p.K / p.G;
    const uint8_t* tile_codes = p.codes + nt * (p.K / 4) * kTile * 4;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const bool has_o = p.offsets != nullptr;
    __m512 acc[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m512 s = _mm512_loadu_ps(p.scales + (nt * groups + g) * kTile);
      const __m512 o = has_o ? _mm512_loadu_ps(p.offsets + (nt * groups + g) * kTile) : _mm512_setzero_ps();
      for (int64_t k4 = g * p.G / 4; k4 < (g + 1) * p.G / 4; ++k4) {
        const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(tile_codes + k4 * kTile * 4), flip);   // c as int8
#pragma GCC unroll 4
        for (int b = 0; b < 4; ++b) {
          const __m512i c = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24);   // byte b, sign-extended
          __m512 w = _mm512_mul_ps(s, _mm512_cvtepi32_ps(c));
          if (has_o) w = _mm512_add_ps(w, o);
          const float* xk = p.x + r0 * p.K + k4 * 4 + b;
#pragma GCC unroll 16
          for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xk[i * p.K]), w, acc[i]);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      alignas(64) float a[kTile];
      _mm512_store_ps(a, acc[i]);
      store_tile(p, r0 + i, nt, a);
    }
  }
};

template <int R>
struct I8aAvx512 {
  // KG: groups of four inputs per scale group (G / 4), a constant so the group's dot products unroll fully.
  template <int KG, bool HAS_O>
  FW_AVX512 static void body(const Problem& p, int64_t nt, int64_t r0) {
    const int64_t groups = p.K / p.G;
    const int64_t row_k4 = p.K / 4;
    const uint8_t* tile_codes = p.codes + nt * row_k4 * kTile * 4;
    const int32_t* xq4 = reinterpret_cast<const int32_t*>(p.xq + r0 * p.K);   // four int8 activations each
    __m512 acc[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      __m512i isum[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) isum[i] = _mm512_setzero_si512();
      const uint8_t* wg = tile_codes + g * KG * kTile * 4;
      const int32_t* xg = xq4 + g * KG;
#pragma GCC unroll 8
      for (int j = 0; j < KG; ++j) {
        const __m512i w = _mm512_loadu_si512(wg + j * kTile * 4);   // unsigned: c + 128
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) isum[i] = _mm512_dpbusd_epi32(isum[i], w, _mm512_set1_epi32(xg[i * row_k4 + j]));
      }
      const __m512 s = _mm512_loadu_ps(p.scales + (nt * groups + g) * kTile);
      const __m512 o = HAS_O ? _mm512_loadu_ps(p.offsets + (nt * groups + g) * kTile) : _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const int64_t r = r0 + i;
        const float d = p.xd[r * (p.K / kQBlock) + (g * p.G) / kQBlock];
        const int32_t qs = p.qsum[r * groups + g];
        // sum (c + 128) q = sum c q + 128 sum q: remove the 128, exactly, in integers
        const __m512i exact = _mm512_sub_epi32(isum[i], _mm512_set1_epi32(128 * qs));
        const __m512 vd = _mm512_set1_ps(d);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(s, vd), acc[i]);
        if (HAS_O) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(qs)), _mm512_mul_ps(o, vd), acc[i]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      alignas(64) float a[kTile];
      _mm512_store_ps(a, acc[i]);
      store_tile(p, r0 + i, nt, a);
    }
  }
  static void run(const Problem& p, int64_t nt, int64_t r0) {
    const bool has_o = p.offsets != nullptr;
    if (p.G == 16) has_o ? body<4, true>(p, nt, r0) : body<4, false>(p, nt, r0);
    else has_o ? body<8, true>(p, nt, r0) : body<8, false>(p, nt, r0);
  }
};

// ---- AVX2 + FMA (two 8-lane halves per tile) --------------------------------------------------------

#define FW_AVX2 __attribute__((target("avx2,fma")))

template <int R>
struct F32aAvx2 {
  FW_AVX2 static void run(const Problem& p, int64_t nt, int64_t r0) {
    const int64_t groups = p.K / p.G;
    const uint8_t* tile_codes = p.codes + nt * (p.K / 4) * kTile * 4;
    const bool has_o = p.offsets != nullptr;
    __m256 acc[R][2];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const float* sp = p.scales + (nt * groups + g) * kTile;
      const float* op = has_o ? p.offsets + (nt * groups + g) * kTile : nullptr;
      for (int64_t k4 = g * p.G / 4; k4 < (g + 1) * p.G / 4; ++k4) {
        const uint8_t* chunk = tile_codes + k4 * kTile * 4;
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * h)),
                                             _mm256_set1_epi8(static_cast<char>(0x80)));   // c as int8
          const __m256 s = _mm256_loadu_ps(sp + 8 * h);
#pragma GCC unroll 4
          for (int b = 0; b < 4; ++b) {
            const __m256i c = _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * b), 24);   // byte b, sign-extended
            __m256 w = _mm256_mul_ps(s, _mm256_cvtepi32_ps(c));
            if (has_o) w = _mm256_add_ps(w, _mm256_loadu_ps(op + 8 * h));
            const float* xk = p.x + r0 * p.K + k4 * 4 + b;
#pragma GCC unroll 16
            for (int i = 0; i < R; ++i) acc[i][h] = _mm256_fmadd_ps(_mm256_set1_ps(xk[i * p.K]), w, acc[i][h]);
          }
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      alignas(32) float a[kTile];
      _mm256_store_ps(a, acc[i][0]);
      _mm256_store_ps(a + 8, acc[i][1]);
      store_tile(p, r0 + i, nt, a);
    }
  }
};

// 8 lanes' 4-byte dot products, exact: |q| (unsigned) times c with q's sign (vpsignb), pairs summed to
// int16 (vpmaddubsw: at most 2 * 127 * 127, no saturation since codes are never -128), then to int32.
FW_AVX2 inline __m256i dot4_avx2(__m256i codes, __m256i q4, __m256i abs_q4) {
  const __m256i pairs = _mm256_maddubs_epi16(abs_q4, _mm256_sign_epi8(codes, q4));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <int R>
struct I8aAvx2 {
  template <int KG, bool HAS_O>
  FW_AVX2 static void body(const Problem& p, int64_t nt, int64_t r0) {
    const int64_t groups = p.K / p.G;
    const int64_t row_k4 = p.K / 4;
    const uint8_t* tile_codes = p.codes + nt * row_k4 * kTile * 4;
    const int32_t* xq4 = reinterpret_cast<const int32_t*>(p.xq + r0 * p.K);   // four int8 activations each
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));           // c + 128 -> c as int8
    __m256 acc[R][2];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      __m256i isum[R][2];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) isum[i][0] = isum[i][1] = _mm256_setzero_si256();
      const uint8_t* wg = tile_codes + g * KG * kTile * 4;
      const int32_t* xg = xq4 + g * KG;
#pragma GCC unroll 8
      for (int j = 0; j < KG; ++j) {
        const uint8_t* chunk = wg + j * kTile * 4;
        const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk)), flip);
        const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32)), flip);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          const __m256i q4 = _mm256_set1_epi32(xg[i * row_k4 + j]);   // four activations, repeated for every lane
          const __m256i abs_q4 = _mm256_abs_epi8(q4);
          isum[i][0] = _mm256_add_epi32(isum[i][0], dot4_avx2(w0, q4, abs_q4));
          isum[i][1] = _mm256_add_epi32(isum[i][1], dot4_avx2(w1, q4, abs_q4));
        }
      }
      const float* sp = p.scales + (nt * groups + g) * kTile;
      const float* op = HAS_O ? p.offsets + (nt * groups + g) * kTile : nullptr;
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const int64_t r = r0 + i;
        const float d = p.xd[r * (p.K / kQBlock) + (g * p.G) / kQBlock];
        const int32_t qs = p.qsum[r * groups + g];
        const __m256 vd = _mm256_set1_ps(d);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]), _mm256_mul_ps(_mm256_loadu_ps(sp + 8 * h), vd), acc[i][h]);
          if (HAS_O)
            acc[i][h] = _mm256_fmadd_ps(_mm256_set1_ps(static_cast<float>(qs)), _mm256_mul_ps(_mm256_loadu_ps(op + 8 * h), vd), acc[i][h]);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      alignas(32) float a[kTile];
      _mm256_store_ps(a, acc[i][0]);
      _mm256_store_ps(a + 8, acc[i][1]);
      store_tile(p, r0 + i, nt, a);
    }
  }
  static void run(const Problem& p, int64_t nt, int64_t r0) {
    const bool has_o = p.offsets != nullptr;
    if (p.G == 16) has_o ? body<4, true>(p, nt, r0) : body<4, false>(p, nt, r0);
    else has_o ? body<8, true>(p, nt, r0) : body<8, false>(p, nt, r0);
  }
};

void tile_f32a_avx512(const Problem& p, int64_t nt) { RowBlocks<F32aAvx512, 8>::run(p, nt); }
void tile_i8a_avx512(const Problem& p, int64_t nt) { RowBlocks<I8aAvx512, 8>::run(p, nt); }
void tile_f32a_avx2(const Problem& p, int64_t nt) { RowBlocks<F32aAvx2, 3>::run(p, nt); }
void tile_i8a_avx2(const Problem& p, int64_t nt) { RowBlocks<I8aAvx2, 3>::run(p, nt); }

// ---- dispatch -----------------------------------------------------------------------------------

enum Variant : int64_t { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

int64_t best_variant() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kAvx2;
  return kPortable;
}

using TileFn = void (*)(const Problem&, int64_t);

TileFn pick(int64_t mode, int64_t variant) {
  static const TileFn table[2][3] = {{tile_f32a_portable, tile_f32a_avx2, tile_f32a_avx512},
                                     {tile_i8a_portable, tile_i8a_avx2, tile_i8a_avx512}};
  return table[mode][variant];
}

at::Tensor qlinear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales,
                   const at::Tensor& offsets, const at::Tensor& bias, int64_t n_out, int64_t group, int64_t mode,
                   int64_t variant) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "qlinear: x must be contiguous (M, K) float32");
  TORCH_CHECK(codes.scalar_type() == at::kByte && codes.is_contiguous(), "qlinear: codes must be contiguous uint8");
  TORCH_CHECK(scales.scalar_type() == at::kFloat && scales.is_contiguous(), "qlinear: scales must be contiguous float32");
  TORCH_CHECK(mode == 0 || mode == 1, "qlinear: mode is 0 (f32a) or 1 (i8a)");
  TORCH_CHECK(variant >= kPortable && variant <= best_variant(), "qlinear: variant ", variant, " cannot run on this CPU");
  const int64_t M = x.size(0), K = x.size(1);
  TORCH_CHECK(group == 16 || group == 32, "qlinear: group must be 16 or 32");
  TORCH_CHECK(K % kQBlock == 0, "qlinear: K must be a multiple of 32, got ", K);
  const int64_t NT = (n_out + kTile - 1) / kTile;
  TORCH_CHECK(codes.numel() == NT * K * kTile, "qlinear: codes hold ", codes.numel(), " bytes, expected ", NT * K * kTile);
  TORCH_CHECK(scales.numel() == NT * (K / group) * kTile, "qlinear: scales size mismatch");
  const bool has_o = offsets.numel() > 0;
  TORCH_CHECK(!has_o || (offsets.scalar_type() == at::kFloat && offsets.is_contiguous() && offsets.numel() == scales.numel()),
              "qlinear: offsets must match scales");
  const bool has_b = bias.numel() > 0;
  TORCH_CHECK(!has_b || (bias.scalar_type() == at::kFloat && bias.is_contiguous() && bias.numel() == n_out),
              "qlinear: bias must be float32 of N elements");

  at::Tensor y = at::empty({M, n_out}, x.options());
  Problem p{x.data_ptr<float>(), codes.data_ptr<uint8_t>(), scales.data_ptr<float>(),
            has_o ? offsets.data_ptr<float>() : nullptr, has_b ? bias.data_ptr<float>() : nullptr,
            y.data_ptr<float>(), M, K, n_out, group, nullptr, nullptr, nullptr};
  at::Tensor xq, xd, qsum;
  if (mode == 1) {
    xq = at::empty({M, K}, x.options().dtype(at::kChar));
    xd = at::empty({M, K / kQBlock}, x.options());
    qsum = at::empty({M, K / group}, x.options().dtype(at::kInt));
    quantize_rows(p.x, M, K, group, xq.data_ptr<int8_t>(), xd.data_ptr<float>(), qsum.data_ptr<int32_t>());
    p.xq = xq.data_ptr<int8_t>();
    p.xd = xd.data_ptr<float>();
    p.qsum = qsum.data_ptr<int32_t>();
  }
  const TileFn fn = pick(mode, variant);
  // Threads take whole tiles of output features; K is never split, so thread count changes no bit.
  at::parallel_for(0, NT, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t nt = t0; nt < t1; ++nt) fn(p, nt);
  });
  return y;
}

int64_t version() { return 1; }

}  // namespace

TORCH_LIBRARY(flywheel_qgemm, m) {
  m.def("qlinear(Tensor x, Tensor codes, Tensor scales, Tensor offsets, Tensor bias, int n_out, int group, "
        "int mode, int variant) -> Tensor");
  m.def("best_variant", &best_variant);
  m.def("version", &version);
}

TORCH_LIBRARY_IMPL(flywheel_qgemm, CPU, m) { m.impl("qlinear", &qlinear); }
