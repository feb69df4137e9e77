/* gen_big_layout.c - writes the front end's benchmark layout: a synthetic MoE larger than MODELS.md's
 * 2.5 T case (130 layers x 512 experts x 3 weights plus attention: 200,333 tensors, 600,606 pieces,
 * 1,536 ranks). Loop form by default (what people write); --flat writes every statement out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] = "usage: gen_big_layout [--layers N] [--experts E] [--flat] [-o FILE]\n"
                            "  defaults: 130 layers, 512 experts (multiple of 64), loop form, stdout\n";

/* Dimensions: H 8192, expert intermediate 2048, 64 q heads / 8 kv heads of 128, vocab 163840.
 * Training: PP16 x DP8 x TP8 (dense) and PP16 x EP64 (experts) on ranks 0..1024.
 * Inference: DP8 x TP64 on ranks 1024..1536 (kv heads: 8 groups x 8 replicas). */
enum { H = 8192, I = 2048, V = 163840, NH = 64, NKV = 8, HD = 128, PP = 16, EP = 64, TP = 64 };

static void loops(FILE *f, int L, int E)
{
    fprintf(f, "const L = %d, E = %d, H = %d, I = %d, V = %d, NH = %d, NKV = %d, HD = %d, PP = %d, EP = %d, TP = %d;\n",
            L, E, H, I, V, NH, NKV, HD, PP, EP, TP);
    fputs("mesh train     [pp = PP, dp = 8, tp = 8]       = ranks 0..1024;\n"
          "mesh train_moe [pp = PP, ep = EP]              = ranks 0..1024;\n"
          "mesh infer     [dp = 8, tp = TP]               = ranks 1024..1536;\n"
          "mesh infer_kv  [dp = 8, kv = NKV, r = TP / NKV] = ranks 1024..1536;\n"
          "tensor embed : bf16[V, H];\n"
          "src embed on train { pp = 0, tp: shard(0) } as \"embedding.word_embeddings.weight\";\n"
          "dst embed on infer { tp: shard(0) } as \"model.embed_tokens.weight\";\n"
          "tensor final_norm : bf16[H];\n"
          "src final_norm on train { pp = PP - 1 } as \"decoder.final_layernorm.weight\";\n"
          "dst final_norm on infer as \"model.norm.weight\";\n"
          "tensor lm_head : bf16[V, H];\n"
          "src lm_head on train { pp = PP - 1, tp: shard(0) } as \"output_layer.weight\";\n"
          "dst lm_head on infer { tp: shard(0) } as \"lm_head.weight\";\n"
          "for l in 0..L {\n"
          "  const S = l * PP / L, Q = NH / NKV * HD;\n"
          "  tensor \"qkv.{l}\" : bf16[NKV, Q + 2 * HD, H];\n"
          "  src \"qkv.{l}\" on train { pp = S, tp: shard(0) } as \"decoder.layers.{l}.self_attention.linear_qkv.weight\";\n"
          "  dst \"qkv.{l}\"[:, 0:Q, :] on infer_kv { kv: shard(0), r: shard(1) } as \"model.layers.{l}.self_attn.qkv_proj.weight\" : [3 * HD, H] [0:HD, :];\n"
          "  dst \"qkv.{l}\"[:, Q:Q + HD, :] on infer_kv { kv: shard(0) } as \"model.layers.{l}.self_attn.qkv_proj.weight\" : [3 * HD, H] [HD:2 * HD, :];\n"
          "  dst \"qkv.{l}\"[:, Q + HD:, :] on infer_kv { kv: shard(0) } as \"model.layers.{l}.self_attn.qkv_proj.weight\" : [3 * HD, H] [2 * HD:, :];\n"
          "  tensor \"o.{l}\" : bf16[H, NH * HD];\n"
          "  src \"o.{l}\" on train { pp = S, tp: shard(1) } as \"decoder.layers.{l}.self_attention.linear_proj.weight\";\n"
          "  dst \"o.{l}\" on infer { tp: shard(1) } as \"model.layers.{l}.self_attn.o_proj.weight\";\n"
          "  tensor \"ln1.{l}\" : bf16[H];\n"
          "  src \"ln1.{l}\" on train { pp = S } as \"decoder.layers.{l}.self_attention.linear_qkv.layer_norm_weight\";\n"
          "  dst \"ln1.{l}\" on infer as \"model.layers.{l}.input_layernorm.weight\";\n"
          "  tensor \"ln2.{l}\" : bf16[H];\n"
          "  src \"ln2.{l}\" on train { pp = S } as \"decoder.layers.{l}.pre_mlp_layernorm.weight\";\n"
          "  dst \"ln2.{l}\" on infer as \"model.layers.{l}.post_attention_layernorm.weight\";\n"
          "  tensor \"router.{l}\" : bf16[E, H];\n"
          "  src \"router.{l}\" on train { pp = S } as \"decoder.layers.{l}.mlp.router.weight\";\n"
          "  dst \"router.{l}\" on infer as \"model.layers.{l}.mlp.gate.weight\";\n"
          "  for e in 0..E {\n"
          "    const J = e % (E / EP), R = e / (E / EP);\n"
          "    tensor \"gate.{l}.{e}\" : bf16[I, H];\n"
          "    tensor \"up.{l}.{e}\" : bf16[I, H];\n"
          "    tensor \"down.{l}.{e}\" : bf16[H, I];\n"
          "    src \"gate.{l}.{e}\" on train_moe { pp = S, ep = R } as \"decoder.layers.{l}.mlp.experts.linear_fc1.weight{J}\" : [2 * I, H] [0:I, :];\n"
          "    src \"up.{l}.{e}\" on train_moe { pp = S, ep = R } as \"decoder.layers.{l}.mlp.experts.linear_fc1.weight{J}\" : [2 * I, H] [I:2 * I, :];\n"
          "    src \"down.{l}.{e}\" on train_moe { pp = S, ep = R } as \"decoder.layers.{l}.mlp.experts.linear_fc2.weight{J}\";\n"
          "    dst \"gate.{l}.{e}\"[0:I / 2, :] on infer { tp: shard(0) } as \"model.layers.{l}.mlp.experts.w13_weight\" : [E, 2 * I / TP, H] [e, 0:I / TP / 2, :];\n"
          "    dst \"gate.{l}.{e}\"[I / 2:, :] on infer { tp: shard(0) } as \"model.layers.{l}.mlp.experts.w13_weight\" : [E, 2 * I / TP, H] [e, I / TP / 2:I / TP, :];\n"
          "    dst \"up.{l}.{e}\"[0:I / 2, :] on infer { tp: shard(0) } as \"model.layers.{l}.mlp.experts.w13_weight\" : [E, 2 * I / TP, H] [e, I / TP:3 * I / TP / 2, :];\n"
          "    dst \"up.{l}.{e}\"[I / 2:, :] on infer { tp: shard(0) } as \"model.layers.{l}.mlp.experts.w13_weight\" : [E, 2 * I / TP, H] [e, 3 * I / TP / 2:, :];\n"
          "    dst \"down.{l}.{e}\"[0:H / 2, :] on infer { tp: shard(1) } as \"model.layers.{l}.mlp.experts.w2_weight\" : [E, H, I / TP] [e, 0:H / 2, :];\n"
          "    dst \"down.{l}.{e}\"[H / 2:, :] on infer { tp: shard(1) } as \"model.layers.{l}.mlp.experts.w2_weight\" : [E, H, I / TP] [e, H / 2:, :];\n"
          "  }\n"
          "}\n",
          f);
}

