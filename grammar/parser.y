/* parser.y - grammar of the layout language (pure bison parser, one file per call). Builds the AST
 * of ast.h in an arena; reports syntax errors with positions and recovers at ';' and '}'. */
%define api.pure full
%define api.prefix {rs_yy}
%define parse.error custom
%define api.location.type {ast_yyloc}
%locations
%param {void *scanner}
%parse-param {rs_parse_ctx *P}

%code requires {
#include <stdint.h>
#include "ast.h"
typedef struct { const char *s; uint32_t len; } ast_text;
typedef struct { void *head, *tail; uint32_t n; } ast_list;
typedef struct { uint32_t file, first_line, first_column, last_line, last_column; } ast_yyloc;
}

%code {
#include <stdio.h>
#include <string.h>

int rs_yylex(RS_YYSTYPE *lval, RS_YYLTYPE *lloc, void *scanner);
static void yyerror(RS_YYLTYPE *l, void *scanner, rs_parse_ctx *P, const char *msg);

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                                                \
    do {                                                                                           \
        if (N) {                                                                                   \
            (Cur).file = YYRHSLOC(Rhs, 1).file;                                                    \
            (Cur).first_line = YYRHSLOC(Rhs, 1).first_line;                                        \
            (Cur).first_column = YYRHSLOC(Rhs, 1).first_column;                                    \
            (Cur).last_line = YYRHSLOC(Rhs, N).last_line;                                          \
            (Cur).last_column = YYRHSLOC(Rhs, N).last_column;                                      \
        } else {                                                                                   \
            (Cur).file = YYRHSLOC(Rhs, 0).file;                                                    \
            (Cur).first_line = (Cur).last_line = YYRHSLOC(Rhs, 0).last_line;                       \
            (Cur).first_column = (Cur).last_column = YYRHSLOC(Rhs, 0).last_column;                 \
        }                                                                                          \
    } while (0)

#define ADD(lst, node)                                                                             \
    do {                                                                                           \
        __typeof__(node) n_ = (node);                                                              \
        if ((lst).tail) ((__typeof__(node))(lst).tail)->next = n_;                                 \
        else (lst).head = n_;                                                                      \
        (lst).tail = n_;                                                                           \
        (lst).n++;                                                                                 \
    } while (0)
#define ONE(node) ({ void *one_ = (node); (ast_list){one_, one_, 1}; })
#define NEW(T) ((T *)rs_ast_alloc(P->arena, sizeof(T)))

static rs_diag_loc L(const ast_yyloc *l)
{
    rs_diag_loc d = {l->file, l->first_line, l->first_column,
                     l->last_line == l->first_line && l->last_column > l->first_column
                         ? l->last_column - l->first_column : 1};
    return d;
}

static ast_expr *ex(rs_parse_ctx *P, int kind, int op, const ast_yyloc *l, ast_expr *a, ast_expr *b,
                    ast_expr *c)
{
    ast_expr *e = NEW(ast_expr);
    e->kind = (uint8_t)kind;
    e->op = (uint8_t)op;
    e->loc = L(l);
    e->a = a;
    e->b = b;
    e->c = c;
    unsigned d = 0;
    if (a && a->depth > d) d = a->depth;
    if (b && b->depth > d) d = b->depth;
    if (c && c->depth > d) d = c->depth;
    d++;
    if (d == P->max_expr_depth + 1) {
        P->nerrors++;
        rs_diag_error(P->dg, e->loc, "expression nested too deeply (more than %u levels)", P->max_expr_depth);
    }
    e->depth = (uint16_t)(d > 60000 ? 60000 : d);
    return e;
}

static ast_expr *call(rs_parse_ctx *P, ast_sym *fn, const ast_yyloc *l, ast_list args)
{
    ast_expr *e = ex(P, EX_CALL, 0, l, NULL, NULL, NULL);
    unsigned d = 0;
    for (ast_expr *a = args.head; a; a = a->next)
        if (a->depth > d) d = a->depth;
    d++;
    if (d == P->max_expr_depth + 1) {
        P->nerrors++;
        rs_diag_error(P->dg, e->loc, "expression nested too deeply (more than %u levels)", P->max_expr_depth);
    }
    e->depth = (uint16_t)(d > 60000 ? 60000 : d);
    e->sym = fn;
    e->args = args.head;
    e->nargs = args.n;
    return e;
}

static ast_stmt *st(rs_parse_ctx *P, int kind, const ast_yyloc *l)
{
    ast_stmt *s = NEW(ast_stmt);
    s->kind = (uint8_t)kind;
    s->loc = L(l);
    return s;
}

static ast_str *str_of_sym(rs_parse_ctx *P, ast_sym *sym, const ast_yyloc *l)
{
    ast_str *s = NEW(ast_str);
    s->loc = L(l);
    s->lit = sym->name;
    s->litlen = sym->len;
    return s;
}

/* Merge adjacent text parts; a string without interpolation gets `lit`. */
static ast_str *str_finish(rs_parse_ctx *P, ast_list parts, const ast_yyloc *l)
{
    ast_str *s = NEW(ast_str);
    s->loc = L(l);
    ast_strpart head = {0}, *tail = &head;
    for (ast_strpart *p = parts.head, *next; p; p = next) {
        next = p->next;
        p->next = NULL;
        if (p->text && tail != &head && tail->text) {
            char *t = rs_ast_alloc(P->arena, (size_t)tail->len + p->len + 1);
            memcpy(t, tail->text, tail->len);
            memcpy(t + tail->len, p->text, p->len);
            tail->text = t;
            tail->len += p->len;
            continue;
        }
        tail->next = p;
        tail = p;
    }
    s->parts = head.next;
    if (!s->parts) {
        s->lit = "";
        s->litlen = 0;
    } else if (!s->parts->next && s->parts->text) {
        char *t = rs_ast_strndup(P->arena, s->parts->text, s->parts->len);
        s->lit = t;
        s->litlen = s->parts->len;
    }
    return s;
}

static ast_item *item(rs_parse_ctx *P, const ast_yyloc *l, int index, ast_expr *lo, ast_expr *hi)
{
    ast_item *it = NEW(ast_item);
    it->loc = L(l);
    it->index = (uint8_t)index;
    it->lo = lo;
    it->hi = hi;
    return it;
}

static ast_items *items(rs_parse_ctx *P, const ast_yyloc *l, ast_list lst)
{
    ast_items *it = NEW(ast_items);
    it->loc = L(l);
    it->head = lst.head;
    it->n = lst.n;
    return it;
}

static ast_ritem *ritem(rs_parse_ctx *P, const ast_yyloc *l, ast_expr *lo, ast_expr *hi, ast_ritem *list)
{
    ast_ritem *r = NEW(ast_ritem);
    r->loc = L(l);
    r->lo = lo;
    r->hi = hi;
    r->list = list;
    return r;
}

static ast_def *def(rs_parse_ctx *P, ast_sym *sym, const ast_yyloc *l, ast_expr *value)
{
    ast_def *d = NEW(ast_def);
    d->sym = sym;
    d->loc = L(l);
    d->value = value;
    return d;
}
}

