/* ccoip_master_shared.c: the master's side of pcclSynchronizeSharedState. No I/O: answers go out
 * through st->send, kicks through st->machine.reject.
 *
 * A sync is a collective of the accepted members of one peer group. When every member has sent
 * C2M_SHARED_STATE_SYNC, the master checks revisions and tensor sets, elects the most popular
 * content of every tensor among the candidates, and tells each member what to fetch from whom
 * (M2C_SHARED_STATE_RESULT; spreading the bytes over every peer that holds the content) and whom
 * to serve. Members then report C2M_SHARED_STATE_DONE; when all have, everyone gets
 * M2C_SHARED_STATE_DONE, so that a distributor keeps serving until every receiver is through.
 * Outcomes are per peer: a receiver whose distributor died fails, the others succeed.
 *
 * The revision rule (docs/shared-state.md), PCCL's: R is the highest revision that a current
 * member of the group has synced successfully (none when no member has synced yet). The sync's
 * revision E is R + 1, or, without R, the highest revision given by a peer that may send. Nobody
 * may give more than E. A peer below E is behind (a newcomer, one whose last sync failed, one
 * that did not count): it is no candidate, receives every tensor that differs, and is dragged
 * along: every successful peer ends at revision E. PCCL_STRICT=revision (on the master) adds
 * ours: a peer that has synced before must give its last revision + 1.
 *
 * The strategy rule, PCCL's: when one member enforces the popular content, every member must;
 * a member of another strategy in such a sync is kicked (CCOIP_SS_MIXED). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_shared.h"
#include "ccoip/master/ccoip_master_reach.h"
#include "log/log.h"

#define MOD "ccoip-master"

enum { SS_IDLE = 0, SS_WAITING = 1, SS_ANSWERED = 2, SS_DONE = 3 };
enum { STRAT_POPULAR = 0, STRAT_RECEIVE_ONLY = 1, STRAT_SEND_ONLY = 2 };

struct ccoip_mss_t {
    uint8_t phase;
    ccoip_ss_sync_t req;    /* deep copy, tensors sorted by name */
    const char *duplicate;  /* a name given twice (points into req), or NULL */
    uint8_t status;         /* the answer given (ccoip_ss_status_t) */
    uint64_t adopt;         /* the revision it holds after a successful sync */
    bool reported_ok;
    bool has_rev;           /* it synced successfully before, at last_rev */
    uint64_t last_rev;
};

static const uint8_t dtype_bytes[12] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};

static uint64_t tensor_bytes(const ccoip_ss_tensor_t *t) { return t->count * dtype_bytes[t->dtype % 12]; }

static bool is_member(const ccoip_mclient_t *c, uint32_t group) {
    return c->phase == CCOIP_MPHASE_ACCEPTED && !c->dropped && c->peer_group == group;
}

static uint8_t phase_of(const ccoip_mclient_t *c) { return c->ss == NULL ? SS_IDLE : c->ss->phase; }

static void free_req(ccoip_ss_sync_t *r) {
    for (uint32_t i = 0; i < r->count; i++) free(r->tensors[i].name);
    free(r->tensors);
    r->tensors = NULL;
    r->count = 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ccoip_ss_tensor_t *) a)->name, ((const ccoip_ss_tensor_t *) b)->name);
}

/* A deep copy of the request (the packet is freed after the callback), sorted by name. */
static bool copy_req(ccoip_mss_t *s, const ccoip_ss_sync_t *in) {
    s->req = *in;
    s->req.tensors = NULL;
    s->req.count = 0;
    s->duplicate = NULL;
    if (in->count == 0) return true;
    s->req.tensors = calloc(in->count, sizeof *s->req.tensors);
    if (s->req.tensors == NULL) return false;
    for (uint32_t i = 0; i < in->count; i++) {
        s->req.tensors[i] = in->tensors[i];
        s->req.tensors[i].name = strdup(in->tensors[i].name);
        s->req.count = i + 1;
        if (s->req.tensors[i].name == NULL) return false;
    }
    qsort(s->req.tensors, s->req.count, sizeof *s->req.tensors, by_name);
    for (uint32_t i = 1; i < s->req.count && s->duplicate == NULL; i++)
        if (strcmp(s->req.tensors[i - 1].name, s->req.tensors[i].name) == 0) s->duplicate = s->req.tensors[i].name;
    return true;
}

