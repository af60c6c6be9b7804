/* y = x W^T for llama.cpp's 5- and 6-bit and K-quant weights as the file has them (Q5_0 and
 * Q5_1, Q4_K, Q5_K, Q6_K), times int8 activations with a scale per 32 inputs, AVX2 or VNNI.
 *
 * Weights (laid out by weights/kq.py; each format's numbers are the file's, not requantized):
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
 * products of a lane's column (u8 x s8) meet the column's float scale, d sc or the Q5 scale,
 * times the block's activation scale. Q6_K's codes stay unsigned (0..63): the -32 comes off
 * each 16 inputs' dot as 32 times their activation codes' sum, made once per row as it is
 * quantized, so a row's work is a broadcast and a multiply-add per vector for every format
 * (taking |w| times x with w's sign instead cost two sign instructions a vector a row). AVX2's
 * maddubs makes int16 pair sums: 4-bit codes add up over a block in int16 (8 x 2 x 15 x 127
 * at most), wider ones are widened each 8 inputs (4 x 63 x 127 at most); VNNI's dpbusd adds
 * into int32 directly. Both give the same integers, so every path gives the same floats.
 *
 * Steps of UNPACK_ROWS rows or more unpack each tile once for all their rows (kq_rows.h), with
 * the same integers and floats. Threads: as w4a8.c (rows quantized, then output tiles, over
 * torch's OpenMP pool). The packer (kq_pack.h) lays a file's blocks out for this kernel.
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

#include "formats.h" /* KQ_Q5 .. KQ_Q6K, G_Q5_0 .. G_Q6_K: the registry's numbers */

typedef struct {
    const float *x;
    const uint8_t *lo, *hi;   /* hi: NULL for Q4_K */
    const void *sc, *mn;      /* Q5: float16 scale and min; K: int8 / uint8 sub-block ints */
    const uint16_t *d, *dmin; /* K: per 256 inputs, float16 */
    float *out;
    int8_t *q;
    float *xscale, *xsum;
    int32_t *sum16; /* [M, Kp / 16]: each 16 inputs' integer code sum (Q6K's offset), or NULL */
    int64_t M, K, Kp, N, fmt;
    int64_t ldo; /* out's row stride (see w4a8.c) */
} Job;

#include "tiled.h"
#define UNPACKED_TILES
/* Rows from which kq_rows.h's path runs: with AVX2 alone (maddubs and a widening madd per
 * vector, at this CPU's multiply-add peak either way) it wins from 32 rows on (measured); with
 * VNNI one dpbusd is the whole dot, so the tile path's unpacking weighs more (not measured:
 * no VNNI machine was at hand) and two passes of MT rows already share an unpacked tile. */
#define UNPACK_ROWS (KQ_PATH == 0 ? 32 : 8)
#include "tile_walk.h"
#undef UNPACKED_TILES

/* Which instructions this build multiplies with: 0 AVX2, 1 AVX-VNNI, 2 AVX512-VNNI. */
int kq_path(void) { return KQ_PATH; }

static void quantize_rows(const Job *job, int64_t first, int64_t last) {
    quantize_grouped(job->x, job->q, job->xscale, job->xsum, job->K, job->Kp, 32, first, last);
    if (job->fmt == KQ_Q6K) code_sums(job->q, job->sum16, job->Kp, 16, first, last);
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

/* Inputs 32 b + 8 s .. + 8 of a tile's codes, unsigned (Q6K's 0..63): l the first 4 of each
 * column, h the next 4; h5 is block b's plane of 5th bits (Q5, Q5K). */
static inline __attribute__((always_inline)) void codes8(const uint8_t *lo, const uint8_t *hi,
                                                         __m256i h5, int64_t b, int s, int fmt,
                                                         __m256i *l, __m256i *h) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(lo + (b * 32 + s * 8) * 4));
    *l = _mm256_and_si256(v, nibble);
    *h = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    if (fmt == KQ_Q5 || fmt == KQ_Q5K) {
        *l = _mm256_or_si256(*l, bits_at4(h5, 2 * s, 0x10));
        *h = _mm256_or_si256(*h, bits_at4(h5, 2 * s + 1, 0x10));
    } else if (fmt == KQ_Q6K) {
        const __m256i h6 = _mm256_loadu_si256((const __m256i *)(hi + (2 * b + s / 2) * 32));
        *l = _mm256_or_si256(*l, bits_at4(h6, 4 * (s % 2), 0x30));
        *h = _mm256_or_si256(*h, bits_at4(h6, 4 * (s % 2) + 2, 0x30));
    }
}

