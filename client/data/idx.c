/*
 * idx.c — IDX files (the format of MNIST and Fashion-MNIST) as a dataset for the data
 * loader: an image file of unsigned bytes [N, rows, cols] and, optionally, a label file of
 * unsigned bytes [N], each plain or gzip-compressed.
 *
 * Both files are read through zlib's gz* layer, which passes a plain file through as it is
 * and inflates a gzip one, so the two are told apart by content. Everything is checked
 * before an item is served: the magic numbers, equal counts, caps, and a length that
 * matches the header exactly. Only the items kept (opts->limit) stay in memory, as bytes;
 * get() normalises a pixel through a 256-entry table, so the dataset is read-only once open
 * and its callbacks are safe on any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "client_internal.h"
#include "ipuof/client.h"

#define IDX_TYPE_UBYTE 0x08
#define IMAGE_DIMS 3
#define LABEL_DIMS 1
#define MAX_ITEMS (UINT32_C(1) << 28)
#define MAX_PIXELS (UINT32_C(1) << 24)
#define READ_CHUNK (1u << 30)          /* gzread() takes an unsigned and returns an int */
#define SKIP_CHUNK 65536
#define GZ_BUFFER (128u * 1024)

#define ERRTEXT(e) strerror_r((e), (char[128]){0}, 128)

struct ipuof_idx_dataset {
    size_t n;                          /* items kept */
    size_t pixels;                     /* rows * cols */
    uint8_t *images;                   /* owned: n * pixels bytes */
    uint8_t *labels;                   /* owned: n bytes; NULL without a label file */
    float lut[256];                    /* pixel value -> normalised value */
    struct ipuof_field fields[2];
    size_t n_fields;
};

/* One IDX file being read. */
struct idx_file {
    const char *path;                  /* borrowed, for messages */
    const char *what;                  /* "image" or "label" */
    gzFile gz;                         /* NULL when not open */
};

/* ---- reading the files ---------------------------------------------------------------- */

/* Opens f->path for reading through zlib. Returns IPUOF_OK, or IPUOF_E_NOTFOUND / _IO /
 * _INVAL / _NOMEM with a sentence. */
static int
file_open(struct idx_file *f, char *errbuf, size_t errlen)
{
    struct stat st;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    int rc = IPUOF_OK;

    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = ipuof_errbuf_set(errbuf, errlen, errno == ENOENT ? IPUOF_E_NOTFOUND : IPUOF_E_IO,
                              "cannot open IDX %s file '%s': %s", f->what, f->path, ERRTEXT(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                              "IDX %s file '%s' is not a regular file", f->what, f->path);
        goto out;
    }
    f->gz = gzdopen(fd, "rb");
    if (f->gz == NULL) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                              "out of memory opening IDX %s file '%s'", f->what, f->path);
        goto out;
    }
    fd = -1; /* the gz handle owns it now */
    gzbuffer(f->gz, GZ_BUFFER);
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

static void
file_close(struct idx_file *f)
{
    if (f->gz != NULL)
        gzclose(f->gz);
    f->gz = NULL;
}

/*
 * Reads up to len bytes into buf; *got receives how many arrived (fewer only at the end of
 * the data, a truncated compressed stream included: the caller reports the shortfall).
 * Returns IPUOF_OK, or IPUOF_E_IO with a sentence for a read error or corrupt data.
 */
static int
file_read(struct idx_file *f, void *buf, size_t len, size_t *got, char *errbuf, size_t errlen)
{
    *got = 0;
    while (*got < len) {
        size_t want = len - *got < READ_CHUNK ? len - *got : READ_CHUNK;
        int n = gzread(f->gz, (char *)buf + *got, (unsigned)want);

        if (n < 0) {
            int zerr = Z_OK;
            const char *msg = gzerror(f->gz, &zerr);

            if (zerr == Z_BUF_ERROR) /* the compressed stream ends early: a short read */
                return IPUOF_OK;
            if (zerr == Z_ERRNO)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_IO, "cannot read IDX %s file '%s': "
                                        "%s", f->what, f->path, ERRTEXT(errno));
            if (msg == NULL)
                msg = "unknown error";
            else if (strncmp(msg, "<fd:", 4) == 0 && strstr(msg, ": ") != NULL)
                msg = strstr(msg, ": ") + 2; /* zlib prefixes "<fd:N>: " */
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_IO,
                                    "IDX %s file '%s' holds corrupt compressed data (zlib: %s)",
                                    f->what, f->path, msg);
        }
        if (n == 0)
            return IPUOF_OK;
        *got += (size_t)n;
    }
    return IPUOF_OK;
}

