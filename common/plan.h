/* plan.h - the transfer plan in memory: the layout it was planned from, the per-rank buffers to bind,
 * and one program per rank (steps of ops on two lanes). The planner builds it, plan_write.c encodes it
 * into plan.bin, plan_read.c decodes (all ranks or one), plan_verify.c checks it, plan_dump.c prints it.
 * The opcode table below is the single source for all of them (and for docs/format.md). */
#ifndef RS_PLAN_H
#define RS_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_VERSION_STRING "0.1.0"
#define RS_PLAN_MAJOR 1
#define RS_PLAN_MINOR 0
#define RS_PLAN_MINOR_GROUPS 1   /* the minor version of a plan with buffer groups */
#define RS_PLAN_MINOR_BALANCED 2 /* ... of a plan with a balanced shard (RS_SHARD_BALANCED) */
#define RS_PLAN_MINOR_GROUPS2 3  /* ... of a plan with a group of two member dims or a member offset */

/* Lanes: NET steps run on one stream/communicator (all ranks), NVL steps on another (NVLink domain). */
enum { RS_LANE_NET = 0, RS_LANE_NVL = 1, RS_NLANES = 2 };

/* Opcodes: X(NAME, number, operands, synopsis). Numbers are ABI: append only, never reuse. */
#define RS_OPCODES(X)                                                                              \
    X(PACK, 1, "src:desc(buffer) dst:desc(staging)", "gather a buffer region into staging")       \
    X(UNPACK, 2, "src:desc(staging) dst:desc(buffer)", "scatter staging into a buffer region")    \
    X(COPY, 3, "src:desc(buffer) dst:desc(buffer)", "local copy between this rank's buffers")     \
    X(SEND, 4, "peer loc off bytes", "send contiguous bytes (staging or a buffer) to peer")       \
    X(RECV, 5, "peer loc off bytes", "receive contiguous bytes (into staging or a buffer) from peer")

typedef enum {
#define X(n, v, o, s) RS_OP_##n = v,
    RS_OPCODES(X)
#undef X
} rs_opcode;

const char *rs_op_name(int code); /* NULL for an unknown opcode */

/* A location: one of the rank's bindings (index into rs_rank_prog.bindings) or its staging buffer. */
#define RS_LOC_STAGING UINT32_MAX

/* A strided byte region: count[ndim-1] contiguous bytes (stride[ndim-1] == 1), repeated over the
 * outer dims with byte strides. Iterated row-major, it yields a byte stream of prod(count) bytes.
 * PACK/UNPACK/COPY copy the src stream into the dst stream; both have the same total. */
#define RS_DESC_MAX_DIMS 8
typedef struct {
    uint32_t loc;
    uint32_t ndim; /* 1..RS_DESC_MAX_DIMS */
    uint64_t offset;
    uint64_t count[RS_DESC_MAX_DIMS];
    uint64_t stride[RS_DESC_MAX_DIMS];
} rs_desc;

uint64_t rs_desc_bytes(const rs_desc *d);
/* Largest byte offset + 1 touched (offset for an empty descriptor); overflow-checked, 0 on success. */
int rs_desc_extent(const rs_desc *d, uint64_t *end);

/* An op in memory: 32 bytes, two to a cache line (a plan's ops are its largest array after the descriptors:
 * 18.3 M on the 2.5 T MoE). SEND/RECV use peer, loc and off; PACK/UNPACK/COPY use src and dst, which share
 * their storage, so set only the fields of the op's code. Fields an opcode does not use are not stored in
 * plan.bin (off is 0 after a decode of a PACK/UNPACK/COPY); PACK/UNPACK/COPY bytes are stored as the
 * descriptors'. */
typedef struct {
    uint8_t code;   /* rs_opcode */
    uint8_t pad_[3];
    uint32_t tensor; /* tensor the bytes belong to, RS_NONE when several (merged ops) */
    union {
        uint32_t peer; /* SEND/RECV: global rank */
        uint32_t src;  /* PACK/UNPACK/COPY: index of the source descriptor (rs_prog_desc) */
    };
    union {
        uint32_t loc; /* SEND/RECV: RS_LOC_STAGING or a binding index */
        uint32_t dst; /* PACK/UNPACK/COPY: index of the destination descriptor */
    };
    uint64_t off;   /* SEND/RECV: byte offset in loc */
    uint64_t bytes; /* SEND/RECV: byte count; PACK/UNPACK/COPY: bytes copied */
} rs_op;

