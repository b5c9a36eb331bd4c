/*
 * timeline.h — an ipuofd execution trace (Chrome trace-event JSON: one tid per IPU,
 * complete "X" events named F<stage>.<mb> / B<stage>.<mb>, exchange, host-in/out, stream
 * (off-chip tensors), weight-update, reduce, with args {stage, mb, iter, kind}) drawn as an SVG timeline like the
 * pipeline figure of PopTorch's pipelining tutorial: one row per IPU, forward and backward
 * spans in two colours labelled F<n> / B<n> with the micro-batch counted from 1, the other
 * kinds in colours of their own, a simulated-time axis and a legend. Used by ipuof-trace
 * and ipuof-mnist --profile.
 */
#ifndef IPUOF_TOOLS_TIMELINE_H
#define IPUOF_TOOLS_TIMELINE_H

#include <stddef.h>
#include <stdio.h>

#define TIMELINE_EBAD 1      /* not a trace this renderer reads */
#define TIMELINE_EWINDOW 2   /* the window asked for holds nothing */

/* What to draw: a window of simulated time (t0 / t1 < 0: the trace's start / end, in
 * microseconds; with an iteration, that iteration's start / end), the picture's width in pixels, a title (NULL: made from the name). */
struct timeline_view {
    double t0, t1;
    int width;
    const char *title;
    long iteration;   /* >= 0: only the spans of this device iteration (args.iter); -1: all */
};

/*
 * Renders the trace json[0..len) (borrowed) as SVG to out. name names the trace in the
 * default title. Returns 0, or TIMELINE_EBAD / TIMELINE_EWINDOW with a sentence in
 * err[0..errlen) (the byte offset of a JSON error, what the trace lacks, the window).
 */
int timeline_render(const char *json, size_t len, const char *name,
                    const struct timeline_view *view, FILE *out, char *err, size_t errlen);

#endif /* IPUOF_TOOLS_TIMELINE_H */
