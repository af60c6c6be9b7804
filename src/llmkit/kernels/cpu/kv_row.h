/* A paged KV cache's slot rows, float32 or float16 (the cache's dtype, kv_cache_dtype), as the
 * decode-attention kernels (paged_decode.c, llama_decode.c) read and write them: float16 is
 * widened to float32 on reading, rounded to nearest-even on writing (as torch's .to does).
 */
#ifndef LLMKIT_KV_ROW_H
#define LLMKIT_KV_ROW_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* n values of the cache from element `at` as float32: the cache's own memory, or buf
 * holding them widened. */
static inline const float *kv_row(const void *cache, int64_t half, int64_t at, int64_t n,
                                  float *buf) {
    if (!half) return (const float *)cache + at;
    const uint16_t *h = (const uint16_t *)cache + at;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) buf[i] = _cvtsh_ss(h[i]);
    return buf;
}

/* n float32 values into the cache from element `at`. */
static inline void kv_store(void *cache, int64_t half, int64_t at, const float *src, int64_t n) {
    if (!half) {
        memcpy((float *)cache + at, src, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t *h = (uint16_t *)cache + at;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

#endif
