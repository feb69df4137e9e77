/* fuzz_main.c - runs a libFuzzer harness without libFuzzer (any compiler): each argument is a file, or a
 * directory whose files are all run, passed once to LLVMFuzzerTestOneInput. The regression tests run the
 * committed crash inputs (tests/fuzz/regress/TARGET/) and the seed corpus this way in every build. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_main: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0, k;
    uint8_t *buf = malloc(cap);
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    /* an exact-size copy, so a sanitizer sees any read past the input */
    uint8_t *in = malloc(n ? n : 1);
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            fprintf(stderr, "fuzz_main: no such file or directory: %s\n", argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i])) return 2;
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (nn + 1) * sizeof *names);
            names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[nn++], "%s/%s", argv[i], e->d_name);
        }
        if (d) closedir(d);
        if (nn) qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; k++) {
            if (stat(names[k], &st) == 0 && S_ISREG(st.st_mode)) {
                if (run_file(names[k])) return 2;
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("fuzz_main: %d inputs, no crash\n", files);
    return 0;
}