typedef struct {
    uint8_t lane;
    uint8_t pad_[3];
    uint32_t wait_begin, nwaits; /* rs_rank_prog.waits[wait_begin .. +nwaits): earlier steps (other lane) */
    uint32_t op_begin, nops;     /* rs_rank_prog.ops[op_begin .. +nops) */
} rs_step;

/* A buffer this rank must bind: which layout buffer, its shape on this rank and byte size. */
typedef struct {
    uint32_t buffer; /* index into layout.buffers */
    uint32_t ndim;
    int64_t shape[RS_MAX_DIMS];
    uint64_t bytes;
} rs_binding;

/* rs_plan_verify_rank's structural contract (docs/format.md): steps' op ranges and wait ranges follow
 * each other in program order and cover ops[] and waits[]; each buffer is bound at most once (explicit
 * buffers with their declared shape, bytes = shape x dtype size); descriptors have stride 1 innermost
 * and never touch a byte twice; nothing writes into a source-side buffer. */
typedef struct {
    uint32_t rank;
    uint64_t staging_bytes;
    rs_binding *bindings;
    uint32_t nbindings;
    rs_step *steps;
    uint32_t nsteps;
    rs_op *ops;
    uint32_t nops;
    /* Descriptors, packed (a plan's largest part: 2.5 T MoE's 6.9 M of them took 0.99 GB as rs_desc):
     * descriptor i starts at word doff[i] of dpool as loc | ndim << 32, offset, count[ndim], stride[ndim].
     * Read them with rs_prog_desc, write them with rs_prog_desc_add / rs_prog_desc_set. */
    uint64_t *dpool;
    uint32_t *doff;
    uint32_t ndescs;
    uint32_t dcap;                 /* doff's capacity */
    uint64_t dpool_n, dpool_cap;   /* dpool's words used and allocated */
    uint32_t *waits;
    uint32_t nwaits;
    int loaded; /* 0 when a single-rank load skipped this rank's program */
    /* 1: steps, ops, waits, doff and dpool lie in the plan's blocks (rs_prog_block_alloc), not in memory of
     * their own: rs_plan_free frees them with the blocks, and rs_prog_unblock (which the descriptor
     * functions below call before anything grows) moves them out. Code that reallocates or frees one of
     * these arrays itself calls rs_prog_unblock first. */
    int in_blocks;
} rs_rank_prog;

/* Large blocks a plan owns, that the planner puts its finished programs in (rs_prog_block_alloc). */
typedef struct rs_prog_block rs_prog_block;
typedef struct rs_verify_pre rs_verify_pre; /* (plan_verify_all.c) */

typedef struct rs_plan {
    rs_layout layout;     /* includes the topology */
    uint64_t staging_budget;
    uint64_t plan_fp;     /* hash of the encoded content (every section but the header) */
    uint64_t source_fp;   /* hash of layout text, -D values, options and compiler version */
    rs_rank_prog *ranks;  /* [layout.topo.world] */
    /* Set by the planner once rs_plan_verify_all passed: the writer then skips the per-rank checks it
     * would repeat (10 % of a DeepSeek-V3 compile's instructions). Clear it after editing the plan. */
    int verified;
    rs_verify_pre *verify_pre; /* the verifier's piece index being made ahead (the planner's), or NULL */
    rs_prog_block *blocks; /* the blocks of the ranks with in_blocks set (a list; two threads add to it) */
} rs_plan;

void rs_plan_free(rs_plan *P);

/* One thread's place in the plan's blocks (zero it before the first use). */
typedef struct {
    uint8_t *at, *end;
} rs_prog_cursor;
/* `bytes` (64-byte aligned) at the cursor, from a new block of at least 32 MiB when the cursor's block is
 * full. A block is a mapping of its own (rs_map_aligned), and only rs_plan_free hands it back: a program
 * there never shares a page with memory the heap hands back as it is freed (with the heap in huge pages,
 * that split the programs' pages: docs/planner.md). Safe for two threads with a cursor each. NULL when blocks are not used (AddressSanitizer builds, whose bounds checks need an allocation
 * per array) or the mapping fails: the caller then allocates with malloc. */
