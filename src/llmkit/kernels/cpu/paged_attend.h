/* Decode attention of one query row over its request's paged KV cache, written once for the
 * CPU kernels that run it (paged_decode.c alone, llama_decode.c inside a fused layer).
 *
 * The work is split as flash-decoding splits it, so that one long request keeps every thread
 * busy: an item is one span of a row's slots. It reads each slot's keys and values once
 * (float32 or float16: kv_row.h) for all the query heads, the next block's rows fetched
 * ahead, and leaves a part: per head the scores' max, the sum of their exponentials from it
 * and the values they weigh. A row's parts are then merged into its output. A layer's spec (model/attention/base.py
 * AttentionSpec) is honoured: a sliding window reads only the last `window` slots, a soft-cap
 * bends each score through tanh, and a sink adds its head's logit to the softmax's sum (a key
 * whose value is zero).
 */
#ifndef LLMKIT_PAGED_ATTEND_H
#define LLMKIT_PAGED_ATTEND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kv_row.h"

typedef struct { /* one layer's cache, as a step reads it, and how the layer attends */
    const void *k_cache, *v_cache; /* [blocks, block_size, kv_heads, head_dim] */
    int64_t half, block_size, heads, kv_heads, head_dim;
    int64_t block_stride; /* elements from one block to the next: a block's slots are
                             contiguous, blocks may lie further apart (model/kv_layout.py) */
    float scale;
    int64_t window;     /* slots a query sees, itself included; 0: all */
    float softcap;      /* 0: none */
    const float *sinks; /* [heads] or NULL */
} PagedKV;

/* e^x of 8 floats: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, as Cephes' expf),
 * e^r by its degree-6 polynomial (within 2 ulp of expf), 2^n put into the exponent bits;
 * 0 below -87.3 (and for -inf). A scalar expf a score was most of a long context's time. */
static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365f), hi = _mm256_set1_ps(88.3762f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
    const __m256i two_n = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(two_n)));
}

/* The scores s[0, n) made e^(s - top) in place; returns their sum. */
static float exp_scores(float *s, int64_t n, float top) {
    const __m256 m8 = _mm256_set1_ps(top);
    __m256 acc = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), m8));
        _mm256_storeu_ps(s + t, e);
        acc = _mm256_add_ps(acc, e);
    }
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    float sum = _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
    for (; t < n; t++) {
        s[t] = expf(s[t] - top);
        sum += s[t];
    }
    return sum;
}

#define SPAN_MIN 64 /* slots: a shorter span's part costs more to merge than it saves */

/* The spans each row's slots are cut into: one a thread (item j of a row going to thread
 * j % threads, every thread reads a share of every row, however their lengths differ), none
 * shorter than SPAN_MIN. */
static int64_t spans_for(int64_t threads, int64_t longest) {
    const int64_t most = longest / SPAN_MIN > 1 ? longest / SPAN_MIN : 1;
    return threads < most ? threads : most;
}

/* The floats of one item's part: per query head, max, sum and head_dim values. */
static inline int64_t part_size(const PagedKV *kv) { return kv->heads * (2 + kv->head_dim); }

/* The cache rows (all KV heads of a slot) of slots [a, b), block by block through the table:
 * `at` is row t's first element; `ahead` the same row of the next block, fetched early (a
 * block's rows are contiguous, the blocks scattered: the hardware prefetcher stops at each). */
typedef struct {
    const int32_t *table;
    int64_t block_size, block_stride, stride, end, at, left, ahead;
} SlotWalk;

static inline void walk_to(SlotWalk *w, int64_t t) {
    const int64_t block = t / w->block_size, in = t % w->block_size;
    w->at = (int64_t)w->table[block] * w->block_stride + in * w->stride;
    w->left = w->block_size - in;
    w->ahead = (block + 1) * w->block_size < w->end
                   ? (int64_t)w->table[block + 1] * w->block_stride + in * w->stride
                   : -1;
}

/* Row t of the cache as float32 (after walk_to(w, a) and before walk_next), fetching ahead. */
static inline const float *walk_row(const SlotWalk *w, const void *cache, int64_t half,
                                    float *buf) {
    if (w->ahead >= 0) {
        const char *next = (const char *)cache + w->ahead * (half ? 2 : 4);
        for (int64_t off = 0; off < w->stride * (half ? 2 : 4); off += 64)
            _mm_prefetch(next + off, _MM_HINT_T0);
    }
    return kv_row(cache, half, w->at, w->stride, buf);
}

static inline void walk_next(SlotWalk *w, int64_t t) {
    w->at += w->stride;
    if (w->ahead >= 0) w->ahead += w->stride;
    if (--w->left == 0 && t + 1 < w->end) walk_to(w, t + 1);
}

/* [a . a, b . b, c . c, d . d] summed across their lanes, together. */
static inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 all = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1));
}

/* Every head's score against slot row k (scaled, soft-capped) into s[h * n]: four heads a
 * pass, as independent chains of FMAs whose sums are reduced together (head_dim a multiple
 * of 8; else a plain loop). */
