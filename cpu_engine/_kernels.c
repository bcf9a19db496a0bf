/* Fused float32 loops of the memory-bound parts of the CPU training step.
 *
 *     rmsprop_warmup(theta, g, m, delta, lr, mu1, mu2, eps,
 *                    alpha_sgd, alpha_rmsprop)
 *         m = mu2 m + (1 - mu2) g^2
 *         delta = mu1 delta - (alpha_sgd + alpha_rmsprop / (sqrt(m) + eps)) g
 *         theta += lr delta
 *     corrected_momentum_sgd(theta, g, v, lr, momentum)
 *         v = momentum v - g
 *         theta += lr v
 *     weight_decay(g, theta, rate)
 *         g += rate theta
 *     bn_forward(x, gamma, beta, eps, y, mean, var, inv_std, relu)
 *         per row c of x (C, M): mean, var (biased), inv_std = 1/sqrt(var+eps)
 *         y = (x - mean) (gamma inv_std) + beta, then max(y, 0) if relu
 *     bn_backward(x, gy, gamma, mean, inv_std, gx, ggamma, gbeta[, beta])
 *         gbeta = sum(gy), ggamma = sum(gy x_hat), x_hat = (x - mean) inv_std
 *         gx = gamma inv_std (gy - (x_hat ggamma + gbeta) / M)
 *         given beta, gy is first taken as 0 where the forward pass's y
 *         (recomputed from x, in its float operations) is not positive:
 *         the gradient of max(y, 0)
 *     bn_forward_cl(x, gamma, beta, eps, y, mean, var, inv_std, relu)
 *     bn_backward_cl(x, gy, gamma, mean, inv_std, gx, ggamma, gbeta[, beta])
 *         the same over the columns c of x (M, C): channels-last activations
 *     relu(y, a[, b])
 *         y = max(a + b, 0)  (the residual block's output), or max(a, 0)
 *     relu_grad(gx, gy, y)
 *         gx = gy where y > 0, else 0
 *     add(y, a, b)
 *         y = a + b  (the gradient of an activation that two layers read)
 *     max_pool(x, y, winner, tap_index, h, w, out_h, out_w, kh, kw, sy, sx,
 *              ph, pw)
 *         per plane of x (P, h, w): y (P, out_h, out_w) the maximum over
 *         the window's taps inside x, winner (uint8) the first winning
 *         tap's number in tap_index (uint8, kh kw: its index in the list of
 *         taps that see any input); -inf and 0 where none is inside
 *     max_pool_grad(gy, winner, tap_index, gx, <the same ten sizes>)
 *         gx (P, h, w) = sum of gy over the outputs a pixel won
 *     max_pool_cl(x, y, winner, tap_index, c, <the same ten sizes>)
 *     max_pool_grad_cl(gy, winner, tap_index, gx, c, <the same ten sizes>)
 *         the same of channels-last images: x (N, h, w, c), y and winner
 *         (N, out_h, out_w, c)
 *
 * Arguments are C-contiguous float32 buffers (winner and tap_index: uint8);
 * in batch normalization x, y, gy, gx hold C rows of M values, C being the
 * length of gamma.  The update does NumPy's float32
 * operations in NumPy's order (no contraction into FMA), so it gives the
 * bits of the NumPy path; batch normalization sums in double, the variance
 * over x - mean (channels-last: over x - the channel's first value, in
 * partial sums of BN_CHUNK_BYTES of rows, so that no sum depends on the
 * number of threads).  On x86-64 every loop is compiled for AVX2 and for the
 * baseline, chosen at load by the CPU.  The GIL is released while looping.
 *
 * Arrays of at least PARALLEL_MIN elements are split over OpenMP threads
 * (by elements, or by whole rows for batch normalization): the same thread
 * pool as oneDNN's convolutions, so that the threads one of them leaves
 * spinning pick up the next, instead of competing for the cores with a
 * second pool.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements below which a loop runs on the calling thread alone. */
#define PARALLEL_MIN 32768

#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

CLONES
static void rmsprop_loop(float *theta, const float *g, float *m, float *delta,
                         Py_ssize_t n, float lr, float mu1, float mu2,
                         float one_mu2, float eps, float a_sgd,
                         double a_rms) {
    if (a_rms != 0) {                  /* as Python's `if alpha_rmsprop:` */
        float ar = (float)a_rms;
        for (Py_ssize_t i = 0; i < n; ++i) {
            float mi = m[i] * mu2 + g[i] * g[i] * one_mu2;
            float d = delta[i] * mu1
                      - (ar / (sqrtf(mi) + eps) + a_sgd) * g[i];
            m[i] = mi;
            delta[i] = d;
            theta[i] += d * lr;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; ++i) {
            float d = delta[i] * mu1 - g[i] * a_sgd;
            m[i] = m[i] * mu2 + g[i] * g[i] * one_mu2;
            delta[i] = d;
            theta[i] += d * lr;
        }
    }
}

CLONES
static void momentum_loop(float *theta, const float *g, float *v,
                          Py_ssize_t n, float lr, float mu) {
    for (Py_ssize_t i = 0; i < n; ++i) {
        float vi = v[i] * mu - g[i];
        v[i] = vi;
        theta[i] += lr * vi;
    }
}

CLONES
static void decay_loop(float *g, const float *theta, float rate,
                       Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        g[i] += theta[i] * rate;
}

/* g where the normalized value v is positive, else 0: the gradient of
 * max(v, 0). A mask of g's bits rather than a branch, so that the loops
 * around it vectorize. */
static inline float relu_grad(float g, float v) {
    uint32_t bits;
    memcpy(&bits, &g, sizeof bits);
    bits &= -(uint32_t)(v > 0);
    memcpy(&g, &bits, sizeof g);
    return g;
}

