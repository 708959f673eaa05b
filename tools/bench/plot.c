/* SVG plot of a report, viewable in any browser: RTF per case (median bar,
 * whisker to p95, open dot = cold run, dashed line = real time) and the
 * per-frame split of the work (prefill amortised over the frames, talker,
 * code predictor, codec decode) per case. One bar per configuration, its
 * colour in the legend. No dependencies: the SVG is written by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
static const char *const phase_color[4] = {"#bab0ac", "#4e79a7", "#f28e2b", "#59a14f"};
static const char *const phase_name[4] = {"prefill (per frame)", "talker", "code predictor", "codec decode"};

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

/* Label of a configuration: only the fields that vary in the report. */
static void config_label(const bench_report *r, const bench_record *rec, char *out, size_t n) {
    int vm = 0, vw = 0, vt = 0, vc = 0, vd = 0, vp = 0;
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *o = &r->rec[i];
        vm |= strcmp(o->model_name, r->rec[0].model_name) != 0;
        vw |= strcmp(o->weights, r->rec[0].weights) != 0;
        vt |= o->n_threads != r->rec[0].n_threads;
        vc |= o->first_chunk != r->rec[0].first_chunk || o->chunk != r->rec[0].chunk;
        vd |= strcmp(o->mode, r->rec[0].mode) != 0;
        vp |= strcmp(o->decode, r->rec[0].decode) != 0;
    }
    size_t l = 0;
    out[0] = 0;
    if (vm || !(vw || vt || vc || vd || vp)) l += (size_t)snprintf(out + l, n - l, "%s ", rec->model_name);
    if (vw && l < n) l += (size_t)snprintf(out + l, n - l, "%s ", rec->weights);
    if (vt && l < n) l += (size_t)snprintf(out + l, n - l, "t%d ", rec->n_threads);
    if (vc && l < n) l += (size_t)snprintf(out + l, n - l, "%d/%d ", rec->first_chunk, rec->chunk);
    if (vd && l < n) l += (size_t)snprintf(out + l, n - l, "%s ", rec->mode);
    if (vp && l < n) l += (size_t)snprintf(out + l, n - l, "decode %s ", rec->decode[0] ? rec->decode : "?");
    if (l > 0 && l < n) out[l - 1] = 0;
}

