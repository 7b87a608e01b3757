/*
 * A fake libnvidia-ml.so.1 for tests: the real pynvml binds to it through ctypes exactly as it binds to the
 * driver's library, so the exporter's NVML code runs unchanged against scripted hardware.
 *
 * The hardware is described by a scenario file (path in FAKE_NVML_SCENARIO), re-read whenever the file
 * changes, so one process can walk through several scenarios. The format is one directive per line, written
 * by tests/fakes/nvml/scenario.py (the Python side is the documented interface; this parser is its twin):
 *
 *   epoch <unix seconds>                     time zero of every timeline below
 *   driver <version>                         nvmlSystemGetDriverVersion
 *   init_error <nvml return code>            nvmlInit fails with it (e.g. 9: driver not loaded)
 *   generation <n>                           a change after nvmlInit means "driver reloaded": calls answer
 *                                            NVML_ERROR_UNINITIALIZED until the caller re-initialises
 *   sample_period_us <n>                     the driver's process-sampling tick (default 100000)
 *   gpu <uuid> <minor> <fb_total_mib> <fb_reserved_mib> <power_mw> <temp_c> <sm_mhz> <mig 0|1> <name...>
 *   gpu_extra <gpu index> <mem_mhz> <memory_temp_c> <enc %> <dec %> <pcie replays> <remapped rows correctable>
 *             <remapped rows uncorrectable> <row remap failure 0|1> <nvlink KiB/s>
 *                                            the GPU's other readings (all 0 until given)
 *   gpm <gpu index> <graphics %> <tensor %> <dram %>
 *                                            the GPU supports GPM (Hopper and newer) with these activities
 *   mig <gpu index> <uuid> <gi> <ci> <fb_total_mib> <name...>
 *   proc <gpu index> <pid> <used bytes, -1 = not available> <gi> <ci>
 *   util <gpu index> <pid> <from s> <to s> <sm %> <mem %>
 *   lost <gpu index> [from s]                every call on the GPU answers NVML_ERROR_GPU_IS_LOST
 *   unsupported <gpu index> <function>       that function answers NVML_ERROR_NOT_SUPPORTED on the GPU; a field
 *                                            of nvmlDeviceGetFieldValues is named by its NVML_FI_ name
 *   xid <gpu index> <at s> <code>            an XID critical-error event
 *
 * Compiled with -DFAKE_NVML_OLD_DRIVER the library lacks nvmlDeviceGetComputeRunningProcesses_v3, like a
 * driver older than the bindings.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 128
#define MAX_MIGS 8
#define MAX_PROCS 4096
#define MAX_UTILS 8192
#define MAX_UNSUPPORTED 256
#define MAX_XIDS 256
#define NAME_LEN 96
#define UUID_LEN 96
#define EVENT_XID 0x8ULL
#define NO_INSTANCE 0xFFFFFFFFu

struct device;
typedef struct device *nvmlDevice_t;

struct device {
    int gpu;            /* index of the physical GPU */
    int mig_slot;       /* -1 for the physical GPU */
    char uuid[UUID_LEN];
    char name[NAME_LEN];
    unsigned gi, ci;
    unsigned long long fb_total_mib;
};

struct gpu {
    struct device dev;
    struct device migs[MAX_MIGS];
    int mig_count;
    int mig_enabled;
    unsigned minor;
    unsigned long long fb_reserved_mib;
    unsigned power_mw, temp_c, sm_mhz;
    unsigned mem_mhz, memory_temp_c, enc_percent, dec_percent, pcie_replays;
    unsigned rows_correctable, rows_uncorrectable, remap_failure;
    unsigned long long nvlink_kib_per_s;
    int gpm;
    double gpm_graphics, gpm_tensor, gpm_dram;
    int lost;
    double lost_from;
};

struct proc { int gpu; unsigned pid; long long used; unsigned gi, ci; };
struct util { int gpu; unsigned pid; double from, to; unsigned sm, mem; };
struct unsupported { int gpu; char fn[80]; };
struct xid { int gpu; double at; unsigned long long code; };