/* The output gradient of batch normalization: g, or its gradient through
 * max(v, 0) where the forward pass clipped (beta given). The loops test
 * the loop-invariant `masked`, which the compiler hoists out of them. */
#define BN_GY(masked, g, v) ((masked) ? relu_grad((g), (v)) : (g))

CLONES
static void bn_forward_loop(const float *x, const float *gamma,
                            const float *beta, double eps, float *y,
                            float *mean, float *var, float *inv_std,
                            int relu, Py_ssize_t c, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < c; ++k, x += n, y += n) {
        double sum = 0, sq = 0;
#pragma omp simd reduction(+:sum)
        for (Py_ssize_t i = 0; i < n; ++i)
            sum += x[i];
        double mu = sum / n;
#pragma omp simd reduction(+:sq)
        for (Py_ssize_t i = 0; i < n; ++i)
            sq += (x[i] - mu) * (x[i] - mu);
        float istd = (float)(1 / sqrt(sq / n + eps));
        float mu_f = (float)mu, scale = gamma[k] * istd, b = beta[k];
        for (Py_ssize_t i = 0; i < n; ++i) {
            float v = (x[i] - mu_f) * scale + b;
            y[i] = relu && !(v > 0) ? 0 : v;
        }
        mean[k] = mu_f;
        var[k] = (float)(sq / n);
        inv_std[k] = istd;
    }
}

CLONES
static void bn_backward_loop(const float *x, const float *gy,
                             const float *gamma, const float *mean,
                             const float *inv_std, const float *beta,
                             float *gx, float *ggamma, float *gbeta,
                             Py_ssize_t c, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < c; ++k, x += n, gy += n, gx += n) {
        double sum = 0, dot = 0;
        const int masked = beta != NULL;
        float mu = mean[k], coef = gamma[k] * inv_std[k];
        float b = masked ? beta[k] : 0;
#pragma omp simd reduction(+:sum, dot)
        for (Py_ssize_t i = 0; i < n; ++i) {
            float g = BN_GY(masked, gy[i], (x[i] - mu) * coef + b);
            sum += g;
            dot += (double)g * (x[i] - mu);
        }
        float gg = (float)(dot * inv_std[k]), gb = (float)sum;
        float slope = inv_std[k] * gg / n, shift = gb / n;
        for (Py_ssize_t i = 0; i < n; ++i)
            gx[i] = (BN_GY(masked, gy[i], (x[i] - mu) * coef + b)
                     - ((x[i] - mu) * slope + shift)) * coef;
        ggamma[k] = gg;
        gbeta[k] = gb;
    }
}

/* Bytes of the rows of x (M, C) that one partial sum of channels-last
 * batch normalization covers. */
#define BN_CHUNK_BYTES 65536

/* Rows of a chunk, and the number of chunks, of m rows of c floats. */
static Py_ssize_t bn_chunk_rows(Py_ssize_t c) {
    Py_ssize_t rows = BN_CHUNK_BYTES / (4 * (c ? c : 1));
    return rows ? rows : 1;
}

/* Per column k of x (rows, c): s1 = sum(x - ref), s2 = sum((x - ref)^2). */
CLONES
static void bn_stats_rows(const float *x, const float *ref, double *s1,
                          double *s2, Py_ssize_t rows, Py_ssize_t c) {
    for (Py_ssize_t k = 0; k < c; ++k)
        s1[k] = s2[k] = 0;
    for (Py_ssize_t r = 0; r < rows; ++r, x += c)
        for (Py_ssize_t k = 0; k < c; ++k) {
            double d = (double)x[k] - ref[k];
            s1[k] += d;
            s2[k] += d * d;
        }
}

/* Per column k: s1 = sum(gy), s2 = sum(gy (x - mean)). */
CLONES
static void bn_grad_rows(const float *x, const float *gy,
                         const float *mean, const float *coef,
                         const float *beta, double *s1, double *s2,
                         Py_ssize_t rows, Py_ssize_t c) {
    const int masked = beta != NULL;
    for (Py_ssize_t k = 0; k < c; ++k)
        s1[k] = s2[k] = 0;
    for (Py_ssize_t r = 0; r < rows; ++r, x += c, gy += c)
#pragma omp simd
        for (Py_ssize_t k = 0; k < c; ++k) {
            float g = BN_GY(masked, gy[k], (x[k] - mean[k]) * coef[k]
                                           + (masked ? beta[k] : 0));
            s1[k] += g;
            s2[k] += (double)g * (x[k] - mean[k]);
        }
}

/* out = (x - a) b + d per column, over rows of c (y of the forward pass:
 * a = mean, b = scale, d = beta), then max(out, 0) if relu. */
CLONES
static void bn_affine_rows(const float *x, const float *a, const float *b,
                           const float *d, int relu, float *out,
                           Py_ssize_t rows, Py_ssize_t c) {
    for (Py_ssize_t r = 0; r < rows; ++r, x += c, out += c)
        for (Py_ssize_t k = 0; k < c; ++k) {
            float v = (x[k] - a[k]) * b[k] + d[k];
            out[k] = relu && !(v > 0) ? 0 : v;
        }
}

CLONES
static void bn_grad_x_rows(const float *x, const float *gy,
                           const float *mean, const float *slope,
                           const float *shift, const float *coef,
                           const float *beta, float *gx, Py_ssize_t rows,
                           Py_ssize_t c) {
    const int masked = beta != NULL;
    for (Py_ssize_t r = 0; r < rows; ++r, x += c, gy += c, gx += c)
#pragma omp simd
        for (Py_ssize_t k = 0; k < c; ++k)
            gx[k] = (BN_GY(masked, gy[k], (x[k] - mean[k]) * coef[k]
                                          + (masked ? beta[k] : 0))
                     - ((x[k] - mean[k]) * slope[k] + shift[k])) * coef[k];
}

