/* cmd_stats.c - `reshardc stats PLAN`: traffic of a plan, its lower bound, its modeled time and the
 * two baselines' modeled times (cost.c), as text, as JSON (--json) or as a picture (--svg FILE). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cost.h"
#include "plan.h"
#include "util.h"

static const char stats_usage[] =
    "usage: reshardc stats PLAN [--json] [--svg FILE] [--nic-gbps X] [--nvlink-gbps X] [--hbm-gbps X]\n"
    "                           [--latency-us X] [--bucket-bytes N] [--gb-roots K] [--merge-net-steps]\n"
    "Prints the plan's traffic, the lower bound of its layout, its modeled time, and the modeled times\n"
    "of two baselines built from the same layout (gather-then-broadcast, direct). Bandwidths are per\n"
    "GPU per direction in Gb/s; NIC and NVLink default to the plan's topology, HBM to 24000 (3 TB/s),\n"
    "latency to 5 us per message, buckets of the baselines to 1 GiB; --gb-roots K broadcasts from K\n"
    "training ranks instead of one (a what-if; NeMo RL uses one). --merge-net-steps prices the plan as if\n"
    "each rank's NET steps were one group (a diagnostic of what step barriers cost; ignores staging).\n"
    "See docs/cost-model.md.\n";

static int parse_pos(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0) {
        fprintf(stderr, "reshardc stats: %s wants a non-negative number, not '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Bytes with a decimal unit (kB = 1e3, MB = 1e6, ...). */
static const char *hbytes(char *buf, size_t n, double b)
{
    static const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int i = 0;
    while (b >= 1000 && i < 5) {
        b /= 1000;
        i++;
    }
    snprintf(buf, n, i ? "%.3g %s" : "%.0f %s", b, u[i]);
    return buf;
}

/* Seconds with a unit that keeps 3-4 significant digits. */
static const char *hsec(char *buf, size_t n, double s)
{
    if (s >= 1) snprintf(buf, n, "%.3f s", s);
    else if (s >= 1e-3) snprintf(buf, n, "%.3f ms", s * 1e3);
    else snprintf(buf, n, "%.3f us", s * 1e6);
    return buf;
}

typedef struct {
    uint64_t max_out, max_in, max_nic, max_rank;
    uint32_t max_out_rank, max_in_rank, max_rank_rank;
    double mean_out, mean_in, mean_nic, mean_rank;
    uint32_t n_out, n_in, n_nic, n_rank;
} nic_summary;

