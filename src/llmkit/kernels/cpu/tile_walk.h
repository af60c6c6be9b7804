/* The walk over output tiles of a tiled kernel (w4a8.c, q8.c, kq.c, mxfp4.c). A kernel includes this after
 * tiled.h and after defining its Job (with the row count M and output count N); it defines
 * tile(job, t, m0, mt), which computes mt <= MT rows of tile t, and quantize_rows(job, first,
 * last). A kernel that defines UNPACKED_TILES defines UNPACK_ROWS and gemm_unpacked(job,
 * first, last) too: a path for steps of UNPACK_ROWS rows or more that unpacks each tile once
 * (kq_rows.h; 0, or -1 where it could not run). No include guard: llama_decode.c includes every kernel, each
 * under its own names for Job, tile, quantize_rows, gemm_tiles and run_job.
 */
static inline __attribute__((always_inline)) void tile(const Job *job, int64_t t, int64_t m0, int mt);
static void quantize_rows(const Job *job, int64_t first, int64_t last);

#ifdef UNPACKED_TILES
static int gemm_unpacked(const Job *job, int64_t first, int64_t last);
#endif

/* Output tiles [first, last), ROW_BLOCK rows at a time, MT rows a pass. */
static void gemm_tiles(const Job *job, int64_t first, int64_t last) {
#ifdef UNPACKED_TILES
    if (job->M >= UNPACK_ROWS && gemm_unpacked(job, first, last) == 0) return;
#endif
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


/* The whole matmul on n_threads OpenMP threads (torch's pool, see build.py): the rows
 * quantized, then the output tiles computed, each split over the threads. */
static void run_job(const Job *job, int64_t n_threads) {
    const int64_t tiles = (job->N + 7) / 8, M = job->M;
#pragma omp parallel num_threads(n_threads < 1 ? 1 : (int)n_threads)
    {
        const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
        quantize_rows(job, M * i / n, M * (i + 1) / n);
#pragma omp barrier
        gemm_tiles(job, tiles * i / n, tiles * (i + 1) / n);
    }
}
