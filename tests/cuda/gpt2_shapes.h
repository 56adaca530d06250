/* gpt2_shapes.h: the tensors of a GPT-2 124M model (the Hugging Face names and shapes, float32):
 * 148 tensors, 124,439,808 elements, 497,759,232 bytes. The GPU tests and the benchmark use it
 * as "a real model's state": one huge tensor, a dozen large ones per layer, and many of 768
 * elements. */
#ifndef PCCL_TESTS_CUDA_GPT2_SHAPES_H
#define PCCL_TESTS_CUDA_GPT2_SHAPES_H

#include <stddef.h>
#include <stdio.h>

#define GPT2_TENSORS 148
#define GPT2_ELEMENTS ((size_t) 124439808)

typedef struct gpt2_tensor_t {
    char name[40];
    size_t count; /* float32 elements */
} gpt2_tensor_t;

/* Fills t[0 .. GPT2_TENSORS) in the model's own order; returns the count. */
static inline size_t gpt2_shapes(gpt2_tensor_t *t) {
    size_t n = 0;
    const size_t d = 768;
    snprintf(t[n].name, sizeof t[n].name, "wte.weight");
    t[n++].count = 50257 * d;
    snprintf(t[n].name, sizeof t[n].name, "wpe.weight");
    t[n++].count = 1024 * d;
    static const struct {
        const char *name;
        size_t count;
    } block[] = {{"ln_1.weight", 768},          {"ln_1.bias", 768},           {"attn.c_attn.weight", 768 * 2304},
                 {"attn.c_attn.bias", 2304},    {"attn.c_proj.weight", 768 * 768}, {"attn.c_proj.bias", 768},
                 {"ln_2.weight", 768},          {"ln_2.bias", 768},           {"mlp.c_fc.weight", 768 * 3072},
                 {"mlp.c_fc.bias", 3072},       {"mlp.c_proj.weight", 3072 * 768}, {"mlp.c_proj.bias", 768}};
    for (int h = 0; h < 12; h++)
        for (size_t k = 0; k < sizeof block / sizeof block[0]; k++) {
            snprintf(t[n].name, sizeof t[n].name, "h.%d.%s", h, block[k].name);
            t[n++].count = block[k].count;
        }
    snprintf(t[n].name, sizeof t[n].name, "ln_f.weight");
    t[n++].count = d;
    snprintf(t[n].name, sizeof t[n].name, "ln_f.bias");
    t[n++].count = d;
    return n;
}

#endif /* PCCL_TESTS_CUDA_GPT2_SHAPES_H */
