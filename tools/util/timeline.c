/*
 * timeline.c — see timeline.h. The trace's complete events become spans on rows (one per
 * tid, in tid order, named by thread_name metadata); the SVG is written in one pass.
 */
#include "timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonparse.h"

/* What a trace may hold: ipuof-trace's file limit (256 MiB), nesting as deep as any trace
 * writer goes and far deeper; items and strings bounded only by the text. */
#define TRACE_MAX_BYTES ((size_t)256 << 20)
static const struct ipuof_json_limits trace_limits = {TRACE_MAX_BYTES, 64, TRACE_MAX_BYTES,
                                                      TRACE_MAX_BYTES};

/* The string of v when it is one, else NULL (v may be NULL). */
static const char *
jstr(const struct ipuof_json *v)
{
    return v != NULL && v->type == IPUOF_JSON_STRING ? v->string : NULL;
}

/* The number of v when it is one, else dflt (v may be NULL). */
static double
jnum(const struct ipuof_json *v, double dflt)
{
    return v != NULL && v->type == IPUOF_JSON_NUMBER ? v->number : dflt;
}

/* Event e's name for messages: "?" when it has none. */
static const char *
event_name(const struct ipuof_json *e)
{
    const char *s = jstr(ipuof_json_get(e, "name"));

    return s != NULL ? s : "?";
}

#define MAX_ROWS 256          /* IPUs shown (the daemon has at most 64) */
#define ROW_H 30
#define LEFT 80
#define RIGHT 20
#define TOP 44
#define AXIS_H 34
#define LEGEND_H 28

enum kind { K_FWD, K_BWD, K_EXCHANGE, K_HOST, K_STREAM, K_UPDATE, K_REDUCE, K_OTHER, K_KINDS };

static const struct {
    const char *cls, *fill, *legend;
} kinds[K_KINDS] = {
    [K_FWD] = {"fwd", "#4e79a7", "forward"},
    [K_BWD] = {"bwd", "#f28e2b", "backward"},
    [K_EXCHANGE] = {"exchange", "#9d9d9d", "exchange"},
    [K_HOST] = {"host", "#59a14f", "host I/O"},
    [K_STREAM] = {"stream", "#76b7b2", "off-chip stream"},
    [K_UPDATE] = {"update", "#e15759", "weight update"},
    [K_REDUCE] = {"reduce", "#b07aa1", "reduce"},
    [K_OTHER] = {"other", "#bab0ac", "other"},
};

struct span {
    int row;                  /* index into rows */
    double ts, dur;           /* microseconds */
    enum kind kind;
    long mb, stage, iter;     /* -1 when the event does not say */
    const char *name;         /* borrowed from the JSON document */
};

struct timeline {
    struct span *spans;
    size_t n, cap;
    long tids[MAX_ROWS];      /* the rows, by tid in increasing order */
    const char *names[MAX_ROWS];
    int nrows;
    double t0, t1;
    int used[K_KINDS];
};

/* The row of tid, added (in tid order) when new; -1 beyond MAX_ROWS. */
static int
row_of(struct timeline *t, long tid)
{
    int i;

    for (i = 0; i < t->nrows; i++)
        if (t->tids[i] == tid)
            return i;
    if (t->nrows == MAX_ROWS)
        return -1;
    for (i = t->nrows; i > 0 && t->tids[i - 1] > tid; i--) {
        t->tids[i] = t->tids[i - 1];
        t->names[i] = t->names[i - 1];
        for (size_t k = 0; k < t->n; k++)
            if (t->spans[k].row == i - 1)
                t->spans[k].row = i;
    }
    t->tids[i] = tid;
    t->names[i] = NULL;
    t->nrows++;
    return i;
}

static enum kind
kind_of(const char *name, const char *k)
{
    const char *s = k != NULL ? k : name;

    if (s == NULL)
        return K_OTHER;
    if (strcmp(s, "fwd") == 0 || (k == NULL && s[0] == 'F' && s[1] >= '0' && s[1] <= '9'))
        return K_FWD;
    if (strcmp(s, "bwd") == 0 || (k == NULL && s[0] == 'B' && s[1] >= '0' && s[1] <= '9'))
        return K_BWD;
    if (strcmp(s, "exchange") == 0)
        return K_EXCHANGE;
    if (strncmp(s, "host", 4) == 0)
        return K_HOST;
    if (strcmp(s, "stream") == 0)
        return K_STREAM;
    if (strcmp(s, "weight-update") == 0 || strcmp(s, "update") == 0)
        return K_UPDATE;
    if (strcmp(s, "reduce") == 0)
        return K_REDUCE;
    return K_OTHER;
}

