/* ccoip_ss_resume.c: the ranges a failed fetch received (ccoip_ss_resume.h). A flat array of
 * entries, sorted by (name, offset) once the failed fetch has added them all. */
#include "ccoip/peer/ccoip_ss_resume.h"

#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"

typedef struct entry_t {
    char *name;
    uint64_t elected; /* the elected content's hash */
    uint8_t kind;
    uint64_t bytes, range, off, len;
    uint64_t xxh; /* of the range's bytes, as its distributor sent it */
} entry_t;

struct ccoip_ss_resume_t {
    entry_t *e;
    size_t n, cap;
};

bool ccoip_ss_resume_add(ccoip_ss_resume_t **r, const ccoip_ss_fetch_t *f, const ccoip_ss_span_t *sp, uint64_t xxh) {
    if (*r == NULL && (*r = calloc(1, sizeof **r)) == NULL) return false;
    ccoip_ss_resume_t *x = *r;
    if (x->n == x->cap) {
        size_t cap = x->cap == 0 ? 64 : 2 * x->cap;
        entry_t *e = realloc(x->e, cap * sizeof *e);
        if (e == NULL) return false;
        x->e = e;
        x->cap = cap;
    }
    char *name = strdup(f->name);
    if (name == NULL) return false;
    x->e[x->n++] = (entry_t){name, f->hash, f->hash_kind, sp->bytes, sp->range, sp->off, sp->len, xxh};
    return true;
}

static int cmp_entry(const void *a, const void *b) {
    const entry_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0) return c;
    return x->off < y->off ? -1 : x->off > y->off;
}

void ccoip_ss_resume_seal(ccoip_ss_resume_t *r) {
    if (r != NULL && r->n > 1) qsort(r->e, r->n, sizeof *r->e, cmp_entry);
}

bool ccoip_ss_resume_has(const ccoip_ss_resume_t *r, const ccoip_ss_fetch_t *f, const ccoip_ss_span_t *sp) {
    if (r == NULL) return false;
    entry_t key = {(char *) f->name, 0, 0, 0, 0, sp->off, 0, 0};
    const entry_t *e = bsearch(&key, r->e, r->n, sizeof *r->e, cmp_entry);
    if (e == NULL || e->elected != f->hash || e->kind != f->hash_kind || e->bytes != sp->bytes ||
        e->range != sp->range || e->len != sp->len)
        return false;
    return hash_xxh3((const uint8_t *) sp->data + sp->off, (size_t) sp->len) == e->xxh;
}

void ccoip_ss_resume_free(ccoip_ss_resume_t *r) {
    if (r == NULL) return;
    for (size_t i = 0; i < r->n; i++) free(r->e[i].name);
    free(r->e);
    free(r);
}
