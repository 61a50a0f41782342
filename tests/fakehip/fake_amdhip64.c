/*
 * A test double for the HIP runtime (libamdhip64): every symbol src/gpu/sys.rs resolves for
 * AMD, backed by host memory, so the AMD host path (loading, device queries, module loading,
 * launches, copies, streams, events, error mapping) runs on machines without a GPU.
 *
 * Device memory is calloc'ed host memory; copies and memsets run at once (streams are always
 * idle); launches are recorded, not run. Stream capture records a stream's copies, memsets and
 * launches (checked as they are captured) into a graph; launching its exec runs the copies and
 * memsets again. A graph's first node can be found (root nodes, node type) and an exec's kernel
 * node updated (hipGraphExecKernelNodeSetParams: same function and geometry, a node of the
 * exec's own live graph). Event records, waits and synchronizes of a capturing stream are misuse,
 * and a device synchronize during any capture fails (hipErrorStreamCaptureUnsupported), as on
 * CUDA. Every call appends one line to an in-memory log
 * (fakehip_calls()) and, when FAKEHIP_LOG names a file, to that file.
 *
 * The fake also checks what a real runtime would reject or crash on: copies and memsets must
 * stay inside one live allocation, frees and destroys must name live objects, a kernel must
 * exist in the loaded code object. Violations return hipErrorInvalidValue and log "BAD".
 *
 * Knobs (environment, read at each call):
 *   FAKEHIP_INIT_STATUS=n       hipInit returns n
 *   FAKEHIP_NO_DEVICE=1         hipGetDeviceCount returns hipErrorNoDevice
 *   FAKEHIP_OOM_AT=n            the n-th hipMalloc (1-based) and every later one fail (OOM)
 *   FAKEHIP_LAUNCH_FAIL_AT=n    the n-th launch and every later one fail (hipErrorLaunchFailure)
 *   FAKEHIP_SYNC_FAIL_AT=n      the n-th stream/event/device synchronize and later ones fail
 *   FAKEHIP_MODULE_LOAD_STATUS=n  hipModuleLoadData returns n
 *   FAKEHIP_ARCH=s              gcnArchName (default gfx90a:sramecc+:xnack-)
 *
 * Launch argument counts: the caller ends kernelParams with a NULL entry (real runtimes read
 * only as many entries as the kernel declares), which the fake counts up to.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_mach.h"

#define EXPORT __attribute__((visibility("default")))

enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200,
    hipErrorInvalidDeviceFunction = 98,
    hipErrorNotSupported = 801,
    hipErrorInvalidHandle = 400,
    hipErrorNotFound = 500,
    hipErrorLaunchFailure = 719,
    hipErrorStreamCaptureUnsupported = 900,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_buf;
static size_t log_len, log_cap;
static FILE *log_file;
static int log_file_tried;

/* Call counters the failure knobs count with. */
static long n_malloc, n_launch, n_sync;
/* Live objects, for the leak summary. */
static long live_streams, live_events, live_modules, live_host, live_graphs;
static long n_bad;

struct alloc {
    char *p;
    size_t n;
};
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;