/* The first tensor in which a's set differs from b's (name, dtype, count or the inequality
 * flag), or NULL when they are the same. Both are sorted by name. */
static const char *layout_diff(const ccoip_ss_sync_t *a, const ccoip_ss_sync_t *b) {
    uint32_t i = 0, k = 0;
    while (i < a->count && k < b->count) {
        const ccoip_ss_tensor_t *x = &a->tensors[i], *y = &b->tensors[k];
        int c = strcmp(x->name, y->name);
        if (c != 0) return c < 0 ? x->name : y->name;
        if (x->dtype != y->dtype || x->count != y->count || x->allow_inequality != y->allow_inequality) return x->name;
        i++;
        k++;
    }
    if (i < a->count) return a->tensors[i].name;
    if (k < b->count) return b->tensors[k].name;
    return NULL;
}

/* FNV-1a over the layout: groups equal layouts cheaply before the exact comparison. */
static uint64_t layout_print(const ccoip_ss_sync_t *r) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < r->count; i++) {
        const ccoip_ss_tensor_t *t = &r->tensors[i];
        for (const char *p = t->name; *p; p++) h = (h ^ (uint8_t) *p) * 1099511628211ull;
        h = (h ^ 0xffu) * 1099511628211ull;
        h = (h ^ t->dtype) * 1099511628211ull;
        h = (h ^ t->count) * 1099511628211ull;
        h = (h ^ t->allow_inequality) * 1099511628211ull;
    }
    return h;
}

static void send_to(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    if (!st->shutting_down) st->send(st->ctx, c, p);
}

/* Per member, while electing. */
typedef struct member_t {
    ccoip_mclient_t *c;
    ccoip_mss_t *s;
    uint8_t status;
    uint64_t expected;
    const char *detail;
    bool candidate;
    uint64_t load; /* bytes it is asked to serve */
    ccoip_ss_fetch_t *fetch;
    uint32_t nfetch;
    ccoip_ss_client_t *serve;
    uint32_t nserve;
    ccoip_ss_src_t *src; /* CCOIP_SS_MAX_SOURCES per fetch */
    ccoip_ss_source_t *sources;
    uint32_t nsources;
} member_t;

static bool same_hash(const ccoip_ss_tensor_t *a, const ccoip_ss_tensor_t *b) {
    return a->hash == b->hash && a->hash_kind == b->hash_kind;
}

static void check_revisions(member_t *m, size_t n, uint64_t *elected, bool strict) {
    bool have_r = false;
    uint64_t r_max = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].s->has_rev && (!have_r || m[i].s->last_rev > r_max)) {
            have_r = true;
            r_max = m[i].s->last_rev;
        }
    for (size_t i = 0; i < n; i++) {
        member_t *x = &m[i];
        uint64_t given = x->s->req.revision;
        if (x->status != CCOIP_SS_OK) continue;
        if (strict && x->s->has_rev && given != x->s->last_rev + 1) x->expected = x->s->last_rev + 1;
        else if (have_r && given > r_max + 1) x->expected = r_max + 1;
        else continue;
        x->status = CCOIP_SS_REVISION;
        LOG_WARN(MOD, "%s: shared-state revision %llu given, %llu expected (each sync advances it by one)",
                 x->c->name, (unsigned long long) given, (unsigned long long) x->expected);
    }
    if (have_r) {
        *elected = r_max + 1;
        return;
    }
    /* No revision yet: the highest one among the peers that may send (else among all). */
    bool any = false;
    for (int pass = 0; pass < 2 && !any; pass++)
        for (size_t i = 0; i < n; i++) {
            if (m[i].status != CCOIP_SS_OK || (pass == 0 && m[i].s->req.strategy == STRAT_RECEIVE_ONLY)) continue;
            if (!any || m[i].s->req.revision > *elected) *elected = m[i].s->req.revision;
            any = true;
        }
}

