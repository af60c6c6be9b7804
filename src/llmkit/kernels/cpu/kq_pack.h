/* Laying a GGUF file's K-quant and Q5 blocks out for kq.c's kernel (kq.py's read, in one
 * pass over the file's rows). Included by kq.c: the packer is in the same library. The
 * types' numbers and block sizes are formats.h's (the registry's table).
 */

typedef struct {
    uint8_t *lo, *hi;
    void *sc, *mn;
    uint16_t *d, *dmin;
    int64_t K;
} Packing;

static inline uint16_t half_at(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return h; }

/* Code q of column c (of tile t), input k, into the nibble and high-bit planes. */
static inline void put_code(const Packing *p, int64_t t, int64_t c, int64_t k, int q, int six) {
    const int64_t K = p->K;
    uint8_t *lo = p->lo + (t * (K / 8) + k / 8) * 32 + 4 * c + k % 4;
    *lo |= (uint8_t)((q & 15) << (k % 8 >= 4 ? 4 : 0));
    if (p->hi == NULL) return;
    const int64_t s = k % 32 / 8, h = k % 8 / 4;
    if (six) {
        const int64_t u = k / 16, s6 = k % 16 / 8;
        p->hi[(t * (K / 16) + u) * 32 + 4 * c + k % 4] |= (uint8_t)(((q >> 4) & 3) << (2 * (2 * s6 + h)));
    } else {
        p->hi[(t * (K / 32) + k / 32) * 32 + 4 * c + k % 4] |= (uint8_t)(((q >> 4) & 1) << (2 * s + h));
    }
}

/* A per-column table's entry g of column c (tile t), count entries a column. */
#define TABLE(ptr, type, t, c, g, count) (((type *)(ptr))[((t) * (count) + (g)) * 8 + (c)])

/* Row n of the weight from its GGUF blocks (a Q4_K/Q5_K super-block's 12 bytes of 6-bit
 * scales and mins unpacked as llama.cpp's get_scale_min_k4). */
static void pack_row(const Packing *p, int64_t gtype, const uint8_t *row, int64_t n) {
    const int64_t K = p->K, t = n / 8, c = n % 8;
    int q[256];
    if (gtype == G_Q5_0 || gtype == G_Q5_1) {
        const int64_t bytes = gtype == G_Q5_0 ? BLOCK_BYTES_Q5_0 : BLOCK_BYTES_Q5_1;
        for (int64_t b = 0; b < K / 32; b++) {
            const uint8_t *blk = row + b * bytes, *qh = blk + (gtype == G_Q5_0 ? 2 : 4);
            const uint16_t d = half_at(blk);
            const uint16_t m = gtype == G_Q5_1 ? half_at(blk + 2)
                                               : _cvtss_sh(-16.f * _cvtsh_ss(d), _MM_FROUND_TO_NEAREST_INT);
            uint32_t high;
            memcpy(&high, qh, 4);
            for (int i = 0; i < 32; i++)
                put_code(p, t, c, b * 32 + i, ((qh[4 + i % 16] >> (4 * (i / 16))) & 15) | (int)((high >> i) & 1) << 4, 0);
            TABLE(p->sc, uint16_t, t, c, b, K / 32) = d;
            TABLE(p->mn, uint16_t, t, c, b, K / 32) = m;
        }
        return;
    }
    const int64_t bytes = gtype == G_Q4_K ? BLOCK_BYTES_Q4_K
                        : (gtype == G_Q5_K ? BLOCK_BYTES_Q5_K : BLOCK_BYTES_Q6_K);
    for (int64_t b = 0; b < K / 256; b++) {
        const uint8_t *blk = row + b * bytes;
        if (gtype == G_Q6_K) {
            const uint8_t *ql = blk, *qh = blk + 128;
            for (int w = 0; w < 256; w++) {
                const int half = w / 128, in = w % 128;
                q[w] = ((ql[half * 64 + in % 64] >> (4 * (in / 64))) & 15) |
                       ((qh[half * 32 + in % 32] >> (2 * (in / 32))) & 3) << 4;
            }
            for (int u = 0; u < 16; u++) TABLE(p->sc, int8_t, t, c, b * 16 + u, K / 16) = (int8_t)blk[192 + u];
            TABLE(p->d, uint16_t, t, c, b, K / 256) = half_at(blk + 208);
        } else {
            const uint8_t *s = blk + 4, *qs = blk + (gtype == G_Q5_K ? 48 : 16), *qh = blk + 16;
            for (int j = 0; j < 8; j++) {
                const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
                const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                TABLE(p->sc, uint8_t, t, c, b * 8 + j, K / 32) = (uint8_t)sc;
                TABLE(p->mn, uint8_t, t, c, b * 8 + j, K / 32) = (uint8_t)mn;
            }
            for (int w = 0; w < 256; w++) {
                const int sub = w / 32, l = w % 32;
                q[w] = (qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 15;
                if (gtype == G_Q5_K) q[w] |= ((qh[l] >> sub) & 1) << 4;
            }
            TABLE(p->d, uint16_t, t, c, b, K / 256) = half_at(blk);
            TABLE(p->dmin, uint16_t, t, c, b, K / 256) = half_at(blk + 2);
        }
        for (int w = 0; w < 256; w++) put_code(p, t, c, b * 256 + w, q[w], gtype == G_Q6_K);
    }
}

/* blocks: N rows of a GGUF tensor of type gtype with K inputs; the planes and tables
 * (zeroed, sized for N rounded up to whole tiles) filled as kq.py's _layout lays them.
 * A tile's rows are one thread's, so no two threads write one byte. */
int kq_pack(const uint8_t *blocks, int64_t row_bytes, int64_t N, int64_t K, int64_t gtype,
            uint8_t *lo, uint8_t *hi, void *sc, void *mn, uint16_t *d, uint16_t *dmin,
            int64_t n_threads) {
    const Packing p = {lo, hi, sc, mn, d, dmin, K};
    const int64_t tiles = (N + 7) / 8;
#pragma omp parallel for num_threads(n_threads < 1 ? 1 : (int)n_threads) schedule(static)
    for (int64_t t = 0; t < tiles; t++)
        for (int64_t n = t * 8; n < t * 8 + 8 && n < N; n++) pack_row(&p, gtype, blocks + n * row_bytes, n);
    return 0;
}
