/* plan_int.h - internals shared by the planner passes: regions.c (grids, cells, buffer maps, bindings),
 * fanout.c (routing a cell to its destination domains), sources.c (candidate senders, LPT),
 * schedule.c (flows, rounds, staging, ops, affine merging, per-rank programs) and planner.c (driver). */
#ifndef RS_PLAN_INT_H
#define RS_PLAN_INT_H

#include <stdint.h>

#include "planner.h"
#include "util.h"

#define PL_ND RS_MAX_DIMS
/* The planner hands freed heap pages back (rs_heap_trim) when this much lies free: below it, faulting the
 * pages in again cost more than they weigh (issue 3's case: 74 MiB free, 22 k page faults, 0.07 s). */
#define PL_TRIM_MIN_FREE ((size_t)128 << 20)
/* After planning, the verifier takes back most of what pass 3 freed (issue 3's case: 223 MiB free, B 278,
 * C 347, G 813): a trim below this gave back pages it then faulted in again, split into 4 KiB pages (issue
 * 3's case on one core 1.33 -> 1.74 s); above it (G) the trim still pays (docs/planner.md). */
#define PL_TRIM_AFTER_PLAN ((size_t)512 << 20)

typedef rs_vec(uint32_t) pl_u32vec;
typedef rs_vec(uint64_t) pl_u64vec;
typedef rs_vec(int64_t) pl_i64vec;
/* A box of a grouped part's run (schedule.c): lo[PL_ND] then hi[PL_ND], its bytes, its first fine box. */
typedef struct {
    int64_t box[2 * RS_MAX_DIMS];
    uint64_t bytes;
    uint32_t first;
} pl_gbox;

/* ---- small containers (planner.c) ---- */

/* Open-addressing hash map from a 128-bit key (two u64, the first never all ones) to a u64 value. */
typedef struct {
    uint64_t k0, k1, v;
} pl_mapent;
typedef struct {
    pl_mapent *e; /* [cap]; k0 == UINT64_MAX: empty */
    size_t cap, n;
} pl_map;
uint64_t *pl_map_get(const pl_map *m, uint64_t k0, uint64_t k1);
uint64_t *pl_map_put(pl_map *m, uint64_t k0, uint64_t k1, int *created); /* new values are 0 */
void pl_map_clear(pl_map *m);
void pl_map_free(pl_map *m);

/* Interned lists of u32 (candidate sets, forward sets). Id 0 is the empty list. */
typedef struct {
    pl_map index;
    rs_vec(uint32_t) data;
    rs_vec(uint32_t) begin; /* [n + 1] */
    uint32_t last;          /* the id added last (callers often add the same list again) */
} pl_intern;
void pl_intern_init(pl_intern *t);
uint32_t pl_intern_add(pl_intern *t, const uint32_t *v, uint32_t n);
static inline const uint32_t *pl_intern_list(const pl_intern *t, uint32_t id, uint32_t *n)
{
    *n = t->begin.v[id + 1] - t->begin.v[id];
    return t->data.v + t->begin.v[id];
}
void pl_intern_free(pl_intern *t);

/* Bump allocator (reset per tensor, or per cell). */
typedef struct {
    char *buf;
    size_t used, cap;
    rs_vec(char *) old;
} pl_arena;
void *pl_alloc_slow(pl_arena *a, size_t n); /* n rounded up: a new buffer */
static inline void *pl_alloc(pl_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->used + n > a->cap) return pl_alloc_slow(a, n);
    void *p = a->buf + a->used;
    a->used += n;
    return p;
}
void pl_arena_reset(pl_arena *a);
void pl_arena_free(pl_arena *a);

/* ---- regions.c ---- */