static inline void row_scores(const PagedKV *kv, const float *q, const float *k, float *s,
                              int64_t n) {
    const int64_t D = kv->head_dim, H = kv->heads, group = H / kv->kv_heads;
    float dots[4];
    for (int64_t h0 = 0; h0 < H; h0 += 4) {
        const int64_t c = H - h0 < 4 ? H - h0 : 4;
        if (D % 8 == 0) {
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                             _mm256_setzero_ps()};
            const float *qj[4], *kj[4]; /* a missing fourth head repeats the last */
            for (int64_t j = 0; j < 4; j++) {
                qj[j] = q + (h0 + (j < c ? j : c - 1)) * D;
                kj[j] = k + (h0 + (j < c ? j : c - 1)) / group * D;
            }
            for (int64_t d = 0; d < D; d += 8)
                for (int64_t j = 0; j < 4; j++)
                    acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qj[j] + d),
                                             _mm256_loadu_ps(kj[j] + d), acc[j]);
            _mm_storeu_ps(dots, sum4(acc[0], acc[1], acc[2], acc[3]));
        } else {
            for (int64_t j = 0; j < c; j++) {
                const float *qh = q + (h0 + j) * D, *kh = k + (h0 + j) / group * D;
                dots[j] = 0.f;
                for (int64_t d = 0; d < D; d++) dots[j] += qh[d] * kh[d];
            }
        }
        for (int64_t j = 0; j < c; j++) {
            const float dot = dots[j] * kv->scale;
            s[(h0 + j) * n] = kv->softcap > 0.f ? kv->softcap * tanhf(dot / kv->softcap) : dot;
        }
    }
}

/* Item `span` of `spans` of a row: its query q ([heads, head_dim]) over the first len slots
 * of table (the last `window` of them with a window) cut into spans. Each slot's keys and
 * values are read once for every head. s: heads * (len / spans + 1) floats of scratch; slot:
 * kv_heads * head_dim floats (a float16 slot widened). */
static void attend_part(const PagedKV *kv, const float *q, const int32_t *table, int64_t len,
                        int64_t span, int64_t spans, float *s, float *slot, float *part) {
    const int64_t D = kv->head_dim, H = kv->heads, group = H / kv->kv_heads;
    const int64_t t0 = kv->window > 0 && len > kv->window ? len - kv->window : 0;
    const int64_t a = t0 + (len - t0) * span / spans, b = t0 + (len - t0) * (span + 1) / spans;
    const int64_t n = b - a;
    SlotWalk w = {table, kv->block_size, kv->block_stride, kv->kv_heads * D, b, 0, 0, -1};
    if (n > 0) walk_to(&w, a);
    for (int64_t t = a; t < b; walk_next(&w, t), t++) {
        row_scores(kv, q, walk_row(&w, kv->k_cache, kv->half, slot), s + t - a, n);
    }
    for (int64_t h = 0; h < H; h++) {
        float *sh = s + h * n, *p = part + h * (2 + D), top = -INFINITY;
        for (int64_t t = 0; t < n; t++) top = sh[t] > top ? sh[t] : top;
        p[0] = top;
        p[1] = exp_scores(sh, n, top);
        memset(p + 2, 0, sizeof(float) * (size_t)D);
    }
    if (n > 0) walk_to(&w, a);
    for (int64_t t = a; t < b; walk_next(&w, t), t++) {
        const float *v = walk_row(&w, kv->v_cache, kv->half, slot);
        for (int64_t h = 0, kvh = 0; kvh < kv->kv_heads; kvh++) /* no division a head */
            for (int64_t g = 0; g < group; g++, h++) {
                const float p = s[h * n + t - a], *vh = v + kvh * D;
                float *o = part + h * (2 + D) + 2;
                for (int64_t d = 0; d < D; d++) o[d] += p * vh[d];
            }
    }
}

/* out ([heads, head_dim]) from a row's `spans` parts, `stride` floats apart: each part's
 * values weighed by exp(its max - the overall max), divided by the sum of the parts' sums so
 * weighed (and the sink's). */
static void merge_parts(const PagedKV *kv, const float *parts, int64_t spans, int64_t stride,
                        float *out) {
    const int64_t D = kv->head_dim;
    for (int64_t h = 0; h < kv->heads; h++) {
        const float sink = kv->sinks ? kv->sinks[h] : -INFINITY;
        float top = sink, sum = 0.f, *o = out + h * D;
        for (int64_t j = 0; j < spans; j++) {
            const float m = parts[j * stride + h * (2 + D)];
            top = m > top ? m : top;
        }
        memset(o, 0, sizeof(float) * (size_t)D);
        for (int64_t j = 0; j < spans; j++) {
            const float *p = parts + j * stride + h * (2 + D);
            if (p[1] == 0.f) continue; /* an empty span */
            const float w = expf(p[0] - top);
            sum += w * p[1];
            for (int64_t d = 0; d < D; d++) o[d] += w * p[2 + d];
        }
        if (kv->sinks) sum += expf(sink - top);
        const float inv = 1.f / sum;
        for (int64_t d = 0; d < D; d++) o[d] *= inv;
    }
}

#endif