struct scenario {
    double epoch;
    char driver[80];
    int init_error;
    long generation;
    unsigned long long period_us;
    struct gpu gpus[MAX_GPUS];
    int gpu_count;
    struct proc procs[MAX_PROCS];
    int proc_count;
    struct util utils[MAX_UTILS];
    int util_count;
    struct unsupported unsupported[MAX_UNSUPPORTED];
    int unsupported_count;
    struct xid xids[MAX_XIDS];
    int xid_count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct scenario sc;
static struct timespec loaded_mtime;
static off_t loaded_size = -1;
static ino_t loaded_inode;
static int initialised;
static long initialised_generation;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rest_of_line(const char *line, int skip_fields, char *out, size_t size) {
    const char *p = line;
    for (int i = 0; i < skip_fields; i++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    while (*p == ' ') p++;
    snprintf(out, size, "%s", p);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r')) out[--n] = 0;
}

static void parse(FILE *f) {
    static struct scenario next;
    memset(&next, 0, sizeof next);
    next.epoch = now_s();
    next.period_us = 100000;
    snprintf(next.driver, sizeof next.driver, "570.00.00");
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char kw[32] = {0};
        if (sscanf(line, "%31s", kw) != 1 || kw[0] == '#') continue;
        if (!strcmp(kw, "epoch")) {
            sscanf(line, "%*s %lf", &next.epoch);
        } else if (!strcmp(kw, "driver")) {
            rest_of_line(line, 1, next.driver, sizeof next.driver);
        } else if (!strcmp(kw, "init_error")) {
            sscanf(line, "%*s %d", &next.init_error);
        } else if (!strcmp(kw, "generation")) {
            sscanf(line, "%*s %ld", &next.generation);
        } else if (!strcmp(kw, "sample_period_us")) {
            sscanf(line, "%*s %llu", &next.period_us);
        } else if (!strcmp(kw, "gpu") && next.gpu_count < MAX_GPUS) {
            struct gpu *g = &next.gpus[next.gpu_count];
            if (sscanf(line, "%*s %95s %u %llu %llu %u %u %u %d", g->dev.uuid, &g->minor, &g->dev.fb_total_mib,
                       &g->fb_reserved_mib, &g->power_mw, &g->temp_c, &g->sm_mhz, &g->mig_enabled) != 8)
                continue;
            rest_of_line(line, 9, g->dev.name, sizeof g->dev.name);
            g->dev.gpu = next.gpu_count;
            g->dev.mig_slot = -1;
            g->dev.gi = g->dev.ci = NO_INSTANCE;
            next.gpu_count++;
        } else if (!strcmp(kw, "gpu_extra")) {
            int gi_index;
            struct gpu x = {0};
            if (sscanf(line, "%*s %d %u %u %u %u %u %u %u %u %llu", &gi_index, &x.mem_mhz, &x.memory_temp_c,
                       &x.enc_percent, &x.dec_percent, &x.pcie_replays, &x.rows_correctable, &x.rows_uncorrectable,
                       &x.remap_failure, &x.nvlink_kib_per_s) != 10 ||
                gi_index < 0 || gi_index >= next.gpu_count)
                continue;
            struct gpu *g = &next.gpus[gi_index];
            g->mem_mhz = x.mem_mhz;
            g->memory_temp_c = x.memory_temp_c;
            g->enc_percent = x.enc_percent;
            g->dec_percent = x.dec_percent;
            g->pcie_replays = x.pcie_replays;
            g->rows_correctable = x.rows_correctable;
            g->rows_uncorrectable = x.rows_uncorrectable;
            g->remap_failure = x.remap_failure;
            g->nvlink_kib_per_s = x.nvlink_kib_per_s;
        } else if (!strcmp(kw, "gpm")) {
            int gi_index;
            double graphics, tensor, dram;
            if (sscanf(line, "%*s %d %lf %lf %lf", &gi_index, &graphics, &tensor, &dram) != 4 || gi_index < 0 ||
                gi_index >= next.gpu_count)
                continue;
            struct gpu *g = &next.gpus[gi_index];
            g->gpm = 1;
            g->gpm_graphics = graphics;
            g->gpm_tensor = tensor;
            g->gpm_dram = dram;
        } else if (!strcmp(kw, "mig")) {
            int gi_index;
            struct device m = {0};
            if (sscanf(line, "%*s %d %95s %u %u %llu", &gi_index, m.uuid, &m.gi, &m.ci, &m.fb_total_mib) != 5)
                continue;
            if (gi_index < 0 || gi_index >= next.gpu_count || next.gpus[gi_index].mig_count >= MAX_MIGS) continue;
            rest_of_line(line, 6, m.name, sizeof m.name);
            struct gpu *g = &next.gpus[gi_index];
            m.gpu = gi_index;
            m.mig_slot = g->mig_count;
            g->migs[g->mig_count++] = m;
        } else if (!strcmp(kw, "proc") && next.proc_count < MAX_PROCS) {
            struct proc *p = &next.procs[next.proc_count];
            if (sscanf(line, "%*s %d %u %lld %u %u", &p->gpu, &p->pid, &p->used, &p->gi, &p->ci) == 5)
                next.proc_count++;
        } else if (!strcmp(kw, "util") && next.util_count < MAX_UTILS) {
            struct util *u = &next.utils[next.util_count];
            if (sscanf(line, "%*s %d %u %lf %lf %u %u", &u->gpu, &u->pid, &u->from, &u->to, &u->sm, &u->mem) == 6)
                next.util_count++;
        } else if (!strcmp(kw, "lost")) {
            int gi_index;
            double from = -1e18;
            if (sscanf(line, "%*s %d %lf", &gi_index, &from) >= 1 && gi_index >= 0 && gi_index < next.gpu_count) {
                next.gpus[gi_index].lost = 1;
                next.gpus[gi_index].lost_from = from;
            }
        } else if (!strcmp(kw, "unsupported") && next.unsupported_count < MAX_UNSUPPORTED) {
            struct unsupported *u = &next.unsupported[next.unsupported_count];
            if (sscanf(line, "%*s %d %79s", &u->gpu, u->fn) == 2) next.unsupported_count++;
        } else if (!strcmp(kw, "xid") && next.xid_count < MAX_XIDS) {
            struct xid *x = &next.xids[next.xid_count];
            if (sscanf(line, "%*s %d %lf %llu", &x->gpu, &x->at, &x->code) == 3) next.xid_count++;
        }
    }
    sc = next;
}

/* Re-read the scenario when its file changed; called with the lock held at every entry point. */
static void refresh(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    /* Writers replace the file (a new inode), so a rewrite within one mtime tick is still seen. */
    if (st.st_ino == loaded_inode && st.st_size == loaded_size && st.st_mtim.tv_sec == loaded_mtime.tv_sec &&
        st.st_mtim.tv_nsec == loaded_mtime.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    parse(f);
    fclose(f);
    loaded_size = st.st_size;
    loaded_inode = st.st_ino;
    loaded_mtime = st.st_mtim;
}

static double elapsed(void) { return now_s() - sc.epoch; }

static int unsupported(int gpu, const char *fn) {
    for (int i = 0; i < sc.unsupported_count; i++)
        if (sc.unsupported[i].gpu == gpu && !strcmp(sc.unsupported[i].fn, fn)) return 1;
    return 0;
}

/* Validate a handle against the current scenario; the handle points into `sc`, so it stays valid. */
static nvmlReturn_t check(nvmlDevice_t d, const char *fn) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (initialised_generation != sc.generation) return NVML_ERROR_UNINITIALIZED;
    if (!d || d->gpu < 0 || d->gpu >= sc.gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    struct gpu *g = &sc.gpus[d->gpu];
    if (g->lost && elapsed() >= g->lost_from) return NVML_ERROR_GPU_IS_LOST;
    if (unsupported(d->gpu, fn)) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

#define ENTER(d, fn)                      \
    pthread_mutex_lock(&lock);            \
    refresh();                            \
    nvmlReturn_t rc_ = check((d), (fn));  \
    if (rc_ != NVML_SUCCESS) {            \
        pthread_mutex_unlock(&lock);      \
        return rc_;                       \
    }
#define LEAVE(rc)                  \
    do {                           \
        pthread_mutex_unlock(&lock); \
        return (rc);               \
    } while (0)

/* The process's utilization at time t (seconds after epoch): the covering util segment, else 0. */
static void util_at(int gpu, unsigned pid, double t, unsigned *sm, unsigned *mem) {
    *sm = *mem = 0;
    for (int i = 0; i < sc.util_count; i++) {
        struct util *u = &sc.utils[i];
        if (u->gpu == gpu && u->pid == pid && t >= u->from && t < u->to) {
            *sm = u->sm;
            *mem = u->mem;
        }
    }
}

static int proc_visible(const struct proc *p, nvmlDevice_t d) {
    if (p->gpu != d->gpu) return 0;
    return d->mig_slot < 0 || p->gi == d->gi;
}

/* ---- library lifecycle ---- */

static nvmlReturn_t init_common(void) {
    pthread_mutex_lock(&lock);
    refresh();
    if (sc.init_error) LEAVE(sc.init_error);
    initialised = 1;
    initialised_generation = sc.generation;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlInitWithFlags(unsigned flags) { (void)flags; return init_common(); }
nvmlReturn_t nvmlInit_v2(void) { return init_common(); }
nvmlReturn_t nvmlInit(void) { return init_common(); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    initialised = 0;
    LEAVE(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned length) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (strlen(sc.driver) + 1 > length) LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    strcpy(version, sc.driver);
    LEAVE(NVML_SUCCESS);
}

/* ---- enumeration ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised || initialised_generation != sc.generation) LEAVE(NVML_ERROR_UNINITIALIZED);
    *count = (unsigned)sc.gpu_count;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised || initialised_generation != sc.generation) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (index >= (unsigned)sc.gpu_count) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    struct gpu *g = &sc.gpus[index];
    if (g->lost && elapsed() >= g->lost_from) LEAVE(NVML_ERROR_GPU_IS_LOST);
    *device = &g->dev;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending) {
    ENTER(d, "nvmlDeviceGetMigMode");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *current = *pending = (unsigned)sc.gpus[d->gpu].mig_enabled;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned *count) {
    ENTER(d, "nvmlDeviceGetMaxMigDeviceCount");
    *count = sc.gpus[d->gpu].mig_enabled ? 7 : 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned index, nvmlDevice_t *mig) {
    ENTER(d, "nvmlDeviceGetMigDeviceHandleByIndex");
    struct gpu *g = &sc.gpus[d->gpu];
    if (!g->mig_enabled || d->mig_slot >= 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (index >= (unsigned)g->mig_count) LEAVE(NVML_ERROR_NOT_FOUND);
    *mig = &g->migs[index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned *is_mig) {
    ENTER(d, "nvmlDeviceIsMigDeviceHandle");
    *is_mig = d->mig_slot >= 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id) {
    ENTER(d, "nvmlDeviceGetGpuInstanceId");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = d->gi;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned *id) {
    ENTER(d, "nvmlDeviceGetComputeInstanceId");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = d->ci;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t d, nvmlDevice_t *parent) {
    ENTER(d, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *parent = &sc.gpus[d->gpu].dev;
    LEAVE(NVML_SUCCESS);
}

/* ---- identity ---- */

static nvmlReturn_t copy_string(const char *value, char *out, unsigned length) {
    if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned length) {
    ENTER(d, "nvmlDeviceGetUUID");
    LEAVE(copy_string(d->uuid, uuid, length));
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned length) {
    ENTER(d, "nvmlDeviceGetName");
    LEAVE(copy_string(d->name, name, length));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *index) {
    ENTER(d, "nvmlDeviceGetIndex");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *index = (unsigned)d->gpu;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *minor) {
    ENTER(d, "nvmlDeviceGetMinorNumber");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *minor = sc.gpus[d->gpu].minor;
    LEAVE(NVML_SUCCESS);
}

/* ---- device readings ---- */

typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define NVML_MEMORY_V2 0x02000028u

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *utilization) {
    ENTER(d, "nvmlDeviceGetUtilizationRates");
    /* A real driver has no device-wide utilization with MIG on, neither for the GPU nor its instances. */
    if (d->mig_slot >= 0 || sc.gpus[d->gpu].mig_enabled) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    double t = elapsed();
    unsigned sm_total = 0, mem_total = 0;
    for (int i = 0; i < sc.proc_count; i++) {
        if (sc.procs[i].gpu != d->gpu) continue;
        unsigned sm, mem;
        util_at(d->gpu, sc.procs[i].pid, t, &sm, &mem);
        sm_total += sm;
        mem_total += mem;
    }
    utilization->gpu = sm_total > 100 ? 100 : sm_total;
    utilization->memory = mem_total > 100 ? 100 : mem_total;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
    ENTER(d, "nvmlDeviceGetMemoryInfo");
    unsigned long long used = d->mig_slot < 0 ? sc.gpus[d->gpu].fb_reserved_mib << 20 : 0;
    for (int i = 0; i < sc.proc_count; i++)
        if (proc_visible(&sc.procs[i], d) && sc.procs[i].used > 0) used += (unsigned long long)sc.procs[i].used;
    memory->total = d->fb_total_mib << 20;
    memory->used = used;
    memory->free = memory->total > used ? memory->total - used : 0;
    LEAVE(NVML_SUCCESS);
}

/* Like the driver: v2 counts the driver's reservation apart, so used is what processes hold. */
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *memory) {
    ENTER(d, "nvmlDeviceGetMemoryInfo_v2");
    if (memory->version != NVML_MEMORY_V2) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long reserved = d->mig_slot < 0 ? sc.gpus[d->gpu].fb_reserved_mib << 20 : 0, used = 0;
    for (int i = 0; i < sc.proc_count; i++)
        if (proc_visible(&sc.procs[i], d) && sc.procs[i].used > 0) used += (unsigned long long)sc.procs[i].used;
    memory->total = d->fb_total_mib << 20;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = memory->total > reserved + used ? memory->total - reserved - used : 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *milliwatts) {
    ENTER(d, "nvmlDeviceGetPowerUsage");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *milliwatts = sc.gpus[d->gpu].power_mw;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *millijoules) {
    ENTER(d, "nvmlDeviceGetTotalEnergyConsumption");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    double t = elapsed();
    /* Constant power since the epoch: energy in mJ is mW times seconds. */
    *millijoules = (unsigned long long)((double)sc.gpus[d->gpu].power_mw * (t > 0 ? t : 0));
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *temp) {
    ENTER(d, "nvmlDeviceGetTemperature");
    if (sensor != 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *temp = sc.gpus[d->gpu].temp_c;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *clock) {
    ENTER(d, "nvmlDeviceGetClockInfo");
    if (type != 1 && type != 2) LEAVE(NVML_ERROR_NOT_SUPPORTED); /* NVML_CLOCK_SM and NVML_CLOCK_MEM */
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *clock = type == 1 ? sc.gpus[d->gpu].sm_mhz : sc.gpus[d->gpu].mem_mhz;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned *utilization, unsigned *period_us) {
    ENTER(d, "nvmlDeviceGetEncoderUtilization");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *utilization = sc.gpus[d->gpu].enc_percent;
    *period_us = 167000;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned *utilization, unsigned *period_us) {
    ENTER(d, "nvmlDeviceGetDecoderUtilization");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *utilization = sc.gpus[d->gpu].dec_percent;
    *period_us = 167000;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned *replays) {
    ENTER(d, "nvmlDeviceGetPcieReplayCounter");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *replays = sc.gpus[d->gpu].pcie_replays;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned *correctable, unsigned *uncorrectable,
                                       unsigned *pending, unsigned *failure) {
    ENTER(d, "nvmlDeviceGetRemappedRows");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    struct gpu *g = &sc.gpus[d->gpu];
    *correctable = g->rows_correctable;
    *uncorrectable = g->rows_uncorrectable;
    *pending = 0;
    *failure = g->remap_failure;
    LEAVE(NVML_SUCCESS);
}

/* nvmlPciInfo_t as nvml.h lays it out since NVML 9: the legacy 16-byte bus id first, the 32-byte one last. */
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    ENTER(d, "nvmlDeviceGetPciInfo_v3");
    memset(pci, 0, sizeof *pci);
    pci->bus = (unsigned)(0x18 + d->gpu) & 0xFF; /* a MIG instance answers with its GPU's address */
    pci->pciDeviceId = 0x233010DE;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    LEAVE(NVML_SUCCESS);
}

/* ---- field values (nvmlFieldValue_t as nvml.h lays it out) ---- */

typedef union {
    double dVal;
    unsigned uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned fieldId;
    unsigned scopeId;
    long long timestamp;
    long long latencyUsec;
    unsigned valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

enum {
    NVML_FI_DEV_MEMORY_TEMP = 82,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,
    VALUE_TYPE_UNSIGNED_INT = 1,
    VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
};

static const char *field_name(unsigned id) {
    switch (id) {
    case NVML_FI_DEV_MEMORY_TEMP: return "NVML_FI_DEV_MEMORY_TEMP";
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: return "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX";
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: return "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX";
    default: return NULL;
    }
}

/* Each value gets its own return code, like the driver; NVLink throughput is summed over links (scopeId
 * UINT_MAX) and grows at the scripted rate since the epoch, half of it each way. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    ENTER(d, "nvmlDeviceGetFieldValues");
    struct gpu *g = &sc.gpus[d->gpu];
    double t = elapsed();
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        const char *name = field_name(v->fieldId);
        v->timestamp = (long long)(now_s() * 1e6);
        v->latencyUsec = 0;
        if (!name || d->mig_slot >= 0 || unsupported(d->gpu, name)) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        v->nvmlReturn = NVML_SUCCESS;
        if (v->fieldId == NVML_FI_DEV_MEMORY_TEMP) {
            v->valueType = VALUE_TYPE_UNSIGNED_INT;
            v->value.uiVal = g->memory_temp_c;
        } else if (v->scopeId != 0xFFFFFFFFu) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; /* one link at a time is not scripted */
        } else {
            v->valueType = VALUE_TYPE_UNSIGNED_LONG_LONG;
            v->value.ullVal = (unsigned long long)((double)g->nvlink_kib_per_s / 2.0 * (t > 0 ? t : 0));
        }
    }
    LEAVE(NVML_SUCCESS);
}

