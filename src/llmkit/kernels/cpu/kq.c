/* y = x W^T for llama.cpp's 5- and 6-bit and K-quant weights as the file has them (Q5_0 and
 * Q5_1, Q4_K, Q5_K, Q6_K), times int8 activations with a scale per 32 inputs, AVX2 or VNNI.
 *
 * Weights (laid out by kquant.py; each format's numbers are the file's, not requantized):
 * - Q5 (Q5_1, and Q5_0 as Q5_1 with the min -16 d): codes 0..31, a float16 scale and min per
 *   32 inputs: w = scale q + min.
 * - Q4_K, Q5_K: codes 0..15 (0..31), per super-block of 256 inputs a float16 d and dmin, per
 *   32 inputs 6-bit integers sc and m: w = d sc q - dmin m (d sc and dmin m are exact in float).
 * - Q6_K: codes 0..63 less 32, per 256 inputs a float16 d, per 16 inputs an int8 sc: w = d sc q.
 * The codes' low four bits are laid out as w4a8.c's (per tile of 8 columns, per 8 inputs, 32
 * bytes: byte 4c + j holds column c's input k + j in its low nibble, k + 4 + j in its high
 * one), so one load and a mask or shift give two vectors of 8 columns x 4 inputs. The higher
 * bits sit in a plane of the same 32-byte rows: for 5 bits, per 32 inputs, bit 2s + h of byte
 * 4c + j is bit 4 of input 8s + 4h + j; for 6 bits, per 16 inputs, bits 2(2s + h) and the next
 * are bits 4 and 5 of input 8s + 4h + j.
 *
 * Activations: as w4a8.c and q8.c (tiled.h's quantize_grouped: s8 codes, a scale per block of
 * 32, each block's scaled code sum for the min terms), so a stacked layer whose parts are of
 * different formats quantizes its input once. Per block of 32 (Q6_K: 16) the integer dot
 * products of a lane's column (u8 x s8: Q6_K's signed codes as |w| x (x with w's sign)) meet
 * the column's float scale, d sc or the Q5 scale, times the block's activation scale. AVX2's
 * maddubs makes int16 pair sums: 4-bit codes add up over a block in int16 (8 x 2 x 15 x 127
 * at most), wider ones are widened each 8 inputs (4 x 63 x 127 at most); VNNI's dpbusd adds
 * into int32 directly. Both give the same integers, so every path gives the same floats.
 *
 * Threads: as w4a8.c (rows quantized, then output tiles, over torch's OpenMP pool).
 */
#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__FMA__)
#error "the kq kernel needs AVX2, F16C and FMA"
#endif
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define NARROW_ADD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define NARROW_SUM(acc) (acc)
#define WIDE_ADD(acc, u0, s0, u1, s1) _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, u0, s0), u1, s1)
#define KQ_PATH 2
#elif defined(__AVXVNNI__)
#define NARROW_ADD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define NARROW_SUM(acc) (acc)
#define WIDE_ADD(acc, u0, s0, u1, s1) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, u0, s0), u1, s1)
#define KQ_PATH 1
#else
#define NARROW_ADD(acc, u, s) _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s))
#define NARROW_SUM(acc) _mm256_madd_epi16(acc, _mm256_set1_epi16(1))
#define WIDE_ADD(acc, u0, s0, u1, s1)                                                          \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0),     \
                                                             _mm256_maddubs_epi16(u1, s1)),    \
                                            _mm256_set1_epi16(1)))
#define KQ_PATH 0
#endif

enum { KQ_Q5 = 0, KQ_Q4K = 1, KQ_Q5K = 2, KQ_Q6K = 3 };

typedef struct {
    const float *x;
    const uint8_t *lo, *hi;   /* hi: NULL for Q4_K */
    const void *sc, *mn;      /* Q5: float16 scale and min; K: int8 / uint8 sub-block ints */
    const uint16_t *d, *dmin; /* K: per 256 inputs, float16 */
    float *out;
    int8_t *q;
    float *xscale, *xsum;
    int64_t M, K, Kp, N, fmt;
    int64_t ldo; /* out's row stride (see w4a8.c) */
} Job;

#include "tiled.h"
#include "tile_walk.h"

/* Which instructions this build multiplies with: 0 AVX2, 1 AVX-VNNI, 2 AVX512-VNNI. */
int kq_path(void) { return KQ_PATH; }

static void quantize_rows(const Job *job, int64_t first, int64_t last) {
    quantize_grouped(job->x, job->q, job->xscale, job->xsum, job->K, job->Kp, 32, first, last);
}

/* Bit p of each byte of h moved to bit 4 (mask 0x10), or bits p, p + 1 to bits 4, 5. */
static inline __attribute__((always_inline)) __m256i bits_at4(__m256i h, int p, int mask) {
    const __m256i moved = p <= 4 ? _mm256_slli_epi16(h, 4 - p) : _mm256_srli_epi16(h, p - 4);
    return _mm256_and_si256(moved, _mm256_set1_epi8((char)mask));
}

