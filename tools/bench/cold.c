/* qtts-bench cold: start-up latency of the qtts command, from process launch
 * to the first PCM byte of `qtts --stdout`, per weight format; kept apart
 * from the warm in-process TTFA of `qtts-bench run`.
 * Dataflow: for each format, one launch that fills the prepared-weights
 * cache (not counted), then N launches with the page cache warm ("warm":
 * the second launch and later) and, with --drop, N launches after
 * posix_fadvise(POSIX_FADV_DONTNEED) on every file of the checkpoint folder,
 * its cache files and the voice file ("dropped"). Each launch: fork + exec
 * with stdout on a pipe; the time to its first byte and to the exit; the
 * split from the `qtts --timing` line on stderr (load, prepare, voice,
 * setup, prefill, first frame, first decode). Medians over the N runs. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "../common/clock.h"

#define COLD_MAX_ARGS 64
#define COLD_MAX_RUNS 64
#define N_SPLIT 8

static const char *const k_split[N_SPLIT] = {"load_ms", "prepare_ms", "voice_ms", "setup_ms",
                                              "prefill_ms", "first_frame_ms", "first_decode_ms",
                                              "first_audio_ms"};

/* Drop the page cache of path (a file, or every file under a folder). */
static void drop_pages(const char *path) {
    struct stat sb;
    if (!path || stat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, de->d_name);
            drop_pages(p);
        }
        if (d) closedir(d);
        return;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static void drop_cache_file(const char *path, long long bytes, void *u) {
    (void)bytes, (void)u;
    drop_pages(path);
}

typedef struct launch {
    double first_byte_ms, exit_ms;
    double split[N_SPLIT];
    int ok;
} launch;