struct module {
    unsigned char *image;
    size_t size;
    unsigned mach;
};
struct function {
    struct module *mod;
    char name[128];
};
/* Handles are checked against these lists, so a stale or foreign one is reported. */
#define MAX_OBJ 4096
static void *streams[MAX_OBJ], *events[MAX_OBJ], *modules[MAX_OBJ], *hosts[MAX_OBJ];
static long stream_ids, event_ids;

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Appends one line to the log; the caller holds `lock`. */
static void logf_locked(const char *fmt, ...)
{
    char line[512];
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
    if (log_len + (size_t)n + 1 > log_cap) {
        size_t cap = log_cap ? log_cap * 2 : 1 << 16;
        while (cap < log_len + (size_t)n + 1)
            cap *= 2;
        char *b = realloc(log_buf, cap);
        if (!b)
            return;
        log_buf = b;
        log_cap = cap;
    }
    memcpy(log_buf + log_len, line, (size_t)n + 1);
    log_len += (size_t)n;
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

#define LOG(...)                                                                                  \
    do {                                                                                          \
        pthread_mutex_lock(&lock);                                                                \
        logf_locked(__VA_ARGS__);                                                                 \
        pthread_mutex_unlock(&lock);                                                              \
    } while (0)

static int bad_locked(const char *what)
{
    n_bad++;
    logf_locked("BAD %s", what);
    return hipErrorInvalidValue;
}

static int add_obj(void **set, void *p)
{
    for (int i = 0; i < MAX_OBJ; i++)
        if (!set[i]) {
            set[i] = p;
            return 1;
        }
    return 0;
}

static int del_obj(void **set, void *p)
{
    if (!p)
        return 0;
    for (int i = 0; i < MAX_OBJ; i++)
        if (set[i] == p) {
            set[i] = NULL;
            return 1;
        }
    return 0;
}

static int has_obj(void *const *set, const void *p)
{
    if (!p)
        return 0;
    for (int i = 0; i < MAX_OBJ; i++)
        if (set[i] == p)
            return 1;
    return 0;
}

/* Whether [p, p+n) lies inside one live device allocation. */
static int in_device_locked(const void *p, size_t n)
{
    const char *c = p;
    for (size_t i = 0; i < n_allocs; i++)
        if (c >= allocs[i].p && n <= allocs[i].n && (size_t)(c - allocs[i].p) <= allocs[i].n - n)
            return 1;
    return 0;
}

/* A stream argument: NULL (the null stream) or a live stream. */
static int stream_ok_locked(void *s)
{
    return !s || has_obj(streams, s);
}

/* Log name of a stream: 0 for the null stream, -1 for one that is not live. */
static long stream_id(void *s)
{
    return !s ? 0 : has_obj(streams, s) ? *(long *)s : -1;
}

/* One captured operation: a copy or memset (src NULL: memset to `byte`), or a launch of `fn`
 * with its geometry. A graph's node handles are pointers to its ops. */
struct op {
    int launch;
    void *dst;
    const void *src;
    int byte;
    size_t n;
    void *fn;
    unsigned grid[3], block[3], shmem;
};
/* A graph or an exec: the operations in capture order (an exec: `from` is its graph). */
struct graph {
    struct op *ops;
    size_t n, cap;
    struct graph *from;
};
#define MAX_CAPTURES 64
static void *cap_streams[MAX_CAPTURES];
static struct graph *cap_graphs[MAX_CAPTURES];
static void *graphs[MAX_OBJ], *execs[MAX_OBJ];

/* The graph `s` is being captured into, or NULL. */
static struct graph *capture_of_locked(void *s)
{
    for (int i = 0; s && i < MAX_CAPTURES; i++)
        if (cap_streams[i] == s)
            return cap_graphs[i];
    return NULL;
}

static int capturing_any_locked(void)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (cap_streams[i])
            return 1;
    return 0;
}

static int add_op(struct graph *g, struct op op)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct op *o = realloc(g->ops, cap * sizeof *o);
        if (!o)
            return 0;
        g->ops = o;
        g->cap = cap;
    }
    g->ops[g->n++] = op;
    return 1;
}

/* ---------------------------------------------------------------- query API for tests */

/* Every call so far, one per line; valid until the next call into the fake. */
EXPORT const char *fakehip_calls(void)
{
    return log_buf ? log_buf : "";
}

/* Live objects and misuse: "dev_allocs=.. streams=.. events=.. modules=.. host=.. graphs=..
 * bad=.." (graphs counts graphs and their execs). */
EXPORT const char *fakehip_summary(void)
{
    static char s[256];
    pthread_mutex_lock(&lock);
    snprintf(s, sizeof s,
             "dev_allocs=%zu streams=%ld events=%ld modules=%ld host=%ld graphs=%ld bad=%ld",
             n_allocs, live_streams, live_events, live_modules, live_host, live_graphs, n_bad);
    pthread_mutex_unlock(&lock);
    return s;
}

/* ---------------------------------------------------------------- runtime */

EXPORT int hipInit(unsigned flags)
{
    int st = (int)env_long("FAKEHIP_INIT_STATUS", 0);
    LOG("hipInit flags=%u -> %d", flags, st);
    return flags ? hipErrorInvalidValue : st;
}

EXPORT int hipDriverGetVersion(int *v)
{
    LOG("hipDriverGetVersion");
    if (!v)
        return hipErrorInvalidValue;
    *v = 60241134; /* 6.2.41134 */
    return 0;
}

