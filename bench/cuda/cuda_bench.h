/* cuda_bench: the GPU benchmark's entry point (cuda_bench.cu), called by cuda_bench_main.c. */
#ifndef PCCL_BENCH_CUDA_BENCH_H
#define PCCL_BENCH_CUDA_BENCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* Prints CSV rows on stdout; `--torch FILE` adds rows against torch.sum figures ("bytes GB/s"
 * per line, from torch_sum.py). Without a GPU prints "skipped: no GPU" and returns 0. */
int cuda_bench_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
