/* embedded_master_prog: a "training process" that runs the master inside itself
 * (pcclCreateMaster + pcclRunMaster) with SIGPIPE at its default action, as a C program that
 * never heard of SIGPIPE would. It takes pccl-master's --listen and prints the same ready line,
 * so the harness starts it like the real master; it then sleeps until it is killed, or exits 0
 * when stdin closes. Exiting by signal 13 is the bug that sigpipe_test looks for. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ccoip/master/ccoip_master.h"
#include "ccoip/net/ccoip_socket.h"
#include "pccl.h"

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_DFL);
    ccoip_socket_address_t addr;
    ccoip_parse_address("127.0.0.1", 0, &addr);
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--listen") == 0 && !ccoip_parse_address(argv[i + 1], 0, &addr)) return 2;
    pcclMasterInstance_t *m;
    if (pcclInit() != pcclSuccess || pcclCreateMaster(addr, &m) != pcclSuccess || pcclRunMaster(m) != pcclSuccess)
        return 1;
    addr.port = ccoip_master_port(m);
    char name[80];
    ccoip_format_address(&addr, name, sizeof name);
    printf("pccl-master: listening on %s\n", name);
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return 0;
}