/* 1 when the gzip stream f read from ended in its middle (zlib says Z_BUF_ERROR). */
static int
truncated_stream(struct idx_file *f)
{
    int zerr = Z_OK;

    (void)gzerror(f->gz, &zerr);
    return zerr == Z_BUF_ERROR;
}

/* Static name of an IDX element type code. */
static const char *
idx_type_name(unsigned type)
{
    switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "16-bit integer";
    case 0x0C: return "32-bit integer";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return NULL;
    }
}

/*
 * Reads f's header, which must be that of an unsigned-byte IDX file of ndims dimensions,
 * into dims[0..ndims). Returns IPUOF_OK, or IPUOF_E_INVAL (not such a file, too short),
 * IPUOF_E_UNSUPPORTED (another element type) or IPUOF_E_IO, with a sentence.
 */
static int
read_header(struct idx_file *f, unsigned ndims, uint32_t *dims, char *errbuf, size_t errlen)
{
    uint32_t want = (IDX_TYPE_UBYTE << 8) | ndims;
    unsigned char head[4 + 4 * IMAGE_DIMS];
    size_t len = 4 + 4 * (size_t)ndims;
    size_t got;
    uint32_t magic;
    unsigned type, nd;
    const char *tname;
    int rc;

    rc = file_read(f, head, 4, &got, errbuf, errlen);
    if (rc != IPUOF_OK)
        return rc;
    if (got < 4)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "IDX %s file '%s' is %s: it holds %zu bytes, too few for the 4-byte "
                "magic number",
                f->what, f->path, got == 0 ? "empty" : "truncated", got);
    magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 |
            head[3];
    type = (magic >> 8) & 0xff;
    nd = magic & 0xff;
    tname = idx_type_name(type);
    if ((magic >> 16) != 0 || tname == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "'%s' is not an IDX %s file: its magic number is 0x%08x, not "
                                "0x%08x (unsigned bytes, %u dimension%s)",
                                f->path, f->what, (unsigned)magic, (unsigned)want, ndims,
                                ndims == 1 ? "" : "s");
    if (nd != ndims)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "'%s' is an IDX file of %u dimension%s (magic 0x%08x) but an IDX %s "
                "file has %u (magic 0x%08x)%s",
                f->path, nd, nd == 1 ? "" : "s", (unsigned)magic, f->what, ndims,
                (unsigned)want,
                nd == LABEL_DIMS ? "; is it a label file?"
                : nd == IMAGE_DIMS ? "; is it an image file?" : "");
    if (type != IDX_TYPE_UBYTE)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_UNSUPPORTED,
                                "IDX %s file '%s' holds %s elements (magic 0x%08x); only unsigned "
                                "bytes (0x%08x) are supported",
                                f->what, f->path, tname, (unsigned)magic, (unsigned)want);
    rc = file_read(f, head + 4, len - 4, &got, errbuf, errlen);
    if (rc != IPUOF_OK)
        return rc;
    if (got < len - 4)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "IDX %s file '%s' is truncated: it ends inside its %zu-byte header",
                                f->what, f->path, len);
    for (unsigned d = 0; d < ndims; d++) {
        const unsigned char *p = head + 4 + 4 * d;

        dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    return IPUOF_OK;
}

/*
 * Reads the data of an IDX file whose header announced n items of item bytes: the first
 * keep items into buf, the rest read and thrown away, then checks that nothing follows.
 * Returns IPUOF_OK, or IPUOF_E_INVAL (truncated, extra bytes) / IPUOF_E_IO with a sentence.
 */