%union {
    int64_t ival;
    ast_sym *sym;
    ast_text text;
    ast_expr *expr;
    ast_str *str;
    ast_items *items;
    ast_item *item;
    ast_place *place;
    ast_parg *parg;
    ast_ritem *ritem;
    ast_def *def;
    ast_stmt *stmt;
    ast_list list;
    int side;
}

%token <sym> IDENT "identifier"
%token <ival> INT "integer"
%token <text> STR_TEXT "string text"
%token STR_BEGIN "string"
%token STR_END "end of string"
%token INTERP_BEGIN "'{' in a string"
%token INTERP_END "'}' in a string"
%token INCLUDE "'include'" TOPOLOGY "'topology'" CONST "'const'" MESH "'mesh'" RANKS "'ranks'"
%token TENSOR "'tensor'" SRC "'src'" DST "'dst'" ON "'on'" AS "'as'" FOR "'for'" IN "'in'"
%token IF "'if'" ELSE "'else'" ASSERT "'assert'"
%token DOTDOT "'..'" EQ "'=='" NE "'!='" LE "'<='" GE "'>='" ANDAND "'&&'" OROR "'||'"

%right '?'
%left OROR
%left ANDAND
%left EQ NE
%left '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%type <list> stmts block mesh_axes view_axes rank_items topo_items dom_items const_defs exprs exprs_opt strparts
%type <list> items places places_opt placement pargs
%type <stmt> stmt if_stmt
%type <expr> expr
%type <str> str name
%type <items> slice_opt
%type <item> item
%type <place> place
%type <parg> parg
%type <ritem> rank_item dom_item
%type <def> topo_item
%type <side> side