/* ---- GPM (nvmlGpm* and their structures as nvml.h lays them out) ---- */

#define NVML_GPM_METRIC_MAX 477
#define NVML_GPM_METRICS_GET_VERSION 1u
#define NVML_GPM_SUPPORT_VERSION 1u
enum { GPM_GRAPHICS_UTIL = 1, GPM_ANY_TENSOR_UTIL = 5, GPM_DRAM_BW_UTIL = 10 };

struct gpm_sample {
    int gpu; /* -1 until nvmlGpmSampleGet fills it */
    double at;
};
typedef struct gpm_sample *nvmlGpmSample_t;

typedef struct {
    unsigned metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned version;
    unsigned numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct { unsigned version, isSupportedDevice; } nvmlGpmSupport_t;

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *support) {
    ENTER(d, "nvmlGpmQueryDeviceSupport");
    if (support->version != NVML_GPM_SUPPORT_VERSION) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    support->isSupportedDevice = d->mig_slot < 0 && sc.gpus[d->gpu].gpm;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    *sample = calloc(1, sizeof **sample);
    if (!*sample) return NVML_ERROR_UNKNOWN;
    (*sample)->gpu = -1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    free(sample);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t sample) {
    ENTER(d, "nvmlGpmSampleGet");
    if (!sample) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (d->mig_slot >= 0 || !sc.gpus[d->gpu].gpm) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    sample->gpu = d->gpu;
    sample->at = now_s();
    LEAVE(NVML_SUCCESS);
}