/* Run argv; time to the first stdout byte and to the exit; parse the timing line. */
static void run_once(char *const *argv, launch *r) {
    memset(r, 0, sizeof *r);
    int out[2], err[2];
    if (pipe(out) || pipe(err)) return;
    const double t0 = tool_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]), close(err[0]);
        return;
    }
    char buf[65536], ebuf[16384];
    size_t elen = 0;
    int open_out = 1, open_err = 1;
    r->first_byte_ms = -1;
    while (open_out || open_err) {
        struct pollfd pf[2] = {{open_out ? out[0] : -1, POLLIN, 0}, {open_err ? err[0] : -1, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) break;
        if (open_out && (pf[0].revents & (POLLIN | POLLHUP))) {
            ssize_t k = read(out[0], buf, sizeof buf);
            if (k > 0 && r->first_byte_ms < 0) r->first_byte_ms = tool_now_ms() - t0;
            if (k <= 0) open_out = 0;
        }
        if (open_err && (pf[1].revents & (POLLIN | POLLHUP))) {
            ssize_t k = read(err[0], elen < sizeof ebuf - 1 ? ebuf + elen : buf,
                             elen < sizeof ebuf - 1 ? sizeof ebuf - 1 - elen : sizeof buf);
            if (k <= 0) open_err = 0;
            else if (elen < sizeof ebuf - 1) elen += (size_t)k;
        }
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    r->exit_ms = tool_now_ms() - t0;
    close(out[0]);
    close(err[0]);
    ebuf[elen] = 0;
    r->ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && r->first_byte_ms >= 0;
    const char *t = strstr(ebuf, "qtts timing:");
    for (int i = 0; t && i < N_SPLIT; i++) {
        const char *k = strstr(t, k_split[i]);
        if (k) r->split[i] = atof(k + strlen(k_split[i]));
    }
    if (!r->ok) fprintf(stderr, "qtts-bench cold: a launch failed (status %d): %.2000s\n", WEXITSTATUS(ws), ebuf);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

static void report(const char *fmt, const char *how, launch *r, int n) {
    double v[COLD_MAX_RUNS], mn[2 + N_SPLIT], lo = 1e30, hi = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (r[i].ok) {
            v[k++] = r[i].first_byte_ms;
            if (r[i].first_byte_ms < lo) lo = r[i].first_byte_ms;
            if (r[i].first_byte_ms > hi) hi = r[i].first_byte_ms;
        }
    mn[0] = median(v, k);
    for (int j = 0; j < 1 + N_SPLIT; j++) {
        int c = 0;
        for (int i = 0; i < n; i++)
            if (r[i].ok) v[c++] = j == 0 ? r[i].exit_ms : r[i].split[j - 1];
        mn[1 + j] = median(v, c);
    }
    printf("%-7s %-8s %3d/%-3d %8.0f %6.0f-%-6.0f %8.0f |", fmt, how, k, n, mn[0], k ? lo : 0, hi, mn[1]);
    for (int j = 0; j < N_SPLIT; j++) printf(" %8.0f", mn[2 + j]);
    printf("\n");
    fflush(stdout);
}

static void usage(void) {
    fprintf(stderr,
            "usage: qtts-bench cold -m DIR [-w native,q8,q4] [--runs N] [--drop] [--qtts PATH] [--threads N]\n"
            "                       [--text STR] [--speaker S | --voice F | --ref-audio F --ref-text STR]\n"
            "                       [--cache-dir DIR] [-- more qtts options]\n"
            "  launch -> first PCM byte of `qtts --stdout`, per format: warm page cache (after one launch that\n"
            "  fills the prepared-weights cache) and, with --drop, the checkpoint's pages dropped first\n");
}

int cmd_cold(int argc, char **argv) {
    const char *model = NULL, *formats = "native,q8,q4", *qtts = NULL, *text = "Hello.", *speaker = NULL;
    const char *voice = NULL, *ref_audio = NULL, *ref_text = NULL, *cache_dir = NULL, *threads = "2";
    int runs = 3, drop = 0, extra = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL(x)                                                           \
    do {                                                                 \
        if (!v) {                                                        \
            fprintf(stderr, "qtts-bench cold: %s needs a value\n", a);   \
            return 2;                                                    \
        }                                                                \
        x = v;                                                           \
        i++;                                                             \
    } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) VAL(model);
        else if (!strcmp(a, "-w") || !strcmp(a, "--weights")) VAL(formats);
        else if (!strcmp(a, "--qtts")) VAL(qtts);
        else if (!strcmp(a, "--text")) VAL(text);
        else if (!strcmp(a, "--speaker")) VAL(speaker);
        else if (!strcmp(a, "--voice")) VAL(voice);
        else if (!strcmp(a, "--ref-audio")) VAL(ref_audio);
        else if (!strcmp(a, "--ref-text")) VAL(ref_text);
        else if (!strcmp(a, "--cache-dir")) VAL(cache_dir);
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) VAL(threads);
        else if (!strcmp(a, "--runs")) {
            const char *s = NULL;
            VAL(s);
            runs = atoi(s);
        } else if (!strcmp(a, "--drop")) drop = 1;
        else if (!strcmp(a, "--")) {
            extra = i + 1;
            break;
        } else {
            usage();
            return 2;
        }
#undef VAL
    }
    if (!model || runs < 1 || runs > COLD_MAX_RUNS) {
        usage();
        return 2;
    }
    char self[4096], qpath[4200];
    if (!qtts) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        snprintf(qpath, sizeof qpath, "%s/qtts", n > 0 ? self : ".");
        qtts = qpath;
    }
    char cdir[4096];
    if (!cache_dir && qtts_cache_default_dir(cdir, sizeof cdir) == 0) cache_dir = cdir;
    printf("# qtts-bench cold: %s, model %s, %d runs, threads %s, text \"%s\"%s%s%s%s\n", qtts, model, runs, threads,
           text, voice ? ", voice " : "", voice ? voice : "", ref_audio ? ", one-shot clone of " : "",
           ref_audio ? ref_audio : "");
    printf("# times in ms from launch; first = first PCM byte on stdout (median, min-max), exit = process end;\n"
           "# the split (medians) from qtts --timing: load (without prepare), prepare, voice, setup (context),\n"
           "# prefill, first frame, first decode, first audio (since main)\n");
    printf("%-7s %-8s %-7s %8s %-13s %8s | %8s %8s %8s %8s %8s %8s %8s %8s\n", "format", "pages", "ok", "first",
           "(min-max)", "exit", "load", "prepare", "voice", "setup", "prefill", "frame", "decode", "audio");
    char fl[256];
    snprintf(fl, sizeof fl, "%s", formats);
    for (char *save = NULL, *f = strtok_r(fl, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        char *av[COLD_MAX_ARGS];
        int n = 0;
        av[n++] = (char *)qtts;
        av[n++] = "--model", av[n++] = (char *)model;
        av[n++] = "--weights", av[n++] = f;
        av[n++] = "--threads", av[n++] = (char *)threads;
        av[n++] = "--text", av[n++] = (char *)text;
        av[n++] = "--stdout", av[n++] = "--timing", av[n++] = "-q";
        if (speaker) av[n++] = "--speaker", av[n++] = (char *)speaker;
        if (voice) av[n++] = "--voice", av[n++] = (char *)voice;
        if (ref_audio) av[n++] = "--ref-audio", av[n++] = (char *)ref_audio;
        if (ref_text) av[n++] = "--ref-text", av[n++] = (char *)ref_text;
        if (cache_dir) av[n++] = "--cache-dir", av[n++] = (char *)cache_dir;
        for (int i = extra; i < argc && n < COLD_MAX_ARGS - 1; i++) av[n++] = argv[i];
        av[n] = NULL;
        launch r[COLD_MAX_RUNS], first;
        run_once(av, &first); /* fills the prepared-weights cache; not counted */
        for (int i = 0; i < runs; i++) run_once(av, &r[i]);
        report(f, "warm", r, runs);
        if (drop) {
            for (int i = 0; i < runs; i++) {
                drop_pages(model);
                if (voice) drop_pages(voice);
                if (ref_audio) drop_pages(ref_audio);
                if (cache_dir) qtts_cache_list(cache_dir, model, drop_cache_file, NULL);
                run_once(av, &r[i]);
            }
            report(f, "dropped", r, runs);
        }
    }
    return 0;
}