%%

file: %empty
    | file stmt
        {
            if ($2 && !P->nerrors && P->on_stmt) P->on_stmt(P->cookie, $2);
            rs_ast_arena_reset(P->arena); /* the statement is done: its AST goes */
            if (P->dg->stop) YYABORT;      /* past the error limit: nothing more will be shown */
        }
    ;

stmts: %empty               { $$ = (ast_list){0}; }
     | stmts stmt           { $$ = $1; if ($2) ADD($$, $2); }
     ;

block: '{' stmts '}'        { $$ = $2; }
     | '{' stmts error '}'  { $$ = $2; yyerrok; }
     ;

stmt: INCLUDE str ';'
        { $$ = st(P, ST_INCLUDE, &@1); $$->inc.path = $2; }
    | TOPOLOGY '{' topo_items '}'
        { $$ = st(P, ST_TOPOLOGY, &@1); $$->topo.items = $3.head; }
    | CONST const_defs ';'
        { $$ = st(P, ST_CONST, &@1); $$->cons.defs = $2.head; }
    | MESH IDENT '[' mesh_axes ']' '=' RANKS expr DOTDOT expr ';'
        {
            $$ = st(P, ST_MESH, &@1);
            $$->mesh.name = $2; $$->mesh.nameloc = L(&@2);
            $$->mesh.axes = $4.head; $$->mesh.naxes = $4.n;
            ast_yyloc al = @3; al.last_line = @5.last_line; al.last_column = @5.last_column;
            $$->mesh.axesloc = L(&al);
            ast_yyloc rl = @8; rl.last_line = @10.last_line; rl.last_column = @10.last_column;
            $$->mesh.ranks = ritem(P, &rl, $8, $10, NULL);
            $$->mesh.is_range = 1;
            $$->mesh.ranksloc = L(&rl);
        }
    | MESH IDENT '[' mesh_axes ']' '=' RANKS '[' rank_items ']' ';'
        {
            $$ = st(P, ST_MESH, &@1);
            $$->mesh.name = $2; $$->mesh.nameloc = L(&@2);
            $$->mesh.axes = $4.head; $$->mesh.naxes = $4.n;
            ast_yyloc al = @3; al.last_line = @5.last_line; al.last_column = @5.last_column;
            $$->mesh.axesloc = L(&al);
            $$->mesh.ranks = $9.head;
            ast_yyloc rl = @8; rl.last_line = @10.last_line; rl.last_column = @10.last_column;
            $$->mesh.ranksloc = L(&rl);
        }
    | MESH IDENT '=' IDENT '[' view_axes ']' ';'
        {
            $$ = st(P, ST_MESH, &@1);
            $$->mesh.name = $2; $$->mesh.nameloc = L(&@2);
            $$->mesh.base = $4; $$->mesh.ranksloc = L(&@4);
            $$->mesh.axes = $6.head; $$->mesh.naxes = $6.n;
            ast_yyloc al = @5; al.last_line = @7.last_line; al.last_column = @7.last_column;
            $$->mesh.axesloc = L(&al);
        }
    | TENSOR name ':' IDENT '[' exprs_opt ']' ';'
        {
            $$ = st(P, ST_TENSOR, &@1);
            $$->tensor.name = $2;
            $$->tensor.dtype = $4; $$->tensor.dtloc = L(&@4);
            $$->tensor.dims = $6.head; $$->tensor.ndims = $6.n;
            ast_yyloc dl = @5; dl.last_line = @7.last_line; dl.last_column = @7.last_column;
            $$->tensor.dimsloc = L(&dl);
        }
    | side name slice_opt ON IDENT placement AS str ';'
        {
            $$ = st(P, ST_PIECE, &@1);
            ast_piece *p = $$->piece = NEW(ast_piece);
            p->side = (uint8_t)$1; p->tensor = $2; p->slice = $3;
            p->mesh = $5; p->meshloc = L(&@5);
            p->places = $6.head; p->nplaces = $6.n;
            p->placesloc = L(&@6);
            p->buffer = $8;
        }
    | side name slice_opt ON IDENT placement AS str ':' '[' exprs ']' ';'
        {
            $$ = st(P, ST_PIECE, &@1);
            ast_piece *p = $$->piece = NEW(ast_piece);
            p->side = (uint8_t)$1; p->tensor = $2; p->slice = $3;
            p->mesh = $5; p->meshloc = L(&@5);
            p->places = $6.head; p->nplaces = $6.n;
            p->placesloc = L(&@6);
            p->buffer = $8;
            p->shape = $11.head; p->nshape = $11.n;
            ast_yyloc sl = @10; sl.last_line = @12.last_line; sl.last_column = @12.last_column;
            p->shapeloc = L(&sl);
        }
    | side name slice_opt ON IDENT placement AS str ':' '[' exprs ']' '[' items ']' ';'
        {
            $$ = st(P, ST_PIECE, &@1);
            ast_piece *p = $$->piece = NEW(ast_piece);
            p->side = (uint8_t)$1; p->tensor = $2; p->slice = $3;
            p->mesh = $5; p->meshloc = L(&@5);
            p->places = $6.head; p->nplaces = $6.n;
            p->placesloc = L(&@6);
            p->buffer = $8;
            p->shape = $11.head; p->nshape = $11.n;
            ast_yyloc sl = @10; sl.last_line = @12.last_line; sl.last_column = @12.last_column;
            p->shapeloc = L(&sl);
            ast_yyloc bl = @13; bl.last_line = @15.last_line; bl.last_column = @15.last_column;
            p->box = items(P, &bl, $14);
        }
    | FOR IDENT IN expr DOTDOT expr block
        {
            $$ = st(P, ST_FOR, &@1);
            $$->loop.var = $2; $$->loop.varloc = L(&@2);
            $$->loop.lo = $4; $$->loop.hi = $6;
            $$->loop.body = $7.head;
        }
    | if_stmt               { $$ = $1; }
    | ASSERT expr ',' str ';'
        { $$ = st(P, ST_ASSERT, &@1); $$->check.cond = $2; $$->check.msg = $4; }
    | ASSERT expr ';'       /* no message: sema says what is missing */
        { $$ = st(P, ST_ASSERT, &@1); $$->check.cond = $2; }
    | ';'                   { $$ = NULL; }
    | error ';'             { $$ = NULL; yyerrok; }
    ;

