/* float32 <-> float16 kernels of the float16-wire ring all-reduce.
 *
 * NumPy 1.23 converts between float16 and float32 one element at a time.
 * These loops do it eight values per instruction with F16C where the CPU
 * has it (chosen at import), and with portable bit manipulation otherwise;
 * both give the bits of NumPy's astype: round to nearest even, overflow to
 * inf, subnormals exact, NaN kept as NaN with its sign and payload
 * truncated (a payload that truncates to zero becomes 1).  max_abs uses
 * AVX2 where the CPU has it.  add_half
 * gives the bits of a float32 add of acc and half.astype(float32); of two
 * NaN operands it keeps acc's, as x86 does (NumPy's own loops differ on
 * that).  Setting
 * HALF_PRECISION_NO_F16C=1 before import forces the portable loops.
 *
 *     to_half(src, out)    out = float16(src)     src float32, out float16
 *     add_half(acc, half)  acc += float32(half)   acc float32, half float16
 *     to_float(src, out)   out = float32(src)     src float16, out float32
 *     to_float_scaled(src, out, scale)
 *                          out = float32(src) * scale (one float32 rounding)
 *     max_abs(src)         the largest |src[i]| of a float32 buffer (inf if
 *                          any element is inf or NaN; 0 if it is empty)
 *
 * Every argument is a C-contiguous buffer of the same length; the GIL is
 * released while looping.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define HALF_X86 1
#include <immintrin.h>
#endif

/* ---- portable conversions ------------------------------------------- */

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t float_to_half_bits(float value) {
    uint32_t f = float_bits(value);
    uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
    uint32_t a = f & 0x7fffffffu;
    if (a >= 0x7f800000u) {                  /* inf or NaN */
        uint16_t payload = (uint16_t)((a & 0x007fffffu) >> 13);
        if (a != 0x7f800000u && payload == 0)
            payload = 1;
        return sign | 0x7c00u | payload;
    }
    if (a >= 0x38800000u) {                  /* normal half, or overflow */
        /* add just under half an ulp, plus one when the kept lsb is odd */
        uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
        uint32_t h = (rounded >> 13) - (112u << 10);
        return sign | (uint16_t)(h >= 0x7c00u ? 0x7c00u : h);
    }
    if (a <= 0x33000000u)                    /* at most half of 2^-24 */
        return sign;
    {                                        /* subnormal half */
        uint32_t shift = 126u - (a >> 23);   /* 14 .. 24 */
        uint32_t m = (a & 0x007fffffu) | 0x00800000u;
        uint32_t q = m >> shift;
        uint32_t rest = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (q & 1u)))
            ++q;
        return sign | (uint16_t)q;
    }
}

static float half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x03ffu;
    if (e == 0x1fu)                          /* inf or NaN, payload kept */
        return bits_float(sign | 0x7f800000u | (m << 13));
    if (e == 0)                              /* zero or subnormal: exact */
        return bits_float(sign | float_bits((float)m * 0x1p-24f));
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

static void to_half_portable(const float *src, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        out[i] = float_to_half_bits(src[i]);
}

/* a + float32(h) with x86's NaN rule, whatever order a compiler adds in:
 * a NaN first operand wins, then a NaN second one, both made quiet. */
static float add_half_bits(float a, uint16_t h) {
    float b = half_bits_to_float(h);
    float sum = a + b;
    if (sum == sum)
        return sum;
    if (a != a)
        return bits_float(float_bits(a) | 0x00400000u);
    if (b != b)
        return bits_float(float_bits(b) | 0x00400000u);
    return sum;                              /* inf - inf */
}

static void add_half_portable(float *acc, const uint16_t *half,
                              Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        acc[i] = add_half_bits(acc[i], half[i]);
}

static void to_float_portable(const uint16_t *src, float *out,
                              Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        out[i] = half_bits_to_float(src[i]);
}

static void to_float_scaled_portable(const uint16_t *src, float *out,
                                     float scale, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i)
        out[i] = half_bits_to_float(src[i]) * scale;
}

/* The magnitude bits of a float order as unsigned integers, NaN above inf:
 * an integer maximum over them needs no floating-point compare. */
static uint32_t max_abs_bits_portable(const float *src, Py_ssize_t n) {
    uint32_t m = 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
        uint32_t a = float_bits(src[i]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m;
}

/* ---- F16C conversions ----------------------------------------------- */

#ifdef HALF_X86
/* F16C quiets signalling NaNs, NumPy does not: the (rare) NaN lanes of a
 * vector are redone with the portable conversion. */

__attribute__((target("f16c,avx")))
static void to_half_f16c(const float *src, uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        for (int j = 0; nan; ++j, nan >>= 1)
            if (nan & 1)
                out[i + j] = float_to_half_bits(src[i + j]);
    }
    to_half_portable(src + i, out + i, n - i);
}

