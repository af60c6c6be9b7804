/* y = x W^T for 4-bit weights and int8 activations, AVX2 (issue 18's w4a8).
 *
 * Weights: unsigned codes q in 0..15, w = q * scale + min, one float16 scale and min per
 * group of G inputs (G a multiple of 32) of each output column. Activations: each block of
 * 32 inputs of a row of x is quantized here to s8 with its own scale (its peak / 127, as
 * llama.cpp's q8_1 does: one scale per row let a single outlier coarsen the whole row, and
 * cost SmolLM2's Q4_1 perplexity 2% against the dequantized file), and each group's sum of
 * scaled codes is kept, so y[m, n] = sum_g (scale[n, g] * sum_b xscale[m, b] dot_b(q_w, q_x)
 * + min[n, g] * sum_b xscale[m, b] sum_b(q_x)).
 *
 * Layout (made by w4a8.py): output columns in tiles of 8; per tile, per 8 inputs, 32 bytes:
 * byte 4c + j holds column c's input k + j in its low nibble and k + 4 + j in its high one.
 * One 32-byte load thus gives, after a mask and a shift, two vectors of 8 columns x 4 inputs,
 * and _mm256_maddubs_epi16 against 4 activation bytes broadcast to every lane leaves each
 * lane pair on one column: the 8 columns come out in 8 float lanes, with no horizontal sums.
 * maddubs's u8 x s8 pair sums are at most 2 * 15 * 127 = 3810, so eight of them (32 inputs)
 * add up in int16 without saturating; a madd with ones widens them to int32 per 32 inputs,
 * and the block's sum goes into float with an FMA by the group's scale (keeping an int32 sum
 * per group as well needs more than AVX2's 16 registers: the spills made it ~25% slower). A
 * pass computes MT rows x 8 columns, so each unpacked weight vector serves MT rows.
 *
 * Threads: the rows are quantized, then the output tiles computed, each split over n_threads
 * OpenMP threads. Built with -fopenmp, the library needs libgomp.so.1, which the dynamic
 * loader resolves to the one torch has loaded: the kernel runs on torch's own thread pool.
 * (On its own POSIX threads the decode step's linears ran at 0.6x their speed alone: torch's
 * OpenMP workers spin for a while after each op and took the cores from them.)
 */
#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__FMA__)
#error "the w4a8 kernel needs AVX2, F16C and FMA"
#endif
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A block's u8 x s8 products of 4 inputs a lane: with VNNI one dpbusd adds them into the
 * lane's int32; with AVX2 alone maddubs makes int16 pair sums, added in int16 over the
 * block and widened once at its end (both give the same integers: nothing saturates). */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define BLOCK_ADD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define BLOCK_SUM(acc) (acc)
#define W4A8_PATH 2
#elif defined(__AVXVNNI__)
#define BLOCK_ADD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define BLOCK_SUM(acc) (acc)
#define W4A8_PATH 1
#else
#define BLOCK_ADD(acc, u, s) _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s))
#define BLOCK_SUM(acc) _mm256_madd_epi16(acc, _mm256_set1_epi16(1))
#define W4A8_PATH 0
#endif

typedef struct {
    const float *x;
    const uint8_t *w;
    const uint16_t *scale, *min;
    float *out;
    int8_t *q;
    float *xscale, *xsum;
    int64_t M, K, Kp, N, G;
    int64_t ldo; /* out's row stride: N, or wider where this is one part of a stacked output */
} Job;

#include "tiled.h"
#include "tile_walk.h"

/* Which instructions this build multiplies with: 0 AVX2, 1 AVX-VNNI, 2 AVX512-VNNI. */
int w4a8_path(void) { return W4A8_PATH; }

static void quantize_rows(const Job *job, int64_t first, int64_t last) {
    quantize_grouped(job->x, job->q, job->xscale, job->xsum, job->K, job->Kp, job->G, first, last);
}

/* out[m0 .. m0 + mt, 8 t .. 8 t + 8] (the last tile's spare columns are dropped). */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt) {
    const int64_t Kp = job->Kp, G = job->G, groups = Kp / G, blocks = Kp / 32, N = job->N;
    const uint8_t *w = job->w + t * Kp * 4;
    const uint16_t *scale = job->scale + t * groups * 8, *min = job->min + t * groups * 8;
    const int8_t *q = job->q + m0 * Kp;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    __m256 acc[MT];
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scale + g * 8)));
        for (int64_t k0 = g * G; k0 < (g + 1) * G; k0 += 32) {
            __m256i sums[MT];
            for (int r = 0; r < mt; r++) sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int64_t k = k0; k < k0 + 32; k += 8) {
                _mm_prefetch((const char *)(w + k * 4) + PREFETCH_AHEAD, _MM_HINT_T0);
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + k * 4));
                const __m256i lo = _mm256_and_si256(v, nibble);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
                for (int r = 0; r < mt; r++) {
                    int32_t a0, a1;
                    memcpy(&a0, q + r * Kp + k, 4);
                    memcpy(&a1, q + r * Kp + k + 4, 4);
                    sums[r] = BLOCK_ADD(sums[r], lo, _mm256_set1_epi32(a0));
                    sums[r] = BLOCK_ADD(sums[r], hi, _mm256_set1_epi32(a1));
                }
            }
            for (int r = 0; r < mt; r++) {
                const __m256i sum = BLOCK_SUM(sums[r]);
                const float xs = job->xscale[(m0 + r) * blocks + k0 / 32];
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(s, _mm256_set1_ps(xs)), acc[r]);
            }
        }
        const __m256 z = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(min + g * 8)));
        for (int r = 0; r < mt; r++)
            acc[r] = _mm256_fmadd_ps(z, _mm256_set1_ps(job->xsum[(m0 + r) * groups + g]), acc[r]);
    }
    const int64_t width = N - t * 8 < 8 ? N - t * 8 : 8;
    for (int r = 0; r < mt; r++) store_tile(job->out + (m0 + r) * job->ldo + t * 8, acc[r], width);
}

/* out [M, N] float32 (rows ldo floats apart: N, or more for a part of a stacked output) =
 * x [M, K] float32 times the packed weight (layout above; Kp = K
 * rounded up to G, N's tiles padded to 8 columns). Returns 0, or -1 out of memory. */
int w4a8_linear(const float *x, const uint8_t *w, const uint16_t *scale, const uint16_t *min,
                float *out, int64_t M, int64_t K, int64_t Kp, int64_t N, int64_t ldo,
                int64_t G, int64_t n_threads) {
    if (M == 0) return 0;
    int8_t *q = malloc((size_t)(M * Kp));
    float *xscale = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    float *xsum = malloc(sizeof(float) * (size_t)(M * (Kp / G)));
    const int status = q != NULL && xscale != NULL && xsum != NULL ? 0 : -1;
    if (status == 0) {
        const Job job = {x, w, scale, min, out, q, xscale, xsum, M, K, Kp, N, G, ldo};
        run_job(&job, n_threads);
    }
    free(q);
    free(xscale);
    free(xsum);
    return status;
}