/* The largest tid, stage, micro-batch or iteration a trace may give (any long holds it,
 * and so does one more: the labels count micro-batches from 1). */
#define ID_MAX 1000000000L

/*
 * Reads the number called key in obj (event e itself for its tid, e's args for stage, mb
 * and iter) into *out: dflt when obj has no such number (absent, or not a number). -1 with
 * err when the number is not an integer in -ID_MAX..ID_MAX (converting, say, 1e300 to a
 * long would be undefined behaviour).
 */
static int
id_of(const struct ipuof_json *e, const struct ipuof_json *obj, const char *key, long dflt,
      long *out, char *err, size_t errlen)
{
    const struct ipuof_json *v = ipuof_json_get(obj, key);
    double d;

    if (v == NULL || v->type != IPUOF_JSON_NUMBER) {
        *out = dflt;
        return 0;
    }
    d = v->number;
    if (!(d >= (double)-ID_MAX && d <= (double)ID_MAX) || d != floor(d)) {
        snprintf(err, errlen, "event '%.60s' has %s %g: not an integer in -%ld..%ld",
                 event_name(e), key, d, ID_MAX, ID_MAX);
        return -1;
    }
    *out = (long)d;
    return 0;
}

/* Adds the complete event e (a "ph":"X" object) to t. 0 or -1 with err. */
static int
add_span(struct timeline *t, const struct ipuof_json *e, char *err, size_t errlen)
{
    const struct ipuof_json *args = ipuof_json_get(e, "args");
    double ts = jnum(ipuof_json_get(e, "ts"), NAN), dur = jnum(ipuof_json_get(e, "dur"), NAN);
    struct span *s;
    long tid, mb, stage, iter;
    int row;

    if (!isfinite(ts) || !isfinite(dur) || dur < 0) {
        snprintf(err, errlen, "event '%.60s' has no numeric ts and dur (>= 0)",
                 event_name(e));
        return -1;
    }
    if (id_of(e, e, "tid", 0, &tid, err, errlen) < 0 ||
        id_of(e, args, "mb", -1, &mb, err, errlen) < 0 ||
        id_of(e, args, "stage", -1, &stage, err, errlen) < 0 ||
        id_of(e, args, "iter", -1, &iter, err, errlen) < 0)
        return -1;
    row = row_of(t, tid);
    if (row < 0) {
        snprintf(err, errlen, "the trace has more than %d lanes (tids)", MAX_ROWS);
        return -1;
    }
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 256;
        struct span *ns = realloc(t->spans, ncap * sizeof *ns);
        if (ns == NULL) {
            snprintf(err, errlen, "out of memory for %zu spans", ncap);
            return -1;
        }
        t->spans = ns;
        t->cap = ncap;
    }
    s = &t->spans[t->n++];
    s->row = row;
    s->ts = ts;
    s->dur = dur;
    s->name = jstr(ipuof_json_get(e, "name"));
    s->kind = kind_of(s->name, jstr(ipuof_json_get(args, "kind")));
    s->mb = mb;
    s->stage = stage;
    s->iter = iter;
    if (s->name != NULL && s->mb < 0 && (s->kind == K_FWD || s->kind == K_BWD)) {
        long st, m; /* from the name F<stage>.<mb>: a label only, ignored when out of range */
        if (sscanf(s->name + 1, "%ld.%ld", &st, &m) == 2 && st >= 0 && st <= ID_MAX &&
            m >= 0 && m <= ID_MAX) {
            s->stage = st;
            s->mb = m;
        }
    }
    t->used[s->kind] = 1;
    return 0;
}

/* Reads the trace-event document root into t, its time span over the spans of device
 * iteration iter (-1: all). 0 or -1 with err. */