static inline __attribute__((always_inline)) __m256 half_vec(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __attribute__((always_inline)) __m256 u8_vec(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

static inline __attribute__((always_inline)) __m256 s8_vec(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* The int32 dot products of 32 inputs (block b of the tile's codes) with mt rows' codes, for
 * codes of 4 bits (fmt Q4K), 5 (Q5, Q5K) or 6 (Q6K: into dots of 16 inputs each, 2 a row). */
static inline __attribute__((always_inline)) void block_dots(const Job *job, const uint8_t *lo,
                                                             const uint8_t *hi, int64_t b,
                                                             const int8_t *q, int mt, int fmt,
                                                             __m256i *dots) {
    const int64_t Kp = job->Kp;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    _mm_prefetch((const char *)(lo + b * 128) + PREFETCH_AHEAD, _MM_HINT_T0);
    _mm_prefetch((const char *)(lo + b * 128) + PREFETCH_AHEAD + 64, _MM_HINT_T0);
    __m256i h5 = _mm256_setzero_si256();
    if (fmt == KQ_Q5 || fmt == KQ_Q5K) {
        _mm_prefetch((const char *)(hi + b * 32) + PREFETCH_AHEAD, _MM_HINT_T0);
        h5 = _mm256_loadu_si256((const __m256i *)(hi + b * 32));
    }
    for (int r = 0; r < mt * (fmt == KQ_Q6K ? 2 : 1); r++) dots[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        const int64_t k = b * 32 + s * 8;
        const __m256i v = _mm256_loadu_si256((const __m256i *)(lo + k * 4));
        __m256i l = _mm256_and_si256(v, nibble);
        __m256i h = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
        if (fmt == KQ_Q5 || fmt == KQ_Q5K) {
            l = _mm256_or_si256(l, bits_at4(h5, 2 * s, 0x10));
            h = _mm256_or_si256(h, bits_at4(h5, 2 * s + 1, 0x10));
        } else if (fmt == KQ_Q6K) {
            const __m256i h6 = _mm256_loadu_si256((const __m256i *)(hi + (2 * b + s / 2) * 32));
            const __m256i c32 = _mm256_set1_epi8(32);
            l = _mm256_sub_epi8(_mm256_or_si256(l, bits_at4(h6, 4 * (s % 2), 0x30)), c32);
            h = _mm256_sub_epi8(_mm256_or_si256(h, bits_at4(h6, 4 * (s % 2) + 2, 0x30)), c32);
        }
        for (int r = 0; r < mt; r++) {
            int32_t a0, a1;
            memcpy(&a0, q + r * Kp + k, 4);
            memcpy(&a1, q + r * Kp + k + 4, 4);
            const __m256i x0 = _mm256_set1_epi32(a0), x1 = _mm256_set1_epi32(a1);
            if (fmt == KQ_Q4K) {
                dots[r] = NARROW_ADD(dots[r], l, x0);
                dots[r] = NARROW_ADD(dots[r], h, x1);
            } else if (fmt == KQ_Q6K) {
                __m256i *d = dots + 2 * r + s / 2;
                *d = WIDE_ADD(*d, _mm256_abs_epi8(l), _mm256_sign_epi8(x0, l),
                              _mm256_abs_epi8(h), _mm256_sign_epi8(x1, h));
            } else {
                dots[r] = WIDE_ADD(dots[r], l, x0, h, x1);
            }
        }
    }
    if (fmt == KQ_Q4K)
        for (int r = 0; r < mt; r++) dots[r] = NARROW_SUM(dots[r]);
}

/* out[m0 .. m0 + mt, 8 t .. 8 t + 8] for format fmt (the last tile's spare columns dropped). */
static inline __attribute__((always_inline)) void tile_of(const Job *job, int64_t t, int64_t m0,
                                                          int mt, int fmt) {
    const int64_t Kp = job->Kp, blocks = Kp / 32, N = job->N;
    const uint8_t *lo = job->lo + t * Kp * 4;
    const uint8_t *hi = job->hi == NULL ? NULL : job->hi + t * Kp * (fmt == KQ_Q6K ? 2 : 1);
    const int8_t *q = job->q + m0 * Kp;
    const float *xscale = job->xscale + m0 * blocks, *xsum = job->xsum + m0 * blocks;
    __m256 acc[MT];
    __m256i dots[2 * MT];
    __m256 d = _mm256_setzero_ps(), dmin = _mm256_setzero_ps();
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        if (fmt != KQ_Q5 && b % 8 == 0) { /* a new super-block of 256 */
            d = half_vec(job->d + (t * (Kp / 256) + b / 8) * 8);
            if (fmt != KQ_Q6K) dmin = half_vec(job->dmin + (t * (Kp / 256) + b / 8) * 8);
        }
        block_dots(job, lo, hi, b, q, mt, fmt, dots);
        if (fmt == KQ_Q6K) {
            const int8_t *sc = (const int8_t *)job->sc + (t * (Kp / 16) + 2 * b) * 8;
            const __m256 s0 = _mm256_mul_ps(d, s8_vec(sc)), s1 = _mm256_mul_ps(d, s8_vec(sc + 8));
            for (int r = 0; r < mt; r++) {
                const __m256 xs = _mm256_set1_ps(xscale[r * blocks + b]);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[2 * r]), _mm256_mul_ps(s0, xs), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[2 * r + 1]), _mm256_mul_ps(s1, xs), acc[r]);
            }
            continue;
        }
        __m256 scale, min;
        if (fmt == KQ_Q5) {
            scale = half_vec((const uint16_t *)job->sc + (t * blocks + b) * 8);
            min = half_vec((const uint16_t *)job->mn + (t * blocks + b) * 8);
        } else { /* d sc and -dmin m, each exact in float */
            scale = _mm256_mul_ps(d, u8_vec((const uint8_t *)job->sc + (t * blocks + b) * 8));
            min = _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), dmin),
                                u8_vec((const uint8_t *)job->mn + (t * blocks + b) * 8));
        }
        for (int r = 0; r < mt; r++) {
            const __m256 xs = _mm256_set1_ps(xscale[r * blocks + b]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), _mm256_mul_ps(scale, xs), acc[r]);
            acc[r] = _mm256_fmadd_ps(min, _mm256_set1_ps(xsum[r * blocks + b]), acc[r]);
        }
    }
    const int64_t width = N - t * 8 < 8 ? N - t * 8 : 8;
    for (int r = 0; r < mt; r++) store_tile(job->out + (m0 + r) * job->ldo + t * 8, acc[r], width);
}

