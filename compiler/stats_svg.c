/* stats_svg.c - `reshardc stats --svg`: one picture of a plan's cost: the four modeled times side by
 * side, the sender x receiver traffic matrix, per-NIC load against the bound, and the step timeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "util.h"

#define W 1100
#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

static const char *hb(char *buf, size_t n, double b)
{
    static const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int i = 0;
    while (b >= 1000 && i < 5) b /= 1000, i++;
    snprintf(buf, n, i ? "%.3g %s" : "%.0f %s", b, u[i]);
    return buf;
}

static const char *hs(char *buf, size_t n, double s)
{
    if (s >= 1) snprintf(buf, n, "%.3g s", s);
    else if (s >= 1e-3) snprintf(buf, n, "%.3g ms", s * 1e3);
    else snprintf(buf, n, "%.3g us", s * 1e6);
    return buf;
}

static void text(FILE *f, double x, double y, int size, const char *anchor, const char *fill, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\" fill=\"%s\">", x, y, size, anchor,
            fill);
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
    fputs("</text>\n", f);
}

static void rect(FILE *f, double x, double y, double w, double h, const char *fill)
{
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x, y, w, h, fill);
}

/* A color between white and (r, g, b) at t in [0, 1]. */
static void shade(char *buf, size_t n, double t, int r, int g, int b)
{
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    snprintf(buf, n, "#%02x%02x%02x", (int)(255 + (r - 255) * t), (int)(255 + (g - 255) * t),
             (int)(255 + (b - 255) * t));
}

