/* Decode attention of one query row over its request's paged KV cache, written once for the
 * CPU kernels that run it (paged_decode.c alone, llama_decode.c inside a fused layer).
 *
 * Token by token through the block table, each slot's keys and values (all KV heads side by
 * side, float32 or float16: kv_row.h) are read once for every query head asked for; the
 * scores' softmax is taken unnormalized and each head's sum divided out at the end.
 * A layer's spec (model/attention/base.py AttentionSpec) is honoured: a sliding window reads
 * only the last `window` slots, a soft-cap bends each score through tanh, and a sink adds
 * its head's logit to the softmax's sum (a key whose value is zero).
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
    const float *sinks; /* [heads] sink logits, or NULL */
} PagedKV;

/* out's query heads [h0, h0 + count) = attention of q's (both [heads, head_dim]) over the
 * first len slots of table (the last `window` of them with a window). s: count * (len + 1)
 * floats of scratch; slot: kv_heads * head_dim floats (a float16 slot widened). */
static void attend_heads(const PagedKV *kv, const float *q, float *out, float *s, float *slot,
                         const int32_t *table, int64_t len, int64_t h0, int64_t count) {
    const int64_t D = kv->head_dim, BS = kv->block_size, stride = kv->kv_heads * D;
    const int64_t group = kv->heads / kv->kv_heads;
    const int64_t t0 = kv->window > 0 && len > kv->window ? len - kv->window : 0;
    float *inv = s + count * len;
    for (int64_t t = t0; t < len; t++) {
        const int64_t at = (int64_t)table[t / BS] * kv->block_stride + t % BS * stride;
        const float *k = kv_row(kv->k_cache, kv->half, at, stride, slot);
        for (int64_t g = 0; g < count; g++) {
            const float *qh = q + (h0 + g) * D, *kh = k + (h0 + g) / group * D;
            float dot = 0.f;
            for (int64_t d = 0; d < D; d++) dot += qh[d] * kh[d];
            dot *= kv->scale;
            s[g * len + t] = kv->softcap > 0.f ? kv->softcap * tanhf(dot / kv->softcap) : dot;
        }
    }
    for (int64_t g = 0; g < count; g++) {
        float *sg = s + g * len, top = -INFINITY, sum = 0.f;
        const float sink = kv->sinks ? kv->sinks[h0 + g] : -INFINITY;
        for (int64_t t = t0; t < len; t++) top = sg[t] > top ? sg[t] : top;
        top = sink > top ? sink : top;
        for (int64_t t = t0; t < len; t++) {
            sg[t] = expf(sg[t] - top);
            sum += sg[t];
        }
        if (kv->sinks) sum += expf(sink - top);
        inv[g] = 1.f / sum;
    }
    memset(out + h0 * D, 0, sizeof(float) * (size_t)(count * D));
    for (int64_t t = t0; t < len; t++) {
        const int64_t at = (int64_t)table[t / BS] * kv->block_stride + t % BS * stride;
        const float *v = kv_row(kv->v_cache, kv->half, at, stride, slot);
        for (int64_t g = 0; g < count; g++) {
            const float p = s[g * len + t], *vh = v + (h0 + g) / group * D;
            float *o = out + (h0 + g) * D;
            for (int64_t d = 0; d < D; d++) o[d] += p * vh[d];
        }
    }
    for (int64_t g = 0; g < count; g++)
        for (int64_t d = 0; d < D; d++) out[(h0 + g) * D + d] *= inv[g];
}

#endif
