/* Decode attention straight from the paged KV cache (float32 or float16), for CPU.
 *
 * One query token per request; each request reads its keys and values once, slot by slot
 * through its block table (a slot's heads are contiguous), with no gathered copy: scores
 * for every query head against its KV head, a softmax, and the weighted sum of the values.
 * Requests are split over n_threads OpenMP threads: built with -fopenmp, the library's
 * libgomp.so.1 is the copy torch has loaded, so they are torch's own pool rather than
 * threads fighting its spinning workers for the cores. Built and loaded by
 * paged_decode_cpu.py.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_row.h"

typedef struct {
    const float *q;
    const void *k_cache, *v_cache; /* float32, or float16 when half */
    const int32_t *block_tables, *seq_lens;
    const int64_t *reqs, *rows;
    float *out;
    int64_t num_items, width, block_size, num_heads, num_kv_heads, head_dim;
    float scale;
    int64_t half, first, step;
    int failed;
} Job;

static void *run(void *arg) {
    Job *job = (Job *)arg;
    const int64_t D = job->head_dim, HKV = job->num_kv_heads, BS = job->block_size;
    const int64_t H = job->num_heads, group = H / HKV;
    float *scores = NULL, *acc = malloc(sizeof(float) * H * D), *slot = malloc(sizeof(float) * HKV * D);
    int64_t capacity = 0;
    if (acc == NULL || slot == NULL) { job->failed = 1; free(acc); free(slot); return NULL; }
    for (int64_t r = job->first; r < job->num_items; r += job->step) {
        const int64_t req = job->reqs[r], row = job->rows[r];
        const int64_t len = job->seq_lens[req];
        const int32_t *table = job->block_tables + req * job->width;
        const float *q = job->q + row * H * D;
        if (len * H > capacity) {
            free(scores);
            capacity = len * H;
            scores = malloc(sizeof(float) * capacity);
            if (scores == NULL) { job->failed = 1; free(acc); free(slot); return NULL; }
        }
        /* Token by token, each slot's K rows (all KV heads) are one contiguous run. */
        for (int64_t t = 0; t < len; t++) {
            const float *k = kv_row(job->k_cache, job->half, ((int64_t)table[t / BS] * BS + t % BS) * HKV * D, HKV * D, slot);
            for (int64_t hq = 0; hq < H; hq++) {
                const float *kh = k + (hq / group) * D, *qh = q + hq * D;
                float dot = 0.f;
                for (int64_t d = 0; d < D; d++) dot += qh[d] * kh[d];
                scores[hq * len + t] = dot * job->scale;
            }
        }
        for (int64_t hq = 0; hq < H; hq++) {
            float *s = scores + hq * len, top = s[0], sum = 0.f;
            for (int64_t t = 1; t < len; t++) top = s[t] > top ? s[t] : top;
            for (int64_t t = 0; t < len; t++) { s[t] = expf(s[t] - top); sum += s[t]; }
            const float inv = 1.f / sum;
            for (int64_t t = 0; t < len; t++) s[t] *= inv;
        }
        memset(acc, 0, sizeof(float) * H * D);
        for (int64_t t = 0; t < len; t++) {
            const float *v = kv_row(job->v_cache, job->half, ((int64_t)table[t / BS] * BS + t % BS) * HKV * D, HKV * D, slot);
            for (int64_t hq = 0; hq < H; hq++) {
                const float p = scores[hq * len + t], *vh = v + (hq / group) * D;
                float *a = acc + hq * D;
                for (int64_t d = 0; d < D; d++) a[d] += p * vh[d];
            }
        }
        memcpy(job->out + row * H * D, acc, sizeof(float) * H * D);
    }
    free(scores);
    free(acc);
    free(slot);
    return NULL;
}

/* Returns 0 on success, -1 if memory or threads ran out (out is then incomplete). */
int paged_decode_f32(const float *q, const void *k_cache, const void *v_cache,
                     const int32_t *block_tables, const int32_t *seq_lens, const int64_t *reqs,
                     const int64_t *rows, float *out, int64_t num_reqs, int64_t width,
                     int64_t block_size, int64_t num_heads, int64_t num_kv_heads,
                     int64_t head_dim, float scale, int64_t half, int64_t num_threads) {
    Job jobs[64];
    const int64_t items = num_reqs;
    int64_t n = num_threads < 1 ? 1 : (num_threads > 64 ? 64 : num_threads);
    if (n > items) n = items > 0 ? items : 1;
    for (int64_t i = 0; i < n; i++) {
        jobs[i] = (Job){q, k_cache, v_cache, block_tables, seq_lens, reqs, rows, out,
                        items, width, block_size, num_heads, num_kv_heads, head_dim,
                        scale, half, i, n, 0};
    }
#pragma omp parallel num_threads((int)n)
    {
        /* The runtime may give fewer threads than asked: each runs every nt-th job. */
        const int64_t nt = omp_get_num_threads();
        for (int64_t i = omp_get_thread_num(); i < n; i += nt) run(&jobs[i]);
    }
    int failed = 0;
    for (int64_t i = 0; i < n; i++) failed |= jobs[i].failed;
    return failed ? -1 : 0;
}
