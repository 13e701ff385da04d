/*
 * Element math: the one definition of what every elementwise op and every
 * reduction computes per element. Three consumers expand these lists:
 *
 *   - the cpu backend, with T = float or double (src/backend/cpu_kernels.c);
 *   - the reference, with T = double, rounding each result to the output
 *     variable's dtype afterwards (src/check/reference.c);
 *   - the CUDA kernels, with T = float or double (src/backend/kernels.cu).
 *
 * float16 and bfloat16 compute in T = float on both backends: operands
 * widened (exactly), the expression in float, the result rounded once to
 * the dtype, to nearest even (an overflow is an infinity, a NaN stays a
 * NaN). For +, -, *, / and max that is the dtype's correctly rounded
 * result (float's 24 bits >= 2 x 11 + 2: the double rounding is
 * harmless), so the reference's double rounded to the dtype is the same
 * value. scale's fma is the exception: rounded to float first, it can
 * land exactly on a midpoint of the dtype that the exact value is not on
 * (a product that is itself a midpoint plus a bias below float's
 * precision of it), and then ties to even where the reference rounds the
 * other way: one ulp, for about 1 in 26,000 (float16) and 1 in 1,500
 * (bfloat16) triples of random finite operands (tests/test_half.c
 * measures it), none of the conformance suite's.
 *
 * The expressions are written in the operands x, y (elements of the
 * inputs), s and b (the op's scale and bias attributes, converted to T
 * first, as the device converts them) and use only operators and the C99
 * math functions fma, fmax, fmin. In C the including file must include
 * <tgmath.h> first, so that they resolve to the float variants (fmaf,
 * fmaxf) for float operands; CUDA C++ resolves them by overloading. So each
 * op has exactly one rounding rule, stated here:
 *
 *   assign   x                       exact
 *   add      x + y                   one rounding to T
 *   sub      x - y                   one rounding to T
 *   mul      x * y                   one rounding to T
 *   div      x / y                   one rounding to T (IEEE division)
 *   max      fmax(x, y)              exact; a NaN loses to a number
 *   scale    fma(s, x, b)            one rounding to T (fused multiply-add)
 *
 * max follows fmax, as NCCL's float max reduction does (FuncMinMax uses
 * fmaxf/fminf): a NaN operand loses to a number, two NaNs give NaN.
 *
 * Reductions (collectives), folded over ranks in rank order by the cpu
 * backend and the reference (NCCL's order differs; results agree within
 * the check's tolerance, exactly for max and min). The cpu backend and
 * NCCL round at every step (in float16 and bfloat16 too: NCCL's __hadd is
 * a + b rounded once), the reference once at the end, which is the same
 * value on 2 ranks:
 *
 *   sum      a + b
 *   max      fmax(a, b)              as NCCL: a NaN loses to a number
 *   min      fmin(a, b)
 *   prod     a * b
 *   avg      a + b, of inputs first  NCCL's ncclAvg for floating point (its
 *            multiplied by 1/nranks  PreMulSum): each input times 1/nranks,
 *                                    both in the dtype, rounded, then summed
 *
 * This header has no dependencies; nothing here may call anything that is
 * not available both in C11 <tgmath.h> and in CUDA device code.
 */
#ifndef OVL_ELEMFN_H
#define OVL_ELEMFN_H

/* X(NAME, ARITY, EXPR): ARITY is the number of variable inputs. A new
 * elementwise op is one line here and one row in core/optable.c. */
#define OVL_EW_LIST(X)                                                        \
  X(ASSIGN, 1, (x))                                                           \
  X(ADD, 2, (x) + (y))                                                        \
  X(SUB, 2, (x) - (y))                                                        \
  X(MUL, 2, (x) * (y))                                                        \
  X(DIV, 2, (x) / (y))                                                        \
  X(MAX, 2, fmax((x), (y)))                                                   \
  X(SCALE, 1, fma((s), (x), (b)))

typedef enum {
#define OVL__EW_ENUM(name, arity, expr) OVL_EW_##name,
  OVL_EW_LIST(OVL__EW_ENUM)
#undef OVL__EW_ENUM
  OVL__EW_COUNT
} ovl__ew;

/* X(NAME, EXPR, PREMUL): the fold of two partial results a, b; PREMUL 1:
 * every input is first multiplied by 1/nranks (converted to the dtype),
 * rounded to the dtype. */
#define OVL_RED_LIST(X)                                                       \
  X(SUM, (a) + (b), 0)                                                        \
  X(MAX, fmax((a), (b)), 0)                                                   \
  X(MIN, fmin((a), (b)), 0)                                                   \
  X(PROD, (a) * (b), 0)                                                       \
  X(AVG, (a) + (b), 1)

typedef enum {
#define OVL__RED_ENUM(name, expr, premul) OVL_RED_##name,
  OVL_RED_LIST(OVL__RED_ENUM)
#undef OVL__RED_ENUM
  OVL__RED_COUNT
} ovl__redop;

#endif /* OVL_ELEMFN_H */
