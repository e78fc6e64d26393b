/* migc CPU runtime: which kernels a translation unit compiles. This default
 * selects every kernel (the unit tests, a hand-made build, several models
 * sharing one runtime folder). A generated project replaces this file with one
 * that defines MG_RT_SELECT and MG_RT_USE_<KERNEL> for each kernel its model
 * calls, so that a small model does not compile every loop of a family: the
 * float32 binary rows are most of the elementwise family's compile time. A
 * kernel called but not selected computes NaN, never a plausible number. */
#ifndef MG_RT_SELECT_H
#define MG_RT_SELECT_H
#endif