/* ENFORCE_POPULAR beside another strategy: the others are kicked (PCCL's rule). */
static void check_strategies(member_t *m, size_t n) {
    bool popular = false, other = false;
    for (size_t i = 0; i < n; i++) {
        if (m[i].status != CCOIP_SS_OK) continue;
        popular = popular || m[i].s->req.strategy == STRAT_POPULAR;
        other = other || m[i].s->req.strategy != STRAT_POPULAR;
    }
    for (size_t i = 0; i < n && popular && other; i++) {
        if (m[i].status != CCOIP_SS_OK || m[i].s->req.strategy == STRAT_POPULAR) continue;
        m[i].status = CCOIP_SS_MIXED;
        LOG_WARN(MOD, "%s: %s while another member enforces the popular content: every member must then", m[i].c->name,
                 m[i].s->req.strategy == STRAT_SEND_ONLY ? "SEND_ONLY" : "RECEIVE_ONLY");
    }
}

/* The layout most members share (ties: the earliest connected); the others get MISMATCH. */
static const ccoip_ss_sync_t *check_layouts(member_t *m, size_t n) {
    uint64_t *prints = malloc((n + 1) * sizeof *prints);
    if (prints == NULL) return NULL;
    for (size_t i = 0; i < n; i++) prints[i] = layout_print(&m[i].s->req);
    size_t best = n, best_votes = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].status != CCOIP_SS_OK) continue;
        size_t votes = 0;
        for (size_t k = 0; k < n; k++) votes += m[k].status == CCOIP_SS_OK && prints[k] == prints[i];
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    free(prints);
    if (best == n) return NULL;
    const ccoip_ss_sync_t *ref = &m[best].s->req;
    for (size_t i = 0; i < n; i++) {
        if (m[i].status != CCOIP_SS_OK) continue;
        const char *diff = layout_diff(&m[i].s->req, ref);
        if (diff == NULL) continue;
        m[i].status = CCOIP_SS_MISMATCH;
        m[i].detail = diff;
        LOG_WARN(MOD, "%s: its shared state differs from the others' in tensor \"%s\" (missing, extra, or "
                      "another dtype, count or allow_content_inequality)", m[i].c->name, diff);
    }
    return ref;
}

/* Distributor d serves receiver r, over the connection `via` (r's source entry for d) says:
 * REVERSED, d dials r (at the address d sees it at); RELAYED, d dials the relay with the token. */
static void add_serve(member_t *d, const member_t *r, const ccoip_ss_source_t *via) {
    for (uint32_t i = 0; i < d->nserve; i++)
        if (memcmp(d->serve[i].uuid.b, r->c->uuid.b, 16) == 0) return;
    ccoip_ss_client_t *c = &d->serve[d->nserve++];
    c->uuid = r->c->uuid;
    c->how = via->how;
    c->token = via->token;
    uint16_t p2p, bench;
    if (via->how == CCOIP_SS_REVERSED) ccoip_mreach_dial_for(d->c, r->c, &c->addr, &p2p, &c->ss_port, &bench);
}

/* Receiver r can dial k's shared-state listener: k is reachable, or of r's site. */
static bool dialable(const member_t *r, const member_t *k) {
    return k->c->reachable || ccoip_mreach_same_site(r->c, k->c);
}

/* How receiver r's fetch connection to holder k is made: r dials k; else k dials r (r can be
 * dialled: reachable, and not of k's site, or r could dial k); else both dial the relay, when
 * the master has one; else r dials anyway (and fails: docs/nat.md). */
static uint8_t how_to_reach(const ccoip_master_state_t *st, const member_t *r, const member_t *k) {
    if (dialable(r, k)) return CCOIP_SS_DIRECT;
    if (r->c->reachable) return CCOIP_SS_REVERSED;
    return st->opt.relay.port != 0 ? CCOIP_SS_RELAYED : CCOIP_SS_DIRECT;
}

