/* layout.h - the elaborated layout: topology, meshes, tensors, buffers and pieces, with every
 * loop expanded and every expression evaluated. Produced by the compiler's front end (compiler/sema),
 * consumed by the planner, stored in plan.bin (so replay, stats and verify can recompute what every
 * rank holds and needs) and read back by the runtime. One copy of the placement math lives here. */
#ifndef RS_LAYOUT_H
#define RS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_MAX_DIMS 8 /* tensor, buffer and mesh dimensions */

/* dtypes: X(enum suffix, name in the language, bytes). Numbers are ABI (stored in plan.bin): append only. */
#define RS_DTYPES(X)                                                                               \
    X(BF16, "bf16", 2)                                                                             \
    X(FP16, "fp16", 2)                                                                             \
    X(FP32, "fp32", 4)                                                                             \
    X(FP64, "fp64", 8)                                                                             \
    X(FP8E4M3, "fp8e4m3", 1)                                                                       \
    X(FP8E5M2, "fp8e5m2", 1)                                                                       \
    X(INT8, "int8", 1)                                                                             \
    X(UINT8, "uint8", 1)                                                                           \
    X(INT16, "int16", 2)                                                                           \
    X(INT32, "int32", 4)                                                                           \
    X(INT64, "int64", 8)                                                                           \
    X(BOOL, "bool", 1)

typedef enum {
#define X(e, s, b) RS_DT_##e,
    RS_DTYPES(X)
#undef X
        RS_DT_COUNT
} rs_dtype;

int rs_dtype_size(rs_dtype dt);          /* 0 for an invalid value */
const char *rs_dtype_name(rs_dtype dt);  /* "?" for an invalid value */
int rs_dtype_parse(const char *s);       /* -1 when unknown */

typedef enum { RS_SRC = 0, RS_DST = 1 } rs_side;

/* Ranks are global, 0..world. domain_of[r] is the NVLink domain of rank r. Bandwidths are per GPU
 * per direction, in Gb/s (bits). */
typedef struct {
    uint32_t world;
    uint32_t ndomains;
    uint32_t *domain_of; /* [world] */
    int64_t domain_size; /* 0 when domains were listed explicitly */
    double nic_gbps;
    double nvlink_gbps;
} rs_topology;

/* A mesh: named axes mapped row-major (first axis slowest) onto a rank list. */
typedef struct {
    const char *name;
    uint32_t naxes;
    const char *axis[RS_MAX_DIMS];
    int64_t size[RS_MAX_DIMS];
    uint32_t nranks;   /* product of sizes */
    int32_t *ranks;    /* [nranks] linear coordinate -> global rank (no duplicates) */
    int32_t *index_of; /* [topology.world] global rank -> linear coordinate, -1 when absent */
} rs_mesh;

typedef struct {
    const char *name;
    rs_dtype dtype;
    uint32_t ndim;
    int64_t shape[RS_MAX_DIMS];
    uint32_t piece_begin; /* pieces[piece_begin .. +nsrc) are src, then ndst dst pieces */
    uint32_t nsrc, ndst;
} rs_tensor;

/* A named buffer bound on some ranks. Source and destination buffers are separate namespaces.
 * ndim == 0: implicit shape; the (only) piece's local block on a rank is the whole buffer there. */
typedef struct {
    const char *name;
    rs_side side;
    rs_dtype dtype;
    uint32_t ndim;
    int64_t shape[RS_MAX_DIMS];
    /* 1: a buffer group (docs/language.md): the name holds one "{*}", and the first dimension of the
     * buffer on a rank indexes members bound separately, member j named with j in place of "{*}". */
    uint8_t group;
} rs_buffer;

typedef enum { RS_PLACE_REPLICATE = 0, RS_PLACE_SHARD = 1, RS_PLACE_PIN = 2 } rs_place_kind;

/* One placement, in the order written (nesting order for several shards of one dim: outermost first).
 * Axes not mentioned are replicated. SHARD: dim, block (0 = torch.chunk: ceil(n / size) per block;
 * RS_SHARD_BALANCED: blocks differing by at most one, the longer ones first).
 * PIN: only coordinate `value` on this axis holds the piece. */
