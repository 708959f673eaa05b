/* What machine and build a measurement came from, and the machine-side
 * measurements: CPU model and count, MHz sampled from /proc/cpuinfo by a
 * thread during each run, peak RSS (VmHWM, reset per run through
 * /proc/self/clear_refs), and the read bandwidth of memory measured in the
 * same process (the floor of a bandwidth-bound decode step). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

/* The compile flags gcc records in the DWARF producer string of each unit
 * ("GNU C11 12.2.0 -mavx2 -O2 -g ..."): the most frequent one is the
 * library's baseline. clang records none unless -grecord-command-line. */
static void producer_flags(char *out, size_t n) {
    snprintf(out, n, "unknown (build with gcc -g, or define QTTS_BUILD_FLAGS)");
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return;
    enum { MAXP = 16 };
    char *seen[MAXP];
    int count[MAXP], ns = 0;
    static const char pat[] = "GNU C";
    char buf[1 << 16];
    char cur[1024];
    size_t cl = 0;
    int in = 0, matched = 0;
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < r; i++) {
            const char c = buf[i];
            if (!in) {
                if (c == pat[matched]) {
                    if (++matched == sizeof pat - 1) in = 1, cl = 0;
                } else matched = c == pat[0];
                continue;
            }
            if (c == 0 || cl == sizeof cur - 1) {
                cur[cl] = 0;
                if (strstr(cur, " -O") || strstr(cur, " -g")) {
                    int k = 0;
                    while (k < ns && strcmp(seen[k], cur)) k++;
                    if (k < ns) count[k]++;
                    else if (ns < MAXP && (seen[ns] = strdup(cur))) count[ns++] = 1;
                }
                in = 0, matched = 0;
                continue;
            }
            cur[cl++] = c;
        }
    }
    fclose(f);
    int best = -1;
    for (int k = 0; k < ns; k++)
        if (best < 0 || count[k] > count[best]) best = k;
    if (best >= 0) snprintf(out, n, "GNU C%s", seen[best]);
    for (int k = 0; k < ns; k++) free(seen[k]);
}

static void git_commit(char *out, size_t n) {
#ifdef QTTS_BUILD_COMMIT
    snprintf(out, n, "%s", QTTS_BUILD_COMMIT);
    return;
#endif
    snprintf(out, n, "unknown");
    char exe[2048];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l <= 0) return;
    exe[l] = 0;
    char *s = strrchr(exe, '/');
    if (!s) return;
    *s = 0; /* build/ */
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "git -C '%s' describe --always --dirty --abbrev=12 2>/dev/null", exe);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[128];
    if (fgets(line, sizeof line, p)) {
        trim(line);
        if (line[0]) snprintf(out, n, "%.40s (source tree at run time)", line);
    }
    pclose(p);
}

void sys_collect(sys_info *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->cpu_model, sizeof s->cpu_model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    snprintf(s->cpu_model, sizeof s->cpu_model, "%s", c + 2);
                    trim(s->cpu_model);
                }
                break;
            }
        }
        fclose(f);
    }
    s->n_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0) snprintf(s->kernel, sizeof s->kernel, "%.20s %.60s %.20s", u.sysname, u.release, u.machine);
    gethostname(s->hostname, sizeof s->hostname - 1);
#if defined(__clang__)
    snprintf(s->compiler, sizeof s->compiler, "clang %s", __VERSION__);
#elif defined(__GNUC__)
    snprintf(s->compiler, sizeof s->compiler, "gcc %s", __VERSION__);
#endif
#ifdef QTTS_BUILD_FLAGS
    snprintf(s->cflags, sizeof s->cflags, "%s", QTTS_BUILD_FLAGS);
#else
    producer_flags(s->cflags, sizeof s->cflags);
#endif
    git_commit(s->commit, sizeof s->commit);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(s->loadavg, sizeof s->loadavg, f)) trim(s->loadavg);
        fclose(f);
    }
    f = fopen("/proc/meminfo", "r");
    if (f) {
        long kb;
        if (fscanf(f, "MemTotal: %ld kB", &kb) == 1) s->mem_total_gb = kb / 1048576.0;
        fclose(f);
    }
}

/* ---------------------------------------------------------------- MHz */

struct mhz_sampler {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, period_ms, started;
    double sum, min, max;
    long n;
};

