/* migc CPU runtime: float32 kernels that generated projects compile with.
 *
 * These files are copied into every generated project, so they are plain C99
 * (they build warning-free with -std=c99 -Wall -Wextra -Werror -pedantic under gcc
 * and clang), include nothing of migc, and need only libc and libm.
 *
 * Two rules hold for every function here, because model_run() must not allocate
 * and may be called from several threads on different models:
 *   - no kernel allocates: work space is a caller-provided `scratch` buffer whose
 *     size, in floats, comes from the matching *_scratch() function;
 *   - no kernel touches global state: there are no mutable globals.
 *
 * Scratch buffers may have any float alignment (kernels align inside them; the
 * sizes include the slack), must not overlap any input or output, and need not be
 * initialised. Their contents are undefined after a call.
 *
 * Paths, chosen at compile time; all share the packing and cache blocking:
 *   - __AVX2__ && __FMA__ (e.g. -mavx2 -mfma or -march=haswell and later): a 6x16
 *     register-tiled FMA micro-kernel, AVX2 depthwise rows and gemv;
 *   - other x86-64 (a plain `cc -O2`): a 4x8 SSE2 micro-kernel (SSE2 is part of
 *     x86-64, so no flag is needed), about a third of the AVX2 path's speed;
 *   - aarch64: an 8x8 NEON micro-kernel (NEON is part of AArch64: no flag);
 *   - anything else: a fixed-size 4x8 C micro-kernel that compilers vectorise.
 *   MG_RUNTIME_PORTABLE defined forces the plain C path on any target; the
 *   convolution's other loops are plain C on every path but AVX2.
 *
 * All matrices are row-major; all tensors are dense C order (NCHW). */
#ifndef MG_RUNTIME_H
#define MG_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ common */

/* Element types of the dtype-generic kernels. The values equal ONNX's
 * TensorProto.DataType, so generated code may write either. bool is one byte
 * holding 0 or 1; float16 and bfloat16 are stored as uint16_t bit patterns and
 * computed in float (rounded to nearest even on store). A string tensor
 * (MG_RT_STRING, only in model I/O and the string kernels) is an array of
 * `const char *`, each a NUL-terminated UTF-8 string; generated code plans 8
 * bytes per element (64-bit targets). */
typedef enum {
  MG_RT_F32 = 1, MG_RT_U8 = 2, MG_RT_I8 = 3, MG_RT_U16 = 4, MG_RT_I16 = 5,
  MG_RT_I32 = 6, MG_RT_I64 = 7, MG_RT_STRING = 8, MG_RT_BOOL = 9, MG_RT_F16 = 10,
  MG_RT_F64 = 11, MG_RT_U32 = 12, MG_RT_U64 = 13, MG_RT_BF16 = 16
} mg_rt_dtype;

/* Bytes per element of t (sizeof(const char *) for MG_RT_STRING); 0 for a value
 * that is not an mg_rt_dtype. */
size_t mg_rt_dtype_size(mg_rt_dtype t);
/* IEEE half and bfloat16 <-> float, round to nearest even, NaN kept. */
float mg_rt_f16_to_f32(uint16_t h);
uint16_t mg_rt_f32_to_f16(float f);
float mg_rt_bf16_to_f32(uint16_t h);
uint16_t mg_rt_f32_to_bf16(float f);
/* n float16 (or bfloat16) bit patterns at src (any alignment) widened to float32
 * at dst, exactly: how a model converted with --precision fp16|bf16 reads its
 * 16-bit weights just before the kernel that uses them. */
void mg_rt_expand_f16(float *dst, const void *src, size_t n);
void mg_rt_expand_bf16(float *dst, const void *src, size_t n);

/* A generated model as the runner sees it (one per model in a project; the
 * conformance runner links many). Shapes are static but for a symbolic batch and sequence. Functions return 0 on
 * success and a nonzero MG_RT_E* code otherwise. */
