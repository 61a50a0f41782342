/*
 * A test double for hiprtc (libhiprtc): every symbol src/gpu/sys.rs resolves for it, so the AMD
 * run-time-compile path (program creation with the prelude as a named header, options, logs,
 * code retrieval, the on-disk cache around it) runs without ROCm.
 *
 * "Compiling" checks what a real hiprtc would trip over: every `#include "x"` of the source must
 * be one of the headers given, the options must hold exactly one --offload-arch=gfx..., calls
 * must come in a valid order on live programs. The code handed back is
 *   - $FAKEHIPRTC_CODE_DIR/<program name>.<arch>.co when that file exists (the tests put the
 *     matching object of the embedded AOT bundle there: a real code object), else
 *   - a minimal AMDGPU ELF for the arch whose string table holds the name of every
 *     `VMAF_KERNEL` function of the source, which the fake runtime (fake_amdhip64.c) loads and
 *     resolves kernels from.
 * Every call appends one line to $FAKEHIP_LOG (the same file the fake runtime writes), e.g.
 *   hiprtcCreateProgram name=vif.hip headers=vmaf_prelude.h:34567:0123456789abcdef -> 0
 *   hiprtcCompileProgram name=vif.hip opts=--offload-arch=gfx90a|-O3 code=bundle -> 0
 *
 * Compiles that overlap in time (two threads inside hiprtcCompileProgram at once: hiprtc 5.x
 * crashes on that, so the library serialises them) are logged as BAD. Each compile lasts
 * $FAKEHIPRTC_COMPILE_MS (default 30) so that unserialised ones would overlap.
 *
 * Knobs: FAKEHIPRTC_FAIL=s    compiles of programs whose name contains s (or all, for "1")
 *                             fail with HIPRTC_ERROR_COMPILATION and a program log
 *        FAKEHIPRTC_CODE_DIR  see above
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amdgpu_mach.h"

#define EXPORT __attribute__((visibility("default")))

enum {
    HIPRTC_SUCCESS = 0,
    HIPRTC_ERROR_OUT_OF_MEMORY = 1,
    HIPRTC_ERROR_INVALID_INPUT = 3,
    HIPRTC_ERROR_INVALID_PROGRAM = 4,
    HIPRTC_ERROR_INVALID_OPTION = 5,
    HIPRTC_ERROR_COMPILATION = 6,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;
static int log_file_tried;
static long live_programs, n_bad, n_compiles, in_compile, max_in_compile;

struct program {
    char *source;
    char name[128];
    char *headers[8];
    char header_names[8][64];
    int n_headers;
    int compiled; /* 0 not yet, 1 ok, -1 failed */
    char *log;
    unsigned char *code;
    size_t code_size;
};
#define MAX_PROGRAMS 256
static struct program *programs[MAX_PROGRAMS];

/* Appends one line to $FAKEHIP_LOG; the caller holds `lock`. */
static void logf_locked(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    line[n] = 0;
    if (!log_file_tried) {
        log_file_tried = 1;
        const char *path = getenv("FAKEHIP_LOG");
        if (path && *path)
            log_file = fopen(path, "a");
    }
    if (log_file) {
        fputs(line, log_file);
        fflush(log_file);
    }
}

static int bad_locked(const char *what)
{
    n_bad++;
    logf_locked("BAD %s", what);
    return HIPRTC_ERROR_INVALID_INPUT;
}

static int live_locked(const struct program *p)
{
    if (!p)
        return 0;
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (programs[i] == p)
            return 1;
    return 0;
}