static void summarize(const rs_cost_traffic *t, nic_summary *s)
{
    memset(s, 0, sizeof *s);
    double so = 0, si = 0, sn = 0, sr = 0;
    for (uint32_t r = 0; r < t->world; r++) {
        uint64_t o = t->nic_out[r], i = t->nic_in[r], m = o > i ? o : i;
        uint64_t all = o + i + t->nvl_out[r] + t->nvl_in[r];
        if (o) {
            so += (double)o;
            s->n_out++;
            if (o > s->max_out) s->max_out = o, s->max_out_rank = r;
        }
        if (i) {
            si += (double)i;
            s->n_in++;
            if (i > s->max_in) s->max_in = i, s->max_in_rank = r;
        }
        if (m) {
            sn += (double)m;
            s->n_nic++;
            if (m > s->max_nic) s->max_nic = m;
        }
        if (all) {
            sr += (double)all;
            s->n_rank++;
            if (all > s->max_rank) s->max_rank = all, s->max_rank_rank = r;
        }
    }
    s->mean_out = s->n_out ? so / s->n_out : 0;
    s->mean_in = s->n_in ? si / s->n_in : 0;
    s->mean_nic = s->n_nic ? sn / s->n_nic : 0;
    s->mean_rank = s->n_rank ? sr / s->n_rank : 0;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

static void print_json(const rs_plan *P, const rs_cost_report *r)
{
    const rs_cost_traffic *t = &r->traffic;
    const rs_cost_bound *b = &r->bound;
    const rs_cost_params *p = &r->params;
    nic_summary s;
    summarize(t, &s);
    printf("{\n");
    printf("  \"world\": %u,\n  \"domains\": %u,\n", P->layout.topo.world, P->layout.topo.ndomains);
    printf("  \"params\": {\"nic_gbps\": %.12g, \"nvlink_gbps\": %.12g, \"hbm_gbps\": %.12g, \"latency_us\": %.12g, "
           "\"bucket_bytes\": %llu, \"chunk_bytes\": %llu, \"gb_roots\": %u, \"merge_net_steps\": %s},\n",
           p->nic_gbps, p->nvlink_gbps, p->hbm_gbps, p->latency_us, (unsigned long long)p->bucket_bytes,
           (unsigned long long)p->chunk_bytes, p->gb_roots, p->merge_net_steps ? "true" : "false");
    printf("  \"lower_bound_s\": %.12g,\n  \"dst_bound_s\": %.12g,\n  \"src_bound_s\": %.12g,\n", b->bound_s, b->dst_s,
           b->src_s);
    printf("  \"lower_bound_no_relay_s\": %.12g,\n  \"src_bound_no_relay_s\": %.12g,\n", b->bound_norelay_s,
           b->src_norelay_s);
    printf("  \"holder_bound_no_relay_s\": %.12g,\n", b->holder_norelay_s);
    if (b->holder_rank == RS_NONE) printf("  \"holder_rank\": null,\n");
    else printf("  \"holder_rank\": %u,\n", b->holder_rank);
    printf("  \"holder_group_bound_no_relay_s\": %.12g,\n", b->group_norelay_s);
    if (b->group_first == RS_NONE) printf("  \"holder_group_first_rank\": null,\n");
    else printf("  \"holder_group_first_rank\": %u,\n", b->group_first);
    printf("  \"holder_group_ranks\": %u,\n  \"holder_group_bytes\": %llu,\n", b->group_nranks,
           (unsigned long long)b->group_bytes);
    if (b->dst_domain == RS_NONE) printf("  \"bound_domain\": null,\n");
    else printf("  \"bound_domain\": %u,\n", b->dst_domain);
    printf("  \"bound_domain_bytes\": %llu,\n  \"bound_domain_gpus\": %u,\n", (unsigned long long)b->dst_domain_bytes,
           b->dst_domain_gpus);
    printf("  \"model_bytes\": %llu,\n  \"need_bytes\": %llu,\n  \"distinct_bytes\": %llu,\n",
           (unsigned long long)b->model_bytes, (unsigned long long)b->need_bytes,
           (unsigned long long)b->distinct_bytes);
    printf("  \"source_gpus\": %u,\n  \"destination_gpus\": %u,\n", b->nsrc_gpus, b->ndst_gpus);
    printf("  \"modeled_s\": %.12g,\n  \"ratio_to_bound\": %.12g,\n", r->plan.time_s, ratio(r->plan.time_s, b->bound_s));
    printf("  \"gather_broadcast_s\": %.12g,\n  \"direct_s\": %.12g,\n", r->gather_broadcast.time_s, r->direct.time_s);
    printf("  \"speedup_gather_broadcast\": %.12g,\n  \"speedup_direct\": %.12g,\n",
           ratio(r->gather_broadcast.time_s, r->plan.time_s), ratio(r->direct.time_s, r->plan.time_s));
    printf("  \"net_bytes\": %llu,\n  \"nvl_bytes\": %llu,\n  \"relay_bytes\": %llu,\n",
           (unsigned long long)t->net_bytes, (unsigned long long)t->nvl_bytes, (unsigned long long)t->relay_bytes);
    printf("  \"pack_bytes\": %llu,\n  \"unpack_bytes\": %llu,\n  \"copy_bytes\": %llu,\n",
           (unsigned long long)t->pack_bytes, (unsigned long long)t->unpack_bytes, (unsigned long long)t->copy_bytes);
    printf("  \"messages\": %llu,\n  \"steps\": %llu,\n  \"net_steps\": %llu,\n  \"nvl_steps\": %llu,\n",
           (unsigned long long)t->nmsgs, (unsigned long long)t->nsteps, (unsigned long long)t->nsteps_lane[RS_LANE_NET],
           (unsigned long long)t->nsteps_lane[RS_LANE_NVL]);
    printf("  \"max_nic_bytes\": %llu,\n  \"mean_nic_bytes\": %.12g,\n", (unsigned long long)s.max_nic, s.mean_nic);
    printf("  \"max_nic_out_bytes\": %llu,\n  \"mean_nic_out_bytes\": %.12g,\n", (unsigned long long)s.max_out,
           s.mean_out);
    printf("  \"max_nic_in_bytes\": %llu,\n  \"mean_nic_in_bytes\": %.12g,\n", (unsigned long long)s.max_in, s.mean_in);
    printf("  \"max_rank_bytes\": %llu,\n  \"mean_rank_bytes\": %.12g,\n", (unsigned long long)s.max_rank,
           s.mean_rank);
    printf("  \"busiest_link\": {\"rank\": %u, \"link\": \"%s\", \"busy_s\": %.12g}\n", r->plan.busiest_rank,
           rs_cost_link_name(r->plan.busiest_kind), r->plan.busiest_s);
    printf("}\n");
}

static void print_text(const rs_plan *P, const rs_cost_report *r)
{
    const rs_cost_traffic *t = &r->traffic;
    const rs_cost_bound *b = &r->bound;
    const rs_cost_params *p = &r->params;
    nic_summary s;
    summarize(t, &s);
    char x[32], y[32], z[32];
    printf("plan: %u ranks in %u NVLink domains; %llu steps (%llu NET, %llu NVL), %llu messages\n",
           P->layout.topo.world, P->layout.topo.ndomains, (unsigned long long)t->nsteps,
           (unsigned long long)t->nsteps_lane[RS_LANE_NET], (unsigned long long)t->nsteps_lane[RS_LANE_NVL],
           (unsigned long long)t->nmsgs);
    printf("model bytes      %-10s  distinct bytes any destination needs (%u source GPUs, %u destination GPUs)\n",
           hbytes(x, sizeof x, (double)b->model_bytes), b->nsrc_gpus, b->ndst_gpus);
    printf("\ntraffic\n");
    printf("  network        %-10s  between NVLink domains, over NICs\n", hbytes(x, sizeof x, (double)t->net_bytes));
    printf("  NVLink         %-10s  inside domains\n", hbytes(x, sizeof x, (double)t->nvl_bytes));
    printf("  relayed        %-10s  forwarded to other domains by destination ranks\n",
           hbytes(x, sizeof x, (double)t->relay_bytes));
    printf("  pack/unpack    %s / %s, local copies %s\n", hbytes(x, sizeof x, (double)t->pack_bytes),
           hbytes(y, sizeof y, (double)t->unpack_bytes), hbytes(z, sizeof z, (double)t->copy_bytes));
    printf("  NIC out        max %-10s (rank %u)  mean %-10s over %u sending ranks\n",
           hbytes(x, sizeof x, (double)s.max_out), s.max_out_rank, hbytes(y, sizeof y, s.mean_out), s.n_out);
    printf("  NIC in         max %-10s (rank %u)  mean %-10s over %u receiving ranks\n",
           hbytes(x, sizeof x, (double)s.max_in), s.max_in_rank, hbytes(y, sizeof y, s.mean_in), s.n_in);
    printf("  per rank       max %-10s (rank %u)  mean %-10s over %u ranks (sent + received, all links)\n",
           hbytes(x, sizeof x, (double)s.max_rank), s.max_rank_rank, hbytes(y, sizeof y, s.mean_rank), s.n_rank);
    printf("\ntime\n");
    if (b->dst_domain != RS_NONE)
        printf("  lower bound    %-10s  destination domain %u: %s through %u NICs (%s); source side %s\n",
               hsec(x, sizeof x, b->bound_s), b->dst_domain, hbytes(y, sizeof y, (double)b->dst_domain_bytes),
               b->dst_domain_gpus, hsec(z, sizeof z, b->dst_s), hsec((char[32]){0}, 32, b->src_s));
    else
        printf("  lower bound    %-10s  nothing crosses the network\n", hsec(x, sizeof x, b->bound_s));
    if (b->bound_norelay_s > b->bound_s * (1 + 1e-9)) {
        if (b->holder_norelay_s >= b->bound_norelay_s && b->holder_rank != RS_NONE)
            printf("                 %-10s  without relays: rank %u alone holds %s that other domains need\n",
                   hsec(x, sizeof x, b->bound_norelay_s), b->holder_rank, hbytes(y, sizeof y, (double)b->holder_bytes));
        else
            printf("                 %-10s  without relays (each byte leaves the sources once per domain needing it)\n",
                   hsec(x, sizeof x, b->bound_norelay_s));
    }
    if (b->group_first != RS_NONE && b->group_norelay_s > b->bound_s * (1 + 1e-9) &&
        b->group_norelay_s > b->bound_norelay_s * (1 + 1e-9))
        printf("                 %-10s  without relays: %u ranks (lowest: %u) alone hold bytes other domains need, %s "
               "per NIC (modeled: %.2fx of it)\n",
               hsec(x, sizeof x, b->group_norelay_s), b->group_nranks, b->group_first,
               hbytes(y, sizeof y, (double)b->group_bytes / b->group_nranks),
               ratio(r->plan.time_s, b->group_norelay_s));
    printf("  modeled        %-10s  %.2fx the bound  [modeled%s]\n", hsec(x, sizeof x, r->plan.time_s),
           ratio(r->plan.time_s, b->bound_s), p->merge_net_steps ? ", NET steps merged per rank: a diagnostic" : "");
    printf("  busiest link   %s of rank %u: busy %s (%.0f%% of the modeled time)\n",
           rs_cost_link_name(r->plan.busiest_kind), r->plan.busiest_rank, hsec(x, sizeof x, r->plan.busiest_s),
           100 * ratio(r->plan.busiest_s, r->plan.time_s));
    printf("\nbaselines (same layout, same model) [modeled]\n");
    printf("  gather-broadcast %-10s  this plan is %.2fx faster\n", hsec(x, sizeof x, r->gather_broadcast.time_s),
           ratio(r->gather_broadcast.time_s, r->plan.time_s));
    printf("  direct           %-10s  this plan is %.2fx faster\n", hsec(x, sizeof x, r->direct.time_s),
           ratio(r->direct.time_s, r->plan.time_s));
    printf("\nmodel: NIC %g Gb/s, NVLink %g Gb/s, HBM %g Gb/s per GPU; %g us per message; gather-broadcast buckets %s",
           p->nic_gbps, p->nvlink_gbps, p->hbm_gbps, p->latency_us, hbytes(x, sizeof x, (double)p->bucket_bytes));
    if (p->gb_roots > 1) printf(" from %u roots", p->gb_roots);
    printf("\n");
}

int rs_cmd_stats(int argc, char **argv)
{
    const char *path = NULL, *svg = NULL;
    int json = 0, merge = 0;
    double nic = -1, nvl = -1, hbm = -1, lat = -1, bucket = -1, roots = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double *num = !strcmp(a, "--nic-gbps")      ? &nic
                      : !strcmp(a, "--nvlink-gbps") ? &nvl
                      : !strcmp(a, "--hbm-gbps")    ? &hbm
                      : !strcmp(a, "--latency-us")  ? &lat
                      : !strcmp(a, "--bucket-bytes") ? &bucket
                      : !strcmp(a, "--gb-roots")    ? &roots
                                                    : NULL;
        if (num) {
            if (i + 1 >= argc) {
                fprintf(stderr, "reshardc stats: %s needs a value\n%s", a, stats_usage);
                return 2;
            }
            if (parse_pos(a, argv[++i], num)) return 2;
        } else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--merge-net-steps"))
            merge = 1;
        else if (!strcmp(a, "--svg")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "reshardc stats: --svg needs a file name\n%s", stats_usage);
                return 2;
            }
            svg = argv[++i];
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(stats_usage, stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "reshardc stats: unknown option '%s'\n%s", a, stats_usage);
            return 2;
        } else if (path) {
            fprintf(stderr, "reshardc stats: one plan at a time\n%s", stats_usage);
            return 2;
        } else
            path = a;
    }
    if (!path) {
        fputs(stats_usage, stderr);
        return 2;
    }
    const char *zero = nic == 0 ? "--nic-gbps" : nvl == 0 ? "--nvlink-gbps" : hbm == 0 ? "--hbm-gbps"
                     : bucket == 0 ? "--bucket-bytes" : NULL;
    if (zero) {
        fprintf(stderr, "reshardc stats: %s must be positive, not 0\n", zero);
        return 2;
    }
    if (roots >= 0 && (roots < 1 || roots > 16 || roots != floor(roots))) {
        fprintf(stderr, "reshardc stats: --gb-roots wants a whole number from 1 to 16, not %g\n", roots);
        return 2;
    }
    if (svg && rs_same_file(svg, path)) {
        fprintf(stderr, "reshardc stats: --svg %s is the plan '%s': the picture would replace it\n", svg, path);
        return 2;
    }
    rs_plan P;
    char err[512];
    if (rs_plan_load_file(path, -1, &P, err, sizeof err)) {
        fprintf(stderr, "reshardc stats: %s\n", err);
        return 1;
    }
    rs_cost_params p;
    rs_cost_params_default(&p, &P.layout.topo);
    if (nic > 0) p.nic_gbps = nic;
    if (nvl > 0) p.nvlink_gbps = nvl;
    if (hbm > 0) p.hbm_gbps = hbm;
    if (lat >= 0) p.latency_us = lat;
    if (bucket > 0) p.bucket_bytes = (uint64_t)bucket;
    if (roots > 0) p.gb_roots = (uint32_t)roots;
    p.merge_net_steps = merge;
    rs_cost_report r;
    if (rs_cost_report_build(&P, &p, &r, err, sizeof err)) {
        fprintf(stderr, "reshardc stats: %s: %s\n", path, err);
        rs_plan_free(&P);
        return 1;
    }
    int rc = 0;
    if (svg && rs_stats_svg(&P, &r, svg, err, sizeof err)) {
        fprintf(stderr, "reshardc stats: %s\n", err);
        rc = 1;
    }
    if (json) print_json(&P, &r);
    else print_text(&P, &r);
    rs_cost_report_free(&r);
    rs_plan_free(&P);
    return rc;
}
