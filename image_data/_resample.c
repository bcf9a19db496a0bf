/* Pillow's bilinear resize of a box of a uint8 RGB image, bit for bit.
 *
 *     resize_box(src, out, x0, y0, x1, y1)
 *         out (h, w, 3) = Image.resize((w, h), BILINEAR, box=(x0, y0, x1,
 *         y1)) of src (H, W, 3), both C-contiguous uint8
 *
 * The arithmetic is Pillow's (libImaging/Resample.c): per output pixel the
 * triangle filter of support max(1, box / out) around in0 + (i + 0.5)
 * box / out, its weights normalized and rounded to 22-bit fixed point; a
 * horizontal pass over the rows that the vertical pass needs, rounded to
 * uint8, then the vertical pass. Each pass here is a sum of whole rows
 * times one weight, which the compiler vectorizes: the horizontal pass
 * runs on the transposed window and its result is transposed back. On
 * x86-64 the loops are compiled for AVX2 and for the baseline, chosen at
 * load by the CPU. The GIL is released while resizing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

/* Pillow's fixed point for 8-bit images: 32 - 8 - 2 fraction bits. */
#define PRECISION_BITS 22

/* The taps of every output pixel along one axis: first input index,
 * count, and `ksize` fixed-point weights (zero beyond the count). */
typedef struct {
    int ksize;
    int *first;
    int *count;
    int32_t *weights;
} Taps;

static void free_taps(Taps *t) {
    free(t->first);
    free(t->count);
    free(t->weights);
}