enum { MG_RT_OK = 0, MG_RT_EIO = 1, MG_RT_EFORMAT = 2, MG_RT_ENOMEM = 3, MG_RT_EARG = 4,
       MG_RT_EUNSUPPORTED = 5, MG_RT_EDEVICE = 6, MG_RT_ELAYOUT = 7 };
typedef struct {
  const char *name;        /* as in the ONNX graph */
  mg_rt_dtype dtype;
  int rank;
  const int64_t *shape;    /* rank dims */
  size_t bytes;            /* element size times element count (the most, for an
                              output of run-time length; see output_dims) */
} mg_rt_io;
/* Called by a model's run_trace after each node with that node's output (what
 * describes it; data is valid only during the call). Activations fused into their
 * producer are reported once, under the activation's output name. */
typedef void (*mg_rt_trace_fn)(void *ctx, const mg_rt_io *what, const void *data);
typedef struct {
  const char *name;        /* model name, for --model in multi-model runners */
  int n_inputs, n_outputs;
  const mg_rt_io *inputs, *outputs;
  size_t instance_size;    /* sizeof the model's model_t */
  /* weights_path NULL: the embedded weights (error if the project has none). */
  int (*init)(void *instance, const char *weights_path);
  int (*run)(void *instance, const void *const *inputs, void *const *outputs);
  void (*release)(void *instance);
  /* run, calling trace(ctx, ...) after every node (trace may be NULL) */
  int (*run_trace)(void *instance, const void *const *inputs, void *const *outputs, mg_rt_trace_fn trace,
                   void *ctx);
  /* The dims (outputs[output].rank of them) of an output after the last
   * successful run: its static shape, except for an output whose length is only
   * known at run time (StringNormalizer dropping stopwords), which holds
   * at most outputs[output].bytes and is dense in the shape reported here. */
  const int64_t *(*output_dims)(void *instance, int output);
  /* Runs the model on n threads from now on (NULL: one thread only). */
  int (*set_threads)(void *instance, int n);
  /* A symbolic batch: n_dims is 1 and dim_names[0] its name (0 and NULL: static
   * shapes). An input i with in_batch[i] (an output j with out_batch[j]) has it as
   * its leading axis; its shape and bytes above are those of batch 1. init,
   * run and run_trace above work at batch 1; init_dims takes the largest
   * batch the instance will run (max_dims[0] >= 1), run_dims the actual one
   * (1 <= dims[0] <= that maximum, else MG_RT_EARG), with buffers of dims[0]
   * times those bytes. output_dims then reports the actual batch. */
  int n_dims;
  const char *const *dim_names;
  const char *in_batch, *out_batch;
  int (*init_dims)(void *instance, const char *weights_path, const int64_t *max_dims);
  int (*run_dims)(void *instance, const int64_t *dims, const void *const *inputs, void *const *outputs);
  /* And a symbolic sequence (n_dims 2, dims[1] its length; NULL: none): its axis
   * in each input and output (-1: none); their shapes and bytes above are at the
   * shortest length the model takes. */
  const signed char *in_seq, *out_seq;
} mg_rt_model;

/* The checksum of a weights file's payload (FNV-1a over little-endian 64-bit
 * words, then the tail bytes), identical on every platform. */
uint64_t mg_rt_hash(const void *data, size_t n);

/* Text for an MG_RT_E* code. */
const char *mg_rt_strerror(int code);

/* Returns a static string naming the compiled path and its micro-tile MRxNR:
 * "avx2-fma 6x16", "sse2 4x8", "neon 8x8" or "portable 4x8", for logs and
 * benchmarks. */
const char *mg_runtime_path(void);

/* Splits n items into `parts` contiguous ranges and gives range `part`: [*b, *e).
 * Every range starts on a multiple of `align` (a kernel's vector or tile width, so
 * a part runs the same loops over its items as the whole call), and none is a
 * single item when align > 1 (a one-column product would take SGEMM's
 * matrix-vector path, whose sums are ordered otherwise). The threaded kernels'
 * common splitter. */