void *rs_prog_block_alloc(rs_plan *P, rs_prog_cursor *cur, size_t bytes);
/* The room `bytes` take in a block (each allocation starts 64-byte aligned). */
static inline size_t rs_prog_block_room(size_t bytes) { return (bytes + 63) & ~(size_t)63; }
/* Cut the cursor's last allocation, at p, to `bytes` (no more than it had): the rest is the cursor's again. */
void rs_prog_block_shrink(rs_prog_cursor *cur, void *p, size_t bytes);
/* Move g's arrays out of the blocks into memory of their own, at the same capacities (nothing when they
 * are not in blocks). */
void rs_prog_unblock(rs_rank_prog *g);

/* Descriptor i of rank program g, unpacked into *out (dims past ndim zero); returns out. */
/* Bytes [off, off + bytes) of binding (or staging) loc as a one-dim descriptor. */
static inline rs_desc rs_desc_range(uint32_t loc, uint64_t off, uint64_t bytes)
{
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.loc = loc;
    d.ndim = 1;
    d.offset = off;
    d.count[0] = bytes;
    d.stride[0] = 1;
    return d;
}

static inline const rs_desc *rs_prog_desc(const rs_rank_prog *g, uint32_t i, rs_desc *out)
{
    const uint64_t *w = g->dpool + g->doff[i];
    uint32_t nd = (uint32_t)(w[0] >> 32);
    out->loc = (uint32_t)w[0];
    out->ndim = nd;
    out->offset = w[1];
    /* zeros first, in stores of a fixed size (a select per dim: 5 % more instructions in all on issue 3's case) */
    memset(out->count, 0, sizeof out->count);
    memset(out->stride, 0, sizeof out->stride);
    for (uint32_t k = 0; k < nd; k++) {
        out->count[k] = w[2 + 2 * k];
        out->stride[k] = w[3 + 2 * k];
    }
    return out;
}
/* Descriptor i from dt, a table of g's descriptors already unpacked, or unpacked into *out when dt is NULL. */
static inline const rs_desc *rs_prog_desc_from(const rs_desc *dt, const rs_rank_prog *g, uint32_t i, rs_desc *out)
{
    return dt ? &dt[i] : rs_prog_desc(g, i, out);
}
/* Its location alone. */
static inline uint32_t rs_prog_desc_loc(const rs_rank_prog *g, uint32_t i) { return (uint32_t)g->dpool[g->doff[i]]; }
/* Append descriptor d (ndim <= RS_DESC_MAX_DIMS) to g; returns its index. */
uint32_t rs_prog_desc_add(rs_rank_prog *g, const rs_desc *d);
/* Replace descriptor i (tools and tests that edit a plan; a longer one goes to the pool's end). */
void rs_prog_desc_set(rs_rank_prog *g, uint32_t i, const rs_desc *d);
/* Room for n more descriptors of `words` words in all (2 + 2 x ndim each), so adds do not reallocate. */
void rs_prog_desc_reserve(rs_rank_prog *g, uint32_t n, uint64_t words);
/* Give back the pool's unused room. */
void rs_prog_desc_trim(rs_rank_prog *g);

/* Index of the binding of layout buffer `buffer` on rank prog r, or RS_NONE. */
uint32_t rs_rank_binding(const rs_rank_prog *r, uint32_t buffer);

/* ---- buffer groups (format 1.1; two member dims and member offsets 1.3; docs/format.md) ----
 * A group's name holds one member marker per member dim (rs_buffer.group, 1 or 2): "{*}", or "{*+N}"
 * (N > 0, no leading zero) for a member index shifted by N in the name. A binding of a group buffer is
 * shape[0] (x shape[1] with two member dims) members of bytes / that bytes each, bound separately; the plan
 * addresses the group as if its members lay back to back (member j = (j / shape[1], j % shape[1]) with two
 * dims). A plain binding is one member. */
/* The minor format version a plan with this layout is written in: the newest addition it uses (1.3 a group
 * of two member dims or with an offset, 1.2 a balanced shard, 1.1 a buffer group), else 1.0, so that older
 * readers keep reading what they can. */
unsigned rs_plan_layout_minor(const rs_layout *L);

