/* f32 shift-reduce microkernel, 4 channels x 16 positions, scalar. */
#include <stdint.h>

#include "ukernel.h"

#define CP_MR 4
#define CP_ELEM float
#define CP_FN cp_f32_sr_ukernel_4x16__scalar
#define CP_NR 16
#define CP_TO_FLOAT(e) (e)
#include "sr-scalar.h"
