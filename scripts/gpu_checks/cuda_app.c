/* A CUDA program with no framework and no profiler code, for checking mlprof-inject on
 * a GPU: it loads libcuda and libcudart at run time (no CUDA headers or toolkit needed to
 * build it: gcc cuda_app.c -ldl -o cuda_app), JIT-compiles two kernels from PTX and runs
 * ITER iterations of: vecAdd and scale (1024 B of dynamic shared memory) on one stream;
 * every 50 iterations an async pinned 4 MiB copy to the device on a second stream, a
 * 4 MiB memset and a stream synchronize; at the end a pageable 4 MiB copy back.
 * Prints what it launched, so a profile's counts can be checked exactly. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry vecAdd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn)\n{\n"
    "  .reg .pred p; .reg .b32 r<6>; .reg .f32 f<4>; .reg .b64 rd<10>;\n"
    "  ld.param.u64 rd1, [pa]; ld.param.u64 rd2, [pb]; ld.param.u64 rd3, [pc]; ld.param.u32 r1, [pn];\n"
    "  mov.u32 r2, %ctaid.x; mov.u32 r3, %ntid.x; mov.u32 r4, %tid.x; mad.lo.s32 r5, r2, r3, r4;\n"
    "  setp.ge.u32 p, r5, r1; @p bra DONE;\n"
    "  cvta.to.global.u64 rd4, rd1; cvta.to.global.u64 rd5, rd2; cvta.to.global.u64 rd6, rd3;\n"
    "  mul.wide.u32 rd7, r5, 4; add.s64 rd8, rd4, rd7; ld.global.f32 f1, [rd8];\n"
    "  add.s64 rd9, rd5, rd7; ld.global.f32 f2, [rd9]; add.f32 f3, f1, f2;\n"
    "  add.s64 rd8, rd6, rd7; st.global.f32 [rd8], f3;\nDONE:\n  ret;\n}\n"
    ".visible .entry _Z5scalePfjf(.param .u64 px, .param .u32 pn, .param .f32 ps)\n{\n"
    "  .reg .pred p; .reg .b32 r<6>; .reg .f32 f<4>; .reg .b64 rd<6>;\n"
    "  ld.param.u64 rd1, [px]; ld.param.u32 r1, [pn]; ld.param.f32 f1, [ps];\n"
    "  mov.u32 r2, %ctaid.x; mov.u32 r3, %ntid.x; mov.u32 r4, %tid.x; mad.lo.s32 r5, r2, r3, r4;\n"
    "  setp.ge.u32 p, r5, r1; @p bra DONE2;\n"
    "  cvta.to.global.u64 rd2, rd1; mul.wide.u32 rd3, r5, 4; add.s64 rd4, rd2, rd3;\n"
    "  ld.global.f32 f2, [rd4]; mul.f32 f3, f2, f1; st.global.f32 [rd4], f3;\nDONE2:\n  ret;\n}\n";

#define LOAD(lib, name) void *name = dlsym(lib, #name); if (!name) { fprintf(stderr, "no %s\n", #name); return 2; }
#define CHECK(call) do { int e = (call); if (e) { fprintf(stderr, "%s failed: %d\n", #call, e); return 3; } } while (0)

typedef int (*fn_i)(int);
typedef int (*fn_pp)(void **);
typedef int (*fn_ppz)(void **, size_t);
typedef int (*fn_p)(void *);

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!cuda || !rt) { fprintf(stderr, "cuda_app: %s\n", dlerror()); return 2; }
    LOAD(rt, cudaSetDevice) LOAD(rt, cudaFree) LOAD(rt, cudaMalloc) LOAD(rt, cudaMallocHost) LOAD(rt, cudaFreeHost)
    LOAD(rt, cudaMemcpy) LOAD(rt, cudaMemcpyAsync) LOAD(rt, cudaMemsetAsync) LOAD(rt, cudaStreamCreate)
    LOAD(rt, cudaStreamSynchronize) LOAD(rt, cudaDeviceSynchronize)
    LOAD(cuda, cuCtxGetCurrent) LOAD(cuda, cuModuleLoadData) LOAD(cuda, cuModuleGetFunction) LOAD(cuda, cuLaunchKernel)
    CHECK(((fn_i)cudaSetDevice)(0));
    CHECK(((fn_p)cudaFree)(NULL));
    void *ctx = NULL, *module = NULL, *vec_add = NULL, *scale = NULL;
    CHECK(((fn_pp)cuCtxGetCurrent)(&ctx));
    CHECK(((int (*)(void **, const void *))cuModuleLoadData)(&module, PTX));
    CHECK(((int (*)(void **, void *, const char *))cuModuleGetFunction)(&vec_add, module, "vecAdd"));
    CHECK(((int (*)(void **, void *, const char *))cuModuleGetFunction)(&scale, module, "_Z5scalePfjf"));
    unsigned n = 1u << 20;
    size_t bytes = (size_t)n * 4;
    void *a, *b, *c, *pinned, *s1, *s2;
    CHECK(((fn_ppz)cudaMalloc)(&a, bytes)); CHECK(((fn_ppz)cudaMalloc)(&b, bytes)); CHECK(((fn_ppz)cudaMalloc)(&c, bytes));
    CHECK(((fn_ppz)cudaMallocHost)(&pinned, bytes));
    CHECK(((fn_pp)cudaStreamCreate)(&s1)); CHECK(((fn_pp)cudaStreamCreate)(&s2));
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **) =
        (int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **))cuLaunchKernel;
    int (*copy_async)(void *, const void *, size_t, int, void *) = (int (*)(void *, const void *, size_t, int, void *))cudaMemcpyAsync;
    int (*set_async)(void *, int, size_t, void *) = (int (*)(void *, int, size_t, void *))cudaMemsetAsync;
    float factor = 0.5f;
    long kernels = 0, copies = 0, memsets = 0, syncs = 0;
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iterations; i++) {
        void *add_args[] = {&a, &b, &c, &n};
        CHECK(launch(vec_add, n / 256, 1, 1, 256, 1, 1, 0, s1, add_args, NULL));
        void *scale_args[] = {&c, &n, &factor};
        CHECK(launch(scale, n / 256, 1, 1, 256, 1, 1, 1024, s1, scale_args, NULL));
        kernels += 2;
        if (i % 50 == 0) {
            CHECK(copy_async(a, pinned, bytes, 1 /* HostToDevice */, s2)); copies++;
            CHECK(set_async(b, 0, bytes, s1)); memsets++;
            CHECK(((fn_p)cudaStreamSynchronize)(s1)); syncs++;
        }
    }
    CHECK(((int (*)(void))cudaDeviceSynchronize)());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    void *pageable = malloc(bytes);
    CHECK(((int (*)(void *, const void *, size_t, int))cudaMemcpy)(pageable, c, bytes, 2 /* DeviceToHost */)); copies++;
    printf("CUDA_APP kernels=%ld copies=%ld memsets=%ld syncs=%ld loop_ms=%.3f\n", kernels, copies, memsets, syncs,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    return 0;
}
