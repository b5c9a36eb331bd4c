/*
 * jobs_status.c — the processes of every job and the phase each job is in, for the status
 * reply (req_admin.c).
 */
#include <stdlib.h>

#include "conn.h"
#include "jobs.h"
#include "jobs_int.h"
#include "jobs_sm.h"
#include "srv_state.h"

int
job_status(const struct srv *s, Ipuof__JobProcess ***out, size_t *n)
{
    size_t total = 0, k = 0;
    Ipuof__JobProcess **pp;
    Ipuof__JobProcess *jp;
    Ipuof__Holder *ho;
    void *block;

    for (const struct job *j = s->jobs; j != NULL; j = j->next)
        total += j->nproc;
    /* one block: the pointers, the messages, the holders */
    block = calloc(1, total * (sizeof *pp + sizeof *jp + sizeof *ho) + 1);
    if (block == NULL)
        return -1;
    pp = block;
    jp = (Ipuof__JobProcess *)(pp + total);
    ho = (Ipuof__Holder *)(jp + total);
    for (struct job *j = s->jobs; j != NULL; j = j->next) {
        for (unsigned p = 0; p < j->nproc; p++, k++) {
            struct job_proc *q = &j->proc[p];
            ipuof__job_process__init(&jp[k]);
            jp[k].partition = j->name;
            jp[k].process_id = p + j->proc_base;
            jp[k].num_processes = j->nproc_all;
            jp[k].job_phase = (char *)job_phase_name(j->phase);
            jp[k].state = (char *)(q->left[0] ? q->left
                                   : q->conn == NULL ? "absent"
                                   : q->attach_req ? "attaching" : "attached");
            if (q->conn != NULL) {
                ipuof__holder__init(&ho[k]);
                ho[k].client_id = q->conn->id;
                ho[k].client_name = q->conn->name;
                ho[k].pid = q->pid;
                ho[k].peer = q->peer;
                jp[k].holder = &ho[k];
            }
            pp[k] = &jp[k];
        }
    }
    *out = pp;
    *n = total;
    return 0;
}