/* A "nice" tick step for an axis spanning [0, max] with about n ticks. */
static double nice_step(double max, int n)
{
    if (!(max > 0)) return 1;
    double raw = max / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* ---- the four times ---- */
static double draw_times(FILE *f, const rs_cost_report *r, double y)
{
    struct {
        const char *name;
        double t;
        const char *color;
    } bars[] = {{"lower bound", r->bound.bound_s, "#969696"},
                {"this plan (modeled)", r->plan.time_s, "#2171b5"},
                {"direct (modeled)", r->direct.time_s, "#fd8d3c"},
                {"gather-broadcast (modeled)", r->gather_broadcast.time_s, "#cb181d"}};
    double max = 0;
    for (int i = 0; i < 4; i++)
        if (bars[i].t > max) max = bars[i].t;
    double x0 = 210, w = W - x0 - 170;
    char a[64], b[96];
    for (int i = 0; i < 4; i++) {
        double yy = y + i * 22;
        text(f, x0 - 8, yy + 13, 12, "end", "#252525", bars[i].name);
        double bw = max > 0 ? w * bars[i].t / max : 0;
        rect(f, x0, yy + 2, bw < 1 && bars[i].t > 0 ? 1 : bw, 15, bars[i].color);
        if (i == 0) snprintf(b, sizeof b, "%s", hs(a, sizeof a, bars[i].t));
        else if (i == 1)
            snprintf(b, sizeof b, "%s  (%.2fx the bound)", hs(a, sizeof a, bars[i].t),
                     r->bound.bound_s > 0 ? bars[i].t / r->bound.bound_s : 0);
        else
            snprintf(b, sizeof b, "%s  (plan %.2fx faster)", hs(a, sizeof a, bars[i].t),
                     r->plan.time_s > 0 ? bars[i].t / r->plan.time_s : 0);
        text(f, x0 + bw + 6, yy + 13, 12, "start", "#252525", b);
    }
    return y + 4 * 22;
}

/* ---- traffic matrix: ranks when few, else NVLink domains (grouped when many) ---- */
static void draw_matrix(FILE *f, const rs_plan *P, const rs_cost_report *r, double x0, double y0, double size)
{
    const rs_cost_traffic *t = &r->traffic;
    const rs_topology *T = &P->layout.topo;
    int by_rank = t->rank_matrix && t->world <= 64;
    uint32_t n = by_rank ? t->world : t->ndomains, group = 1;
    if (!by_rank && n > 128) {
        group = (n + 127) / 128;
        n = (n + group - 1) / group;
    }
    double *m = rs_xcalloc((size_t)n * n + 1, sizeof *m);
    uint8_t *intra = rs_xcalloc((size_t)n * n + 1, 1);
    double max = 0;
    for (uint32_t i = 0; i < (by_rank ? t->world : t->ndomains); i++)
        for (uint32_t j = 0; j < (by_rank ? t->world : t->ndomains); j++) {
            double v = by_rank ? (double)t->rank_matrix[(size_t)i * t->world + j]
                               : (double)t->dom_matrix[(size_t)i * t->ndomains + j];
            if (v <= 0) continue;
            size_t k = (size_t)(i / group) * n + j / group;
            m[k] += v;
            intra[k] |= by_rank ? T->domain_of[i] == T->domain_of[j] : i == j;
        }
    for (size_t k = 0; k < (size_t)n * n; k++)
        if (m[k] > max) max = m[k];
    char title[160], a[32];
    snprintf(title, sizeof title, "traffic, sender (row) x receiver (column), by %s%s", by_rank ? "rank" : "NVLink domain",
             group > 1 ? " group" : "");
    text(f, x0, y0 - 24, 13, "start", "#000", title);
    double c = size / (n ? n : 1);
    rect(f, x0, y0, size, size, "#f7f7f7");
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++) {
            double v = m[(size_t)i * n + j];
            if (v <= 0) continue;
            /* log scale over four decades below the largest cell */
            double s = 1 + log10(v / max) / 4;
            char col[16];
            if (intra[(size_t)i * n + j]) shade(col, sizeof col, 0.15 + 0.85 * s, 0, 109, 44);
            else shade(col, sizeof col, 0.15 + 0.85 * s, 8, 81, 156);
            rect(f, x0 + j * c, y0 + i * c, c > 1.2 ? c - (c > 6 ? 0.5 : 0) : c, c > 1.2 ? c - (c > 6 ? 0.5 : 0) : c,
                 col);
        }
    /* domain boundaries when drawn by rank */
    if (by_rank)
        for (uint32_t i = 1; i < n; i++)
            if (T->domain_of[i] != T->domain_of[i - 1]) {
                fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#bdbdbd\" stroke-width=\"0.6\"/>\n",
                        x0 + i * c, y0, x0 + i * c, y0 + size);
                fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#bdbdbd\" stroke-width=\"0.6\"/>\n",
                        x0, y0 + i * c, x0 + size, y0 + i * c);
            }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#737373\"/>\n", x0, y0,
            size, size);
    char lab[64];
    snprintf(lab, sizeof lab, "%u", n - 1);
    text(f, x0, y0 - 6, 10, "start", "#525252", "0");
    text(f, x0 + size, y0 - 6, 10, "end", "#525252", lab);
    text(f, x0 - 4, y0 + 9, 10, "end", "#525252", "0");
    text(f, x0 - 4, y0 + size, 10, "end", "#525252", lab);
    rect(f, x0, y0 + size + 10, 10, 10, "#08519c");
    text(f, x0 + 14, y0 + size + 19, 11, "start", "#252525", "network");
    rect(f, x0 + 80, y0 + size + 10, 10, 10, "#006d2c");
    text(f, x0 + 94, y0 + size + 19, 11, "start", "#252525", "NVLink");
    snprintf(lab, sizeof lab, "darkest cell %s (log scale)", hb(a, sizeof a, max));
    text(f, x0 + 150, y0 + size + 19, 11, "start", "#252525", lab);
    free(m);
    free(intra);
}

