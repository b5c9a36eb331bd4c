/*
 * log.c — see log.h. The level is an atomic so worker threads may log while the event
 * loop reloads the configuration.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static atomic_int cur_level = LOG_LVL_INFO;
static atomic_int to_syslog;
static int journal = -1; /* -1: not yet checked */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int
log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return LOG_LVL_WARN;
    return -1;
}

const char *
log_level_name(int level)
{
    return level >= 0 && level < 4 ? level_names[level] : "?";
}

void
log_set_level(int level)
{
    atomic_store(&cur_level, level);
}

int
log_get_level(void)
{
    return atomic_load(&cur_level);
}

void
log_use_syslog(void)
{
    openlog("ipuofd", LOG_PID, LOG_DAEMON);
    atomic_store(&to_syslog, 1);
}

/* True when stderr is the journal stream systemd gave us (systemd.exec(5), $JOURNAL_STREAM). */
static int
stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long dev, ino;
    struct stat st;

    if (js == NULL || sscanf(js, "%lu:%lu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
        return 0;
    return (unsigned long)st.st_dev == dev && (unsigned long)st.st_ino == ino;
}

void
log_msg(int level, const char *fmt, ...)
{
    static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
    char msg[1024], line[1200], ts[32];
    struct timespec now;
    struct tm tm;
    va_list ap;
    int n;

    if (level > atomic_load(&cur_level))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (atomic_load(&to_syslog)) {
        syslog(prio[level], "%s", msg);
        return;
    }
    if (journal < 0)
        journal = stderr_is_journal();
    if (journal) {
        n = snprintf(line, sizeof line, "<%d>%s\n", prio[level], msg);
    } else {
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        n = snprintf(line, sizeof line, "%s.%03ldZ ipuofd[%d] %s: %s\n", ts,
                     now.tv_nsec / 1000000, (int)getpid(), level_names[level], msg);
    }
    if (n > 0) {
        size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
        ssize_t w = write(STDERR_FILENO, line, len);
        (void)w;
    }
}