void mg_split_range(int n, int parts, int part, int align, int *b, int *e);

/* ---------------------------------------------------------------- SGEMM */

/* Number of floats of scratch that mg_sgemm(M, N, K, ...) needs. Monotonic in each
 * argument, so the maximum over a model's calls sizes one shared buffer. Returns 0
 * for calls that need none (M, N or K <= 0, or the packing-free M == 1 / N == 1
 * paths still fit in what this returns). */
size_t mg_sgemm_scratch(int M, int N, int K);

/* C = alpha * op(A) * op(B) + beta * C, single precision, row-major.
 *   op(A) is M x K: A[i*lda + k] when transA == 0, A[k*lda + i] when transA != 0
 *        (so lda >= K, resp. lda >= M);
 *   op(B) is K x N: B[k*ldb + j] when transB == 0, B[j*ldb + k] when transB != 0
 *        (so ldb >= N, resp. ldb >= K);
 *   C is M x N: C[i*ldc + j], ldc >= N.
 * beta == 0 means C is write-only: its old contents (even NaN) are not read.
 * K == 0 or alpha == 0 gives C = beta * C. C must not overlap A, B or scratch.
 * scratch holds at least mg_sgemm_scratch(M, N, K) floats.
 * Accumulation is in float (FMA where the path has it), blocked over K, so results
 * differ from a sequential sum by rounding only. */
void mg_sgemm(int M, int N, int K, float alpha, const float *A, int lda, int transA,
              const float *B, int ldb, int transB, float beta, float *C, int ldc,
              float *scratch);
/* Part t of n (0 <= t < n) of mg_sgemm: a contiguous share of C's rows (or, where
 * mg_sgemm computes C^T, of its columns), whole micro-tiles each, with its own
 * scratch of mg_sgemm_scratch(M, N, K) floats. The n parts together write C once,
 * exactly the bits mg_sgemm gives, for any n. */
void mg_sgemm_part(int M, int N, int K, float alpha, const float *A, int lda, int transA,
                   const float *B, int ldb, int transB, float beta, float *C, int ldc,
                   float *scratch, int t, int n);

/* Writes row k of a K x N matrix B, columns j0 .. j0 + n - 1, to out[0 .. n):
 * the producer of mg_sgemm_rows' B, e.g. an im2col that never materialises. */
typedef void (*mg_sgemm_row_fn)(const void *ctx, int k, int j0, int n, float *out);

/* C = A * B (alpha 1, beta 0: C is write-only) with A M x K row-major (lda >= K),
 * C M x N (ldc >= N) and B produced a row segment at a time by row(ctx, ...) while
 * it is packed, so B is never stored whole. Same blocking and micro-kernel as
 * mg_sgemm; scratch holds mg_sgemm_rows_scratch(M, N, K) floats. */
void mg_sgemm_rows(int M, int N, int K, const float *A, int lda, mg_sgemm_row_fn row,
                   const void *ctx, float *C, int ldc, float *scratch);
size_t mg_sgemm_rows_scratch(int M, int N, int K);

/* Prepared weights. A matrix A that is the same on every call (a convolution's or a
 * Winograd layer's weights) is packed once, at conversion, into the panel order
 * the micro-kernel reads, so no call repacks it. Layout version MG_RT_PACK_VERSION:
 * K is split into blocks of kcb = ceil(K / ceil(K / MG_RT_PACK_KC)) columns; block
 * after block, the rows go in panels of mr (zero rows past M), each panel kc
 * groups of the mr values of one column. mr is recorded with the weights (it is
 * the conversion's choice, normally the MR of the machine it ran on); a runtime
 * whose micro-kernel has another MR still computes the same product, repacking
 * each block from this layout. A change to this layout must change
 * MG_RT_PACK_VERSION: generated code checks it at init (MG_RT_ELAYOUT). */
