/* print.c: the NumPy-like printer. Arrays over 1000 elements are summarised
 * with "..." keeping 3 items at each end of every dim. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "array/array.h"
#include "array/device.h"

static void print_real(double v, FILE *f) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.6g", v);
    if (!strpbrk(buf, ".eni"))
        strcat(buf, ".");
    fputs(buf, f);
}

static void print_elem(const cft_array *x, int64_t off, FILE *f) {
    double v = cft__get(x->data, x->aval.dtype, off);
    if (cft_dtype_is_complex(x->aval.dtype)) { /* NumPy's 1.5-2.j */
        double im = x->aval.dtype == CFT_C64 ? ((const float *)x->data)[2 * off + 1]
                                             : ((const double *)x->data)[2 * off + 1];
        if (x->conj)
            im = -im;
        print_real(v, f);
        char buf[40];
        snprintf(buf, sizeof buf, "%+.6g", im);
        if (!strpbrk(buf, ".eni"))
            strcat(buf, ".");
        fprintf(f, "%sj", buf);
        return;
    }
    switch (x->aval.dtype) {
    case CFT_BOOL:
        fputs(v != 0 ? "True" : "False", f);
        break;
    case CFT_I32:
    case CFT_I64:
        fprintf(f, "%lld", (long long)v);
        break;
    default:
        print_real(v, f);
    }
}

static void rec(const cft_array *x, int d, int64_t off, bool sum, int indent, FILE *f) {
    const cft_aval *a = &x->aval;
    if (d == a->ndim) {
        print_elem(x, off, f);
        return;
    }
    fputc('[', f);
    int64_t n = a->shape[d];
    for (int64_t i = 0; i < n; i++) {
        if (sum && n > 6 && i == 3) {
            fputs(d == a->ndim - 1 ? "..., " : "...,\n", f);
            if (d < a->ndim - 1)
                for (int k = 0; k < indent + d + 1; k++)
                    fputc(' ', f);
            i = n - 3;
        }
        rec(x, d + 1, off + i * x->strides[d], sum, indent, f);
        if (i + 1 < n) {
            if (d == a->ndim - 1)
                fputs(", ", f);
            else {
                fputs(",\n", f);
                for (int k = 0; k < indent + d + 1; k++)
                    fputc(' ', f);
            }
        }
    }
    fputc(']', f);
}

static void print_indented(const cft_array *x, int indent, FILE *f) {
    if (cft_failed(x)) {
        fprintf(f, "<error: %s>", cft_error_message(x));
        return;
    }
    char buf[96];
    if (x->kind != CFT_K_CONCRETE) { /* its values are not known: the traced call fails */
        fprintf(f, "<tracer %s: values unknown while tracing>", cft_aval_str(&x->aval, buf));
        cft__concretization_error("cft_print", x);
        return;
    }
    if (cft__on_device(x)) { /* printed from a host copy */
        cft_array *h = cft__dev_to_host(x, "cft_print");
        if (cft_failed(h)) {
            fprintf(f, "<error: %s>", cft_error_message(h));
            return;
        }
        x = h;
    }
    fputs("array(", f);
    rec(x, 0, x->offset, cft__numel(x->aval.shape, x->aval.ndim) > 1000, indent + 6, f);
    fprintf(f, ", dtype=%s)", cft_dtype_name(x->aval.dtype));
}

void cft_print(const cft_array *x, FILE *f) {
    CFT_API("cft_print");
    print_indented(x, 0, f);
    fputc('\n', f);
}

void cft_print_named(const char *name, const cft_array *x, FILE *f) {
    CFT_API("cft_print_named");
    fprintf(f, "%s = ", name);
    print_indented(x, (int)strlen(name) + 3, f);
    fputc('\n', f);
}
