/* test_opdoc.c - docs/format.md documents every opcode of the X-macro: a heading "### NAME = NUMBER"
 * whose section quotes the operands and the synopsis; and it documents no opcode that does not exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    s[n] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    char *doc = slurp(argv[1]);
    if (!doc) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    int bad = 0, n = 0;
#define X(name, num, operands, synopsis)                                                           \
    do {                                                                                           \
        char head[64];                                                                             \
        snprintf(head, sizeof head, "\n### %s = %d\n", #name, num);                                \
        char *at = strstr(doc, head);                                                              \
        n++;                                                                                       \
        if (!at) {                                                                                 \
            fprintf(stderr, "%s: no heading '### %s = %d'\n", argv[1], #name, num);                \
            bad = 1;                                                                               \
            break;                                                                                 \
        }                                                                                          \
        at += strlen(head);                                                                        \
        char *end = strstr(at, "\n#");                                                             \
        size_t len = end ? (size_t)(end - at) : strlen(at);                                        \
        char *sec = strndup(at, len);                                                              \
        if (!strstr(sec, operands)) {                                                              \
            fprintf(stderr, "%s: %s does not quote its operands '%s'\n", argv[1], #name, operands); \
            bad = 1;                                                                               \
        }                                                                                          \
        if (!strstr(sec, synopsis)) {                                                              \
            fprintf(stderr, "%s: %s does not quote its synopsis '%s'\n", argv[1], #name, synopsis); \
            bad = 1;                                                                               \
        }                                                                                          \
        free(sec);                                                                                 \
    } while (0);
    RS_OPCODES(X)
#undef X
    /* No stale entries: every "### NAME = N" heading names a real opcode with that number. */
    for (char *p = strstr(doc, "\n### "); p; p = strstr(p + 1, "\n### ")) {
        char name[64];
        int num;
        if (sscanf(p + 5, "%63[A-Z_] = %d", name, &num) != 2) continue;
        const char *real = rs_op_name(num);
        if (!real || strcmp(real, name)) {
            fprintf(stderr, "%s: documents opcode %s = %d, which the X-macro does not have\n", argv[1], name, num);
            bad = 1;
        }
    }
    free(doc);
    if (!bad) printf("all %d opcodes documented\n", n);
    return bad;
}