/* The index of holder k in receiver r's sources, added when new; -1 when the table is full. */
static int source_index(ccoip_master_state_t *st, member_t *r, const member_t *k) {
    for (uint32_t i = 0; i < r->nsources; i++)
        if (memcmp(r->sources[i].uuid.b, k->c->uuid.b, 16) == 0) return (int) i;
    if (r->nsources == CCOIP_SS_MAX_DISTRIBUTORS) return -1;
    ccoip_ss_source_t *s = &r->sources[r->nsources];
    uint16_t p2p, bench;
    s->uuid = k->c->uuid;
    ccoip_mreach_dial_for(r->c, k->c, &s->addr, &p2p, &s->ss_port, &bench); /* its site's address, or the public one */
    s->how = how_to_reach(st, r, k);
    memset(&s->token, 0, sizeof s->token);
    if (s->how == CCOIP_SS_RELAYED && st->make_uuid != NULL) st->make_uuid(st->ctx, &s->token);
    return (int) r->nsources++;
}

static bool may_serve(const member_t *k, uint32_t t, const ccoip_ss_tensor_t *want) {
    return k->status == CCOIP_SS_OK && k->s->req.strategy != STRAT_RECEIVE_ONLY && same_hash(&k->s->req.tensors[t], want);
}

/* Receiver i fetches tensor t from the holders of the elected content: up to CCOIP_SS_MAX_SOURCES
 * of them, taken in the order after i (so that receivers start on different distributors), each
 * serving it an equal share in the load count; those i can dial first. A full sources table keeps
 * to the holders in it. */
static void assign_sources(ccoip_master_state_t *st, member_t *m, size_t n, size_t i, uint32_t t,
                           const ccoip_ss_tensor_t *want) {
    ccoip_ss_fetch_t *f = &m[i].fetch[m[i].nfetch];
    f->src = &m[i].src[(size_t) m[i].nfetch * CCOIP_SS_MAX_SOURCES];
    f->nsrc = 0;
    size_t who[CCOIP_SS_MAX_SOURCES];
    /* First the holders i can dial; the others (they dial i, or both the relay) only when none of
     * those holds it (docs/nat.md). */
    for (int pass = 0; pass < 2 && f->nsrc == 0; pass++)
        for (size_t step = 1; step <= n && f->nsrc < CCOIP_SS_MAX_SOURCES; step++) {
            size_t k = (i + step) % n;
            if (k == i || !may_serve(&m[k], t, want) || (pass == 0 && !dialable(&m[i], &m[k]))) continue;
            int at = source_index(st, &m[i], &m[k]);
            if (at < 0) continue;
            who[f->nsrc] = k;
            f->src[f->nsrc++].index = (uint16_t) at;
        }
    if (f->nsrc == 0) { /* the winner holds it: only a full table of 64 distributors leaves none */
        m[i].status = CCOIP_SS_FAILED;
        m[i].detail = want->name;
        LOG_WARN(MOD, "%s: no room for a distributor of tensor \"%s\" (it would fetch from over %u peers)", m[i].c->name,
                 want->name, CCOIP_SS_MAX_DISTRIBUTORS);
        return;
    }
    for (uint32_t j = 0; j < f->nsrc; j++) {
        m[who[j]].load += tensor_bytes(want) / f->nsrc + (j == 0 ? tensor_bytes(want) % f->nsrc : 0);
        add_serve(&m[who[j]], &m[i], &m[i].sources[f->src[j].index]);
    }
    f->name = want->name;
    f->hash_kind = want->hash_kind;
    f->hash = want->hash;
    m[i].nfetch++;
}

/* The election proper, after revisions and layouts: per tensor the most common content among
 * the candidates; SEND_ONLY peers without it are kicked; receivers are spread over holders. */