static int
read_items(struct idx_file *f, void *buf, size_t keep, size_t n, size_t item, char *errbuf,
           size_t errlen)
{
    unsigned char scratch[SKIP_CHUNK];
    uint64_t total = (uint64_t)n * item;
    uint64_t seen = 0;
    size_t got;
    int ended;
    int rc;

    rc = file_read(f, buf, keep * item, &got, errbuf, errlen);
    if (rc != IPUOF_OK)
        return rc;
    seen = got;
    ended = seen < (uint64_t)keep * item;
    while (!ended && seen < total) {
        uint64_t left = total - seen;
        size_t want = left < sizeof scratch ? (size_t)left : sizeof scratch;

        rc = file_read(f, scratch, want, &got, errbuf, errlen);
        if (rc != IPUOF_OK)
            return rc;
        seen += got;
        ended = got < want;
    }
    if (seen < total)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "IDX %s file '%s' is truncated: its header announces %zu %ss of %zu "
                "byte%s (%llu bytes of data) but only %llu bytes follow it",
                f->what, f->path, n, f->what, item, item == 1 ? "" : "s",
                (unsigned long long)total, (unsigned long long)seen);
    rc = file_read(f, scratch, 1, &got, errbuf, errlen);
    if (rc != IPUOF_OK)
        return rc;
    if (got == 0 && truncated_stream(f))
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "IDX %s file '%s' is truncated: its compressed data ends early",
                                f->what, f->path);
    if (got != 0)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "IDX %s file '%s' has bytes after the %zu %ss its header announces "
                                "(%llu bytes of data); the header's count is wrong or the file is "
                                "not an IDX %s file",
                                f->what, f->path, n, f->what, (unsigned long long)total, f->what);
    return IPUOF_OK;
}

/* ---- the dataset ------------------------------------------------------------------------ */

static size_t
idx_length(void *ds)
{
    return ((const ipuof_idx_dataset *)ds)->n;
}

static int
idx_get(void *ds, size_t index, void *const *outs, void *user)
{
    const ipuof_idx_dataset *d = ds;
    const uint8_t *src;
    float *img = outs[0];

    (void)user;
    if (index >= d->n)
        return IPUOF_E_INVAL;
    src = d->images + index * d->pixels;
    for (size_t i = 0; i < d->pixels; i++)
        img[i] = d->lut[src[i]];
    if (d->labels != NULL) {
        int64_t label = d->labels[index];

        memcpy(outs[1], &label, sizeof label);
    }
    return IPUOF_OK;
}

static const struct ipuof_dataset_ops idx_ops = {
    .length = idx_length,
    .get = idx_get,
    .errmsg = NULL,
};

void
ipuof_idx_dataset_describe(ipuof_idx_dataset *d, struct ipuof_dataset *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (d == NULL)
        return;
    out->ops = &idx_ops;
    out->ds = d;
    out->fields = d->fields;
    out->n_fields = d->n_fields;
}

size_t
ipuof_idx_dataset_length(const ipuof_idx_dataset *d)
{
    return d != NULL ? d->n : 0;
}

void
ipuof_idx_dataset_free(ipuof_idx_dataset *d)
{
    if (d == NULL)
        return;
    free(d->images);
    free(d->labels);
    free(d);
}

/* Fills d's normalisation table and field descriptions for images of rows x cols. */
static void
describe_items(ipuof_idx_dataset *d, uint32_t rows, uint32_t cols, float mean, float std,
               int has_labels)
{
    for (int x = 0; x < 256; x++)
        d->lut[x] = ((float)x / 255.0f - mean) / std;
    d->fields[0].name = "image";
    d->fields[0].dtype = IPUOF_DTYPE_FLOAT;
    d->fields[0].rank = 3;
    d->fields[0].dims[0] = 1;
    d->fields[0].dims[1] = rows;
    d->fields[0].dims[2] = cols;
    d->fields[1].name = "label";
    d->fields[1].dtype = IPUOF_DTYPE_INT64;
    d->fields[1].rank = 0;
    d->n_fields = has_labels ? 2 : 1;
}