/* Activity between two samples of one GPU: the scripted percentages, per metric its own return code. */
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *request) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised || initialised_generation != sc.generation) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (!request) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (request->version != NVML_GPM_METRICS_GET_VERSION) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlGpmSample_t first = request->sample1, second = request->sample2;
    if (!first || !second || first->gpu < 0 || first->gpu != second->gpu || second->at <= first->at ||
        request->numMetrics > NVML_GPM_METRIC_MAX || first->gpu >= sc.gpu_count)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    struct gpu *g = &sc.gpus[first->gpu];
    if (g->lost && elapsed() >= g->lost_from) LEAVE(NVML_ERROR_GPU_IS_LOST);
    if (unsupported(first->gpu, "nvmlGpmMetricsGet")) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    for (unsigned i = 0; i < request->numMetrics; i++) {
        nvmlGpmMetric_t *m = &request->metrics[i];
        m->nvmlReturn = NVML_SUCCESS;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        switch (m->metricId) {
        case GPM_GRAPHICS_UTIL: m->value = g->gpm_graphics; break;
        case GPM_ANY_TENSOR_UTIL: m->value = g->gpm_tensor; break;
        case GPM_DRAM_BW_UTIL: m->value = g->gpm_dram; break;
        default: m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; m->value = 0;
        }
    }
    LEAVE(NVML_SUCCESS);
}

