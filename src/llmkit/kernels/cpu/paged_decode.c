/* Decode attention straight from the paged KV cache (float32 or float16), for CPU.
 *
 * One query token per request; each request reads its keys and values once, slot by slot
 * through its block table, with no gathered copy (paged_attend.h, the routine the fused
 * decode step runs too).
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

#include "paged_attend.h"

typedef struct {
    const float *q;
    const void *k_cache, *v_cache; /* float32, or float16 when half */
    const int32_t *block_tables, *seq_lens;
    const int64_t *reqs, *rows;
    float *out;
    int64_t num_items, width, block_size, num_heads, num_kv_heads, head_dim, block_stride;
    float scale;
    int64_t window;
    float softcap;
    const float *sinks;
    int64_t half, first, step;
    int failed;
} Job;

static void *run(void *arg) {
    Job *job = (Job *)arg;
    const int64_t H = job->num_heads, D = job->head_dim;
    const PagedKV kv = {job->k_cache,      job->v_cache,  job->half,   job->block_size, H,
                        job->num_kv_heads, D,             job->block_stride, job->scale,
                        job->window,       job->softcap,  job->sinks};
    float *scores = NULL, *slot = malloc(sizeof(float) * (size_t)(job->num_kv_heads * D));
    int64_t capacity = 0;
    if (slot == NULL) { job->failed = 1; return NULL; }
    for (int64_t r = job->first; r < job->num_items; r += job->step) {
        const int64_t req = job->reqs[r], row = job->rows[r], len = job->seq_lens[req];
        if ((len + 1) * H > capacity) {
            free(scores);
            capacity = (len + 1) * H;
            scores = malloc(sizeof(float) * (size_t)capacity);
            if (scores == NULL) { job->failed = 1; free(slot); return NULL; }
        }
        attend_heads(&kv, job->q + row * H * D, job->out + row * H * D, scores, slot,
                     job->block_tables + req * job->width, len, 0, H);
    }
    free(scores);
    free(slot);
    return NULL;
}

/* Returns 0 on success, -1 if memory or threads ran out (out is then incomplete). */
int paged_decode_f32(const float *q, const void *k_cache, const void *v_cache,
                     const int32_t *block_tables, const int32_t *seq_lens, const int64_t *reqs,
                     const int64_t *rows, float *out, int64_t num_reqs, int64_t width,
                     int64_t block_size, int64_t num_heads, int64_t num_kv_heads,
                     int64_t head_dim, int64_t block_stride, float scale, int64_t window,
                     float softcap, const float *sinks, int64_t half, int64_t num_threads) {
    Job jobs[64];
    const int64_t items = num_reqs;
    int64_t n = num_threads < 1 ? 1 : (num_threads > 64 ? 64 : num_threads);
    if (n > items) n = items > 0 ? items : 1;
    for (int64_t i = 0; i < n; i++) {
        jobs[i] = (Job){q, k_cache, v_cache, block_tables, seq_lens, reqs, rows, out,
                        items, width, block_size, num_heads, num_kv_heads, head_dim,
                        block_stride, scale, window, softcap, sinks, half, i, n, 0};
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