static void sample_mhz(mhz_sampler *m) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu MHz", 7)) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        const double v = atof(c + 1);
        if (v <= 0) continue;
        m->sum += v;
        if (m->n == 0 || v < m->min) m->min = v;
        if (m->n == 0 || v > m->max) m->max = v;
        m->n++;
    }
    fclose(f);
}

static void *mhz_main(void *arg) {
    mhz_sampler *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        sample_mhz(m);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)m->period_ms * 1000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

mhz_sampler *mhz_start(int period_ms) {
    mhz_sampler *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->period_ms = period_ms > 0 ? period_ms : 100;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->started = pthread_create(&m->th, NULL, mhz_main, m) == 0;
    return m;
}

void mhz_stop(mhz_sampler *m, double *mean, double *min, double *max) {
    *mean = *min = *max = 0;
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->started) pthread_join(m->th, NULL);
    sample_mhz(m); /* at least one sample even for a very short run */
    if (m->n) *mean = m->sum / m->n, *min = m->min, *max = m->max;
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

/* ---------------------------------------------------------------- memory */

int rss_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static double status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = atof(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

double rss_peak_mib(void) {
    const double kb = status_kb("VmHWM");
    return kb < 0 ? -1 : kb / 1024.0;
}

double rss_now_mib(void) {
    const double kb = status_kb("VmRSS");
    return kb < 0 ? -1 : kb / 1024.0;
}

/* ---------------------------------------------------------------- bandwidth */

typedef struct bw_job {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
    pthread_barrier_t *bar;
    double t_end;
} bw_job;

static uint64_t read_sum(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
        a4 += p[i + 4], a5 += p[i + 5], a6 += p[i + 6], a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static void *bw_main(void *arg) {
    bw_job *j = arg;
    pthread_barrier_wait(j->bar);
    j->sum = read_sum(j->p, j->n);
    j->t_end = bench_now_ms();
    return NULL;
}

double measure_read_bandwidth(size_t buf_bytes, int n_threads, int reps) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    const size_t n = buf_bytes / 8;
    uint64_t *buf = malloc(n * 8);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull; /* touch every page */
    double best = 0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)n_threads + 1);
        bw_job jobs[256];
        pthread_t th[256];
        const size_t per = n / (size_t)n_threads;
        int nt = 0;
        for (int t = 0; t < n_threads; t++) {
            jobs[t] = (bw_job){buf + per * (size_t)t, t == n_threads - 1 ? n - per * (size_t)t : per, 0, &bar, 0};
            if (pthread_create(&th[t], NULL, bw_main, &jobs[t]) == 0) nt++;
            else break;
        }
        if (nt < n_threads) { /* could not start every thread: no measurement */
            for (int t = 0; t < nt; t++) pthread_cancel(th[t]);
            pthread_barrier_destroy(&bar);
            break;
        }
        const double t0 = bench_now_ms();
        pthread_barrier_wait(&bar);
        double t1 = t0;
        for (int t = 0; t < nt; t++) {
            pthread_join(th[t], NULL);
            sink ^= jobs[t].sum;
            if (jobs[t].t_end > t1) t1 = jobs[t].t_end;
        }
        pthread_barrier_destroy(&bar);
        const double gbps = (double)(n * 8) / ((t1 - t0) * 1e6);
        if (gbps > best) best = gbps;
    }
    (void)sink;
    free(buf);
    return best;
}

int cmd_bandwidth(int argc, char **argv) {
    const char *threads = NULL;
    double mib = 1024;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--threads") == 0) && i + 1 < argc) threads = argv[++i];
        else if (strcmp(argv[i], "--bw-mib") == 0 && i + 1 < argc) mib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: qtts-bench bandwidth [-t LIST] [--bw-mib N]\n");
            return 2;
        }
    }
    char def[16];
    snprintf(def, sizeof def, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    char *list = strdup(threads ? threads : def);
    if (!list) return 1;
    sys_info s;
    sys_collect(&s);
    printf("CPU: %s (%d online)\n", s.cpu_model, s.n_cpus);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int n = atoi(t);
        if (n < 1) continue;
        printf("read bandwidth, %d thread%s, %.0f MiB buffer: %.2f GB/s (best of 5)\n", n, n == 1 ? "" : "s", mib,
               measure_read_bandwidth((size_t)(mib * 1048576.0), n, 5));
    }
    free(list);
    return 0;
}