#ifndef MG_RT_PACK_VERSION /* defined otherwise only to test the init check */
#define MG_RT_PACK_VERSION 1
#endif
#define MG_RT_PACK_KC 256
/* The compiled micro-kernel's MR (see mg_runtime_path), and MG_RT_PACK_VERSION as
 * compiled into the runtime. */
int mg_sgemm_mr(void);
int mg_sgemm_pack_version(void);
/* Floats of a prepared M x K matrix with panels of mr rows. */
size_t mg_sgemm_packed_floats(int M, int K, int mr);
/* Writes the prepared layout of A (M x K row-major, lda >= K) with mr-row panels to
 * dst (mg_sgemm_packed_floats(M, K, mr) floats). */
void mg_sgemm_pack(int M, int K, const float *A, int lda, int mr, float *dst);
/* Where element (i, k) of a prepared M x K matrix with mr-row panels lies, in floats. */
size_t mg_sgemm_packed_index(int M, int K, int mr, int i, int k);
/* An epilogue of mg_sgemm_packed: called once for each block of C as soon as
 * its values are final (c: element (i0, j0) of C, m rows of n values, rows ldc
 * apart), while the block is still in L1, to transform it in place. */
typedef void (*mg_sgemm_done_fn)(const void *ctx, float *c, int i0, int j0, int m, int n, int ldc);
/* C = A * B (alpha 1, beta 0: C write-only), A prepared by mg_sgemm_pack with pmr,
 * B either K x N row-major (ldb >= N; row NULL) or produced row by row by
 * row(ctx, ...) as in mg_sgemm_rows (then B is unused). C is M x N, ldc >= N.
 * done, when not NULL, is called with dctx on every block of C once final (every
 * element exactly once). scratch holds mg_sgemm_packed_scratch(M, N, K) floats. */
void mg_sgemm_packed(int M, int N, int K, const float *PA, int pmr, const float *B, int ldb,
                     mg_sgemm_row_fn row, const void *ctx, float *C, int ldc, float *scratch,
                     mg_sgemm_done_fn done, const void *dctx);
size_t mg_sgemm_packed_scratch(int M, int N, int K);
/* The compiled micro-kernel's panel width NR: the B panels it reads in place. */
int mg_sgemm_nr(void);
/* C = A * B + beta * C (alpha 1), B a constant K x N matrix prepared at conversion:
 * mg_sgemm_pack of B^T (N x K) with panels of pnr (then its panels are the
 * micro-kernel's B panels, read in place when pnr is mg_sgemm_nr(); another pnr is
 * repacked per call, same numbers). A is M x K row-major (lda >= K), C is M x N
 * (ldc >= N; beta 0 never reads it). scratch holds mg_sgemm_packed_scratch(M, N, K)
 * floats. */
void mg_sgemm_prepb(int M, int N, int K, const float *A, int lda, const float *PB, int pnr,
                    float beta, float *C, int ldc, float *scratch);
/* Part t of n of mg_sgemm_prepb: whole MR-row tiles of C, its own scratch of
 * mg_sgemm_packed_scratch(M, N, K) floats; the parts give mg_sgemm_prepb's bits. */
void mg_sgemm_prepb_part(int M, int N, int K, const float *A, int lda, const float *PB, int pnr,
                         float beta, float *C, int ldc, float *scratch, int t, int n);

/* ---------------------------------------------------------- activations */

