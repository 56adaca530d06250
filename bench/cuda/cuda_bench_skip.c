/* cuda_bench without CUDA built in: no rows; `make bench-gpu` builds and runs the real one. */
#include <stdio.h>

int main(void) {
    fprintf(stderr, "cuda_bench: skipped: CUDA not built in (make bench-gpu runs it on a GPU machine)\n");
    return 0;
}
