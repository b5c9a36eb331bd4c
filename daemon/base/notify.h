/*
 * notify.h — systemd readiness notification (sd_notify(3) protocol) without libsystemd:
 * one datagram to $NOTIFY_SOCKET. A no-op when not run under systemd.
 */
#ifndef IPUOFD_NOTIFY_H
#define IPUOFD_NOTIFY_H

/* Sends state ("READY=1", "STOPPING=1", ...). Returns 1 when sent, 0 when there is no
 * $NOTIFY_SOCKET, -1 on error. */
int notify_send(const char *state);

#endif