EXPORT int hipGetDeviceCount(int *n)
{
    int none = env_long("FAKEHIP_NO_DEVICE", 0) != 0;
    LOG("hipGetDeviceCount n=%d -> %d", none ? 0 : 1, none ? hipErrorNoDevice : 0);
    if (!n)
        return hipErrorInvalidValue;
    *n = none ? 0 : 1;
    return none ? hipErrorNoDevice : 0;
}

EXPORT int hipSetDevice(int d)
{
    /* Not logged: every call of the library binds the device first. */
    return d == 0 ? 0 : hipErrorInvalidDevice;
}

EXPORT int hipDeviceGetName(char *name, int len, int d)
{
    LOG("hipDeviceGetName dev=%d", d);
    if (!name || len <= 0)
        return hipErrorInvalidValue;
    if (d != 0)
        return hipErrorInvalidDevice;
    snprintf(name, (size_t)len, "Fake AMD Instinct MI210");
    return 0;
}

EXPORT int hipDeviceTotalMem(size_t *bytes, int d)
{
    LOG("hipDeviceTotalMem dev=%d", d);
    if (!bytes)
        return hipErrorInvalidValue;
    if (d != 0)
        return hipErrorInvalidDevice;
    *bytes = (size_t)64 << 30;
    return 0;
}

/* ROCm 6's hipDeviceProp_t is about 1.5 KiB: name at 0, gcnArchName further in. */
static int get_props(void *props, int d, const char *which)
{
    LOG("%s dev=%d", which, d);
    if (!props)
        return hipErrorInvalidValue;
    if (d != 0)
        return hipErrorInvalidDevice;
    memset(props, 0, 1472);
    snprintf(props, 256, "Fake AMD Instinct MI210");
    const char *arch = getenv("FAKEHIP_ARCH");
    snprintf((char *)props + 1160, 256, "%s", arch && *arch ? arch : "gfx90a:sramecc+:xnack-");
    return 0;
}

EXPORT int hipGetDevicePropertiesR0600(void *props, int d)
{
    return get_props(props, d, "hipGetDevicePropertiesR0600");
}

EXPORT int hipGetDeviceProperties(void *props, int d)
{
    return get_props(props, d, "hipGetDeviceProperties");
}