/* A piece of the current tensor: its shard grid per dim and how blocks map to mesh ranks. */
typedef struct {
    uint32_t gi; /* global piece index */
    const rs_piece *p;
    const rs_mesh *m;
    int held;    /* 0: a pin outside its axis (nobody holds it) */
    uint32_t K[PL_ND];           /* intervals of dim d (product of the sizes of the axes sharding d) */
    int64_t *lo[PL_ND], *hi[PL_ND];
    uint32_t *lin[PL_ND];        /* mesh linear-index contribution of interval k of dim d */
    uint32_t pin_base;           /* mesh linear-index contribution of the pins */
    uint32_t nrep, *rep;         /* linear offsets of every combination of the replicated axes */
    uint32_t span;               /* 1 + the largest (block base - pin_base) */
    uint64_t *cache;             /* [span * 3], made when first used: rank list, candidate set, buffer map */
} pl_tp;


/* Buffer map of one block: tensor sub-boxes of the block -> strided byte regions of the buffer. The
 * block (shape A, row-major) fills a buffer box (shape B, row-major); F is the common refinement of A
 * and B (every A dim and every B dim is a run of consecutive F dims). Without one (nf == 0, e.g. a
 * [3, 4] block in a [2, 6] box) boxes are mapped row run by row run. */
#define PL_NF (2 * PL_ND)
typedef struct {
    /* the fields every lookup reads come first (a map is read once per chunk, mostly from cold memory) */
    uint32_t ndim, es;
    uint32_t nf;
    int simple;           /* every non-unit tensor dim is one F dim: every sub-box maps to one region */
    int noref;            /* no common refinement: map row runs */
    uint32_t bnd;
    uint64_t base;        /* byte offset of the box origin */
    uint64_t off0;        /* simple maps: base - sum of blo[fdim[k]] * fstr[k] (mod 2^64), so a lookup needs
                             neither blo nor more than the first two cache lines of the map */
    uint8_t fdim[PL_NF];  /* tensor dim of F dim k (outer to inner) */
    uint64_t fstr[PL_NF]; /* byte stride in the buffer */
    int64_t blo[PL_ND];   /* block origin */
    int64_t ext[PL_ND];   /* block extents */
    int64_t frad[PL_NF];  /* radix */
    int64_t fw[PL_NF];    /* weight inside its tensor dim (product of the radices inside it) */
    uint64_t mbytes;      /* a buffer group's member bytes (the stride of its first dim), else 0 */
    /* the box, for the no-refinement path */
    int64_t bext[PL_ND];
    uint64_t bstr[PL_ND];
} pl_bmap;

/* Build the map of piece p (global index) for the block [blo, bhi). Returns 0, or -1 when the block
 * does not fit its buffer box (element counts differ). */
int pl_bmap_build(const rs_layout *L, uint32_t piece, const int64_t *blo, const int64_t *bhi, pl_bmap *m);
/* Region of sub-box [lo, hi) (tensor coords) in the buffer: 1 when it is one descriptor (written to d,
 * loc left to the caller), 0 when the box must first be split (see pl_bmap_split). */
int pl_bmap_desc(const pl_bmap *m, const int64_t *lo, const int64_t *hi, rs_desc *d);
/* Split points that make [lo, hi) mappable: returns 1 and a dim d plus a cut position c (lo[d] < c <
 * hi[d]) when the box needs a cut, 0 when it maps as one region. */
int pl_bmap_cut(const pl_bmap *m, const int64_t *lo, const int64_t *hi, uint32_t *d, int64_t *c);

/* Split box [lo, hi) (ndim dims, elements of es bytes) into at most k nearly equal sub-boxes along its
 * outer dims; writes them to out (k entries of 2*PL_ND int64: lo then hi) and returns their number. */
uint32_t pl_box_split(uint32_t ndim, const int64_t *lo, const int64_t *hi, uint32_t k, int64_t (*out)[2 * PL_ND]);

static inline uint64_t pl_box_elems(uint32_t nd, const int64_t *lo, const int64_t *hi)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; d++) n *= (uint64_t)(hi[d] - lo[d]);
    return n;
}

/* ---- routing ---- */
enum { PL_LOCAL = 0, PL_NVL = 1, PL_NET = 2 };

