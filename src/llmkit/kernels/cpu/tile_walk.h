/* The walk over output tiles of a tiled kernel (w4a8.c, q8.c). A kernel includes this after
 * tiled.h and after defining its Job (with the row count M); it defines tile(job, t, m0, mt),
 * which computes mt <= MT rows of tile t. No include guard: llama_decode.c includes both
 * kernels, each under its own names for Job, tile and gemm_tiles.
 */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt);

/* Output tiles [first, last), ROW_BLOCK rows at a time, MT rows a pass. */
static void gemm_tiles(const Job *job, int64_t first, int64_t last) {
    for (int64_t r0 = 0; r0 < job->M; r0 += ROW_BLOCK) {
        const int64_t r1 = r0 + ROW_BLOCK < job->M ? r0 + ROW_BLOCK : job->M;
        for (int64_t t = first; t < last; t++) {
            int64_t m = r0;
            for (; m + MT <= r1; m += MT) tile(job, t, m, MT);
            switch (r1 - m) {
                case 3: tile(job, t, m, 3); break;
                case 2: tile(job, t, m, 2); break;
                case 1: tile(job, t, m, 1); break;
                default: break;
            }
        }
    }
}