/* One tile for the job's format: each format's loop compiled on its own. */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt) {
    switch (job->fmt) {
        case KQ_Q5: tile_of(job, t, m0, mt, KQ_Q5); break;
        case KQ_Q4K: tile_of(job, t, m0, mt, KQ_Q4K); break;
        case KQ_Q5K: tile_of(job, t, m0, mt, KQ_Q5K); break;
        default: tile_of(job, t, m0, mt, KQ_Q6K); break;
    }
}

/* out [M, N] float32 = x [M, K] float32 times the packed weight of format fmt (layout above;
 * Kp = K rounded up to 32, to 256 for the K formats; N's tiles padded to 8 columns). Returns
 * 0, or -1 out of memory. */
int kq_linear(const float *x, const uint8_t *lo, const uint8_t *hi, const void *sc,
              const void *mn, const uint16_t *d, const uint16_t *dmin, float *out, int64_t M,
              int64_t K, int64_t Kp, int64_t N, int64_t fmt, int64_t n_threads) {
    if (M == 0) return 0;
    int8_t *q = malloc((size_t)(M * Kp));
    float *xscale = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    float *xsum = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    const int status = q != NULL && xscale != NULL && xsum != NULL ? 0 : -1;
    if (status == 0) {
        const Job job = {x, lo, hi, sc, mn, d, dmin, out, q, xscale, xsum, M, K, Kp, N, fmt, N};
        run_job(&job, n_threads);
    }
    free(q);
    free(xscale);
    free(xsum);
    return status;
}

/* ---- laying a GGUF file's blocks out for the kernel (kquant.py's read, in one pass) ---- */

enum { G_Q5_0 = 0, G_Q5_1 = 1, G_Q4_K = 2, G_Q5_K = 3, G_Q6_K = 4 };

typedef struct {
    uint8_t *lo, *hi;
    void *sc, *mn;
    uint16_t *d, *dmin;
    int64_t K;
} Packing;

static inline uint16_t half_at(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return h; }

/* Code q of column c (of tile t), input k, into the nibble and high-bit planes. */
static inline void put_code(const Packing *p, int64_t t, int64_t c, int64_t k, int q, int six) {
    const int64_t K = p->K;
    uint8_t *lo = p->lo + (t * (K / 8) + k / 8) * 32 + 4 * c + k % 4;
    *lo |= (uint8_t)((q & 15) << (k % 8 >= 4 ? 4 : 0));
    if (p->hi == NULL) return;
    const int64_t s = k % 32 / 8, h = k % 8 / 4;
    if (six) {
        const int64_t u = k / 16, s6 = k % 16 / 8;
        p->hi[(t * (K / 16) + u) * 32 + 4 * c + k % 4] |= (uint8_t)(((q >> 4) & 3) << (2 * (2 * s6 + h)));
    } else {
        p->hi[(t * (K / 32) + k / 32) * 32 + 4 * c + k % 4] |= (uint8_t)(((q >> 4) & 1) << (2 * s + h));
    }
}