/* One cell: the intersection of a destination block with the source grids. */
typedef struct {
    uint32_t tensor, ndim, es;
    int64_t lo[PL_ND], hi[PL_ND];
    uint64_t bytes;
    uint32_t dslot;            /* destination piece (slot in the tensor) */
    uint32_t dbase;            /* its block's mesh linear index (with the pins) */
    const int64_t *dlo, *dhi;  /* destination block */
    const uint32_t *dr;        /* ranks needing it, sorted by (domain, rank) */
    uint32_t ndr;
    uint32_t cand;             /* interned candidate set: pairs (rank, src slot), sorted by rank */
    uint32_t ncover;           /* covering source pieces: slot and interval index per dim */
    uint32_t *cover_slot;
    uint32_t (*cover_ks)[PL_ND];
} pl_cell;

/* One routed transfer of a (sub-box of a) cell. */
typedef struct {
    uint8_t kind;
    uint32_t s, r;     /* sender and receiver (LOCAL: the same rank) */
    uint32_t sslot;    /* source piece slot the sender holds */
    uint32_t fset;     /* interned set of ranks r forwards to over NVLink (NET only) */
    uint32_t key;      /* fset | class << 31 | relay << 30; class 1: the sender was chosen among several
                          holders (such traffic is irregular across receivers, so it travels in segments of
                          its own) */
    uint8_t relay;     /* the sender is a destination rank forwarding what it received (sslot: the
                          destination piece it reads, the cell's) */
    uint32_t kmin;     /* earliest round (relays: after the rounds that brought the bytes to the sender) */
    const uint32_t *kmin_chunk; /* relays of the same box: chunk i goes after round kmin_chunk[i] */
    uint32_t nkmin;
    uint64_t pm;       /* relays of the same box: the parent's chunk size (the same chunks) */
    int64_t lo[PL_ND], hi[PL_ND];
    uint64_t bytes;
} pl_part;

#define PL_KEY_CLASS (1u << 31)
#define PL_KEY_RELAY (1u << 30)
#define PL_KEY_FSET(k) ((k) & (PL_KEY_RELAY - 1))

typedef struct {
    uint64_t bytes;
    uint32_t cand, seq, unit, r, fset; /* unit: the tensor's first piece (+ the sender's slot = its unit); fset: the key */
    uint32_t flow;                     /* after pass 1: the chosen sender's flow (and unit: its unit) */
    uint32_t tensor;                   /* the tensor whose cell it is */
} pl_lpt;

/* A part as pass 2 needs it (recorded in pass 1): its flow and unit, or (PL_REC_LPT) the LPT record whose
 * chosen sender fixes both; consecutive parts of one flow and unit are added up. */
#define PL_REC_LPT (1u << 31)
typedef struct {
    uint32_t flow, unit;
    uint64_t bytes;
} pl_prec;

/* ---- the context ---- */
typedef struct pl_stepb pl_stepb;

/* A sender: what it sends per unit (a source piece: one source buffer region), sorted by unit after pass
 * 1, and the window each unit falls in. */
typedef struct {
    pl_u32vec unit;
    pl_u64vec ubytes;
    pl_u32vec win;
    uint32_t nwin;
    rs_vec(uint32_t) flows; /* its flows, sorted by receiver */
    uint64_t total;
    uint32_t last_unit, last_win; /* sender_window's last answer (last_unit: unit + 1, 0 none) */
} pl_sender;

/* A flow: what one sender sends one receiver on one lane with one key (forward set and class). */
typedef struct {
    uint32_t s, r, fset; /* fset: the key (forward set | class << 31) */
    uint8_t lane;
    uint32_t win_base; /* into fw arrays: nwin entries */
    uint32_t next;     /* pass 1: the next flow of the same (s, r) (RS_NONE: the last) */
} pl_flow;
#define PL_FLOW_DIRECT 2048 /* worlds up to this many ranks index flows by (s, r) directly (16 MiB at most) */