static void elect_tensors(ccoip_master_state_t *st, member_t *m, size_t n, const ccoip_ss_sync_t *ref) {
    uint32_t nt = ref->count;
    /* Pass 1: the elected holder of each tensor (index of a candidate holding the content). */
    size_t *winner = calloc(nt + 1, sizeof *winner);
    if (winner == NULL) return;
    for (uint32_t t = 0; t < nt; t++) {
        winner[t] = n;
        if (ref->tensors[t].allow_inequality) continue;
        size_t best_votes = 0;
        for (size_t i = 0; i < n; i++) {
            if (!m[i].candidate) continue;
            size_t votes = 0;
            for (size_t k = 0; k < n; k++)
                votes += m[k].candidate && same_hash(&m[k].s->req.tensors[t], &m[i].s->req.tensors[t]);
            if (votes > best_votes) {
                winner[t] = i;
                best_votes = votes;
            }
        }
    }
    /* Pass 2: SEND_ONLY peers must hold every elected content. */
    for (size_t i = 0; i < n; i++) {
        if (m[i].status != CCOIP_SS_OK || m[i].s->req.strategy != STRAT_SEND_ONLY) continue;
        for (uint32_t t = 0; t < nt && m[i].status == CCOIP_SS_OK; t++) {
            if (winner[t] == n || same_hash(&m[i].s->req.tensors[t], &m[winner[t]].s->req.tensors[t])) continue;
            m[i].status = CCOIP_SS_KICKED;
            m[i].detail = ref->tensors[t].name;
            m[i].candidate = false;
        }
    }
    /* Pass 3: every other peer fetches what differs, from every holder it can dial (up to a
     * cap; unreachable holders only when no other holds it: docs/nat.md). */
    for (size_t i = 0; i < n; i++) {
        if (m[i].status != CCOIP_SS_OK || m[i].s->req.strategy == STRAT_SEND_ONLY) continue;
        for (uint32_t t = 0; t < nt; t++) {
            if (winner[t] == n) continue;
            const ccoip_ss_tensor_t *want = &m[winner[t]].s->req.tensors[t];
            if (!same_hash(&m[i].s->req.tensors[t], want)) assign_sources(st, m, n, i, t, want);
        }
    }
    free(winner);
}

static void free_members(member_t *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(m[i].fetch);
        free(m[i].serve);
        free(m[i].src);
        free(m[i].sources);
    }
    free(m);
}

/* The group's members with room for their answers (fetch and serve lists); NULL when out of
 * memory (what was allocated is freed). *n: how many. */
static member_t *gather(ccoip_master_state_t *st, uint32_t group, size_t *n_out) {
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) n += is_member(st->clients[i], group);
    member_t *m = calloc(n + 1, sizeof *m);
    bool oom = m == NULL;
    size_t k = 0;
    for (size_t i = 0; i < st->nclients && !oom; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        member_t *x = &m[k++];
        x->c = c;
        x->s = c->ss;
        x->status = CCOIP_SS_OK;
        x->fetch = calloc(c->ss->req.count + 1, sizeof *x->fetch);
        x->serve = calloc(n + 1, sizeof *x->serve);
        x->src = calloc(((size_t) c->ss->req.count + 1) * CCOIP_SS_MAX_SOURCES, sizeof *x->src);
        x->sources = calloc(CCOIP_SS_MAX_DISTRIBUTORS, sizeof *x->sources);
        oom = x->fetch == NULL || x->serve == NULL || x->src == NULL || x->sources == NULL;
        if (c->ss->duplicate != NULL) {
            x->status = CCOIP_SS_FAILED;
            x->detail = c->ss->duplicate;
            LOG_WARN(MOD, "%s: tensor name \"%s\" appears twice in its shared state", c->name, x->detail);
        }
    }
    if (oom) {
        free_members(m, k);
        return NULL;
    }
    *n_out = n;
    return m;
}


/* The checks, then the content: the revision it elects. Members that fail a check get their
 * status; with no candidate left every member hears NO_CONTENT. */
