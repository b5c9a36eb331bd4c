/*
 * main.c — ipuofd's entry point: flags, configuration, detaching, readiness, exit status.
 * The only file that may exit the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "config.h"
#include "faults.h"
#include "frame.h"
#include "log.h"
#include "notify.h"
#include "server.h"
#include "sim.h"

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ipuofd [options]\n"
            "  --listen HOST:PORT     address to serve clients on (default 127.0.0.1:50052;\n"
            "                         port 0 picks a free port)\n"
            "  --port-file PATH       write the bound TCP port to PATH once listening\n"
            "  --ipus N               number of simulated IPUs (default 4)\n"
            "  --ipu-memory SIZE      memory per IPU, bytes or with KiB/MiB/GiB (default 900MiB)\n"
            "  --tiles N              tiles per IPU (default 1472)\n"
            "  --ipu-type TYPE        gc200 or bow: the simulated clock's device (default gc200)\n"
            "  --admin-socket PATH    Unix socket granting admin rights (reset)\n"
            "  --config PATH          INI configuration file (see ipuofd.conf(5))\n"
            "  --foreground           stay in the foreground and log to stderr\n"
            "  --log-level LEVEL      error, warn, info or debug (default info)\n"
            "  --check-config         validate the configuration and exit (0 or 78)\n"
            "  --help, --version\n");
}

/* Detaches from the terminal; the parent exits with the child's start-up status. */
static int
detach(int *report_fd)
{
    int fds[2];
    pid_t pid;
    char status = 1;

    if (pipe(fds) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        close(fds[1]);
        if (read(fds[0], &status, 1) != 1)
            status = EX_OSERR;
        _exit(status);
    }
    close(fds[0]);
    if (setsid() < 0)
        return -1;
    *report_fd = fds[1];
    return 0;
}

static void
report_start(int *report_fd, char status)
{
    int devnull;

    if (*report_fd < 0)
        return;
    if (status == 0) {
        devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
            if (devnull > STDERR_FILENO)
                close(devnull);
        }
        log_use_syslog();
        if (chdir("/") < 0)
            log_warn("cannot change directory to /: %s", strerror(errno));
    }
    if (write(*report_fd, &status, 1) != 1)
        log_warn("cannot report start-up status to the parent process");
    close(*report_fd);
    *report_fd = -1;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"port-file", required_argument, NULL, 'p'},
        {"ipus", required_argument, NULL, 'n'},
        {"ipu-memory", required_argument, NULL, 'm'},
        {"tiles", required_argument, NULL, 't'},
        {"ipu-type", required_argument, NULL, 'T'},
        {"admin-socket", required_argument, NULL, 'a'},
        {"config", required_argument, NULL, 'c'},
        {"foreground", no_argument, NULL, 'f'},
        {"log-level", required_argument, NULL, 'L'},
        {"check-config", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static struct srv s; /* large; zero-initialised */
    const char *port_file = NULL;
    int foreground = 0, check_only = 0, report_fd = -1, opt;
    char err[1024];
    struct sim_err serr;

    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        struct srv_override *o = s.nov < SRV_MAX_OVERRIDES ? &s.ov[s.nov] : NULL;
        const char *section = "server", *key = NULL;

        switch (opt) {
        case 'l': key = "listen"; break;
        case 'a': key = "admin_socket"; break;
        case 'n': section = "devices"; key = "ipus"; break;
        case 'm': section = "devices"; key = "ipu_memory"; break;
        case 't': section = "devices"; key = "tiles"; break;
        case 'T': section = "cost"; key = "ipu_type"; break;
        case 'L': section = "log"; key = "level"; break;
        case 'p': port_file = optarg; break;
        case 'c': s.config_path = optarg; break;
        case 'f': foreground = 1; break;
        case 'C': check_only = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ipuofd %s (protocol %d)\nsimulator kernels: %s\n", IPUOF_VERSION_STR,
                         IPUOF_PROTOCOL_VERSION, sim_isa_describe(err, sizeof err));
                  return 0;
        default: usage(stderr); return EX_USAGE;
        }
        if (key != NULL) {
            if (o == NULL) {
                fprintf(stderr, "ipuofd: too many options\n");
                return EX_USAGE;
            }
            o->section = section;
            o->key = key;
            o->value = optarg;
            s.nov++;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ipuofd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EX_USAGE;
    }
    if (srv_build_config(&s, &s.cfg, err, sizeof err) < 0) {
        fprintf(stderr, "ipuofd: %s\n", err);
        return EX_CONFIG;
    }
    if (sim_isa_check(&serr) != 0) {    /* IPUOF_SIM_ISA (sim/kernels/hot.h) */
        fprintf(stderr, "ipuofd: %s\n", serr.msg);
        return EX_CONFIG;
    }
    faults_init(&s.faults);   /* [faults] inject, IPUOF_FAULTS (daemon/state/faults.h): --check too */
    {   /* the Pod, for a fault's --host: this host's name and its peers' */
        struct cfg_pod_peer peers[CFG_POD_MAX_PEERS];
        const char *names[CFG_POD_MAX_PEERS];
        int n = s.cfg.pod_peers[0] != '\0' ? cfg_pod_peers(&s.cfg, peers, err, sizeof err) : 0;
        for (int i = 0; i < n; i++)
            names[i] = peers[i].name;
        faults_set_pod(&s.faults, n > 0 ? s.cfg.pod_name : "", names, n > 0 ? (unsigned)n : 0);
    }
    if (faults_load(&s.faults, s.cfg.faults, getenv("IPUOF_FAULTS"), s.cfg.ipus, srv_now_ms(),
                    err, sizeof err) < 0) {
        fprintf(stderr, "ipuofd: %s\n", err);
        return EX_CONFIG;
    }
    if (check_only) {
        printf("ipuofd: configuration %s is valid\n", s.config_path ? s.config_path : "(defaults)");
        return 0;
    }
    log_set_level(s.cfg.log_level);
    if (!foreground && detach(&report_fd) < 0) {
        fprintf(stderr, "ipuofd: cannot detach: %s\n", strerror(errno));
        return EX_OSERR;
    }
    if (srv_init(&s, err, sizeof err) < 0) {
        log_error("%s", err);
        report_start(&report_fd, EX_OSERR);
        srv_cleanup(&s);
        return EX_OSERR;
    }
    if (port_file != NULL && srv_write_port_file(&s, port_file, err, sizeof err) < 0) {
        log_error("%s", err);
        report_start(&report_fd, EX_OSERR);
        srv_cleanup(&s);
        return EX_OSERR;
    }
    log_info("ipuofd %s serving %u IPU%s (%llu MiB, %u tiles each) on %s, port %d%s%s",
             IPUOF_VERSION_STR, s.cfg.ipus, s.cfg.ipus == 1 ? "" : "s",
             (unsigned long long)(s.cfg.ipu_memory >> 20), s.cfg.tiles, s.cfg.listen,
             s.bound_port, s.cfg.admin_socket[0] ? ", admin socket " : "", s.cfg.admin_socket);
    log_info("simulator kernels: %s", sim_isa_describe(err, sizeof err));
    report_start(&report_fd, 0);
    {
        char st[160];
        snprintf(st, sizeof st, "READY=1\nSTATUS=serving %u IPUs on port %d", s.cfg.ipus,
                 s.bound_port);
        notify_send(st);
    }
    srv_run(&s);
    log_info("ipuofd stopped");
    srv_cleanup(&s);
    return 0;
}