/* A segment: one message from s to r in one round, in step builders sb (on s) and rb (on r). */
typedef struct {
    uint32_t s, r, tensor; /* tensor: RS_NONE when it carries several */
    uint8_t zc_src, zc_dst;
    uint64_t bytes;
    uint32_t out_idx, in_idx, inst, ninst;
    uint32_t src_loc, dst_loc;
    uint64_t src_off, dst_off;
    uint64_t sbase, rbase; /* staging offsets on sender / receiver (finalize) */
    uint32_t sb, rb;       /* the step builders of sender and receiver */
} pl_seg;

typedef struct {
    uint32_t seg, f, in_idx, fb; /* fb: the forward peer's step builder */
    uint8_t zc;
    uint32_t dst_loc;
    uint64_t dst_off;
    uint64_t base; /* staging offset on f (finalize) */
} pl_inst;

/* An op while planning: two strided byte regions like rs_desc, side 0 read and side 1 written, with at most
 * PL_PD dims a side and PL_PT dims together, side 0's first in cnt/str (pl_pcnt, pl_pstr). Two separate
 * PL_PD-dim descriptors made an op 248 bytes; 32-bit counts make it 152. This wide form is what the merging
 * and resolving code works on; a step keeps its ops in the narrow form below. The staging side is symbolic:
 * an item of the step's out or in list plus an offset inside it; merged dims step through items by dl. */
#define PL_PD 6
#define PL_PT 8
typedef struct {
    uint8_t code, dead, sym; /* sym: 0 none, 1 the source is staging, 2 the destination is */
    uint8_t nd[2];           /* dims of each side */
    uint32_t tensor;
    int32_t item;
    int16_t dl[PL_PD];
    uint32_t loc[2];
    uint64_t off[2];
    uint32_t cnt[PL_PT]; /* below 2^32: a chunk's extents (emit_chunk halves a larger chunk) or merge counts */
    uint64_t str[PL_PT];
} pl_pop;

static inline uint32_t *pl_pcnt(pl_pop *p, int side) { return p->cnt + (side ? p->nd[0] : 0); }
static inline uint64_t *pl_pstr(pl_pop *p, int side) { return p->str + (side ? p->nd[0] : 0); }
static inline const uint32_t *pl_pcnt_c(const pl_pop *p, int side) { return p->cnt + (side ? p->nd[0] : 0); }
static inline const uint64_t *pl_pstr_c(const pl_pop *p, int side) { return p->str + (side ? p->nd[0] : 0); }

/* An op as a step keeps it: the wide op's fields, with its dims in the op when both sides have PL_PI dims
 * together and stride 1 innermost (descriptors do: only the outer strides are kept), else in a wide record
 * carved from the rank's blocks. Ops are most of pass 3's memory (the 2.5 T MoE: 5.9 M ops held at once),
 * and most of them have 2 or 4 dims: 80 bytes, not 152. A wide record holds the op's strides (only the
 * outer ones when both sides' innermost is 1: PL_EXT_OUTER in ext), then its counts, then its dl, as many
 * as it has dims (the 2.5 T MoE's stacked experts: 1.75 M ops of 5 or 6 dims, 56 or 72 bytes each instead
 * of a fixed 112). ext holds the record's size in 8-byte words, so a record the op outgrows is replaced. */
#define PL_PI 4
#define PL_EXT_OUTER 0x80
#define PL_EXT_WORDS 0x7f
typedef struct {
    uint64_t off[2];
    union {
        struct {
            uint64_t str[PL_PI - 2]; /* the outer ones: side 0's, then side 1's */
            uint32_t cnt[PL_PI];
            int16_t dl[PL_PI];
        } in;
        uint8_t *ext; /* when ext is set */
    } d;
    uint32_t loc[2];
    uint32_t tensor;
    int32_t item;
    uint8_t code, dead, sym;
    uint8_t nd[2];
    uint8_t ext; /* 0: the dims are in d.in; else in d.ext, of (ext & PL_EXT_WORDS) words */
} pl_spop;