/* The int32 dot products of 32 inputs (block b of the tile's codes) with mt rows' codes, for
 * codes of 4 bits (fmt Q4K), 5 (Q5, Q5K) or 6 (Q6K: into dots of 16 inputs each, 2 a row). */
static inline __attribute__((always_inline)) void block_dots(const Job *job, const uint8_t *lo,
                                                             const uint8_t *hi, int64_t b,
                                                             const int8_t *q, int mt, int fmt,
                                                             __m256i *dots) {
    const int64_t Kp = job->Kp;
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
        __m256i l, h;
        codes8(lo, hi, h5, b, s, fmt, &l, &h);
        for (int r = 0; r < mt; r++) {
            int32_t a0, a1;
            memcpy(&a0, q + r * Kp + k, 4);
            memcpy(&a1, q + r * Kp + k + 4, 4);
            const __m256i x0 = _mm256_set1_epi32(a0), x1 = _mm256_set1_epi32(a1);
            if (fmt == KQ_Q4K) {
                dots[r] = NARROW_ADD(dots[r], l, x0);
                dots[r] = NARROW_ADD(dots[r], h, x1);
            } else {
                __m256i *d = fmt == KQ_Q6K ? dots + 2 * r + s / 2 : dots + r;
                *d = WIDE_ADD(*d, l, x0, h, x1);
            }
        }
    }
    if (fmt == KQ_Q4K)
        for (int r = 0; r < mt; r++) dots[r] = NARROW_SUM(dots[r]);
}

/* Block b's float factors for tile t's 8 columns: f[0] the scale and f[1] the min term (d sc
 * and -dmin m, each exact in float; Q5's own), or for Q6K f[0], f[1] the scales of its two
 * halves of 16. d and dmin, the super-block's, are reloaded at each super-block's first block. */
static inline __attribute__((always_inline)) void block_factors(const Job *job, int64_t t,
                                                                int64_t b, int fmt, __m256 *d,
                                                                __m256 *dmin, __m256 *f) {
    const int64_t Kp = job->Kp, blocks = Kp / 32;
    if (fmt != KQ_Q5 && b % 8 == 0) {
        *d = half_vec(job->d + (t * (Kp / 256) + b / 8) * 8);
        if (fmt != KQ_Q6K) *dmin = half_vec(job->dmin + (t * (Kp / 256) + b / 8) * 8);
    }
    if (fmt == KQ_Q6K) {
        const int8_t *sc = (const int8_t *)job->sc + (t * (Kp / 16) + 2 * b) * 8;
        f[0] = _mm256_mul_ps(*d, s8_vec(sc));
        f[1] = _mm256_mul_ps(*d, s8_vec(sc + 8));
    } else if (fmt == KQ_Q5) {
        f[0] = half_vec((const uint16_t *)job->sc + (t * blocks + b) * 8);
        f[1] = half_vec((const uint16_t *)job->mn + (t * blocks + b) * 8);
    } else {
        f[0] = _mm256_mul_ps(*d, u8_vec((const uint8_t *)job->sc + (t * blocks + b) * 8));
        f[1] = _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), *dmin),
                             u8_vec((const uint8_t *)job->mn + (t * blocks + b) * 8));
    }
}

/* acc + (dot - 32 sum) s xs: one half of a Q6K block, whose dot is of the unsigned codes
 * (sum: the 16 activation codes' sum; s: the columns' scales; xs: the block's activation scale). */
static inline __attribute__((always_inline)) __m256 q6k_add(__m256 acc, __m256i dot, int32_t sum,
                                                            __m256 s, __m256 xs) {
    const __m256i exact = _mm256_sub_epi32(dot, _mm256_set1_epi32(32 * sum));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(s, xs), acc);
}