/* ---- per-NIC load (seconds at NIC bandwidth) against the bound ---- */
static void draw_nics(FILE *f, const rs_plan *P, const rs_cost_report *r, double x0, double y0, double w, double h)
{
    const rs_cost_traffic *t = &r->traffic;
    double bps = r->params.nic_gbps * 1e9 / 8;
    uint32_t *ranks = rs_xmalloc((t->world + 1) * sizeof *ranks), n = 0;
    for (uint32_t q = 0; q < t->world; q++)
        if (t->nic_out[q] || t->nic_in[q]) ranks[n++] = q;
    text(f, x0, y0 - 24, 13, "start", "#000", "NIC load (bytes / NIC bandwidth) per rank using its NIC");
    uint32_t group = n > 300 ? (n + 299) / 300 : 1, nb = (n + group - 1) / group;
    double max = r->bound.bound_s > r->plan.time_s ? r->bound.bound_s : r->plan.time_s;
    for (uint32_t q = 0; q < n; q++) {
        double o = t->nic_out[ranks[q]] / bps, i = t->nic_in[ranks[q]] / bps;
        if (o > max) max = o;
        if (i > max) max = i;
    }
    if (!(max > 0)) max = 1;
    max *= 1.08;
    rect(f, x0, y0, w, h, "#fcfcfc");
    double step = nice_step(max, 5);
    char a[32];
    for (double v = 0; v <= max; v += step) {
        double y = y0 + h - h * v / max;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", x0, y, x0 + w, y);
        text(f, x0 - 4, y + 4, 10, "end", "#525252", hs(a, sizeof a, v));
    }
    double bw = nb ? w / nb : w;
    for (uint32_t b = 0; b < nb; b++) {
        double o = 0, i = 0;
        for (uint32_t q = b * group; q < (b + 1) * group && q < n; q++) {
            double oo = t->nic_out[ranks[q]] / bps, ii = t->nic_in[ranks[q]] / bps;
            if (oo > o) o = oo;
            if (ii > i) i = ii;
        }
        double half = bw > 3 ? bw * 0.42 : bw / 2;
        if (o > 0) rect(f, x0 + b * bw + (bw > 3 ? bw * 0.08 : 0), y0 + h - h * o / max, half, h * o / max, "#6baed6");
        if (i > 0) rect(f, x0 + b * bw + bw / 2, y0 + h - h * i / max, half, h * i / max, "#fd8d3c");
    }
    double yb = y0 + h - h * r->bound.bound_s / max, ym = y0 + h - h * r->plan.time_s / max;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#252525\" stroke-dasharray=\"6,3\" "
            "stroke-width=\"1.2\"/>\n",
            x0, yb, x0 + w, yb);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2171b5\" stroke-dasharray=\"2,2\" "
            "stroke-width=\"1.2\"/>\n",
            x0, ym, x0 + w, ym);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#737373\"/>\n", x0, y0,
            w, h);
    char lab[96];
    snprintf(lab, sizeof lab, "%u ranks%s", n, group > 1 ? " (each bar: the busiest of a group)" : "");
    text(f, x0 + w / 2, y0 + h + 16, 11, "middle", "#525252", lab);
    rect(f, x0, y0 + h + 24, 10, 10, "#6baed6");
    text(f, x0 + 14, y0 + h + 33, 11, "start", "#252525", "out");
    rect(f, x0 + 50, y0 + h + 24, 10, 10, "#fd8d3c");
    text(f, x0 + 64, y0 + h + 33, 11, "start", "#252525", "in");
    snprintf(lab, sizeof lab, "- - lower bound %s", hs(a, sizeof a, r->bound.bound_s));
    text(f, x0 + 100, y0 + h + 33, 11, "start", "#252525", lab);
    snprintf(lab, sizeof lab, "\xc2\xb7\xc2\xb7 modeled %s", hs(a, sizeof a, r->plan.time_s));
    text(f, x0 + 290, y0 + h + 33, 11, "start", "#2171b5", lab);
    (void)P;
    free(ranks);
}

/* ---- step timeline: sampled ranks, a NET and an NVL row each; light: step in progress (waiting for
 * its peers, packing, unpacking), dark: its messages moving (first message started to all done) ---- */