static int
timeline_read(const struct ipuof_json *root, struct timeline *t, long iter, char *err,
              size_t errlen)
{
    const struct ipuof_json *ev =
        root->type == IPUOF_JSON_ARRAY ? root : ipuof_json_get(root, "traceEvents");

    if (ev == NULL || ev->type != IPUOF_JSON_ARRAY) {
        snprintf(err, errlen, "not a Chrome trace: no \"traceEvents\" array (nor a top-level "
                              "array of events)");
        return -1;
    }
    for (size_t i = 0; i < ev->n; i++) {
        const struct ipuof_json *e = ev->items[i];
        const char *ph = jstr(ipuof_json_get(e, "ph"));

        if (ph == NULL)
            continue;
        if (strcmp(ph, "X") == 0 && add_span(t, e, err, errlen) < 0)
            return -1;
        if (strcmp(ph, "M") == 0 && jstr(ipuof_json_get(e, "name")) != NULL &&
            strcmp(jstr(ipuof_json_get(e, "name")), "thread_name") == 0) {
            long tid;
            int row;
            if (id_of(e, e, "tid", 0, &tid, err, errlen) < 0)
                return -1;
            row = row_of(t, tid);
            if (row >= 0)
                t->names[row] = jstr(ipuof_json_get(ipuof_json_get(e, "args"), "name"));
        }
    }
    if (t->n == 0) {
        snprintf(err, errlen, "the trace has no complete (\"ph\":\"X\") events");
        return -1;
    }
    t->t0 = INFINITY;
    t->t1 = -INFINITY;
    for (size_t i = 0; i < t->n; i++) {
        if (iter >= 0 && t->spans[i].iter != iter)
            continue;
        t->t0 = fmin(t->t0, t->spans[i].ts);
        t->t1 = fmax(t->t1, t->spans[i].ts + t->spans[i].dur);
    }
    if (t->t0 > t->t1) {
        snprintf(err, errlen, "the trace has no spans of device iteration %ld", iter);
        return -1;
    }
    return 0;
}