/* Room for the partial sums of `chunks` chunks of c columns and for
 * `coef_rows` rows of c per-column coefficients; 0, with MemoryError, if
 * there is none. */
static int bn_scratch(Py_ssize_t c, Py_ssize_t chunks, int coef_rows,
                      double **part, float **coefs) {
    *part = PyMem_RawMalloc(sizeof(double) * 2 * c * chunks);
    *coefs = PyMem_RawMalloc(sizeof(float) * coef_rows * c);
    if (*part == NULL || *coefs == NULL) {
        PyMem_RawFree(*part);
        PyMem_RawFree(*coefs);
        PyErr_NoMemory();
        return 0;
    }
    return 1;
}

/* Column sums of the chunks' partial sums, in chunk order. */
static void bn_combine(const double *part, Py_ssize_t chunks, Py_ssize_t c,
                       Py_ssize_t k, double *s1, double *s2) {
    double a = 0, b = 0;
    for (Py_ssize_t i = 0; i < chunks; ++i) {
        a += part[2 * c * i + k];
        b += part[2 * c * i + c + k];
    }
    *s1 = a;
    *s2 = b;
}

CLONES
static void relu_loop(float *y, const float *a, const float *b,
                      Py_ssize_t n) {
    if (b != NULL) {
        for (Py_ssize_t i = 0; i < n; ++i) {
            float s = a[i] + b[i];
            y[i] = s > 0 ? s : 0;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; ++i)
            y[i] = a[i] > 0 ? a[i] : 0;
    }
}

CLONES
static void add_loop(float *y, const float *a, const float *b,
                     Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        y[i] = a[i] + b[i];
}

CLONES
static void relu_grad_loop(float *gx, const float *gy, const float *y,
                           Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        gx[i] = y[i] > 0 ? gy[i] : 0;
}

/* Output pixels p (of a side of out) whose tap at offset t (i - pad) is
 * inside a side of size: [lo, hi). */
static void inside(Py_ssize_t t, Py_ssize_t stride, Py_ssize_t size,
                   Py_ssize_t out, Py_ssize_t *lo, Py_ssize_t *hi) {
    Py_ssize_t a = t < 0 ? (-t + stride - 1) / stride : 0;
    Py_ssize_t b = size - 1 - t < 0 ? 0 : (size - 1 - t) / stride + 1;
    *lo = a;
    *hi = b < out ? b : out;
}

typedef struct {
    Py_ssize_t h, w, oh, ow, kh, kw, sy, sx, ph, pw;
} Window;

/* A kernel tap (i, j) that sees some input: its number in tap_index, the
 * output rows [p0, p1) and columns [q0, q1) it sees, and the input offset
 * (i - ph) w + j - pw of output pixel (0, 0)'s read. */
typedef struct {
    Py_ssize_t p0, p1, q0, q1, offset;
    unsigned char k;
} Tap;

/* Fills taps (room for kh kw) in raster order; returns how many. */
static Py_ssize_t taps_of(const Window *g, const unsigned char *tap_index,
                          Tap *taps) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < g->kh; ++i)
        for (Py_ssize_t j = 0; j < g->kw; ++j) {
            Tap *t = &taps[count];
            inside(i - g->ph, g->sy, g->h, g->oh, &t->p0, &t->p1);
            inside(j - g->pw, g->sx, g->w, g->ow, &t->q0, &t->q1);
            t->offset = (i - g->ph) * g->w + j - g->pw;
            t->k = tap_index[i * g->kw + j];
            count += t->p0 < t->p1 && t->q0 < t->q1;
        }
    return count;
}

static void max_pool_plane(const float *x, float *y, unsigned char *winner,
                           const Tap *taps, Py_ssize_t count,
                           const Window *g) {
    for (Py_ssize_t i = 0; i < g->oh * g->ow; ++i) {
        y[i] = -INFINITY;
        winner[i] = 0;
    }
    /* Taps in raster order, so the first maximum is kept; a NaN wins and
     * stays, as the maximum of NumPy. */
    for (const Tap *t = taps; t < taps + count; ++t)
        for (Py_ssize_t p = t->p0; p < t->p1; ++p) {
            const float *xr = x + p * g->sy * g->w + t->offset;
            float *yr = y + p * g->ow;
            unsigned char *wr = winner + p * g->ow;
            for (Py_ssize_t q = t->q0; q < t->q1; ++q) {
                float v = xr[q * g->sx];
                if (v > yr[q] || (v != v && yr[q] == yr[q])) {
                    yr[q] = v;
                    wr[q] = t->k;
                }
            }
        }
}

static void max_pool_grad_plane(const float *gy, const unsigned char *winner,
                                float *gx, const Tap *taps, Py_ssize_t count,
                                const Window *g) {
    for (Py_ssize_t i = 0; i < g->h * g->w; ++i)
        gx[i] = 0;
    for (const Tap *t = taps; t < taps + count; ++t)
        for (Py_ssize_t p = t->p0; p < t->p1; ++p) {
            float *gxr = gx + p * g->sy * g->w + t->offset;
            const float *gyr = gy + p * g->ow;
            const unsigned char *wr = winner + p * g->ow;
            for (Py_ssize_t q = t->q0; q < t->q1; ++q)
                if (wr[q] == t->k)
                    gxr[q * g->sx] += gyr[q];
        }
}

/* Max pooling of output row p of image n of channels-last x (n, h, w, c):
 * the taps of each output pixel in raster order, so the first maximum is
 * kept; a NaN wins and stays.  Branch-free over the channels, so that it
 * vectorizes. */