if_stmt: IF expr block
        { $$ = st(P, ST_IF, &@1); $$->cond.cond = $2; $$->cond.then = $3.head; }
    | IF expr block ELSE block
        { $$ = st(P, ST_IF, &@1); $$->cond.cond = $2; $$->cond.then = $3.head; $$->cond.els = $5.head; }
    | IF expr block ELSE if_stmt
        {
            $$ = st(P, ST_IF, &@1); $$->cond.cond = $2; $$->cond.then = $3.head;
            $$->cond.els = $5; $$->cond.else_if = 1;
        }
    ;

side: SRC                   { $$ = RS_SRC; }
    | DST                   { $$ = RS_DST; }
    ;

name: IDENT                 { $$ = str_of_sym(P, $1, &@1); }
    | str                   { $$ = $1; }
    ;

str: STR_BEGIN strparts STR_END     { $$ = str_finish(P, $2, &@$); }
   ;

strparts: %empty            { $$ = (ast_list){0}; }
    | strparts STR_TEXT
        { $$ = $1; ast_strpart *p = NEW(ast_strpart); p->text = $2.s; p->len = $2.len; ADD($$, p); }
    | strparts INTERP_BEGIN expr INTERP_END
        { $$ = $1; ast_strpart *p = NEW(ast_strpart); p->expr = $3; ADD($$, p); }
    | strparts INTERP_BEGIN '*' INTERP_END
        { $$ = $1; ast_strpart *p = NEW(ast_strpart); ADD($$, p); }
    | strparts INTERP_BEGIN '*' '+' expr INTERP_END
        { $$ = $1; ast_strpart *p = NEW(ast_strpart); p->off = $5; ADD($$, p); }
    ;

topo_items: %empty          { $$ = (ast_list){0}; }
    | topo_items topo_item  { $$ = $1; ADD($$, $2); }
    ;

topo_item: IDENT '=' expr ';'
        { $$ = def(P, $1, &@1, $3); }
    | IDENT '=' '[' dom_items ']' ';'
        { $$ = def(P, $1, &@1, NULL); $$->list = $4.head; $$->is_list = 1; }
    ;

