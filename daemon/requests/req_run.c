/*
 * req_run.c — run and free_model: streaming batches through a compiled model.
 *
 * A run is its job's (jobs_run.c): the input bytes are read from the socket straight into
 * the executable's input buffers, a worker runs the device iterations (and, for training,
 * the accumulation steps and optimizer steps) on every replica once every process sharing
 * the model has sent its share, and each process's outputs go back in one frame.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"
#include "slices.h"
#include "wiremap.h"

void
req_run(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__RunRequest *rq = h->run;
    struct model *m = job_find_model(c, rq->model_id);

    if (m == NULL) {
        job_send_missing(c, req_id, rq->model_id, "; compile one first");
        return;
    }
    if (job_begin_step(c, req_id, JOB_STEP_RUN))
        return;
    job_run(c, req_id, rq, payload_len, m); /* runs once every process sharing m sent its share */
}

void
req_free_model(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__FreeModelReply fr = IPUOF__FREE_MODEL_REPLY__INIT;

    (void)payload_len;
    /* freed once every process sharing it has freed it */
    if (c->job == NULL || job_free_model(c, h->free_model->model_id) < 0) {
        job_send_missing(c, req_id, h->free_model->model_id, "");
        return;
    }
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_FREE_MODEL_REPLY;
    r.free_model_reply = &fr;
    conn_send(c, &r, NULL, 0);
}
