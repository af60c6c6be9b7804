/* kq.c's path for steps of many rows (a prompt's chunk, a batch of decodes, an expert's group):
 * each tile's codes unpacked once into plain u8 codes and its scales into floats, then read by
 * every row of the step, instead of unpacked again for each pass of MT rows.
 *
 * The tile path (kq.c's tile_of) merges a code's high bits into its nibbles in registers for
 * every MT rows: at 16 rows each weight vector is unpacked 4 times. Here a tile's codes are
 * unpacked once per ROW_BLOCK rows into a scratch (8 columns x Kp bytes, read from L1/L2 by
 * each pass), in the layout q8.c reads (per 4 inputs 32 bytes, byte 4c + j column c's input
 * k + j). The integer dot products are the tile path's integers and meet the same float
 * scales in the same order, so both paths give the same floats
 * (tests/model/layers/weights/test_kquant.py holds them to it).
 *
 * Included by kq.c after its Job, formats and the NARROW/WIDE macros, before tile_walk.h.
 */

/* A tile of 8 columns unpacked: codes [Kp / 4][32]; per block of 32 inputs (Q6K: of 16) the
 * columns' scales, and per block of 32 their min terms (not for Q6K) as floats. */
typedef struct {
    uint8_t *codes;
    float *scale, *min;
} Unpacked;

/* Tile t's codes, scales and min terms for format fmt into u (tile_of's numbers). */
static inline __attribute__((always_inline)) void unpack_tile(const Job *job, int64_t t, int fmt,
                                                              const Unpacked *u) {
    const int64_t Kp = job->Kp, blocks = Kp / 32;
    const uint8_t *lo = job->lo + t * Kp * 4;
    const uint8_t *hi = job->hi == NULL ? NULL : job->hi + t * Kp * (fmt == KQ_Q6K ? 2 : 1);
    __m256 d = _mm256_setzero_ps(), dmin = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        __m256i h5 = _mm256_setzero_si256();
        if (fmt == KQ_Q5 || fmt == KQ_Q5K) h5 = _mm256_loadu_si256((const __m256i *)(hi + b * 32));
        for (int s = 0; s < 4; s++) {
            __m256i l, h;
            codes8(lo, hi, h5, b, s, fmt, &l, &h);
            _mm256_storeu_si256((__m256i *)(u->codes + (b * 32 + s * 8) * 8), l);
            _mm256_storeu_si256((__m256i *)(u->codes + (b * 32 + s * 8) * 8 + 32), h);
        }
        __m256 f[2];
        block_factors(job, t, b, fmt, &d, &dmin, f);
        if (fmt == KQ_Q6K) {
            _mm256_storeu_ps(u->scale + 16 * b, f[0]);
            _mm256_storeu_ps(u->scale + 16 * b + 8, f[1]);
        } else {
            _mm256_storeu_ps(u->scale + 8 * b, f[0]);
            _mm256_storeu_ps(u->min + 8 * b, f[1]);
        }
    }
}

/* The integer dot products of mt rows with `vectors` of the unpacked codes from vector g on
 * (4 inputs each; 4 bits: int16 sums over 8 vectors, wider: widened each 2). */
static inline __attribute__((always_inline)) void unpacked_dots(const uint8_t *codes, int64_t g,
                                                                int vectors, const int8_t *q,
                                                                int64_t Kp, int mt, int narrow,
                                                                __m256i *dots) {
    for (int r = 0; r < mt; r++) dots[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int v = 0; v < vectors; v += 2) {
        const __m256i c0 = _mm256_loadu_si256((const __m256i *)(codes + (g + v) * 32));
        const __m256i c1 = _mm256_loadu_si256((const __m256i *)(codes + (g + v + 1) * 32));
        for (int r = 0; r < mt; r++) {
            int32_t a0, a1;
            memcpy(&a0, q + r * Kp + (g + v) * 4, 4);
            memcpy(&a1, q + r * Kp + (g + v) * 4 + 4, 4);
            const __m256i x0 = _mm256_set1_epi32(a0), x1 = _mm256_set1_epi32(a1);
            if (narrow) {
                dots[r] = NARROW_ADD(dots[r], c0, x0);
                dots[r] = NARROW_ADD(dots[r], c1, x1);
            } else {
                dots[r] = WIDE_ADD(dots[r], c0, x0, c1, x1);
            }
        }
    }
    if (narrow)
        for (int r = 0; r < mt; r++) dots[r] = NARROW_SUM(dots[r]);
}