EXPORT int hipDeviceSynchronize(void)
{
    pthread_mutex_lock(&lock);
    long fail_at = env_long("FAKEHIP_SYNC_FAIL_AT", 0);
    int st = fail_at > 0 && ++n_sync >= fail_at ? hipErrorLaunchFailure : 0;
    if (capturing_any_locked())
        st = hipErrorStreamCaptureUnsupported;
    logf_locked("hipDeviceSynchronize -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT const char *hipGetErrorString(int st)
{
    switch (st) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNoDevice: return "no ROCm-capable device is detected";
    case hipErrorInvalidDevice: return "invalid device ordinal";
    case hipErrorInvalidImage: return "device kernel image is invalid";
    case hipErrorInvalidHandle: return "invalid resource handle";
    case hipErrorNotFound: return "named symbol not found";
    case hipErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}

/* ---------------------------------------------------------------- memory */

EXPORT int hipMalloc(void **p, size_t n)
{
    pthread_mutex_lock(&lock);
    long oom_at = env_long("FAKEHIP_OOM_AT", 0);
    long idx = ++n_malloc;
    int st = 0;
    if (!p) {
        st = bad_locked("hipMalloc NULL out");
    } else if (oom_at > 0 && idx >= oom_at) {
        *p = NULL;
        st = hipErrorOutOfMemory;
    } else {
        if (n_allocs == cap_allocs) {
            size_t cap = cap_allocs ? cap_allocs * 2 : 256;
            struct alloc *a = realloc(allocs, cap * sizeof *a);
            if (!a) {
                pthread_mutex_unlock(&lock);
                return hipErrorOutOfMemory;
            }
            allocs = a;
            cap_allocs = cap;
        }
        /* Zeroed, so what the host reads back from unrun kernels is the same every run. */
        char *m = calloc(1, n ? n : 1);
        if (!m) {
            st = hipErrorOutOfMemory;
        } else {
            allocs[n_allocs].p = m;
            allocs[n_allocs].n = n;
            n_allocs++;
            *p = m;
        }
    }
    logf_locked("hipMalloc #%ld bytes=%zu -> %d", idx, n, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipFree(void *p)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (p) {
        size_t i = 0;
        while (i < n_allocs && allocs[i].p != p)
            i++;
        if (i == n_allocs) {
            st = bad_locked("hipFree of a pointer hipMalloc did not return");
        } else {
            free(allocs[i].p);
            allocs[i] = allocs[--n_allocs];
        }
    }
    logf_locked("hipFree -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* Device allocations only (host ones carry no size here): hipErrorNotFound elsewhere. */
EXPORT int hipMemGetAddressRange(void **base, size_t *size, void *p)
{
    pthread_mutex_lock(&lock);
    int st = hipErrorNotFound;
    if (!base || !size) {
        st = bad_locked("hipMemGetAddressRange NULL out");
    } else {
        for (size_t i = 0; i < n_allocs; i++)
            if ((char *)p >= allocs[i].p && (char *)p < allocs[i].p + allocs[i].n) {
                *base = allocs[i].p;
                *size = allocs[i].n;
                st = 0;
                break;
            }
    }
    logf_locked("hipMemGetAddressRange -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipHostMalloc(void **p, size_t n, unsigned flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!p) {
        st = bad_locked("hipHostMalloc NULL out");
    } else if (posix_memalign(p, 4096, n ? n : 1) || !add_obj(hosts, *p)) {
        st = hipErrorOutOfMemory;
    } else {
        live_host++;
    }
    logf_locked("hipHostMalloc bytes=%zu flags=%u -> %d", n, flags, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipHostFree(void *p)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (p) {
        if (del_obj(hosts, p)) {
            free(p);
            live_host--;
        } else {
            st = bad_locked("hipHostFree of a pointer hipHostMalloc did not return");
        }
    }
    logf_locked("hipHostFree -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipHostRegister(void *p, size_t n, unsigned flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!p || !n)
        st = bad_locked("hipHostRegister of nothing");
    else if (!add_obj(hosts, p))
        st = hipErrorOutOfMemory;
    else
        live_host++;
    logf_locked("hipHostRegister bytes=%zu flags=%u -> %d", n, flags, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipHostUnregister(void *p)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (del_obj(hosts, p))
        live_host--;
    else
        st = bad_locked("hipHostUnregister of an unregistered pointer");
    logf_locked("hipHostUnregister -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* One copy or memset: `dev_dst`/`dev_src` say which sides must be device memory. */
static int copy(const char *what, void *dst, const void *src, int byte, size_t n, void *stream,
                int dev_dst, int dev_src)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!stream_ok_locked(stream))
        st = bad_locked("copy on a stream that is not live");
    else if (!dst || (dev_dst && !in_device_locked(dst, n)))
        st = bad_locked("copy destination outside device memory");
    else if (dev_src && !in_device_locked(src, n))
        st = bad_locked("copy source outside device memory");
    else if (capture_of_locked(stream)) {
        struct op op = {0, dst, src, byte, n, NULL, {0}, {0}, 0};
        if (!add_op(capture_of_locked(stream), op))
            st = hipErrorOutOfMemory;
    } else if (src)
        memmove(dst, src, n);
    else
        memset(dst, byte, n);
    logf_locked("%s bytes=%zu stream=%ld%s -> %d", what, n, stream_id(stream),
                capture_of_locked(stream) ? " captured" : "", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipMemcpyHtoDAsync(void *dst, const void *src, size_t n, void *stream)
{
    return copy("hipMemcpyHtoDAsync", dst, src, 0, n, stream, 1, 0);
}

EXPORT int hipMemcpyDtoHAsync(void *dst, void *src, size_t n, void *stream)
{
    return copy("hipMemcpyDtoHAsync", dst, src, 0, n, stream, 0, 1);
}

EXPORT int hipMemcpyDtoDAsync(void *dst, void *src, size_t n, void *stream)
{
    return copy("hipMemcpyDtoDAsync", dst, src, 0, n, stream, 1, 1);
}

EXPORT int hipMemsetD8Async(void *dst, unsigned char v, size_t n, void *stream)
{
    return copy("hipMemsetD8Async", dst, NULL, v, n, stream, 1, 0);
}

/* ---------------------------------------------------------------- streams and events */

EXPORT int hipStreamCreateWithFlags(void **s, unsigned flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    long *obj = malloc(sizeof *obj);
    if (!s || !obj || !add_obj(streams, obj)) {
        free(obj);
        st = hipErrorInvalidValue;
    } else {
        *obj = ++stream_ids;
        *s = obj;
        live_streams++;
    }
    logf_locked("hipStreamCreateWithFlags flags=%u id=%ld -> %d", flags, st ? 0 : *obj, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipStreamDestroy(void *s)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    long id = stream_id(s);
    if (id > 0 && del_obj(streams, s)) {
        free(s);
        live_streams--;
    } else {
        st = bad_locked("hipStreamDestroy of a stream that is not live");
    }
    logf_locked("hipStreamDestroy id=%ld -> %d", id, st);
    pthread_mutex_unlock(&lock);
    return st;
}

static int sync_status_locked(void)
{
    long fail_at = env_long("FAKEHIP_SYNC_FAIL_AT", 0);
    return fail_at > 0 && ++n_sync >= fail_at ? hipErrorLaunchFailure : 0;
}

EXPORT int hipStreamSynchronize(void *s)
{
    pthread_mutex_lock(&lock);
    int st = !stream_ok_locked(s)    ? bad_locked("hipStreamSynchronize of a dead stream")
             : capture_of_locked(s) ? bad_locked("hipStreamSynchronize of a capturing stream")
                                    : sync_status_locked();
    logf_locked("hipStreamSynchronize stream=%ld -> %d", stream_id(s), st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipStreamWaitEvent(void *s, void *e, unsigned flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!stream_ok_locked(s) || !has_obj(events, e))
        st = bad_locked("hipStreamWaitEvent on a dead stream or event");
    else if (capture_of_locked(s))
        st = bad_locked("hipStreamWaitEvent on a capturing stream");
    logf_locked("hipStreamWaitEvent stream=%ld event=%ld flags=%u -> %d", stream_id(s),
                e && !st ? *(long *)e : -1, flags, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipEventCreateWithFlags(void **e, unsigned flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    long *obj = malloc(sizeof *obj);
    if (!e || !obj || !add_obj(events, obj)) {
        free(obj);
        st = hipErrorInvalidValue;
    } else {
        *obj = ++event_ids;
        *e = obj;
        live_events++;
    }
    logf_locked("hipEventCreateWithFlags flags=%u id=%ld -> %d", flags, st ? 0 : *obj, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipEventDestroy(void *e)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    long id = e && has_obj(events, e) ? *(long *)e : -1;
    if (del_obj(events, e)) {
        free(e);
        live_events--;
    } else {
        st = bad_locked("hipEventDestroy of an event that is not live");
    }
    logf_locked("hipEventDestroy id=%ld -> %d", id, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipEventRecord(void *e, void *s)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!has_obj(events, e) || !stream_ok_locked(s))
        st = bad_locked("hipEventRecord on a dead event or stream");
    else if (capture_of_locked(s))
        st = bad_locked("hipEventRecord on a capturing stream (the host could not wait on it)");
    logf_locked("hipEventRecord event=%ld stream=%ld -> %d", st ? -1 : *(long *)e, stream_id(s),
                st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipEventSynchronize(void *e)
{
    pthread_mutex_lock(&lock);
    int st = has_obj(events, e) ? sync_status_locked()
                                : bad_locked("hipEventSynchronize of a dead event");
    logf_locked("hipEventSynchronize event=%ld -> %d", st == hipErrorInvalidValue ? -1 : *(long *)e,
                st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---------------------------------------------------------------- modules and launches */

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Size of a 64-bit little-endian ELF image: its section header table comes last. */
static size_t elf_size(const unsigned char *p)
{
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

static const char *mach_name(unsigned mach)
{
    return amdgpu_mach_name(mach);
}

EXPORT int hipModuleLoadData(void **m, const void *image)
{
    const unsigned char *p = image;
    int st = (int)env_long("FAKEHIP_MODULE_LOAD_STATUS", 0);
    pthread_mutex_lock(&lock);
    if (!m || !p) {
        st = bad_locked("hipModuleLoadData without image");
    } else if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 || p[18] != 224 /* EM_AMDGPU */) {
        /* Real runtimes also take offload bundles; this library hands over single objects. */
        logf_locked("hipModuleLoadData not an AMDGPU ELF -> %d", hipErrorInvalidImage);
        pthread_mutex_unlock(&lock);
        return hipErrorInvalidImage;
    }
    if (st) {
        logf_locked("hipModuleLoadData -> %d", st);
        pthread_mutex_unlock(&lock);
        return st;
    }
    uint32_t flags;
    memcpy(&flags, p + 0x30, 4);
    struct module *mod = calloc(1, sizeof *mod);
    size_t size = elf_size(p);
    if (!mod || !(mod->image = malloc(size)) || !add_obj(modules, mod)) {
        if (mod)
            free(mod->image);
        free(mod);
        pthread_mutex_unlock(&lock);
        return hipErrorOutOfMemory;
    }
    /* The runtime copies the image: the caller may free it once the call returns. */
    memcpy(mod->image, p, size);
    mod->size = size;
    mod->mach = flags & 0xff;
    live_modules++;
    *m = mod;
    /* EI_ABIVERSION: 2, 3, 4 for code object v4, v5, v6. */
    logf_locked("hipModuleLoadData arch=%s size=%zu fnv=%016llx cov=%d -> 0", mach_name(mod->mach),
                size, (unsigned long long)fnv1a(p, size), p[8] + 2);
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int hipModuleGetFunction(void **f, void *m, const char *name)
{
    pthread_mutex_lock(&lock);
    struct module *mod = m;
    int st = 0;
    if (!f || !name || !has_obj(modules, m)) {
        st = bad_locked("hipModuleGetFunction on a dead module");
    } else {
        /* The entry must be a symbol of the image: its name, NUL-delimited, in the strtab. */
        size_t len = strlen(name);
        int found = 0;
        for (size_t i = 1; !found && len < sizeof((struct function *)0)->name &&
                           i + len < mod->size;
             i++)
            found = mod->image[i - 1] == 0 && memcmp(mod->image + i, name, len) == 0 &&
                    mod->image[i + len] == 0;
        struct function *fn = found ? calloc(1, sizeof *fn) : NULL;
        if (!found) {
            st = hipErrorNotFound;
        } else if (!fn) {
            st = hipErrorOutOfMemory;
        } else {
            fn->mod = mod;
            memcpy(fn->name, name, len + 1);
            *f = fn;
        }
    }
    logf_locked("hipModuleGetFunction %s -> %d", name ? name : "(null)", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipModuleUnload(void *m)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct module *mod = m;
    if (del_obj(modules, m)) {
        logf_locked("hipModuleUnload arch=%s -> 0", mach_name(mod->mach));
        free(mod->image);
        free(mod);
        live_modules--;
    } else {
        st = bad_locked("hipModuleUnload of a module that is not live");
        logf_locked("hipModuleUnload -> %d", st);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, void *stream,
                                 void **params, void **extra)
{
    struct function *fn = f;
    pthread_mutex_lock(&lock);
    long fail_at = env_long("FAKEHIP_LAUNCH_FAIL_AT", 0);
    long idx = ++n_launch;
    int st = 0;
    int nargs = 0;
    if (params)
        while (nargs < 64 && params[nargs])
            nargs++;
    if (!fn || !has_obj(modules, fn->mod))
        st = bad_locked("launch of a function whose module is not live");
    else if (!stream_ok_locked(stream))
        st = bad_locked("launch on a stream that is not live");
    else if (extra || !params || nargs == 64)
        st = bad_locked("launch without a NULL-ended kernelParams");
    else if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        st = bad_locked("launch geometry out of range");
    else if (shmem > 64 * 1024)
        st = bad_locked("launch with more than 64 KiB of shared memory");
    else if (fail_at > 0 && idx >= fail_at)
        st = hipErrorLaunchFailure;
    else if (capture_of_locked(stream)) {
        struct op op = {1, NULL, NULL, 0, 0, f, {gx, gy, gz}, {bx, by, bz}, shmem};
        if (!add_op(capture_of_locked(stream), op))
            st = hipErrorOutOfMemory;
    }
    logf_locked("hipModuleLaunchKernel #%ld %s grid=%u,%u,%u block=%u,%u,%u shmem=%u args=%d "
                "stream=%ld -> %d",
                idx, fn && has_obj(modules, fn->mod) ? fn->name : "?", gx, gy, gz, bx, by, bz, shmem, nargs,
                stream_id(stream), st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---------------------------------------------------------------- stream capture and graphs */

EXPORT int hipStreamBeginCapture(void *s, int mode)
{
    pthread_mutex_lock(&lock);
    int st = 0, slot = -1;
    for (int i = 0; i < MAX_CAPTURES && slot < 0; i++)
        if (!cap_streams[i])
            slot = i;
    struct graph *g = calloc(1, sizeof *g);
    if (!s || !has_obj(streams, s))
        st = bad_locked("hipStreamBeginCapture of the null or a dead stream");
    else if (capture_of_locked(s))
        st = bad_locked("hipStreamBeginCapture of a stream already capturing");
    else if (slot < 0 || !g)
        st = hipErrorOutOfMemory;
    else {
        cap_streams[slot] = s;
        cap_graphs[slot] = g;
        g = NULL;
    }
    free(g);
    logf_locked("hipStreamBeginCapture stream=%ld mode=%d -> %d", stream_id(s), mode, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipStreamEndCapture(void *s, void **graph)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct graph *g = capture_of_locked(s);
    if (!g || !graph)
        st = bad_locked("hipStreamEndCapture of a stream not capturing");
    else {
        for (int i = 0; i < MAX_CAPTURES; i++)
            if (cap_streams[i] == s)
                cap_streams[i] = NULL, cap_graphs[i] = NULL;
        if (!add_obj(graphs, g)) {
            free(g->ops);
            free(g);
            st = hipErrorOutOfMemory;
        } else {
            *graph = g;
            live_graphs++;
        }
    }
    logf_locked("hipStreamEndCapture stream=%ld ops=%zu -> %d", stream_id(s), g ? g->n : 0, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct graph *g = graph, *x = NULL;
    if (!exec || !has_obj(graphs, g))
        st = bad_locked("hipGraphInstantiateWithFlags of a graph that is not live");
    else if (!(x = calloc(1, sizeof *x)) ||
             (g->n && !(x->ops = malloc(g->n * sizeof *x->ops))) || !add_obj(execs, x)) {
        if (x)
            free(x->ops);
        free(x);
        st = hipErrorOutOfMemory;
    } else {
        if (g->n)
            memcpy(x->ops, g->ops, g->n * sizeof *x->ops);
        x->n = x->cap = g->n;
        x->from = g;
        *exec = x;
        live_graphs++;
    }
    logf_locked("hipGraphInstantiateWithFlags flags=%llu -> %d", flags, st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipGraphLaunch(void *exec, void *s)
{
    pthread_mutex_lock(&lock);
    long fail_at = env_long("FAKEHIP_LAUNCH_FAIL_AT", 0);
    int st = 0;
    struct graph *x = exec;
    if (!has_obj(execs, x) || !stream_ok_locked(s))
        st = bad_locked("hipGraphLaunch of a dead exec or on a dead stream");
    else if (capture_of_locked(s))
        st = bad_locked("hipGraphLaunch on a capturing stream");
    /* Every operation is checked again: the memory it names must still be live. */
    for (size_t i = 0; !st && i < x->n; i++) {
        struct op *o = &x->ops[i];
        if (o->launch) {
            if (fail_at > 0 && ++n_launch >= fail_at)
                st = hipErrorLaunchFailure;
        } else if (o->src ? !in_device_locked(o->dst, o->n) && !in_device_locked(o->src, o->n)
                          : !in_device_locked(o->dst, o->n))
            st = bad_locked("graph copy of device memory that is no longer live");
        else if (o->src)
            memmove(o->dst, o->src, o->n);
        else
            memset(o->dst, o->byte, o->n);
    }
    logf_locked("hipGraphLaunch ops=%zu stream=%ld -> %d", has_obj(execs, x) ? x->n : 0,
                stream_id(s), st);
    pthread_mutex_unlock(&lock);
    return st;
}

static int destroy_graph(void **set, void *g, const char *what)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (del_obj(set, g)) {
        free(((struct graph *)g)->ops);
        free(g);
        live_graphs--;
    } else
        st = bad_locked(what);
    logf_locked("%s -> %d", set == execs ? "hipGraphExecDestroy" : "hipGraphDestroy", st);
    pthread_mutex_unlock(&lock);
    return st;
}

EXPORT int hipGraphExecDestroy(void *exec)
{
    return destroy_graph(execs, exec, "hipGraphExecDestroy of an exec that is not live");
}

EXPORT int hipGraphDestroy(void *graph)
{
    return destroy_graph(graphs, graph, "hipGraphDestroy of a graph that is not live");
}

/* Root nodes: a captured stream is a chain, so its first op is the only root.
 * FAKEHIP_NO_ROOTS=1: refused (hipErrorNotSupported), as by a runtime that cannot list them. */
EXPORT int hipGraphGetRootNodes(void *graph, void **nodes, size_t *n)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct graph *g = graph;
    if (!has_obj(graphs, g) || !n)
        st = bad_locked("hipGraphGetRootNodes of a graph that is not live");
    else if (env_long("FAKEHIP_NO_ROOTS", 0))
        st = hipErrorNotSupported;
    else if (!nodes)
        *n = g->n ? 1 : 0;
    else {
        for (size_t i = 0; i < *n; i++)
            nodes[i] = i == 0 && g->n ? (void *)&g->ops[0] : NULL;
        *n = *n && g->n ? 1 : 0;
    }
    logf_locked("hipGraphGetRootNodes -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* The graph whose ops hold `node`, or NULL. */
static struct graph *graph_of_node_locked(void *node)
{
    uintptr_t p = (uintptr_t)node;
    for (int i = 0; i < MAX_OBJ; i++) {
        struct graph *g = graphs[i];
        if (g && g->n && p >= (uintptr_t)g->ops && p < (uintptr_t)(g->ops + g->n))
            return g;
    }
    return NULL;
}

EXPORT int hipGraphNodeGetType(void *node, int *type)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    if (!graph_of_node_locked(node) || !type)
        st = bad_locked("hipGraphNodeGetType of a node of no live graph");
    else
        *type = ((struct op *)node)->launch ? 0 /* kernel */ : ((struct op *)node)->src ? 1 : 2;
    logf_locked("hipGraphNodeGetType -> %d", st);
    pthread_mutex_unlock(&lock);
    return st;
}

/* hipKernelNodeParams. */
struct kernel_node_params {
    unsigned block[3];
    void **extra;
    void *func;
    unsigned grid[3];
    void **kernel_params;
    unsigned shmem;
};

/* Checks the update as a launch would be checked: the node must be a kernel of the exec's
 * own (still live) graph, the function the recorded one, with the recorded geometry.
 * FAKEHIP_REFUSE_UPDATE=1: a valid update is refused (hipErrorInvalidDeviceFunction), as by
 * ROCm versions that take only host stubs as kernel-node functions. */
EXPORT int hipGraphExecKernelNodeSetParams(void *exec, void *node,
                                           const struct kernel_node_params *p)
{
    pthread_mutex_lock(&lock);
    int st = 0;
    struct graph *x = exec;
    struct function *fn = p ? p->func : NULL;
    int nargs = 0;
    if (p && p->kernel_params)
        while (nargs < 64 && p->kernel_params[nargs])
            nargs++;
    if (!has_obj(execs, x) || !has_obj(graphs, x->from) || graph_of_node_locked(node) != x->from)
        st = bad_locked("hipGraphExecKernelNodeSetParams: node of no live graph of this exec");
    else if (!p || !((struct op *)node)->launch)
        st = bad_locked("hipGraphExecKernelNodeSetParams of a node that is not a kernel");
    else if (!fn || !has_obj(modules, fn->mod) || p->func != ((struct op *)node)->fn)
        st = bad_locked("hipGraphExecKernelNodeSetParams with another function");
    else if (p->extra || !p->kernel_params || nargs == 64)
        st = bad_locked("hipGraphExecKernelNodeSetParams without a NULL-ended kernelParams");
    else if (memcmp(p->grid, ((struct op *)node)->grid, sizeof p->grid) ||
             memcmp(p->block, ((struct op *)node)->block, sizeof p->block) ||
             p->shmem != ((struct op *)node)->shmem)
        st = bad_locked("hipGraphExecKernelNodeSetParams with another geometry");
    else if (env_long("FAKEHIP_REFUSE_UPDATE", 0))
        st = hipErrorInvalidDeviceFunction;
    logf_locked("hipGraphExecKernelNodeSetParams %s args=%d -> %d",
                fn && has_obj(modules, fn->mod) ? fn->name : "?", nargs, st);
    pthread_mutex_unlock(&lock);
    return st;
}