#define RS_PLAN_MAX_MEMBERS (1u << 20) /* members of buffer groups one rank binds, all groups together */
#define RS_GROUP_MAX_DIMS 2            /* member dims of a buffer group */
#define RS_GROUP_MAX_OFFSET (1ull << 62) /* member offsets in names are below this */
uint64_t rs_binding_members(const rs_layout *L, const rs_binding *b);
uint64_t rs_binding_member_bytes(const rs_layout *L, const rs_binding *b);
/* Members along the second member dim (shape[1]) of a binding on a group of two member dims, else 1. */
uint64_t rs_binding_inner_members(const rs_layout *L, const rs_binding *b);
/* A member marker of a group name: at byte `at`, `len` bytes, offset `off`. */
typedef struct {
    size_t at, len;
    uint64_t off;
} rs_marker;
/* The member markers of `name` (the first RS_GROUP_MAX_DIMS into m): their count. A "{*" that does not
 * start a well-formed marker is text. */
int rs_group_markers(const char *name, rs_marker *m);
/* Member j's name: the group's pattern with each marker replaced by the member's index along its dim plus
 * the marker's offset; `inner` is the member count of the second dim (rs_binding_inner_members), unused with
 * one marker. Returns the length it needs (like snprintf; the output is truncated to n - 1 bytes). */
int rs_member_name(const char *pattern, uint64_t j, uint64_t inner, char *out, size_t n);
/* Does `name` name a member of group `pattern`? Returns its number of member dims (0: no) and the indices
 * (the numbers in the name less the offsets) in idx[0..]. */
int rs_member_of(const char *pattern, const char *name, uint64_t *idx);
/* A descriptor on a group of members of m bytes must be a sequence of member-local runs: its dims of
 * more than one step are first some whose strides are multiples of m, then some with strides below m,
 * and the latter, from offset % m, end inside the member. Returns those runs' bytes (the product of the
 * inner dims' counts; 1 for an empty descriptor), or 0 when d is not so. */
uint64_t rs_desc_member_chunk(const rs_desc *d, uint64_t m);
uint64_t rs_dims_member_chunk(uint32_t n, const uint64_t *cnt, const uint64_t *str, uint64_t offset, uint64_t m);
/* The same byte stream as d with dims such that the innermost ones span exactly `chunk` bytes (one dim
 * may be split in two): out's dims [0, *nouter) step through the chunks. Returns 0, or -1 when d's stream
 * cannot be cut at every `chunk` bytes along its dims (or the result needs more than 8 dims). */
int rs_desc_cut(const rs_desc *d, uint64_t chunk, rs_desc *out, uint32_t *nouter);
/* Whether rs_desc_cut succeeds on dims with these counts (strides and offset do not matter). */
int rs_dims_cut_ok(uint32_t n, const uint64_t *cnt, uint64_t chunk);
/* The chunk an op's two descriptors are cut at so that every piece lies inside one member on both sides
 * (the gcd of the member-local runs of its sides on groups), or 0 when they cannot be; `ma`, `mb`: member
 * bytes of each side (0: not a group). With neither side on a group, the op's byte count. */
uint64_t rs_op_group_chunk(const rs_desc *a, uint64_t ma, const rs_desc *b, uint64_t mb);
/* The same on two sides given as dims (the planner's ops), at least one with m[s] != 0; 0: no cut. */
uint64_t rs_dims_group_chunk(const uint32_t n[2], const uint64_t *const cnt[2], const uint64_t *const str[2],
                             const uint64_t off[2], const uint64_t m[2]);

/* ---- plan.bin ---- errors are returned as fixed reason strings written into err (never printed). */

/* Encode to a memory image (deterministic); sets plan_fp. Returns 0, or -1 with err set. */
int rs_plan_encode(rs_plan *P, uint8_t **out, size_t *outlen, char *err, size_t errlen);
/* Encode and write atomically (temporary file in the same directory, fsync, rename). Errors begin with
 * the path. */
int rs_plan_write_file(rs_plan *P, const char *path, char *err, size_t errlen);
/* rs_plan_write_file while the caller verifies P on another thread (rs_plan_verify_all): the per-rank
 * checks are left to it, and the file is put in place only if gate(arg) returns 0, which it may wait to
 * say (rs_write_file_gated). Returns 0, -1 with err, or 1 when the gate said no. */
