/* Decode attention straight from the paged KV cache (float32 or float16), for CPU.
 *
 * One query token per request; each request reads its keys and values once, slot by slot
 * through its block table, with no gathered copy (paged_attend.h, the routine the fused
 * decode step runs too).
 * Each span of a request's slots is an item, split over n_threads OpenMP threads, and each
 * request's parts are merged after a barrier. Built with -fopenmp, the library's
 * libgomp.so.1 is the copy torch has loaded, so they are torch's own pool rather than
 * threads fighting its spinning workers for the cores. Loaded by paged_decode_cpu.py.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "paged_attend.h"

/* Returns 0 on success, -1 if memory ran out (out is then incomplete). */
int paged_decode_f32(const float *q, const void *k_cache, const void *v_cache,
                     const int32_t *block_tables, const int32_t *seq_lens, const int64_t *reqs,
                     const int64_t *rows, float *out, int64_t num_reqs, int64_t width,
                     int64_t block_size, int64_t num_heads, int64_t num_kv_heads,
                     int64_t head_dim, int64_t block_stride, float scale, int64_t window,
                     float softcap, const float *sinks, int64_t half, int64_t num_threads) {
    if (num_reqs == 0) return 0;
    const int64_t H = num_heads, D = head_dim, NKV = num_kv_heads;
    const int64_t nt = num_threads < 1 ? 1 : num_threads;
    const PagedKV kv = {k_cache, v_cache, half,  block_size, H,       NKV,
                        D,       block_stride, scale, window,  softcap, sinks};
    int64_t longest = 1;
    for (int64_t r = 0; r < num_reqs; r++)
        longest = seq_lens[reqs[r]] > longest ? seq_lens[reqs[r]] : longest;
    const int64_t spans = spans_for(nt, longest), size = part_size(&kv), items = num_reqs * spans;
    const int64_t scratch = H * (longest / spans + 2) + NKV * D;
    float *parts = malloc(sizeof(float) * (size_t)(items * size));
    float *work = malloc(sizeof(float) * (size_t)(nt * scratch));
    const int failed = parts == NULL || work == NULL;
    if (!failed) {
#pragma omp parallel num_threads((int)nt)
        {
            /* The runtime may give fewer threads than asked: split by the ones it gave. */
            const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
            float *s = work + i * scratch, *slot = s + scratch - NKV * D;
            for (int64_t j = i; j < items; j += n) {
                const int64_t r = j / spans, req = reqs[r];
                attend_part(&kv, q + rows[r] * H * D, block_tables + req * width, seq_lens[req],
                            j % spans, spans, s, slot, parts + j * size);
            }
#pragma omp barrier
            for (int64_t r = num_reqs * i / n; r < num_reqs * (i + 1) / n; r++)
                merge_parts(&kv, parts + r * spans * size, spans, size, out + rows[r] * H * D);
        }
    }
    free(parts);
    free(work);
    return failed ? -1 : 0;
}