/* ---- processes ---- */

typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
} nvmlProcessInfo_t;

#ifndef FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *infos) {
    ENTER(d, "nvmlDeviceGetComputeRunningProcesses_v3");
    unsigned n = 0;
    for (int i = 0; i < sc.proc_count; i++)
        if (proc_visible(&sc.procs[i], d)) n++;
    if (n == 0) {
        *count = 0;
        LEAVE(NVML_SUCCESS);
    }
    if (!infos || *count < n) {
        *count = n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned k = 0;
    for (int i = 0; i < sc.proc_count; i++) {
        struct proc *p = &sc.procs[i];
        if (!proc_visible(p, d)) continue;
        infos[k].pid = p->pid;
        infos[k].usedGpuMemory = p->used < 0 ? ~0ULL : (unsigned long long)p->used;
        infos[k].gpuInstanceId = p->gi;
        infos[k].computeInstanceId = p->ci;
        k++;
    }
    *count = k;
    LEAVE(NVML_SUCCESS);
}
#endif

typedef struct {
    unsigned pid;
    unsigned long long timeStamp;
    unsigned smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/*
 * Like the driver: one sample per process that was busy in the ticks newer than lastSeen (the mean of those
 * ticks, stamped with the newest one), NOT_FOUND when there is none, and the driver's buffer holds at most
 * the last few seconds.
 */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *samples,
                                             unsigned *count, unsigned long long last_seen_us) {
    ENTER(d, "nvmlDeviceGetProcessUtilization");
    if (d->mig_slot >= 0 || sc.gpus[d->gpu].mig_enabled) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    unsigned long long period = sc.period_us ? sc.period_us : 100000;
    unsigned long long now_us = (unsigned long long)(now_s() * 1e6);
    unsigned long long newest = now_us / period * period;
    unsigned long long buffer_start = newest > 5000000ULL ? newest - 5000000ULL : 0;
    unsigned long long first = last_seen_us >= buffer_start ? last_seen_us + 1 : buffer_start;
    first = (first + period - 1) / period * period;
    nvmlProcessUtilizationSample_t found[512];
    unsigned n = 0;
    for (int i = 0; i < sc.proc_count && n < 512; i++) {
        struct proc *p = &sc.procs[i];
        if (p->gpu != d->gpu) continue;
        unsigned long long sm_sum = 0, mem_sum = 0, ticks = 0, stamp = 0;
        for (unsigned long long tick = first; tick <= newest; tick += period) {
            unsigned sm, mem;
            util_at(d->gpu, p->pid, (double)tick / 1e6 - sc.epoch, &sm, &mem);
            ticks++;
            sm_sum += sm;
            mem_sum += mem;
            if (sm || mem) stamp = tick;
        }
        if (!stamp) continue;
        found[n].pid = p->pid;
        found[n].timeStamp = stamp;
        found[n].smUtil = (unsigned)(sm_sum / ticks);
        found[n].memUtil = (unsigned)(mem_sum / ticks);
        found[n].encUtil = found[n].decUtil = 0;
        n++;
    }
    if (n == 0) LEAVE(NVML_ERROR_NOT_FOUND);
    if (!samples || *count < n) {
        *count = n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    memcpy(samples, found, n * sizeof found[0]);
    *count = n;
    LEAVE(NVML_SUCCESS);
}

/* ---- XID events ---- */

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
} nvmlEventData_t;