CLONES
static void max_pool_cl_row(const float *x, float *y, unsigned char *winner,
                            const unsigned char *tap_index, const Window *g,
                            Py_ssize_t c, Py_ssize_t n, Py_ssize_t p) {
    for (Py_ssize_t q = 0; q < g->ow; ++q) {
        Py_ssize_t o = ((n * g->oh + p) * g->ow + q) * c;
        float *yr = y + o;
        unsigned char *wr = winner + o;
        for (Py_ssize_t k = 0; k < c; ++k) {
            yr[k] = -INFINITY;
            wr[k] = 0;
        }
        for (Py_ssize_t i = 0; i < g->kh; ++i) {
            Py_ssize_t row = p * g->sy + i - g->ph;
            if (row < 0 || row >= g->h)
                continue;
            for (Py_ssize_t j = 0; j < g->kw; ++j) {
                Py_ssize_t col = q * g->sx + j - g->pw;
                unsigned char t = tap_index[i * g->kw + j];
                const float *xr;
                if (col < 0 || col >= g->w)
                    continue;
                xr = x + ((n * g->h + row) * g->w + col) * c;
                for (Py_ssize_t k = 0; k < c; ++k) {
                    float v = xr[k], m = yr[k];
                    int take = (v > m) | ((v != v) & (m == m));
                    yr[k] = take ? v : m;
                    wr[k] = take ? t : wr[k];
                }
            }
        }
    }
}

/* The input gradient of image n of channels-last max pooling, tap by tap
 * in raster order, so that each input pixel sums its outputs' gradients in
 * the order of the channel-major loop (and of Chainer's col2im). */
CLONES
static void max_pool_grad_cl_image(const float *gy,
                                   const unsigned char *winner,
                                   const Tap *taps, Py_ssize_t count,
                                   float *gx, const Window *g, Py_ssize_t c,
                                   Py_ssize_t n) {
    float *image = gx + n * g->h * g->w * c;
    for (Py_ssize_t i = 0; i < g->h * g->w * c; ++i)
        image[i] = 0;
    for (const Tap *t = taps; t < taps + count; ++t)
        for (Py_ssize_t p = t->p0; p < t->p1; ++p)
            for (Py_ssize_t q = t->q0; q < t->q1; ++q) {
                Py_ssize_t o = ((n * g->oh + p) * g->ow + q) * c;
                const float *gyr = gy + o;
                const unsigned char *wr = winner + o;
                float *gxr = image + (p * g->sy * g->w + t->offset
                                      + q * g->sx) * c;
                for (Py_ssize_t k = 0; k < c; ++k)
                    gxr[k] += wr[k] == t->k ? gyr[k] : 0.0f;
            }
}

/* The [lo, hi) share of n items of this thread of an OpenMP team. */
static void share(Py_ssize_t n, Py_ssize_t *lo, Py_ssize_t *hi) {
#ifdef _OPENMP
    Py_ssize_t t = omp_get_thread_num(), k = omp_get_num_threads();
#else
    Py_ssize_t t = 0, k = 1;
#endif
    *lo = n * t / k;
    *hi = n * (t + 1) / k;
}

/* ---- arguments -------------------------------------------------------- */

/* PyArg "O&" converter body: a C-contiguous buffer of the struct format
 * `code` (float32 'f' or uint8 'B'), released on error. */
