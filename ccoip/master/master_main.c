/* pccl-master: the master as a program; a thin wrapper over pcclCreateMaster and friends.
 * Prints "pccl-master: listening on HOST:PORT" on stdout once it accepts connections, and
 * stops cleanly on SIGINT or SIGTERM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master.h"
#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_secret.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"
#include "pccl.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: pccl-master [--listen HOST:PORT] [--secret-file PATH] [--status [HOST]:PORT]\n"
            "                   [--log-level LEVEL] [--heartbeat-timeout-ms MS] [--handshake-timeout-ms MS]\n"
            "                   [--encrypt] [--print-status-token] [--admit-tries N] [--probe-ms MS]\n"
            "                   [--relay HOST:PORT]\n"
            "                   [--fingerprint check|log|require|off] [--help]\n"
            "  --listen HOST:PORT        address to listen on (default 0.0.0.0:48148; port 0 picks one)\n"
            "  --secret-file PATH        every connection must prove this run secret (the file's bytes, 16 or\n"
            "                            more; refused when group or others may read it); peers set\n"
            "                            PCCL_SECRET_FILE to the same secret. Without it the run is open.\n"
            "  --status [HOST]:PORT      serve the status page (Prometheus text) at http://HOST:PORT/metrics\n"
            "                            (HOST defaults to 127.0.0.1, PORT to 48147); beyond loopback it needs\n"
            "                            --secret-file and answers only requests with the bearer token\n"
            "  --print-status-token      print that token (from --secret-file) and exit\n"
            "  --encrypt                 every peer must encrypt its p2p data links (PCCL_ENCRYPT=1; needs\n"
            "                            --secret-file)\n"
            "  --log-level LEVEL         error, warn, info or debug (default: PCCL_LOG_LEVEL, else info)\n"
            "  --heartbeat-timeout-ms    drop a peer silent for this long (default 10000)\n"
            "  --handshake-timeout-ms    close connections that do not join within this (default 5000)\n"
            "  --admit-tries N           refuse a newcomer the peers could not link with in N admission rounds\n"
            "                            (default 3; each failed round runs again at once without it)\n"
            "  --probe-ms MS             connect back to a joining peer's p2p port within MS to learn whether\n"
            "                            others can dial it (default 2000; 0: no probe, every peer reachable)\n"
            "  --relay HOST:PORT         a pccl-relay: ring edges between two peers nobody can dial (behind NAT\n"
            "                            or firewalls) run through it (docs/nat.md)\n"
            "  --rejoin-window-s S       take back members that lost the master for S seconds after the start\n"
            "                            or after dropping them (default 60; 0: never)\n"
            "  --fingerprint MODE        peers' determinism fingerprints (docs/fingerprint.md): check refuses\n"
            "                            one that differs from the run's (default), log admits it with a\n"
            "                            warning, require also refuses peers that show none, off ignores them\n");
}

static int parse_ms(const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0 || v > 86400000ull) return 0;
    *out = v;
    return 1;
}

/* Seconds (0 allowed) into milliseconds. */
static int parse_seconds(const char *s, uint64_t *out_ms) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || v > 86400ull) return 0;
    *out_ms = v * 1000;
    return 1;
}

/* A count of 1..100. */
static int parse_count(const char *s, uint32_t *out) {
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || v == 0 || v > 100) return 0;
    *out = (uint32_t) v;
    return 1;
}

static int parse_fp_mode(const char *s, uint8_t *out) {
    static const char *const names[] = {"check", "log", "require", "off"}; /* ccoip_fp_mode_t order */
    for (uint8_t i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) return *out = i, 1;
    return 0;
}

/* What the command line asks for. */
typedef struct args_t {
    ccoip_socket_address_t addr, status_addr;
    bool want_status, print_token, encrypt;
    const char *secret_file;
    ccoip_master_options_t opt;
} args_t;