static double triangle(double x) {
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs and normalize_coeffs_8bpc for the bilinear
 * filter: the same expressions in the same precision (in0, in1 float). */
static int make_taps(int in_size, float in0, float in1, int out_size,
                     Taps *t) {
    double scale = (double)(in1 - in0) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *k = malloc(ksize * sizeof(double));
    t->ksize = ksize;
    t->first = malloc(out_size * sizeof(int));
    t->count = malloc(out_size * sizeof(int));
    t->weights = malloc((size_t)out_size * ksize * sizeof(int32_t));
    if (!k || !t->first || !t->count || !t->weights) {
        free(k);
        free_taps(t);
        return 0;
    }
    for (int xx = 0; xx < out_size; ++xx) {
        double center = in0 + (xx + 0.5) * scale;
        double ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        int32_t *w = t->weights + (size_t)xx * ksize;
        if (xmin < 0)
            xmin = 0;
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; ++x) {
            k[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (int x = 0; x < ksize; ++x) {
            double v = x < xmax && ww != 0.0 ? k[x] / ww : 0.0;
            w[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
                                   : 0.5 + v * (1 << PRECISION_BITS));
        }
        t->first[xx] = xmin;
        t->count[xx] = xmax > 0 ? xmax : 0;
    }
    free(k);
    return 1;
}

/* out row i (len bytes) = clip8(sum over taps j of in row first[i] - shift
 * + j times weight j), rounding as Pillow; acc holds len int32. */
CLONES
static void resample_rows(const uint8_t *in, Py_ssize_t in_stride,
                          uint8_t *out, Py_ssize_t out_stride, int n_out,
                          Py_ssize_t len, const Taps *t, int shift,
                          int32_t *acc) {
    for (int i = 0; i < n_out; ++i) {
        const int32_t *w = t->weights + (size_t)i * t->ksize;
        const uint8_t *row = in + (t->first[i] - shift) * in_stride;
        uint8_t *o = out + i * out_stride;
        for (Py_ssize_t j = 0; j < len; ++j)
            acc[j] = 1 << (PRECISION_BITS - 1);
        for (int k = 0; k < t->count[i]; ++k, row += in_stride) {
            int32_t wk = w[k];
            for (Py_ssize_t j = 0; j < len; ++j)
                acc[j] += row[j] * wk;
        }
        for (Py_ssize_t j = 0; j < len; ++j) {
            int32_t v = acc[j] >> PRECISION_BITS;
            o[j] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

/* dst[c][r] = src[r][c] for 3-byte pixels, rows rows x cols cols. */
static void transpose_pixels(const uint8_t *src, Py_ssize_t src_stride,
                             uint8_t *dst, Py_ssize_t dst_stride, int rows,
                             int cols) {
    enum { BLOCK = 32 };
    for (int r0 = 0; r0 < rows; r0 += BLOCK)
        for (int c0 = 0; c0 < cols; c0 += BLOCK) {
            int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            int c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
            for (int r = r0; r < r1; ++r)
                for (int c = c0; c < c1; ++c)
                    memcpy(dst + c * dst_stride + 3 * r,
                           src + r * src_stride + 3 * c, 3);
        }
}

/* The resize of an (H, W, 3) image into (h, w, 3); 0 when out of memory.
 * A box inside the image gives every output pixel at least one tap. The
 * pass that goes first is Pillow's choice (since Pillow 13): the vertical
 * one when the height shrinks by more than twice as many pixels as the
 * width, else the horizontal one, over the rows the vertical pass needs. */
static int resize(const uint8_t *src, int H, int W, uint8_t *out, int h,
                  int w, const float box[4]) {
    Taps tx, ty;
    int ok = 0, rows, cols, row0, col0, mid_rows, longest;
    int vertical_first = H - h > 0 && H - h > (W - w) * 2;
    uint8_t *window = NULL, *across = NULL, *temp = NULL;
    int32_t *acc = NULL;
    if (!make_taps(W, box[0], box[2], w, &tx))
        return 0;
    if (!make_taps(H, box[1], box[3], h, &ty)) {
        free_taps(&tx);
        return 0;
    }
    row0 = ty.first[0];
    rows = ty.first[h - 1] + ty.count[h - 1] - row0;
    col0 = tx.first[0];
    cols = tx.first[w - 1] + tx.count[w - 1] - col0;
    /* the rows of the image between the passes */
    mid_rows = vertical_first ? h : rows;
    window = malloc((size_t)cols * mid_rows * 3);
    across = malloc((size_t)w * mid_rows * 3);
    temp = malloc(3 * (vertical_first ? (size_t)h * cols : (size_t)rows * w));
    longest = mid_rows > w ? mid_rows : w;
    longest = cols > longest ? cols : longest;
    acc = malloc(3 * (size_t)longest * sizeof(int32_t));
    if (window && across && temp && acc) {
        const uint8_t *corner = src + (Py_ssize_t)row0 * W * 3 + 3 * col0;
        if (vertical_first) {
            /* vertical over the columns the horizontal pass needs */
            resample_rows(src + 3 * col0, (Py_ssize_t)W * 3, temp, 3 * cols,
                          h, 3 * cols, &ty, 0, acc);
            corner = temp;
        }
        /* horizontal: window[x][r] = (source or temp)[r][col0 + x] */
        transpose_pixels(corner, vertical_first ? 3 * cols : (Py_ssize_t)W * 3,
                         window, 3 * mid_rows, mid_rows, cols);
        resample_rows(window, 3 * mid_rows, across, 3 * mid_rows, w,
                      3 * mid_rows, &tx, col0, acc);
        if (vertical_first) {
            transpose_pixels(across, 3 * h, out, 3 * w, w, h);
        } else {
            transpose_pixels(across, 3 * rows, temp, 3 * w, w, rows);
            resample_rows(temp, 3 * w, out, 3 * w, h, 3 * w, &ty, row0, acc);
        }
        ok = 1;
    }
    free(window);
    free(across);
    free(temp);
    free(acc);
    free_taps(&tx);
    free_taps(&ty);
    return ok;
}

/* ---- module ----------------------------------------------------------- */

/* An (rows, cols, 3) C-contiguous uint8 buffer, writable if asked. */
static int get_pixels(PyObject *obj, Py_buffer *view, int writable) {
    const char *f;
    if (PyObject_GetBuffer(obj, view,
                           (writable ? PyBUF_WRITABLE : 0) |
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return 0;
    f = view->format;
    if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '|')
        ++f;
    if (f[0] != 'B' || f[1] != '\0' || view->ndim != 3 ||
        view->shape[2] != 3 || view->shape[0] < 1 || view->shape[1] < 1 ||
        view->shape[0] > INT_MAX / 3 || view->shape[1] > INT_MAX / 3) {
        PyErr_SetString(PyExc_ValueError,
                        "expected a (rows, columns, 3) uint8 array");
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *py_resize_box(PyObject *self, PyObject *args) {
    PyObject *src_obj, *out_obj;
    Py_buffer src, out;
    float box[4];
    int ok, H, W;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOffff:resize_box", &src_obj, &out_obj,
                          &box[0], &box[1], &box[2], &box[3]))
        return NULL;
    if (!get_pixels(src_obj, &src, 0))
        return NULL;
    if (!get_pixels(out_obj, &out, 1)) {
        PyBuffer_Release(&src);
        return NULL;
    }
    H = (int)src.shape[0];
    W = (int)src.shape[1];
    if (!(box[0] >= 0 && box[1] >= 0 && box[2] <= W && box[3] <= H &&
          box[2] > box[0] && box[3] > box[1])) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError,
                        "box must lie inside the image and not be empty");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ok = resize(src.buf, H, W, out.buf, (int)out.shape[0], (int)out.shape[1],
                box);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    if (!ok)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef resample_methods[] = {
    {"resize_box", py_resize_box, METH_VARARGS,
     "resize_box(src, out, x0, y0, x1, y1): out = Pillow's bilinear resize "
     "of the box (x0, y0, x1, y1) of src to out's size."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef resample_module = {
    PyModuleDef_HEAD_INIT, "_resample",
    "Pillow's bilinear resize of a box of a uint8 RGB image, bit for bit, "
    "in vectorized loops.",
    -1, resample_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__resample(void) {
    return PyModule_Create(&resample_module);
}