static int get_typed(PyObject *obj, Py_buffer *view, int flags, char code) {
    const char *f;
    if (obj == NULL) {
        PyBuffer_Release(view);
        return 1;
    }
    if (PyObject_GetBuffer(obj, view,
                           flags | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return 0;
    f = view->format;
    if (*f == '@' || *f == '=' || *f == (PY_LITTLE_ENDIAN ? '<' : '>'))
        ++f;
    if (f[0] != code || f[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "expected %s, got format '%s'",
                     code == 'f' ? "float32" : "uint8", view->format);
        PyBuffer_Release(view);
        return 0;
    }
    return Py_CLEANUP_SUPPORTED;
}

static int in_floats(PyObject *obj, void *view) {
    return get_typed(obj, view, PyBUF_SIMPLE, 'f');
}

static int out_floats(PyObject *obj, void *view) {
    return get_typed(obj, view, PyBUF_WRITABLE, 'f');
}

static int in_bytes(PyObject *obj, void *view) {
    return get_typed(obj, view, PyBUF_SIMPLE, 'B');
}

static int out_bytes(PyObject *obj, void *view) {
    return get_typed(obj, view, PyBUF_WRITABLE, 'B');
}

#define LEN(view) ((view).len / 4)

/* Releases `count` buffers; with `ok` 0, first raises a length error;
 * with `ok` negative, an error is already set. */
static PyObject *finish(Py_buffer *views, int count, int ok) {
    for (int i = 0; i < count; ++i)
        PyBuffer_Release(&views[i]);
    if (ok == 0)
        PyErr_SetString(PyExc_ValueError, "buffer lengths do not match");
    if (ok <= 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- module ----------------------------------------------------------- */

static PyObject *py_rmsprop_warmup(PyObject *self, PyObject *args) {
    Py_buffer v[4];
    double lr, mu1, mu2, eps, a_sgd, a_rms;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&O&dddddd:rmsprop_warmup",
                          out_floats, &v[0], in_floats, &v[1],
                          out_floats, &v[2], out_floats, &v[3],
                          &lr, &mu1, &mu2, &eps, &a_sgd, &a_rms))
        return NULL;
    ok = LEN(v[1]) == LEN(v[0]) && LEN(v[2]) == LEN(v[0])
         && LEN(v[3]) == LEN(v[0]);
    if (ok) {
        float *theta = v[0].buf, *g = v[1].buf, *m = v[2].buf,
              *delta = v[3].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (LEN(v[0]) >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(LEN(v[0]), &lo, &hi);
            rmsprop_loop(theta + lo, g + lo, m + lo, delta + lo, hi - lo,
                         (float)lr, (float)mu1, (float)mu2,
                         (float)(1 - mu2), (float)eps, (float)a_sgd, a_rms);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, 4, ok);
}

static PyObject *py_corrected_momentum_sgd(PyObject *self, PyObject *args) {
    Py_buffer v[3];
    double lr, mu;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&dd:corrected_momentum_sgd",
                          out_floats, &v[0], in_floats, &v[1],
                          out_floats, &v[2], &lr, &mu))
        return NULL;
    ok = LEN(v[1]) == LEN(v[0]) && LEN(v[2]) == LEN(v[0]);
    if (ok) {
        float *theta = v[0].buf, *g = v[1].buf, *buf = v[2].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (LEN(v[0]) >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(LEN(v[0]), &lo, &hi);
            momentum_loop(theta + lo, g + lo, buf + lo, hi - lo, (float)lr,
                          (float)mu);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, 3, ok);
}

static PyObject *py_weight_decay(PyObject *self, PyObject *args) {
    /* g, theta */
    Py_buffer v[2];
    double rate;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&d:weight_decay", out_floats, &v[0],
                          in_floats, &v[1], &rate))
        return NULL;
    ok = LEN(v[1]) == LEN(v[0]);
    if (ok) {
        float *g = v[0].buf;
        const float *theta = v[1].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (LEN(v[0]) >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(LEN(v[0]), &lo, &hi);
            decay_loop(g + lo, theta + lo, (float)rate, hi - lo);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, 2, ok);
}

/* Parses bn_forward's arguments (x, gamma, beta, eps, y, mean, var,
 * inv_std, relu) by `format` into v, eps and relu; sets *c (channels) and
 * *m (values per channel).  Whether the lengths fit (1 or 0), or -1 with
 * an error. */
static int bn_forward_args(PyObject *args, const char *format, Py_buffer *v,
                           double *eps, int *relu, Py_ssize_t *c,
                           Py_ssize_t *m) {
    if (!PyArg_ParseTuple(args, format, in_floats, &v[0], in_floats, &v[1],
                          in_floats, &v[2], eps, out_floats, &v[3],
                          out_floats, &v[4], out_floats, &v[5],
                          out_floats, &v[6], relu))
        return -1;
    *c = LEN(v[1]);
    *m = *c ? LEN(v[0]) / *c : 0;
    return LEN(v[0]) == *c * *m && LEN(v[3]) == *c * *m && LEN(v[2]) == *c
           && LEN(v[4]) == *c && LEN(v[5]) == *c && LEN(v[6]) == *c;
}

/* The same for bn_backward's (x, gy, gamma, mean, inv_std, gx, ggamma,
 * gbeta[, beta]); *count is the number of buffers, 9 with beta, else 8. */
static int bn_backward_args(PyObject *args, const char *format, Py_buffer *v,
                            int *count, Py_ssize_t *c, Py_ssize_t *m) {
    v[8].obj = NULL;
    if (!PyArg_ParseTuple(args, format, in_floats, &v[0], in_floats, &v[1],
                          in_floats, &v[2], in_floats, &v[3],
                          in_floats, &v[4], out_floats, &v[5],
                          out_floats, &v[6], out_floats, &v[7],
                          in_floats, &v[8]))
        return -1;
    *count = v[8].obj != NULL ? 9 : 8;
    *c = LEN(v[2]);
    *m = *c ? LEN(v[0]) / *c : 0;
    return LEN(v[0]) == *c * *m && LEN(v[1]) == *c * *m
           && LEN(v[5]) == *c * *m && LEN(v[3]) == *c && LEN(v[4]) == *c
           && LEN(v[6]) == *c && LEN(v[7]) == *c
           && (*count == 8 || LEN(v[8]) == *c);
}

static PyObject *py_bn_forward(PyObject *self, PyObject *args) {
    /* x, gamma, beta, y, mean, var, inv_std */
    Py_buffer v[7];
    double eps;
    Py_ssize_t c, n;
    int ok, relu;
    (void)self;
    ok = bn_forward_args(args, "O&O&O&dO&O&O&O&p:bn_forward", v, &eps, &relu,
                         &c, &n);
    if (ok < 0)
        return NULL;
    if (ok) {
        const float *x = v[0].buf, *gamma = v[1].buf, *beta = v[2].buf;
        float *y = v[3].buf, *mean = v[4].buf, *var = v[5].buf,
              *inv_std = v[6].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (c * n >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(c, &lo, &hi);
            bn_forward_loop(x + lo * n, gamma + lo, beta + lo, eps, y + lo * n,
                            mean + lo, var + lo, inv_std + lo, relu, hi - lo,
                            n);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, 7, ok);
}

static PyObject *py_bn_backward(PyObject *self, PyObject *args) {
    /* x, gy, gamma, mean, inv_std, gx, ggamma, gbeta[, beta] */
    Py_buffer v[9];
    Py_ssize_t c, n;
    int ok, count;
    (void)self;
    ok = bn_backward_args(args, "O&O&O&O&O&O&O&O&|O&:bn_backward", v, &count,
                          &c, &n);
    if (ok < 0)
        return NULL;
    if (ok) {
        const float *x = v[0].buf, *gy = v[1].buf, *gamma = v[2].buf,
                    *mean = v[3].buf, *inv_std = v[4].buf,
                    *beta = count == 9 ? v[8].buf : NULL;
        float *gx = v[5].buf, *ggamma = v[6].buf, *gbeta = v[7].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (c * n >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(c, &lo, &hi);
            bn_backward_loop(x + lo * n, gy + lo * n, gamma + lo, mean + lo,
                             inv_std + lo, beta ? beta + lo : NULL,
                             gx + lo * n, ggamma + lo, gbeta + lo, hi - lo, n);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, count, ok);
}

static PyObject *py_bn_forward_cl(PyObject *self, PyObject *args) {
    /* x, gamma, beta, y, mean, var, inv_std */
    Py_buffer v[7];
    double eps;
    Py_ssize_t c, m, rows, chunks;
    double *part = NULL;
    float *coefs = NULL;
    int ok, relu;
    (void)self;
    ok = bn_forward_args(args, "O&O&O&dO&O&O&O&p:bn_forward_cl", v, &eps,
                         &relu, &c, &m);
    if (ok < 0)
        return NULL;
    ok = ok && m > 0;
    rows = bn_chunk_rows(c);
    chunks = (m + rows - 1) / rows;
    if (ok && !bn_scratch(c, chunks, 2, &part, &coefs))
        return finish(v, 7, -1);
    if (ok) {
        const float *x = v[0].buf, *gamma = v[1].buf, *beta = v[2].buf;
        float *y = v[3].buf, *mean = v[4].buf, *var = v[5].buf,
              *inv_std = v[6].buf, *scale = coefs, *ref = coefs + c;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < c; ++k)
            ref[k] = x[k];
#pragma omp parallel if (c * m >= PARALLEL_MIN)
        {
#pragma omp for schedule(static)
            for (Py_ssize_t i = 0; i < chunks; ++i)
                bn_stats_rows(x + i * rows * c, ref, part + 2 * c * i,
                              part + 2 * c * i + c,
                              i == chunks - 1 ? m - i * rows : rows, c);
#pragma omp for schedule(static)
            for (Py_ssize_t k = 0; k < c; ++k) {
                double s1, s2, d, sq, istd;
                bn_combine(part, chunks, c, k, &s1, &s2);
                d = s1 / m;
                sq = s2 / m - d * d;
                sq = sq > 0 ? sq : 0;
                istd = 1 / sqrt(sq + eps);
                mean[k] = (float)(ref[k] + d);
                var[k] = (float)sq;
                inv_std[k] = (float)istd;
                scale[k] = gamma[k] * inv_std[k];
            }
#pragma omp for schedule(static)
            for (Py_ssize_t i = 0; i < chunks; ++i)
                bn_affine_rows(x + i * rows * c, mean, scale, beta, relu,
                               y + i * rows * c,
                               i == chunks - 1 ? m - i * rows : rows, c);
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(part);
        PyMem_RawFree(coefs);
    }
    return finish(v, 7, ok);
}

static PyObject *py_bn_backward_cl(PyObject *self, PyObject *args) {
    /* x, gy, gamma, mean, inv_std, gx, ggamma, gbeta[, beta] */
    Py_buffer v[9];
    Py_ssize_t c, m, rows, chunks;
    double *part = NULL;
    float *coefs = NULL;
    int ok, count;
    (void)self;
    ok = bn_backward_args(args, "O&O&O&O&O&O&O&O&|O&:bn_backward_cl", v,
                          &count, &c, &m);
    if (ok < 0)
        return NULL;
    ok = ok && m > 0;
    rows = bn_chunk_rows(c);
    chunks = (m + rows - 1) / rows;
    if (ok && !bn_scratch(c, chunks, 3, &part, &coefs))
        return finish(v, count, -1);
    if (ok) {
        const float *x = v[0].buf, *gy = v[1].buf, *gamma = v[2].buf,
                    *mean = v[3].buf, *inv_std = v[4].buf,
                    *beta = count == 9 ? v[8].buf : NULL;
        float *gx = v[5].buf, *ggamma = v[6].buf, *gbeta = v[7].buf,
              *slope = coefs, *shift = coefs + c, *coef = coefs + 2 * c;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < c; ++k)
            coef[k] = gamma[k] * inv_std[k];
#pragma omp parallel if (c * m >= PARALLEL_MIN)
        {
#pragma omp for schedule(static)
            for (Py_ssize_t i = 0; i < chunks; ++i)
                bn_grad_rows(x + i * rows * c, gy + i * rows * c, mean, coef,
                             beta, part + 2 * c * i, part + 2 * c * i + c,
                             i == chunks - 1 ? m - i * rows : rows, c);
#pragma omp for schedule(static)
            for (Py_ssize_t k = 0; k < c; ++k) {
                double sum, dot;
                float gg, gb;
                bn_combine(part, chunks, c, k, &sum, &dot);
                gg = (float)(dot * inv_std[k]);
                gb = (float)sum;
                slope[k] = inv_std[k] * gg / m;
                shift[k] = gb / m;
                ggamma[k] = gg;
                gbeta[k] = gb;
            }
#pragma omp for schedule(static)
            for (Py_ssize_t i = 0; i < chunks; ++i)
                bn_grad_x_rows(x + i * rows * c, gy + i * rows * c, mean,
                               slope, shift, coef, beta, gx + i * rows * c,
                               i == chunks - 1 ? m - i * rows : rows, c);
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(part);
        PyMem_RawFree(coefs);
    }
    return finish(v, count, ok);
}

static PyObject *py_relu(PyObject *self, PyObject *args) {
    /* y, a[, b] */
    Py_buffer v[3];
    int count, ok;
    (void)self;
    v[2].obj = NULL;
    if (!PyArg_ParseTuple(args, "O&O&|O&:relu", out_floats, &v[0],
                          in_floats, &v[1], in_floats, &v[2]))
        return NULL;
    count = v[2].obj != NULL ? 3 : 2;
    ok = LEN(v[1]) == LEN(v[0]) && (count == 2 || LEN(v[2]) == LEN(v[0]));
    if (ok) {
        float *y = v[0].buf;
        const float *a = v[1].buf, *b = count == 3 ? v[2].buf : NULL;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (LEN(v[0]) >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(LEN(v[0]), &lo, &hi);
            relu_loop(y + lo, a + lo, b ? b + lo : NULL, hi - lo);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, count, ok);
}

/* out = loop(a, b) element by element, over three float32 buffers of one
 * length, parsed by `format`, on the OpenMP threads. */
static PyObject *elementwise(PyObject *args, const char *format,
                             void (*loop)(float *, const float *,
                                          const float *, Py_ssize_t)) {
    Py_buffer v[3];
    int ok;
    if (!PyArg_ParseTuple(args, format, out_floats, &v[0], in_floats, &v[1],
                          in_floats, &v[2]))
        return NULL;
    ok = LEN(v[1]) == LEN(v[0]) && LEN(v[2]) == LEN(v[0]);
    if (ok) {
        float *out = v[0].buf;
        const float *a = v[1].buf, *b = v[2].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel if (LEN(v[0]) >= PARALLEL_MIN)
        {
            Py_ssize_t lo, hi;
            share(LEN(v[0]), &lo, &hi);
            loop(out + lo, a + lo, b + lo, hi - lo);
        }
        Py_END_ALLOW_THREADS
    }
    return finish(v, 3, ok);
}

static PyObject *py_add(PyObject *self, PyObject *args) {
    /* y, a, b */
    (void)self;
    return elementwise(args, "O&O&O&:add", add_loop);
}

static PyObject *py_relu_grad(PyObject *self, PyObject *args) {
    /* gx, gy, y */
    (void)self;
    return elementwise(args, "O&O&O&:relu_grad", relu_grad_loop);
}

/* Whether x (P planes of h w floats), y and winner (P planes of out_h
 * out_w floats and bytes) and tap_index (kh kw bytes) fit the window (1 or
 * 0); sets *planes.  -1, with ValueError raised, for an invalid window. */
static int window_fits(const Py_buffer *x, const Py_buffer *y,
                       const Py_buffer *winner, const Py_buffer *tap_index,
                       const Window *g, Py_ssize_t *planes) {
    Py_ssize_t in = g->h * g->w, out = g->oh * g->ow;
    if (g->h < 1 || g->w < 1 || g->oh < 0 || g->ow < 0 || g->kh < 1
        || g->kw < 1 || g->sy < 1 || g->sx < 1 || g->kh * g->kw > 256) {
        PyErr_SetString(PyExc_ValueError, "invalid pooling window");
        return -1;
    }
    *planes = LEN(*x) / in;
    return LEN(*x) == *planes * in && LEN(*y) == *planes * out
           && winner->len == *planes * out && tap_index->len == g->kh * g->kw;
}

#define WINDOW_ARGS(g) &(g).h, &(g).w, &(g).oh, &(g).ow, &(g).kh, &(g).kw, \
    &(g).sy, &(g).sx, &(g).ph, &(g).pw

static PyObject *py_max_pool(PyObject *self, PyObject *args) {
    /* x, y, winner, tap_index */
    Py_buffer v[4];
    Window g;
    Py_ssize_t planes;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&O&nnnnnnnnnn:max_pool",
                          in_floats, &v[0], out_floats, &v[1],
                          out_bytes, &v[2], in_bytes, &v[3], WINDOW_ARGS(g)))
        return NULL;
    ok = window_fits(&v[0], &v[1], &v[2], &v[3], &g, &planes);
    if (ok > 0) {
        const float *x = v[0].buf;
        float *y = v[1].buf;
        unsigned char *winner = v[2].buf;
        Py_ssize_t in = g.h * g.w, out = g.oh * g.ow;
        Tap taps[256];
        Py_ssize_t count = taps_of(&g, v[3].buf, taps);
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) if (planes * in >= PARALLEL_MIN)
        for (Py_ssize_t k = 0; k < planes; ++k)
            max_pool_plane(x + k * in, y + k * out, winner + k * out, taps,
                           count, &g);
        Py_END_ALLOW_THREADS
    }
    return finish(v, 4, ok);
}

static PyObject *py_max_pool_grad(PyObject *self, PyObject *args) {
    /* gy, winner, tap_index, gx */
    Py_buffer v[4];
    Window g;
    Py_ssize_t planes;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&O&nnnnnnnnnn:max_pool_grad",
                          in_floats, &v[0], in_bytes, &v[1],
                          in_bytes, &v[2], out_floats, &v[3], WINDOW_ARGS(g)))
        return NULL;
    ok = window_fits(&v[3], &v[0], &v[1], &v[2], &g, &planes);
    if (ok > 0) {
        const float *gy = v[0].buf;
        const unsigned char *winner = v[1].buf;
        float *gx = v[3].buf;
        Py_ssize_t in = g.h * g.w, out = g.oh * g.ow;
        Tap taps[256];
        Py_ssize_t count = taps_of(&g, v[2].buf, taps);
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) if (planes * in >= PARALLEL_MIN)
        for (Py_ssize_t k = 0; k < planes; ++k)
            max_pool_grad_plane(gy + k * out, winner + k * out, gx + k * in,
                                taps, count, &g);
        Py_END_ALLOW_THREADS
    }
    return finish(v, 4, ok);
}