__attribute__((target("f16c,avx")))
static void add_half_f16c(float *acc, const uint16_t *half, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(acc + i);
        __m256 sum = _mm256_add_ps(a, _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)(half + i))));
        int nan = _mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q));
        _mm256_storeu_ps(acc + i, sum);
        if (nan) {
            float before[8];
            _mm256_storeu_ps(before, a);
            for (int j = 0; nan; ++j, nan >>= 1)
                if (nan & 1)
                    acc[i + j] = add_half_bits(before[j], half[i + j]);
        }
    }
    add_half_portable(acc + i, half + i, n - i);
}

__attribute__((target("f16c,avx")))
static void to_float_f16c(const uint16_t *src, float *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(out + i, v);
        int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        for (int j = 0; nan; ++j, nan >>= 1)
            if (nan & 1)
                out[i + j] = half_bits_to_float(src[i + j]);
    }
    to_float_portable(src + i, out + i, n - i);
}

__attribute__((target("f16c,avx")))
static void to_float_scaled_f16c(const uint16_t *src, float *out,
                                 float scale, Py_ssize_t n) {
    Py_ssize_t i = 0;
    __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(v, s));
    }
    to_float_scaled_portable(src + i, out + i, scale, n - i);
}

__attribute__((target("avx2")))
static uint32_t max_abs_bits_avx2(const float *src, Py_ssize_t n) {
    Py_ssize_t i = 0;
    __m256i mask = _mm256_set1_epi32(0x7fffffff);
    __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 8));
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(a, mask));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(b, mask));
    }
    {
        uint32_t lanes[8], m;
        _mm256_storeu_si256((__m256i *)lanes, _mm256_max_epu32(m0, m1));
        m = max_abs_bits_portable(src + i, n - i);
        for (int j = 0; j < 8; ++j)
            m = lanes[j] > m ? lanes[j] : m;
        return m;
    }
}
#endif

static void (*to_half_loop)(const float *, uint16_t *, Py_ssize_t) =
    to_half_portable;
static void (*add_half_loop)(float *, const uint16_t *, Py_ssize_t) =
    add_half_portable;
static void (*to_float_loop)(const uint16_t *, float *, Py_ssize_t) =
    to_float_portable;
static void (*to_float_scaled_loop)(const uint16_t *, float *, float,
                                    Py_ssize_t) = to_float_scaled_portable;
static uint32_t (*max_abs_bits_loop)(const float *, Py_ssize_t) =
    max_abs_bits_portable;

/* ---- argument checks -------------------------------------------------- */

/* True when a buffer format string names the native type `code`. */
static int is_native_format(const char *format, char code) {
    if (format == NULL)
        return 0;
    if (*format == '@' || *format == '=')
        ++format;
#if PY_LITTLE_ENDIAN
    else if (*format == '<')
        ++format;
#else
    else if (*format == '>' || *format == '!')
        ++format;
#endif
    return format[0] == code && format[1] == '\0';
}

/* Gets a C-contiguous buffer of `code` items (4-byte 'f' or 2-byte 'e'),
 * raising ValueError naming `function` and `name` otherwise. */