/* One option and its value (v may be NULL); false when it is not one we know, or v is bad. */
static bool parse_option(args_t *a, const char *opt, const char *v) {
    if (strcmp(opt, "--print-status-token") == 0) return a->print_token = true;
    if (strcmp(opt, "--encrypt") == 0) return a->encrypt = true;
    if (v == NULL) return false;
    char local[80];
    if (strcmp(opt, "--status") == 0 && (v[0] == ':' || strspn(v, "0123456789") == strlen(v))) {
        snprintf(local, sizeof local, "127.0.0.1%s%s", v[0] == ':' ? "" : ":", v);
        v = local;
    }
    if (strcmp(opt, "--secret-file") == 0) return (a->secret_file = v) != NULL;
    if (strcmp(opt, "--listen") == 0) return ccoip_parse_address(v, 48148, &a->addr);
    if (strcmp(opt, "--status") == 0) return a->want_status = ccoip_parse_address(v, 48147, &a->status_addr);
    if (strcmp(opt, "--log-level") == 0) {
        int l = log_parse_level(v);
        if (l == LOG_PARSE_FAILED) return false;
        log_set_level((log_level_t) l);
        return true;
    }
    if (strcmp(opt, "--heartbeat-timeout-ms") == 0) return parse_ms(v, &a->opt.heartbeat_timeout_ms);
    if (strcmp(opt, "--handshake-timeout-ms") == 0) return parse_ms(v, &a->opt.handshake_timeout_ms);
    if (strcmp(opt, "--rejoin-window-s") == 0) return parse_seconds(v, &a->opt.rejoin_window_ms);
    if (strcmp(opt, "--admit-tries") == 0) return parse_count(v, &a->opt.admit_tries);
    if (strcmp(opt, "--relay") == 0) return v != NULL && ccoip_parse_address(v, 48146, &a->opt.relay) && a->opt.relay.port != 0;
    if (strcmp(opt, "--probe-ms") == 0) return v != NULL && (strcmp(v, "0") == 0 ? (a->opt.probe_timeout_ms = 0, true)
                                                                                  : parse_ms(v, &a->opt.probe_timeout_ms));
    if (strcmp(opt, "--fingerprint") == 0) return parse_fp_mode(v, &a->opt.fingerprint_mode);
    return false;
}

/* -1: go on; else the exit status (--help, a bad argument). */
static int parse_args(int argc, char **argv, args_t *a) {
    memset(a, 0, sizeof *a);
    ccoip_parse_address("0.0.0.0", 48148, &a->addr);
    ccoip_master_default_options(&a->opt);
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        bool flag = strcmp(opt, "--print-status-token") == 0 || strcmp(opt, "--encrypt") == 0;
        if (!parse_option(a, opt, flag ? NULL : v)) {
            fprintf(stderr, "pccl-master: bad argument %s%s%s\n", opt, v && !flag ? " " : "", v && !flag ? v : "");
            usage(stderr);
            return 2;
        }
        i += !flag; /* every other option takes a value */
    }
    if (a->encrypt && a->secret_file == NULL) {
        fprintf(stderr, "pccl-master: --encrypt needs --secret-file (the keys come from the run secret)\n");
        return 2;
    }
    if (a->print_token && a->secret_file == NULL) {
        fprintf(stderr, "pccl-master: --print-status-token needs --secret-file\n");
        return 2;
    }
    return -1;
}

/* Runs the master until SIGINT or SIGTERM; the exit status. */
static int serve(args_t *a, ccoip_auth_key_t *key) {
    ccoip_raise_fd_limit();
    ccoip_os_ignore_sigpipe(); /* log lines into a closed pipe must not end the run */
    ccoip_os_block_termination_signals(); /* before any thread starts: they inherit the mask */
    pcclInit();
    pcclMasterInstance_t *m;
    if (pcclCreateMaster(a->addr, &m) != pcclSuccess) return 1;
    ccoip_master_set_options(m, &a->opt);
    if (a->secret_file != NULL) {
        ccoip_master_set_key(m, key);
        ccoip_master_set_encrypt(m, a->encrypt);
        memset(key, 0, sizeof *key);
    }
    if ((a->want_status && !ccoip_master_serve_status(m, a->status_addr)) || pcclRunMaster(m) != pcclSuccess) {
        pcclDestroyMaster(m);
        return 1;
    }
    a->addr.port = ccoip_master_port(m);
    char name[80];
    ccoip_format_address(&a->addr, name, sizeof name);
    printf("pccl-master: listening on %s\n", name);
    if (a->want_status) {
        a->status_addr.port = ccoip_master_status_port(m);
        ccoip_format_address(&a->status_addr, name, sizeof name);
        printf("pccl-master: status on http://%s/metrics\n", name);
    }
    fflush(stdout);
    int sig = ccoip_os_wait_termination_signal();
    LOG_INFO("ccoip-master", "signal %d: shutting down", sig);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return 0;
}

int main(int argc, char **argv) {
    if (getenv("PCCL_LOG_LEVEL") == NULL) log_set_level(LOG_LEVEL_INFO);
    args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    ccoip_auth_key_t key;
    if (a.secret_file != NULL && (!ccoip_auth_init() || !ccoip_secret_load_key(a.secret_file, &key))) return 1;
    if (a.print_token) {
        char token[65];
        ccoip_auth_status_token(&key, token);
        printf("%s\n", token);
        return 0;
    }
    return serve(&a, &key);
}
