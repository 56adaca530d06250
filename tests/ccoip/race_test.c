/* Peers started at the same instant on one host race for p2p ports (bump allocation from 48149)
 * and for admission: 4 at once, many times; all get ports, all are admitted, none hangs. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define N 4
#define ROUNDS 12
#define T 30000

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(280);
    char line[256];
    for (int round = 0; round < ROUNDS; round++) {
        h_proc_t m, p[N];
        int port = h_start_master(&m, argv[1], NULL);
        REQUIRE(port > 0);
        for (int i = 0; i < N; i++) REQUIRE(h_start_peer(&p[i], argv[2], port, 0));
        for (int i = 0; i < N; i++) REQUIRE(h_send(&p[i], "connect"));
        bool in[N] = {false};
        int ports[N] = {0};
        int admitted = 0;
        for (int attempt = 0; attempt < 200 && admitted < N; attempt++) {
            /* Collect whoever got in; then let the accepted ones vote in the rest. */
            for (int i = 0; i < N; i++) {
                if (in[i] || !h_read_line(&p[i], line, sizeof line, 100)) continue;
                int r = -1;
                sscanf(line, "connect %d %d", &r, &ports[i]);
                CHECK_EQ_U64(r, 0);
                in[i] = true;
                admitted++;
            }
            if (admitted == N || admitted == 0) continue;
            int voters[N], nv = 0;
            for (int i = 0; i < N; i++)
                if (in[i]) voters[nv++] = i;
            for (int i = 0; i < nv; i++) REQUIRE(h_send(&p[voters[i]], "update"));
            for (int i = 0; i < nv; i++) {
                REQUIRE(h_read_line(&p[voters[i]], line, sizeof line, T));
                CHECK(strcmp(line, "update 0") == 0);
            }
        }
        CHECK_EQ_U64(admitted, N);
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++) CHECK(ports[i] != ports[j]);
        for (int i = 0; i < N; i++) {
            int g = -1;
            if (h_call(&p[i], "attrs", line, sizeof line, T) == 0) sscanf(line, "attrs %*d %d", &g);
            CHECK_EQ_U64(g, N);
        }
        for (int i = 0; i < N; i++) h_send(&p[i], "quit");
        for (int i = 0; i < N; i++) CHECK_EQ_U64(h_wait(&p[i], T), 0);
        h_kill(&m, 15);
        CHECK_EQ_U64(h_wait(&m, T), 0);
    }
    return check_exit();
}