/* out[m0 .. m0 + mt, 8 t .. 8 t + 8] for format fmt (the last tile's spare columns dropped). */
static inline __attribute__((always_inline)) void tile_of(const Job *job, int64_t t, int64_t m0,
                                                          int mt, int fmt) {
    const int64_t Kp = job->Kp, blocks = Kp / 32, N = job->N;
    const uint8_t *lo = job->lo + t * Kp * 4;
    const uint8_t *hi = job->hi == NULL ? NULL : job->hi + t * Kp * (fmt == KQ_Q6K ? 2 : 1);
    const int8_t *q = job->q + m0 * Kp;
    const float *xscale = job->xscale + m0 * blocks, *xsum = job->xsum + m0 * blocks;
    const int32_t *sum16 = job->sum16 == NULL ? NULL : job->sum16 + m0 * (Kp / 16);
    __m256 acc[MT];
    __m256i dots[2 * MT];
    __m256 d = _mm256_setzero_ps(), dmin = _mm256_setzero_ps();
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        __m256 f[2];
        block_factors(job, t, b, fmt, &d, &dmin, f);
        block_dots(job, lo, hi, b, q, mt, fmt, dots);
        if (fmt == KQ_Q6K) {
            for (int r = 0; r < mt; r++) {
                const __m256 xs = _mm256_set1_ps(xscale[r * blocks + b]);
                for (int half = 0; half < 2; half++)
                    acc[r] = q6k_add(acc[r], dots[2 * r + half], sum16[r * (Kp / 16) + 2 * b + half], f[half], xs);
            }
            continue;
        }
        const __m256 scale = f[0], min = f[1];
        for (int r = 0; r < mt; r++) {
            const __m256 xs = _mm256_set1_ps(xscale[r * blocks + b]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), _mm256_mul_ps(scale, xs), acc[r]);
            acc[r] = _mm256_fmadd_ps(min, _mm256_set1_ps(xsum[r * blocks + b]), acc[r]);
        }
    }
    const int64_t width = N - t * 8 < 8 ? N - t * 8 : 8;
    for (int r = 0; r < mt; r++) store_tile(job->out + (m0 + r) * job->ldo + t * 8, acc[r], width);
}

#include "kq_rows.h"

/* One tile for the job's format: each format's loop compiled on its own. */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt) {
    switch (job->fmt) {
        case KQ_Q5: tile_of(job, t, m0, mt, KQ_Q5); break;
        case KQ_Q4K: tile_of(job, t, m0, mt, KQ_Q4K); break;
        case KQ_Q5K: tile_of(job, t, m0, mt, KQ_Q5K); break;
        default: tile_of(job, t, m0, mt, KQ_Q6K); break;
    }
}

/* out [M, N] float32 (rows ldo floats apart: N, or more for a part of a stacked output) =
 * x [M, K] float32 times the packed weight of format fmt (layout above;
 * Kp = K rounded up to 32, to 256 for the K formats; N's tiles padded to 8 columns). Returns
 * 0, or -1 out of memory. */
int kq_linear(const float *x, const uint8_t *lo, const uint8_t *hi, const void *sc,
              const void *mn, const uint16_t *d, const uint16_t *dmin, float *out, int64_t M,
              int64_t K, int64_t Kp, int64_t N, int64_t ldo, int64_t fmt, int64_t n_threads) {
    if (M == 0) return 0;
    int8_t *q = malloc((size_t)(M * Kp));
    float *xscale = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    float *xsum = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    int32_t *sum16 = fmt == KQ_Q6K ? malloc(sizeof(int32_t) * (size_t)(M * (Kp / 16))) : NULL;
    const int status = q && xscale && xsum && (sum16 || fmt != KQ_Q6K) ? 0 : -1;
    if (status == 0) {
        const Job job = {x, lo, hi, sc, mn, d, dmin, out, q, xscale, xsum, sum16, M, K, Kp, N, fmt, ldo};
        run_job(&job, n_threads);
    }
    free(q);
    free(xscale);
    free(xsum);
    free(sum16);
    return status;
}

#include "kq_pack.h"