static int get_buffer(PyObject *obj, Py_buffer *view, char code,
                      int writable, const char *function, const char *name) {
    const char *dtype = code == 'f' ? "float32" : "float16";
    Py_ssize_t itemsize = code == 'f' ? 4 : 2;
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s: %s must be a %sbuffer of %s, got %.100s",
                     function, name, writable ? "writable " : "", dtype,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (view->itemsize != itemsize || !is_native_format(view->format, code)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %s must hold %s (format '%c'), got format '%s' "
                     "with %zd-byte items", function, name, dtype, code,
                     view->format ? view->format : "B", view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if (!PyBuffer_IsContiguous(view, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be C-contiguous",
                     function, name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Gets both buffers of a kernel and checks that their lengths match. */
static int get_pair(PyObject *args, const char *function,
                    const char *first, char first_code, int first_writable,
                    const char *second, char second_code, int second_writable,
                    Py_buffer *a, Py_buffer *b, Py_ssize_t *n) {
    PyObject *a_obj, *b_obj;
    if (!PyArg_UnpackTuple(args, function, 2, 2, &a_obj, &b_obj))
        return -1;
    if (get_buffer(a_obj, a, first_code, first_writable, function, first) < 0)
        return -1;
    if (get_buffer(b_obj, b, second_code, second_writable, function,
                   second) < 0) {
        PyBuffer_Release(a);
        return -1;
    }
    *n = a->len / a->itemsize;
    if (b->len / b->itemsize != *n) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %s has %zd elements but %s has %zd", function,
                     first, *n, second, b->len / b->itemsize);
        PyBuffer_Release(a);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* ---- module ----------------------------------------------------------- */

static PyObject *py_to_half(PyObject *self, PyObject *args) {
    Py_buffer src, out;
    Py_ssize_t n;
    (void)self;
    if (get_pair(args, "to_half", "src", 'f', 0, "out", 'e', 1,
                 &src, &out, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    to_half_loop((const float *)src.buf, (uint16_t *)out.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *py_add_half(PyObject *self, PyObject *args) {
    Py_buffer acc, half;
    Py_ssize_t n;
    (void)self;
    if (get_pair(args, "add_half", "acc", 'f', 1, "half", 'e', 0,
                 &acc, &half, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    add_half_loop((float *)acc.buf, (const uint16_t *)half.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&acc);
    PyBuffer_Release(&half);
    Py_RETURN_NONE;
}

static PyObject *py_to_float(PyObject *self, PyObject *args) {
    Py_buffer src, out;
    Py_ssize_t n;
    (void)self;
    if (get_pair(args, "to_float", "src", 'e', 0, "out", 'f', 1,
                 &src, &out, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    to_float_loop((const uint16_t *)src.buf, (float *)out.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *py_to_float_scaled(PyObject *self, PyObject *args) {
    Py_buffer src, out;
    Py_ssize_t n;
    PyObject *pair;
    float scale;
    (void)self;
    if (PyTuple_GET_SIZE(args) != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "to_float_scaled takes (src, out, scale)");
        return NULL;
    }
    scale = (float)PyFloat_AsDouble(PyTuple_GET_ITEM(args, 2));
    if (scale == -1.0f && PyErr_Occurred())
        return NULL;
    pair = PyTuple_GetSlice(args, 0, 2);
    if (pair == NULL)
        return NULL;
    if (get_pair(pair, "to_float_scaled", "src", 'e', 0, "out", 'f', 1,
                 &src, &out, &n) < 0) {
        Py_DECREF(pair);
        return NULL;
    }
    Py_DECREF(pair);
    Py_BEGIN_ALLOW_THREADS
    to_float_scaled_loop((const uint16_t *)src.buf, (float *)out.buf, scale,
                         n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *py_max_abs(PyObject *self, PyObject *arg) {
    Py_buffer src;
    uint32_t bits;
    (void)self;
    if (get_buffer(arg, &src, 'f', 0, "max_abs", "src") < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    bits = max_abs_bits_loop((const float *)src.buf, src.len / 4);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    if (bits > 0x7f800000u)                  /* NaN reads as inf */
        bits = 0x7f800000u;
    return PyFloat_FromDouble(bits_float(bits));
}

static PyMethodDef half_methods[] = {
    {"to_half", py_to_half, METH_VARARGS,
     "to_half(src, out): out = float16(src), src float32, out float16."},
    {"add_half", py_add_half, METH_VARARGS,
     "add_half(acc, half): acc += float32(half), acc float32, "
     "half float16."},
    {"to_float", py_to_float, METH_VARARGS,
     "to_float(src, out): out = float32(src), src float16, out float32."},
    {"to_float_scaled", py_to_float_scaled, METH_VARARGS,
     "to_float_scaled(src, out, scale): out = float32(src) * scale, src "
     "float16, out float32."},
    {"max_abs", py_max_abs, METH_O,
     "max_abs(src): the largest magnitude in a float32 buffer, inf if it "
     "holds inf or NaN, 0.0 if empty."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef half_module = {
    PyModuleDef_HEAD_INIT, "_half",
    "float32 <-> float16 kernels of the float16-wire ring all-reduce, bit "
    "for bit as NumPy's astype; uses_f16c tells which loops run.",
    -1, half_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__half(void) {
    int f16c = 0;
    PyObject *module = PyModule_Create(&half_module);
    if (module == NULL)
        return NULL;
#ifdef HALF_X86
    {
        const char *off = getenv("HALF_PRECISION_NO_F16C");
        int portable = off != NULL && off[0] != '\0' && strcmp(off, "0") != 0;
        __builtin_cpu_init();
        f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")
               && !portable;
        if (__builtin_cpu_supports("avx2") && !portable)
            max_abs_bits_loop = max_abs_bits_avx2;
    }
    if (f16c) {
        to_half_loop = to_half_f16c;
        add_half_loop = add_half_f16c;
        to_float_loop = to_float_f16c;
        to_float_scaled_loop = to_float_scaled_f16c;
    }
#endif
    if (PyModule_AddObject(module, "uses_f16c", PyBool_FromLong(f16c)) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