int rs_plan_write_file_gated(rs_plan *P, const char *path, int (*gate)(void *), void *arg, char *err, size_t errlen);

/* Decode. rank < 0: every rank's program; otherwise only that rank's (others have loaded = 0).
 * Validates every offset/length/count/index and every CRC; then runs rs_plan_verify_rank on each
 * loaded rank. The image must stay alive only during the call. */
int rs_plan_decode(const uint8_t *img, size_t len, int rank, rs_plan *out, char *err, size_t errlen);
/* mmap the file and decode it. */
int rs_plan_load_file(const char *path, int rank, rs_plan *out, char *err, size_t errlen);

/* Structural checks of one rank's program: descs inside their bindings/staging, peers inside the
 * world, lanes valid, waits pointing backwards to the other lane, NVL peers in the same domain. */
int rs_plan_verify_rank(const rs_plan *P, uint32_t rank, char *err, size_t errlen);
/* The same with the rank's descriptors already unpacked: dt[i] == *rs_prog_desc(g, i, ...) for every i
 * (the whole-plan verifier unpacks them once for this check and its own per-rank ones). */
int rs_plan_verify_rank_unpacked(const rs_plan *P, uint32_t rank, const rs_desc *dt, char *err, size_t errlen);
/* Whole-plan checks (all ranks loaded): send/recv matching per lane, peer pair, order and size;
 * deadlock freedom by simulation; every destination element written exactly once with the right
 * source element (region algebra over the layout). */
int rs_plan_verify_all(const rs_plan *P, char *err, size_t errlen);
/* The same, also giving its work in units of the budget that bounds it (400 M: a plan that needs more is
 * refused as too irregular): one unit per decomposition of a descriptor piece and per compared stretch. */
int rs_plan_verify_all_work(const rs_plan *P, char *err, size_t errlen, uint64_t *work);
/* The verifier's parts in the order they run, and the same call giving each one's wall time in seconds
 * (`seconds`: RS_VERIFY_PARTS entries, or NULL; a part that did not run gets 0). On two threads the piece
 * index and the relay check run beside matching: PIECES is then what they took beyond it, and RELAYS only
 * a second look at the races, when one is needed. For benchmarks: bench/planner_bench prints them,
 * `RESHARDC_TIMING=1 reshardc ...` too. */
enum {
    RS_VERIFY_RANKS,  /* each rank's structure, whole elements and staging races (one pass per rank) */
    RS_VERIFY_MATCH,  /* SEND/RECV matching */
    RS_VERIFY_PIECES, /* the pieces each (rank, binding) holds */
    RS_VERIFY_RELAYS, /* reads of destination bytes (and races, when the first part found a problem) */
    RS_VERIFY_SIMULATE, /* deadlock freedom and data, step by step */
    RS_VERIFY_COVERAGE, /* every destination element written exactly once */
    RS_VERIFY_PARTS
};
int rs_plan_verify_all_timed(const rs_plan *P, char *err, size_t errlen, uint64_t *work, double *seconds);
/* The verifier's piece index (which rank holds which block of which piece in which binding) depends on the
 * layout and every rank's bindings alone. A caller that sets every P->ranks[r].nbindings and bindings
 * before the programs (the planner) can have it made on a thread of its own meanwhile: start returns it
 * (NULL when the layout is small, one thread is to be used, or no thread starts), and neither the layout's
 * arrays nor the bindings may change until rs_plan_verify_all_pre takes it (the layout struct itself may
 * be moved). rs_plan_verify_all_pre is rs_plan_verify_all_timed with the index given (pre may be NULL); it
 * frees pre, passed or failed. rs_plan_verify_pre_free waits for an index not taken and frees it
 * (rs_plan_free frees P->verify_pre so). Results and messages are those of rs_plan_verify_all. */
rs_verify_pre *rs_plan_verify_pre_start(const rs_plan *P, const rs_layout *L);
int rs_plan_verify_all_pre(const rs_plan *P, rs_verify_pre *pre, char *err, size_t errlen, uint64_t *work,
                           double *seconds);
void rs_plan_verify_pre_free(rs_verify_pre *pre);

#ifdef __cplusplus
}
#endif
#endif
