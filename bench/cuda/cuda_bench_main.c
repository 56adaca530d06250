/* cuda_bench, CUDA flavour: see cuda_bench.cu. */
#include "bench/cuda/cuda_bench.h"

int main(int argc, char **argv) { return cuda_bench_main(argc, argv); }