#define TL_PX 900
static double draw_timeline(FILE *f, const rs_cost_report *r, double x0, double y0)
{
    const rs_cost_sim *s = &r->plan;
    uint32_t world = r->traffic.world;
    text(f, x0, y0 - 24, 13, "start", "#000", "step timeline (modeled): NET and NVL lane of each shown rank");
    if (!s->steps || !s->nsteps || !(s->time_s > 0)) {
        text(f, x0, y0, 11, "start", "#525252", "no steps");
        return y0 + 20;
    }
    uint8_t *has = rs_xcalloc(world + 1, 1);
    uint32_t nwith = 0;
    for (uint64_t k = 0; k < s->nsteps; k++)
        if (!has[s->steps[k].rank]) has[s->steps[k].rank] = 1, nwith++;
    /* rows: every rank with steps when few, else an even sample plus the busiest link's rank */
    uint32_t maxrows = 48, *rows = rs_xmalloc((maxrows + 2) * sizeof *rows), nrows = 0;
    uint32_t *with = rs_xmalloc((nwith + 1) * sizeof *with), nw = 0;
    for (uint32_t q = 0; q < world; q++)
        if (has[q]) with[nw++] = q;
    if (nw <= maxrows)
        for (uint32_t i = 0; i < nw; i++) rows[nrows++] = with[i];
    else {
        int busy_in = 0;
        for (uint32_t i = 0; i < maxrows - 1; i++) {
            uint32_t q = with[(uint64_t)i * nw / (maxrows - 1)];
            if (nrows && rows[nrows - 1] == q) continue;
            rows[nrows++] = q;
            busy_in |= q == s->busiest_rank;
        }
        if (!busy_in && has[s->busiest_rank]) {
            uint32_t i = nrows;
            while (i > 0 && rows[i - 1] > s->busiest_rank) rows[i] = rows[i - 1], i--;
            rows[i] = s->busiest_rank;
            nrows++;
        }
    }
    int32_t *row_of = rs_xmalloc((world + 1) * sizeof *row_of);
    for (uint32_t q = 0; q < world; q++) row_of[q] = -1;
    for (uint32_t i = 0; i < nrows; i++) row_of[rows[i]] = (int32_t)i;
    /* per row and lane, each pixel column: 0 idle, 1 a step in progress, 2 messages moving */
    uint8_t *px = rs_xcalloc((size_t)nrows * 2 * TL_PX + 1, 1);
    double scale = TL_PX / s->time_s;
    for (uint64_t k = 0; k < s->nsteps; k++) {
        const rs_cost_step_time *st = &s->steps[k];
        if (row_of[st->rank] < 0) continue;
        uint8_t *line = px + ((size_t)row_of[st->rank] * 2 + (st->lane ? 1 : 0)) * TL_PX;
        int a = (int)floor(st->t_ready * scale), b = (int)ceil(st->t_done * scale);
        int c = (int)floor(st->t_move * scale), d = (int)ceil(st->t_xfer * scale);
        if (b <= a) b = a + 1;
        for (int x = a; x < b && x < TL_PX; x++)
            if (x >= 0 && line[x] < 1) line[x] = 1;
        if (d <= c) d = c + 1;
        for (int x = c; x < d && x < TL_PX; x++)
            if (x >= 0) line[x] = 2;
    }
    double rh = 7, gap = 4;
    char lab[64], a[32];
    for (uint32_t i = 0; i < nrows; i++) {
        double y = y0 + i * (2 * rh + gap);
        snprintf(lab, sizeof lab, "rank %u", rows[i]);
        text(f, x0 - 6, y + 11, 9, "end", "#525252", lab);
        for (int lane = 0; lane < 2; lane++) {
            const uint8_t *line = px + ((size_t)i * 2 + lane) * TL_PX;
            const char *col[3] = {NULL, lane ? "#c7e9c0" : "#c6dbef", lane ? "#238b45" : "#2171b5"};
            for (int x = 0; x < TL_PX;) {
                int e = x;
                while (e < TL_PX && line[e] == line[x]) e++;
                if (line[x]) rect(f, x0 + x, y + lane * rh, e - x, rh - 0.5, col[line[x]]);
                x = e;
            }
        }
    }
    double yend = y0 + nrows * (2 * rh + gap);
    /* axis */
    double step = nice_step(s->time_s, 8);
    for (double v = 0; v <= s->time_s * 1.0001; v += step) {
        double x = x0 + v * scale;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d9d9d9\"/>\n", x, y0 - 4, x, yend);
        text(f, x, yend + 12, 10, "middle", "#525252", hs(a, sizeof a, v));
    }
    if (r->bound.bound_s > 0 && r->bound.bound_s <= s->time_s) {
        double x = x0 + r->bound.bound_s * scale;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#252525\" stroke-dasharray=\"6,3\"/>\n",
                x, y0 - 8, x, yend);
    }
    double ly = yend + 28;
    rect(f, x0, ly - 9, 10, 10, "#2171b5");
    text(f, x0 + 14, ly, 11, "start", "#252525", "NET lane transferring");
    rect(f, x0 + 160, ly - 9, 10, 10, "#238b45");
    text(f, x0 + 174, ly, 11, "start", "#252525", "NVL lane transferring");
    rect(f, x0 + 320, ly - 9, 10, 10, "#c6dbef");
    text(f, x0 + 334, ly, 11, "start", "#252525", "step waiting for peers, packing or unpacking");
    text(f, x0 + 610, ly, 11, "start", "#252525", "- - lower bound");
    if (nw > nrows) {
        snprintf(lab, sizeof lab, "%u of %u ranks shown", nrows, nw);
        text(f, x0 + TL_PX, ly, 11, "end", "#525252", lab);
    }
    free(px);
    free(row_of);
    free(with);
    free(rows);
    free(has);
    return ly + 10;
}