/* Writes s to f with XML's special characters escaped. */
static void
xml_text(FILE *f, const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

/* A tick step of 1, 2 or 5 x 10^k giving about 8 ticks over range. */
static double
tick_step(double range)
{
    double raw = range / 8, mag = pow(10, floor(log10(raw)));

    if (raw / mag < 1.5)
        return mag;
    if (raw / mag < 3.5)
        return 2 * mag;
    if (raw / mag < 7.5)
        return 5 * mag;
    return 10 * mag;
}

/* Writes a time of us microseconds with a unit suited to the axis step. */
static void
time_label(char *buf, size_t len, double us, double step)
{
    if (step >= 1e5)
        snprintf(buf, len, "%g s", us / 1e6);
    else if (step >= 100)
        snprintf(buf, len, "%g ms", us / 1e3);
    else
        snprintf(buf, len, "%g \xc2\xb5s", us);
}

/* Writes the SVG of t over the window of v to f. */
static void
timeline_svg(const struct timeline *t, const struct timeline_view *v, FILE *f)
{
    double span = v->t1 > v->t0 ? v->t1 - v->t0 : 1;
    double plot_w = v->width - LEFT - RIGHT, scale = plot_w / span;
    int height = TOP + t->nrows * ROW_H + AXIS_H + LEGEND_H;
    double step = tick_step(span);
    double lx = LEFT;
    char buf[64];

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n",
            v->width, height, v->width, height);
    fprintf(f, "<rect class=\"background\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            v->width, height);
    fputs("<text class=\"title\" x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">", f);
    xml_text(f, v->title);
    fputs("</text>\n", f);
    for (int r = 0; r < t->nrows; r++) {
        double y = TOP + r * ROW_H;

        fprintf(f, "<g class=\"row\" data-tid=\"%ld\">\n", t->tids[r]);
        fprintf(f, "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
                   "fill=\"%s\"/>\n", LEFT, y, plot_w, ROW_H, r % 2 ? "#f4f4f4" : "#fafafa");
        fprintf(f, "<text class=\"lane-name\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
                LEFT - 8, y + ROW_H / 2.0 + 4);
        if (t->names[r] != NULL)
            xml_text(f, t->names[r]);
        else
            fprintf(f, "IPU %ld", t->tids[r]);
        fputs("</text>\n", f);
        for (size_t i = 0; i < t->n; i++) {
            const struct span *s = &t->spans[i];
            double a = fmax(s->ts, v->t0), b = fmin(s->ts + s->dur, v->t1), x, w;
            int label = s->kind == K_FWD || s->kind == K_BWD;

            if (s->row != r || b < a || (b == a && s->dur > 0) ||
                (v->iteration >= 0 && s->iter != v->iteration))
                continue;
            x = LEFT + (a - v->t0) * scale;
            w = fmax((b - a) * scale, 0.5);
            fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.5\"",
                    kinds[s->kind].cls, x, y + 3, w, ROW_H - 6, kinds[s->kind].fill);
            if (s->mb >= 0)
                fprintf(f, " data-mb=\"%ld\"", s->mb);
            if (s->stage >= 0)
                fprintf(f, " data-stage=\"%ld\"", s->stage);
            fprintf(f, " data-ts=\"%.3f\" data-dur=\"%.3f\"><title>", s->ts, s->dur);
            xml_text(f, s->name);
            fprintf(f, " %.3f \xc2\xb5s at %.3f \xc2\xb5s</title></rect>\n", s->dur, s->ts);
            if (label && s->mb >= 0) {
                int chars = snprintf(buf, sizeof buf, "%c%ld", s->kind == K_FWD ? 'F' : 'B',
                                     s->mb + 1);
                if (w >= chars * 6.2 + 1)
                    fprintf(f, "<text class=\"mb\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" "
                               "fill=\"#ffffff\" font-size=\"11\">%s</text>\n",
                            x + w / 2, y + ROW_H / 2.0 + 4, buf);
            }
        }
        fputs("</g>\n", f);
    }
    {
        double ya = TOP + t->nrows * ROW_H;
        double first = ceil(v->t0 / step) * step;

        fprintf(f, "<g class=\"axis\">\n<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#333333\"/>\n", LEFT, ya, LEFT + plot_w, ya);
        /* by index: at large times, tk += step could stop advancing */
        for (int k = 0; k <= 100 && first + k * step <= v->t1 + step * 1e-9; k++) {
            double tk = first + k * step;
            double x = LEFT + (tk - v->t0) * scale;
            time_label(buf, sizeof buf, fabs(tk) < step * 1e-9 ? 0.0 : tk, step);
            fprintf(f, "<line class=\"tick\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
                       "stroke=\"#333333\"/>\n<text class=\"tick-label\" x=\"%.2f\" y=\"%.1f\" "
                       "text-anchor=\"middle\">%s</text>\n",
                    x, ya, x, ya + 5, x, ya + 18, buf);
        }
        fprintf(f, "<text class=\"axis-name\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                   "fill=\"#555555\">simulated time</text>\n</g>\n", LEFT + plot_w, ya + 31);
    }
    fputs("<g class=\"legend\">\n", f);
    for (int k = 0; k < K_KINDS; k++) {
        double y = TOP + t->nrows * ROW_H + AXIS_H + 6;
        if (!t->used[k])
            continue;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                lx, y, kinds[k].fill, lx + 19, y + 11, kinds[k].legend);
        lx += 34 + 7.0 * (double)strlen(kinds[k].legend);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">F/B n: forward/backward of "
               "micro-batch n (from 1)</text>\n</g>\n</svg>\n",
            lx + 10, TOP + t->nrows * ROW_H + AXIS_H + 17.0);
}

int
timeline_render(const char *json, size_t len, const char *name, const struct timeline_view *view,
                FILE *out, char *err, size_t errlen)
{
    struct timeline t = {0};
    struct timeline_view v = *view;
    struct ipuof_json *root = NULL;
    char title[512];
    int rc = TIMELINE_EBAD;
    size_t shown = 0;

    if (ipuof_json_parse_limits(json, len, &trace_limits, &root, err, errlen) < 0 ||
        timeline_read(root, &t, view->iteration, err, errlen) < 0)
        goto out;
    v.t0 = view->t0 >= 0 ? view->t0 : t.t0;
    v.t1 = view->t1 >= 0 ? view->t1 : t.t1;
    if (v.t1 <= v.t0) {
        snprintf(err, errlen, "the window %g to %g us is empty; the trace spans %g to %g us",
                 v.t0, v.t1, t.t0, t.t1);
        rc = TIMELINE_EWINDOW;
        goto out;
    }
    for (size_t i = 0; i < t.n; i++)
        shown += view->iteration < 0 || t.spans[i].iter == view->iteration;
    if (v.title == NULL) {
        snprintf(title, sizeof title, "%s: %d IPU%s, %zu spans, %.6g \xc2\xb5s", name, t.nrows,
                 t.nrows == 1 ? "" : "s", shown, t.t1 - t.t0);
        v.title = title;
    }
    timeline_svg(&t, &v, out);
    rc = 0;
out:
    ipuof_json_free(root);
    free(t.spans);
    return rc;
}