typedef struct {
    uint8_t axis;
    uint8_t kind;
    uint8_t dim;
    uint8_t pad_;
    int64_t arg; /* SHARD: block (0 = chunk, RS_SHARD_BALANCED); PIN: value */
} rs_place;

/* SHARD's arg for a balanced split (torch.tensor_split, vLLM's expert map): n elements over k ranks give
 * the first n % k ranks n / k + 1 elements and the others n / k. */
#define RS_SHARD_BALANCED (-1)

#define RS_NONE UINT32_MAX

typedef struct {
    uint32_t tensor, mesh, buffer;
    uint8_t side;
    uint8_t nplace;
    uint8_t pad_[2];
    uint32_t place; /* places[place .. +nplace) */
    uint32_t slice; /* RS_NONE (whole tensor) or i64[slice .. +2*ndim): lo[ndim] then hi[ndim] */
    uint32_t box;   /* RS_NONE (whole buffer) or i64[box .. +2*bndim): lo[bndim] then hi[bndim] */
} rs_piece;

typedef struct rs_layout {
    rs_topology topo;
    rs_mesh *meshes;
    uint32_t nmeshes;
    rs_tensor *tensors;
    uint32_t ntensors;
    rs_buffer *buffers;
    uint32_t nbuffers;
    rs_piece *pieces; /* grouped by tensor (see rs_tensor.piece_begin) */
    uint32_t npieces;
    rs_place *places;
    uint32_t nplaces;
    int64_t *i64;
    uint32_t ni64;
    /* Memory blocks that names (mesh, axis, tensor and buffer names) point into; freed with the layout. */
    char **name_blocks;
    uint32_t nname_blocks;
} rs_layout;

/* Copy a name into the layout's name blocks (arena); the result lives until rs_layout_free. */
const char *rs_layout_name(rs_layout *L, const char *s, size_t len);

/* Mesh coordinate of a linear index (row-major). */
void rs_mesh_coord(const rs_mesh *m, uint32_t linear, int64_t *coord);

/* Step coord to the next mesh coordinate in row-major order, leaving axes with fixed[a] >= 0 (pinned)
 * alone. Returns 0 after the last one. */
int rs_mesh_next_coord(const rs_mesh *m, const int64_t *fixed, int64_t *coord);

/* Does the rank at mesh coordinate `coord` hold piece p (all pins match)? */
int rs_piece_holds(const rs_layout *L, const rs_piece *p, const int64_t *coord);

/* Local block [lo, hi) in tensor coordinates of piece p at mesh coordinate coord (pins ignored).
 * Returns the element count (0 when the block is empty, e.g. a trailing ragged chunk). */
int64_t rs_piece_block(const rs_layout *L, const rs_piece *p, const int64_t *coord, int64_t *lo, int64_t *hi);

/* The interval of dim d that shard level `level` (0 = outermost shard of d) gives coordinate j, inside
 * parent interval [plo, phi) of an axis of size n with block b (0 = chunk, RS_SHARD_BALANCED). Empty intervals
 * have lo == hi. */
void rs_shard_interval(int64_t plo, int64_t phi, int64_t n, int64_t b, int64_t j, int64_t *lo, int64_t *hi);

/* Slice of piece p (whole tensor when it has none). */
void rs_piece_slice(const rs_layout *L, const rs_piece *p, int64_t *lo, int64_t *hi);

/* Number of buffer dims and the buffer box of piece p on a rank whose local block is [blo, bhi):
 * explicit buffers use the piece's box (whole buffer without one); implicit buffers have the block's
 * shape and the box is all of it. Returns the buffer's ndim; shape receives the buffer shape on that rank. */
uint32_t rs_piece_buffer_box(const rs_layout *L, const rs_piece *p, const int64_t *blo, const int64_t *bhi,
                             int64_t *shape, int64_t *box_lo, int64_t *box_hi);

void rs_layout_free(rs_layout *L);

#ifdef __cplusplus
}
#endif
#endif
