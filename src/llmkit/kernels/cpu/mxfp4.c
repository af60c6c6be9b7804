/* y = x W^T for MXFP4 weights as a GGUF file has them (gpt-oss's experts) and int8
 * activations with a scale per 32 inputs, AVX2 or VNNI.
 *
 * Weights: per block of 32 inputs of an output column, an E8M0 exponent e (one byte) and 32
 * FP4 (E2M1) codes. ggml keeps a code's value doubled, v = kvalues[code] in {0, +-1, +-2,
 * +-3, +-4, +-6, +-8, +-12}, with the scale halved: w = v * 2^(e - 128). Activations: as the
 * other kernels (tiled.h: s8 codes, a scale per block of 32), so y[m, n] = sum_b 2^(e[n, b] -
 * 128) xscale[m, b] dot_b(v, q_x), the dot in integers.
 *
 * Layout (made by mxfp4.py): the 4-bit codes as w4a8.c's (per tile of 8 columns, per 8
 * inputs, 32 bytes: byte 4c + j holds column c's input k + j in its low nibble, k + 4 + j in
 * its high one), the exponents per tile per block of 32 as 8 bytes, one a column: 4.25 bits a
 * weight in memory, the file's own. A load, a mask and a shift give two vectors of 8 columns
 * x 4 codes; a byte shuffle (vpshufb, within each 128-bit half: the table is in both) turns
 * the codes into values in registers.
 *
 * Signs: dpbusd and maddubs multiply u8 by s8, and both the values and the activations are
 * signed. The shuffle gives v + 12 (0..24) instead, and the block's integer sum starts at
 * -12 sum_b(q_x) rather than 0, so it ends exactly at dot_b(v, q_x). The other way, |v| times
 * q_x with v's sign (q8.c's), costs a sign instruction per row per vector, as each row's
 * broadcast activations differ; the offset costs one broadcast per row per block, from the
 * activations' code sums made once per row. AVX2's maddubs makes int16 pair sums, at most
 * 2 * 24 * 127 = 6096, so a vector's two pair sums (lo and hi) add up in int16 without
 * saturating and are widened to int32 at once; VNNI's dpbusd adds into int32 directly. Both
 * give the same integers, so every path gives the same floats. A block's sum meets the
 * column's 2^(e - 128) times the block's activation scale in one FMA.
 *
 * Threads: as w4a8.c (rows quantized, then output tiles, over torch's OpenMP pool).
 */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "the mxfp4 kernel needs AVX2 and FMA"
#endif
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DOT8(acc, u0, s0, u1, s1) _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, u0, s0), u1, s1)
#define MXFP4_PATH 2
#elif defined(__AVXVNNI__)
#define DOT8(acc, u0, s0, u1, s1) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, u0, s0), u1, s1)
#define MXFP4_PATH 1
#else
#define DOT8(acc, u0, s0, u1, s1)                                                              \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0),     \
                                                             _mm256_maddubs_epi16(u1, s1)),    \
                                            _mm256_set1_epi16(1)))
#define MXFP4_PATH 0
#endif

#define MXFP4_OFFSET 12 /* -kvalues' least value: v + 12 is unsigned */

typedef struct {
    const float *x;
    const uint8_t *w; /* the codes, two a byte */
    const uint8_t *e; /* the exponents, one a column per block of 32 */
    float *out;
    int8_t *q;
    float *xscale;
    int32_t *qsum; /* [M, Kp / 16]: each 16 inputs' sum of activation codes (tiled.h's) */
    int64_t M, K, Kp, N;
    int64_t ldo; /* out's row stride (see w4a8.c) */
} Job;

#include "tiled.h"
#include "tile_walk.h"

/* Which instructions this build multiplies with: 0 AVX2, 1 AVX-VNNI, 2 AVX512-VNNI. */
int mxfp4_path(void) { return MXFP4_PATH; }

static void quantize_rows(const Job *job, int64_t first, int64_t last) {
    quantize_grouped(job->x, job->q, job->xscale, NULL, job->K, job->Kp, 32, first, last);
    code_sums(job->q, job->qsum, job->Kp, 16, first, last);
}

/* 2^(e - 128) for 8 exponents (ggml's GGML_E8M0_TO_FP32_HALF): the float with exponent field
 * e - 1, or for e < 2 the subnormal 2^-128 << e. */
static inline __attribute__((always_inline)) __m256 block_scales(const uint8_t *e) {
    int64_t bytes;
    memcpy(&bytes, e, 8);
    const __m256i x = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(x, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), x);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), x);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

/* out[m0 .. m0 + mt, 8 t .. 8 t + 8] (the last tile's spare columns are dropped). */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt) {
    const int64_t Kp = job->Kp, blocks = Kp / 32, N = job->N;
    const uint8_t *w = job->w + t * Kp * 4;
    const uint8_t *e = job->e + t * blocks * 8;
    const int8_t *q = job->q + m0 * Kp;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i values = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                            12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    __m256 acc[MT];
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        __m256i sums[MT];
        for (int r = 0; r < mt; r++) {
            const int32_t *qsum = job->qsum + (m0 + r) * (Kp / 16) + 2 * b;
            sums[r] = _mm256_set1_epi32(-MXFP4_OFFSET * (qsum[0] + qsum[1]));
        }
#pragma GCC unroll 1
        for (int64_t k = b * 32; k < b * 32 + 32; k += 8) {
            _mm_prefetch((const char *)(w + k * 4) + PREFETCH_AHEAD, _MM_HINT_T0);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + k * 4));
            const __m256i lo = _mm256_shuffle_epi8(values, _mm256_and_si256(v, nibble));
            const __m256i hi = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
            for (int r = 0; r < mt; r++) {
                int32_t a0, a1;
                memcpy(&a0, q + r * Kp + k, 4);
                memcpy(&a1, q + r * Kp + k + 4, 4);
                sums[r] = DOT8(sums[r], lo, _mm256_set1_epi32(a0), hi, _mm256_set1_epi32(a1));
            }
        }
        const __m256 s = block_scales(e + b * 8);
        for (int r = 0; r < mt; r++) {
            const float xs = job->xscale[(m0 + r) * blocks + b];
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), _mm256_mul_ps(s, _mm256_set1_ps(xs)), acc[r]);
        }
    }
    const int64_t width = N - t * 8 < 8 ? N - t * 8 : 8;
    for (int r = 0; r < mt; r++) store_tile(job->out + (m0 + r) * job->ldo + t * 8, acc[r], width);
}

/* out [M, N] float32 (rows ldo floats apart: N, or more for a part of a stacked output) =
 * x [M, K] float32 times the packed weight (layout above; Kp = K
 * rounded up to 32, N's tiles padded to 8 columns). Returns 0, or -1 out of memory. */
int mxfp4_linear(const float *x, const uint8_t *w, const uint8_t *e, float *out, int64_t M,
                 int64_t K, int64_t Kp, int64_t N, int64_t ldo, int64_t n_threads) {
    if (M == 0) return 0;
    int8_t *q = malloc((size_t)(M * Kp));
    float *xscale = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    int32_t *qsum = malloc(sizeof(int32_t) * (size_t)(M * (Kp / 16)));
    const int status = q != NULL && xscale != NULL && qsum != NULL ? 0 : -1;
    if (status == 0) {
        const Job job = {x, w, e, out, q, xscale, qsum, M, K, Kp, N, ldo};
        run_job(&job, n_threads);
    }
    free(q);
    free(xscale);
    free(qsum);
    return status;
}
