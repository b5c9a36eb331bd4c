/*
 * notify.c — see notify.h. Follows the reference implementation in sd_notify(3): an
 * AF_UNIX datagram to the path in $NOTIFY_SOCKET ('@' = abstract namespace).
 */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int
notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen;
    socklen_t salen;
    ssize_t n;
    int fd, rc = -1;

    if (path == NULL || path[0] == '\0')
        return 0;
    plen = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || plen >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, plen);
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0';
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    do {
        n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)strlen(state))
        rc = 1;
    close(fd);
    return rc;
}