/* The ops of one step while planning: a chain of rooms of 1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7, 9, ... ops (then
 * 30 % more each, schedule.c's room_cap), filled in order and never moved, so a step that grows wastes at
 * most its last room's free part. Rooms are carved from blocks of the step's rank, which building the rank's
 * program hands back at once. (Vectors that moved to a bigger room when full left the old room behind: steps
 * of a rank grow in lockstep, so the 2.5 T MoE's outgrown rooms, waiting for a step of their size that never
 * came, were 1.3x its ops.) A room's capacity follows from its place in the chain, so its header is only the
 * link. */
#define PL_POP_CLASSES 72
typedef struct pl_room {
    struct pl_room *next;
    pl_spop p[];
} pl_room;

typedef struct pl_blocksrc pl_blocksrc; /* where ranks' blocks come from (schedule.c) */
typedef struct {
    rs_vec(void *) blocks; /* from src */
    rs_vec(void *) big;    /* rooms larger than a block, malloc'd */
    char *at;
    size_t left;
    pl_blocksrc *src;
    uint8_t lock; /* held while carving when two threads carve (schedule.c, the op adder) */
} pl_popool;

/* Merge state of a step for one (code, row tag, source loc, destination loc): its latest op and the live
 * one before it (1-based pops indices); a slot with cur == 0 is empty. */
typedef struct {
    uint32_t sloc, dloc, tag, cur, prev;
} pl_mslot;

/* A step being built: rank_steps (per rank and lane, by round) and local_step find it. */
struct pl_stepb {
    uint32_t rank;
    uint8_t pcls;           /* the size class of the last room */
    pl_room *first, *last;  /* the step's ops (pop_at, pop_next) */
    uint32_t nops;          /* ops in the step (dead ones included) */
    uint32_t last_base;     /* index of the last room's first op */
    /* (32-bit counts: 2.5 M step builders on the 2.5 T MoE) */
    struct { uint32_t *v; uint32_t n, cap; } out; /* seg ids this rank sends in this step */
    struct { uint64_t *v; uint32_t n, cap; } in;  /* received items: seg id << 1 (direct receiver) or inst id << 1 | 1 */
    pl_mslot *mt;              /* merge state (schedule.c, mslot_find) */
    uint32_t mcap, mn;
    pl_mslot hot;              /* the slot used last, held here (hot.cur == 0: none); mt[hot_at] is stale */
    uint32_t hot_at;
};

/* zc_moves' view of one item of a step's out or in list (schedule.c) */
typedef struct {
    uint64_t next_s, first_d, next_d; /* staging offset and buffer bytes expected next */
    uint32_t dloc, npops;
    uint8_t bad;
} pl_zcitem;

/* What building a rank's program uses besides the planner's state and the rank's own (one per thread that
 * builds programs: the ranks left after the last tensor are built by two). */
typedef struct {
    rs_rank_prog dscr;      /* descriptors, packed, before they go to the program (reused) */
    rs_vec(pl_zcitem) zscr; /* zc_moves' scratch */
    uint64_t *dtab;         /* the descriptor interning table, kept from rank to rank (build_rank) */
    uint32_t dtab_cap;
    uint64_t trim_bytes;    /* program bytes since the last malloc_trim */
    rs_prog_cursor cur;     /* where this thread puts finished programs in the plan's blocks */
} pl_builder;

