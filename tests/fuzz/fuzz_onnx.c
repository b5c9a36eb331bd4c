/*
 * fuzz_onnx.c — libFuzzer target: arbitrary bytes as an uploaded ONNX model, loaded and
 * compiled as the daemon does (one IPU, small memory so plans stay cheap).
 */
#include <stddef.h>
#include <stdint.h>

#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;

    if (sim_model_load(data, size, &m, &err) != 0)
        return 0;
    sim_compile_opts_init(&o);
    o.ipu_memory_bytes = 64u << 20;
    if (sim_compile(m, &o, &e, &err) == 0)
        sim_exe_free(e);
    sim_model_free(m);
    return 0;
}