/* Whether channels-last x (N h w c), y and winner (N out_h out_w c) and
 * tap_index fit the window (1 or 0); sets *images.  -1 as window_fits. */
static int window_fits_cl(const Py_buffer *x, const Py_buffer *y,
                          const Py_buffer *winner,
                          const Py_buffer *tap_index, const Window *g,
                          Py_ssize_t c, Py_ssize_t *images) {
    Window planes = *g;
    Py_buffer xs = *x, ys = *y, ws = *winner;
    if (c < 1) {
        PyErr_SetString(PyExc_ValueError, "invalid number of channels");
        return -1;
    }
    xs.len /= c;
    ys.len /= c;
    ws.len /= c;
    return window_fits(&xs, &ys, &ws, tap_index, &planes, images) > 0
           && x->len == xs.len * c && y->len == ys.len * c
           && winner->len == ws.len * c ? 1
           : PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_max_pool_cl(PyObject *self, PyObject *args) {
    /* x, y, winner, tap_index, c */
    Py_buffer v[4];
    Window g;
    Py_ssize_t c, images;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&O&nnnnnnnnnnn:max_pool_cl",
                          in_floats, &v[0], out_floats, &v[1],
                          out_bytes, &v[2], in_bytes, &v[3], &c,
                          WINDOW_ARGS(g)))
        return NULL;
    ok = window_fits_cl(&v[0], &v[1], &v[2], &v[3], &g, c, &images);
    if (ok > 0) {
        const float *x = v[0].buf;
        float *y = v[1].buf;
        unsigned char *winner = v[2].buf;
        const unsigned char *tap_index = v[3].buf;
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) \
    if (LEN(v[0]) >= PARALLEL_MIN)
        for (Py_ssize_t r = 0; r < images * g.oh; ++r)
            max_pool_cl_row(x, y, winner, tap_index, &g, c, r / g.oh,
                            r % g.oh);
        Py_END_ALLOW_THREADS
    }
    return finish(v, 4, ok);
}