static uint64_t decide(ccoip_master_state_t *st, uint32_t group, member_t *m, size_t n) {
    uint64_t elected = 0;
    check_revisions(m, n, &elected, st->opt.strict_revisions);
    const ccoip_ss_sync_t *ref = check_layouts(m, n);
    check_strategies(m, n);
    size_t candidates = 0;
    for (size_t i = 0; i < n; i++) {
        m[i].candidate = m[i].status == CCOIP_SS_OK && m[i].s->req.revision == elected &&
                         m[i].s->req.strategy != STRAT_RECEIVE_ONLY;
        candidates += m[i].candidate;
    }
    if (candidates == 0) {
        for (size_t i = 0; i < n; i++)
            if (m[i].status == CCOIP_SS_OK) m[i].status = CCOIP_SS_NO_CONTENT;
        LOG_WARN(MOD, "shared state of group %u: no peer can offer content (every peer is receive-only, behind, "
                      "or failed the checks)", group);
    } else if (ref != NULL) {
        elect_tensors(st, m, n, ref);
    }
    uint64_t moved = 0, transfers = 0;
    for (size_t i = 0; i < n; i++) {
        moved += m[i].load;
        transfers += m[i].nfetch;
    }
    st->counters.shared_state_syncs++;
    st->counters.shared_state_bytes += moved;
    LOG_INFO(MOD, "shared state of group %u: revision %llu, %zu peers, %llu tensor transfers, %llu bytes", group,
             (unsigned long long) elected, n, (unsigned long long) transfers, (unsigned long long) moved);
    return elected;
}

/* Every member's RESULT: its status, and what it fetches and serves. */
static void answer(ccoip_master_state_t *st, member_t *m, size_t n, uint64_t elected) {
    for (size_t i = 0; i < n; i++) {
        member_t *x = &m[i];
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
        ccoip_ss_result_t *r = &p.u.ss_result;
        r->status = x->status;
        r->revision = elected;
        r->expected = x->expected;
        r->detail = (char *) (x->detail != NULL ? x->detail : "");
        if (x->status == CCOIP_SS_OK) {
            r->nfetch = x->nfetch;
            r->fetch = x->fetch;
            r->nserve = x->nserve;
            r->serve = x->serve;
            r->nsources = x->nsources;
            r->sources = x->sources;
            r->relay_addr = st->opt.relay.inet; /* for RELAYED fetches (port 0: no relay) */
            r->relay_port = st->opt.relay.port;
        }
        send_to(st, x->c, &p);
        x->s->phase = SS_ANSWERED;
        x->s->status = r->status;
        x->s->adopt = elected;
    }
}

/* Out of memory for the election: every member of group hears FAILED. */
static void answer_failed(ccoip_master_state_t *st, uint32_t group) {
    LOG_ERROR(MOD, "out of memory electing the shared state of group %u", group);
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
        p.u.ss_result = (ccoip_ss_result_t){.status = CCOIP_SS_FAILED, .detail = (char *) ""};
        send_to(st, c, &p);
        c->ss->phase = SS_ANSWERED;
        c->ss->status = CCOIP_SS_FAILED;
        c->ss->adopt = 0;
    }
}

/* Drops the members the election kicked, last: dropping re-enters this module
 * (ccoip_mss_on_leave), so the members' table is freed first. */
static void kick_and_free(ccoip_master_state_t *st, member_t *m, size_t n) {
    typedef struct kick_t {
        ccoip_mclient_t *c;
        char why[CCOIP_MAX_SS_NAME + 96];
    } kick_t;
    kick_t *kick = calloc(n + 1, sizeof *kick);
    size_t nkick = 0;
    for (size_t i = 0; i < n && kick != NULL; i++) {
        if (m[i].status != CCOIP_SS_KICKED && m[i].status != CCOIP_SS_MIXED) continue;
        kick[nkick].c = m[i].c;
        if (m[i].status == CCOIP_SS_MIXED)
            snprintf(kick[nkick++].why, sizeof kick->why, "kicked: another sync strategy beside ENFORCE_POPULAR");
        else
            snprintf(kick[nkick++].why, sizeof kick->why,
                     "kicked: SEND_ONLY but without the popular content of tensor \"%s\"", m[i].detail);
    }
    free_members(m, n);
    for (size_t i = 0; i < nkick; i++) st->machine.reject(st, kick[i].c, kick[i].why);
    free(kick);
}

static void elect(ccoip_master_state_t *st, uint32_t group) {
    size_t n = 0;
    member_t *m = gather(st, group, &n);
    if (m == NULL) {
        answer_failed(st, group);
        return;
    }
    uint64_t elected = decide(st, group, m, n);
    answer(st, m, n, elected);
    kick_and_free(st, m, n);
}