static uint64_t fnv1a(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---------------------------------------------------------------- query API for tests */

/* "programs=.. compiles=.. max_overlap=.. bad=..": live programs, compiles run, the most
 * compiles seen running at once, misuse. */
EXPORT const char *fakehiprtc_summary(void)
{
    static char s[160];
    pthread_mutex_lock(&lock);
    snprintf(s, sizeof s, "programs=%ld compiles=%ld max_overlap=%ld bad=%ld", live_programs,
             n_compiles, max_in_compile, n_bad);
    pthread_mutex_unlock(&lock);
    return s;
}

/* ---------------------------------------------------------------- hiprtc */

EXPORT int hiprtcVersion(int *major, int *minor)
{
    pthread_mutex_lock(&lock);
    logf_locked("hiprtcVersion");
    pthread_mutex_unlock(&lock);
    if (!major || !minor)
        return HIPRTC_ERROR_INVALID_INPUT;
    *major = 6;
    *minor = 2;
    return 0;
}

EXPORT const char *hiprtcGetErrorString(int st)
{
    switch (st) {
    case HIPRTC_SUCCESS: return "HIPRTC_SUCCESS";
    case HIPRTC_ERROR_OUT_OF_MEMORY: return "HIPRTC_ERROR_OUT_OF_MEMORY";
    case HIPRTC_ERROR_INVALID_INPUT: return "HIPRTC_ERROR_INVALID_INPUT";
    case HIPRTC_ERROR_INVALID_PROGRAM: return "HIPRTC_ERROR_INVALID_PROGRAM";
    case HIPRTC_ERROR_INVALID_OPTION: return "HIPRTC_ERROR_INVALID_OPTION";
    case HIPRTC_ERROR_COMPILATION: return "HIPRTC_ERROR_COMPILATION";
    default: return "HIPRTC_ERROR_INTERNAL_ERROR";
    }
}

static void free_program(struct program *p)
{
    if (!p)
        return;
    free(p->source);
    for (int i = 0; i < p->n_headers; i++)
        free(p->headers[i]);
    free(p->log);
    free(p->code);
    free(p);
}

EXPORT int hiprtcCreateProgram(struct program **out, const char *src, const char *name,
                               int n_headers, const char *const *headers,
                               const char *const *names)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    char hdrs[512] = "";
    struct program *p = NULL;
    if (!out || !src || n_headers < 0 || n_headers > 8 || (n_headers && (!headers || !names))) {
        st = bad_locked("hiprtcCreateProgram with invalid arguments");
        goto done;
    }
    p = calloc(1, sizeof *p);
    if (!p || !(p->source = strdup(src))) {
        st = HIPRTC_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    snprintf(p->name, sizeof p->name, "%s", name ? name : "default_program");
    for (int i = 0; i < n_headers; i++) {
        if (!headers[i] || !names[i]) {
            st = bad_locked("hiprtcCreateProgram: NULL header or header name");
            goto done;
        }
        if (!(p->headers[i] = strdup(headers[i]))) {
            st = HIPRTC_ERROR_OUT_OF_MEMORY;
            goto done;
        }
        p->n_headers = i + 1;
        snprintf(p->header_names[i], sizeof p->header_names[i], "%s", names[i]);
        size_t len = strlen(hdrs);
        snprintf(hdrs + len, sizeof hdrs - len, "%s%s:%zu:%016llx", i ? "," : "", names[i],
                 strlen(headers[i]), (unsigned long long)fnv1a(headers[i], strlen(headers[i])));
    }
    int slot = 0;
    while (slot < MAX_PROGRAMS && programs[slot])
        slot++;
    if (slot == MAX_PROGRAMS) {
        st = HIPRTC_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    programs[slot] = p;
    live_programs++;
    *out = p;
done:
    if (st) {
        free_program(p);
        if (out)
            *out = NULL;
    }
    logf_locked("hiprtcCreateProgram name=%s headers=%s source_fnv=%016llx -> %d",
                name ? name : "(null)", hdrs[0] ? hdrs : "-",
                (unsigned long long)(src ? fnv1a(src, strlen(src)) : 0), st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hiprtcDestroyProgram(struct program **pp)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct program *p = pp ? *pp : NULL;
    if (!live_locked(p)) {
        st = bad_locked("hiprtcDestroyProgram of a program that is not live");
    } else {
        for (int i = 0; i < MAX_PROGRAMS; i++)
            if (programs[i] == p)
                programs[i] = NULL;
        logf_locked("hiprtcDestroyProgram name=%s -> 0", p->name);
        free_program(p);
        *pp = NULL;
        live_programs--;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* Sets the program log (owned by the program). */
static void set_log(struct program *p, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(p->log);
    p->log = strdup(buf);
}

/* The first `#include "x"` of the source that names none of the program's headers, or NULL.
 * The name is copied to `missing`. */
static const char *unresolved_include(const struct program *p, char *missing, size_t cap)
{
    for (const char *s = strstr(p->source, "#include"); s; s = strstr(s + 1, "#include")) {
        const char *q = s + strlen("#include");
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '"')
            continue; /* <...>: hiprtc's own headers */
        const char *end = strchr(q + 1, '"');
        if (!end)
            continue;
        size_t n = (size_t)(end - q - 1);
        int found = 0;
        for (int i = 0; i < p->n_headers; i++)
            found |= strlen(p->header_names[i]) == n && !strncmp(p->header_names[i], q + 1, n);
        if (!found) {
            snprintf(missing, cap, "%.*s", (int)n, q + 1);
            return missing;
        }
    }
    return NULL;
}

static void put_u16(unsigned char *b, size_t at, uint16_t v)
{
    memcpy(b + at, &v, 2);
}
static void put_u32(unsigned char *b, size_t at, uint32_t v)
{
    memcpy(b + at, &v, 4);
}
static void put_u64(unsigned char *b, size_t at, uint64_t v)
{
    memcpy(b + at, &v, 8);
}

/* A minimal code object: ELF64 header, a string table of the kernel names (as `VMAF_KERNEL`
 * marks them in the source), a section-name table, then the section headers. */
static int synthesize(struct program *p, unsigned mach)
{
    size_t cap = 1 + strlen(p->source), n = 1;
    unsigned char *str = calloc(1, cap);
    if (!str)
        return HIPRTC_ERROR_OUT_OF_MEMORY;
    for (const char *s = strstr(p->source, "VMAF_KERNEL void"); s;
         s = strstr(s + 1, "VMAF_KERNEL void")) {
        const char *q = s + strlen("VMAF_KERNEL void");
        while (*q == ' ')
            q++;
        if (!strncmp(q, "VMAF_BOUNDS(", 12)) {
            q = strchr(q, ')');
            if (!q)
                break;
            q++;
            while (*q == ' ')
                q++;
        }
        size_t len = strcspn(q, "( \n");
        if (len && n + len + 1 <= cap) {
            memcpy(str + n, q, len);
            n += len + 1;
        }
    }
    static const char shstr[] = "\0.strtab\0.shstrtab";
    size_t str_off = 64, shstr_off = str_off + n, sh_off = (shstr_off + sizeof shstr + 7) & ~7u;
    size_t size = sh_off + 3 * 64;
    unsigned char *b = calloc(1, size);
    if (!b) {
        free(str);
        return HIPRTC_ERROR_OUT_OF_MEMORY;
    }
    memcpy(b, "\177ELF", 4);
    b[4] = 2; /* 64-bit */
    b[5] = 1; /* little-endian */
    b[6] = 1;
    b[7] = 64; /* ELFOSABI_AMDGPU_HSA */
    b[8] = 3;  /* code object v5, hiprtc's default since ROCm 6 */
    put_u16(b, 16, 3);   /* ET_DYN */
    put_u16(b, 18, 224); /* EM_AMDGPU */
    put_u32(b, 20, 1);
    put_u64(b, 0x28, sh_off);
    put_u32(b, 0x30, mach);
    put_u16(b, 0x34, 64);
    put_u16(b, 0x3a, 64);
    put_u16(b, 0x3c, 3);
    put_u16(b, 0x3e, 2);
    memcpy(b + str_off, str, n);
    memcpy(b + shstr_off, shstr, sizeof shstr);
    /* Section 1: .strtab, section 2: .shstrtab (SHT_STRTAB = 3). */
    put_u32(b, sh_off + 64, 1);
    put_u32(b, sh_off + 64 + 4, 3);
    put_u64(b, sh_off + 64 + 0x18, str_off);
    put_u64(b, sh_off + 64 + 0x20, n);
    put_u32(b, sh_off + 128, 9);
    put_u32(b, sh_off + 128 + 4, 3);
    put_u64(b, sh_off + 128 + 0x18, shstr_off);
    put_u64(b, sh_off + 128 + 0x20, sizeof shstr);
    free(str);
    p->code = b;
    p->code_size = size;
    return 0;
}

/* Reads $FAKEHIPRTC_CODE_DIR/<name>.<arch>.co into the program; 0 when there is none. */
static int code_from_dir(struct program *p, const char *arch)
{
    const char *dir = getenv("FAKEHIPRTC_CODE_DIR");
    if (!dir || !*dir)
        return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.co", dir, p->name, arch);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return 0;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    p->code = buf;
    p->code_size = n;
    return n > 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

EXPORT int hiprtcCompileProgram(struct program *p, int n_opts, const char *const *opts)
{
    pthread_mutex_lock(&lock);
    if (!live_locked(p) || n_opts < 0 || (n_opts && !opts)) {
        int st = bad_locked("hiprtcCompileProgram on a dead program or bad options");
        pthread_mutex_unlock(&lock);
        return st;
    }
    if (++in_compile > 1)
        bad_locked("hiprtcCompileProgram while another compile runs (hiprtc 5.x crashes)");
    if (in_compile > max_in_compile)
        max_in_compile = in_compile;
    n_compiles++;
    pthread_mutex_unlock(&lock);

    /* The work, outside the lock, so that overlapping compiles can be seen. */
    const char *env_ms = getenv("FAKEHIPRTC_COMPILE_MS");
    sleep_ms(env_ms && *env_ms ? strtol(env_ms, NULL, 10) : 30);

    char optlist[512] = "", arch[32] = "", missing[128];
    int n_arch = 0, st = 0;
    const char *code_from = "-";
    for (int i = 0; i < n_opts; i++) {
        size_t len = strlen(optlist);
        snprintf(optlist + len, sizeof optlist - len, "%s%s", i ? "|" : "", opts[i] ? opts[i] : "");
        if (opts[i] && !strncmp(opts[i], "--offload-arch=", 15)) {
            n_arch++;
            snprintf(arch, sizeof arch, "%s", opts[i] + 15);
        }
    }
    const char *fail = getenv("FAKEHIPRTC_FAIL");
    free(p->code);
    p->code = NULL;
    p->code_size = 0;
    if (n_arch != 1 || !amdgpu_mach_of(arch)) {
        set_log(p, "error: expected one --offload-arch=gfx... of a known arch, got '%s'", optlist);
        st = HIPRTC_ERROR_INVALID_OPTION;
    } else if (unresolved_include(p, missing, sizeof missing)) {
        set_log(p, "%s:1:10: fatal error: '%s' file not found", p->name, missing);
        st = HIPRTC_ERROR_COMPILATION;
    } else if (fail && *fail && (!strcmp(fail, "1") || strstr(p->name, fail))) {
        set_log(p, "%s:42:7: error: fake hiprtc refuses this program (FAKEHIPRTC_FAIL=%s)", p->name,
                fail);
        st = HIPRTC_ERROR_COMPILATION;
    } else if (code_from_dir(p, arch)) {
        set_log(p, "");
        code_from = "file";
    } else {
        st = synthesize(p, amdgpu_mach_of(arch));
        set_log(p, "");
        code_from = "synthesized";
    }
    pthread_mutex_lock(&lock);
    p->compiled = st ? -1 : 1;
    in_compile--;
    logf_locked("hiprtcCompileProgram name=%s opts=%s code=%s -> %d", p->name, optlist, code_from,
                st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hiprtcGetProgramLogSize(struct program *p, size_t *n)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!live_locked(p) || !n || !p->compiled)
        st = bad_locked("hiprtcGetProgramLogSize before a compile");
    else
        *n = strlen(p->log ? p->log : "") + 1;
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hiprtcGetProgramLog(struct program *p, char *out)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!live_locked(p) || !out || !p->compiled)
        st = bad_locked("hiprtcGetProgramLog before a compile");
    else
        strcpy(out, p->log ? p->log : "");
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hiprtcGetCodeSize(struct program *p, size_t *n)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!live_locked(p) || !n)
        st = bad_locked("hiprtcGetCodeSize on a dead program");
    else if (p->compiled != 1)
        st = bad_locked("hiprtcGetCodeSize without a successful compile");
    else
        *n = p->code_size;
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hiprtcGetCode(struct program *p, char *out)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!live_locked(p) || !out)
        st = bad_locked("hiprtcGetCode on a dead program");
    else if (p->compiled != 1)
        st = bad_locked("hiprtcGetCode without a successful compile");
    else
        memcpy(out, p->code, p->code_size);
    logf_locked("hiprtcGetCode name=%s bytes=%zu -> %d", live_locked(p) ? p->name : "?",
                st ? 0 : p->code_size, st);
    pthread_mutex_unlock(&lock);
    return st;
}