/* The activations a convolution (or mg_bias_act) can apply to its result. The two
 * parameters a, b of mg_conv2d_params / mg_bias_act mean:
 *   MG_ACT_NONE         y
 *   MG_ACT_RELU         max(y, 0)
 *   MG_ACT_CLIP         min(max(y, a), b)           (Relu6 is a = 0, b = 6)
 *   MG_ACT_LEAKY_RELU   y < 0 ? a*y : y
 *   MG_ACT_HARDSIGMOID  max(0, min(1, a*y + b))     (ONNX: a = 0.2, b = 0.5)
 *   MG_ACT_HARDSWISH    y * max(0, min(1, y/6 + 1/2))
 *   MG_ACT_SIGMOID      1 / (1 + exp(-y))
 *   MG_ACT_SILU         y * sigmoid(y)
 *   MG_ACT_TANH         tanh(y)
 *   MG_ACT_GELU         y/2 * (1 + erf(y / sqrt 2))   (exact, ONNX approximate=none)
 *   MG_ACT_GELU_TANH    y/2 * (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))
 * NaN inputs stay NaN for NONE, RELU, CLIP, LEAKY_RELU and the transcendental ones. */
typedef enum {
  MG_ACT_NONE = 0,
  MG_ACT_RELU,
  MG_ACT_CLIP,
  MG_ACT_LEAKY_RELU,
  MG_ACT_HARDSIGMOID,
  MG_ACT_HARDSWISH,
  MG_ACT_SIGMOID,
  MG_ACT_SILU,
  MG_ACT_TANH,
  MG_ACT_GELU,
  MG_ACT_GELU_TANH
} mg_act;

/* y[c*plane + i] = act(y[c*plane + i] + bias[c]) for c < channels, i < n, in
 * place; rows are `plane` floats apart and n <= plane values of each are touched.
 * bias may be NULL (no bias). Used after SGEMM for Gemm/MatMul epilogues and by the
 * convolutions. */
void mg_bias_act(float *y, int channels, int n, int plane, const float *bias,
                 mg_act act, float a, float b);

/* ---------------------------------------------------------- convolution */

/* One 2-D convolution, ONNX Conv semantics (cross-correlation), float32, NCHW.
 * Shapes: x [N, C, H, W]; w [M, C/group, kh, kw]; bias [M] or NULL;
 *         y [N, M, OH, OW].
 * pad_t, pad_l, pad_b, pad_r are ONNX pads [t, l, b, r] (all begins, then all
 * ends), already resolved from auto_pad by the code generator. OH and OW must
 * equal mg_conv_out_dim(H, kh, stride_h, dil_h, pad_t, pad_b) and the same for W;
 * migc fills them at compile time, so the struct is usually a static const.
 * Preconditions (not checked at run time): every size >= 1, pads >= 0,
 * C % group == 0, M % group == 0, OH >= 1, OW >= 1. */
typedef struct {
  int N, C, H, W;          /* input */
  int M;                   /* output channels */
  int kh, kw;              /* kernel */
  int group;
  int stride_h, stride_w;
  int dil_h, dil_w;
  int pad_t, pad_l, pad_b, pad_r;
  int OH, OW;              /* output */
  mg_act act;              /* fused activation, applied after the bias */
  float act_a, act_b;      /* its parameters (see mg_act) */
  int prepared;            /* how w is laid out: 0 as ONNX has it, else the
                              mg_conv_prep its weights were prepared for */
  int prepared_mr;         /* the panel height they were prepared with */
} mg_conv2d_params;

/* Output size of one spatial axis: floor((in + pad_begin + pad_end
 * - dil*(k-1) - 1) / stride) + 1; 0 when the kernel does not fit. */
int mg_conv_out_dim(int in, int k, int stride, int dil, int pad_begin, int pad_end);

/* The strategy mg_conv2d takes for p in a runtime that compiles every strategy
 * (the dispatch below). A generated project compiles Winograd and depthwise
 * kernels only when one of its layers takes them: the planner asks this and
 * selects MG_RT_USE_CONV_WINOGRAD / MG_RT_USE_CONV_DEPTHWISE (mg_rt_select.h). */
typedef enum { MG_CONV_DEPTHWISE, MG_CONV_WINOGRAD, MG_CONV_POINTWISE, MG_CONV_IM2COL } mg_conv_kernel;
mg_conv_kernel mg_conv2d_kernel(const mg_conv2d_params *p);

