/* Element types. Values equal ONNX TensorProto.DataType so that import is a cast. */
#ifndef MG_DTYPE_H
#define MG_DTYPE_H
#include <stddef.h>
#include <stdint.h>

/* X(NAME, onnx id, byte size, short name) */
#define MG_DTYPES(X)                  \
  X(UNDEFINED, 0, 0, "undefined")     \
  X(F32, 1, 4, "float32")             \
  X(U8, 2, 1, "uint8")                \
  X(I8, 3, 1, "int8")                 \
  X(U16, 4, 2, "uint16")              \
  X(I16, 5, 2, "int16")               \
  X(I32, 6, 4, "int32")               \
  X(I64, 7, 8, "int64")               \
  X(STRING, 8, 0, "string")           \
  X(BOOL, 9, 1, "bool")               \
  X(F16, 10, 2, "float16")            \
  X(F64, 11, 8, "float64")            \
  X(U32, 12, 4, "uint32")             \
  X(U64, 13, 8, "uint64")             \
  X(C64, 14, 8, "complex64")          \
  X(C128, 15, 16, "complex128")       \
  X(BF16, 16, 2, "bfloat16")

typedef enum {
#define X(name, id, size, str) MG_##name = id,
  MG_DTYPES(X)
#undef X
      MG_DTYPE_COUNT
} mg_dtype;

size_t mg_dtype_size(mg_dtype t);      /* 0 for undefined and string */
const char *mg_dtype_name(mg_dtype t); /* "float32"; "?" when out of range */
int mg_dtype_valid(int onnx_id);
int mg_dtype_is_float(mg_dtype t);
int mg_dtype_is_int(mg_dtype t); /* signed or unsigned integer, not bool */
int mg_dtype_is_signed(mg_dtype t);
/* Parse "float32", "f32", "int64"...; returns MG_UNDEFINED if unknown. */
mg_dtype mg_dtype_parse(const char *s);

/* One element of a numeric dtype at p (any alignment) as a double; 0 for
 * undefined, string and complex types. int64/uint64 beyond 2^53 round. */
double mg_load_f64(mg_dtype t, const void *p);
/* out[i] = mg_load_f64(t, p + i * size of t) for i < n: the same values, with
 * float32 (what weights nearly always are) not dispatched per element. */
void mg_load_f64_n(mg_dtype t, const void *p, int64_t n, double *out);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float mg_f16_to_f32(uint16_t h);
uint16_t mg_f32_to_f16(float f);
float mg_bf16_to_f32(uint16_t h);
uint16_t mg_f32_to_bf16(float f);
#endif
