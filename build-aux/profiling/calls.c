/* Host cost of the CUDA driver calls a frame makes, untraced: event record, stream wait,
 * event query, graph launch (one empty kernel), kernel-node argument update, kernel launch.
 * Each is timed over N calls from T threads at once (each thread its own stream and event,
 * one shared primary context, as the library's workers). Build on the GPU machine:
 *   gcc -O2 -o /tmp/calls build-aux/profiling/calls.c -I$INC -L$LIB -lcuda -lpthread
 * where INC/LIB are the toolkit's targets/x86_64-linux/{include,lib} (libcuda from the driver).
 * Prints ns per call and calls per second over all threads. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, (int)r_);             \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* An empty kernel taking one pointer, in PTX the driver compiles for any architecture. */
static const char *ptx = ".version 7.0\n.target sm_50\n.address_size 64\n"
                         ".visible .entry nop(.param .u64 p)\n{\n ret;\n}\n";

static CUcontext ctx;
static CUfunction fn;
static int n_calls;
static const char *what;
static pthread_barrier_t bar;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
    double *out = arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream s;
    CUevent e, e2;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e2, s));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 256));
    void *args[] = {&p};
    CUgraph g;
    CUgraphExec ge;
    CUgraphNode node;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&ge, g, 0));
    size_t nn = 1;
    CK(cuGraphGetNodes(g, &node, &nn));
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CK(cuStreamSynchronize(s));
    pthread_barrier_wait(&bar);
    double t = now();
    for (int i = 0; i < n_calls; i++) {
        if (!strcmp(what, "record"))
            CK(cuEventRecord(e, s));
        else if (!strcmp(what, "wait"))
            CK(cuStreamWaitEvent(s, e2, 0));
        else if (!strcmp(what, "query"))
            cuEventQuery(e2);
        else if (!strcmp(what, "setctx"))
            CK(cuCtxSetCurrent(ctx));
        else if (!strcmp(what, "getctx")) {
            CUcontext c;
            CK(cuCtxGetCurrent(&c));
        }
        else if (!strcmp(what, "graph")) {
            CK(cuGraphLaunch(ge, s));
            if (i % 64 == 63)
                CK(cuStreamSynchronize(s));
        } else if (!strcmp(what, "update"))
            CK(cuGraphExecKernelNodeSetParams(ge, node, &kp));
        else if (!strcmp(what, "launch")) {
            CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
            if (i % 64 == 63)
                CK(cuStreamSynchronize(s));
        }
    }
    *out = now() - t;
    CK(cuStreamSynchronize(s));
    cuGraphExecDestroy(ge);
    cuGraphDestroy(g);
    cuMemFree(p);
    cuEventDestroy(e);
    cuEventDestroy(e2);
    cuStreamDestroy(s);
    return NULL;
}

int main(int argc, char **argv)
{
    n_calls = argc > 1 ? atoi(argv[1]) : 20000;
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fn, mod, "nop"));
    const char *calls[] = {"record", "wait", "query", "setctx", "getctx",
                           "update", "graph", "launch"};
    const int threads[] = {1, 4, 16};
    printf("%-8s %7s %10s %12s\n", "call", "threads", "ns/call", "calls/s all");
    for (unsigned c = 0; c < sizeof calls / sizeof *calls; c++) {
        for (unsigned k = 0; k < sizeof threads / sizeof *threads; k++) {
            int nt = threads[k];
            what = calls[c];
            pthread_t th[16];
            double secs[16];
            pthread_barrier_init(&bar, NULL, nt);
            for (int i = 0; i < nt; i++)
                pthread_create(&th[i], NULL, worker, &secs[i]);
            double mx = 0, sum = 0;
            for (int i = 0; i < nt; i++) {
                pthread_join(th[i], NULL);
                sum += secs[i];
                if (secs[i] > mx)
                    mx = secs[i];
            }
            pthread_barrier_destroy(&bar);
            printf("%-8s %7d %10.0f %12.0f\n", what, nt, 1e9 * sum / nt / n_calls,
                   nt * (double)n_calls / mx);
        }
    }
    return 0;
}