/* Number of floats of scratch mg_conv2d(p, ...) needs: 0 for depthwise
 * convolutions, SGEMM packing space for pointwise (1x1, stride 1, no padding)
 * ones, for Winograd ones (below) the transformed weights (at most 4 MiB) and a
 * chunk of transformed input and products (about 2 MiB) plus SGEMM packing space,
 * and in general an im2col buffer of at most ~2 MiB (the output positions
 * are processed in column chunks) plus SGEMM packing space. */
size_t mg_conv2d_scratch(const mg_conv2d_params *p);

/* y = act(conv(x, w) + bias), see mg_conv2d_params for shapes. Dispatch:
 *   - depthwise (group == C, so one input channel per group, any multiplier
 *     M/C): a direct kernel, no scratch;
 *   - 3x3, stride 1, undilated, >= 8 channels per group in and out, >= 32 2x2
 *     output tiles: Winograd F(2x2, 3x3) (16 SGEMMs on transformed tiles);
 *   - 1x1, stride 1, no padding: SGEMM straight on x, no im2col;
 *   - otherwise: im2col of a chunk of output positions into scratch, then SGEMM.
 * y must not overlap x, w, bias or scratch. */
void mg_conv2d(const mg_conv2d_params *p, const float *x, const float *w,
               const float *bias, float *y, float *scratch);

/* Part t of n (0 <= t < n) of mg_conv2d(p, ...): a contiguous share of its output
 * channels (depthwise), tile rows (Winograd) or output positions (the SGEMM
 * paths); the n parts together write y once, each with its own scratch of
 * mg_conv2d_scratch(p) floats, and y holds exactly what mg_conv2d gives, bit for
 * bit, for any n. mg_conv2d_mt (mg_rt_pool.h) runs the parts on a pool. */
void mg_conv2d_part(const mg_conv2d_params *p, const float *x, const float *w,
                    const float *bias, float *y, float *scratch, int t, int n);

/* Prepared weights (see MG_RT_PACK_VERSION), made at conversion. A layer's
 * preparation (mg_conv2d_prep_kind, asked with p->prepared == 0):
 *   MG_CONV_PREP_NONE      w as it is: depthwise, or too few output positions for
 *                          a packed product to pay;
 *   MG_CONV_PREP_WINOGRAD  per group, the 16 planes of transformed kernels
 *                          G g G^T (Winograd F(2x2, 3x3)), each an Mg x Cg matrix
 *                          in the prepared layout. Transforming once lets layers
 *                          with few tiles (resnet's 7x7 stage) take Winograd too;
 *   MG_CONV_PREP_GEMM      per group, the Mg x (Cg*kh*kw) weight matrix in it.
 * With p->prepared and p->prepared_mr set, mg_conv2d_prepared_floats(p) is the
 * size of the prepared weights, mg_conv2d_prepare(p, w, out) writes them from the
 * ONNX weights w, and mg_conv2d reads w in that layout. */
typedef enum { MG_CONV_PREP_NONE = 0, MG_CONV_PREP_GEMM = 1, MG_CONV_PREP_WINOGRAD = 2 } mg_conv_prep;
mg_conv_prep mg_conv2d_prep_kind(const mg_conv2d_params *p);
size_t mg_conv2d_prepared_floats(const mg_conv2d_params *p);
void mg_conv2d_prepare(const mg_conv2d_params *p, const float *w, float *out);

#ifdef __cplusplus
}
#endif

/* The kernel families, one header and one .c file each. */
#include "mg_rt_elementwise.h"
#include "mg_rt_tensor.h"
#include "mg_rt_nn.h"
#include "mg_rt_misc.h"

#include "mg_rt_rnn.h"
#include "mg_rt_strings.h"
#include "mg_rt_dynamic.h"
#include "mg_rt_pool.h"
#include "mg_rt_int8.h"

#endif /* MG_RUNTIME_H */