int
ipuof_idx_dataset_open(const char *images_path, const char *labels_path,
                       const struct ipuof_idx_opts *opts, ipuof_idx_dataset **out,
                       char *errbuf, size_t errlen)
{
    static const struct ipuof_idx_opts defaults;
    struct idx_file img = {images_path, "image", NULL};
    struct idx_file lab = {labels_path, "label", NULL};
    ipuof_idx_dataset *d = NULL;
    uint32_t idims[IMAGE_DIMS], ldims[LABEL_DIMS];
    float mean, std;
    size_t n, keep;
    int rc;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (out != NULL)
        *out = NULL;
    if (out == NULL || images_path == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "ipuof_idx_dataset_open() needs an image file name and a place for "
                                "the dataset (%s is NULL)", out == NULL ? "out" : "images_path");
    if (opts == NULL)
        opts = &defaults;
    mean = opts->mean;
    std = opts->std != 0.0f ? opts->std : 1.0f;
    if (!isfinite(mean) || !isfinite(std))
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "the normalisation needs a finite mean and std, not %g and %g",
                                (double)mean, (double)std);

    rc = file_open(&img, errbuf, errlen);
    if (rc != IPUOF_OK)
        goto out;
    rc = read_header(&img, IMAGE_DIMS, idims, errbuf, errlen);
    if (rc != IPUOF_OK)
        goto out;
    if (idims[0] == 0 || idims[0] > MAX_ITEMS) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                              "IDX image file '%s' announces %lu images; 1 to %lu are accepted",
                              images_path, (unsigned long)idims[0], (unsigned long)MAX_ITEMS);
        goto out;
    }
    if (idims[1] == 0 || idims[2] == 0 || (uint64_t)idims[1] * idims[2] > MAX_PIXELS) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                              "IDX image file '%s' announces images of %lu x %lu pixels; 1 to %lu "
                              "pixels are accepted",
                              images_path, (unsigned long)idims[1], (unsigned long)idims[2],
                              (unsigned long)MAX_PIXELS);
        goto out;
    }
    n = idims[0];
    if (labels_path != NULL) {
        rc = file_open(&lab, errbuf, errlen);
        if (rc != IPUOF_OK)
            goto out;
        rc = read_header(&lab, LABEL_DIMS, ldims, errbuf, errlen);
        if (rc != IPUOF_OK)
            goto out;
        if (ldims[0] != idims[0]) {
            rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                  "IDX image file '%s' holds %lu images but label file '%s' holds "
                                  "%lu labels; they must hold the same number",
                                  images_path, (unsigned long)idims[0], labels_path,
                                  (unsigned long)ldims[0]);
            goto out;
        }
    }
    keep = opts->limit != 0 && opts->limit < n ? opts->limit : n;

    d = calloc(1, sizeof *d);
    if (d == NULL) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for the dataset");
        goto out;
    }
    d->n = keep;
    d->pixels = (size_t)idims[1] * idims[2];
    d->images = malloc(keep * d->pixels);
    d->labels = labels_path != NULL ? malloc(keep) : NULL;
    if (d->images == NULL || (labels_path != NULL && d->labels == NULL)) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                              "out of memory for %zu images of %zu pixels from '%s'", keep,
                              d->pixels, images_path);
        goto out;
    }
    rc = read_items(&img, d->images, keep, n, d->pixels, errbuf, errlen);
    if (rc != IPUOF_OK)
        goto out;
    if (labels_path != NULL) {
        rc = read_items(&lab, d->labels, keep, n, 1, errbuf, errlen);
        if (rc != IPUOF_OK)
            goto out;
    }
    describe_items(d, idims[1], idims[2], mean, std, labels_path != NULL);
    *out = d;
    d = NULL;
out:
    file_close(&img);
    file_close(&lab);
    ipuof_idx_dataset_free(d);
    return rc;
}
