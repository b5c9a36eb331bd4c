/*
 * mnist_feed.c — the tutorial's stand-in inputs written into a compiled executable's input
 * buffers (mnist_model.h), for bench/ipuof-train.c and the simulator's unit tests. Apart
 * from mnist_model.c because it calls the simulator, which the tools linking that file do
 * not link.
 */
#include "mnist_model.h"
#include "sim.h"

int
mnist_fill_inputs(struct sim_exe *e)
{
    struct sim_io_info in;
    uint64_t s = 12345;
    int rc = 0;

    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        if (sim_exe_input_info(e, i, &in) != 0) {
            rc = -1;
            continue;
        }
        mnist_fake_data(&s, in.dtype == SIM_DTYPE_FLOAT, sim_exe_input_buffer(e, i),
                        in.run_bytes);
    }
    return rc;
}
