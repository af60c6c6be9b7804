/* y = x W^T for 8-bit weights with a scale per 32 inputs (llama.cpp's Q8_0) and int8
 * activations with a scale per 32 inputs (its q8_0 x q8_0 dot product), AVX2 or VNNI.
 *
 * Weights: s8 codes q, w = q * scale, one float16 scale per block of 32 inputs of each output
 * column. Activations: each block of 32 inputs of a row of x to s8 with its own scale (its
 * peak / 127, as in w4a8.c), so y[m, n] = sum_b scale[n, b] xscale[m, b] dot_b(q_w, q_x).
 *
 * Layout (made by q8.py): output columns in tiles of 8; per tile, per 4 inputs, 32 bytes:
 * byte 4c + j holds column c's input k + j. One 32-byte load against 4 activation bytes
 * broadcast to every lane gives each column's 4 products in its own 32-bit lane, so the 8
 * columns come out in 8 lanes with no horizontal sums. The s8 x s8 products go through the
 * u8 x s8 instructions as |w| x (x with w's sign). With AVX512-VNNI (or AVX-VNNI), one
 * dpbusd adds the 4 products into the lane in int32; with AVX2 alone, maddubs makes int16
 * pair sums (at most 2 * 128 * 127 = 32512: no saturation) and a madd with ones widens them.
 * A block's int32 sums (at most 32 * 128 * 127) go into float with an FMA by the two scales.
 * A pass computes MT rows x 8 columns, so each weight vector serves MT rows.
 *
 * Threads: as w4a8.c, the rows are quantized, then the output tiles computed, each split
 * over n_threads OpenMP threads (torch's own pool, see build.py).
 */
#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__FMA__)
#error "the q8 kernel needs AVX2, F16C and FMA"
#endif
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DOT4(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define Q8_PATH 2
#elif defined(__AVXVNNI__)
#define DOT4(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define Q8_PATH 1
#else
#define DOT4(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#define Q8_PATH 0
#endif

typedef struct {
    const float *x;
    const int8_t *w;
    const uint16_t *scale;
    float *out;
    int8_t *q;
    float *xscale;
    int64_t M, K, Kp, N;
    int64_t ldo; /* out's row stride (see w4a8.c) */
} Job;

#include "tiled.h"
#include "tile_walk.h"

/* Which instructions this build multiplies with: 0 AVX2, 1 AVX-VNNI, 2 AVX512-VNNI. */
int q8_path(void) { return Q8_PATH; }

static void quantize_rows(const Job *job, int64_t first, int64_t last) {
    quantize_grouped(job->x, job->q, job->xscale, NULL, job->K, job->Kp, 32, first, last);
}

/* out[m0 .. m0 + mt, 8 t .. 8 t + 8] (the last tile's spare columns are dropped). */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt) {
    const int64_t Kp = job->Kp, blocks = Kp / 32, N = job->N;
    const int8_t *w = job->w + t * Kp * 8;
    const uint16_t *scale = job->scale + t * blocks * 8;
    const int8_t *q = job->q + m0 * Kp;
    __m256 acc[MT];
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        __m256i sums[MT];
        for (int r = 0; r < mt; r++) sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int64_t k = b * 32; k < b * 32 + 32; k += 4) {
            _mm_prefetch((const char *)(w + k * 8) + PREFETCH_AHEAD, _MM_HINT_T0);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + k * 8));
            const __m256i magnitude = _mm256_abs_epi8(v);
            for (int r = 0; r < mt; r++) {
                int32_t a;
                memcpy(&a, q + r * Kp + k, 4);
                sums[r] = DOT4(sums[r], magnitude, _mm256_sign_epi8(_mm256_set1_epi32(a), v));
            }
        }
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scale + b * 8)));
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
int q8_linear(const float *x, const int8_t *w, const uint16_t *scale, float *out, int64_t M,
              int64_t K, int64_t Kp, int64_t N, int64_t ldo, int64_t n_threads) {
    if (M == 0) return 0;
    int8_t *q = malloc((size_t)(M * Kp));
    float *xscale = malloc(sizeof(float) * (size_t)(M * (Kp / 32)));
    const int status = q != NULL && xscale != NULL ? 0 : -1;
    if (status == 0) {
        const Job job = {x, w, scale, out, q, xscale, M, K, Kp, N, ldo};
        run_job(&job, n_threads);
    }
    free(q);
    free(xscale);
    return status;
}