/* A per-column table's entry g of column c (tile t), count entries a column. */
#define TABLE(ptr, type, t, c, g, count) (((type *)(ptr))[((t) * (count) + (g)) * 8 + (c)])

/* Row n of the weight from its GGUF blocks (a Q4_K/Q5_K super-block's 12 bytes of 6-bit
 * scales and mins unpacked as llama.cpp's get_scale_min_k4). */
static void pack_row(const Packing *p, int64_t gtype, const uint8_t *row, int64_t n) {
    const int64_t K = p->K, t = n / 8, c = n % 8;
    int q[256];
    if (gtype == G_Q5_0 || gtype == G_Q5_1) {
        const int64_t bytes = gtype == G_Q5_0 ? 22 : 24;
        for (int64_t b = 0; b < K / 32; b++) {
            const uint8_t *blk = row + b * bytes, *qh = blk + (gtype == G_Q5_0 ? 2 : 4);
            const uint16_t d = half_at(blk);
            const uint16_t m = gtype == G_Q5_1 ? half_at(blk + 2)
                                               : _cvtss_sh(-16.f * _cvtsh_ss(d), _MM_FROUND_TO_NEAREST_INT);
            uint32_t high;
            memcpy(&high, qh, 4);
            for (int i = 0; i < 32; i++)
                put_code(p, t, c, b * 32 + i, ((qh[4 + i % 16] >> (4 * (i / 16))) & 15) | (int)((high >> i) & 1) << 4, 0);
            TABLE(p->sc, uint16_t, t, c, b, K / 32) = d;
            TABLE(p->mn, uint16_t, t, c, b, K / 32) = m;
        }
        return;
    }
    const int64_t bytes = gtype == G_Q4_K ? 144 : (gtype == G_Q5_K ? 176 : 210);
    for (int64_t b = 0; b < K / 256; b++) {
        const uint8_t *blk = row + b * bytes;
        if (gtype == G_Q6_K) {
            const uint8_t *ql = blk, *qh = blk + 128;
            for (int w = 0; w < 256; w++) {
                const int half = w / 128, in = w % 128;
                q[w] = ((ql[half * 64 + in % 64] >> (4 * (in / 64))) & 15) |
                       ((qh[half * 32 + in % 32] >> (2 * (in / 32))) & 3) << 4;
            }
            for (int u = 0; u < 16; u++) TABLE(p->sc, int8_t, t, c, b * 16 + u, K / 16) = (int8_t)blk[192 + u];
            TABLE(p->d, uint16_t, t, c, b, K / 256) = half_at(blk + 208);
        } else {
            const uint8_t *s = blk + 4, *qs = blk + (gtype == G_Q5_K ? 48 : 16), *qh = blk + 16;
            for (int j = 0; j < 8; j++) {
                const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
                const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                TABLE(p->sc, uint8_t, t, c, b * 8 + j, K / 32) = (uint8_t)sc;
                TABLE(p->mn, uint8_t, t, c, b * 8 + j, K / 32) = (uint8_t)mn;
            }
            for (int w = 0; w < 256; w++) {
                const int sub = w / 32, l = w % 32;
                q[w] = (qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 15;
                if (gtype == G_Q5_K) q[w] |= ((qh[l] >> sub) & 1) << 4;
            }
            TABLE(p->d, uint16_t, t, c, b, K / 256) = half_at(blk);
            TABLE(p->dmin, uint16_t, t, c, b, K / 256) = half_at(blk + 2);
        }
        for (int w = 0; w < 256; w++) put_code(p, t, c, b * 256 + w, q[w], gtype == G_Q6_K);
    }
}

/* blocks: N rows of a GGUF tensor of type gtype with K inputs; the planes and tables
 * (zeroed, sized for N rounded up to whole tiles) filled as kquant.py's _layout lays them.
 * A tile's rows are one thread's, so no two threads write one byte. */
int kq_pack(const uint8_t *blocks, int64_t row_bytes, int64_t N, int64_t K, int64_t gtype,
            uint8_t *lo, uint8_t *hi, void *sc, void *mn, uint16_t *d, uint16_t *dmin,
            int64_t n_threads) {
    const Packing p = {lo, hi, sc, mn, d, dmin, K};
    const int64_t tiles = (N + 7) / 8;
#pragma omp parallel for num_threads(n_threads < 1 ? 1 : (int)n_threads) schedule(static)
    for (int64_t t = 0; t < tiles; t++)
        for (int64_t n = t * 8; n < t * 8 + 8 && n < N; n++) pack_row(&p, gtype, blocks + n * row_bytes, n);
    return 0;
}