static double nice_max(double v) {
    if (!(v > 0)) return 1;
    const double p = pow(10, floor(log10(v)));
    const double m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

int plot_write_svg(const bench_report *r, const char *path) {
    /* distinct cases and configurations, in order of appearance */
    const char *cases[64];
    int nc = 0;
    char labels[32][128];
    int nl = 0;
    int *rec_case = calloc((size_t)(r->n_rec + 1), sizeof(int)), *rec_cfg = calloc((size_t)(r->n_rec + 1), sizeof(int));
    if (!rec_case || !rec_cfg) {
        free(rec_case), free(rec_cfg);
        return -1;
    }
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        int c = 0;
        while (c < nc && strcmp(cases[c], rec->case_name)) c++;
        if (c == nc && nc < 64) cases[nc++] = rec->case_name;
        char lab[128];
        config_label(r, rec, lab, sizeof lab);
        int k = 0;
        while (k < nl && strcmp(labels[k], lab)) k++;
        if (k == nl && nl < 32) snprintf(labels[nl++], sizeof labels[0], "%s", lab);
        rec_case[i] = c < 64 ? c : 63;
        rec_cfg[i] = k < 32 ? k : 31;
    }
    const metric_desc *m_rtf = bench_metric("rtf"), *m_pre = bench_metric("prefill_ms"),
                      *m_tk = bench_metric("talker_ms_per_frame"), *m_cp = bench_metric("predictor_ms_per_frame"),
                      *m_dec = bench_metric("decode_ms_per_frame"), *m_fr = bench_metric("n_frames"),
                      *m_wall = bench_metric("wall_ms");
    double ymax1 = 0, ymax2 = 0;
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        if (!rec->n_runs) continue;
        const bench_summary s = record_summary(rec, m_rtf);
        ymax1 = fmax(ymax1, fmax(s.p95, metric_get(&rec->cold, m_rtf)));
        const double fr = record_summary(rec, m_fr).median;
        const double tot = record_summary(rec, m_pre).median / (fr > 0 ? fr : 1) + record_summary(rec, m_tk).median +
                           record_summary(rec, m_cp).median + record_summary(rec, m_dec).median;
        ymax2 = fmax(ymax2, fmax(tot, record_summary(rec, m_wall).median / (fr > 0 ? fr : 1)));
    }
    ymax1 = nice_max(ymax1 * 1.05);
    ymax2 = nice_max(ymax2 * 1.05);
    const int nb = nl > 0 ? nl : 1;
    const double bw = nl <= 2 ? 40 : nl <= 4 ? 24 : 14, gap = 30, left = 70, top = 60, ph = 260,
                 legend_h = 20.0 * nl + 30;
    const double group = nb * bw + gap;
    const double W = fmax(left + nc * group + 40, 900), H = top + 2 * (ph + 90) + legend_h + 40;
    FILE *f = fopen(path, "w");
    if (!f) {
        free(rec_case), free(rec_cfg);
        fprintf(stderr, "qtts-bench: cannot write %s\n", path);
        return -1;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\" font-weight=\"bold\">qtts-bench: ", left);
    xml_text(f, r->sys.cpu_model);
    fprintf(f, "</text>\n<text x=\"%.0f\" y=\"40\">", left);
    xml_text(f, r->sys.commit);
    fprintf(f, ", %s; frames %s; median of %d runs</text>\n", r->sys.date,
            r->frames_mode > 0 ? "forced" : r->frames_mode < 0 ? "forced (auto)" : "until EOS", r->reps);
    for (int panel = 0; panel < 2; panel++) {
        const double y0 = top + panel * (ph + 90) + 20, ymax = panel ? ymax2 : ymax1;
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", left, y0 - 6,
                panel ? "Time per frame by phase (median ms per frame; black line: wall time per frame; a worker's decode overlaps generation)"
                      : "RTF per case (bar: median, whisker: p95, open dot: cold run; lower is better)");
        for (int t = 0; t <= 5; t++) { /* grid and y labels */
            const double v = ymax * t / 5, y = y0 + ph - ph * t / 5;
            fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, W - 20, y, y);
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", left - 6, y + 4, v);
        }
        fprintf(f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">%s</text>\n",
                y0 + ph / 2, y0 + ph / 2, panel ? "ms per frame" : "RTF");
        if (!panel && ymax >= 1) {
            const double y = y0 + ph - ph * 1.0 / ymax;
            fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"5,4\"/>"
                       "<text x=\"%.0f\" y=\"%.1f\" fill=\"#c00\" text-anchor=\"end\">real time</text>\n",
                    left, W - 20, y, y, W - 22, y - 3);
        }
        for (int c = 0; c < nc; c++) {
            const double gx = left + c * group + gap / 2;
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"end\" transform=\"rotate(-35 %.1f %.0f)\">", gx + nb * bw / 2,
                    y0 + ph + 14, gx + nb * bw / 2, y0 + ph + 14);
            xml_text(f, cases[c]);
            fputs("</text>\n", f);
        }
        for (int i = 0; i < r->n_rec; i++) {
            const bench_record *rec = &r->rec[i];
            if (!rec->n_runs) continue;
            const double x = left + rec_case[i] * group + gap / 2 + rec_cfg[i] * bw;
            const double sy = ph / ymax;
            if (!panel) {
                const bench_summary s = record_summary(rec, m_rtf);
                const double h = fmin(s.median, ymax) * sy;
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %s: RTF "
                           "median %.3f, p95 %.3f, min %.3f, max %.3f</title></rect>\n",
                        x, y0 + ph - h, bw - 2, h, palette[rec_cfg[i] % 10], rec->case_name, labels[rec_cfg[i]],
                        s.median, s.p95, s.min, s.max);
                const double yp = y0 + ph - fmin(s.p95, ymax) * sy, ym = y0 + ph - h, xc = x + (bw - 2) / 2;
                fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", xc, xc, ym, yp);
                fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", xc - 3, xc + 3,
                        yp, yp);
                const double cold = metric_get(&rec->cold, m_rtf);
                if (rec->cold.n_frames > 0 && !isnan(cold))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"none\" stroke=\"black\"/>\n", xc,
                            y0 + ph - fmin(cold, ymax) * sy);
            } else {
                const double fr = record_summary(rec, m_fr).median;
                const double v[4] = {record_summary(rec, m_pre).median / (fr > 0 ? fr : 1),
                                     record_summary(rec, m_tk).median, record_summary(rec, m_cp).median,
                                     record_summary(rec, m_dec).median};
                double acc = 0;
                for (int p = 0; p < 4; p++) {
                    if (!(v[p] > 0)) continue;
                    const double h = v[p] * sy;
                    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                               "stroke=\"%s\" stroke-width=\"1.5\"><title>%s %s: %s %.1f ms/frame</title></rect>\n",
                            x, y0 + ph - acc - h, bw - 2, h, phase_color[p], palette[rec_cfg[i] % 10], rec->case_name,
                            labels[rec_cfg[i]], phase_name[p], v[p]);
                    acc += h;
                }
                /* wall time per frame: the phases overlap with decode in a worker,
                 * and the ICL clone case also primes the codec with the reference */
                const double wall = record_summary(rec, m_wall).median / (fr > 0 ? fr : 1);
                if (wall > 0 && wall <= ymax) {
                    const double yw = y0 + ph - wall * sy;
                    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                               "stroke-width=\"2\"><title>%s %s: wall %.1f ms/frame</title></line>\n",
                            x - 2, x + bw, yw, yw, rec->case_name, labels[rec_cfg[i]], wall);
                }
            }
        }
        if (panel) { /* phase legend */
            for (int p = 0; p < 4; p++)
                fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.0f\" "
                           "y=\"%.0f\">%s</text>\n",
                        left + p * 130, y0 + ph + 58, phase_color[p], left + p * 130 + 14, y0 + ph + 67, phase_name[p]);
        }
    }
    const double ly = top + 2 * (ph + 90) + 20;
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">configurations (bar colour; outline in the phase "
               "panel)</text>\n",
            left, ly);
    for (int k = 0; k < nl; k++) {
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">",
                left, ly + 8 + 20.0 * k, palette[k % 10], left + 14, ly + 17 + 20.0 * k);
        xml_text(f, labels[k]);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    free(rec_case);
    free(rec_cfg);
    return fclose(f) ? -1 : 0;
}

int cmd_plot(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: qtts-bench plot RESULTS.json OUT.svg\n");
        return 2;
    }
    bench_report r;
    char err[512];
    if (report_read_json(argv[1], &r, err, sizeof err)) {
        fprintf(stderr, "plot: %s\n", err);
        return 1;
    }
    const int rc = plot_write_svg(&r, argv[2]);
    report_free(&r);
    return rc ? 1 : 0;
}
