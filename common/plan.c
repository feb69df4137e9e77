/* plan.c - small plan helpers: opcode names from the X-macro, binding lookup, descriptor sizes,
 * freeing a plan. */
#include "plan.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Opcodes are stored as one byte; 0 is never an opcode. */
#define X(n, v, o, s) _Static_assert((v) > 0 && (v) < 256, "opcode " #n " fits in a byte");
RS_OPCODES(X)
#undef X

static const char *const op_names[] = {
#define X(n, v, o, s) [v] = #n,
    RS_OPCODES(X)
#undef X
};

const char *rs_op_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof op_names / sizeof op_names[0]) return NULL;
    return op_names[code];
}

uint32_t rs_rank_binding(const rs_rank_prog *r, uint32_t buffer)
{
    for (uint32_t i = 0; i < r->nbindings; i++)
        if (r->bindings[i].buffer == buffer) return i;
    return RS_NONE;
}

uint64_t rs_desc_bytes(const rs_desc *d)
{
    if (d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (rs_umul_ovf(n, d->count[i], &n)) return UINT64_MAX; /* saturate; the verifier rejects it */
    return n;
}

int rs_desc_extent(const rs_desc *d, uint64_t *end)
{
    if (d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return 1;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (d->count[i] == 0) {
            *end = d->offset;
            return 0;
        }
    uint64_t e = d->offset, t;
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (rs_umul_ovf(d->count[i] - 1, d->stride[i], &t) || rs_uadd_ovf(e, t, &e)) return 1;
    }
    if (rs_uadd_ovf(e, 1, &e)) return 1;
    *end = e;
    return 0;
}

void rs_plan_free(rs_plan *P)
{
    if (!P) return;
    if (P->ranks) {
        for (uint32_t r = 0; r < P->layout.topo.world; r++) {
            rs_rank_prog *g = &P->ranks[r];
            free(g->bindings);
            free(g->steps);
            free(g->ops);
            free(g->descs);
            free(g->waits);
        }
        free(P->ranks);
    }
    rs_layout_free(&P->layout);
    memset(P, 0, sizeof *P);
}