dom_items: dom_item                 { $$ = ONE($1); }
    | dom_items ',' dom_item        { $$ = $1; ADD($$, $3); }
    ;

dom_item: expr DOTDOT expr          { $$ = ritem(P, &@$, $1, $3, NULL); }
    | '[' rank_items ']'            { $$ = ritem(P, &@$, NULL, NULL, $2.head); }
    ;

rank_items: rank_item               { $$ = ONE($1); }
    | rank_items ',' rank_item      { $$ = $1; ADD($$, $3); }
    ;

rank_item: expr                     { $$ = ritem(P, &@$, $1, NULL, NULL); }
    | expr DOTDOT expr              { $$ = ritem(P, &@$, $1, $3, NULL); }
    ;

const_defs: IDENT '=' expr          { $$ = ONE(def(P, $1, &@1, $3)); }
    | const_defs ',' IDENT '=' expr { $$ = $1; ADD($$, def(P, $3, &@3, $5)); }
    ;

mesh_axes: IDENT '=' expr           { $$ = ONE(def(P, $1, &@1, $3)); }
    | mesh_axes ',' IDENT '=' expr  { $$ = $1; ADD($$, def(P, $3, &@3, $5)); }
    ;

view_axes: IDENT                   { $$ = ONE(def(P, $1, &@1, NULL)); }
    | IDENT '=' expr                { $$ = ONE(def(P, $1, &@1, $3)); }
    | view_axes ',' IDENT           { $$ = $1; ADD($$, def(P, $3, &@3, NULL)); }
    | view_axes ',' IDENT '=' expr  { $$ = $1; ADD($$, def(P, $3, &@3, $5)); }
    ;

slice_opt: %empty                   { $$ = NULL; }
    | '[' items ']'                 { $$ = items(P, &@$, $2); }
    ;

items: item                         { $$ = ONE($1); }
    | items ',' item                { $$ = $1; ADD($$, $3); }
    ;

item: expr                          { $$ = item(P, &@$, 1, $1, NULL); }
    | ':'                           { $$ = item(P, &@$, 0, NULL, NULL); }
    | expr ':'                      { $$ = item(P, &@$, 0, $1, NULL); }
    | ':' expr                      { $$ = item(P, &@$, 0, NULL, $2); }
    | expr ':' expr                 { $$ = item(P, &@$, 0, $1, $3); }
    ;

placement: %empty                   { $$ = (ast_list){0}; }
    | '{' places_opt '}'            { $$ = $2; }
    ;

places_opt: %empty                  { $$ = (ast_list){0}; }
    | places                        { $$ = $1; }
    ;

places: place                       { $$ = ONE($1); }
    | places ',' place              { $$ = $1; ADD($$, $3); }
    ;

place: IDENT '=' expr
        { $$ = NEW(ast_place); $$->axis = $1; $$->loc = L(&@1); $$->pin = 1; $$->value = $3; }
    | IDENT ':' IDENT
        { $$ = NEW(ast_place); $$->axis = $1; $$->loc = L(&@1); $$->fn = $3; $$->fnloc = L(&@3); }
    | IDENT ':' IDENT '(' pargs ')'
        {
            $$ = NEW(ast_place); $$->axis = $1; $$->loc = L(&@1); $$->fn = $3; $$->fnloc = L(&@3);
            $$->call = 1; $$->args = $5.head; $$->nargs = $5.n;
        }
    ;

pargs: parg                         { $$ = ONE($1); }
    | pargs ',' parg                { $$ = $1; ADD($$, $3); }
    ;

parg: expr                          { $$ = NEW(ast_parg); $$->loc = $1->loc; $$->value = $1; }
    | IDENT '=' expr                { $$ = NEW(ast_parg); $$->key = $1; $$->loc = L(&@1); $$->value = $3; }
    ;

exprs_opt: %empty                   { $$ = (ast_list){0}; }
    | exprs                         { $$ = $1; }
    ;

exprs: expr                         { $$ = ONE($1); }
    | exprs ',' expr                { $$ = $1; ADD($$, $3); }
    ;

