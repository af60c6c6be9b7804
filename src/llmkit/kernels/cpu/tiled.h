/* What the tiled CPU kernels (w4a8.c, q8.c, kq.c, mxfp4.c) share: activations to s8 codes by blocks
 * of 32, a tile row's store, and (tile_walk.h) the walk over output tiles.
 */
#ifndef LLMKIT_TILED_H
#define LLMKIT_TILED_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MT 4
#define ROW_BLOCK 64 /* rows whose int8 activations stay in L2 while all tiles pass */
/* Bytes ahead of the weight read to prefetch: a decode streams every weight once, from L3
 * or DRAM, and the hardware prefetchers alone kept one core at 8.2 GB/s where this gives
 * 11.8 (a w4a8 gate/up matrix streamed from L3, one thread; 1-16 KiB measured alike). */
#define PREFETCH_AHEAD 4096

/* x[0 .. n) to s8 codes in q (x * 127 / peak, rounded half to even), the rest of the
 * block of 32 zeros; returns the block's sum of codes and sets *scale = peak / 127. */
static inline __attribute__((always_inline)) int32_t quantize_block(const float *x, int8_t *q, int64_t n, float *scale) {
    float peak = 0.f;
    for (int64_t k = 0; k < n; k++) peak = fmaxf(peak, fabsf(x[k]));
    const float inv = peak > 0.f ? 127.f / peak : 0.f;
    int32_t s = 0;
    for (int64_t k = 0; k < n; k++) {
        q[k] = (int8_t)fminf(fmaxf(nearbyintf(x[k] * inv), -127.f), 127.f);
        s += q[k];
    }
    memset(q + n, 0, (size_t)(32 - n));
    *scale = peak / 127.f;
    return s;
}

/* Rows [first, last) of x [M, K] to s8 codes q [M, Kp] by blocks of 32 (zero-padded to Kp);
 * xscale [M, Kp / 32] = each block's peak / 127; xsum [M, Kp / G] (if not NULL) = each group
 * of G inputs' sum of codes times their block's scale (a weight's min term rides on it). */
static void quantize_grouped(const float *x, int8_t *q, float *xscale, float *xsum, int64_t K,
                             int64_t Kp, int64_t G, int64_t first, int64_t last) {
    const int64_t groups = Kp / G, blocks = Kp / 32;
    for (int64_t m = first; m < last; m++) {
        const float *xm = x + m * K;
        int8_t *qm = q + m * Kp;
        float *sm = xscale + m * blocks, *gm = xsum == NULL ? NULL : xsum + m * groups;
        if (gm != NULL)
            for (int64_t g = 0; g < groups; g++) gm[g] = 0.f;
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t k0 = b * 32, n = K < k0 ? 0 : (K < k0 + 32 ? K - k0 : 32);
            /* the full blocks with a constant length, which the compiler vectorizes */
            const int32_t s = n == 32 ? quantize_block(xm + k0, qm + k0, 32, sm + b)
                                      : quantize_block(xm + k0, qm + k0, n, sm + b);
            if (gm != NULL) gm[k0 / G] += sm[b] * (float)s;
        }
    }
}

/* Rows [first, last) of q [M, Kp]: sums [M, Kp / G] = each group of G codes' integer sum
 * (an offset's term: mxfp4.c's values + 12, kq.c's unsigned Q6K codes). */
static void code_sums(const int8_t *q, int32_t *sums, int64_t Kp, int64_t G, int64_t first, int64_t last) {
    for (int64_t i = first * (Kp / G); i < last * (Kp / G); i++) {
        int32_t s = 0;
        for (int64_t k = 0; k < G; k++) s += q[i * G + k];
        sums[i] = s;
    }
}

/* One row of a tile's output: its 8 columns, less the last tile's spare ones. */
static inline __attribute__((always_inline)) void store_tile(float *o, __m256 y, int64_t width) {
    if (width == 8) {
        _mm256_storeu_ps(o, y);
    } else {
        float spare[8];
        _mm256_storeu_ps(spare, y);
        memcpy(o, spare, sizeof(float) * (size_t)width);
    }
}

#endif