static void finish(ccoip_master_state_t *st, uint32_t group) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group) || phase_of(c) != SS_DONE) continue; /* the sync's participants */
        ccoip_mss_t *s = c->ss;
        if (s->status == CCOIP_SS_OK && s->reported_ok) {
            s->has_rev = true;
            s->last_rev = s->adopt;
        }
        s->phase = SS_IDLE;
        free_req(&s->req);
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_SHARED_STATE_DONE;
        p.u.ss_master_done.status = CCOIP_RESULT_OK;
        send_to(st, c, &p);
    }
}

/* Moves the group's sync on: elected when every member waits in it, finished when every member
 * it answered has reported. A member that came into the group after the election (a REJOIN after
 * a master restart) takes no part in that sync: waiting for it would stall the others. */
static void evaluate(ccoip_master_state_t *st, uint32_t group) {
    size_t members = 0, waiting = 0, answered = 0, done = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        members++;
        waiting += phase_of(c) == SS_WAITING;
        answered += phase_of(c) == SS_ANSWERED;
        done += phase_of(c) == SS_DONE;
    }
    if (members == 0) return;
    /* After a restart, not before the members named as ring successors are back (or the grace is
     * over): the two that rejoined first must not sync without the other two (issue 29, 3). */
    if (waiting == members && !ccoip_members_awaiting_rejoins(st)) elect(st, group);
    else if (done > 0 && answered == 0) finish(st, group);
}

/* Whether member m holds the election of revision rev: answered in this master's sync, synced
 * at or past it, or (rejoined) got its RESULT from the master before. */
static bool got_result(const ccoip_mclient_t *m, uint64_t rev) {
    const ccoip_mss_t *s = m->ss;
    if (m->has_result && m->result_rev >= rev) return true;
    if (s == NULL) return false;
    return ((s->phase == SS_ANSWERED || s->phase == SS_DONE) && s->adopt >= rev) || (s->has_rev && s->last_rev >= rev);
}

/* The sync of a querying member succeeds only if every member of its group got the election's
 * RESULT: then no member failed for want of it, and a master that died between two members'
 * DONEs told the rest success. A member without it failed its call (pcclMasterConnectionFailed),
 * so the queriers fail too. Decided once the members are back (the rejoin grace). */
static void answer_queries(ccoip_master_state_t *st) {
    if (ccoip_members_awaiting_rejoins(st)) return;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!c->querying) continue;
        bool all = true;
        for (size_t k = 0; k < st->nclients && all; k++)
            if (is_member(st->clients[k], c->peer_group)) all = got_result(st->clients[k], c->query_rev);
        LOG_INFO(MOD, "%s asked whether every member got the election of revision %llu: %s", c->name,
                 (unsigned long long) c->query_rev, all ? "yes, its sync stands" : "no, its sync fails");
        /* It stands: every member holds that revision now (the revision rule goes on from it). */
        for (size_t k = 0; k < st->nclients && all; k++) {
            ccoip_mclient_t *m = st->clients[k];
            bool behind = m->ss == NULL || !m->ss->has_rev || m->ss->last_rev < c->query_rev;
            if (is_member(m, c->peer_group) && behind) ccoip_mss_restore(st, m, c->query_rev);
        }
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_SHARED_STATE_DONE;
        p.u.ss_master_done.status = all ? CCOIP_RESULT_OK : CCOIP_RESULT_FAILED;
        c->querying = false;
        send_to(st, c, &p);
    }
}

void ccoip_mss_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_query_t *q) {
    c->querying = true;
    c->query_rev = q->revision;
    answer_queries(st);
}

void ccoip_mss_evaluate_all(ccoip_master_state_t *st) {
    answer_queries(st);
    uint32_t groups[64]; /* first, since an election may kick members out of the table */
    size_t n = 0;
    for (size_t i = 0; i < st->nclients && n < 64; i++) {
        bool seen = phase_of(st->clients[i]) != SS_WAITING;
        for (size_t k = 0; k < n && !seen; k++) seen = groups[k] == st->clients[i]->peer_group;
        if (!seen) groups[n++] = st->clients[i]->peer_group;
    }
    for (size_t k = 0; k < n; k++) evaluate(st, groups[k]);
}

