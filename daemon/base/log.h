/*
 * log.h — leveled, one-line-per-event logging for ipuofd.
 *
 * Under systemd (JOURNAL_STREAM names our stderr) lines carry "<N>" syslog priority
 * prefixes that journald understands; in a terminal they carry a UTC timestamp; once the
 * daemon has detached they go to syslog(3). Thread-safe: each line is one write.
 */
#ifndef IPUOFD_LOG_H
#define IPUOFD_LOG_H

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* Parses "error", "warn", "info" or "debug"; returns -1 for anything else. */
int log_level_parse(const char *s);
const char *log_level_name(int level);

void log_set_level(int level);
int log_get_level(void);
/* Sends further lines to syslog (after detaching from the terminal). */
void log_use_syslog(void);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