/* out[m0 .. m0 + mt, tile t] from tile t unpacked in u. */
static inline __attribute__((always_inline)) void unpacked_rows(const Job *job, const Unpacked *u,
                                                                int64_t t, int64_t m0, int mt, int fmt) {
    const int64_t Kp = job->Kp, blocks = Kp / 32, N = job->N;
    const int8_t *q = job->q + m0 * Kp;
    const float *xscale = job->xscale + m0 * blocks, *xsum = job->xsum + m0 * blocks;
    const int32_t *sum16 = job->sum16 == NULL ? NULL : job->sum16 + m0 * (Kp / 16);
    __m256 acc[MT];
    __m256i dots[MT];
    for (int r = 0; r < mt; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        if (fmt == KQ_Q6K) {
            for (int half = 0; half < 2; half++) {
                unpacked_dots(u->codes, b * 8 + half * 4, 4, q, Kp, mt, 0, dots);
                const __m256 s = _mm256_loadu_ps(u->scale + 16 * b + 8 * half);
                for (int r = 0; r < mt; r++)
                    acc[r] = q6k_add(acc[r], dots[r], sum16[r * (Kp / 16) + 2 * b + half], s,
                                     _mm256_set1_ps(xscale[r * blocks + b]));
            }
            continue;
        }
        unpacked_dots(u->codes, b * 8, 8, q, Kp, mt, fmt == KQ_Q4K, dots);
        const __m256 scale = _mm256_loadu_ps(u->scale + 8 * b), min = _mm256_loadu_ps(u->min + 8 * b);
        for (int r = 0; r < mt; r++) {
            const __m256 xs = _mm256_set1_ps(xscale[r * blocks + b]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), _mm256_mul_ps(scale, xs), acc[r]);
            acc[r] = _mm256_fmadd_ps(min, _mm256_set1_ps(xsum[r * blocks + b]), acc[r]);
        }
    }
    const int64_t width = N - t * 8 < 8 ? N - t * 8 : 8;
    for (int r = 0; r < mt; r++) store_tile(job->out + (m0 + r) * job->ldo + t * 8, acc[r], width);
}

/* Output tiles [first, last) for format fmt: per ROW_BLOCK rows, each tile unpacked once and
 * read by every MT rows. Returns 0, or -1 out of memory (nothing written). */
static inline __attribute__((always_inline)) int unpacked_tiles_of(const Job *job, int64_t first,
                                                                   int64_t last, int fmt) {
    const int64_t Kp = job->Kp, M = job->M;
    Unpacked u = {malloc((size_t)(Kp * 8)), malloc(sizeof(float) * (size_t)(Kp / 2)),
                  malloc(sizeof(float) * (size_t)(Kp / 4))};
    const int status = u.codes && u.scale && u.min ? 0 : -1;
    for (int64_t r0 = 0; status == 0 && r0 < M; r0 += ROW_BLOCK) {
        const int64_t r1 = r0 + ROW_BLOCK < M ? r0 + ROW_BLOCK : M;
        for (int64_t t = first; t < last; t++) {
            unpack_tile(job, t, fmt, &u);
            int64_t m = r0;
            for (; m + MT <= r1; m += MT) unpacked_rows(job, &u, t, m, MT, fmt);
            switch (r1 - m) {
                case 3: unpacked_rows(job, &u, t, m, 3, fmt); break;
                case 2: unpacked_rows(job, &u, t, m, 2, fmt); break;
                case 1: unpacked_rows(job, &u, t, m, 1, fmt); break;
                default: break;
            }
        }
    }
    free(u.codes);
    free(u.scale);
    free(u.min);
    return status;
}

/* gemm_unpacked for the job's format: each format's loops compiled on their own. */
static int gemm_unpacked(const Job *job, int64_t first, int64_t last) {
    switch (job->fmt) {
        case KQ_Q5: return unpacked_tiles_of(job, first, last, KQ_Q5);
        case KQ_Q4K: return unpacked_tiles_of(job, first, last, KQ_Q4K);
        case KQ_Q5K: return unpacked_tiles_of(job, first, last, KQ_Q5K);
        default: return unpacked_tiles_of(job, first, last, KQ_Q6K);
    }
}