/* RESULT(stale) to c alone, which stays idle: a member of its group is in a vote, so the sync
 * cannot complete; the caller gets pcclRankConnectionLost and votes too (docs/group-state-machine.md). */
static void refuse_sync(ccoip_master_state_t *st, ccoip_mclient_t *c) {
    LOG_INFO(MOD, "%s: shared-state sync refused: a member of group %u is in a topology vote", c->name, c->peer_group);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
    p.u.ss_result.status = CCOIP_SS_STALE;
    p.u.ss_result.detail = "";
    send_to(st, c, &p);
}

void ccoip_mss_refuse_waiting(ccoip_master_state_t *st, uint32_t group) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group) || phase_of(c) != SS_WAITING) continue;
        free_req(&c->ss->req);
        c->ss->phase = SS_IDLE;
        refuse_sync(st, c);
    }
}

bool ccoip_mss_restore(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t last_rev) {
    (void) st;
    if (c->ss == NULL) c->ss = calloc(1, sizeof *c->ss);
    if (c->ss == NULL) return false;
    c->ss->has_rev = true;
    c->ss->last_rev = last_rev;
    return true;
}

void ccoip_mss_on_sync(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_sync_t *req) {
    if (c->ss == NULL) c->ss = calloc(1, sizeof *c->ss);
    if (c->ss == NULL) {
        st->machine.reject(st, c, "out of memory for its shared-state request");
        return;
    }
    if (c->ss->phase != SS_IDLE) {
        st->machine.reject(st, c, "protocol violation: a shared-state sync while its previous one runs");
        return;
    }
    if (ccoip_members_group_votes(st, c->peer_group)) { /* a member is in a vote: it wins */
        refuse_sync(st, c);
        return;
    }
    if (!copy_req(c->ss, req)) {
        free_req(&c->ss->req);
        st->machine.reject(st, c, "out of memory for its shared-state request");
        return;
    }
    c->ss->phase = SS_WAITING;
    c->ss->reported_ok = false;
    evaluate(st, c->peer_group);
}

void ccoip_mss_on_done(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_done_t *done) {
    if (phase_of(c) != SS_ANSWERED) {
        st->machine.reject(st, c, "protocol violation: shared-state DONE without a sync in progress");
        return;
    }
    c->ss->phase = SS_DONE;
    c->ss->reported_ok = done->ok != 0;
    evaluate(st, c->peer_group);
}

void ccoip_mss_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c) {
    if (phase_of(c) != SS_WAITING) return; /* answered already: the RESULT crossed this abort */
    uint32_t group = c->peer_group;
    size_t members = 0, waiting = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *m = st->clients[i];
        if (!is_member(m, group)) continue;
        members++;
        waiting += phase_of(m) == SS_WAITING;
    }
    LOG_WARN(MOD, "shared state of group %u: %s waited the collective timeout with %zu of %zu members in the sync; "
                  "ending it with TIMEOUT", group, c->name, waiting, members);
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *m = st->clients[i];
        if (!is_member(m, group)) continue;
        if (phase_of(m) != SS_WAITING) {
            LOG_WARN(MOD, "shared state of group %u: %s never called pcclSynchronizeSharedState", group, m->name);
            continue;
        }
        m->ss->phase = SS_IDLE; /* revisions stay as they were: nothing was synced */
        free_req(&m->ss->req);
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
        p.u.ss_result.status = CCOIP_SS_TIMEOUT;
        p.u.ss_result.detail = "";
        send_to(st, m, &p);
    }
}

void ccoip_mss_on_leave(ccoip_master_state_t *st, ccoip_mclient_t *gone, bool was_accepted) {
    if (gone->ss != NULL) {
        free_req(&gone->ss->req);
        free(gone->ss);
        gone->ss = NULL;
    }
    /* The members that remain may all be waiting or all be done now. */
    if (was_accepted && !st->shutting_down) evaluate(st, gone->peer_group);
}
