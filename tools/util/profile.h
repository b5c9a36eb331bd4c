/*
 * profile.h — what the tools do with --profile DIR: fetch the execution trace of a model's
 * last run, write it to DIR/trace.json and draw it to DIR/timeline.svg (timeline.h).
 */
#ifndef IPUOF_TOOLS_PROFILE_H
#define IPUOF_TOOLS_PROFILE_H

#include "ipuof/client.h"

/*
 * Makes dir when missing, fetches m's trace (m compiled with profile on, after a run) and
 * writes DIR/trace.json and DIR/timeline.svg (its first device iteration, as the tutorial's
 * pipeline figure shows one; titled title, NULL: from the trace), each into a new file
 * renamed into place (proto/freshfile.h: a symlink there is replaced, never written
 * through), printing both paths on stdout. Returns 0, or the exit status after printing why on stderr as
 * "PROG: ...": the daemon's error through args_fail(), EX_CANTCREAT for a file.
 */
int profile_write(const char *prog, ipuof_client *c, ipuof_model *m, const char *dir,
                  const char *title);

#endif /* IPUOF_TOOLS_PROFILE_H */
