/*
 * fuzz_frame.c — libFuzzer target: arbitrary bytes through the frame codec as the daemon
 * sees them (head, then header with the pre-hello and the full limits).
 */
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head;
    Ipuof__Header *h;
    size_t used;
    char err[256];

    ipuof_frame_limits_default(&lim);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            lim.max_header = 16384 - IPUOF_FRAME_HEAD_LEN;
            lim.max_payload = 0;
        }
        if (ipuof_frame_parse(data, size, &lim, &head, &h, &used, err, sizeof err) == 0) {
            (void)ipuof_frame_body_name(h);
            ipuof_frame_header_free(h);
        }
    }
    /* The header alone, as if a valid head had announced it. */
    h = ipuof_frame_header_unpack(data, size, &lim, err, sizeof err);
    ipuof_frame_header_free(h);
    return 0;
}