expr: INT                           { $$ = ex(P, EX_INT, 0, &@1, NULL, NULL, NULL); $$->ival = $1; }
    | IDENT                         { $$ = ex(P, EX_NAME, 0, &@1, NULL, NULL, NULL); $$->sym = $1; }
    | IDENT '(' exprs_opt ')'       { $$ = call(P, $1, &@1, $3); }
    | '(' expr ')'                  { $$ = $2; }
    | str                           { $$ = ex(P, EX_STR, 0, &@1, NULL, NULL, NULL); $$->str = $1; }
    | '-' expr %prec UNARY          { $$ = ex(P, EX_NEG, 0, &@1, $2, NULL, NULL); }
    | '!' expr %prec UNARY          { $$ = ex(P, EX_NOT, 0, &@1, $2, NULL, NULL); }
    | expr '+' expr                 { $$ = ex(P, EX_BIN, OP_ADD, &@2, $1, $3, NULL); }
    | expr '-' expr                 { $$ = ex(P, EX_BIN, OP_SUB, &@2, $1, $3, NULL); }
    | expr '*' expr                 { $$ = ex(P, EX_BIN, OP_MUL, &@2, $1, $3, NULL); }
    | expr '/' expr                 { $$ = ex(P, EX_BIN, OP_DIV, &@2, $1, $3, NULL); }
    | expr '%' expr                 { $$ = ex(P, EX_BIN, OP_MOD, &@2, $1, $3, NULL); }
    | expr EQ expr                  { $$ = ex(P, EX_BIN, OP_EQ, &@2, $1, $3, NULL); }
    | expr NE expr                  { $$ = ex(P, EX_BIN, OP_NE, &@2, $1, $3, NULL); }
    | expr '<' expr                 { $$ = ex(P, EX_BIN, OP_LT, &@2, $1, $3, NULL); }
    | expr LE expr                  { $$ = ex(P, EX_BIN, OP_LE, &@2, $1, $3, NULL); }
    | expr '>' expr                 { $$ = ex(P, EX_BIN, OP_GT, &@2, $1, $3, NULL); }
    | expr GE expr                  { $$ = ex(P, EX_BIN, OP_GE, &@2, $1, $3, NULL); }
    | expr ANDAND expr              { $$ = ex(P, EX_BIN, OP_AND, &@2, $1, $3, NULL); }
    | expr OROR expr                { $$ = ex(P, EX_BIN, OP_OR, &@2, $1, $3, NULL); }
    | expr '?' expr ':' expr %prec '?'  { $$ = ex(P, EX_COND, 0, &@2, $1, $3, $5); }
    ;

%%

static void yyerror(RS_YYLTYPE *l, void *scanner, rs_parse_ctx *P, const char *msg)
{
    (void)scanner;
    P->nerrors++;
    if (!strcmp(msg, "memory exhausted"))
        rs_diag_error(P->dg, L(l), "nesting too deep: the parser ran out of stack");
    else
        rs_diag_error(P->dg, L(l), "%s", msg);
}

static void describe(char *buf, size_t n, yysymbol_kind_t k, const rs_parse_ctx *P)
{
    switch (k) {
    case YYSYMBOL_YYEOF: snprintf(buf, n, "end of file"); break;
    case YYSYMBOL_IDENT: snprintf(buf, n, "identifier '%.*s'", (int)(P->last_len > 40 ? 40 : P->last_len), P->last_tok); break;
    case YYSYMBOL_INT: snprintf(buf, n, "integer %.*s", (int)(P->last_len > 40 ? 40 : P->last_len), P->last_tok); break;
    default: snprintf(buf, n, "%s", yysymbol_name(k)); break;
    }
}

static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, rs_parse_ctx *P)
{
    (void)scanner;
    if (P->too_big) return 0; /* reported by the lexer, which stopped the input */
    char unexp[80], msg[512];
    describe(unexp, sizeof unexp, yypcontext_token(ctx), P);
    yysymbol_kind_t exp[5];
    int n = yypcontext_expected_tokens(ctx, exp, 5);
    size_t k = (size_t)snprintf(msg, sizeof msg, "unexpected %s", unexp);
    for (int i = 0; i < n && k < sizeof msg; i++)
        k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s", i == 0 ? ", expected " : i == n - 1 ? " or " : ", ",
                              yysymbol_name(exp[i]));
    P->nerrors++;
    rs_diag_error(P->dg, L(yypcontext_location(ctx)), "syntax error: %s", msg);
    return 0;
}