/* The same layout with every loop expanded and every expression evaluated. */
static void flat(FILE *f, int L, int E)
{
    fputs("mesh train     [pp = 16, dp = 8, tp = 8] = ranks 0..1024;\n"
          "mesh train_moe [pp = 16, ep = 64]        = ranks 0..1024;\n"
          "mesh infer     [dp = 8, tp = 64]         = ranks 1024..1536;\n"
          "mesh infer_kv  [dp = 8, kv = 8, r = 8]   = ranks 1024..1536;\n",
          f);
    fprintf(f, "tensor embed : bf16[%d, %d];\n", V, H);
    fputs("src embed on train { pp = 0, tp: shard(0) } as \"embedding.word_embeddings.weight\";\n"
          "dst embed on infer { tp: shard(0) } as \"model.embed_tokens.weight\";\n",
          f);
    fprintf(f, "tensor final_norm : bf16[%d];\n", H);
    fputs("src final_norm on train { pp = 15 } as \"decoder.final_layernorm.weight\";\n"
          "dst final_norm on infer as \"model.norm.weight\";\n",
          f);
    fprintf(f, "tensor lm_head : bf16[%d, %d];\n", V, H);
    fputs("src lm_head on train { pp = 15, tp: shard(0) } as \"output_layer.weight\";\n"
          "dst lm_head on infer { tp: shard(0) } as \"lm_head.weight\";\n",
          f);
    const int Q = NH / NKV * HD, X = I / TP;
    for (int l = 0; l < L; l++) {
        int S = l * PP / L;
        fprintf(f, "tensor \"qkv.%d\" : bf16[%d, %d, %d];\n", l, NKV, Q + 2 * HD, H);
        fprintf(f, "src \"qkv.%d\" on train { pp = %d, tp: shard(0) } as \"decoder.layers.%d.self_attention.linear_qkv.weight\";\n", l, S, l);
        fprintf(f, "dst \"qkv.%d\"[:, 0:%d, :] on infer_kv { kv: shard(0), r: shard(1) } as \"model.layers.%d.self_attn.qkv_proj.weight\" : [%d, %d] [0:%d, :];\n", l, Q, l, 3 * HD, H, HD);
        fprintf(f, "dst \"qkv.%d\"[:, %d:%d, :] on infer_kv { kv: shard(0) } as \"model.layers.%d.self_attn.qkv_proj.weight\" : [%d, %d] [%d:%d, :];\n", l, Q, Q + HD, l, 3 * HD, H, HD, 2 * HD);
        fprintf(f, "dst \"qkv.%d\"[:, %d:, :] on infer_kv { kv: shard(0) } as \"model.layers.%d.self_attn.qkv_proj.weight\" : [%d, %d] [%d:, :];\n", l, Q + HD, l, 3 * HD, H, 2 * HD);
        fprintf(f, "tensor \"o.%d\" : bf16[%d, %d];\n", l, H, NH * HD);
        fprintf(f, "src \"o.%d\" on train { pp = %d, tp: shard(1) } as \"decoder.layers.%d.self_attention.linear_proj.weight\";\n", l, S, l);
        fprintf(f, "dst \"o.%d\" on infer { tp: shard(1) } as \"model.layers.%d.self_attn.o_proj.weight\";\n", l, l);
        fprintf(f, "tensor \"ln1.%d\" : bf16[%d];\n", l, H);
        fprintf(f, "src \"ln1.%d\" on train { pp = %d } as \"decoder.layers.%d.self_attention.linear_qkv.layer_norm_weight\";\n", l, S, l);
        fprintf(f, "dst \"ln1.%d\" on infer as \"model.layers.%d.input_layernorm.weight\";\n", l, l);
        fprintf(f, "tensor \"ln2.%d\" : bf16[%d];\n", l, H);
        fprintf(f, "src \"ln2.%d\" on train { pp = %d } as \"decoder.layers.%d.pre_mlp_layernorm.weight\";\n", l, S, l);
        fprintf(f, "dst \"ln2.%d\" on infer as \"model.layers.%d.post_attention_layernorm.weight\";\n", l, l);
        fprintf(f, "tensor \"router.%d\" : bf16[%d, %d];\n", l, E, H);
        fprintf(f, "src \"router.%d\" on train { pp = %d } as \"decoder.layers.%d.mlp.router.weight\";\n", l, S, l);
        fprintf(f, "dst \"router.%d\" on infer as \"model.layers.%d.mlp.gate.weight\";\n", l, l);
        for (int e = 0; e < E; e++) {
            int J = e % (E / EP), R = e / (E / EP);
            fprintf(f, "tensor \"gate.%d.%d\" : bf16[%d, %d];\n", l, e, I, H);
            fprintf(f, "tensor \"up.%d.%d\" : bf16[%d, %d];\n", l, e, I, H);
            fprintf(f, "tensor \"down.%d.%d\" : bf16[%d, %d];\n", l, e, H, I);
            fprintf(f, "src \"gate.%d.%d\" on train_moe { pp = %d, ep = %d } as \"decoder.layers.%d.mlp.experts.linear_fc1.weight%d\" : [%d, %d] [0:%d, :];\n", l, e, S, R, l, J, 2 * I, H, I);
            fprintf(f, "src \"up.%d.%d\" on train_moe { pp = %d, ep = %d } as \"decoder.layers.%d.mlp.experts.linear_fc1.weight%d\" : [%d, %d] [%d:%d, :];\n", l, e, S, R, l, J, 2 * I, H, I, 2 * I);
            fprintf(f, "src \"down.%d.%d\" on train_moe { pp = %d, ep = %d } as \"decoder.layers.%d.mlp.experts.linear_fc2.weight%d\";\n", l, e, S, R, l, J);
            fprintf(f, "dst \"gate.%d.%d\"[0:%d, :] on infer { tp: shard(0) } as \"model.layers.%d.mlp.experts.w13_weight\" : [%d, %d, %d] [%d, 0:%d, :];\n", l, e, I / 2, l, E, 2 * X, H, e, X / 2);
            fprintf(f, "dst \"gate.%d.%d\"[%d:, :] on infer { tp: shard(0) } as \"model.layers.%d.mlp.experts.w13_weight\" : [%d, %d, %d] [%d, %d:%d, :];\n", l, e, I / 2, l, E, 2 * X, H, e, X / 2, X);
            fprintf(f, "dst \"up.%d.%d\"[0:%d, :] on infer { tp: shard(0) } as \"model.layers.%d.mlp.experts.w13_weight\" : [%d, %d, %d] [%d, %d:%d, :];\n", l, e, I / 2, l, E, 2 * X, H, e, X, 3 * X / 2);
            fprintf(f, "dst \"up.%d.%d\"[%d:, :] on infer { tp: shard(0) } as \"model.layers.%d.mlp.experts.w13_weight\" : [%d, %d, %d] [%d, %d:, :];\n", l, e, I / 2, l, E, 2 * X, H, e, 3 * X / 2);
            fprintf(f, "dst \"down.%d.%d\"[0:%d, :] on infer { tp: shard(1) } as \"model.layers.%d.mlp.experts.w2_weight\" : [%d, %d, %d] [%d, 0:%d, :];\n", l, e, H / 2, l, E, H, X, e, H / 2);
            fprintf(f, "dst \"down.%d.%d\"[%d:, :] on infer { tp: shard(1) } as \"model.layers.%d.mlp.experts.w2_weight\" : [%d, %d, %d] [%d, %d:, :];\n", l, e, H / 2, l, E, H, X, e, H / 2);
        }
    }
}

int main(int argc, char **argv)
{
    int L = 130, E = 512, is_flat = 0;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--experts") && i + 1 < argc) E = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--flat")) is_flat = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else {
            fputs(usage, strcmp(argv[i], "--help") ? stderr : stdout);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (L < 1 || E < EP || E % EP) {
        fputs("gen_big_layout: need layers >= 1 and experts a positive multiple of 64\n", stderr);
        return 2;
    }
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        perror(out);
        return 1;
    }
    fprintf(f, "# Front-end benchmark layout: %d layers x %d experts x 3 weights + attention = %d tensors,\n"
               "# %d pieces, 1536 ranks (synthetic; expert weights go to the inference side as two row halves).\n"
               "# Written by bench/gen_big_layout%s.\n",
            L, E, L * (5 + 3 * E) + 3, L * (12 + 9 * E) + 6, is_flat ? " --flat" : "");
    fputs("topology { domain_size = 72; nic_gbps = 400; nvlink_gbps = 7200; }\n", f);
    if (is_flat) flat(f, L, E);
    else loops(f, L, E);
    if (out && fclose(f)) {
        perror(out);
        return 1;
    }
    return 0;
}