struct event_set {
    unsigned long long registered[MAX_GPUS];
    double delivered_until; /* events at or before this time (since epoch) were handed out */
};
typedef struct event_set *nvmlEventSet_t;

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    *set = calloc(1, sizeof **set);
    if (!*set) LEAVE(NVML_ERROR_UNKNOWN);
    (*set)->delivered_until = elapsed();
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    ENTER(d, "nvmlDeviceGetSupportedEventTypes");
    *types = EVENT_XID;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    ENTER(d, "nvmlDeviceRegisterEvents");
    if (types & ~EVENT_XID) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    set->registered[d->gpu] |= types;
    LEAVE(NVML_SUCCESS);
}

/* Hands out the oldest undelivered XID; waits by polling so a scenario rewrite is seen while waiting. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
    double deadline = now_s() + timeout_ms / 1000.0;
    for (;;) {
        pthread_mutex_lock(&lock);
        refresh();
        if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
        double t = elapsed();
        int best = -1;
        for (int i = 0; i < sc.xid_count; i++) {
            struct xid *x = &sc.xids[i];
            if (x->gpu < 0 || x->gpu >= sc.gpu_count || !(set->registered[x->gpu] & EVENT_XID)) continue;
            if (x->at <= set->delivered_until || x->at > t) continue;
            if (best < 0 || x->at < sc.xids[best].at) best = i;
        }
        if (best >= 0) {
            struct xid *x = &sc.xids[best];
            set->delivered_until = x->at;
            data->device = &sc.gpus[x->gpu].dev;
            data->eventType = EVENT_XID;
            data->eventData = x->code;
            data->gpuInstanceId = data->computeInstanceId = NO_INSTANCE;
            LEAVE(NVML_SUCCESS);
        }
        pthread_mutex_unlock(&lock);
        if (now_s() >= deadline) return NVML_ERROR_TIMEOUT;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}