static PyObject *py_max_pool_grad_cl(PyObject *self, PyObject *args) {
    /* gy, winner, tap_index, gx, c */
    Py_buffer v[4];
    Window g;
    Py_ssize_t c, images;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "O&O&O&O&nnnnnnnnnnn:max_pool_grad_cl",
                          in_floats, &v[0], in_bytes, &v[1],
                          in_bytes, &v[2], out_floats, &v[3], &c,
                          WINDOW_ARGS(g)))
        return NULL;
    ok = window_fits_cl(&v[3], &v[0], &v[1], &v[2], &g, c, &images);
    if (ok > 0) {
        const float *gy = v[0].buf;
        const unsigned char *winner = v[1].buf;
        float *gx = v[3].buf;
        Tap taps[256];
        Py_ssize_t count = taps_of(&g, v[2].buf, taps);
        Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) \
    if (LEN(v[3]) >= PARALLEL_MIN)
        for (Py_ssize_t n = 0; n < images; ++n)
            max_pool_grad_cl_image(gy, winner, taps, count, gx, &g, c, n);
        Py_END_ALLOW_THREADS
    }
    return finish(v, 4, ok);
}

static PyMethodDef kernels_methods[] = {
    {"rmsprop_warmup", py_rmsprop_warmup, METH_VARARGS,
     "rmsprop_warmup(theta, g, m, delta, lr, mu1, mu2, eps, alpha_sgd, "
     "alpha_rmsprop): the RMSprop warm-up update in place."},
    {"corrected_momentum_sgd", py_corrected_momentum_sgd, METH_VARARGS,
     "corrected_momentum_sgd(theta, g, v, lr, momentum): momentum SGD with "
     "momentum correction in place."},
    {"weight_decay", py_weight_decay, METH_VARARGS,
     "weight_decay(g, theta, rate): g += rate theta in place."},
    {"bn_forward", py_bn_forward, METH_VARARGS,
     "bn_forward(x, gamma, beta, eps, y, mean, var, inv_std): batch "
     "normalization of the rows of x into y, with their statistics."},
    {"bn_backward", py_bn_backward, METH_VARARGS,
     "bn_backward(x, gy, gamma, mean, inv_std, gx, ggamma, gbeta): its "
     "gradients."},
    {"bn_forward_cl", py_bn_forward_cl, METH_VARARGS,
     "bn_forward_cl(x, gamma, beta, eps, y, mean, var, inv_std): batch "
     "normalization of the columns of x into y, with their statistics."},
    {"bn_backward_cl", py_bn_backward_cl, METH_VARARGS,
     "bn_backward_cl(x, gy, gamma, mean, inv_std, gx, ggamma, gbeta): its "
     "gradients."},
    {"relu", py_relu, METH_VARARGS,
     "relu(y, a[, b]): y = max(a + b, 0), or max(a, 0)."},
    {"relu_grad", py_relu_grad, METH_VARARGS,
     "relu_grad(gx, gy, y): gx = gy where y > 0, else 0."},
    {"add", py_add, METH_VARARGS, "add(y, a, b): y = a + b."},
    {"max_pool", py_max_pool, METH_VARARGS,
     "max_pool(x, y, winner, tap_index, h, w, out_h, out_w, kh, kw, sy, sx, "
     "ph, pw): max pooling of the planes of x, with the winning taps."},
    {"max_pool_grad", py_max_pool_grad, METH_VARARGS,
     "max_pool_grad(gy, winner, tap_index, gx, h, w, out_h, out_w, kh, kw, "
     "sy, sx, ph, pw): its input gradient."},
    {"max_pool_cl", py_max_pool_cl, METH_VARARGS,
     "max_pool_cl(x, y, winner, tap_index, c, h, w, out_h, out_w, kh, kw, "
     "sy, sx, ph, pw): max pooling of channels-last images."},
    {"max_pool_grad_cl", py_max_pool_grad_cl, METH_VARARGS,
     "max_pool_grad_cl(gy, winner, tap_index, gx, c, h, w, out_h, out_w, "
     "kh, kw, sy, sx, ph, pw): its input gradient."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "Single-pass float32 loops of the RMSprop warm-up and momentum SGD "
    "updates, of weight decay, of batch "
    "normalization over channel rows or columns, of ReLU and of max "
    "pooling of channel-major or channels-last activations.",
    -1, kernels_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__kernels(void) {
    return PyModule_Create(&kernels_module);
}