typedef struct pl_ctx {
    rs_layout *L;
    const rs_plan_opts *o;
    rs_plan_stats *st;
    char *err;
    size_t errlen;
    uint32_t bad_piece;
    int failed;
    int pass;
    uint32_t world;

    uint64_t half, pmax, cs; /* staging per half, largest chunk, sender bytes per round */
    uint64_t pfine;          /* chunk of a part that spans a round boundary (after pass 2) */
    uint64_t cur_pm;         /* pass 3: the chunk size of the current part */

    /* bindings: per rank sorted buffer ids, with the shape on that rank */
    uint32_t *bind_begin; /* [world + 1] */
    uint32_t *bind_buf;
    int64_t (*bind_shape)[PL_ND];
    uint32_t *bind_nd;
    uint64_t *bind_memo; /* [world]: the last lookup, buffer << 32 | (binding + 1) */
    uint64_t *bind_mb;   /* member bytes of each binding on a buffer group (0: plain); NULL without groups */

    /* current tensor */
    pl_arena tar; /* what lives as long as the tensor: grids, caches, cell sweep */
    pl_arena ar;  /* scratch of one cell's routing (reset after each cell) */
    const rs_tensor *t;
    uint32_t ti, npiece;
    pl_tp *tp;
    pl_map tcache; /* (role, slot, base) -> arena offset of rank list / cand id */

    /* routing */
    uint64_t *net_in, *nvl_out, *nic_out; /* [world] */
    uint64_t *relay_out;                  /* [world]: bytes relayed (reset per pass) */
    double relay_heads;                   /* see rs_plan_stats.relay_heads */
    pl_u32vec chunk_k;                    /* pass 3: per chunk of the current part, its latest round */
    uint32_t cur_chunk;                   /* pass 3: the chunk being emitted (counts emit_aligned calls) */
    uint32_t chunk_kmin;                  /* pass 3: the earliest round of the chunk being emitted (relays) */
    rs_vec(pl_gbox) gst;                  /* pass 3: the open run of a grouped part, its boxes merged */
    pl_u32vec fine_k;                     /* pass 3: the round of each fine box of a grouped part */
    int check_fine;                       /* RESHARD_CHECK_FINE: boxes taken whole also walked (schedule.c) */
    pl_u32vec kend;                       /* pass 3: a grouped relay's key runs (schedule.c, group_walk) */
    pl_intern cands, fsets;
    rs_vec(pl_lpt) lpt;
    uint32_t *lpt_choice; /* [nlpt] */
    uint32_t lpt_seq;
    rs_vec(uint32_t) tmp_u32;

    /* schedule */
    pl_sender *snd; /* [world] */
    pl_map flow_index;     /* (lane, s, r, key) -> flow, for worlds above PL_FLOW_DIRECT ranks */
    uint32_t *flow_first;  /* [world * world]: the first flow of (s, r), for worlds up to PL_FLOW_DIRECT */
    rs_vec(pl_flow) flows;
    rs_vec(pl_prec) precs; /* pass 1: every NET and NVL part, for pass 2 */
    pl_u32vec pflow;       /* the flow of every NET and NVL part in routing order (pass 3 routes the same) */
    size_t pseq;           /* pass 3: the next part's index in pflow */
    uint64_t *fw_bytes, *fw_base, *fw_run; /* per (flow, window): bytes, offset in the flow, bytes placed so far */
    uint32_t nfw;
    /* rounds of every flow's bytes (after pass 2): flow f's byte range ending at rt_end[i] goes in round
     * rt_round[i], for i in [rt_begin[f], rt_begin[f + 1]) (ends ascending) */
    uint32_t *rt_begin;
    uint64_t *rt_end;
    uint32_t *rt_round;
    uint32_t *rt_seg;   /* the segment laid out for entry i (seg_precreate) */
    uint32_t rt_memo_f, rt_memo_i; /* rt_index's last answer: flow + 1 (0 none), entry */
    uint64_t rt_memo_off;
    rs_vec(pl_seg) segs;
    rs_vec(pl_inst) insts;
    pl_map seg_index;
    rs_vec(pl_stepb) steps;
    pl_u32vec *rank_steps;        /* [world * 2]: per rank and lane, step builder per round */
    uint32_t *local_step;          /* [world] */
    pl_popool *popool;             /* [world] */
    pl_blocksrc *blocksrc;
    pl_builder bld;                /* the main thread's */
    struct pl_helper *helper;      /* pass 3: the thread building ranks done during the tensor loop, or NULL */
    struct pl_adder *adder;        /* pass 3: the thread adding the ops made to their steps, or NULL */
    int helper_tried;              /* whether it was started (or could not be) */

    /* programs built during pass 3: a rank's program is built (and its ops freed) as soon as the last
     * tensor with a part that involves it (as sender, receiver or forwarder; recorded in pass 1, which
     * routes the same parts) has been planned */
    rs_plan *out;
    uint32_t *rank_last;  /* [world]: 1 + that tensor, 0 for none */
    uint32_t *done_order; /* [world]: ranks by rank_last */
    uint32_t done_at;     /* ranks done_order[0 .. done_at) are built */
    uint8_t *rank_built;  /* [world] */
    pl_u64vec *usage;             /* [world]: staging charged per round */
    uint32_t nrounds;
    uint64_t last_flow_key, last_flow;
    uint64_t last_seg_key, last_seg;
} pl_ctx;

