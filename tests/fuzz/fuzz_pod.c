/*
 * fuzz_pod.c — libFuzzer target: the Pod port and its rendezvous store (PodHello, KvSet,
 * KvGet with and without a wait, KvDrop, raw bytes) across two connections with small
 * output limits, through tests/util/podfuzz.c (which make test also replays the corpus
 * through: tests/unit/test_pod_conn.c).
 */
#include <stddef.h>
#include <stdint.h>

#include "podfuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    podfuzz_one(data, size);
    return 0;
}
