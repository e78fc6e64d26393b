/* migc CPU runtime: the elementwise kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals). */
#ifndef MG_RT_ELEMENTWISE_H
#define MG_RT_ELEMENTWISE_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