int pl_fail(pl_ctx *c, uint32_t piece, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* regions.c */
int pl_bindings(pl_ctx *c);
/* The per-block cache of a piece slot of the current tensor: 3 words for block base `base`. */
uint64_t *pl_block_cache(pl_ctx *c, uint32_t slot, uint32_t base);
uint32_t pl_binding(const pl_ctx *c, uint32_t rank, uint32_t buffer); /* RS_NONE if not bound */
/* The same, remembering each rank's last lookup (consecutive parts mostly use the same buffer on a rank). */
/* Member bytes of binding `loc` of `rank` when it is on a buffer group, else 0 (staging included). */
static inline uint64_t pl_loc_mbytes(const pl_ctx *c, uint32_t rank, uint32_t loc)
{
    return c->bind_mb && loc != RS_LOC_STAGING ? c->bind_mb[c->bind_begin[rank] + loc] : 0;
}
static inline uint32_t pl_binding_memo(pl_ctx *c, uint32_t rank, uint32_t buffer)
{
    uint64_t m = c->bind_memo[rank];
    if ((uint32_t)m && (uint32_t)(m >> 32) == buffer) return (uint32_t)m - 1;
    uint32_t b = pl_binding(c, rank, buffer);
    c->bind_memo[rank] = (uint64_t)buffer << 32 | (uint32_t)(b + 1); /* RS_NONE: not remembered */
    return b;
}
int pl_tensor_begin(pl_ctx *c, uint32_t ti);
int pl_tensor_cells(pl_ctx *c); /* every cell of every destination piece of the tensor -> pl_route */
void pl_block_of(const pl_ctx *c, uint32_t slot, const uint32_t *ks, int64_t *lo, int64_t *hi);

/* fanout.c */
int pl_route(pl_ctx *c, const pl_cell *cell);

/* sources.c */
uint32_t pl_net_sender(pl_ctx *c, const pl_cell *cell, uint64_t bytes, uint32_t r, uint32_t fset, uint32_t *slot);
uint32_t pl_nvl_sender(pl_ctx *c, const pl_cell *cell, uint32_t domain, uint64_t bytes, uint32_t *slot);
void pl_lpt_solve(pl_ctx *c);

/* schedule.c */
int pl_do_part(pl_ctx *c, const pl_cell *cell, const pl_part *p); /* the pass's work on one part */
void pl_after_pass1(pl_ctx *c);
void pl_pass2(pl_ctx *c); /* pass 2 from the parts pass 1 recorded (the same routing, without redoing it) */
void pl_after_pass2(pl_ctx *c);
/* Every rank's program with its rank and bindings (from pl_bindings), before the programs are built: the
 * verifier's piece index can be made from them meanwhile (rs_plan_verify_pre_start). */
void pl_rank_bindings(pl_ctx *c);
void pl_involve(pl_ctx *c, uint32_t rank);         /* pass 1: the current tensor has a part involving rank */
void pl_tensor_planned(pl_ctx *c);                 /* pass 3: the current tensor is planned */
int pl_finalize(pl_ctx *c, rs_plan *out);
void pl_schedule_free(pl_ctx *c);

/* msgmerge.c: consecutive messages of a sender-receiver pair in one step on both sides whose ranges
 * continue each other become one; returns how many were folded into the message before them */
uint64_t pl_merge_messages(rs_plan *P, const rs_layout *L);

#endif