int rs_stats_svg(const rs_plan *P, const rs_cost_report *r, const char *path, char *err, size_t errlen)
{
    /* the body is written to a memory stream first: the height depends on the timeline rows */
    char *body = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&body, &blen);
    if (!m) {
        snprintf(err, errlen, "--svg: out of memory");
        return -1;
    }
    char a[32], b[32], line[256];
    const rs_topology *T = &P->layout.topo;
    snprintf(line, sizeof line, "reshard plan: %u ranks in %u NVLink domains, %s over the network, %s over NVLink",
             T->world, T->ndomains, hb(a, sizeof a, (double)r->traffic.net_bytes),
             hb(b, sizeof b, (double)r->traffic.nvl_bytes));
    text(m, 20, 26, 16, "start", "#000", line);
    snprintf(line, sizeof line,
             "modeled with NIC %g Gb/s, NVLink %g Gb/s, HBM %g Gb/s per GPU, %g us per message (docs/cost-model.md)",
             r->params.nic_gbps, r->params.nvlink_gbps, r->params.hbm_gbps, r->params.latency_us);
    text(m, 20, 44, 11, "start", "#525252", line);
    double y = draw_times(m, r, 58);
    double top = y + 56, size = 360;
    draw_matrix(m, P, r, 60, top, size);
    draw_nics(m, P, r, 520, top, W - 520 - 30, size);
    double yend = draw_timeline(m, r, 120, top + size + 90);
    fclose(m);
    int h = (int)ceil(yend + 10);
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" %s>\n"
                      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
                      W, h, W, h, FONT, W, h);
    static const char tail[] = "</svg>\n";
    rs_wpart parts[3] = {{head, (size_t)hn}, {body, blen}, {tail, sizeof tail - 1}};
    /* written whole or not at all, as plan.bin is */
    char why[512];
    int rc = rs_write_file(path, parts, 3, why, sizeof why);
    if (rc) snprintf(err, errlen, "--svg: %s", why);
    free(body);
    return rc;
}
