/*
 * tensorcmp.c — see tensorcmp.h.
 */
#include "tensorcmp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int
tensorcmp(const struct ipuof_tensor *got, const struct tensorfile *want, double *maxdiff,
          char *msg, size_t len)
{
    int same_shape = got->rank == want->rank;
    size_t n;

    for (int d = 0; same_shape && d < got->rank; d++)
        same_shape = got->dims[d] == want->dims[d];
    if (got->dtype != want->dtype || got->bytes != want->bytes || !same_shape) {
        snprintf(msg, len, "'%s' is %s of %zu bytes (rank %d), expected %s of %zu bytes (rank %d)",
                 want->name, ipuof_dtype_name(got->dtype), got->bytes, got->rank,
                 ipuof_dtype_name(want->dtype), want->bytes, want->rank);
        return -1;
    }
    if (want->dtype != IPUOF_DTYPE_FLOAT) {
        if (want->bytes > 0 && memcmp(got->data, want->data, want->bytes) != 0) {
            snprintf(msg, len, "'%s': %s values differ", want->name, ipuof_dtype_name(want->dtype));
            return -1;
        }
        return 0;
    }
    n = want->bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        double a = ((const float *)got->data)[i], b = ((const float *)want->data)[i];
        double diff = fabs(a - b);

        if ((isnan(a) && isnan(b)) || (isinf(a) && isinf(b) && (a > 0) == (b > 0)))
            continue;
        if (diff > *maxdiff)
            *maxdiff = diff;
        if (!(diff <= TENSORCMP_ATOL + TENSORCMP_RTOL * fabs(b))) {
            snprintf(msg, len, "'%s'[%zu] = %.9g, expected %.9g (|diff| %.3g > %g + %g * "
                     "|expected|)", want->name, i, a, b, diff, TENSORCMP_ATOL, TENSORCMP_RTOL);
            return -1;
        }
    }
    return 0;
}
